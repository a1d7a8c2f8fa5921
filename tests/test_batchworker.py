"""p4gen.host.batchworker: bursts of results handled as matrices give what Worker gives frame by frame.

Three workers run a job against the switch model.  Results reach them in bursts, shuffled across
slots and mixed with duplicates, stale results of an earlier index, frames of another job, short and
malformed frames; some bursts are dropped so that timers fire.  The reference Worker takes each
frame of a burst in turn, the BatchWorker the whole burst as one matrix; both must send the same
bytes in the same order, count the same stats and produce the same tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

from p4gen.host.batchworker import BatchWorker
from p4gen.host.packet import endpoint
from p4gen.host.worker import RttEstimator, Worker
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel
from p4gen.testbed.program import JobSpec, WorkerSpec, json_config
from p4gen.testbed.tensors import check_switchml, expected
from p4gen.wire import FrameLayout

N = 3


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("plan") / "sml"
    return build(make_spec(protocol="switchml", max_workers=32, slots=512), load_target("bmv2"), out).plan


def _spec():
    return JobSpec(0, 1, 0, 8, tuple(WorkerSpec(i, i + 1, f"02:00:00:00:00:0{i + 1}", f"10.0.0.{i + 1}", 50000 + i)
                                     for i in range(N)), (), (1, 2, 3))


def _workers(cls, L, xs, mode, window, rtt=False):
    return [cls(L, xs[i], job=0, window=window, n_workers=N, mode=mode, timeout=0.01, max_timeout=0.04,
                src=endpoint(w.mac, w.ip, w.udp_port), dst=endpoint("02:00:00:00:00:fe", "10.0.0.254", 0xBEE0),
                rtt=RttEstimator() if rtt else None)
            for i, w in enumerate(_spec().workers)]


def _drive(plan, cls, xs, mode, window, seed, rtt=False):
    """Run the job with bursts from a seeded schedule; (results, every frame each worker sent, stats)."""
    L = FrameLayout(plan)
    m = SwitchModel(plan)
    m.load_config(json_config(plan, _spec()))
    ws = _workers(cls, L, xs, mode, window, rtt)
    rng = np.random.default_rng(seed)
    sent = [[] for _ in ws]
    inbox = [[] for _ in ws]
    seen = [[] for _ in ws]               # results a worker got earlier, for stale copies
    now = 0.0
    for i, w in enumerate(ws):
        sent[i] += w.start(now)
    queue = [(i, f) for i, fs in enumerate(sent) for f in fs]
    other_job = None
    for step in range(100000):
        if all(w.done for w in ws):
            break
        now += 0.003
        rng.shuffle(queue)
        for i, f in queue:
            for eport, out in m.process(f, i + 1):
                inbox[eport - 1].append(out)
        queue = []
        for i, w in enumerate(ws):
            burst = inbox[i]
            inbox[i] = []
            if burst and rng.random() < 0.1:
                burst = []                 # lost: the timers resend
            rng.shuffle(burst)
            if burst and rng.random() < 0.5:
                burst.append(burst[0])     # a duplicate in the same burst
            if seen[i] and rng.random() < 0.3:
                burst.insert(int(rng.integers(len(burst) + 1)), seen[i][int(rng.integers(len(seen[i])))])
            if burst and rng.random() < 0.1:
                other_job = other_job or _other_job(L, burst[0])
                burst.append(other_job)
            seen[i] += burst[-2:]
            out = []
            if cls is Worker:
                for f in burst:
                    out += w.receive(f, now)
            elif burst:
                M = np.frombuffer(b"".join(burst), np.uint8).reshape(len(burst), -1)
                out = [r.tobytes() for r in w.receive_rows(M, now)]
            out += w.tick(now)
            sent[i] += out
            queue += [(i, f) for f in out]
    assert all(w.done for w in ws)
    return [w.result() for w in ws], sent, [vars(w.stats) for w in ws]


def _other_job(L, frame):
    u = list(L.struct.unpack_from(frame))
    L.setter("agg.job")(u, 5)
    return L.struct.pack(*u) + frame[L.struct.size:]


@pytest.mark.parametrize("mode,window,seed", [("float", 8, 1), ("float", 4, 2), ("int", 8, 3), ("float", 1, 4)])
def test_bursts_give_the_same_bytes_stats_and_results(plan, mode, window, seed):
    L = FrameLayout(plan)
    dtype = "float32" if mode == "float" else "int32"
    total, xs = expected(N, 5000, dtype, 7, 1.0, L.elements)
    ra, sa, ta = _drive(plan, Worker, xs, mode, window, seed)
    rb, sb, tb = _drive(plan, BatchWorker, xs, mode, window, seed)
    assert sa == sb
    assert ta == tb
    assert any(t["retransmitted"] for t in ta) and any(t["ignored"] for t in ta)
    for a, b in zip(ra, rb):
        assert np.array_equal(a, b)
    c = check_switchml(rb[0], xs, total, L.elements)
    assert c.exact and c.correct


def test_with_an_rtt_estimator_the_timeouts_follow_each_sample_in_order(plan):
    L = FrameLayout(plan)
    total, xs = expected(N, 3000, "float32", 9, 1.0, L.elements)
    _ra, sa, ta = _drive(plan, Worker, xs, "float", 8, 5, rtt=True)
    _rb, sb, tb = _drive(plan, BatchWorker, xs, "float", 8, 5, rtt=True)
    assert sa == sb and ta == tb


def test_short_and_malformed_rows_are_counted_and_change_nothing(plan):
    L = FrameLayout(plan)
    _total, xs = expected(N, 3000, "float32", 1, 1.0, L.elements)
    w = _workers(BatchWorker, L, xs, "float", 4)[0]
    first = w.start(0.0)
    assert w.receive_rows(np.zeros((2, L.frame_len - 1), np.uint8)).shape[0] == 0
    bad = np.frombuffer(first[0], np.uint8).reshape(1, -1)        # a contribution, not a result
    assert w.receive_rows(bad).shape[0] == 0
    assert w.stats.malformed == 3 and w.stats.accepted == 0
    assert w.outstanding() == {0: 0, 1: 1, 2: 2, 3: 3}
    assert w.batchable


def test_slots_started_in_parts_send_what_start_sends(plan):
    """start_slots (a tensor taking each slot as the tensor before it frees it) sends, slot by slot, the
    frames start sends; started/busy/released follow; a slot cannot be started twice."""
    from p4gen.host.worker import WorkerError

    L = FrameLayout(plan)
    _total, xs = expected(N, 3000, "float32", 1, 1.0, L.elements)
    whole = _workers(BatchWorker, L, xs, "float", 8)[0]
    parts = _workers(BatchWorker, L, xs, "float", 8)[0]
    ref = whole.start(0.0)
    assert not parts.started().any() and not parts.released().any()
    late = parts.start_slots(np.array([6, 2, 7]), 0.0)
    assert parts.started().tolist() == [s in (2, 6, 7) for s in range(8)]
    assert parts.busy().tolist() == parts.started().tolist() and not parts.released().any()
    early = parts.start_slots(np.array([0, 1, 3, 4, 5]), 0.0)
    assert [r.tobytes() for r in late] == [ref[6], ref[2], ref[7]]
    assert [r.tobytes() for r in early] == [ref[0], ref[1], ref[3], ref[4], ref[5]]
    with pytest.raises(WorkerError, match=r"^slot 2 was started already$"):
        parts.start_slots(np.array([2]), 0.0)


def test_a_slot_is_released_after_its_last_index(plan):
    """A tensor of 3 chunks on 8 slots: the float protocol's 11 indices leave slots 0-2 two indices each
    and slots 3-7 one; a slot is released once its last result is in, and only then."""
    L = FrameLayout(plan)
    _total, xs = expected(N, 3 * L.elements, "float32", 1, 1.0, L.elements)
    m = SwitchModel(plan)
    m.load_config(json_config(plan, _spec()))
    ws = _workers(BatchWorker, L, xs, "float", 8)
    out = [w.start(0.0) for w in ws]
    for rnd in range(2):
        inbox = [[] for _ in ws]
        for i, fs in enumerate(out):
            for f in fs:
                for eport, r in m.process(f, i + 1):
                    inbox[eport - 1].append(r)
        out = [[r.tobytes() for r in w.receive_rows(np.frombuffer(b"".join(inbox[i]), np.uint8)
                                                    .reshape(len(inbox[i]), -1), 0.0)] for i, w in enumerate(ws)]
        assert ws[0].released().tolist() == ([False] * 3 if rnd == 0 else [True] * 3) + [True] * 5
    assert all(w.done for w in ws)
