"""``p4gen testbed cleanup`` ends only what a dead owner left, and says what it left alone.

The leftovers here are plain ``sleep`` processes carrying a testbed mark and an owner record,
and work directories under /tmp with an ``owner`` file, each under a fresh network id; every
cleanup names that id (``--network``), so a run of these tests never touches another network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from p4gen.testbed import procs

P4GEN = [sys.executable, "-m", "p4gen.cli"]


def _fresh_id() -> str:
    while True:
        net_id = procs.new_id()
        if not procs.leftovers(net_id) and not any(d.name.startswith(net_id) for d in procs.workdirs()):
            return net_id


def _dead_record() -> str:
    p = subprocess.Popen(["sleep", "30"])
    rec = procs.owner_record(p.pid)
    p.kill()
    p.wait()
    return rec


def _leftover(net_id: str, owner: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in (procs.MARK, procs.OWNER)}
    env[procs.MARK] = net_id
    if owner is not None:
        env[procs.OWNER] = owner
    return subprocess.Popen(["sleep", "300"], env=env)


def _workdir(net_id: str, owner: str | None) -> Path:
    d = Path(f"/tmp/{net_id}-star2-test")
    d.mkdir()
    (d / "p4gen-s1.log").write_text("a log\n")
    if owner is not None:
        (d / procs.OWNER_FILE).write_text(owner + "\n")
    return d


@pytest.fixture
def leftovers():
    made: list = []
    yield made
    for m in made:
        if isinstance(m, Path):
            shutil.rmtree(m, ignore_errors=True)
        elif m.poll() is None:
            m.kill()
            m.wait()


def _cleanup(net_id: str) -> list[str]:
    out = subprocess.run(P4GEN + ["testbed", "cleanup", "--network", net_id], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout.splitlines()


def test_owner_record_tells_a_running_owner_from_a_dead_one_and_from_a_reused_pid():
    me = procs.owner_record()
    pid, start, ns = me.split(":")
    assert int(pid) == os.getpid() and start.isdigit() and ns.isdigit()
    assert procs.Owner(me).state() == "running"
    assert procs.Owner(_dead_record()).state() == "dead"
    assert procs.Owner(f"{pid}:{int(start) + 1}:{ns}").state() == "dead"       # same pid, a later process
    assert procs.Owner(f"{pid}:{start}:1").state() == "foreign"
    assert procs.Owner(None).state() == procs.Owner("junk").state() == "unrecorded"


def test_marked_env_and_workdir_record_this_process_as_owner():
    env = procs.marked_env("p4g0001", {procs.OWNER: "1:2:3", procs.MARK: "p4g9999", "X": "y"})
    assert (env[procs.MARK], env[procs.OWNER], env["X"]) == ("p4g0001", procs.owner_record(), "y")
    d = procs.make_workdir(_fresh_id(), "star2")
    try:
        assert (d / procs.OWNER_FILE).read_text() == procs.owner_record() + "\n"
        assert d in procs.workdirs()
    finally:
        shutil.rmtree(d)


def test_cleanup_ends_what_a_dead_owner_left(leftovers):
    net_id = _fresh_id()
    dead = _dead_record()
    left = _leftover(net_id, dead)
    d = _workdir(net_id, dead)
    leftovers += [left, d]
    lines = _cleanup(net_id)
    assert lines == [f"removed process {left.pid} ({net_id})", f"removed dir {d}",
                     "cleanup: 2 item(s) removed, 0 network(s) left alone"], lines
    assert left.wait(10) is not None and not d.exists()


def test_cleanup_leaves_a_live_owners_network_alone_and_says_so(leftovers):
    net_id = _fresh_id()
    owner = subprocess.Popen(["sleep", "300"])             # stands for the p4gen process that built the network
    rec = procs.owner_record(owner.pid)
    kids = [_leftover(net_id, rec), _leftover(net_id, rec)]
    d = _workdir(net_id, rec)
    leftovers += [owner, *kids, d]
    lines = _cleanup(net_id)
    assert lines == [f"left alone: network {net_id} (2 processes, {d}): its owner, pid {owner.pid} (sleep 300), "
                     f"is running", "cleanup: 0 item(s) removed, 1 network(s) left alone"], lines
    assert all(k.poll() is None for k in kids) and (d / "p4gen-s1.log").is_file()
    owner.kill()
    owner.wait()                                            # the owner dies: now they are leftovers
    lines = _cleanup(net_id)
    assert sorted(lines[:-1]) == sorted([f"removed process {kids[0].pid} ({net_id})",
                                         f"removed process {kids[1].pid} ({net_id})", f"removed dir {d}"]), lines
    assert all(k.wait(10) is not None for k in kids) and not d.exists()


def test_cleanup_leaves_what_has_no_owner_record_alone(leftovers):
    net_id = _fresh_id()
    left = _leftover(net_id, None)
    d = _workdir(net_id, None)
    leftovers += [left, d]
    lines = _cleanup(net_id)
    why = "no owner is recorded (a p4gen from before owners were recorded); end it by hand if it is yours"
    assert lines == [f"left alone: network {net_id} (1 process, {d}): {why}",
                     "cleanup: 0 item(s) removed, 1 network(s) left alone"], lines
    assert left.poll() is None and d.is_dir()


def test_cleanup_of_one_network_leaves_another_dead_owners_leftovers(leftovers):
    mine, other = _fresh_id(), _fresh_id()
    dead = _dead_record()
    a, b = _leftover(mine, dead), _leftover(other, dead)
    leftovers += [a, b]
    assert _cleanup(mine) == [f"removed process {a.pid} ({mine})",
                              "cleanup: 1 item(s) removed, 0 network(s) left alone"]
    assert a.wait(10) is not None and b.poll() is None
