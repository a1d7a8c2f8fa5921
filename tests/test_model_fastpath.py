"""The model's fast path against p4gen.ops and against the table-driven reference execution."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from p4gen import decision, ops
from p4gen import protocols
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.batch_emit import BatchEmitter
from p4gen.switch.model import FAST_KERNELS, ModelError, SwitchModel, WorkerAddr, job_config
from p4gen.pass_shape import PassShape
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

U32 = st.integers(0, 2 ** 32 - 1)
SMALL = st.integers(0, 5)
INTS = st.one_of(SMALL, U32)
SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48870)


# -- kernels == ops ---------------------------------------------------------------
@given(op=st.sampled_from(sorted(ops.OPS["chunk"])), stored=INTS, tsi=INTS, bound=INTS)
def test_chunk_kernel(op, stored, tsi, bound):
    assert FAST_KERNELS["chunk"][op](stored, tsi, bound) == ops.chunk_op(op, stored, tsi, ops.INT, bound)


@given(op=st.sampled_from(sorted(ops.OPS["bitmap"])), this=INTS, other=INTS,
       bit=st.integers(0, 31), zero=st.booleans())
def test_bitmap_kernels(op, this, other, bit, zero):
    mask = 0 if zero else 1 << bit
    t, o, s = ops.bitmap_op(op, this, other, mask, 32)
    assert FAST_KERNELS["bitmap"][op](this, other, mask, 2 ** 32 - 1) == (t, o, int(bool(s)))


@given(op=st.sampled_from(sorted(ops.OPS["counter"])), count=INTS, n=st.integers(1, 300))
def test_counter_kernels(op, count, n):
    assert FAST_KERNELS["counter"][op](count, n, 2 ** 32 - 1) == ops.counter_op(op, count, n, 32)


@given(op=st.sampled_from(sorted(ops.OPS["exponent"])), stored=st.integers(0, 255), exp=st.integers(0, 255))
def test_exponent_kernels(op, stored, exp):
    assert FAST_KERNELS["exponent"][op](stored, exp) == ops.exponent_op(op, stored, exp)


@given(op=st.sampled_from(sorted(ops.OPS["values"])),
       stored=st.lists(U32, min_size=4, max_size=4), pkt=st.lists(U32, min_size=4, max_size=4))
def test_values_kernels(op, stored, pkt):
    rows = np.array([stored], dtype=np.uint32)
    p = np.array([pkt], dtype=">u4")
    carried = FAST_KERNELS["values"][op](rows, b"frame", lambda frame: p)
    exp_new, exp_carried = zip(*(ops.values_op(op, s, q, 32) for s, q in zip(stored, pkt)))
    assert rows[0].tolist() == list(exp_new)
    assert (pkt if carried is None else np.asarray(carried)[0].tolist()) == list(exp_carried)


def test_every_switchml_op_has_a_kernel():
    roles = {s.role for v in ("reference", "hardened") for s in protocols.decision_table(v).steps}
    assert roles <= set(FAST_KERNELS)
    for r in roles:
        assert set(FAST_KERNELS[r]) == set(ops.OPS[r])


# -- fast path == reference execution ---------------------------------------------------
def _plan(variant, target="bmv2", elements=8, workers=4):
    return make_plan(make_spec(slots=4, elements_per_packet=elements, variant=variant, max_workers=workers),
                     load_target(target))


PLANS = {
    "reference": _plan("reference"),
    "hardened": _plan("hardened"),
    "hardened-2pass-2words": _plan("hardened", "tofino", 32, 40),
    # layouts of p4gen plan: 4 streamed passes in one pipe; 2 passes folded over 2 pipes (per-pipe arrays)
    "hardened-stream4": make_plan(make_spec(slots=4, elements_per_packet=64, max_workers=40), load_target("tofino")),
    "hardened-folded2": make_plan(make_spec(slots=4, elements_per_packet=24, max_workers=40), load_target("tofino"),
                                  PassShape(2, "resident", 2)),
}


def _addrs(n):
    return [WorkerAddr(1 + i % 8, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(n)]


def _models(plan, n):
    out = []
    for fast in (True, False):
        m = SwitchModel(plan, fast=fast)
        m.load_config(job_config(plan, 1, _addrs(n), slot_count=3, mgid=5, rid_base=50))
        out.append(m)
    return out


PKT = st.tuples(st.integers(0, 39), st.integers(0, 3), st.integers(0, 1), st.integers(0, 6), st.integers(0, 255),
                st.integers(0, 2 ** 32 - 1))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=60)
@given(stream=st.lists(PKT, max_size=60), n=st.integers(2, 40))
def test_fast_equals_reference(name, stream, n):
    plan = PLANS[name]
    if n > plan.params.max_workers:
        n = plan.params.max_workers
    L = W.FrameLayout(plan)
    fast, ref = _models(plan, n)
    addrs = _addrs(n)
    for w, slot, cp, tsi, exp, seed in stream:
        a = addrs[w % n]
        vals = np.random.default_rng(seed).integers(0, 2 ** L.value_width, L.elements)
        f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=tsi,
                                 pool_index=(cp << 15) | slot, exponent=exp, values=vals)
        assert fast.process(f, a.port) == ref.process(f, a.port)
    assert fast.counter_read() == ref.counter_read()
    for r in fast.register_names():
        assert np.array_equal(fast.register_read(r), ref.register_read(r)), r


# -- packet handling ----------------------------------------------------------------------
@pytest.fixture()
def job():
    plan = PLANS["hardened"]
    m = SwitchModel(plan)
    addrs = _addrs(2)
    m.load_config(job_config(plan, 1, addrs, slot_count=2, mgid=5, rid_base=50))
    return plan, W.FrameLayout(plan), m, addrs


def _frame(L, a, **kw):
    args = dict(job=1, tsi=1, pool_index=0, exponent=130, values=np.arange(L.elements))
    args.update(kw)
    return P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, **args)


def _valid_checksum(L, frame):
    hdr = frame[L.ipv4_offset:L.ipv4_offset + L.ipv4_len]
    return W.ipv4_checksum(hdr) == 0


def test_multicast_rewrites_each_replica(job):
    plan, L, m, addrs = job
    m.set_group(5, [(addrs[0].port, 50), (addrs[1].port, 51), (9, 0), (9, 77)])
    assert m.process(_frame(L, addrs[0], exponent=120), addrs[0].port) == []
    out = m.process(_frame(L, addrs[1], exponent=131), addrs[1].port)
    assert [p for p, _ in out] == [addrs[0].port, addrs[1].port, 9, 9]
    for (port, fr), a in zip(out[:2], addrs):
        r = P.parse_result(L, fr)
        assert r.headers["ethernet"]["dst_addr"] == a.mac and r.headers["ethernet"]["src_addr"] == SW.mac
        assert r.headers["ipv4"]["dst_addr"] == a.ip and r.headers["ipv4"]["src_addr"] == SW.ip
        assert r.headers["udp"]["dst_port"] == a.udp_port and r.headers["udp"]["src_port"] == SW.port
        assert r.headers["udp"]["checksum"] == 0 and _valid_checksum(L, fr)
        assert r.exponent == 131 and r.values.tolist() == (2 * np.arange(L.elements)).tolist()
    # rid 0 and an unknown rid: the result leaves unchanged (still a result, checksum fixed)
    plain = out[2][1]
    assert plain == out[3][1]
    hdrs = L.headers["ipv4"].decode(plain)
    assert hdrs["dst_addr"] == SW.ip and _valid_checksum(L, plain)
    assert m.stats["multicast"] == 1 and m.stats["absorbed"] == 1


def test_retransmission_to_complete_slot_is_unicast(job):
    plan, L, m, addrs = job
    m.process(_frame(L, addrs[0]), addrs[0].port)
    m.process(_frame(L, addrs[1]), addrs[1].port)
    out = m.process(_frame(L, addrs[0]), addrs[0].port)
    assert len(out) == 1 and out[0][0] == addrs[0].port
    r = P.parse_result(L, out[0][1])
    assert r.headers["ipv4"]["dst_addr"] == addrs[0].ip and r.headers["udp"]["dst_port"] == addrs[0].udp_port
    assert r.values.tolist() == (2 * np.arange(L.elements)).tolist() and _valid_checksum(L, out[0][1])
    assert m.stats["unicast"] == 1


def test_drops_and_counters(job):
    plan, L, m, addrs = job
    a = addrs[0]
    f = _frame(L, a)
    assert m.process(f[:-1], a.port) == []                       # truncated payload
    assert m.process(f[:20], a.port) == []                       # truncated IPv4
    assert m.process(f[:8], a.port) == []                        # not even Ethernet
    assert m.stats["drop_malformed"] == 3
    assert m.process(_frame(L, a, msg_type=1), a.port) == []
    assert m.stats["drop_malformed"] == 4
    assert m.process(f, a.port + 1) == []                        # wrong ingress port
    assert m.process(_frame(L, a, job=2), a.port) == []
    assert m.stats["drop_unknown"] == 2
    assert m.process(_frame(L, a, pool_index=2), a.port) == []  # job has 2 slots
    assert m.stats["drop_bad_slot"] == 1
    packets, nbytes = m.counter_read()["drop_bad_slot"]
    assert (packets, nbytes) == (1, len(f))


def test_l2_forwarding(job):
    plan, L, m, addrs = job
    m.set_group(plan.params.flood_group_base + 3, [(1, 0), (2, 0)])
    arp = bytes.fromhex("ffffffffffff020000000009" "0806") + bytes(28)
    assert m.process(arp, 3) == [(1, arp), (2, arp)]
    m.insert("l2_forward", {"dst_addr": "ff:ff:ff:ff:ff:ff"}, "l2_unicast", {"port": 4})
    assert m.process(arp, 3) == [(4, arp)]
    # IPv4 with options and UDP to another port are plain traffic too
    f = bytearray(_frame(L, addrs[0]))
    f[L.ipv4_offset] = 0x46
    assert m.process(bytes(f), 3) == [(1, bytes(f)), (2, bytes(f))]
    assert m.stats["l2_unicast"] == 1 and m.stats["l2_flood"] == 2


def test_control_plane_validation(job):
    plan, L, m, addrs = job
    with pytest.raises(ModelError, match="unknown table"):
        m.insert("nope", {}, "x")
    with pytest.raises(ModelError, match="9 bits"):
        m.insert("l2_forward", {"dst_addr": 1}, "l2_unicast", {"port": 512})
    with pytest.raises(ModelError, match="no action"):
        m.insert("l2_forward", {"dst_addr": 1}, "set_worker", {})
    with pytest.raises(ModelError, match="lacks the parameter"):
        m.insert("l2_forward", {"dst_addr": 1}, "l2_unicast", {})
    with pytest.raises(ModelError, match="no key"):
        m.insert("l2_forward", {"dst_addr": 1, "x": 2}, "l2_unicast", {"port": 1})
    with pytest.raises(ModelError, match="already holds"):
        m.load_config(job_config(plan, 1, addrs, slot_count=2, mgid=5, rid_base=50))
    with pytest.raises(ModelError, match="exceeds"):
        m.insert("workers", {"job": 9, "ingress_port": 1, "src_addr": 1, "src_port": 1}, "set_worker",
                 {"worker_id": 0, "word": 0, "mask": 1, "num_workers": 2, "slot_base": 3, "slot_count": 2,
                  "mgid": 1})
    with pytest.raises(ModelError, match="const|unknown table"):
        m.insert("dt_values", {}, "set_values_op", {"op": 0})
    m.insert("l2_forward", {"dst_addr": 5}, "l2_unicast", {"port": 1})
    m.modify("l2_forward", {"dst_addr": 5}, "l2_unicast", {"port": 2})
    assert m.read("l2_forward") == [{"table": "l2_forward", "match": {"dst_addr": 5}, "action": "l2_unicast",
                                     "params": {"port": 2}}]
    m.delete("l2_forward", {"dst_addr": 5})
    assert m.read("l2_forward") == []
    with pytest.raises(ModelError, match="holds no entry"):
        m.delete("l2_forward", {"dst_addr": 5})
    with pytest.raises(ModelError):
        m.set_group(0, [])


def test_registers_read_reset(job):
    plan, L, m, addrs = job
    m.process(_frame(L, addrs[0], tsi=4, pool_index=1 | 1 << 15), addrs[0].port)
    sc = (1 << 1) | 1
    name = {role: [r.name for r in plan.registers_of(role)] for role in ("chunk", "bitmap", "counter", "exponent",
                                                                         "values")}
    assert m.register_read(name["chunk"][0])[sc] == 4
    assert m.register_read(name["bitmap"][0])[1].tolist() == [0, 1]
    assert m.register_read(name["counter"][0])[sc] == 1 and m.register_read(name["exponent"][0])[sc] == 130
    by_elements = {tuple(r.elements): r.name for r in plan.registers_of("values")}
    assert m.register_read(by_elements[(0, 1)])[sc].tolist() == [0, 1]
    assert m.register_read(by_elements[(2, 3)])[sc].tolist() == [2, 3]
    m.register_write(name["counter"][0], 0, 7)
    assert m.register_read(name["counter"][0])[0] == 7
    m.register_reset()
    assert all(not m.register_read(r).any() for r in m.register_names())
    with pytest.raises(ModelError):
        m.register_read("nope")


def test_custom_decision_table_is_validated():
    plan = PLANS["hardened"]
    table = plan.decision.to_dict()
    table["steps"][0]["rules"][0]["op"] = "teleport"
    with pytest.raises(ModelError, match="invalid"):
        SwitchModel(plan, decision=table)
    assert SwitchModel(plan, decision=protocols.decision_table("reference")).decision.variant == "reference"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=60)
@given(stream=st.lists(st.tuples(PKT, st.booleans()), max_size=80), n=st.integers(2, 40),
       cuts=st.lists(st.integers(0, 80), max_size=4))
def test_batches_equal_one_by_one(name, stream, n, cuts):
    """process_batch over any split of the stream == process frame by frame (outputs, counters, registers)."""
    plan = PLANS[name]
    n = min(n, plan.params.max_workers)
    L = W.FrameLayout(plan)
    one, ref = _models(plan, n)
    batch = SwitchModel(plan)
    batch.load_config(job_config(plan, 1, _addrs(n), slot_count=3, mgid=5, rid_base=50))
    for m in (one, batch):
        m.set_group(plan.params.flood_group_base + 1, [(2, 0), (3, 0)])
    addrs = _addrs(n)
    frames = []
    for (w, slot, cp, tsi, exp, seed), junk in stream:
        a = addrs[w % n]
        vals = np.random.default_rng(seed).integers(0, 2 ** L.value_width, L.elements)
        f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=tsi,
                                 pool_index=(cp << 15) | slot, exponent=exp, values=vals)
        port = a.port
        if junk:                                  # mixed into the batch: each kind of frame the model drops or forwards
            kind = seed % 6
            if kind == 0:
                f = f[:30]                        # truncated IPv4: malformed
            elif kind == 1:
                f = f[:-3]                        # truncated payload: malformed
            elif kind == 2:
                b = bytearray(f)
                b[L.headers["udp"].offset + 2:L.headers["udp"].offset + 4] = (4000).to_bytes(2, "big")
                f = bytes(b)                      # another UDP port: plain L2 traffic
            elif kind == 3:
                f = f + b"tail"                   # trailing bytes after the data header
            elif kind == 4:
                port = a.port + 100               # unknown ingress port
            else:
                b = bytearray(f)
                b[L.headers["agg"].offset] |= 0x10
                f = bytes(b)                      # msg_type 1 (a result) sent to the switch: malformed
        frames.append((f, port))
    expected = [one.process(f, p) for f, p in frames]
    got, start = [], 0
    for cut in sorted(set(cuts)) + [len(frames)]:
        got += batch.process_batch(frames[start:max(start, cut)])
        start = max(start, cut)
    assert got == expected
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r


def _junk(L, f, kind):
    """Frame ``f`` made into traffic the switch forwards or drops, by kind (cycling)."""
    b = bytearray(f)
    kind %= 4
    if kind == 0:
        return f[:30]                             # truncated IPv4: malformed
    if kind == 1:
        return f[:-3]                             # truncated payload: malformed
    if kind == 2:
        b[L.headers["udp"].offset + 2:L.headers["udp"].offset + 4] = (4000).to_bytes(2, "big")
        return bytes(b)                           # another UDP port: plain L2 traffic
    b[L.headers["agg"].offset] |= 0x10
    return bytes(b)                               # msg_type 1 (a result) sent to the switch: malformed


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("plain_replica", [False, True])
@pytest.mark.parametrize("vectorised", [True, False])
def test_batch_path_is_vectorised_and_matches_on_a_long_stream(name, plain_replica, vectorised, monkeypatch):
    """A long stream in large batches (the vectorised path): several packets per slot in one batch,
    retransmissions, frames of two lengths in one batch, frames of unknown workers, frames the switch
    forwards or drops as malformed or out of the slot range, multicast to a group whose replicas all have a
    result_dst (or one that has a plain replica too), identical to frame-by-frame processing; also through
    the batch path of plans the vectorised one cannot run (per-frame decisions, value ops at once)."""
    plan = PLANS[name]
    L = W.FrameLayout(plan)
    n = 3
    addrs = _addrs(n)
    one, batch = SwitchModel(plan), SwitchModel(plan)
    for m in (one, batch):
        m.load_config(job_config(plan, 1, addrs, slot_count=3, mgid=5, rid_base=50))
        m.set_group(5, [(a.port, 50 + i) for i, a in enumerate(addrs)] + ([(9, 0)] if plain_replica else []))
    assert batch.batch_path.vectorised
    batch.batch_path.vectorised = vectorised
    calls = {"one group": 0, "groups": 0}
    for fn, key in (("replicate_one_group", "one group"), ("replicate_groups", "groups")):
        orig = getattr(BatchEmitter, fn)

        def spy(self, *a, _orig=orig, _key=key):
            calls[_key] += 1
            return _orig(self, *a)
        monkeypatch.setattr(BatchEmitter, fn, spy)
    rng = np.random.default_rng(7)
    frames = []
    for c in range(200):
        for w in rng.permutation(n).tolist() + ([int(rng.integers(n))] if c % 3 == 0 else []):
            a = addrs[w]
            f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c // 3,
                                     pool_index=((c // 3 & 1) << 15) | c % 3, exponent=int(rng.integers(256)),
                                     values=rng.integers(0, 2 ** 32, L.elements))
            frames.append((f + b"tail" if c % 7 == 0 else f, a.port))
            if c % 13 == 5:                       # unknown workers: another source port, a port beyond 255
                other = P.Endpoint(a.mac, a.ip, a.udp_port + 1)
                frames.append((P.contribution_frame(L, other, SW, job=1, tsi=c // 3, pool_index=c % 3,
                                                    exponent=1, values=np.arange(L.elements)), a.port))
            if c % 29 == 7:
                frames.append((f, a.port + 256))
            if c % 11 == 3:
                frames.append((_junk(L, f, c // 11), a.port))
            if c % 17 == 9:                       # slot 3: outside the job's 3 slots
                frames.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c // 3,
                                                    pool_index=3, exponent=1, values=np.arange(L.elements)),
                               a.port))
    expected = [one.process(f, p) for f, p in frames]
    got = []
    for k in range(0, len(frames), 64):         # 64 frames: batches end inside rounds too
        got += batch.process_batch(frames[k:k + 64])
    assert got == expected
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r
    for stat in ("drop_unknown", "drop_malformed", "drop_bad_slot", "l2_flood"):
        assert batch.stats[stat] > 0, stat
    if vectorised:
        assert calls["groups" if plain_replica else "one group"] > 0
        assert calls["one group" if plain_replica else "groups"] == 0
    else:
        assert calls == {"one group": 0, "groups": 0}


def test_batch_with_two_jobs_and_groups_matches_one_by_one():
    """Two jobs (different multicast groups, one with an empty group) interleaved in one batch."""
    plan = make_plan(make_spec(slots=4, elements_per_packet=8, variant="reference", max_workers=8, jobs=2),
                     load_target("bmv2"))
    L = W.FrameLayout(plan)
    a1, a2 = _addrs(2), [WorkerAddr(5 + i, 0x020000000101 + i, 0x0A000101 + i, 31000 + i) for i in range(3)]
    one, batch = SwitchModel(plan), SwitchModel(plan)
    for m in (one, batch):
        m.load_config(job_config(plan, 1, a1, slot_base=0, slot_count=2, mgid=5, rid_base=50))
        m.load_config(job_config(plan, 2, a2, slot_base=2, slot_count=2, mgid=6, rid_base=60))
        m.set_group(6, [])
    rng = np.random.default_rng(3)
    frames = []
    for c in range(12):
        for job, addrs in ((1, a1), (2, a2)):
            for a in addrs:
                frames.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=job, tsi=c,
                                                    pool_index=((c // 2 & 1) << 15) | c % 2, exponent=1,
                                                    values=rng.integers(0, 2 ** 32, L.elements)), a.port))
    expected = [one.process(f, p) for f, p in frames]
    assert batch.process_batch(frames) == expected
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r


@pytest.mark.parametrize("n, size", [(8, 80), (8, 100), (3, 48)])
def test_batch_with_runs_of_one_length_or_several_matches_one_by_one(n, size):
    """Rounds of n workers in batches of whole rounds (every emitted value a run of n adds: long or short
    runs) or cut by the batch size (runs of unequal length, and batches that start mid-round from the
    register)."""
    plan = make_plan(make_spec(slots=8, elements_per_packet=8, variant="hardened", max_workers=8),
                     load_target("bmv2"))
    L = W.FrameLayout(plan)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(n)]
    one, batch = SwitchModel(plan), SwitchModel(plan)
    for m in (one, batch):
        m.load_config(job_config(plan, 1, addrs, slot_count=4, mgid=5, rid_base=50))
    rng = np.random.default_rng(5)
    frames = []
    for c in range(40):
        for a in addrs:
            frames.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c,
                                                pool_index=((c // 4 & 1) << 15) | c % 4, exponent=1,
                                                values=rng.integers(0, 2 ** 32, L.elements)), a.port))
    expected = [one.process(f, p) for f, p in frames]
    got = []
    for k in range(0, len(frames), size):
        got += batch.process_batch(frames[k:k + size])
    assert got == expected
    assert batch.stats["multicast"] == 40
    assert batch.counter_read() == one.counter_read()
    for r in one.register_names():
        assert np.array_equal(batch.register_read(r), one.register_read(r)), r
