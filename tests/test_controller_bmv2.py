"""The same controller against BMv2's simple_switch_grpc, where it is installed.

Needs simple_switch_grpc and p4c-bm2-ss (to compile the program into the
BMv2 JSON that is pushed as device config).  Control plane only: BMv2 runs
without interfaces, so no packets are sent; the software-switch tests cover
the packet side.  Register reset goes through simple_switch_CLI when it is
on PATH (P4Runtime cannot write BMv2 registers, PI issue #376).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from p4gen.build import build
from p4gen.controller import Controller, ControllerError, SwitchUnreachableError, connect, load_build, load_job
from p4gen.slotrows import job_rows

EXAMPLES = Path(__file__).resolve().parent.parent / "controller" / "examples"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("simple_switch_grpc") is None, reason="simple_switch_grpc is not on PATH"),
    pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                       reason="p4c-bm2-ss is not on PATH (needed to compile the BMv2 JSON pushed as device config)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("bmv2") / "bmv2-64"
    build(make_spec(slots=64), load_target("bmv2"), out, use_cache=False, compile_p4=True)
    return out


@pytest.fixture
def bmv2(tmp_path, request):
    """(P4Runtime address, Thrift port) of a simple_switch_grpc with no program; device id 0, or the
    test's indirect parameter."""
    grpc_port, thrift_port = free_port(), free_port()
    log = tmp_path / "simple_switch_grpc.log"
    device = str(getattr(request, "param", 0))
    with open(log, "wb") as fh:
        proc = subprocess.Popen(["simple_switch_grpc", "--no-p4", "--device-id", device, "--thrift-port",
                                 str(thrift_port), "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
                                stdout=fh, stderr=subprocess.STDOUT)
    addr = f"127.0.0.1:{grpc_port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                connect(addr, timeout=1).close()
                break
            except SwitchUnreachableError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"simple_switch_grpc did not open {addr} in 10 s; see {log}")
        yield addr, thrift_port
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_push_setup_counters_teardown_on_bmv2(build_dir, bmv2):
    addr, thrift_port = bmv2
    b = load_build(build_dir)
    assert b.device_config, "p4gen build --compile wrote no program.json"
    job = load_job(EXAMPLES / "job1.toml", b.plan)
    with connect(addr, election_id=2) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(job, thrift_port)
        st = ctl.state()
        assert sorted(st.jobs) == [1] and len(st.jobs[1].workers) == 4
        assert st.groups[job.mgid] == [(w.port, job.rid(b.plan, w.id)) for w in job.workers]
        assert all(v == (0, 0) for v in ctl.counters().values())
        ctl.teardown(1)
        st = ctl.state()
        assert not st.jobs and not st.result_dst and not st.l2
        if shutil.which("simple_switch_CLI"):
            assert ctl.reset_registers(thrift_port).startswith("simple_switch_CLI register_reset")
        else:
            with pytest.raises(ControllerError) as exc:
                ctl.reset_registers(thrift_port)
            assert "simple_switch_CLI is not on PATH" in str(exc.value)


@pytest.mark.parametrize("bmv2", [1], indirect=True)
def test_a_push_to_a_device_the_switch_does_not_run_says_to_pass_its_id(build_dir, bmv2, capsys):
    from p4gen.cli import main

    addr, _thrift = bmv2
    assert main(["ctl", "push", str(build_dir), "--addr", addr]) == 1
    assert capsys.readouterr().err == (
        f"p4gen: error: switch at {addr} has no device 0 (Error when trying to assign device): pass the id the "
        f"switch was started with (simple_switch_grpc --device-id) as --device-id\n")
    assert main(["ctl", "push", str(build_dir), "--addr", addr, "--device-id", "1"]) == 0
    assert capsys.readouterr().out == (           # p4c's P4Info names no package: the file is named
        f"pushed {build_dir}: P4Info p4info.p4c.txtpb (9 tables, 25 actions, 1 counters, 132 registers), device "
        f"config program.json, to switch at {addr} (device 1)\n")


def _bmv2_groups(thrift_port: int) -> dict[int, list[tuple[int, int]]]:
    """BMv2's own multicast groups (``mc_dump``): {mgid: sorted (port, rid) of every node}."""
    p = subprocess.run(["simple_switch_CLI", "--thrift-port", str(thrift_port)], input="mc_dump\n",
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    groups: dict[int, list[tuple[int, int]]] = {}
    mgid = None
    for line in p.stdout.splitlines():
        if m := re.match(r"\s*mgrp\((\d+)\)", line):
            mgid = int(m.group(1))
            groups[mgid] = []
        elif (m := re.search(r"rid=(\d+)\) -> \(ports=\[([0-9, ]*)\]", line)) and mgid is not None:
            groups[mgid] += [(int(q), int(m.group(1))) for q in m.group(2).split(",") if q.strip()]
    return {g: sorted(r) for g, r in groups.items()}


@pytest.mark.skipif(shutil.which("simple_switch_CLI") is None,
                    reason="simple_switch_CLI is not on PATH (needed to read BMv2's own multicast groups)")
def test_a_second_push_leaves_no_stale_multicast_groups_in_bmv2(build_dir, bmv2):
    addr, thrift_port = bmv2
    b = load_build(build_dir)
    job = load_job(EXAMPLES / "job1.toml", b.plan)
    for _ in range(2):                      # push and set up twice on one running switch
        with connect(addr, election_id=2) as conn:
            ctl = Controller(b, conn)
            ctl.push()
            ctl.setup(job, thrift_port)
            seen = ctl.state().groups       # P4Runtime's view
    # BMv2's replication engine itself: what P4Runtime shows, and nothing left from the first push
    assert _bmv2_groups(thrift_port) == seen
    assert seen[job.mgid] == sorted((w.port, job.rid(b.plan, w.id)) for w in job.workers)


def _cli(thrift_port: int, script: str) -> str:
    p = subprocess.run(["simple_switch_CLI", "--thrift-port", str(thrift_port)], input=script, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.skipif(shutil.which("simple_switch_CLI") is None,
                    reason="simple_switch_CLI is not on PATH (BMv2 registers are written through it)")
def test_setup_zeroes_exactly_the_jobs_slots_on_bmv2(build_dir, bmv2):
    """On BMv2 (no P4Runtime register writes) setup zeroes the job's slots through the Thrift CLI: a
    finished job's state in slots 0..31 is gone, another job's in slots 32..63 is as it was."""
    addr, thrift_port = bmv2
    b = load_build(build_dir)
    regs = {r.name: r for r in b.plan.registers}
    marks = {("chunk", 5): 77, ("chunk", 70): 78, ("worker_count", 63): 3, ("bitmap0", 12): 9, ("bitmap0", 40): 10,
             ("values0", 0): 5, ("values0", 127): 6}            # slot_copy 5, 63 and slot 12, values slot 0: job 1's
    with connect(addr, election_id=2) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        _cli(thrift_port, "".join(f"register_write P4genIngress.{n} {i} {v}\n" for (n, i), v in marks.items()))
        change = ctl.setup(load_job(EXAMPLES / "job1.toml", b.plan), thrift_port)         # slots 0..31
    n = sum(len(rows) for _r, rows in job_rows(b.plan, 0, 32))
    assert change.reset == f"its {n} register entries zeroed with simple_switch_CLI register_write on Thrift port {thrift_port}"
    out = _cli(thrift_port, "".join(f"register_read P4genIngress.{n} {i}\n" for (n, i) in marks))
    got = {(n, int(i)): int(v) for n, i, v in re.findall(r"P4genIngress\.(\w+)\[(\d+)\]= *(\d+)", out)}
    assert got == {("chunk", 5): 0, ("chunk", 70): 78, ("worker_count", 63): 0, ("bitmap0", 12): 0,
                   ("bitmap0", 40): 10, ("values0", 0): 0, ("values0", 127): 6}, out
    assert regs["values0"].entries == 128
