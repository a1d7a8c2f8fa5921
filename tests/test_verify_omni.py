"""OmniReduce coordination proofs on real plans, and every OmniReduce mutant refuted with a trace."""

import pytest
import z3

from p4gen import decision
from p4gen.errors import PlanError
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import omni


def _plan(target, **kw):
    return make_plan(make_spec(slots=64, protocol="omnireduce", **kw), load_target(target))


@pytest.mark.parametrize("target", ["tofino", "bmv2"])
def test_real_plans_verify(target, monkeypatch):
    # the runner's mutant rows: one mutant is enough here, test_mutant_refuted runs them all
    monkeypatch.setattr(omni, "MUTANTS", omni.MUTANTS[:1])
    lines = []
    rows = omni.run_omnireduce(_plan(target), workers=[2, 3, 4], mutants=(target == "bmv2"), out=lines.append)
    text = "\n".join(lines)
    muts = [r for r in rows if "mutant" in r]
    rows = [r for r in rows if "mutant" not in r]
    if target == "bmv2":
        assert len(muts) == 1 and muts[0]["refuted"] and muts[0]["counterexample"]["trace"], text
        assert "mutant/omni_minnext_last_writer" in text and "refuted (min_next" in text
    assert [r["property"] for r in rows] == list(omni.PROPERTIES), text
    for r in rows:
        assert r["status"] == "proved" and r["n"] == [2, 3, 4] and r["group"] == "omnireduce", text
        assert set(r) == {"group", "property", "status", "seconds", "n", "detail"}
    assert "omnireduce/min_next" in text and "n=2..4" in text


def test_switchml_plan_rejected():
    plan = make_plan(make_spec(variant="hardened", max_workers=4), load_target("bmv2"))
    with pytest.raises(PlanError, match="not an OmniReduce plan"):
        omni.run_omnireduce(plan, workers=[2], out=lambda _: None)


def test_workers_out_of_range():
    with pytest.raises(PlanError, match="--workers 99"):
        omni.run_omnireduce(_plan("bmv2"), workers=[99], out=lambda _: None)


def test_table_paths_cover_every_state():
    # the paths of a delivery are exclusive and exhaustive, so splitting a query by path is a tautology
    cfg = omni.OmniConfig(n=2, table=decision.decision_table("hardened", "omnireduce"))
    s = omni.State.fresh("t", 2)
    k = z3.Int("k")
    conds = [c for _, c, _, _ in omni.switch_cases(cfg, s, 0, 1, k, prune=True)]
    sol = z3.Solver()
    sol.add(z3.Not(z3.Or(conds)))
    assert sol.check() == z3.unsat
    for i in range(len(conds)):
        for j in range(i):
            sol = z3.Solver()
            sol.add(conds[i], conds[j])
            assert sol.check() == z3.unsat


EXPECTED = {
    "omni_minnext_last_writer": ("min_next", "multicast result"),
    "omni_header_only_adds": ("exact_result", "multicast result"),
    "omni_no_shadow_copy": ("copy_reuse", "absorb"),
    "omni_header_only_first_writes": ("exact_result", "multicast result"),
    "omni_no_bitmap_check": ("exact_result", "multicast result"),
}


def test_mutant_catalogue():
    assert {m.name for m in omni.MUTANTS} == set(EXPECTED)
    for m in omni.MUTANTS:
        decision.validate(omni.mutant_config(m).table)


@pytest.mark.parametrize("mutant", omni.MUTANTS, ids=[m.name for m in omni.MUTANTS])
def test_mutant_refuted(mutant):
    cex = omni.bmc(omni.mutant_config(mutant, 2))
    assert cex is not None, f"{mutant.name} not refuted"
    prop, action = EXPECTED[mutant.name]
    assert cex.prop == prop and 2 <= cex.steps <= 6
    assert action in cex.rows[-1].action
    text = "\n".join(cex.format())
    assert "step  worker  slot  copy  chunk/tsi  event" in text and f"violates {prop}" in text
    if mutant.name == "omni_header_only_adds":
        assert any("header-only" in r.event for r in cex.rows)
    if mutant.name == "omni_no_shadow_copy":
        assert all(r.copy == 0 for r in cex.rows) and any("accepts result" in r.event for r in cex.rows)
    if mutant.name == "omni_minnext_last_writer":
        # the result's next is not the smaller of the two announced offsets
        announced = [r.event.split("next=")[1].split(")")[0] for r in cex.rows if "next=" in r.event]
        result = cex.rows[-1].action.split("next=")[1].split()[0].rstrip(",")
        nums = [int(x) for x in announced if x != "none"]
        assert nums and result != str(min(nums))


def test_mutant_is_not_proved():
    # the induction is not vacuous: a broken worker behaviour breaks it
    res = omni.prove(omni.mutant_config(omni.MUTANTS[2], 2))
    assert omni.MUTANTS[2].name == "omni_no_shadow_copy" and not res.proved and not res.inductive
