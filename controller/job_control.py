"""Push, set up and tear down jobs, read counters, reset registers.

Everything written is derived from the Plan and the job file:

* ``workers``     (job, ingress_port, src_addr, src_port) -> set_worker(worker_id,
  word = id // bitmap_word_bits, mask = 1 << id % bitmap_word_bits, num_workers,
  slot_base, slot_count, mgid), one entry per worker;
* ``result_dst``  rid -> set_result_dst(mac, ip, udp_port), rid = 1 + job * max_workers + id;
* multicast group ``mgid``: one replica (port, rid) per worker;
* ``l2_forward``  worker MAC -> l2_unicast(port);
* flood groups   flood_group_base + p: every other worker port, for each port p that has workers.

Before a job's entries are written, every register entry of its slots is zeroed
(:meth:`Controller.reset_slots`: P4Runtime RegisterEntry writes on the software
switch, simple_switch_CLI on BMv2), so a job set up on the slots of a finished
one starts from the state a fresh switch has; the other jobs' entries are not
touched.

Existing jobs are read back from the switch (``workers``, ``result_dst``,
``l2_forward`` and the multicast groups), so two controllers or two runs
need no local state.  A batch that fails is rolled back (inserts deleted,
modified groups restored) before the error is raised, however it failed: the
controller reads the switch back and undoes whatever of the batch it finds
there, so a lost answer or a broken connection is rolled back too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from p4gen.emit.p4info import build_p4info
from p4gen.jobfile import Job, job_rid
from p4gen.p4runtime import codec
from p4gen.p4runtime.compare import p4info_diff
from p4gen.slotrows import job_rows

from . import bmv2
from .client import SwitchConnection
from .entities import Entry, PlanEntities, update
from .errors import ControllerError, JobConflictError, PipelineError, SwitchError, WriteError
from .pipeline import Build

RESET_BATCH = 1024            # RegisterEntry updates per Write when slots are zeroed (each well inside --timeout)

INSERT, MODIFY, DELETE = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE


@dataclass
class JobState:
    """A job as found on the switch."""
    job: int
    slot_base: int
    slot_count: int
    mgid: int
    workers: list[Entry] = field(default_factory=list)

    @property
    def slot_end(self) -> int:
        return self.slot_base + self.slot_count - 1


@dataclass
class SwitchView:
    """What the controller reads back from the switch: its jobs, result and L2 entries and groups."""
    jobs: dict[int, JobState]
    result_dst: dict[int, Entry]
    l2: dict[int, Entry]
    groups: dict[int, list[tuple[int, int]]]


@dataclass(frozen=True)
class Change:
    """What a setup or teardown wrote."""
    job: int
    updates: int
    workers: int
    slots: tuple[int, int]
    mgid: int
    reset: str = ""              # setup: how many of the job's register entries were zeroed, and how


class Controller:
    """Job control for one switch running one build."""

    def __init__(self, build: Build, conn: SwitchConnection):
        self.build = build
        self.plan = build.plan
        self.conn = conn
        self.ents = PlanEntities(build.plan)
        self.flood_base = self.plan.params.flood_group_base
        self.word_bits = self.plan.params.bitmap_word_bits

    # ------------------------------------------------------------ pipeline
    def push(self) -> None:
        """Install the build's pipeline.  The multicast groups of the pipeline it replaces are deleted
        first: simple_switch_grpc keeps them in its replication engine across a pipeline change while
        P4Runtime no longer shows them, so a job set up again would be replicated twice
        (p4lang/behavioral-model#891 shows the same for clone sessions)."""
        try:
            old = self.conn.read([self.ents.group(0)])
        except PipelineError:
            old = []                          # no pipeline yet: nothing to delete
        dels = [update(DELETE, self.ents.group(ent.packet_replication_engine_entry.multicast_group_entry
                                               .multicast_group_id))
                for ent in old if ent.WhichOneof("entity") == "packet_replication_engine_entry"
                and ent.packet_replication_engine_entry.WhichOneof("type") == "multicast_group_entry"]
        self.conn.write(dels)
        self.conn.set_pipeline(self.build.p4info, self.build.device_config)

    def check_pipeline(self) -> None:
        """Refuse to program a switch that runs another program than the plan's."""
        diff = p4info_diff(build_p4info(self.plan), self.conn.get_p4info(), strict=False)
        if diff:
            raise PipelineError(f"switch at {self.conn.addr} runs another program than {self.build.path}: "
                                f"its P4Info {diff}; run `p4gen ctl push {self.build.path}` first")

    # ------------------------------------------------------------ state
    def state(self) -> SwitchView:
        e = self.ents
        ents = self.conn.read([e.table_wildcard("workers"), e.table_wildcard("result_dst"),
                               e.table_wildcard("l2_forward"), e.group(0)])
        jobs: dict[int, JobState] = {}
        rdst: dict[int, Entry] = {}
        l2: dict[int, Entry] = {}
        groups: dict[int, list[tuple[int, int]]] = {}
        for ent in ents:
            kind = ent.WhichOneof("entity")
            if kind == "table_entry":
                entry = e.decode_table_entry(ent.table_entry)
                if entry.table == "workers" and entry.action == "set_worker":
                    q = entry.args
                    js = jobs.setdefault(entry.match["job"], JobState(entry.match["job"], q["slot_base"],
                                                                      q["slot_count"], q["mgid"]))
                    js.workers.append(entry)
                elif entry.table == "result_dst":
                    rdst[entry.match["rid"]] = entry
                elif entry.table == "l2_forward":
                    l2[entry.match["dst_addr"]] = entry
            elif kind == "packet_replication_engine_entry":
                pre = ent.packet_replication_engine_entry
                if pre.WhichOneof("type") == "multicast_group_entry":
                    mgid, reps = e.decode_group(pre.multicast_group_entry)
                    groups[mgid] = sorted(reps)          # a set of replicas: BMv2 reads them back reversed
        return SwitchView(jobs, rdst, l2, groups)

    def _flood_updates(self, ports: set[int], old_ports: set[int], groups) -> list[tuple[int, p4runtime_pb2.Entity,
                                                                                    list | None]]:
        """(type, entity, previous replicas) for the flood groups of ``ports`` (and removal of the others)."""
        out = []
        for p in sorted(ports):
            mgid = self.flood_base + p
            reps = [(q, 0) for q in sorted(ports) if q != p]
            if mgid not in groups:
                out.append((INSERT, self.ents.group(mgid, reps), None))
            elif sorted(groups[mgid]) != reps:
                out.append((MODIFY, self.ents.group(mgid, reps), groups[mgid]))
        for p in sorted(old_ports - ports):
            mgid = self.flood_base + p
            if mgid in groups:
                out.append((DELETE, self.ents.group(mgid), groups[mgid]))
        return out

    @staticmethod
    def _ports(st: SwitchView, skip_job: int | None = None) -> set[int]:
        return {w.match["ingress_port"] for j, js in st.jobs.items() if j != skip_job for w in js.workers}

    # ------------------------------------------------------------ setup / teardown
    def setup(self, job: Job, thrift_port: int = 9090, reset: bool = True) -> Change:
        """Set ``job`` up: its slots' register entries zeroed first, then its entries, the workers last.
        ``reset=False`` only for a switch known to have every register at zero (just started)."""
        self.check_pipeline()
        st = self.state()
        addr = self.conn.addr
        if job.job in st.jobs:
            raise JobConflictError(f"job {job.job} is already set up on the switch at {addr}; tear it down first")
        for other in st.jobs.values():
            if job.slot_base <= other.slot_end and other.slot_base <= job.slot_base + job.slot_count - 1:
                raise JobConflictError(
                    f"{job.source}: job {job.job} slots {job.slot_base}..{job.slot_base + job.slot_count - 1} "
                    f"overlap job {other.job} slots {other.slot_base}..{other.slot_end} on the switch at {addr}")
            if other.mgid == job.mgid:
                raise JobConflictError(f"{job.source}: mgid={job.mgid} is the multicast group of job {other.job} "
                                       f"on the switch at {addr}")
        if job.mgid in st.groups:
            raise JobConflictError(f"{job.source}: multicast group {job.mgid} already exists on the switch at {addr}")
        size = self.plan.table("workers").size
        used = sum(len(js.workers) for js in st.jobs.values())
        if used + len(job.workers) > size:
            raise JobConflictError(f"{job.source}: job {job.job} needs {len(job.workers)} workers entries; the "
                                   f"switch at {addr} holds {used} of the plan's {size}")
        e = self.ents
        ups: list[tuple[int, p4runtime_pb2.Entity, list | None]] = []
        for w in job.workers:
            rid = job_rid(self.plan, job.job, w.id)
            if rid in st.result_dst:
                raise JobConflictError(f"{job.source}: result_dst already holds rid {rid} (worker {w.id} of "
                                       f"job {job.job}) on the switch at {addr}")
            ups.append((INSERT, e.table_entry("result_dst", {"rid": rid}, "set_result_dst",
                                              {"dst_mac": w.mac, "dst_ip": w.ip, "dst_port": w.udp_port}), None))
        ups.append((INSERT, e.group(job.mgid, [(w.port, job_rid(self.plan, job.job, w.id)) for w in job.workers]),
                    None))
        old_ports = self._ports(st)
        ups += self._flood_updates(old_ports | {w.port for w in job.workers}, old_ports, st.groups)
        seen_macs = set()
        for w in job.workers:
            have = st.l2.get(w.mac)
            if have is not None:
                if have.action != "l2_unicast" or have.args["port"] != w.port:
                    raise JobConflictError(f"{job.source}: l2_forward sends {codec.format_mac(w.mac)} elsewhere "
                                           f"({have.action} {have.args}) on the switch at {addr}")
                continue
            if w.mac not in seen_macs:
                seen_macs.add(w.mac)
                ups.append((INSERT, e.table_entry("l2_forward", {"dst_addr": w.mac}, "l2_unicast",
                                                  {"port": w.port}), None))
        for w in job.workers:
            ups.append((INSERT, e.table_entry(
                "workers", {"job": job.job, "ingress_port": w.port, "src_addr": w.ip, "src_port": w.udp_port},
                "set_worker", {"worker_id": w.id, "word": w.id // self.word_bits, "mask": 1 << (w.id % self.word_bits),
                               "num_workers": len(job.workers), "slot_base": job.slot_base,
                               "slot_count": job.slot_count, "mgid": job.mgid}), None))
        # the slots may hold what a finished job left: chunk indices, bitmaps, counts and sums of its last
        # rounds, against which every packet of a new job starting at tsi 0 would be stale
        done = "its registers as the switch started"
        if reset:
            n, how = self.reset_slots(job.slot_base, job.slot_count, thrift_port)
            done = f"its {n} register entries zeroed with {how}"
        self._write(ups)
        return Change(job.job, len(ups), len(job.workers), (job.slot_base, job.slot_count), job.mgid, done)

    def teardown(self, job_id: int) -> Change:
        self.check_pipeline()
        st = self.state()
        js = st.jobs.get(job_id)
        if js is None:
            have = ", ".join(str(j) for j in sorted(st.jobs)) or "none"
            raise JobConflictError(f"job {job_id} is not set up on the switch at {self.conn.addr} (jobs there: {have})")
        e = self.ents
        ups: list[tuple[int, p4runtime_pb2.Entity, list | None]] = []
        for w in js.workers:
            ups.append((DELETE, e.table_entry("workers", w.match), w))
        if js.mgid in st.groups:
            ups.append((DELETE, e.group(js.mgid), st.groups[js.mgid]))
        rids = {job_rid(self.plan, job_id, w.args["worker_id"]) for w in js.workers}
        macs = set()
        for rid in sorted(rids):
            if rid in st.result_dst:
                ups.append((DELETE, e.table_entry("result_dst", {"rid": rid}), st.result_dst[rid]))
                macs.add(st.result_dst[rid].args["dst_mac"])
        kept_macs = {r.args["dst_mac"] for rid, r in st.result_dst.items() if rid not in rids}
        for mac in sorted(macs - kept_macs):
            if mac in st.l2:
                ups.append((DELETE, e.table_entry("l2_forward", {"dst_addr": mac}), st.l2[mac]))
        ups += self._flood_updates(self._ports(st, skip_job=job_id), self._ports(st), st.groups)
        self._write(ups)
        return Change(job_id, len(ups), len(js.workers), (js.slot_base, js.slot_count), js.mgid)

    def _write(self, ups: list[tuple[int, p4runtime_pb2.Entity, object]]) -> None:
        """Write a batch; if it fails in any way (rejected updates, a lost answer, a broken connection),
        put back every entity it touched, as read back from the switch, then raise the first error."""
        try:
            self.conn.write(update(t, ent) for t, ent, _ in ups)
        except ControllerError as exc:
            failed = {i for i, _c, _m in exc.failures} if isinstance(exc, WriteError) else set()
            problem = self._rollback(ups, failed)
            if problem is None:
                raise
            if isinstance(exc, WriteError):
                raise WriteError(f"{exc}\n  {problem}", exc.failures) from None
            raise type(exc)(f"{exc}; {problem}") from None

    def _touched(self) -> tuple[dict[tuple, Entry], dict[int, list[tuple[int, int]]]]:
        """The switch's entries of the tables a job writes, keyed (table, match), and its groups."""
        e = self.ents
        entries: dict[tuple, Entry] = {}
        groups: dict[int, list[tuple[int, int]]] = {}
        for ent in self.conn.read([e.table_wildcard(t) for t in ("workers", "result_dst", "l2_forward")]
                                  + [e.group(0)]):
            if ent.WhichOneof("entity") == "table_entry":
                entry = e.decode_table_entry(ent.table_entry)
                entries[(entry.table, tuple(sorted(entry.match.items())))] = entry
            else:
                mgid, reps = e.decode_group(ent.packet_replication_engine_entry.multicast_group_entry)
                groups[mgid] = sorted(reps)
        return entries, groups

    def _undo(self, ups, failed: set[int], entries, groups) -> list[p4runtime_pb2.Update]:
        """Updates that restore what ``ups`` changed, judged by what the switch holds now.

        Updates the switch reported as failed took no effect and are skipped.  Of the others, an
        inserted entity is deleted only if the switch holds exactly what this batch wrote, so an
        entry another controller wrote meanwhile with other contents stays.
        """
        e = self.ents
        out = []
        for i in reversed(range(len(ups))):
            if i in failed:
                continue
            kind, ent, old = ups[i]
            if ent.WhichOneof("entity") == "table_entry":
                mine = e.decode_table_entry(ent.table_entry) if kind == INSERT else old
                key = (mine.table, tuple(sorted(mine.match.items())))
                now = entries.get(key)
                if kind == INSERT and now is not None and (now.action, now.args) == (mine.action, mine.args):
                    out.append(update(DELETE, e.table_entry(mine.table, mine.match)))
                elif kind == DELETE and now is None:
                    out.append(update(INSERT, e.table_entry(old.table, old.match, old.action, old.args)))
                continue
            mgid, reps = e.decode_group(ent.packet_replication_engine_entry.multicast_group_entry)
            now = groups.get(mgid)
            if kind == INSERT and now == sorted(reps):
                out.append(update(DELETE, e.group(mgid)))
            elif kind == MODIFY and now == sorted(reps) and now != sorted(old):
                out.append(update(MODIFY, e.group(mgid, old)))
            elif kind == DELETE and now is None:
                out.append(update(INSERT, e.group(mgid, old)))
        return out

    def _rollback(self, ups, failed: set[int]) -> str | None:
        """Undo a failed batch; None when the switch is back as it was, else what is left."""
        try:
            undo = self._undo(ups, failed, *self._touched())
            if undo:
                try:
                    self.conn.write(undo)
                except WriteError:
                    pass                      # judged by the read-back below
            left = self._undo(ups, failed, *self._touched())
        except ControllerError as exc:
            return (f"the rollback could not read or write the switch ({exc}); it may hold part of this change: "
                    f"run `p4gen ctl teardown` for the job once the switch answers")
        if left:
            return f"the rollback left {len(left)} of this change's entities on the switch"
        return None

    # ------------------------------------------------------------ counters and registers
    def counters(self, name: str = "stats") -> dict[str, tuple[int, int]]:
        """Stat name -> (packets, bytes), in the plan's index order."""
        out = {n: (0, 0) for n in self.plan.counter(name).indices}
        for ent in self.conn.read([self.ents.counter_wildcard(name)]):
            c = ent.counter_entry
            out[self.ents.counter_index_name(name, c.index.index)] = (c.data.packet_count, c.data.byte_count)
        return out

    def reset_slots(self, base: int, count: int, thrift_port: int = 9090) -> tuple[int, str]:
        """Zero every register entry of slots ``base .. base + count - 1`` and no other; (how many, how).

        On the software switch: RegisterEntry MODIFY writes with the index set, in batches.  On BMv2,
        where P4Runtime cannot write registers (PI issue #376): ``simple_switch_CLI register_write``
        over the Thrift port.  A switch that answers UNIMPLEMENTED to the P4Runtime writes gets the
        Thrift path too."""
        rows = [(r.name, idx) for r, idx in job_rows(self.plan, base, count)]
        n = sum(len(idx) for _r, idx in rows)
        where = f"slots {base}..{base + count - 1}"
        if not self.build.device_config:
            regs = self.ents.registers
            flat = [(regs[name].id, i) for name, idx in rows for i in idx]
            try:
                for lo in range(0, len(flat), RESET_BATCH):
                    req = p4runtime_pb2.WriteRequest()
                    for rid, i in flat[lo:lo + RESET_BATCH]:
                        up = req.updates.add()
                        up.type = MODIFY
                        re_ = up.entity.register_entry
                        re_.register_id = rid
                        re_.index.index = i
                        re_.data.bitstring = b"\x00"
                    self.conn.write(req)
                return n, "P4Runtime RegisterEntry writes"
            except (WriteError, SwitchError) as exc:
                if not _unimplemented(exc):
                    raise
        if bmv2.thrift_cli() is None:
            raise ControllerError(
                f"switch at {self.conn.addr} cannot write registers over P4Runtime (BMv2: PI issue #376) and "
                f"{bmv2.CLI} is not on PATH, so the register entries of {where} cannot be zeroed; put it on PATH "
                f"(it needs the thrift Python package)")
        bmv2.register_zero_rows([(self.ents.fq_name("register", name), idx) for name, idx in rows], thrift_port,
                                self._thrift_ip())
        return n, f"{bmv2.CLI} register_write on Thrift port {thrift_port}"

    def _thrift_ip(self) -> str:
        """The switch's Thrift server is on the host its P4Runtime server is on."""
        return self.conn.addr.rpartition(":")[0].strip("[]") or "localhost"

    def reset_job(self, job_id: int, thrift_port: int = 9090) -> tuple[JobState, int, str]:
        """Zero the register entries of job ``job_id``'s slots (read from the switch), the other jobs' kept;
        (the job, how many entries, how)."""
        self.check_pipeline()
        jobs = self.state().jobs
        js = jobs.get(job_id)
        if js is None:
            have = ", ".join(str(j) for j in sorted(jobs)) or "none"
            raise JobConflictError(f"job {job_id} is not set up on the switch at {self.conn.addr} (jobs there: {have})")
        return (js, *self.reset_slots(js.slot_base, js.slot_count, thrift_port))

    def reset_registers(self, thrift_port: int = 9090) -> str:
        """Zero every register array of the plan; returns how it was done.

        A build without a device config runs on the software data plane, whose
        server implements RegisterEntry writes: one MODIFY per array with the
        index unset.  A build with BMv2's JSON runs on BMv2, where P4Runtime
        cannot touch registers (PI issue #376): ``simple_switch_CLI
        register_reset`` over the Thrift port does it.  A switch that answers
        UNIMPLEMENTED to the P4Runtime writes gets the Thrift path too.
        """
        self.check_pipeline()
        names = [r.name for r in self.plan.registers]
        if not self.build.device_config:
            try:
                self.conn.write(update(MODIFY, self.ents.register_zero(n)) for n in names)
                return f"P4Runtime RegisterEntry writes ({len(names)} registers)"
            except (WriteError, SwitchError) as exc:
                if not _unimplemented(exc):
                    raise
        if bmv2.thrift_cli() is None:
            raise ControllerError(
                f"switch at {self.conn.addr} cannot reset registers over P4Runtime (BMv2: PI issue #376) "
                f"and {bmv2.CLI} is not on PATH; run `{bmv2.CLI} --thrift-port {thrift_port}` with "
                f"register_reset for each register, or restart the switch")
        bmv2.register_reset([self.ents.fq_name("register", n) for n in names], thrift_port,
                            thrift_ip=self._thrift_ip())
        return f"{bmv2.CLI} register_reset on Thrift port {thrift_port} ({len(names)} registers)"


def _unimplemented(exc: WriteError | SwitchError) -> bool:
    """The switch answered UNIMPLEMENTED (BMv2 writes no register over P4Runtime): the Thrift path
    is taken instead; any other failure stands."""
    if isinstance(exc, WriteError):
        return all(code == "UNIMPLEMENTED" for _i, code, _m in exc.failures)
    return "UNIMPLEMENTED" in str(exc)
