"""The testbed runs on BMv2: simple_switch_grpc with the p4c-bm2-ss program, programmed over P4Runtime.

Needs everything tests/test_testbed_net.py needs, plus p4c-bm2-ss and simple_switch_grpc on PATH;
skips with the reason otherwise.  Same runs as on the software switch: a 3-worker SwitchML
all-reduce, the same with 5% loss, OmniReduce, and a killed worker; nothing may be left behind.
"""

from __future__ import annotations

import pytest

from needs import modules

modules("the testbed", "mininet")

from leakcheck import leaks, snapshot  # noqa: E402
from p4gen.testbed import harness, procs  # noqa: E402
from p4gen.testbed.errors import JobError  # noqa: E402
from p4gen.testbed.net import Network  # noqa: E402
from p4gen.testbed.nodes import BMv2Switch  # noqa: E402
from p4gen.testbed.plans import build_plan  # noqa: E402
from p4gen.testbed.topo import star  # noqa: E402

_why = procs.missing_requirements() or BMv2Switch.missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

SIZE = 16384          # elements: BMv2 forwards a few thousand frames per second


def _net(protocol: str, tmp_path_factory):
    plan = build_plan(protocol, 32, tmp_path_factory.mktemp("plans"), compile_p4=True)
    return Network(star(3, mbit=100), switch=BMv2Switch, plan_dir=plan)


@pytest.fixture(scope="module")
def sml(tmp_path_factory):
    before = snapshot()
    with _net("switchml", tmp_path_factory) as net:
        yield net
    assert leaks(before) == []


def test_bmv2_three_workers_exact_sums(sml):
    r = harness.run_switchml(sml, size=SIZE)
    assert r.exact and r.correct, r
    assert r.switch == "bmv2"


def test_bmv2_five_percent_loss_still_exact(sml):
    sml.set_loss(0.05)
    try:
        r = harness.run_switchml(sml, size=SIZE, seed=1)
    finally:
        sml.set_loss(0.0)
    assert r.exact and r.correct and r.retransmissions > 0, r
    assert 0.01 < r.loss_seen < 0.1, r.loss_seen


def test_bmv2_programmed_again_sends_each_result_once(sml):
    # every run programs the switch again; an earlier programming's multicast replicas must be gone
    for seed in (2, 3):
        r = harness.run_switchml(sml, size=SIZE, seed=seed)
        assert r.exact and r.correct, r
        for w in r.per_worker:
            assert w["received"] <= w["sent"] + w["retransmitted"], r.per_worker


def test_bmv2_killed_worker_gives_a_clear_timeout_error(sml):
    with pytest.raises(JobError, match=r"^worker 2 \(h3\) was killed mid-job; the others stopped with a timeout "
                                       r"error \(2 of 2\), e\.g\. worker [01] \(h[12]\): no result for 2\.0 s"):
        harness.run_switchml(sml, size=SIZE, fault="kill-worker", stall_timeout=2.0)


def test_bmv2_omnireduce_exact_sums(tmp_path_factory):
    before = snapshot()
    with _net("omnireduce", tmp_path_factory) as net:
        r = harness.run_switchml(net, size=SIZE, density=0.3, protocol="omnireduce")
    assert r.exact and r.correct, r
    assert leaks(before) == []
