"""OmniReduce coordination proofs on real plans, through the runner, with the OmniReduce mutants."""

import pytest

from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import mutants, omni, runner


def _plan(target, **kw):
    return make_plan(make_spec(slots=64, protocol="omnireduce", **kw), load_target(target))


def test_every_target_builds_the_same_omnireduce_table():
    # the decision table does not depend on the target, so one target's proof stands for all
    assert _plan("tofino").decision == _plan("bmv2").decision == _plan("tofino2").decision


@pytest.mark.slow
@pytest.mark.parametrize("target", ["bmv2"])
def test_real_plans_verify(target, monkeypatch):
    # one mutant is enough here, test_verify_mutants refutes them all
    monkeypatch.setattr(runner, "of_variant", lambda v: mutants.of_variant(v)[:1])
    lines = []
    rep = runner.run(_plan(target), workers=[2, 3, 4], mutants=(target == "bmv2"), jobs=1, out=lines.append)
    text = "\n".join(lines)
    assert rep.ok, text
    if target == "bmv2":
        assert len(rep.mutants) == 1 and rep.mutants[0].refuted and rep.mutants[0].to_json()["counterexample"]["trace"]
        assert "mutant/omni_minnext_last_writer" in text and "refuted (min_next" in text
    rows = [l.to_json() for l in rep.lines if l.group == "omnireduce"]
    assert [r["property"] for r in rows] == list(omni.PROPERTIES) + ["far_tsi_ignored"], text
    for r in rows:
        assert r["status"] == "proved" and r["n"] == [2, 3, 4], text
        assert set(r) == {"group", "property", "status", "seconds", "n", "detail"}
    assert "omnireduce/min_next" in text and "n=2..4" in text and "protocol/" not in text
