"""Testbed on Mininet: OmniReduce all-reduce through the software data plane.

Needs root, Mininet, ip/tc/ifconfig/ethtool and p4gen.switch.dataplane; skips with the reason
otherwise.  Checks, before and after, that nothing is left behind (tests/leakcheck.py).
"""

from __future__ import annotations

import pytest

from needs import modules

modules("the testbed", "mininet")

from leakcheck import leaks, snapshot  # noqa: E402
from p4gen.testbed import harness, procs  # noqa: E402
from p4gen.testbed.net import Network  # noqa: E402
from p4gen.testbed.nodes import SoftSwitch  # noqa: E402
from p4gen.testbed.plans import build_plan  # noqa: E402
from p4gen.testbed.topo import star  # noqa: E402
from p4gen.wire import FrameLayout  # noqa: E402

_why = procs.missing_requirements() or SoftSwitch.missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

SIZE = 65536          # elements: 512 blocks of 128 (the bmv2 build's block, see its packet headroom)


@pytest.fixture(scope="module")
def net3(tmp_path_factory):
    before = snapshot()
    plan = build_plan("omnireduce", 32, tmp_path_factory.mktemp("plans"))
    with Network(star(3, mbit=100), switch=SoftSwitch, plan_dir=plan) as net:
        yield net
    assert leaks(before) == []


def test_three_workers_density_03_exact_sums(net3):
    r = harness.run_switchml(net3, size=SIZE, density=0.3, protocol="omnireduce")
    assert r.exact and r.correct, r
    assert r.max_abs_error <= r.error_bound
    # one round per block some worker holds, plus one discovery round per stream, per worker
    blocks = SIZE // FrameLayout(net3.agg.plan).elements
    assert 0.3 < r.union_density < 0.9
    assert r.packets == 3 * (round(r.union_density * blocks) + min(64, blocks))


def test_three_workers_int32_sparse_sums_are_exact(net3):
    r = harness.run_switchml(net3, size=SIZE // 4, dtype="int32", seed=5, density=0.3, protocol="omnireduce")
    assert r.exact and r.correct and r.max_abs_error == 0


def test_five_percent_loss_still_exact(net3):
    net3.set_loss(0.05)
    try:
        r = harness.run_switchml(net3, size=SIZE, density=0.3, seed=2, protocol="omnireduce")
    finally:
        net3.set_loss(0.0)
    assert r.exact and r.correct and r.retransmissions > 0
    assert 0.02 < r.loss_seen < 0.09, r.loss_seen
