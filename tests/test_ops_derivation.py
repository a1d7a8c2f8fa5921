"""Each register operation is defined once, in p4gen.ops: changing it there changes every execution.

The software data plane's per-packet kernels, the batch path's generated decision loop and its value
tables are derived from ``p4gen.ops`` (``p4gen.switch.kernels``); the proofs run ``p4gen.ops`` over Z3.
A mutated operation must therefore move the reference path (``fast=False``), the fast path, the batch
path and the Z3 encoding together.
"""

from __future__ import annotations

import numpy as np
import pytest
import z3

from p4gen import decision, ops
from p4gen import protocols
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.emit.p4 import render_p4
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch import kernels
from p4gen.switch.model import VEC_MIN_BATCH, SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target
from p4gen.verify.explore import bmc
from p4gen.verify.protocol import SwitchML
from p4gen.verify.z3alg import Z3

PLAN = make_plan(make_spec(slots=4, elements_per_packet=8, variant="reference", max_workers=4), load_target("bmv2"))
SW = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48870)
ADDRS = [WorkerAddr(1 + i, 0x020000000001 + i, 0x0A000001 + i, 30000 + i) for i in range(3)]
ROUNDS = 12                                   # 3 workers x 12 chunks: one batch long enough to be vectorised


def _swap_last_mid(orig):
    """``counter_op`` whose inc_mod reports last and mid the wrong way round (written over the algebra,
    so that every interpretation of p4gen.ops sees the same mutant)."""
    def counter_op(op, count, n, bits=32, A=ops.INT):
        new, state = orig(op, count, n, bits, A)
        if op != "inc_mod":
            return new, state
        code = lambda v: A.const(v, 8)  # noqa: E731
        wraps = A.eq(A.add(count, A.const(1, bits), bits), n)
        return new, A.ite(A.eq(count, A.const(0, bits)), code(ops.COUNT_FIRST),
                          A.ite(wraps, code(ops.COUNT_MID), code(ops.COUNT_LAST)))
    return counter_op


def _frames():
    L = W.FrameLayout(PLAN)
    out = []
    for c in range(ROUNDS):
        for i, a in enumerate(ADDRS):
            out.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SW, job=1, tsi=c,
                                             pool_index=(((c // 4) & 1) << 15) | c % 4, exponent=1,
                                             values=np.full(L.elements, 10 ** i)), a.port))
    return out


def _model(fast=True):
    m = SwitchModel(PLAN, fast=fast)
    m.load_config(job_config(PLAN, 1, ADDRS, mgid=5, rid_base=50))
    return m


def _runs():
    """Per path: per frame, the number of frames out and the first one's value bytes."""
    frames = _frames()
    assert len(frames) >= VEC_MIN_BATCH
    L = W.FrameLayout(PLAN)
    vals = lambda outs: (len(outs), outs[0][1][L.values_offset:L.frame_len] if outs else b"")  # noqa: E731
    slow, fast, batch = _model(fast=False), _model(), _model()
    got = {"slow": [vals(slow.process(f, p)) for f, p in frames],
           "fast": [vals(fast.process(f, p)) for f, p in frames]}
    assert batch.batch_path.vectorised and batch.program.values_batchable
    got["batch"] = [vals(o) for o in batch.process_batch(frames)]
    return got


def _z3_state(count: int, n: int) -> int:
    c, k = z3.Int("count"), z3.Int("n")
    _new, state = ops.counter_op("inc_mod", c, k, 32, Z3)
    return z3.simplify(z3.substitute(state, (c, z3.IntVal(count)), (k, z3.IntVal(n)))).as_long()


def _bmc_violation():
    cex = bmc(SwitchML(protocols.decision_table("reference"), fifo=True), 3, 2)
    return None if cex is None else (cex.prop, cex.steps)


TOFINO_PLAN = make_plan(make_spec(slots=4, elements_per_packet=8, variant="reference", max_workers=4),
                        load_target("tofino"))


def _p4(plan) -> str:
    return render_p4(plan)


def test_a_mutated_op_moves_the_slow_fast_batch_and_z3_paths_together(monkeypatch):
    L = W.FrameLayout(PLAN)
    full_sum = (np.full(L.elements, 111, dtype=">u4")).tobytes()       # 1 + 10 + 100 per element
    two = (np.full(L.elements, 11, dtype=">u4")).tobytes()              # the first two workers only
    before = _runs()
    assert before["slow"] == before["fast"] == before["batch"]
    assert before["fast"][:3] == [(0, b""), (0, b""), (3, full_sum)]   # the last worker's packet multicasts
    assert _z3_state(1, 3) == ops.COUNT_MID and _z3_state(2, 3) == ops.COUNT_LAST
    assert kernels.derive().fast["counter"]["inc_mod"](1, 3, 2 ** 32 - 1) == (2, ops.COUNT_MID)
    assert _bmc_violation() is None
    p4_before = {"bmv2": _p4(PLAN), "tofino": _p4(TOFINO_PLAN)}
    assert "rv = 2;" in p4_before["tofino"]          # inc_mod: LAST from the stateful ALU, MID is 0

    monkeypatch.setattr(ops, "counter_op", _swap_last_mid(ops.counter_op))
    after = _runs()
    assert after["slow"] == after["fast"] == after["batch"]
    assert after["fast"][:3] == [(0, b""), (3, two), (0, b"")]       # a result of two contributions, early
    assert after["fast"] == [(0, b""), (3, two), (0, b"")] * ROUNDS
    assert _z3_state(1, 3) == ops.COUNT_LAST and _z3_state(2, 3) == ops.COUNT_MID
    assert kernels.derive().fast["counter"]["inc_mod"](1, 3, 2 ** 32 - 1) == (2, ops.COUNT_LAST)
    assert _bmc_violation() == ("exact_result", 2)
    # the P4 of both targets follows: the bmv2 action's state choice and Tofino's RegisterAction change
    p4_after = {"bmv2": _p4(PLAN), "tofino": _p4(TOFINO_PLAN)}
    for target in p4_after:
        assert p4_after[target] != p4_before[target], target
    ra = lambda t: t[t.index("worker_count_inc_mod_ra"):t.index("};", t.index("worker_count_inc_mod_ra"))]  # noqa: E731
    assert ra(p4_before["tofino"]) != ra(p4_after["tofino"])


NEW_VALUES_OPS = {
    # affine: the batch path's segment sums run it
    "add_keep": (lambda stored, pkt, bits, A: (A.add(stored, pkt, bits), pkt), True),
    # not affine (a comparison): batches of a table that uses it run frame by frame
    "max": (lambda stored, pkt, bits, A: (A.ite(A.ugt(pkt, stored), pkt, stored),) * 2, False),
}


@pytest.mark.parametrize("new_op", sorted(NEW_VALUES_OPS))
def test_an_op_added_to_ops_runs_in_every_path(monkeypatch, new_op):
    """A values op added to p4gen.ops and named by a decision table in place of ``add``: the model executes it
    in the reference, fast and batch paths from its p4gen.ops definition alone."""
    orig = ops.values_op
    body, batchable = NEW_VALUES_OPS[new_op]

    def values_op(op, stored, pkt, bits, A=ops.INT):
        return body(stored, pkt, bits, A) if op == new_op else orig(op, stored, pkt, bits, A)

    monkeypatch.setattr(ops, "values_op", values_op)
    monkeypatch.setitem(ops.OPS, "values", {**ops.OPS["values"], new_op: "a new op"})
    table = protocols.decision_table("reference").to_dict()
    for rule in next(s for s in table["steps"] if s["role"] == "values")["rules"]:
        if rule["op"] == "add":
            rule["op"] = new_op
    frames = _frames()
    L = W.FrameLayout(PLAN)
    outs, regs = {}, {}
    for name, fast in (("slow", False), ("fast", True), ("batch", True)):
        m = SwitchModel(PLAN, decision=table, fast=fast)
        m.load_config(job_config(PLAN, 1, ADDRS, mgid=5, rid_base=50))
        res = m.process_batch(frames) if name == "batch" else [m.process(f, p) for f, p in frames]
        outs[name] = [o[0][1][L.values_offset:L.frame_len] if o else b"" for o in res]
        regs[name] = [m.register_read(r).tolist() for r in m.register_names()]
        if name == "batch":
            assert m.program.values_batchable is batchable
    assert outs["slow"] == outs["fast"] == outs["batch"]
    assert regs["slow"] == regs["fast"] == regs["batch"]
    # workers send 1, 10 and 100: the last one's packet leaves with its own values (add_keep) or the max
    assert outs["fast"][2] == np.full(L.elements, 100, dtype=">u4").tobytes()
    m = SwitchModel(PLAN, decision=table)
    m.load_config(job_config(PLAN, 1, ADDRS, mgid=5, rid_base=50))
    for f, p in frames[:3]:
        m.process(f, p)
    row = m.register_read("values0")[0 << 1 | 0].tolist()
    assert row == ([111, 111] if new_op == "add_keep" else [100, 100])


@pytest.mark.parametrize("role", sorted(kernels.SCALAR_ROLES))
def test_every_op_of_a_scalar_role_has_a_derived_kernel(role):
    assert set(kernels.derive().fast[role]) == set(ops.OPS[role])
