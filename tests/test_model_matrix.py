"""SwitchModel.process_matrix (frames as the rows of a byte matrix, results per egress port) == process."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.pass_shape import PassShape
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.batch import BatchPath
from p4gen.switch.batch_emit import BatchEmitter
from p4gen.switch.interpreter import PacketPath
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def _plan(variant, target="bmv2", elements=8, workers=4, slots=4):
    return make_plan(make_spec(slots=slots, elements_per_packet=elements, variant=variant, max_workers=workers),
                     load_target(target))


PLANS = {
    "reference": _plan("reference"),
    "hardened": _plan("hardened"),
    "hardened-2pass-2words": _plan("hardened", "tofino", 32, 40),
    # layouts of p4gen plan: 4 streamed passes in one pipe; 2 passes folded over 2 pipes (per-pipe arrays)
    "hardened-stream4": _plan("hardened", "tofino", 64, 40),
    "hardened-folded2": make_plan(make_spec(slots=4, elements_per_packet=24, max_workers=40), load_target("tofino"),
                                  PassShape(2, "resident", 2)),
    "omnireduce": make_plan(make_spec(protocol="omnireduce", slots=4, elements_per_packet=8), load_target("bmv2")),
}


def _addrs(n):
    return [WorkerAddr(1 + i % 8, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(n)]


def _per_port(outputs) -> dict[int, list[bytes]]:
    """Per-frame outputs of ``process`` (lists of (port, frame)) as each port's frames in order."""
    out: dict[int, list[bytes]] = {}
    for outs in outputs:
        for port, frame in outs:
            out.setdefault(port, []).append(bytes(frame))
    return out


def _run_matrix(model, frames, cuts) -> dict[int, list[bytes]]:
    """``frames`` (one length) through process_matrix in batches cut at ``cuts``."""
    got: dict[int, list[bytes]] = {}
    start = 0
    for cut in sorted(set(cuts)) + [len(frames)]:
        part = frames[start:max(start, cut)]
        start = max(start, cut)
        if not part:
            continue
        A8 = np.frombuffer(b"".join(f for f, _p in part), np.uint8).reshape(len(part), -1).copy()
        ports = np.array([p for _f, p in part], dtype=np.int64)
        for port, M in model.process_matrix(A8, ports):
            assert M.ndim == 2 and M.dtype == np.uint8
            got.setdefault(port, []).extend(r.tobytes() for r in M)
    return got


def _same_state(a, b):
    assert a.counter_read() == b.counter_read()
    for r in a.register_names():
        assert np.array_equal(a.register_read(r), b.register_read(r)), r


PKT = st.tuples(st.integers(0, 39), st.integers(0, 3), st.integers(0, 1), st.integers(0, 6), st.integers(0, 255),
                st.integers(0, 2 ** 32 - 1), st.integers(0, 9))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=60)
@given(stream=st.lists(PKT, max_size=120), n=st.integers(2, 40), cuts=st.lists(st.integers(0, 120), max_size=4),
       plain=st.booleans(), clean=st.booleans())
def test_matrix_equals_one_by_one(name, stream, n, cuts, plain, clean):
    """Any stream of frames of one length -- contributions with duplicates, stale and future chunks, frames
    of unknown workers or ports, plain L2 traffic, results sent to the switch -- cut into batches of any
    size (so both the vectorised path and the frame-by-frame one run): each port's frames, the counters
    and the registers are those of ``process``; with a multicast group whose replicas all have a
    result_dst or one with a plain replica too.  ``clean``: contributions only (unknown ingress ports
    aside), so that long batches take the vectorised path."""
    plan = PLANS[name]
    n = min(n, plan.params.max_workers)
    L = W.FrameLayout(plan)
    addrs = _addrs(n)
    one, mat = SwitchModel(plan), SwitchModel(plan)
    for m in (one, mat):
        m.load_config(job_config(plan, 1, addrs, slot_count=3, mgid=5, rid_base=50))
        if plain:
            m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(addrs)] + [(9, 0)])
        m.set_group(plan.params.flood_group_base + 1, [(2, 0), (3, 0)])
    frames = []
    for w, slot, cp, tsi, exp, seed, junk in stream:
        a = addrs[w % n]
        vals = np.random.default_rng(seed).integers(0, 2 ** L.value_width, L.elements)
        kw = dict(job=1, tsi=tsi, pool_index=(cp << 15) | slot, exponent=exp, values=vals)
        if name == "omnireduce":
            kw["next"] = tsi + 1 + seed % 3
        f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, **kw)
        port = a.port
        if clean and junk > 1:
            junk = 0
        if junk == 1:
            port += 100                            # unknown ingress port
        elif junk == 2:
            b = bytearray(f)
            b[L.headers["udp"].offset + 2:L.headers["udp"].offset + 4] = (4000).to_bytes(2, "big")
            f = bytes(b)                           # another UDP port: plain L2 traffic
        elif junk == 3:
            b = bytearray(f)
            b[L.headers["agg"].offset] |= 0x10
            f = bytes(b)                           # msg_type 1 (a result) sent to the switch: malformed
        frames.append((f, port))
    expected = _per_port(one.process(f, p) for f, p in frames)
    assert _run_matrix(mat, frames, cuts) == expected
    _same_state(mat, one)


def test_matrix_takes_the_vectorised_path_and_builds_port_matrices_as_views(monkeypatch):
    """A data-plane round (8 workers, whole chunks, retransmissions whose slot completed): the vectorised
    path runs once and no frame becomes a bytes object; identical to process."""
    plan = _plan("hardened", slots=64, elements=64, workers=8)
    L = W.FrameLayout(plan)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(8)]
    one, mat = SwitchModel(plan), SwitchModel(plan)
    for m in (one, mat):
        m.load_config(job_config(plan, 1, addrs))
    rng = np.random.default_rng(11)
    frames = []
    for c in range(100):
        for a in addrs:
            frames.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c,
                                                pool_index=((c // 64 & 1) << 15) | c % 64, exponent=127,
                                                values=rng.integers(0, 2 ** 20, L.elements)), a.port))
        if c % 10 == 9:
            frames.append(frames[-3])             # a retransmission to a complete slot: unicast back
    calls = []
    monkeypatch.setattr(BatchPath, "process_batch", lambda self, p: calls.append(len(p)) or [])
    monkeypatch.setattr(PacketPath, "process", lambda self, f, p: calls.append(1) or [])
    got = _run_matrix(mat, frames, [400])
    assert calls == []
    monkeypatch.undo()
    assert got == _per_port(one.process(f, p) for f, p in frames)
    assert mat.stats["multicast"] == 100 and mat.stats["unicast"] == 10
    _same_state(mat, one)


def test_hypothesis_streams_reach_the_vectorised_path(monkeypatch):
    """The property above is not vacuous: a clean stream of 40 frames in one batch is vectorised."""
    plan = PLANS["hardened"]
    L = W.FrameLayout(plan)
    addrs = _addrs(3)
    m = SwitchModel(plan)
    m.load_config(job_config(plan, 1, addrs, slot_count=3, mgid=5, rid_base=50))
    seen = []
    orig = BatchEmitter.by_port
    monkeypatch.setattr(BatchEmitter, "by_port", lambda self, *a: seen.append(1) or orig(self, *a))
    frames = [(P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c, pool_index=c % 3,
                                    exponent=1, values=np.arange(L.elements)), a.port)
              for c in range(14) for a in addrs[:3]]
    _run_matrix(m, frames[:40], [])
    assert seen == [1]


# -- rounds of several lengths: OmniReduce's header-only and data contributions ----------------------

def _run_groups(model, frames, cuts) -> dict[int, list[bytes]]:
    """``frames`` (any lengths) through process_groups in rounds cut at ``cuts``, each round's frames grouped
    by length with their positions, as the data plane hands a round over."""
    got: dict[int, list[bytes]] = {}
    start = 0
    for cut in sorted(set(cuts)) + [len(frames)]:
        part = frames[start:max(start, cut)]
        start = max(start, cut)
        if not part:
            continue
        by: dict[int, list] = {}
        for k, (f, p) in enumerate(part):
            by.setdefault(len(f), []).append((f, p, k))
        groups = [(np.frombuffer(b"".join(f for f, _p, _k in g), np.uint8).reshape(len(g), -1).copy(),
                   np.array([p for _f, p, _k in g], dtype=np.int64), np.array([k for _f, _p, k in g], dtype=np.int64))
                  for g in by.values()]
        for port, M in model.process_groups(groups, len(part)):
            assert M.ndim == 2 and M.dtype == np.uint8
            got.setdefault(port, []).extend(r.tobytes() for r in M)
    return got


# a round: how it strays from the job's sequence (0: an earlier round's tsi again, 1: a slot out of range),
# exponent, seed, workers missing, junk
OMNI_ROUND = st.tuples(st.integers(0, 9), st.integers(0, 255), st.integers(0, 2 ** 32 - 1), st.integers(0, 255),
                       st.integers(0, 12))


@pytest.mark.slow
@settings(max_examples=80)
@given(rounds=st.lists(OMNI_ROUND, max_size=30), n=st.integers(2, 8), cuts=st.lists(st.integers(0, 240), max_size=3),
       clean=st.booleans())
def test_omnireduce_rounds_of_two_lengths_equal_one_by_one(rounds, n, cuts, clean):
    """OmniReduce rounds (each worker's contribution to one slot copy and tsi, header-only or with data,
    some workers missing, in shuffled order), with duplicates and stale rounds, frames of unknown ports,
    plain L2 traffic, results sent to the switch, data-flagged frames cut short and frames shorter than
    the fixed headers, cut into data-plane rounds of any size and grouped by length: each port's frames,
    the counters and the registers are those of ``process``.  ``clean``: contributions only, so long
    rounds take the vectorised path."""
    plan = PLANS["omnireduce"]
    L = W.FrameLayout(plan)
    addrs = _addrs(n)
    one, grp = SwitchModel(plan), SwitchModel(plan)
    for m in (one, grp):
        m.load_config(job_config(plan, 1, addrs, slot_count=3, mgid=5, rid_base=50))
    frames = []
    for k, (stray, exp, seed, missing, junk) in enumerate(rounds):
        # round k of the job: slot k % 3, copy (k // 3) % 2, tsi k + 1, as workers number them
        slot, cp, tsi = k % 3 + (3 if stray == 1 else 0), (k // 3) % 2, max(1, k + 1 - (6 if stray == 0 else 0))
        rng = np.random.default_rng(seed)
        for w in rng.permutation(n).tolist():
            if missing >> w & 1 and missing & 1:
                continue
            a = addrs[w]
            data = rng.random() < 0.5
            f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=tsi,
                                     pool_index=(cp << 15) | slot, exponent=exp, next=tsi + 1 + int(rng.integers(3)),
                                     values=rng.integers(0, 2 ** L.value_width, L.elements) if data else None)
            port, j = a.port, 0 if clean else junk - int(rng.integers(2)) * 7
            if j == 1:
                port += 100                        # unknown ingress port
            elif j == 2:
                b = bytearray(f)
                b[L.headers["udp"].offset + 2:L.headers["udp"].offset + 4] = (4000).to_bytes(2, "big")
                f = bytes(b)                       # another UDP port: plain L2 traffic
            elif j == 3:
                b = bytearray(f)
                b[L.headers["agg"].offset] |= 0x10
                f = bytes(b)                       # msg_type 1 (a result) sent to the switch: malformed
            elif j == 4 and data:
                f = f[:L.fixed_len]                # flagged as carrying data, cut short: malformed
            elif j == 5:
                f = f[:L.fixed_len - 3]            # shorter than the fixed headers
            frames.append((f, port))
    expected = _per_port(one.process(f, p) for f, p in frames)
    assert _run_groups(grp, frames, cuts) == expected
    _same_state(grp, one)


def test_an_omnireduce_round_takes_the_vectorised_path(monkeypatch):
    """A data-plane round of 8 OmniReduce workers, header-only and data contributions mixed, rounds
    completing (multicast) and retransmissions to complete slots (unicast): the vectorised path runs and
    no frame becomes a bytes object; identical to process."""
    plan = make_plan(make_spec(protocol="omnireduce", slots=64, elements_per_packet=16, max_workers=8),
                     load_target("bmv2"))
    L = W.FrameLayout(plan)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(8)]
    one, grp = SwitchModel(plan), SwitchModel(plan)
    for m in (one, grp):
        m.load_config(job_config(plan, 1, addrs))
    rng = np.random.default_rng(5)
    frames = []
    for s in range(40):
        for a in addrs:
            data = rng.random() < 0.3
            frames.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=1 + s,
                                                pool_index=s, exponent=127, next=0xFFFFFFFF,
                                                values=rng.integers(0, 2 ** 20, L.elements) if data else None),
                           a.port))
        if s % 10 == 9:
            frames.append(frames[-3])             # a retransmission to a complete slot: unicast back
    assert len({len(f) for f, _p in frames}) == 2
    calls = []
    monkeypatch.setattr(BatchPath, "process_batch", lambda self, p: calls.append(len(p)) or [])
    monkeypatch.setattr(PacketPath, "process", lambda self, f, p: calls.append(1) or [])
    got = _run_groups(grp, frames, [200])
    assert calls == []
    monkeypatch.undo()
    assert got == _per_port(one.process(f, p) for f, p in frames)
    assert grp.stats["multicast"] == 40 and grp.stats["unicast"] == 4
    _same_state(grp, one)
