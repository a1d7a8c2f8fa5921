"""The workers' round-trip estimate (RFC 6298) and the timeouts it sets."""

from __future__ import annotations

import numpy as np
import pytest

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.host.worker import RttEstimator, Worker
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
PLAN = make_plan(make_spec(slots=4, elements_per_packet=8, max_workers=8), load_target("bmv2"))


def test_estimator_follows_rfc_6298():
    e = RttEstimator()
    assert e.rto(0.01, 1.0) == 0.01                       # no sample yet: the floor
    e.update(0.1)
    assert (e.srtt, e.rttvar) == (0.1, 0.05)
    assert e.rto(0.01, 1.0) == pytest.approx(0.1 + 4 * 0.05)
    e.update(0.2)
    assert e.rttvar == pytest.approx(0.75 * 0.05 + 0.25 * 0.1)
    assert e.srtt == pytest.approx(0.875 * 0.1 + 0.125 * 0.2)
    assert e.rto(0.01, 0.2) == 0.2                        # capped
    assert e.samples == 2


def _result(L, tsi, pool):
    return P.contribution_frame(L, SW, SW, job=2, tsi=tsi, pool_index=pool, exponent=0, values=np.zeros(8),
                                msg_type=1)


def test_a_worker_samples_first_sends_only_and_times_out_on_the_estimate():
    L = W.FrameLayout(PLAN)
    rtt = RttEstimator()
    w = Worker(L, np.arange(40), job=2, window=2, n_workers=2, src=SW, dst=SW, mode="int", timeout=0.01,
               max_timeout=1.0, rtt=rtt)
    w.start(0.0)
    assert w.next_deadline() == pytest.approx(0.01)
    w.receive(_result(L, 0, 0), 0.05)                     # slot 0: sent once, answered after 50 ms
    assert rtt.samples == 1 and rtt.srtt == pytest.approx(0.05)
    assert w._slots[0].deadline == pytest.approx(0.05 + 0.05 + 4 * 0.025)   # the next packet's timer
    assert w.tick(0.06) and w._slots[1].sends == 2        # slot 1 retransmitted at its 10 ms timer ...
    w.receive(_result(L, 1, 1), 0.07)
    assert rtt.samples == 1                               # ... so its result is no sample (Karn)
    fixed = Worker(L, np.arange(40), job=2, window=2, n_workers=2, src=SW, dst=SW, mode="int", timeout=0.01)
    fixed.start(0.0)
    fixed.receive(_result(L, 0, 0), 0.05)
    assert fixed._slots[0].deadline == pytest.approx(0.06)   # without an estimator: the fixed timeout
