"""OmniReduce plans in the switch model: header-only packets, minimum next offset, frames that grow."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import ModelError, SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48870)
PLAN = make_plan(make_spec(slots=64, protocol="omnireduce"), load_target("bmv2"))
SMALL = make_plan(make_spec(slots=4, elements_per_packet=8, protocol="omnireduce", max_workers=4),
                  load_target("bmv2"))


def _addrs(n):
    return [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(n)]


def _model(plan, n, fast=True, slot_count=4):
    m = SwitchModel(plan, fast=fast)
    m.load_config(job_config(plan, 1, _addrs(n), slot_count=slot_count, mgid=5, rid_base=50))
    return m


def _frame(L, a, values, nxt, tsi=1, pool_index=0, exponent=0):
    return P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=tsi, pool_index=pool_index,
                                exponent=exponent, values=values, next=nxt)


def _checksum_ok(L, frame):
    return W.ipv4_checksum(frame[L.ipv4_offset:L.ipv4_offset + L.ipv4_len]) == 0


def test_plan_is_accepted_and_codec_knows_header_only():
    L = W.FrameLayout(PLAN)
    assert L.omni and L.passes == 1
    a = _addrs(1)[0]
    f = _frame(L, a, None, 7)
    assert len(f) == L.fixed_len and not L.has_data(f)
    hdrs, vals = L.decode(f)
    assert vals is None and hdrs["agg"]["next"] == 7 and hdrs["agg"]["flags"] == 0
    assert hdrs["ipv4"]["total_len"] == L.fixed_len - L.ipv4_offset and _checksum_ok(L, f)
    g = _frame(L, a, np.arange(L.elements), 9)
    assert len(g) == L.frame_len and L.decode(g)[0]["agg"]["flags"] == 1
    with pytest.raises(W.PacketError, match="next="):
        P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=1, pool_index=0,
                             exponent=0, values=np.arange(L.elements))


def test_round_with_header_only_workers_sums_exactly():
    """Workers 0 and 2 send a block, worker 1 only its next offset; the result is the exact sum."""
    L = W.FrameLayout(PLAN)
    m = _model(PLAN, 3)
    addrs = _addrs(3)
    m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(addrs)])
    rng = np.random.default_rng(1)
    x0 = rng.integers(0, 2 ** 32, L.elements, dtype=np.uint64)
    x2 = rng.integers(0, 2 ** 32, L.elements, dtype=np.uint64)
    assert m.process(_frame(L, addrs[0], x0, 40, pool_index=3), addrs[0].port) == []
    assert m.process(_frame(L, addrs[1], None, 12, pool_index=3), addrs[1].port) == []
    out = m.process(_frame(L, addrs[2], x2, 25, pool_index=3), addrs[2].port)
    assert [p for p, _ in out] == [a.port for a in addrs]
    exact = ((x0 + x2) & 0xFFFFFFFF).tolist()
    for (port, fr), a in zip(out, addrs):
        r = P.parse_result(L, fr)
        assert r.values.tolist() == exact
        assert r.next == 12                                   # the smallest next offset of the round
        assert r.headers["agg"]["flags"] == 1 and r.headers["agg"]["msg_type"] == 1
        assert r.headers["ipv4"]["dst_addr"] == a.ip and _checksum_ok(L, fr)
    assert m.stats["multicast"] == 1 and m.stats["absorbed"] == 2
    sc = (3 << 1) | 0
    assert m.register_read("minnext")[sc] == 12


def test_header_only_first_and_last_packets_grow_the_result():
    """First packet header-only (clear), last packet header-only (read): the frame grows by the data header."""
    L = W.FrameLayout(PLAN)
    m = _model(PLAN, 3)
    addrs = _addrs(3)
    m.set_group(5, [(addrs[0].port, 0)])                   # rid 0: the result leaves unchanged
    x1 = np.arange(L.elements, dtype=np.uint64) * 3 + 1
    assert m.process(_frame(L, addrs[0], None, 100), addrs[0].port) == []
    assert m.process(_frame(L, addrs[1], x1, 80), addrs[1].port) == []
    head_only = _frame(L, addrs[2], None, 90)
    out = m.process(head_only, addrs[2].port)
    assert len(out) == 1
    fr = out[0][1]
    assert len(fr) == len(head_only) + L.data_bytes == L.frame_len
    ip = L.headers["ipv4"].decode(fr)
    udp = L.headers["udp"].decode(fr)
    assert ip["total_len"] == L.headers["ipv4"].decode(head_only)["total_len"] + L.data_bytes
    assert ip["total_len"] == len(fr) - L.ipv4_offset and udp["length"] == ip["total_len"] - L.ipv4_len
    assert _checksum_ok(L, fr) and udp["checksum"] == 0
    hdrs, vals = L.decode(fr)                                # rid 0: addresses unchanged, still a result
    assert vals.tolist() == x1.tolist() and hdrs["agg"]["next"] == 80
    assert hdrs["agg"]["flags"] == 1 and hdrs["agg"]["msg_type"] == 1
    # a header-only retransmission to the complete slot: unicast, grown, same sum and next
    out = m.process(_frame(L, addrs[0], None, 100), addrs[0].port)
    assert len(out) == 1 and out[0][0] == addrs[0].port
    r = P.parse_result(L, out[0][1])
    assert r.values.tolist() == x1.tolist() and r.next == 80 and _checksum_ok(L, out[0][1])
    assert r.headers["ipv4"]["dst_addr"] == addrs[0].ip and r.headers["udp"]["dst_port"] == addrs[0].udp_port
    assert m.stats["unicast"] == 1 and m.stats["multicast"] == 1


def test_all_header_only_round_returns_zeros():
    L = W.FrameLayout(SMALL)
    m = _model(SMALL, 2)
    addrs = _addrs(2)
    m.set_group(5, [(addrs[0].port, 50)])
    m.process(_frame(L, addrs[0], None, 7, pool_index=1), addrs[0].port)
    out = m.process(_frame(L, addrs[1], None, 5, pool_index=1), addrs[1].port)
    r = P.parse_result(L, out[0][1])
    assert r.values.tolist() == [0] * L.elements and r.next == 5


def test_malformed_and_truncated():
    L = W.FrameLayout(SMALL)
    m = _model(SMALL, 2)
    a = _addrs(2)[0]
    full = _frame(L, a, np.arange(L.elements), 3)
    assert m.process(full[:-1], a.port) == []               # flags say data, data is cut
    assert m.process(_frame(L, a, None, 3)[:-1], a.port) == []   # header-only, agg cut
    assert m.stats["drop_malformed"] == 2
    assert m.process(_frame(L, a, None, 3) + b"\0" * 4, a.port) == []  # trailing bytes are payload, not data
    assert m.stats["absorbed"] == 1


def test_omnireduce_table_needs_an_omnireduce_plan():
    sw = make_plan(make_spec(slots=4, elements_per_packet=8, variant="hardened"), load_target("bmv2"))
    with pytest.raises(ModelError, match="minnext"):
        SwitchModel(sw, decision=SMALL.decision)


def test_switchml_frames_unchanged_by_omnireduce_support():
    """A SwitchML result keeps agg.flags as sent (the omnireduce rewrite does not apply)."""
    sw = make_plan(make_spec(slots=4, elements_per_packet=8, variant="hardened"), load_target("bmv2"))
    L = W.FrameLayout(sw)
    assert not L.omni
    m = SwitchModel(sw)
    addrs = _addrs(2)
    m.load_config(job_config(sw, 1, addrs, slot_count=2, mgid=5, rid_base=50))
    m.set_group(5, [(9, 0)])
    hdrs = {"ethernet": {"dst_addr": SW.mac, "src_addr": addrs[0].mac},
            "ipv4": {"src_addr": addrs[0].ip, "dst_addr": SW.ip},
            "udp": {"src_port": addrs[0].udp_port, "dst_port": SW.port},
            "agg": {"job": 1, "tsi": 1, "flags": 6}}
    m.process(L.encode(hdrs, np.arange(8)), addrs[0].port)
    hdrs["ipv4"]["src_addr"], hdrs["udp"]["src_port"] = addrs[1].ip, addrs[1].udp_port
    out = m.process(L.encode(hdrs, np.arange(8)), addrs[1].port)
    assert L.headers["agg"].decode(out[0][1])["flags"] == 6


# -- fast path == reference path, batches == one by one -------------------------------------------------------
OPKT = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 1), st.integers(0, 4), st.booleans(),
                 st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1), st.integers(0, 9))


def _stream_frames(L, stream, n):
    addrs = _addrs(n)
    frames = []
    for w, slot, cp, tsi, data, nxt, seed, junk in stream:
        a = addrs[w % n]
        vals = np.random.default_rng(seed).integers(0, 2 ** 32, L.elements) if data else None
        f = _frame(L, a, vals, nxt, tsi=tsi, pool_index=(cp << 15) | slot, exponent=seed % 256)
        if junk == 0:
            f = f[:30]                                   # truncated: malformed
        elif junk == 1:
            f = f[:L.fixed_len + 2] if data else f       # flags say data, data cut short
        frames.append((f, a.port))
    return frames


@pytest.mark.slow
@settings(max_examples=60)
@given(stream=st.lists(OPKT, max_size=60), n=st.integers(2, 4))
def test_fast_equals_reference(stream, n):
    L = W.FrameLayout(SMALL)
    fast, ref = _model(SMALL, n, True, 3), _model(SMALL, n, False, 3)
    for m in (fast, ref):
        m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(_addrs(n))] + [(9, 0)])
    for f, port in _stream_frames(L, stream, n):
        assert fast.process(f, port) == ref.process(f, port)
    assert fast.counter_read() == ref.counter_read()
    for r in fast.register_names():
        assert np.array_equal(fast.register_read(r), ref.register_read(r)), r


@pytest.mark.slow
@settings(max_examples=60)
@given(stream=st.lists(OPKT, max_size=60), n=st.integers(2, 4), cuts=st.lists(st.integers(0, 60), max_size=4))
def test_batches_equal_one_by_one(stream, n, cuts):
    L = W.FrameLayout(SMALL)
    one, batch = _model(SMALL, n, True, 3), _model(SMALL, n, True, 3)
    for m in (one, batch):
        m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(_addrs(n))] + [(9, 0)])
    frames = _stream_frames(L, stream, n)
    expected = [one.process(f, p) for f, p in frames]
    got, start = [], 0
    for cut in sorted(set(cuts)) + [len(frames)]:
        got += batch.process_batch(frames[start:max(start, cut)])
        start = max(start, cut)
    assert got == expected
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r


@pytest.mark.parametrize("plain_replica", [False, True])
def test_long_stream_in_large_batches_matches_one_by_one(plain_replica):
    """The vectorised batch path on OmniReduce traffic: header-only and data packets to the same slots in one
    batch, last packets (and retransmissions) without data whose frames grow, identical to one by one."""
    L = W.FrameLayout(SMALL)
    n = 3
    addrs = _addrs(n)
    one, batch = _model(SMALL, n, True, 3), _model(SMALL, n, True, 3)
    for m in (one, batch):
        m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(addrs)] + ([(9, 0)] if plain_replica else []))
    assert batch.batch_path.vectorised
    rng = np.random.default_rng(11)
    frames = []
    for c in range(240):
        for w in rng.permutation(n).tolist() + ([int(rng.integers(n))] if c % 4 == 0 else []):
            vals = rng.integers(0, 2 ** 32, L.elements) if rng.random() < 0.5 else None
            frames.append((_frame(L, addrs[w], vals, int(rng.integers(1, 1000)), tsi=c // 3,
                                  pool_index=((c // 3 & 1) << 15) | c % 3, exponent=int(rng.integers(256))),
                           addrs[w].port))
    expected = [one.process(f, p) for f, p in frames]
    got = []
    for k in range(0, len(frames), 64):
        got += batch.process_batch(frames[k:k + 64])
    assert got == expected
    grown = sum(1 for (f, _p), outs in zip(frames, expected) for _q, fr in outs if len(fr) > len(f))
    assert grown > 0
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r
