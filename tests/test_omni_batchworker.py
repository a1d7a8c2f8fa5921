"""p4gen.host.omni_batchworker: bursts of OmniReduce results handled as matrices give what OmniWorker
gives frame by frame.

Three workers run a block-sparse job against the switch model.  Results reach them in bursts,
shuffled across streams and mixed with duplicates, stale results of an earlier round, frames of
another job, results cut short and frames that are not results; some bursts are dropped so that
timers fire.  The reference OmniWorker takes each frame of a burst in turn, the BatchOmniWorker the
whole burst as one matrix; both must send the same bytes in the same order, count the same stats
and produce the same tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

from p4gen.host.omni_batchworker import BatchOmniWorker
from p4gen.host.omni_packet import NONE
from p4gen.host.omni_worker import OmniProtocolError, OmniWorker
from p4gen.host.packet import endpoint
from p4gen.host.worker import RttEstimator
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel
from p4gen.testbed.program import JobSpec, WorkerSpec, json_config
from p4gen.testbed.tensors import check_omnireduce, expected
from p4gen.wire import FrameLayout

N = 3


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("plan") / "omni"
    return build(make_spec(protocol="omnireduce", max_workers=32, slots=64, elements_per_packet=16),
                 load_target("bmv2"), out).plan


def _spec(window):
    return JobSpec(0, 1, 0, window, tuple(WorkerSpec(i, i + 1, f"02:00:00:00:00:0{i + 1}", f"10.0.0.{i + 1}",
                                                     50000 + i) for i in range(N)), (), (1, 2, 3))


def _workers(cls, L, xs, mode, window, rtt=False, copies=None):
    return [cls(L, xs[i], job=0, window=window, n_workers=N, mode=mode, timeout=0.01, max_timeout=0.04,
                src=endpoint(w.mac, w.ip, w.udp_port), dst=endpoint("02:00:00:00:00:fe", "10.0.0.254", 0xBEE0),
                rtt=RttEstimator() if rtt else None, copies=copies)
            for i, w in enumerate(_spec(window).workers)]


def _drive(plan, cls, xs, mode, window, seed, rtt=False, copies=None, m=None):
    """Run the job with bursts from a seeded schedule (on switch ``m``, default a fresh one); (workers, every
    frame each worker sent)."""
    L = FrameLayout(plan)
    if m is None:
        m = SwitchModel(plan)
        m.load_config(json_config(plan, _spec(window)))
    ws = _workers(cls, L, xs, mode, window, rtt, copies)
    rng = np.random.default_rng(seed)
    sent = [[] for _ in ws]
    inbox = [[] for _ in ws]
    seen = [[] for _ in ws]               # results a worker got earlier, for stale copies
    now = 0.0
    for i, w in enumerate(ws):
        sent[i] += w.start(now)
    queue = [(i, f) for i, fs in enumerate(sent) for f in fs]
    other_job = None
    for _step in range(100000):
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
                other_job = other_job or _with(L, burst[0], "agg.job", 5)
                burst.append(other_job)
            if burst and rng.random() < 0.1:
                burst.append(_with(L, burst[0], "agg.msg_type", L.params.msg_contribution))
            seen[i] += burst[-2:]
            out = []
            if cls is OmniWorker:
                for f in burst:
                    out += w.receive(f, now)
            elif burst:
                M = np.frombuffer(b"".join(burst), np.uint8).reshape(len(burst), -1)
                F, lens = w.receive_rows(M, now)
                out = [r[:n].tobytes() for r, n in zip(F, lens)]
            out += w.tick(now)
            sent[i] += out
            queue += [(i, f) for f in out]
    assert all(w.done for w in ws)
    return ws, sent


def _with(L, frame, field, value):
    u = list(L.struct.unpack_from(frame))
    L.setter(field)(u, value)
    return L.struct.pack(*u) + frame[L.struct.size:]


def _state(w):
    return (vars(w.stats), w.bytes_sent, list(w.rounds_per_stream), w.next_copies, w.next_tsi_base, w.flagged,
            w.complete.tolist())


@pytest.mark.parametrize("mode,window,density,seed,rtt", [("float", 8, 0.3, 1, False), ("float", 4, 0.05, 2, True),
                                                          ("int", 8, 0.5, 3, False), ("float", 1, 0.3, 4, False),
                                                          ("float", 8, 1.0, 5, False)])
def test_bursts_give_the_same_bytes_stats_and_results(plan, mode, window, density, seed, rtt):
    L = FrameLayout(plan)
    dtype = "float32" if mode == "float" else "int32"
    total, xs = expected(N, 3000, dtype, seed, density, L.elements)
    wa, sa = _drive(plan, OmniWorker, xs, mode, window, seed, rtt)
    wb, sb = _drive(plan, BatchOmniWorker, xs, mode, window, seed, rtt)
    assert all(w.batchable for w in wb)
    assert sa == sb
    assert [_state(w) for w in wa] == [_state(w) for w in wb]
    assert any(w.stats.retransmitted for w in wa) and any(w.stats.ignored for w in wa)
    assert any(w.stats.malformed for w in wa)
    assert any(w.stats.extra["header_frames"] for w in wa) or density == 1.0
    for a, b in zip(wa, wb):
        assert np.array_equal(a.result(), b.result())
    streams = min(window, -(-3000 // L.elements))
    c = check_omnireduce(wb[0].result(), xs, total, L.elements, streams, L.value_width)
    assert c.exact and c.correct


def test_a_second_allreduce_continues_the_copies(plan):
    """copies= (a later all-reduce on the same slots, on the switch that ran the first) is honoured as the
    per-frame worker honours it."""
    L = FrameLayout(plan)
    total, xs = expected(N, 2000, "float32", 9, 0.4, L.elements)
    runs = {}
    for cls in (OmniWorker, BatchOmniWorker):
        m = SwitchModel(plan)
        m.load_config(json_config(plan, _spec(8)))
        first, _ = _drive(plan, cls, xs, "float", 8, 9, m=m)
        copies = first[0].next_copies
        assert all(c > 0 for c in copies)            # every slot ran rounds the second all-reduce continues
        runs[cls] = _drive(plan, cls, xs, "float", 8, 9, copies=copies, m=m)
    (wa, sa), (wb, sb) = runs[OmniWorker], runs[BatchOmniWorker]
    assert sa == sb and [_state(w) for w in wa] == [_state(w) for w in wb]


def test_a_next_offset_that_skips_data_raises_the_same_error(plan):
    L = FrameLayout(plan)
    _total, xs = expected(N, 2000, "float32", 3, 1.0, L.elements)
    m = SwitchModel(plan)
    m.load_config(json_config(plan, _spec(4)))
    errors = []
    for cls in (OmniWorker, BatchOmniWorker):
        w = _workers(cls, L, xs, "float", 4)[0]
        first = w.start(0.0)[1]                  # stream 1's discovery round
        res = _with(L, first + bytes(L.frame_len - len(first)), "agg.msg_type", L.params.msg_result)
        res = _with(L, res, "agg.flags", 1)
        for nxt in (6, 5):                       # not of stream 1; beyond this worker's next block of it (1)
            with pytest.raises(OmniProtocolError) as e:
                w.receive(_with(L, res, "agg.next", nxt), 0.0)
            errors.append((cls.__name__, str(e.value)))
    assert [m for _c, m in errors[:2]] == [m for _c, m in errors[2:]]
    assert "is not a later block of stream 1" in errors[0][1] and "would be skipped" in errors[1][1]


def test_next_offsets_are_this_workers_next_blocks(plan):
    """The look-up table of next non-zero blocks agrees with the per-frame worker's bisection."""
    L = FrameLayout(plan)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50 * L.elements).astype(np.float32)
    x.reshape(50, -1)[rng.random(50) < 0.6] = 0
    for window in (1, 3, 7, 64):
        w = _workers(BatchOmniWorker, L, [x] * N, "float", window)[0]
        for j in range(w.streams):
            assert w._first[j] == w._my_next(j, -1)
            for b in range(j, w.chunks, w.streams):
                assert w._after[b] == w._my_next(j, b)
        assert NONE in w._after.tolist() or not (~w.nonzero).any()


def test_streams_started_in_parts_continue_each_slots_copies(plan):
    """start_streams with each slot's rounds so far sends what start sends on a worker made with those
    copies; the streams beyond the tensor's are released from the outset."""
    from p4gen.host.worker import WorkerError

    L = FrameLayout(plan)
    _total, xs = expected(N, 4 * L.elements, "float32", 5, 1.0, L.elements)      # 4 blocks: 4 streams of 8 slots
    copies = [3, 0, 5, 1, 0, 0, 0, 0]
    whole = _workers(BatchOmniWorker, L, xs, "float", 8, copies=copies)[0]
    parts = _workers(BatchOmniWorker, L, xs, "float", 8)[0]
    ref = whole.start(0.0)
    assert parts.released().tolist() == [False] * 4 + [True] * 4
    F, lens = parts.start_streams(np.array([2, 0]), [5, 3], 0.0)
    G, glens = parts.start_streams(np.array([3, 1]), [1, 0], 0.0)
    got = [r[:n].tobytes() for r, n in zip(F, lens)] + [r[:n].tobytes() for r, n in zip(G, glens)]
    assert got == [ref[2], ref[0], ref[3], ref[1]]
    assert parts.started().tolist() == [True] * 4 + [False] * 4 and parts.busy().tolist() == parts.started().tolist()
    with pytest.raises(WorkerError, match=r"^stream 1 was started already$"):
        parts.start_streams(np.array([1]), [0], 0.0)
    with pytest.raises(WorkerError, match=r"^streams \[4\] must be in 0\.\.3$"):
        parts.start_streams(np.array([4]), [0], 0.0)
