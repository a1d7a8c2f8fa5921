"""Programming the aggregating switch: the one place a job reaches the switch.

:func:`program` takes a switch node and one or more :class:`JobSpec` (jobs
that share the switch use disjoint slot ranges and multicast groups).  A node that
serves P4Runtime (``node.p4runtime`` is an address inside its namespace:
BMv2's ``simple_switch_grpc``) is restarted and programmed by ``p4gen.controller`` over
P4Runtime (see :meth:`~p4gen.testbed.nodes.BMv2Switch.load_jobs`); the controller runs inside the switch's namespace (``python -m
p4gen.testbed.program``), because the switch listens on that namespace's
loopback.  A node without one (the software data plane) gets the same
entries as a JSON control-plane config (:func:`json_config`) that it loads
at start.  Both paths write the same entries: ``workers`` and
``result_dst`` per worker (rid = 1 + job * max_workers + id, as the
controller numbers them), the job's multicast group, ``l2_forward`` for
every host and a flood group per port.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from p4gen.errors import P4genError
from p4gen.plan import Plan
from p4gen.switch.model import WorkerAddr, job_config
from p4gen.wire import ip as ip_int, mac as mac_int

from .errors import TestbedError


@dataclass(frozen=True)
class WorkerSpec:
    id: int
    port: int             # switch port towards the worker
    mac: str
    ip: str
    udp_port: int


@dataclass(frozen=True)
class JobSpec:
    job: int
    mgid: int
    slot_base: int
    slot_count: int
    workers: tuple[WorkerSpec, ...]
    hosts: tuple[tuple[str, int], ...] = ()     # (mac, port) of every host, for l2_forward
    ports: tuple[int, ...] = ()                 # every switch port, for the flood groups

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "JobSpec":
        d = json.loads(text)
        d["workers"] = tuple(WorkerSpec(**w) for w in d["workers"])
        d["hosts"] = tuple(tuple(h) for h in d["hosts"])
        d["ports"] = tuple(d["ports"])
        return cls(**d)


def rid_base(plan: Plan, job: int) -> int:
    return 1 + job * plan.params.max_workers


def json_config(plan: Plan, *specs: JobSpec) -> dict[str, Any]:
    """The control-plane config of the jobs ``specs`` for the software data plane's ``load_config``."""
    cfg: dict[str, Any] = {"tables": {}, "groups": {}}
    l2: dict[str, int] = {}
    ports: set[int] = set()
    for spec in specs:
        workers = [WorkerAddr(w.port, mac_int(w.mac), ip_int(w.ip), w.udp_port) for w in spec.workers]
        one = job_config(plan, spec.job, workers, slot_base=spec.slot_base, slot_count=spec.slot_count,
                         mgid=spec.mgid, rid_base=rid_base(plan, spec.job))
        for table, entries in one["tables"].items():
            cfg["tables"].setdefault(table, []).extend(entries)
        for mgid, replicas in one["groups"].items():
            if mgid in cfg["groups"]:
                raise TestbedError(f"job {spec.job}: multicast group {mgid} is taken by another job")
            cfg["groups"][mgid] = replicas
        for k, v in one.items():
            if k not in ("tables", "groups"):
                cfg.setdefault(k, v)
        l2.update(dict(spec.hosts))
        ports.update(spec.ports)
    cfg["tables"]["l2_forward"] = [{"match": {"dst_addr": m}, "action": "l2_unicast", "params": {"port": p}}
                                   for m, p in l2.items()]
    base = plan.params.flood_group_base
    for p in sorted(ports):
        cfg["groups"][str(base + p)] = [[q, 0] for q in sorted(ports) if q != p]
    return cfg


def program_p4runtime(build_dir: str | Path, specs: list[JobSpec], addr: str) -> str:
    """Push the pipeline and set the jobs up over P4Runtime at ``addr``; return a summary line."""
    from p4gen.controller.client import connect
    from p4gen.jobfile import Job, Worker
    from p4gen.controller.job_control import Controller
    from p4gen.controller.pipeline import load_build

    build = load_build(build_dir)
    lines = []
    with connect(addr, timeout=10.0) as conn:
        ctl = Controller(build, conn)
        ctl.push()
        for spec in specs:
            job = Job(spec.job, spec.mgid, spec.slot_base, spec.slot_count,
                      tuple(Worker(w.id, w.port, mac_int(w.mac), ip_int(w.ip), w.udp_port) for w in spec.workers),
                      source="testbed job")
            change = ctl.setup(job, reset=False)      # BMv2Switch restarts the switch for every programming:
                                                      # its registers are all zero, as it started
            lines.append(f"job {change.job}: {change.updates} updates, {change.workers} workers")
    return "; ".join(lines)


def program(node, *specs: JobSpec) -> None:
    """Program ``node`` (the aggregating switch) with the jobs ``specs``, by P4Runtime or by JSON config."""
    if not specs:
        raise TestbedError("program() needs at least one job")
    if getattr(node, "p4runtime", None):
        node.load_jobs(*specs)
    else:
        node.load_config(json_config(node.plan, *specs))


def main(argv: list[str] | None = None) -> int:
    """``python -m p4gen.testbed.program BUILD_DIR JOBS.json ADDR`` (run inside the switch's namespace)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m p4gen.testbed.program BUILD_DIR JOBS.json ADDR", file=sys.stderr)
        return 2
    try:
        doc = json.loads(Path(args[1]).read_text())
        specs = [JobSpec.from_json(json.dumps(d)) for d in (doc if isinstance(doc, list) else [doc])]
        print(program_p4runtime(args[0], specs, args[2]))
        return 0
    except (P4genError, ValueError, OSError) as exc:
        print(f"program: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
