"""Hardened variant and OmniReduce: one corrupted frame with a huge tsi from a registered worker does not strand
its slot copy.

The chunk register of a copy takes a newer tsi only within two of the job's
windows (``advance_window``): the protocol never moves a copy further, so a
frame from further ahead is dropped as stale and changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from p4gen import ops
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.host.omni_worker import OmniWorker
from p4gen.host.worker import Worker
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target

SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
PLAN = make_plan(make_spec(variant="hardened", slots=64, elements_per_packet=8, max_workers=4), load_target("bmv2"))
WINDOW = 32


def _run(corrupt_tsi: int | None, fast: bool = True, batch: bool = False, max_time: float = 5.0):
    """Two workers all-reduce int tensors; after worker 0's first frame, a copy of it with ``corrupt_tsi``."""
    L = W.FrameLayout(PLAN)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 7000 + i) for i in range(2)]
    m = SwitchModel(PLAN, fast=fast)
    m.load_config(job_config(PLAN, 2, addrs, slot_count=WINDOW))
    rng = np.random.default_rng(7)
    tensors = [rng.integers(-1000, 1001, size=2000).astype(np.int32) for _ in addrs]
    ws = [Worker(L, x, job=2, window=WINDOW, n_workers=2, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                 mode="int", timeout=0.01, max_timeout=0.04) for x, a in zip(tensors, addrs)]
    port = {a.port: i for i, a in enumerate(addrs)}
    q = [(i, f) for i, w in enumerate(ws) for f in w.start(0.0)]
    if corrupt_tsi is not None:
        # a registered worker's frame, its tsi (and values) corrupted on the way
        hdrs, values = L.decode(q[0][1])
        hdrs["agg"] = dict(hdrs["agg"], tsi=corrupt_tsi)
        q.insert(1, (0, L.encode(hdrs, np.full(len(values), 12345, dtype=np.int64))))
    now = 0.0
    while not all(w.done for w in ws):
        if now > max_time:
            return None, m
        if not q:
            now += 0.01
            q = [(i, f) for i, w in enumerate(ws) for f in w.tick(now)]
            continue
        if batch and len(q) > 1:
            burst, q = q, []
            outs = m.process_batch([(f, addrs[i].port) for i, f in burst])
        else:
            i, f = q.pop(0)
            outs = [m.process(f, addrs[i].port)]
        for out in outs:
            for p, frame in out:
                j = port[p]
                q += [(j, g) for g in ws[j].receive(frame, now)]
    want = (tensors[0].astype(np.int64) + tensors[1]) & 0xFFFFFFFF
    return [(w.result().astype(np.int64) & 0xFFFFFFFF).tolist() == want.tolist() for w in ws], m


@pytest.mark.parametrize("tsi", [0xFFFFFFFF, 0x80000000, 1000])
@pytest.mark.parametrize("path", ["fast", "reference", "batch"])
def test_one_frame_with_a_huge_tsi_does_not_stall_the_slot(tsi, path):
    ok, m = _run(tsi, fast=(path != "reference"), batch=(path == "batch"))
    assert ok == [True, True], "the job stalled" if ok is None else "a wrong sum"
    assert m.stats["drop_stale"] >= 1          # the corrupted frame, dropped as stale


def test_the_same_job_without_the_frame():
    ok, m = _run(None)
    assert ok == [True, True] and m.stats["drop_stale"] == 0


def test_window_op():
    # within two windows of the stored chunk a newer tsi moves the copy on, beyond it is dropped as stale
    stored, bound = 100, 2 * WINDOW
    assert ops.chunk_op("advance_window", stored, stored + bound, ops.INT, bound) == (stored + bound, ops.CMP_GT)
    assert ops.chunk_op("advance_window", stored, stored + bound + 1, ops.INT, bound) == (stored, ops.CMP_LT)
    assert ops.chunk_op("advance_window", stored, stored, ops.INT, bound) == (stored, ops.CMP_EQ)
    assert ops.chunk_op("advance_window", stored, stored - 1, ops.INT, bound) == (stored, ops.CMP_LT)
    assert ops.chunk_op("advance", stored, stored + bound + 1) == (stored + bound + 1, ops.CMP_GT)


# -- OmniReduce: a slot's rounds are numbered like chunks, so the same bounded advance applies --------------

OMNI = make_plan(make_spec(protocol="omnireduce", slots=64, elements_per_packet=8, max_workers=4), load_target("bmv2"))


def _omni_run(corrupt_tsi: int | None, decision=None, fast: bool = True, max_time: float = 5.0):
    """Two OmniReduce workers all-reduce sparse int tensors (most blocks zero, so rounds skip blocks); after
    worker 0's first frame, a frame of worker 0's first slot with ``corrupt_tsi`` and junk values."""
    L = W.FrameLayout(OMNI)
    addrs = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 7000 + i) for i in range(2)]
    m = SwitchModel(OMNI, decision=decision, fast=fast)
    m.load_config(job_config(OMNI, 2, addrs, slot_count=WINDOW))
    rng = np.random.default_rng(11)
    blocks = 12 * WINDOW
    tensors = []
    for _ in addrs:
        x = rng.integers(-1000, 1001, size=(blocks, L.elements)).astype(np.int32)
        x[rng.random(blocks) > 0.3] = 0                  # about 70% of each worker's blocks are zero
        tensors.append(x.reshape(-1))
    ws = [OmniWorker(L, x, job=2, window=WINDOW, n_workers=2, src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SW,
                     mode="int", timeout=0.01, max_timeout=0.04) for x, a in zip(tensors, addrs)]
    port = {a.port: i for i, a in enumerate(addrs)}
    q = [(i, f) for i, w in enumerate(ws) for f in w.start(0.0)]
    if corrupt_tsi is not None:
        agg, _payload = ws[0].frames.parse_contribution(q[0][1])
        junk = np.full(L.elements, 12345, dtype=">u4").tobytes()
        q.insert(1, (0, ws[0].frames.contribution(corrupt_tsi, agg["pool_index"], agg["exponent"], 3, junk)))
    now = 0.0
    while not all(w.done for w in ws):
        if now > max_time:
            return None, m, ws
        if not q:
            now += 0.01
            q = [(i, f) for i, w in enumerate(ws) for f in w.tick(now)]
            continue
        i, f = q.pop(0)
        for p, frame in m.process(f, addrs[i].port):
            j = port[p]
            q += [(j, g) for g in ws[j].receive(frame, now)]
    want = (tensors[0].astype(np.int64) + tensors[1]) & 0xFFFFFFFF
    return [(w.result().astype(np.int64) & 0xFFFFFFFF).tolist() == want.tolist() for w in ws], m, ws


@pytest.mark.parametrize("tsi", [0xFFFFFFFF, 0x80000000, 1000])
@pytest.mark.parametrize("fast", [True, False])
def test_omnireduce_survives_one_frame_with_a_far_ahead_tsi(tsi, fast):
    ok, m, ws = _omni_run(tsi, fast=fast)
    assert ok == [True, True], "the job stalled" if ok is None else "a wrong sum"
    assert m.stats["drop_stale"] >= 1                 # the corrupted frame, dropped as stale
    # the rounds skipped blocks (gaps of many blocks between a slot's rounds), yet no legitimate frame was stale
    assert sum(ws[0].rounds_per_stream) < ws[0].chunks


def test_omnireduce_without_the_bound_is_stranded_by_that_frame():
    # the table before: the chunk step moved a copy on however far ahead a tsi was
    table = OMNI.decision.to_dict()
    next(st for st in table["steps"] if st["role"] == "chunk")["rules"][0]["op"] = "advance"
    ok, m, ws = _omni_run(0xFFFFFFFF, decision=table, max_time=2.0)
    assert ok is None and m.stats["drop_stale"] > 1
    assert not ws[0].done
    ok, m, ws = _omni_run(None, decision=table)
    assert ok == [True, True]                         # without the frame that table works


def test_omnireduce_slot_rounds_move_on_by_two_windows_per_copy():
    ok, m, ws = _omni_run(None)
    assert ok == [True, True] and m.stats["drop_stale"] == 0
    # per slot copy, the stored tsi is that of the slot's last round on the copy: 1 + slot + window * round
    name = OMNI.registers_of("chunk")[0].name
    w, chunk = ws[0], m.register_read(name)
    for j in range(w.streams):
        rounds = w.rounds_per_stream[j]
        last = {(r & 1): 1 + j + WINDOW * r for r in range(rounds)}
        for c, t in last.items():
            assert chunk[(j << 1) | c] == t, (j, c)
