"""Protocol proofs for every n at once on the real tables, counterexamples, NOT PROVED reports, fixed point."""

import copy

import pytest
import z3

from p4gen import decision
from p4gen import protocols
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import engine, fixedpoint, runner
from p4gen.verify.engine import Prover
from p4gen.verify.explore import bmc
from p4gen.verify.mutants import base_model
from p4gen.verify.protocol import SwitchML
from p4gen.verify.workers import Workers, ground


def _plan(target, variant, **kw):
    return make_plan(make_spec(variant=variant, slots=512, **kw), load_target(target))


def _prove(model, lo, hi):
    p = Prover(model, Workers.between(lo, hi))
    return [p.check(u) for u in p.units()]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["reference", "hardened", "omnireduce"])
def test_one_proof_covers_every_n_up_to_256(variant):
    # n symbolic in 2..256: one bitmap word or eight, the same queries
    res = _prove(base_model(variant), 2, 256)
    bad = [(r.where, r.failed_clauses, r.failed_props) for r in res if r.failed_clauses or r.failed_props]
    assert not bad and len(res) > 5


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["reference", "hardened"])
def test_every_event_has_a_path_the_invariant_admits(variant):
    # not vacuous: for every event some (event, path) hypothesis is satisfiable
    m = base_model(variant)
    p = Prover(m, Workers.between(2, 64))
    for i, ev in enumerate(p.events):
        sat = []
        for c in p.cases(i):
            hyp = z3.And(*p.axioms, c.guard, p.inv(p.s),
                         *engine.card_facts(p.ws, m.bitmaps(p.s) + m.bitmaps(c.post)))
            f, _ = ground(hyp, p.ws, p.named)
            s = z3.Solver()
            s.add(f)
            sat.append(s.check() == z3.sat)
        assert any(sat), ev.text()


@pytest.mark.slow
def test_real_plans_verify_through_the_runner():
    lines = []
    rep = runner.run(_plan("tofino", "hardened"), workers=[2, 3], jobs=1, out=lines.append)
    assert rep.ok, "\n".join(lines)
    text = "\n".join(lines)
    for prop in ("exact_result", "completion_multicast", "retransmission_unicast"):
        assert any(l.startswith(f"protocol/{prop} ") and " proved " in l and "n=2,3" in l for l in lines), text
    assert "lemma/bitmap_word_split" in text and "note: --workers narrowed the proof to n=2..3" in text


@pytest.mark.slow
def test_runner_in_a_pool_of_two(capsys):
    lines = []
    rep = runner.run(_plan("bmv2", "reference", max_workers=40), jobs=2, out=lines.append)
    assert rep.ok and rep.jobs == 2, "\n".join(lines)
    assert all(l.ns == list(range(2, 41)) for l in rep.lines)
    assert "n=2..40 in one proof, 2 job(s)" in lines[0]


@pytest.mark.slow
def test_reference_without_fifo_has_late_duplicate_counterexample():
    m = SwitchML(protocols.decision_table("reference"), fifo=False)
    cex = bmc(m, 2, 8, ["retransmission_harmless"])
    assert cex is not None and cex.steps <= 6
    last = cex.rows[-1]
    # the last event is a delayed duplicate of an old chunk, on the copy its worker has left, that is added again
    assert "delayed duplicate" in last.event and "the contribution" in last.action and "no packet out" in last.action
    moved = [r for r in cex.rows if r.worker == last.worker and "accepts result" in r.event]
    assert moved and moved[0].copy != last.copy


@pytest.mark.slow
def test_runner_no_fifo_prints_counterexample_and_not_proved():
    lines = []
    rep = runner.run(_plan("bmv2", "reference"), fifo=False, workers=[2], jobs=1, out=lines.append)
    assert not rep.ok
    text = "\n".join(lines)
    assert "COUNTEREXAMPLE" in text and "delayed duplicate" in text
    assert "step  worker  slot  copy  chunk/tsi  event" in text
    # what has no trace names the invariant clause and the table path that failed, and the trace to look at
    np = [l for l in rep.lines if l.status == "NOT PROVED"]
    assert np and all("not inductive on deliver(worker, copy" in l.detail and "; path " in l.detail
                      and "see the counterexample to" in l.detail for l in np)


@pytest.mark.slow
def test_not_proved_says_how_far_the_search_went(monkeypatch):
    # the late duplicate needs 5 events: a search of 4 finds nothing, and the report says so
    monkeypatch.setattr(runner, "SEARCH_DEPTH", 4)
    lines = []
    rep = runner.run(_plan("bmv2", "reference"), fifo=False, workers=[2], jobs=1, out=lines.append)
    proto = [l for l in rep.lines if l.group == "protocol"]
    assert proto and all(l.status == "NOT PROVED" for l in proto), "\n".join(lines)
    assert all(l.detail.endswith("; no counterexample within 4 steps at n=2") for l in proto)
    assert all(l.detail.startswith("invariant clause ") for l in proto)


def _edited(plan, edit):
    table = plan.decision.to_dict()
    edit(table)
    return plan.with_decision(table)


@pytest.mark.slow
def test_edited_tables_answer_quickly_with_a_trace():
    """Slips that used to get no answer: mid-round write (needs 3 workers) and add/write swapped."""
    def mid_write(t):
        for r in next(s for s in t["steps"] if s["role"] == "values")["rules"]:
            if r["match"].get("count") == "mid":
                r["op"] = "write"

    def swap(t):
        for r in next(s for s in t["steps"] if s["role"] == "values")["rules"]:
            r["op"] = {"add": "write", "write": "add"}.get(r["op"], r["op"])
    for edit, n in ((mid_write, 3), (swap, 2)):
        lines = []
        rep = runner.run(_edited(_plan("bmv2", "hardened", max_workers=8), edit), jobs=2, out=lines.append)
        cexs = [l for l in rep.lines if l.status == "COUNTEREXAMPLE"]
        assert not rep.ok and cexs, "\n".join(lines)
        assert min(l.counterexample.n for l in cexs) == n
        assert all(l.status in ("proved", "COUNTEREXAMPLE", "NOT PROVED") for l in rep.lines)


def test_fixed_point_every_n():
    for w in (16, 32):
        res = fixedpoint.prove_all(list(range(2, 257)), w)
        assert all(r.proved for r in res.values()), {k: r.detail for k, r in res.items()}


def test_fixed_point_detects_too_large_limit(monkeypatch):
    monkeypatch.setattr(fixedpoint, "limit", lambda n, w: ((1 << (w - 1)) - 1) // n + 1)
    r = fixedpoint.prove_no_overflow([2, 3], 16)
    assert not r.proved and "n=2" in r.detail


def test_no_overflow_runs_the_switchs_add_from_ops(monkeypatch):
    from p4gen import ops

    real = ops.values_op

    def saturating(op, stored, pkt, bits, A=ops.INT):     # an add that clamps at the top instead of wrapping
        if op != "add":
            return real(op, stored, pkt, bits, A)
        s = stored + pkt
        top = (1 << bits) - 1
        s = z3.If(s > top, z3.IntVal(top), s)
        return s, s
    monkeypatch.setattr(ops, "values_op", saturating)
    r = fixedpoint.prove_no_overflow([2, 3], 16)
    assert not r.proved and r.detail.startswith("counterexample: ["), r.detail
