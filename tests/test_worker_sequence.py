"""Back-to-back all-reduces on the same slots (what a training job does every step).

Each worker starts its next tensor as soon as its own previous one is done,
while a peer may still be waiting for a lost result.  Continuing the slots
(``tsi_base = next_tsi_base``; OmniReduce also ``copies = next_copies``)
keeps every slot's copies alternating and its tsi growing, so the lagging
worker's retransmission is still answered and no sum mixes two tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

from p4gen import wire as W
from p4gen.host import codec
from p4gen.host import packet as P
from p4gen.host.fastworker import FastWorker
from p4gen.host.omni_worker import OmniWorker
from p4gen.host.worker import Worker
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
JOB = 2


def _plan(protocol="switchml", variant="auto"):
    return make_plan(make_spec(protocol=protocol, variant=variant, slots=4, elements_per_packet=8, max_workers=8),
                     load_target("bmv2"))


PLANS = {v: _plan(variant=v) for v in ("reference", "hardened")}
OMNI = _plan("omnireduce")


class Job:
    """n workers with a list of tensors each, driven through the model; worker i's link loses per ``lose``."""

    def __init__(self, plan, tensors, window, make, continue_slots=True):
        self.plan, self.layout = plan, W.FrameLayout(plan)
        self.n = len(tensors)
        self.addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 7000 + i) for i in range(self.n)]
        self.model = SwitchModel(plan)
        self.model.load_config(job_config(plan, JOB, self.addrs, slot_count=window))
        self.tensors, self.window, self.make, self.cont = tensors, window, make, continue_slots
        self.step = [0] * self.n
        self.results = [[] for _ in range(self.n)]
        self.workers = [self._worker(i, None) for i in range(self.n)]
        self.port = {a.port: i for i, a in enumerate(self.addrs)}

    def _worker(self, i, prev):
        a = self.addrs[i]
        kw = dict(job=JOB, window=self.window, n_workers=self.n, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                  timeout=0.01, backoff=2.0, max_timeout=0.04)
        if prev is not None and self.cont:
            kw["tsi_base"] = prev.next_tsi_base
            if isinstance(prev, OmniWorker):
                kw["copies"] = prev.next_copies
        return self.make(self.layout, self.tensors[i][self.step[i]], **kw)

    def run(self, lose=lambda i, f: False, max_time=30.0):
        q = [(i, f) for i, w in enumerate(self.workers) for f in w.start(0.0)]
        now = 0.0
        while not all(s == len(t) for s, t in zip(self.step, self.tensors)):
            if now > max_time:
                return False
            if not q:
                now += 0.01
                q = [(i, f) for i, w in enumerate(self.workers) if self.step[i] < len(self.tensors[i])
                     for f in w.tick(now)]
                continue
            i, f = q.pop(0)
            if lose(i, f):
                continue
            for p, out in self.model.process(f, self.addrs[i].port):
                j = self.port[p]
                if self.step[j] == len(self.tensors[j]):
                    continue
                w = self.workers[j]
                q += [(j, g) for g in w.receive(out, now)]
                if w.done:                   # on to the next tensor at once, whatever the peers do
                    self.results[j].append(w.result())
                    self.step[j] += 1
                    if self.step[j] < len(self.tensors[j]):
                        self.workers[j] = nxt = self._worker(j, w)
                        q += [(j, g) for g in nxt.start(now)]
        return True


def _int_tensors(rng, n, sizes):
    return [[rng.integers(-1000, 1001, size=s).astype(np.int32) for s in sizes] for _ in range(n)]


def _check_int(job):
    for k in range(len(job.tensors[0])):
        want = np.sum([t[k].astype(np.int64) for t in job.tensors], axis=0) & 0xFFFFFFFF
        for i in range(job.n):
            assert job.results[i][k].astype(np.int64).tolist() == want.tolist(), (i, k)


def _int_worker(layout, x, **kw):
    return Worker(layout, x, mode="int", **kw)


@pytest.mark.parametrize("variant", ["reference", "hardened"])
@pytest.mark.parametrize("seed", range(4))
def test_switchml_tensors_back_to_back_under_loss_are_exact(variant, seed):
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(1, 60, size=5)]        # bucket sizes vary, as DDP's do
    job = Job(PLANS[variant], _int_tensors(rng, 3, sizes), window=3, make=_int_worker)
    assert job.run(lose=lambda i, f: rng.random() < 0.2)
    _check_int(job)
    assert {w.tsi_base for w in job.workers} == {job.workers[0].tsi_base}


def _lose_first_result_of_worker0(job, after_step):
    """Lose the first result frame of worker 0 once the peers are on step ``after_step``."""
    state = {"lost": False}
    orig = job.model.process

    def process(frame, port):
        out = orig(frame, port)
        if not state["lost"] and job.step[1] == after_step and job.step[0] == after_step:
            kept = [(p, g) for p, g in out if job.port[p] != 0]
            if len(kept) < len(out):
                state["lost"] = True
                return kept
        return out
    job.model.process = process
    return state


@pytest.mark.parametrize("variant", ["reference", "hardened"])
def test_continuing_the_slots_is_what_keeps_a_lagging_worker_alive(variant):
    """Worker 0 loses a result of the last chunk of tensor 0 while worker 1 starts tensor 1 on the slot.

    With the slots continued, worker 0's retransmission is answered and both tensors are exact.
    Restarting every tensor at tsi 0 and copy 0 instead strands it or corrupts a sum.
    """
    rng = np.random.default_rng(5)
    tensors = _int_tensors(rng, 2, [8, 8])            # one chunk per tensor, window 1: one slot
    for cont, ok in ((True, True), (False, False)):
        job = Job(PLANS[variant], [list(t) for t in tensors], window=1, make=_int_worker, continue_slots=cont)
        state = _lose_first_result_of_worker0(job, 0)
        finished = job.run(max_time=2.0)
        assert state["lost"]
        if ok:
            assert finished
            _check_int(job)
        else:
            assert not finished or any(
                job.results[i][k].astype(np.int64).tolist()
                != (np.sum([t[k].astype(np.int64) for t in tensors], axis=0) & 0xFFFFFFFF).tolist()
                for i in range(2) for k in range(2))


@pytest.mark.parametrize("seed", range(4))
def test_float_tensors_back_to_back_use_the_fast_worker(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(1, 40, size=4)]
    tensors = [[rng.standard_normal(s).astype(np.float32) for s in sizes] for _ in range(3)]
    job = Job(PLANS["hardened"], tensors, window=2, make=FastWorker)
    assert job.run(lose=lambda i, f: rng.random() < 0.15)
    for k in range(len(sizes)):
        exact = np.sum([t[k].astype(np.float64) for t in tensors], axis=0)
        e = max(int(codec.exponent_of(t[k])) for t in tensors)        # one chunk when size <= 8, else a bound
        for i in range(3):
            got = job.results[i][k].astype(np.float64)
            assert np.array_equal(job.results[i][k], job.results[0][k])
            assert np.all(np.abs(got - exact) <= codec.error_bound(e, 3, 32) + np.abs(exact) * 2.0 ** -23)


@pytest.mark.parametrize("seed", range(4))
def test_omnireduce_tensors_back_to_back_under_loss_are_exact(seed):
    rng = np.random.default_rng(seed)
    tensors = []
    for _ in range(3):
        ts = []
        for blocks in (5, 2, 7):
            x = rng.integers(-1000, 1001, size=(blocks, 8)).astype(np.int32)
            x[rng.random(blocks) >= 0.4] = 0
            ts.append(x.reshape(-1))
        tensors.append(ts)
    job = Job(OMNI, tensors, window=3, make=OmniWorker)
    assert job.run(lose=lambda i, f: rng.random() < 0.2)
    _check_int(job)


def test_flag_is_seen_by_every_worker_and_only_for_its_tensor():
    rng = np.random.default_rng(2)
    flags = []

    def make(layout, x, **kw):
        w = FastWorker(layout, x, flag=bool(x[0] == 99), **kw)
        flags.append(w)
        return w
    xs = [[rng.standard_normal(30).astype(np.float32), rng.standard_normal(30).astype(np.float32)]
          for _ in range(3)]
    xs[2][0][0] = 99                                  # worker 2 flags tensor 0
    job = Job(PLANS["hardened"], xs, window=2, make=make)
    assert job.run()
    by_step = {}
    for w in flags:
        by_step.setdefault(w.tsi_base, []).append(w.flagged)
    assert [by_step[b] for b in sorted(by_step)] == [[True] * 3, [False] * 3]
    exact = np.sum([x[1].astype(np.float64) for x in xs], axis=0)      # the next tensor is clean again
    e = max(int(codec.exponent_of(x[1])) for x in xs)
    assert all(np.all(np.abs(job.results[i][1] - exact) <= codec.error_bound(e, 3, 32) + np.abs(exact) * 2.0 ** -23)
               for i in range(3))


def test_omnireduce_flag_reaches_every_worker():
    xs = [np.ones(24, np.float32) for _ in range(3)]
    made = []

    def make(layout, x, **kw):
        w = OmniWorker(layout, x, flag=kw["src"].port == 7001, **kw)
        made.append(w)
        return w
    job = Job(OMNI, [[x] for x in xs], window=2, make=make)
    assert job.run()
    assert [w.flagged for w in made] == [True, True, True]


def test_flag_needs_float_mode():
    from p4gen.host.worker import WorkerError

    L = W.FrameLayout(PLANS["hardened"])
    with pytest.raises(WorkerError, match="flag=True needs mode='float'"):
        Worker(L, np.ones(4, np.int32), job=1, window=1, n_workers=2, src=SW, dst=SW, mode="int", flag=True)
