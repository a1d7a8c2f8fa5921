"""Worker protocol: float all-reduce through the model, tsi checks, timers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4gen.host import codec
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.host.worker import Worker, WorkerError

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
PLANS = {w: make_plan(make_spec(slots=4, elements_per_packet=8, value_width=w, max_workers=8), load_target("bmv2"))
         for w in (16, 32)}


def allreduce(plan, tensors, window, mode="float", loss=0.0, seed=0):
    L = W.FrameLayout(plan)
    n = len(tensors)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 7000 + i) for i in range(n)]
    m = SwitchModel(plan)
    m.load_config(job_config(plan, 2, addrs, slot_count=window))
    ws = [Worker(L, x, job=2, window=window, n_workers=n, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                 mode=mode) for x, a in zip(tensors, addrs)]
    port = {a.port: i for i, a in enumerate(addrs)}
    q = [(i, f) for i, w in enumerate(ws) for f in w.start(0.0)]
    now = 0.0
    rng = np.random.default_rng(seed)
    while not all(w.done for w in ws):
        if not q:
            now += 0.05
            q = [(i, f) for i, w in enumerate(ws) for f in w.tick(now)]
            continue
        i, f = q.pop(0)
        if loss and rng.random() < loss:
            continue
        for p, out in m.process(f, addrs[i].port):
            j = port[p]
            q += [(j, g) for g in ws[j].receive(out, now)]
    return ws, m


@settings(max_examples=40)
@given(n=st.integers(2, 4), size=st.integers(1, 40), window=st.integers(1, 4), width=st.sampled_from([16, 32]),
       seed=st.integers(0, 2 ** 32 - 1), loss=st.sampled_from([0.0, 0.1, 0.3]))
def test_float_allreduce_within_the_bound(n, size, window, width, seed, loss):
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4)).astype(np.float32) for _ in range(n)]
    ws, m = allreduce(PLANS[width], xs, window, loss=loss, seed=seed)
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0)
    k = W.FrameLayout(PLANS[width]).elements
    for w in ws:
        got = w.result().astype(np.float64)
        for d in range(w.chunks):
            sl = slice(d * k, (d + 1) * k)
            e = max(codec.exponent_of(x[sl]) for x in xs)
            bound = codec.error_bound(e, n, width)
            # + half a float32 ulp for the final cast
            assert np.all(np.abs(got[sl] - exact[sl]) <= bound + np.abs(exact[sl]) * 2.0 ** -23)
        assert np.array_equal(w.result(), ws[0].result())


def test_int_allreduce_is_exact():
    xs = [np.arange(30) * (i + 1) for i in range(3)]
    ws, m = allreduce(PLANS[32], xs, 2, mode="int", loss=0.2, seed=3)
    assert ws[1].result().tolist() == (np.arange(30) * 6).tolist()
    assert m.stats["multicast"] >= 4


def test_results_for_other_chunks_are_ignored_and_timers_back_off():
    plan = PLANS[32]
    L = W.FrameLayout(plan)
    w = Worker(L, np.arange(20), job=2, window=2, n_workers=2, src=SW, dst=SW, mode="int",
               timeout=0.01, backoff=2.0, max_timeout=0.03)
    first = w.start(0.0)
    assert [P.parse_contribution(L, f).tsi for f in first] == [0, 1]
    assert [P.parse_contribution(L, f).pool_index for f in first] == [0, 1]
    assert w.tick(0.005) == []
    assert w.tick(0.01) == first
    assert w.tick(0.025) == []                   # timeout doubled to 0.02
    assert w.tick(0.03) == first
    assert w.tick(0.059) == [] and w.tick(0.06) == first   # capped at 0.03

    def result(tsi, pool, values):
        f = bytearray(P.contribution_frame(L, SW, SW, job=2, tsi=tsi, pool_index=pool, exponent=0,
                                           values=values, msg_type=1))
        return bytes(f)

    assert w.receive(result(2, 0, np.zeros(8)), 0.07) == []          # chunk 2 is not outstanding
    assert w.receive(result(0, 1 << 15, np.zeros(8)), 0.07) == []    # wrong copy
    assert w.stats.ignored == 2
    nxt = w.receive(result(0, 0, np.arange(8) * 2), 0.07)
    assert [P.parse_contribution(L, f).tsi for f in nxt] == [2]
    assert P.parse_contribution(L, nxt[0]).pool_index == 1 << 15   # slot 0, copy flipped
    assert w.receive(result(0, 0, np.arange(8) * 2), 0.07) == []     # duplicate result
    assert w.complete.tolist() == [True, False, False]


def test_bad_inputs():
    L = W.FrameLayout(PLANS[32])
    with pytest.raises(codec.CodecError):
        Worker(L, np.array([1.0, np.nan], np.float32), job=1, window=1, n_workers=2, src=SW, dst=SW)
    with pytest.raises(WorkerError):
        Worker(L, np.array([], np.float32), job=1, window=1, n_workers=2, src=SW, dst=SW)
    with pytest.raises(WorkerError):
        Worker(L, np.ones(3), job=1, window=0, n_workers=2, src=SW, dst=SW)
    w = Worker(L, np.ones(3), job=1, window=1, n_workers=2, src=SW, dst=SW)
    with pytest.raises(WorkerError):
        w.result()


def test_jobs_are_isolated_by_slot_ranges():
    """Two jobs on one switch, interleaved, each on its own slot range: both sums exact."""
    plan = PLANS[32]
    L = W.FrameLayout(plan)
    m = SwitchModel(plan)
    jobs = {}
    for job, base, port0 in ((1, 0, 1), (2, 2, 11)):
        addrs = [WorkerAddr(port0 + i, 0x020000000101 + port0 + i, 0x0A000101 + port0 + i, 9000 + i)
                 for i in range(2)]
        m.load_config(job_config(plan, job, addrs, slot_base=base, slot_count=2, mgid=job, rid_base=10 * job))
        xs = [np.arange(40) * (job * 10 + i) for i in range(2)]
        ws = [Worker(L, x, job=job, window=2, n_workers=2, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                     mode="int") for x, a in zip(xs, addrs)]
        jobs[job] = (addrs, xs, ws)
    port = {a.port: (j, i) for j, (addrs, _, _) in jobs.items() for i, a in enumerate(addrs)}
    q = [(j, i, f) for j, (_, _, ws) in jobs.items() for i, w in enumerate(ws) for f in w.start(0.0)]
    q = q[::2] + q[1::2]
    while q:
        j, i, f = q.pop(0)
        for p, out in m.process(f, jobs[j][0][i].port):
            jj, ii = port[p]
            q += [(jj, ii, g) for g in jobs[jj][2][ii].receive(out, 0.0)]
    for j, (_, xs, ws) in jobs.items():
        assert all(w.done for w in ws)
        assert ws[0].result().tolist() == (xs[0] + xs[1]).tolist()
    # a job-1 packet naming slot 2 (job 2's range) is refused, not aggregated into job 2
    a = jobs[1][0][0]
    f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=99, pool_index=2,
                             exponent=0, values=np.zeros(L.elements))
    assert m.process(f, a.port) == [] and m.stats["drop_bad_slot"] == 1
