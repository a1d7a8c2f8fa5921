"""Testbed on real namespaces: SwitchML all-reduce through the software data plane.

Needs root, ip/tc/iptables/ethtool and p4gen.switch.dataplane; skips with the reason otherwise.
P4GEN_TESTBED_DATAPLANE names another module with the data plane's command line (for trying
the testbed against a data plane under development).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from p4gen.testbed import harness, netns
from p4gen.testbed.errors import JobError, ReadinessError
from p4gen.testbed.net import Network
from p4gen.testbed.nodes import BMv2Switch, SoftSwitch
from p4gen.testbed.topo import star, two_level

if os.environ.get("P4GEN_TESTBED_DATAPLANE"):
    SoftSwitch.module = os.environ["P4GEN_TESTBED_DATAPLANE"]

_why = netns.missing_requirements() or SoftSwitch.missing()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

SIZE = 65536          # elements: 256 packets per worker


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("plan") / "bmv2-switchml"
    return build(make_spec(protocol="switchml", max_workers=32, slots=512), load_target("bmv2"), out).out_dir


@pytest.fixture(scope="module")
def net3(plan_dir):
    with Network(star(3, mbit=100), switch=SoftSwitch, plan_dir=plan_dir) as net:
        yield net


def test_three_workers_exact_sums(net3):
    r = harness.run_switchml(net3, size=SIZE)
    assert r.exact and r.correct, r
    assert r.max_abs_error <= r.error_bound
    assert r.packets >= 3 * SIZE // 256


def test_three_workers_int32_wraparound_sums_are_exact(net3):
    r = harness.run_switchml(net3, size=SIZE // 4, dtype="int32", seed=3)
    assert r.exact and r.correct and r.max_abs_error == 0


def test_five_percent_loss_still_exact(net3):
    net3.set_loss(0.05)
    try:
        r = harness.run_switchml(net3, size=SIZE, seed=1)
    finally:
        net3.set_loss(0.0)
    assert r.exact and r.correct, r
    assert r.retransmissions > 0


def test_killed_worker_gives_a_clear_timeout_error(net3):
    with pytest.raises(JobError, match=r"^worker 2 \(h3\) was killed mid-job; the others stopped with a timeout "
                                       r"error \(2 of 2\), e\.g\. worker [01] \(h[12]\): no result for 2\.0 s"):
        harness.run_switchml(net3, size=SIZE, fault="kill-worker", stall_timeout=2.0)


def test_switch_restart_mid_job_recovers_or_fails_cleanly_and_says_which(net3):
    try:
        r = harness.run_switchml(net3, size=SIZE, fault="restart-switch", stall_timeout=5.0)
    except JobError as exc:
        assert "restarted mid-job" in str(exc) and "the job failed cleanly" in str(exc)
    else:
        assert r.fault_outcome.startswith("switch s1 restarted mid-job") and r.fault_outcome.endswith("recovered")
        assert r.exact and r.correct


def test_two_level_topology_spine_aggregates(plan_dir):
    with Network(two_level(2, 2, mbit=100), switch=SoftSwitch, plan_dir=plan_dir) as net:
        r = harness.run_switchml(net, size=SIZE // 2)
    assert r.exact and r.correct and r.topo == "two-level2x2"


def test_switch_that_cannot_start_names_its_log(plan_dir):
    class Broken(SoftSwitch):
        module = "p4gen.testbed.no_such_dataplane"

    with pytest.raises(ReadinessError, match=r"^switch s1 exited with status 1 before opening its interfaces; "
                                             r"see /tmp/p4g[0-9a-f]{4}-\w+/p4gen-s1\.log"):
        with Network(star(2), switch=Broken, plan_dir=plan_dir) as net:
            net.program(net.job_spec())


def test_teardown_and_cleanup_leave_no_namespace_veth_or_process(plan_dir):
    with pytest.raises(RuntimeError):
        with Network(star(2), switch=SoftSwitch, plan_dir=plan_dir) as net:
            net.program(net.job_spec())
            prefix = net.prefix
            raise RuntimeError("crash inside the with block")
    assert not [n for n in netns.namespaces() if n.startswith(prefix)]
    # what a killed harness leaves behind: a namespace with a process in it
    ns = f"{netns.PREFIX}ffff-h1"
    netns.add_namespace(ns)
    sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "300"])
    try:
        out = subprocess.run([sys.executable, "-c", "import argparse, sys\n"
                              "from p4gen.testbed import cli\n"
                              "ap = argparse.ArgumentParser(); cli.register(ap.add_subparsers())\n"
                              "a = ap.parse_args(['testbed', 'cleanup']); sys.exit(a.func(a))"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert f"removed netns {ns}" in out.stdout
        sleeper.wait(10)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    assert netns.namespaces() == []
    assert netns.root_links() == []


@pytest.mark.skipif(BMv2Switch.missing() is not None, reason=BMv2Switch.missing() or "")
def test_bmv2_three_workers_exact_sums(plan_dir):
    with Network(star(3, mbit=100), switch=BMv2Switch, plan_dir=plan_dir) as net:
        r = harness.run_switchml(net, size=SIZE // 4)
    assert r.exact and r.correct
