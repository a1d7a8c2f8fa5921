"""Slot-reuse proofs on real plans, the no-FIFO counterexample, and the fixed-point proofs."""

import pytest

from p4gen import decision
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import fixedpoint, protocol
from p4gen.verify.runner import run


def _plan(target, variant, **kw):
    return make_plan(make_spec(variant=variant, slots=512, **kw), load_target(target))


@pytest.mark.parametrize("target", ["tofino", "tofino2", "bmv2"])
@pytest.mark.parametrize("variant", ["reference", "hardened"])
def test_real_plans_verify(target, variant):
    lines = []
    rep = run(_plan(target, variant), workers=[2, 3], out=lines.append)
    assert rep.ok, "\n".join(lines)
    assert any("protocol/exact_result" in l and "proved" in l for l in lines)


@pytest.mark.parametrize("variant", ["reference", "hardened"])
@pytest.mark.parametrize("n", [4, 8])
def test_protocol_proves_larger_n(variant, n):
    cfg = protocol.ModelConfig(n=n, table=decision.decision_table(variant), fifo=(variant == "reference"))
    res = protocol.prove(cfg)
    assert res.proved, (res.failed_clause, res.failed_event, res.properties)


@pytest.mark.parametrize("variant", ["reference", "hardened"])
def test_protocol_proves_full_bitmap_word(variant):
    # n = 32 is the bitmap width and the slowest n; the n = 2..32 sweep takes several minutes
    # and is run by `python bench/verify.py --sweep` (its output prints the totals)
    cfg = protocol.ModelConfig(n=32, table=decision.decision_table(variant), fifo=(variant == "reference"))
    res = protocol.prove(cfg)
    assert res.proved, (res.failed_clause, res.failed_event, res.properties)


@pytest.mark.parametrize("n", [2, 17, 32])
def test_popcount_lemmas_hold(n):
    assert all(protocol.prove_popcount_lemmas(n).values())


def test_false_popcount_lemma_is_caught(monkeypatch):
    good = protocol._lemma_schemas

    def bad(n, w=0):
        sch = good(n, w)
        sch["set"] = lambda pc, x: pc(x | 1) == pc(x) + 1    # wrong when the bit is already set
        return sch
    monkeypatch.setattr(protocol, "_lemma_schemas", bad)
    assert not protocol.prove_popcount_lemmas(4)["set"]
    res = protocol.prove(protocol.ModelConfig(n=2, table=decision.decision_table("hardened"), fifo=False))
    assert not res.proved and res.failed_clause == "popcount lemma set"


def test_table_paths_cover_every_state():
    # the paths of a delivery are exclusive and exhaustive, so splitting a query by path is a tautology
    cfg = protocol.ModelConfig(n=3, table=decision.decision_table("hardened"), fifo=False)
    s = protocol.State.fresh("t", 3)
    k, off = protocol.z3.Int("k"), protocol.z3.Int("off")
    conds = [c for _, c, _, _ in protocol.switch_cases(cfg, s, off, 0, 0, k)]
    z3 = protocol.z3
    sol = z3.Solver()
    sol.add(z3.Not(z3.Or(conds)))
    assert sol.check() == z3.unsat
    for i in range(len(conds)):
        for j in range(i):
            sol = z3.Solver()
            sol.add(conds[i], conds[j])
            assert sol.check() == z3.unsat


def test_hardened_needs_no_fifo():
    cfg = protocol.ModelConfig(n=3, table=decision.decision_table("hardened"), fifo=False)
    assert protocol.prove(cfg).proved


def test_reference_without_fifo_has_late_duplicate_counterexample():
    cfg = protocol.ModelConfig(n=2, table=decision.decision_table("reference"), fifo=False)
    assert not protocol.prove(cfg).proved
    cex = protocol.bmc(cfg, 8, ["retransmission_harmless"])
    assert cex is not None and cex.steps <= 7
    last = cex.rows[-1]
    # the last event is a delayed duplicate of an old chunk, on the copy its worker has left, that is added again
    assert "delayed duplicate" in last.event and "add contribution" in last.action
    moved = [r for r in cex.rows if r.worker == last.worker and "accepts result" in r.event]
    assert moved and moved[0].copy != last.copy


def test_runner_no_fifo_prints_counterexample():
    lines = []
    rep = run(_plan("bmv2", "reference"), fifo=False, workers=[2], out=lines.append)
    assert not rep.ok
    text = "\n".join(lines)
    assert "COUNTEREXAMPLE" in text and "delayed duplicate" in text
    assert "step  worker  slot  copy  chunk/tsi  event" in text


@pytest.mark.parametrize("w", [16, 32])
def test_fixed_point_all_n(w):
    res = fixedpoint.prove_all(list(range(2, 33)), w)
    for name, rs in res.items():
        assert all(r.proved for r in rs), (name, [r.detail for r in rs if not r.proved])


def test_fixed_point_detects_too_large_limit(monkeypatch):
    monkeypatch.setattr(fixedpoint, "limit", lambda n, w: ((1 << (w - 1)) - 1) // n + 1)
    assert not fixedpoint.prove_no_overflow(2, 16).proved
