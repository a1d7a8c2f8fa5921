"""Testbed on Mininet: SwitchML all-reduce through the software data plane (and BMv2 where installed).

Needs root, Mininet (the Python module and Debian's mnexec), ip/tc/ifconfig/ethtool and
p4gen.switch.dataplane; skips with the reason otherwise.  Every test checks, before and after,
that no network namespace, root interface or marked process is left (tests/leakcheck.py).
P4GEN_TESTBED_DATAPLANE names another module with the data plane's command line (for trying
the testbed against a data plane under development).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from needs import modules

modules("the testbed", "mininet")

from leakcheck import leaks, snapshot  # noqa: E402
from p4gen.testbed import harness, procs  # noqa: E402
from p4gen.testbed.cli import hand_start  # noqa: E402
from p4gen.testbed.errors import JobError, ReadinessError  # noqa: E402
from p4gen.testbed.mntopo import TwoLevelTopo  # noqa: E402
from p4gen.testbed.net import Network  # noqa: E402
from p4gen.testbed.nodes import SoftSwitch  # noqa: E402
from p4gen.testbed.plans import build_plan  # noqa: E402
from p4gen.testbed.topo import star  # noqa: E402

if os.environ.get("P4GEN_TESTBED_DATAPLANE"):
    SoftSwitch.module = os.environ["P4GEN_TESTBED_DATAPLANE"]

_why = procs.missing_requirements() or SoftSwitch.missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

SIZE = 65536          # elements: 256 packets per worker
P4GEN = [sys.executable, "-m", "p4gen.cli"]


@pytest.fixture(scope="module")
def clean_module():
    before = snapshot()
    yield
    assert leaks(before) == []


@pytest.fixture
def clean():
    before = snapshot()
    yield
    assert leaks(before) == []


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    return build_plan("switchml", 32, tmp_path_factory.mktemp("plans"))


@pytest.fixture(scope="module")
def net3(clean_module, plan_dir):
    with Network(star(3, mbit=100), switch=SoftSwitch, plan_dir=plan_dir) as net:
        yield net


def test_network_is_mininet_and_pings(net3):
    from mininet.net import Mininet

    assert isinstance(net3.mn, Mininet)
    net3.program(net3.job_spec())
    assert net3.mn.pingAll(timeout="2") == 0.0


def test_three_workers_exact_sums(net3):
    r = harness.run_switchml(net3, size=SIZE)
    assert r.exact and r.correct, r
    assert r.max_abs_error <= r.error_bound
    assert r.packets >= 3 * SIZE // 256
    assert r.loss == 0.0 and r.loss_seen == 0.0
    assert r.switch == "soft"
    assert r.p4_frames == r.packets + r.retransmissions and r.l2_frames == 0, r.path   # all through the P4 switch


def test_three_workers_int32_wraparound_sums_are_exact(net3):
    r = harness.run_switchml(net3, size=SIZE // 4, dtype="int32", seed=3)
    assert r.exact and r.correct and r.max_abs_error == 0


def test_five_percent_loss_still_exact_and_the_loss_is_seen(net3):
    line = net3.set_loss(0.05)
    try:
        r = harness.run_switchml(net3, size=SIZE, seed=1)
    finally:
        net3.set_loss(0.0)
    assert line.startswith("loss: ")
    assert r.exact and r.correct, r
    assert r.retransmissions > 0
    assert r.loss == 0.05 and r.loss_method == net3.loss_method
    assert 0.02 < r.loss_seen < 0.09, r.loss_seen


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (the gloo extra)")
def test_gloo_baseline_on_the_same_hosts_sums_and_counts_its_bound(net3):
    r = harness.run_gloo(net3, size=SIZE)
    assert r.protocol == "gloo" and r.switch == "soft" and r.correct, r
    assert r.max_abs_error <= r.error_bound
    assert r.bound_how.startswith("gloo: 2(n-1)/n = 1.333 of the tensor"), r.bound_how
    assert r.bytes_per_worker >= 2 * 2 / 3 * SIZE * 4        # the ring's share of the tensor, each host
    # Gloo's TCP (and its rendezvous) crossed the switch node in the kernel bridge, never the P4 process
    assert r.p4_frames == 0 and r.l2_frames >= r.frames_on_links, r.path
    assert r.switch_cpu is not None and r.switch_cpu < 0.5, r.switch_cpu


def test_killed_worker_gives_a_clear_timeout_error(net3):
    with pytest.raises(JobError, match=r"^worker 2 \(h3\) was killed mid-job; the others stopped with a timeout "
                                       r"error \(2 of 2\), e\.g\. worker [01] \(h[12]\): no result for 2\.0 s"):
        harness.run_switchml(net3, size=SIZE, fault="kill-worker", stall_timeout=2.0)


def test_a_kill_after_the_last_contribution_is_not_reported_as_mid_job(net3):
    # 16 chunks in a window of 64: the last worker has sent everything before its first progress mark
    with pytest.raises(JobError, match=r"^worker 2 \(h3\) was killed after it had sent every contribution: the other "
                                       r"2 workers finished without it \(16 chunks, a window of 64\); a larger "
                                       r"tensor puts the kill mid-job$"):
        harness.run_switchml(net3, size=4096, fault="kill-worker", stall_timeout=2.0)


def test_switch_restart_mid_job_recovers_or_fails_cleanly_and_says_which(net3):
    try:
        r = harness.run_switchml(net3, size=SIZE, fault="restart-switch", stall_timeout=5.0)
    except JobError as exc:
        assert "restarted mid-job" in str(exc) and "the job failed cleanly" in str(exc)
    else:
        assert r.fault_outcome.startswith("switch s1 restarted mid-job") and r.fault_outcome.endswith("recovered")
        assert r.exact and r.correct


def test_workers_started_by_hand_get_the_exact_sum(net3):
    spec = net3.job_spec(slot_count=64)
    net3.program(spec)
    cmds = hand_start(net3, spec, "switchml", size=4096)
    started = []
    for c in cmds:
        host, *argv = c.split()
        started.append(net3.spawn(host, argv, f"hand-{host}.log", pipes=True))
    events = [json.loads(p.popen.stdout.read().splitlines()[-1]) for p in started]
    assert [e["event"] for e in events] == ["done"] * 3, [p.tail() for p in started]
    r = harness.run_switchml(net3, size=4096, seed=0)          # the harness's run of the same job agrees
    assert r.exact


def test_two_level_topology_spine_aggregates_through_linux_bridges(clean, plan_dir):
    with Network(TwoLevelTopo(2, 2, bw=100), switch=SoftSwitch, plan_dir=plan_dir) as net:
        assert [type(net.mn[leaf]).__name__ for leaf in ("l1", "l2")] == ["Leaf", "Leaf"]
        r = harness.run_switchml(net, size=SIZE // 2)
    assert r.exact and r.correct and r.topo == "two-level2x2"


def test_switch_that_cannot_start_names_its_log(clean, plan_dir):
    class Broken(SoftSwitch):
        module = "p4gen.testbed.no_such_dataplane"

    with pytest.raises(ReadinessError, match=r"^switch s1 exited with status 1 before opening its interfaces; "
                                             r"see /tmp/p4gen-\d+/p4g[0-9a-f]{4}-star2-\w+/p4gen-s1\.log") as exc:
        with Network(star(2), switch=Broken, plan_dir=plan_dir):
            pass
    log = Path(str(exc.value).split("; see ")[1].split()[0])
    assert "No module named p4gen.testbed.no_such_dataplane" in log.read_text()   # kept for the user to read
    shutil.rmtree(log.parent)


def test_teardown_after_a_crash_leaves_nothing(clean, plan_dir):
    with pytest.raises(RuntimeError):
        with Network(star(2), switch=SoftSwitch, plan_dir=plan_dir) as net:
            net.program(net.job_spec())
            net.spawn("h1", ["sleep", "300"], "sleeper.log")
            raise RuntimeError("crash inside the with block")
    assert net.workdir.is_dir()                      # a failed block keeps its logs
    shutil.rmtree(net.workdir)


def test_cleanup_ends_only_the_marked_leftovers(clean):
    # what a killed harness leaves behind: marked processes holding their own network namespaces, owned
    # by a p4gen process that is gone
    gone = subprocess.Popen(["sleep", "30"])
    owner = procs.owner_record(gone.pid)
    gone.kill()
    gone.wait()
    env = dict(os.environ, **{procs.MARK: "p4gffff", procs.OWNER: owner})
    left = subprocess.Popen(["unshare", "--net", "sleep", "300"], env=env)
    other = subprocess.Popen(["unshare", "--net", "sleep", "300"], env=dict(env, **{procs.MARK: "p4geeee"}))
    try:
        out = subprocess.run(P4GEN + ["testbed", "cleanup", "--network", "p4gffff"], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert f"removed process {left.pid} (p4gffff)" in out.stdout
        assert left.wait(10) is not None
        assert other.poll() is None                     # another network's process is left alone
    finally:
        for p in (left, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_up_gives_a_mininet_prompt_where_pingall_succeeds(clean):
    out = subprocess.run(P4GEN + ["testbed", "up", "--workers", "3", "--switch", "soft"], input="pingall\nexit\n",
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "mininet> " in out.stdout
    assert "*** Results: 0% dropped (6/6 received)" in out.stderr, out.stderr   # Mininet logs to stderr
    assert "  mininet> h3 " in out.stdout and "-m p4gen.testbed.agent" in out.stdout


def _up_in_own_namespace(workers: int) -> subprocess.Popen:
    """``p4gen testbed up`` in a network namespace of its own (the way two users share the machine)."""
    argv = " ".join(P4GEN + ["testbed", "up", "--workers", str(workers), "--switch", "soft"])
    return subprocess.Popen(["unshare", "--net", "sh", "-c", f"ip link set lo up && exec {argv}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _logs_line(up: subprocess.Popen) -> str:
    for line in up.stdout:
        if "; logs in /tmp/p4g" in line:
            return line.strip()
    pytest.fail(f"testbed up exited ({up.wait()}) before its network was up: {up.stderr.read()[-2000:]}")


def test_cleanup_during_two_live_ups_in_two_namespaces_leaves_both_untouched(clean):
    ups = [_up_in_own_namespace(3), _up_in_own_namespace(2)]
    try:
        lines = [_logs_line(u) for u in ups]                 # both networks are up at the same time
        workdirs = [Path(line.rsplit("logs in ", 1)[1]) for line in lines]
        ids = [d.name.split("-")[0] for d in workdirs]
        assert ids[0] != ids[1]
        for up, net_id, d in zip(ups, ids, workdirs):
            out = subprocess.run(P4GEN + ["testbed", "cleanup", "--network", net_id], capture_output=True,
                                 text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            left = out.stdout.splitlines()
            assert left[-1] == "cleanup: 0 item(s) removed, 1 network(s) left alone", out.stdout
            assert left[0].startswith(f"left alone: network {net_id} (") and f" processes, {d}): its owner, pid " \
                f"{up.pid} ({sys.executable[:40]}" in left[0] and left[0].endswith("), is running"), left[0]
            assert d.is_dir()
        outs = [u.communicate("pingall\nexit\n", timeout=180) for u in ups]
    finally:
        for u in ups:
            if u.poll() is None:             # the prompt ends at the end of its input
                u.stdin.close()
                try:
                    u.wait(120)
                except subprocess.TimeoutExpired:
                    u.kill()
                    u.wait()
    assert [u.returncode for u in ups] == [0, 0], [e[-2000:] for _, e in outs]
    assert "*** Results: 0% dropped (6/6 received)" in outs[0][1], outs[0][1]
    assert "*** Results: 0% dropped (2/2 received)" in outs[1][1], outs[1][1]
    assert not any(d.exists() for d in workdirs)             # each up removed its own work directory


def test_run_with_cli_prints_the_row_then_the_prompt(clean, tmp_path):
    out = subprocess.run(P4GEN + ["testbed", "run", "--workers", "2", "--switch", "soft", "--size", "4096",
                                  "--json", str(tmp_path / "r.json"), "--cli"],
                         input="h1 ping -c 1 h2\nexit\n", capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    head, prompt, _ = out.stdout.partition("mininet> ")
    row, bound, path = head.splitlines()[-3:]
    assert row.split()[:2] == ["switchml", "2"] and prompt
    # every frame of the job through the P4 switch, none through the switch node's kernel bridge
    assert re.fullmatch(r"switchml frames through the switch node: (\d+) frames in to the P4 switch \(soft\) "
                        r"and (\d+) out; 0 through the kernel bridge s1-br", path), path
    assert int(re.search(r"(\d+) frames in", path).group(1)) >= 2 * 16
    assert bound.startswith("%bound = link-rate bound / time; the bound counts switchml: 16 frames (one per chunk "
                            "of 256 elements) of 1075 B = 1024 B of values + 51 B of headers"), bound
    assert "1 packets transmitted, 1 received" in out.stderr, out.stderr     # Mininet prints node output there
    doc = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert doc[0]["loss"] == 0.0 and doc[0]["loss_seen"] == 0.0 and doc[0]["exact"]
    # progress on stderr (a pipe here), one plain line per step, as it happens: the lines docs/testbed.md quotes
    steps = [ln for ln in out.stderr.splitlines() if ln.startswith("testbed +")]
    assert [re.sub(r"^testbed \+[0-9.]+ s: ", "", ln) for ln in steps][-1] == (
        "switchml: 2 workers ready; all-reducing 4096 elements, a window of 64 slots")
    doc = (Path(__file__).resolve().parent.parent / "docs" / "testbed.md").read_text()
    quoted = [ln for ln in doc.split("the results stay on stdout:", 1)[1].split("```")[1].splitlines() if ln]

    def shape(lines):
        return [re.sub(r"p4g[0-9a-f]{4}|/tmp/\S+|\d+(\.\d+)?", "N", ln) for ln in lines]
    assert shape(steps) == shape(quoted), (steps, quoted)


def test_a_failed_run_says_where_its_logs_are(clean):
    out = subprocess.run(P4GEN + ["testbed", "run", "--workers", "2", "--switch", "soft", "--size", "4096",
                                  "--fault", "kill-worker", "--stall-timeout", "2"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 1
    last = out.stderr.splitlines()[-1]
    m = re.fullmatch(r"p4gen: error: worker 1 \(h2\) was killed .*; the logs of the failed run are in (/\S+)", last)
    assert m, out.stderr
    logs = Path(m.group(1))
    try:
        assert (logs / "agent-h2.log").is_file() or any(logs.glob("*.log")), sorted(logs.iterdir())
    finally:
        shutil.rmtree(logs, ignore_errors=True)


@pytest.mark.parametrize("name,lines", [("star_soft", [r"^SwitchML, 3 workers, 65536 float32: [0-9.]+ s, exact sums: True$"]),
                                        ("two_jobs", [r"^job 0 \(2 workers\): [0-9.]+ s, exact sums: True$",
                                                      r"^job 1 \(2 workers\): [0-9.]+ s, exact sums: True$"])])
def test_example_scripts_run(clean, name, lines):
    import re

    out = subprocess.run([sys.executable, "-m", f"p4gen.testbed.examples.{name}"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    got = out.stdout.strip().splitlines()
    assert len(got) == len(lines) and all(re.match(p, g) for p, g in zip(lines, got)), out.stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (the gloo extra)")
def test_a_soft_build_runs_on_jumbo_frame_links(clean, tmp_path_factory):
    """The soft target's builds: every link and the switch node's veths carry 9000-byte frames, SwitchML's
    2048 values a frame and OmniReduce's 2048-value blocks reach exact sums through the P4 switch, Gloo
    crosses the kernel bridge in jumbo segments and its bound counts them."""
    plans = tmp_path_factory.mktemp("plans")
    with Network(star(3, mbit=100), switch=SoftSwitch, plan_dir=build_plan("switchml", 32, plans, target="soft")) as net:
        assert net.mtu == 9000
        for h in ("h1", "s1"):
            node = net.mn[h]
            for intf in node.intfList():
                if intf.name != "lo":
                    assert f"mtu 9000" in node.cmd(f"ip link show {intf.name}"), intf.name
        assert "mtu 9000" in net.mn["s1"].cmd("ip link show s1-p41")
        r = harness.run_switchml(net, size=SIZE)
        assert r.exact and r.correct, r
        assert r.packets >= 3 * SIZE // 2048 and r.packets < 3 * SIZE // 256
        assert r.p4_frames == r.packets + r.retransmissions and r.l2_frames == 0, r.path
        g = harness.run_gloo(net, size=SIZE)
        assert g.correct and g.p4_frames == 0, g.path
        assert "TCP segments of 8948 B in 9014 B frames" in g.bound_how, g.bound_how
    with Network(star(3, mbit=100), switch=SoftSwitch,
                 plan_dir=build_plan("omnireduce", 32, plans, target="soft")) as net:
        r = harness.run_switchml(net, size=SIZE * 4, protocol="omnireduce", density=0.3)
        assert r.exact and r.correct, r
        assert r.p4_frames > 0 and r.l2_frames == 0, r.path
