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
