"""Packet fuzzing against the switch model: hostile frames are counted and dropped, never change a sum.

* ``process``, ``process_batch`` (vectorised: batches of at least 32 frames),
  ``process_matrix`` (the data plane's path: runs of frames of one length as
  byte matrices, outputs per egress port) and the reference interpreter
  (``fast=False``) give identical outputs, registers and counters on every
  fuzzed sequence of valid and hostile frames, for the hardened and reference
  SwitchML variants and OmniReduce.
* Each hostile frame lands in the counter :data:`fuzz_frames.KINDS` names
  for it, and in no other.
* A real all-reduce runs while hostile frames arrive between its packets:
  its sums stay exact on every variant (the reference variant without
  replays from registered workers, see ``test_reference_replay_hazard``).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

import aggnet
import fuzz_frames as F
from p4gen import wire as W
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target

JOB, OTHER = 3, 9
VARIANTS = ("hardened", "reference", "omnireduce")


def _plan(variant: str):
    """8 slots of 4 elements, 4 workers per job, tables for two jobs."""
    proto = {"protocol": "omnireduce"} if variant == "omnireduce" else {"variant": variant}
    return make_plan(make_spec(slots=8, elements_per_packet=4, max_workers=4, jobs=2, **proto), load_target("bmv2"))


PLANS = {v: _plan(v) for v in VARIANTS}
A = [WorkerAddr(1 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(3)]
B = [WorkerAddr(4 + i, 0x020000000200 + i, 0x0A000101 + i, 41000 + i) for i in range(2)]


def _configured(variant: str, fast: bool = True) -> SwitchModel:
    plan = PLANS[variant]
    m = SwitchModel(plan, fast=fast)
    m.load_config(job_config(plan, JOB, A, slot_base=0, slot_count=4, mgid=7, rid_base=100))
    m.load_config(job_config(plan, OTHER, B, slot_base=4, slot_count=4, mgid=8, rid_base=200))
    return m


def _target(variant: str) -> F.Target:
    return F.Target(W.Layout(PLANS[variant]), JOB, A, slot_count=4, other_job=OTHER, other_workers=B)


def _registers(m: SwitchModel) -> dict:
    return {r: m.register_read(r).tolist() for r in m.register_names()}


def _sequence(t: F.Target, items, valid_seed: int) -> list[tuple[bytes, int]]:
    """Frames: each hostile item (copies times), and between them valid contributions on a few slots."""
    rng = random.Random(valid_seed)
    frames = []
    for kind, seed, copies in items:
        for _ in range(rng.randrange(4)):
            w = rng.choice(t.workers)
            f = F.contribution(t, rng, w, slot=rng.randrange(2), tsi=rng.randrange(4) * 2 + rng.randrange(2))
            frames.append((f, w.port))
            t.seen.append((f, w.port))
        frame, port, _counters = F.junk(t, kind, random.Random(seed))
        frames += [(frame, port)] * copies
    return frames


@pytest.mark.parametrize("variant", VARIANTS)
@given(items=st.lists(F.junk_strategy(list(F.KINDS)), min_size=1, max_size=40),
       valid_seed=st.integers(0, 2 ** 16), cuts=st.lists(st.integers(32, 160), min_size=1, max_size=4))
# found by this test: an OmniReduce batch whose value adds were all cut off by a later reset made
# process_batch fail ("slice step cannot be zero") where process went on
@example(items=[("runt", 0, 1)] * 8 + [("runt", 0, 50)] * 2, valid_seed=5511, cuts=[32])
def test_process_and_process_batch_agree(variant, items, valid_seed, cuts):
    one, batch, ref = _configured(variant), _configured(variant), _configured(variant, fast=False)
    mat = _configured(variant)
    frames = _sequence(_target(variant), items, valid_seed)
    want = [one.process(f, p) for f, p in frames]
    assert [ref.process(f, p) for f, p in frames] == want
    got, i, k = [], 0, 0
    while i < len(frames):
        n = cuts[k % len(cuts)]
        got += batch.process_batch(frames[i:i + n])
        i, k = i + n, k + 1
    assert got == want
    assert _matrix_runs(mat, frames, cuts) == _per_port(want)
    assert batch.counter_read() == one.counter_read() == ref.counter_read() == mat.counter_read()
    assert _registers(batch) == _registers(one) == _registers(ref) == _registers(mat)


def _per_port(outputs) -> dict[int, list[bytes]]:
    """Per-frame outputs (lists of (port, frame)) as each egress port's frames in order."""
    out: dict[int, list[bytes]] = {}
    for outs in outputs:
        for port, frame in outs:
            out.setdefault(port, []).append(bytes(frame))
    return out


def _matrix_runs(m: SwitchModel, frames, cuts) -> dict[int, list[bytes]]:
    """``frames`` through ``process_matrix`` as the data plane hands them over: batches cut at ``cuts``,
    each split into runs of one frame length; each egress port's frames in order."""
    got: dict[int, list[bytes]] = {}
    i, k = 0, 0
    while i < len(frames):
        part = frames[i:i + cuts[k % len(cuts)]]
        i, k = i + len(part), k + 1
        j = 0
        while j < len(part):
            e = j + 1
            while e < len(part) and len(part[e][0]) == len(part[j][0]):
                e += 1
            run = part[j:e]
            j = e
            A8 = np.frombuffer(b"".join(f for f, _p in run), np.uint8).reshape(len(run), -1).copy()
            for port, M in m.process_matrix(A8, np.array([p for _f, p in run], dtype=np.int64)):
                got.setdefault(port, []).extend(r.tobytes() for r in M)
    return got


@pytest.mark.parametrize("variant", VARIANTS)
@given(kind=st.sampled_from(list(F.KINDS)), seed=st.integers(0, 2 ** 32 - 1))
def test_each_hostile_frame_is_counted_under_its_counter(variant, kind, seed):
    m = _configured(variant)
    t = _target(variant)
    rng = random.Random(seed)
    for _ in range(3):                       # some state, and frames to replay
        w = rng.choice(A)
        f = F.contribution(t, rng, w, slot=0, tsi=0, copy=0)
        m.process(f, w.port)
        t.seen.append((f, w.port))
    before, regs = m.stats, _registers(m)
    frame, port, counters = F.junk(t, kind, rng)
    out = m.process(frame, port)
    delta = {k: v - before[k] for k, v in m.stats.items() if v != before[k] and k != "agg_rx"}
    assert sum(delta.values()) == 1 and set(delta) <= counters, (kind, delta)
    if kind not in ("replay", "not_aggregation"):
        assert out == [] and _registers(m) == regs


# ---------------------------------------------------------------- a real job beside the junk
def _junk_beside_a_job(variant: str, n: int, chunks: int, window: int, seed: int, items) -> None:
    plan = PLANS[variant]
    net = aggnet.Net(plan, n, chunks, window, seed, fifo=True)
    t = F.Target(net.layout, aggnet.JOB, net.addrs, slot_count=window)
    rng = random.Random(seed)
    pending = list(items)
    counted = {k: 0 for k in net.model.stats}
    for _ in range(20000):
        if all(w.done for w in net.workers) and not pending:
            break
        if pending and rng.random() < 0.3:
            kind, s, copies = pending.pop()
            frame, port, counters = F.junk(t, kind, random.Random(s))
            for _c in range(copies):
                before = net.model.stats
                for eport, out in net.model.process(frame, port):
                    if eport in net.port_of:
                        net.down[net.port_of[eport]].append(out)
                delta = {k: v - before[k] for k, v in net.model.stats.items() if v != before[k] and k != "agg_rx"}
                assert sum(delta.values()) == 1 and set(delta) <= counters, (kind, delta)
                for k in delta:
                    counted[k] += 1
            continue
        ups = [w for w in range(n) if net.up[w]]
        downs = [w for w in range(n) if net.down[w]]
        if ups and (not downs or rng.random() < 0.5):
            w = rng.choice(ups)
            t.seen.append((net.up[w][0], net.addrs[w].port))
            net.deliver_up_fifo(w)
        elif downs:
            net.deliver_down_fifo(rng.choice(downs))
        else:
            deadlines = [d for d in (w.next_deadline() for w in net.workers) if d is not None]
            net.tick(max(0.0, min(deadlines) - net.now) if deadlines else 0.01)
    net.drain()
    for w in net.workers:
        np.testing.assert_array_equal(w.result_wire() if hasattr(w, "result_wire") else w._out, net.expected)


@pytest.mark.parametrize("variant", ["hardened", "reference"])
@given(n=st.integers(2, 4), chunks=st.integers(1, 8), window=st.integers(1, 3), seed=st.integers(0, 2 ** 16),
       data=st.data())
def test_real_job_sums_stay_exact_beside_hostile_frames(variant, n, chunks, window, seed, data):
    items = data.draw(st.lists(F.junk_strategy(F.kinds_for(variant)), min_size=1, max_size=30))
    _junk_beside_a_job(variant, n, chunks, window, seed, items)


# ---------------------------------------------------------------- what the reference variant cannot do
def test_reference_replay_hazard_and_hardened_fix():
    """One replayed frame from a registered worker corrupts a later sum on the reference variant.

    Worker 0's chunk-0 frame (copy 0) arrives again after worker 0 moved to chunk 1 (copy 1), which
    cleared its copy-0 bit: the hazard the proofs show without FIFO delivery.  The hardened variant
    keeps the chunk index per slot copy and answers the replay with chunk 0's result instead."""
    outcomes = {}
    for variant in ("reference", "hardened"):
        plan = aggnet.small_plan(variant, slots=8)
        L = W.Layout(plan)
        m = SwitchModel(plan)
        addrs = A[:2]
        m.load_config(job_config(plan, JOB, addrs, slot_base=0, slot_count=1, mgid=7, rid_base=100))
        ones = np.ones(L.elements, dtype=np.int64)

        def send(w, tsi, copy, values):
            f = F.P.contribution_frame(L, F.P.Endpoint(addrs[w].mac, addrs[w].ip, addrs[w].udp_port), F.SWITCH,
                                       job=JOB, tsi=tsi, pool_index=copy << int(L.params["slot_bits"]),
                                       exponent=0, values=values)
            return f, m.process(f, addrs[w].port)

        old, _ = send(0, 0, 0, ones)               # chunk 0 on copy 0: worker 0, then worker 1 completes it
        _f, out = send(1, 0, 0, ones)
        assert out                                  # the multicast result of chunk 0
        send(0, 1, 1, ones)                         # chunk 1 on copy 1 (clears worker 0's copy-0 bit)
        m.process(old, addrs[0].port)               # now the replay of worker 0's chunk-0 frame (copy 0)
        send(1, 1, 1, ones)
        send(0, 2, 0, 2 * ones)                     # chunk 2 back on copy 0: both workers contribute 2s
        _f, out = send(1, 2, 0, 2 * ones)
        results = [F.P.parse_result(L, fr) for _p, fr in out]
        outcomes[variant] = (m.stats, results[0].values.tolist() if results else None)
    ref_stats, ref_sum = outcomes["reference"]
    hard_stats, hard_sum = outcomes["hardened"]
    k = len(hard_sum)
    # hardened: the replay is answered with chunk 0's stored result, chunk 2 sums to 2 + 2
    assert hard_sum == [4] * k and hard_stats["unicast"] == 1 and hard_stats["drop_duplicate"] == 0
    # reference: the replay is taken as chunk 2's first contribution (1s), worker 0's real chunk-2
    # frame is then dropped as a duplicate, and the result is 1 + 2
    assert ref_sum == [3] * k and ref_stats["drop_duplicate"] == 1
