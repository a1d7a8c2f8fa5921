"""One decision in plan.json: an edit moves the P4, the model and the proofs together, or is refused.

plan.json holds the decision twice (the rules under ``decision``, their
expansion as the ``dt_*`` const-entry tables under ``tables``).  A plan
whose two copies disagree is refused with one line by every reader; a
plan whose decision is changed through ``Plan.with_decision`` renders
other P4, runs another model and gets another verdict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from p4gen import decision
from p4gen import protocols
from p4gen import wire as W
from p4gen.cli import main
from p4gen.controller.pipeline import load_build
from p4gen.emit.p4 import render_p4
from p4gen.emit.p4info import render_p4info
from p4gen.errors import PlanError
from p4gen.host import packet as P
from p4gen.plan import Plan
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target
from p4gen.verify import mutants
from p4gen.verify.explore import bmc
from p4gen.verify.protocol import SwitchML

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import regen  # noqa: E402

TAIL = ("; the dt_* tables are derived from 'decision': edit only 'decision' and re-derive them "
        "(Plan.with_decision), or rebuild with p4gen build")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def _plan(target: str = "bmv2") -> Plan:
    return make_plan(make_spec(slots=8, max_workers=4, elements_per_packet=8), load_target(target))


def _no_bitmap_check(plan: Plan) -> Plan:
    """The hardened table with the bitmap ignored (catalogue mutant hardened_no_bitmap_check)."""
    return plan.with_decision(mutants.drop_seen(plan.decision))


def _sums(plan: Plan) -> list[list[int]]:
    """Worker 0 contributes twice (a duplicate), then worker 1: the values of every result frame out."""
    L = W.FrameLayout(plan)
    addrs = [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in (1, 2)]
    model = SwitchModel(plan)
    model.load_config(job_config(plan, 1, addrs, mgid=5, rid_base=10))
    sw = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
    out = []
    for k, v in ((0, 1), (0, 1), (1, 10)):
        frame = P.contribution_frame(L, P.Endpoint(addrs[k].mac, addrs[k].ip, addrs[k].udp_port), sw, job=1, tsi=0,
                                     pool_index=0, exponent=0, values=np.full(L.elements, v, dtype=np.uint64))
        for _, f in model.process(frame, addrs[k].port):
            out.append([int(x) for x in P.parse_result(L, f).values])
    return out


# -- a changed decision moves all three ---------------------------------------------------

@pytest.mark.parametrize("target", ["bmv2", "tofino"])
def test_changed_decision_changes_the_rendered_program(target):
    plan = _plan(target)
    mut = _no_bitmap_check(plan)
    assert mut.decision != plan.decision
    old, new = render_p4(plan), render_p4(mut)
    assert old != new
    # the const entries of the rendered program follow the decision, entry for entry
    assert "// cmp=eq seen=1 count=mid -> nop" in old and "// cmp=eq seen=1 count=mid -> add" in new
    assert "// cmp=eq seen=1 -> probe_full" in old and "// cmp=eq seen=1 -> inc_sat" in new
    for keys, rules in [(s.keys, s.rules) for s in mut.decision.steps] + [(mut.decision.outcome.keys,
                                                                            mut.decision.outcome.rules)]:
        for obs, rule in decision.expand(keys, rules):
            if keys:
                what = getattr(rule, "op", None) or f"{rule.action} ({rule.stat})"
                where = ' '.join(f'{k}={v}' for k, v in obs.items())
                assert f"// {where} -> {what}\n" in new or f"// copy=0 {where} -> {what}\n" in new
    # the IDs stay those of the layout: every table, and every action both decisions run
    assert {t.name: t.id for t in mut.tables} == {t.name: t.id for t in plan.tables}
    ids = {a.name: a.id for a in plan.actions}
    assert all(ids[a.name] == a.id for a in mut.actions if a.name in ids)
    assert len({a.id for a in mut.actions}) == len(mut.actions)
    assert render_p4info(mut) != render_p4info(plan)      # the tables' actions are the new decision's


def test_changed_decision_changes_the_model():
    plan = _plan()
    assert _sums(plan) == [[11] * 8, [11] * 8]               # the duplicate is not added: 1 + 10
    # the mutant counts the duplicate as the second worker: 1 + 1 goes out to both, worker 1 gets it back
    assert _sums(_no_bitmap_check(plan)) == [[2] * 8, [2] * 8, [2] * 8]


@pytest.mark.slow
def test_changed_decision_changes_the_proofs():
    plan = _plan()
    mut = _no_bitmap_check(plan)
    prop = ["retransmission_harmless"]
    assert bmc(SwitchML(plan.decision, fifo=False), 2, 2, prop) is None
    cex = bmc(SwitchML(mut.decision, fifo=False), 2, 2, prop)
    assert cex is not None and cex.prop == "retransmission_harmless" and cex.steps == 2


def test_changed_decision_survives_plan_json(tmp_path):
    """A plan re-derived with with_decision is a valid plan.json: loading it gives the same decision."""
    mut = _no_bitmap_check(_plan())
    path = tmp_path / "plan.json"
    path.write_text(mut.to_json())
    loaded = Plan.load(path)
    assert loaded.decision == mut.decision and render_p4(loaded) == render_p4(mut)


def test_verifier_mutants_mutate_the_plans_table():
    plan = _plan()
    table = plan.decision.to_dict()
    table["assumption"] = "an edited table"
    m = next(m for m in mutants.CATALOGUE if m.name == "hardened_no_stale_drop")
    cfg = mutants.mutant_model(m, table=plan.with_decision(table).decision)
    assert cfg.table.assumption == "an edited table"
    assert all(r.match.get("cmp") != "lt" for st in cfg.table.steps for r in st.rules)


def test_with_decision_refuses_other_steps():
    plan = _plan()
    with pytest.raises(PlanError) as exc:
        plan.with_decision(protocols.decision_table("reference"))
    assert str(exc.value) == ("the decision table's steps (bitmap, counter, exponent, values) are not those of this "
                              "plan (chunk, bitmap, counter, exponent, values); other steps need a new layout: "
                              "run p4gen build")
    bad = plan.decision.to_dict()
    bad["steps"][1]["rules"][0]["op"] = "teleport"
    with pytest.raises(PlanError) as exc:
        plan.with_decision(bad)
    assert str(exc.value) == "the decision table is not valid: decision step 'bitmap': unknown op 'teleport'"


# -- an inconsistent plan.json is refused with one line ------------------------------------

def _built(tmp_path) -> tuple:
    out = tmp_path / "b"
    assert main(["build", "--target", "bmv2", "--slots", "8", "--workers", "4", "--elements", "8",
                 "--out", str(out)]) == 0
    return out, json.loads((out / "plan.json").read_text())


def _entry(data: dict, table: str, comment: str) -> dict:
    t = next(t for t in data["tables"] if t["name"] == table)
    return next(e for e in t["entries"] if e["comment"] == comment)


EDITS = {
    # dt_counter's entry for a retransmission counts it (op inc_sat) where the decision probes
    "tables": (lambda d: _entry(d, "dt_counter", "cmp=eq seen=1 -> probe_full").update(action="counter_inc_sat"),
               "'tables' dt_counter entry 3 (cmp=eq seen=1) runs counter_inc_sat, the decision runs "
               "counter_probe_full (probe_full)"),
    # the decision adds a retransmission to a complete slot; the tables still read
    "decision": (lambda d: d["decision"]["steps"][4]["rules"].insert(
        0, {"match": {"cmp": "eq", "seen": "1"}, "op": "add"}),
        "'tables' dt_values entry 18 (cmp=eq seen=1 count=mid) runs values_nop, the decision runs values_add (add)"),
    "a step": (lambda d: d["decision"]["steps"].pop(0),
               "'tables' holds dt_bitmap, dt_chunk, dt_counter, dt_exponent, dt_outcome, dt_values but 'decision' "
               "has the steps of dt_bitmap, dt_counter, dt_exponent, dt_outcome, dt_values"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_inconsistent_plan_is_refused_by_every_reader(edit, tmp_path, capsys):
    out, data = _built(tmp_path)
    if edit == "a step":
        # a decision without the chunk step keys on cmp before it is observed: invalid in itself
        EDITS[edit][0](data)
        data["decision"]["steps"][0]["keys"] = []
        data["decision"]["steps"][0]["rules"] = [{"match": {}, "op": "set"}]
        for st in data["decision"]["steps"][1:] + [data["decision"]["outcome"]]:
            st["keys"] = [k for k in st["keys"] if k != "cmp"]
            st["rules"] = [dict(r, match={k: v for k, v in r["match"].items() if k != "cmp"}) for r in st["rules"]]
    else:
        EDITS[edit][0](data)
    (out / "plan.json").write_text(json.dumps(data))
    want = f"{out / 'plan.json'}: {EDITS[edit][1]}{TAIL}"
    capsys.readouterr()
    # verifier (CLI) and controller (CLI): one line, exit 1
    assert main(["verify", str(out), "--workers", "2"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: {want}\n"
    assert main(["ctl", "counters", str(out), "--timeout", "0.1"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: {want}\n"
    # model, controller and emitters as a library: the same PlanError
    for reader in (Plan.load, SwitchModel, load_build):
        with pytest.raises(PlanError) as exc:
            reader(out if reader is not Plan.load else out / "plan.json")
        assert str(exc.value) == want
    with pytest.raises(PlanError) as exc:
        render_p4(Plan.from_dict(data))
    assert str(exc.value) == f"plan: {EDITS[edit][1]}{TAIL}"


def test_invalid_decision_in_plan_json_is_one_line(tmp_path, capsys):
    out, data = _built(tmp_path)
    data["decision"]["steps"][2]["rules"][0]["op"] = "teleport"
    (out / "plan.json").write_text(json.dumps(data))
    assert main(["verify", str(out)]) == 1
    assert capsys.readouterr().err == (f"p4gen: error: {out / 'plan.json'} has no valid decision table: "
                                       f"decision step 'counter': unknown op 'teleport'\n")


@pytest.mark.parametrize("target,stem,fields", regen.CASES, ids=[f"{t}-{s}" for t, s, _ in regen.CASES])
def test_plan_read_back_from_json_renders_the_same_program(target, stem, fields):
    plan = regen.plan(target, fields)
    back = Plan.from_json(plan.to_json())          # keys sorted, as plan.json stores them
    assert render_p4(back) == render_p4(plan) and render_p4info(back) == render_p4info(plan)


def _dt(data: dict, name: str) -> dict:
    return next(t for t in data["tables"] if t["name"] == name)


OTHER_EDITS = [
    (lambda d: _dt(d, "dt_counter").update(size=64), "'tables' dt_counter differs from the decision in size"),
    (lambda d: _dt(d, "dt_bitmap")["entries"].pop(), "'tables' dt_bitmap has 5 entries, the decision gives 6"),
    (lambda d: _dt(d, "dt_outcome")["entries"][0]["match"].update(cmp=1),
     "'tables' dt_outcome entry 0 (cmp=lt seen=0 count=mid) matches {'cmp': 1, 'seen': 0, 'count': 0}, "
     "the decision gives {'cmp': 0, 'seen': 0, 'count': 0}"),
    (lambda d: _dt(d, "dt_chunk")["entries"][0].update(comment="x"),
     "'tables' dt_chunk entry 0 (the only entry) differs from the decision in comment"),
    (lambda d: next(a for a in d["actions"] if a["name"] == "counter_inc_sat")["params"].append(
        {"name": "op", "bits": 8}),
     "'actions' counter_inc_sat is not the action the decision's tables use ([])"),
]


@pytest.mark.parametrize("edit,why", OTHER_EDITS, ids=[w[:40] for _, w in OTHER_EDITS])
def test_every_kind_of_table_edit_is_named(edit, why):
    data = _plan().to_dict()
    edit(data)
    with pytest.raises(PlanError) as exc:
        Plan.from_dict(data, "plan.json")
    assert str(exc.value) == f"plan.json: {why}{TAIL}"
