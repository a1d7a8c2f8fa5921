"""OmniReduce worker: frames, round sequence, float and int all-reduce through the model, timers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4gen.host import codec
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.host.omni_packet import NONE, OmniFrames
from p4gen.host.omni_worker import OmniProtocolError, OmniWorker
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.host.worker import WorkerError

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
ME = P.endpoint("02:00:00:00:00:01", "10.0.0.1", 7000)
PLANS = {w: make_plan(make_spec(protocol="omnireduce", slots=4, elements_per_packet=8, value_width=w,
                                max_workers=8), load_target("bmv2")) for w in (16, 32)}


def allreduce(plan, tensors, window, loss=0.0, seed=0, threshold=0.0):
    L = W.FrameLayout(plan)
    n = len(tensors)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 7000 + i) for i in range(n)]
    m = SwitchModel(plan)
    m.load_config(job_config(plan, 2, addrs, slot_count=window))
    ws = [OmniWorker(L, x, job=2, window=window, n_workers=n, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                     threshold=threshold) for x, a in zip(tensors, addrs)]
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


def sparse(rng, n, blocks, k, density, dtype):
    xs = []
    for _ in range(n):
        if dtype == "int":
            x = rng.integers(-1000, 1001, size=(blocks, k)).astype(np.int32)
        else:
            x = (rng.standard_normal((blocks, k)) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
        x[rng.random(blocks) >= density] = 0
        xs.append(x.reshape(-1))
    return xs


def test_fast_frames_equal_the_field_by_field_frames():
    L = W.FrameLayout(PLANS[32])
    fr = OmniFrames(L, ME, SW, job=5)
    payload = np.arange(8, dtype=">u4").tobytes()
    for data in (True, False):
        for args in ((1, 0, 0, NONE), (77, (1 << 15) | 3, 130, 41)):
            fast = fr.contribution(*args, payload if data else None)
            assert fast == fr.reference(*args, data, payload)
            assert len(fast) == (L.frame_len if data else L.fixed_len)
            agg, pl = fr.parse_contribution(fast)
            assert (agg["tsi"], agg["pool_index"], agg["exponent"], agg["next"], agg["flags"]) == (*args, int(data))
            assert pl == (payload if data else None)
    # the plan's own codec builds the same bytes
    ref = P.contribution_frame(L, ME, SW, job=5, tsi=77, pool_index=3, exponent=130, next=41, values=None)
    assert ref == fr.contribution(77, 3, 130, 41, None)
    ref = P.contribution_frame(L, ME, SW, job=5, tsi=77, pool_index=3, exponent=130, next=41,
                               values=np.arange(8))
    assert ref == fr.contribution(77, 3, 130, 41, payload)


def test_round_sequence_tsi_and_next_encoding():
    """Blocks 0..5, window 2: streams {0, 2, 4} and {1, 3, 5}; the worker holds blocks 2 and 3."""
    L = W.FrameLayout(PLANS[32])
    x = np.zeros(48, np.int32)
    x[16:32] = 7
    w = OmniWorker(L, x, job=2, window=2, n_workers=2, src=ME, dst=SW, timeout=0.01, max_timeout=0.03)
    fr = w.frames
    first = w.start(0.0)
    sent = [fr.parse_contribution(f) for f in first]
    # discovery: header-only, tsi = 1 + slot (round 0), next = the first non-zero block of the stream
    assert [(a["tsi"], a["pool_index"], a["next"], p) for a, p in sent] == [(1, 0, 2, None), (2, 1, 3, None)]

    def result(tsi, pool, nxt, values=np.zeros(8, np.int64)):
        f = bytearray(fr.reference(tsi, pool, 0, nxt, True, np.asarray(values).astype(">u4").tobytes()))
        f[L.headers["agg"].offset] = (1 << 4) | 1          # msg_type result, flags data
        return bytes(f)

    assert w.receive(result(2, 0, 2), 0.0) == []           # not the outstanding tsi
    assert w.receive(result(1, 1 << 15, 2), 0.0) == []     # wrong copy
    assert w.stats.ignored == 2
    with pytest.raises(OmniProtocolError, match="beyond"):
        w.receive(result(1, 0, 4), 0.0)                    # would skip this worker's block 2
    nxt = w.receive(result(1, 0, 2), 0.0)
    a, p = fr.parse_contribution(nxt[0])
    # block 2 on copy 1 with data, tsi = 1 + slot 0 + window * round 1, no further block in the stream
    assert (a["tsi"], a["pool_index"], a["next"], a["flags"]) == (3, 1 << 15, NONE, 1)
    assert p == np.full(8, 7, ">u4").tobytes()
    assert w.complete.tolist() == [True, False, False, False, False, False]   # block 0 skipped
    assert w.receive(result(3, 1 << 15, NONE, np.full(8, 9)), 0.0) == []
    assert w.complete.tolist() == [True, False, True, False, True, False]
    assert w.tick(0.01) == [first[1]]                      # stream 1 still at discovery
    assert w.tick(0.025) == [] and w.tick(0.03) == [first[1]]
    with pytest.raises(OmniProtocolError, match="beyond"):
        w.receive(result(2, 1, NONE), 0.04)               # would skip this worker's block 3
    (b3,) = w.receive(result(2, 1, 3), 0.04)
    assert fr.parse_contribution(b3)[0]["tsi"] == 4
    assert not w.done and w.outstanding() == {1: 3}
    assert w.receive(result(4, (1 << 15) | 1, NONE, np.full(8, 14)), 0.05) == []
    assert w.done and w.outstanding() == {}
    assert codec.from_wire(w.result(), 32).tolist() == [0] * 16 + [9] * 8 + [14] * 8 + [0] * 16


def test_round_sequence_finishes():
    L = W.FrameLayout(PLANS[32])
    x = np.zeros(16, np.int32)
    x[8] = -3
    w = OmniWorker(L, x, job=2, window=1, n_workers=2, src=ME, dst=SW)
    fr = w.frames
    (d,) = w.start()
    assert fr.parse_contribution(d)[0]["next"] == 1

    def result(tsi, nxt, pool, values):
        payload = (np.asarray(values, np.int64) & 0xFFFFFFFF).astype(">u4").tobytes()
        f = bytearray(fr.reference(tsi, pool, 0, nxt, True, payload))
        f[L.headers["agg"].offset] = (1 << 4) | 1
        return bytes(f)

    (b1,) = w.receive(result(1, 1, 0, np.zeros(8, np.int64)))
    assert fr.parse_contribution(b1)[0]["tsi"] == 2
    assert w.receive(result(2, NONE, 1 << 15, np.arange(8) - 4)) == []
    assert w.done
    assert codec.from_wire(w.result(), 32).tolist() == [0] * 8 + list(range(-4, 4))


def test_int_allreduce_is_exact_under_loss():
    rng = np.random.default_rng(3)
    xs = sparse(rng, 3, 20, 8, 0.3, "int")
    ws, m = allreduce(PLANS[32], xs, 3, loss=0.2, seed=3)
    want = np.sum([x.astype(np.int64) for x in xs], axis=0)
    for w in ws:
        assert codec.from_wire(w.result(), 32).tolist() == want.tolist()
    assert m.stats["multicast"] == int(np.any([x.reshape(20, 8).any(axis=1) for x in xs], axis=0).sum()) + 3


@settings(max_examples=30)
@given(n=st.integers(2, 4), blocks=st.integers(1, 12), window=st.integers(1, 4), width=st.sampled_from([16, 32]),
       density=st.sampled_from([0.0, 0.1, 0.5, 1.0]), seed=st.integers(0, 2 ** 32 - 1),
       loss=st.sampled_from([0.0, 0.2]))
def test_float_allreduce_within_the_stream_bound(n, blocks, window, width, density, seed, loss):
    rng = np.random.default_rng(seed)
    k = 8
    xs = sparse(rng, n, blocks, k, density, "float")
    ws, _ = allreduce(PLANS[width], xs, window, loss=loss, seed=seed)
    S = min(window, blocks)
    exact = np.sum([x.astype(np.float64) for x in xs], axis=0).reshape(blocks, k)
    e = np.max([codec.exponent_of(x.reshape(blocks, k), axis=1) for x in xs], axis=0)
    for b in range(blocks):
        es = int(e[b % S::S].max())                     # the stream's agreed exponent
        q = sum(codec.quantize(x.reshape(blocks, k)[b], es, n, width).astype(np.int64) for x in xs)
        want = codec.dequantize(q, es, n, width).astype(np.float32)
        for w in ws:
            got = w.result().reshape(blocks, k)[b]
            assert np.array_equal(got, want)            # bit-exact: the switch's integer sum
            assert np.all(np.abs(got - exact[b]) <= codec.error_bound(es, n, width) + np.abs(exact[b]) * 2.0 ** -23)
            if not any(x.reshape(blocks, k)[b].any() for x in xs):
                assert not got.any()


def test_threshold_drops_small_blocks():
    xs = [np.concatenate([np.full(8, 0.001, np.float32), np.full(8, 5.0, np.float32)]) for _ in range(2)]
    ws, m = allreduce(PLANS[32], xs, 1, threshold=0.01)
    assert ws[0].nonzero.tolist() == [False, True]
    got = ws[0].result()
    assert got[:8].tolist() == [0.0] * 8 and np.allclose(got[8:], 10.0)
    assert m.stats["multicast"] == 2                     # discovery + block 1


def test_bad_inputs():
    L = W.FrameLayout(PLANS[32])
    with pytest.raises(WorkerError):
        OmniWorker(L, np.ones(3, np.float32), job=1, window=1, n_workers=2, src=SW, dst=SW, threshold=-1)
    with pytest.raises(WorkerError):
        OmniWorker(L, np.ones(3, np.int32), job=1, window=1, n_workers=2, src=SW, dst=SW, tsi_base=0xFFFFFFFF)
    sw = W.FrameLayout(make_plan(make_spec(slots=4, elements_per_packet=8), load_target("bmv2")))
    with pytest.raises(W.PacketError, match="omnireduce"):
        OmniWorker(sw, np.ones(3, np.float32), job=1, window=1, n_workers=2, src=SW, dst=SW)
    w = OmniWorker(L, np.ones(3, np.float32), job=1, window=1, n_workers=2, src=SW, dst=SW)
    assert w.receive(b"\0" * 20) == [] and w.stats.malformed == 1
    with pytest.raises(WorkerError):
        w.result()
