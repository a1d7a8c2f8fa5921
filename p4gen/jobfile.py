"""The TOML job file: one aggregation job, its workers and its slot range.

::

    job = 1                      # required; fits the workers table's job key
    mgid = 1                     # multicast group of the results; default job + 1
    slot_base = 0                # first slot of the job; default 0
    slot_count = 64              # default: the plan's slots - slot_base
    switch_mac = "02:00:00:00:00:fe"   # optional; the address workers send to

    [[workers]]                  # one table per worker, 2..max_workers of them
    id = 0                       # 0..max_workers-1, unique
    port = 1                     # switch port the worker is attached to
    mac = "02:00:00:00:00:01"
    ip = "10.0.0.1"
    udp_port = 48864             # the worker's UDP source port

Every check that needs only the file and the plan runs in :func:`parse_job`,
before anything is written; checks against the jobs already on a switch are
the controller's.  Each failure is one line that starts with the file name.
The controller, the training hook (:mod:`p4gen.torch`) and the testbed all
read job files through this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import P4genError
from .fileread import parse_toml, read_text
from .p4runtime import codec
from .plan import Plan


class JobFileError(P4genError):
    """A job file is unreadable or invalid for the plan."""


_TOP = ("job", "mgid", "slot_base", "slot_count", "switch_mac", "workers")
_WORKER = ("id", "port", "mac", "ip", "udp_port")


@dataclass(frozen=True)
class Worker:
    id: int
    port: int
    mac: int
    ip: int
    udp_port: int


@dataclass(frozen=True)
class Job:
    job: int
    mgid: int
    slot_base: int
    slot_count: int
    workers: tuple[Worker, ...]
    switch_mac: int | None = None
    source: str = "job"

    def rid(self, plan: Plan, worker_id: int) -> int:
        return job_rid(plan, self.job, worker_id)


def job_rid(plan: Plan, job: int, worker_id: int) -> int:
    """Replication id of a job's worker: unique per (job, worker); ``result_dst`` maps it to the worker."""
    return 1 + job * plan.params.max_workers + worker_id


def _key_bits(plan: Plan, table: str, key: str) -> int:
    return next(k.bits for k in plan.table(table).keys if k.name == key)


def _param_bits(plan: Plan, action: str, param: str) -> int:
    return next(p.bits for p in plan.action(action).params if p.name == param)


def load_job(path: str | Path, plan: Plan) -> Job:
    p = Path(path)
    text = read_text(path, "job file", JobFileError, limit=1 << 20)
    return parse_job(parse_toml(text, p.name, JobFileError), plan, source=p.name)


def parse_job(doc: Mapping[str, Any], plan: Plan, source: str = "job") -> Job:
    """Validate a job document against the plan; raise JobFileError on the first problem."""

    def fail(msg: str) -> JobFileError:
        return JobFileError(f"{source}: {msg}")

    def integer(where: Mapping[str, Any], key: str, label: str, lo: int, hi: int, why: str,
                default: int | None = None) -> int:
        if key not in where:
            if default is None:
                raise fail(f"{label} is missing")
            value = default
        else:
            value = where[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{label}={value!r} must be an integer")
        if not lo <= value <= hi:
            raise fail(f"{label}={value} must be in {lo}..{hi} ({why})")
        return value

    unknown = sorted(set(doc) - set(_TOP))
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; known keys: {', '.join(_TOP)}")
    p = plan.params
    slots, max_workers, flood_base = p.slots, p.max_workers, p.flood_group_base
    job_bits = _key_bits(plan, "workers", "job")
    job = integer(doc, "job", "job", 0, (1 << job_bits) - 1, f"the workers table's {job_bits}-bit job key")
    mgid = integer(doc, "mgid", "mgid", 1, flood_base - 1,
                   f"groups from {flood_base} are the per-port flood groups", default=min(job + 1, flood_base - 1))
    slot_base = integer(doc, "slot_base", "slot_base", 0, slots - 1, f"the plan has {slots} slots", default=0)
    slot_count = integer(doc, "slot_count", "slot_count", 1, slots, f"the plan has {slots} slots",
                         default=slots - slot_base)
    if slot_base + slot_count > slots:
        raise fail(f"slot_base={slot_base} + slot_count={slot_count} = {slot_base + slot_count} exceeds "
                   f"the plan's {slots} slots; the largest slot_count at slot_base={slot_base} is {slots - slot_base}")
    switch_mac = None
    if "switch_mac" in doc:
        try:
            switch_mac = codec.parse_mac(doc["switch_mac"])
        except ValueError:
            raise fail(f"switch_mac={doc['switch_mac']!r} is not a MAC address (six hex octets, "
                       f"e.g. 02:00:00:00:00:fe)") from None

    raw = doc.get("workers")
    if not isinstance(raw, list) or not raw or not all(isinstance(w, dict) for w in raw):
        raise fail("needs at least one [[workers]] table")
    if len(raw) > max_workers:
        raise fail(f"{len(raw)} workers exceed the plan's max_workers={max_workers}")
    port_bits = _key_bits(plan, "workers", "ingress_port")
    rid_bits = _key_bits(plan, "result_dst", "rid")
    workers: list[Worker] = []
    for i, w in enumerate(raw):
        label = f"workers[{i}]"
        unknown = sorted(set(w) - set(_WORKER))
        if unknown:
            raise fail(f"{label} has an unknown key {unknown[0]!r}; known keys: {', '.join(_WORKER)}")
        wid = integer(w, "id", f"{label}.id", 0, max_workers - 1, f"the plan's max_workers={max_workers}")
        port = integer(w, "port", f"{label}.port", 0, (1 << port_bits) - 1, f"{port_bits}-bit switch ports")
        udp = integer(w, "udp_port", f"{label}.udp_port", 1, 65535, "a UDP port")
        for key in ("mac", "ip"):
            if key not in w:
                raise fail(f"{label}.{key} is missing")
        try:
            mac = codec.parse_mac(w["mac"])
        except ValueError:
            raise fail(f"{label}.mac={w['mac']!r} is not a MAC address (six hex octets, e.g. 02:00:00:00:00:01)") \
                from None
        try:
            ip = codec.parse_ipv4(w["ip"])
        except ValueError:
            raise fail(f"{label}.ip={w['ip']!r} is not a dotted-quad IPv4 address") from None
        for j, o in enumerate(workers):
            if o.id == wid:
                raise fail(f"{label}.id={wid} repeats workers[{j}].id")
            if (o.port, o.ip, o.udp_port) == (port, ip, udp):
                raise fail(f"{label} repeats workers[{j}]'s port {port}, ip {w['ip']} and udp_port {udp}; "
                           f"the switch could not tell them apart")
            if o.mac == mac and o.port != port:
                raise fail(f"{label}.mac={w['mac']} is on port {port} but workers[{j}] has it on port {o.port}")
        if switch_mac is not None and mac == switch_mac:
            raise fail(f"{label}.mac={w['mac']} is the switch_mac")
        workers.append(Worker(wid, port, mac, ip, udp))
    if len(raw) < 2:
        # a lone worker's every packet is the first of its round: the switch would never answer
        raise fail("has 1 worker; an aggregation job needs at least 2")
    top = job_rid(plan, job, max(w.id for w in workers))
    if top >= 1 << rid_bits:
        raise fail(f"job={job} gives replication id {top}, beyond the {rid_bits}-bit rid "
                   f"(rid = 1 + job * max_workers + worker id)")
    for name, value in (("slot_base", slot_base), ("slot_count", slot_count), ("mgid", mgid)):
        bits = _param_bits(plan, "set_worker", name)
        if value >> bits:
            raise fail(f"{name}={value} does not fit set_worker's {bits}-bit parameter")
    return Job(job, mgid, slot_base, slot_count, tuple(workers), switch_mac, source)
