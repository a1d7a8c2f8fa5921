"""A switch on 127.0.0.1 (``p4gen.switch.udp``) and a job file for n workers on free UDP ports."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from p4gen.build import build
from p4gen.jobfile import job_rid, load_job
from p4gen.plan import Plan
from p4gen.spec import make_spec
from p4gen.switch.job_config import WorkerAddr, job_config
from p4gen.switch.model import SwitchModel
from p4gen.switch.udp import UdpSwitch
from p4gen.target import load_target


def free_udp_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_plan(out: Path, protocol: str = "switchml", elements: int = 64, slots: int = 64) -> Plan:
    spec = make_spec(protocol=protocol, slots=slots, elements_per_packet=elements, max_workers=8)
    return build(spec, load_target("bmv2"), out).plan


def write_job(path: Path, n: int, slot_count: int = 16) -> Path:
    lines = ["job = 1", "mgid = 1", "slot_base = 0", f"slot_count = {slot_count}", ""]
    for i, port in enumerate(free_udp_ports(n)):
        lines += ["[[workers]]", f"id = {i}", f"port = {i + 1}", f'mac = "02:00:00:00:00:{i + 1:02x}"',
                  'ip = "127.0.0.1"', f"udp_port = {port}", ""]
    path.write_text("\n".join(lines))
    return path


@contextlib.contextmanager
def udp_switch(plan: Plan, job_file: Path):
    """The job's switch on a free port of 127.0.0.1, served on a thread: yields the UdpSwitch."""
    job = load_job(job_file, plan)
    m = SwitchModel(plan)
    m.load_config(job_config(plan, job.job, [WorkerAddr(w.port, w.mac, w.ip, w.udp_port) for w in job.workers],
                             slot_base=job.slot_base, slot_count=job.slot_count, mgid=job.mgid,
                             rid_base=job_rid(plan, job.job, 0)))
    sw = UdpSwitch(m, ("127.0.0.1", 0))
    with sw:
        yield sw
