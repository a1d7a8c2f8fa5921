"""`p4gen verify` checks program.p4 itself, as p4c reads it, against the plan it proved.

Where p4test is absent, verify proves the plan only and says so in one line, with exit status 3; with
``--plan-only`` it skips the program check on purpose.  Where p4test is on PATH (the P4 toolchain), every
golden program is read through p4c's IR and found equal to its plan, and every generator mutant (a small
fault in a form the renderer prints) is refused with a one-line difference naming the P4 element.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from p4gen.cli import main

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "golden"))
import regen  # noqa: E402

HAVE_P4TEST = shutil.which("p4test") is not None
TNA_INCLUDE = os.environ.get("P4GEN_TNA_INCLUDE")
needs_p4test = pytest.mark.skipif(not HAVE_P4TEST or not TNA_INCLUDE or not (Path(TNA_INCLUDE) / "tna.p4").is_file(),
                                  reason="p4test or tna.p4 (P4GEN_TNA_INCLUDE) is not available")


def _small(tmp_path, target="bmv2", **extra):
    out = tmp_path / "b"
    args = ["build", "--target", target, "--slots", "16", "--workers", "2", "--out", str(out)]
    for k, v in extra.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    assert main(args) == 0
    return out


@pytest.mark.slow                  # a whole verify of the plan: 2.7 CPU-seconds
def test_verify_without_p4test_proves_the_plan_only_and_exits_3(tmp_path, capsys, monkeypatch):
    out = _small(tmp_path)
    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    capsys.readouterr()
    assert main(["verify", str(out), "--workers", "2", "--jobs", "1"]) == 3
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if "program.p4" in ln)
    assert line.split()[:4] == ["program.p4", "not", "checked:", "p4test"]
    assert line.endswith("not checked: p4test is not on PATH, so verify proved the plan only (exit status 3); put "
                         "p4c's p4test on PATH to check program.p4, or pass --plan-only")
    assert "verified in" in text
    rep = json.loads((out / "verify.json").read_text())
    assert rep["ok"] is True and rep["program"]["verdict"] == "not checked"
    # generator mutants need p4c: one line, exit 1, nothing proved
    assert main(["verify", str(out), "--workers", "2", "--jobs", "1", "--mutants", "generator"]) == 1
    assert capsys.readouterr().err == ("p4gen: error: --mutants generator needs p4test on PATH: each mutant is read "
                                       "by p4c's front end\n")


def test_plan_only_and_a_plan_without_its_program_skip_the_program_check(tmp_path):
    """What verify runs beside the proofs (and prints before the verdict) when it does not read the program."""
    from p4gen.plan import Plan
    from p4gen.verify.cli import program_step

    out = _small(tmp_path)
    plan = Plan.load(out)
    step = program_step(plan, out, plan_only=True, need=False)
    assert step.missing is False and step().lines() == [
        "  program.p4                   not checked: --plan-only: the plan is proved and the program bound to it by "
        "rendering; p4c's reading of program.p4 is not checked"]
    assert step().to_json() == {"verdict": "not checked", "reason": step().reason}
    (out / "program.p4").unlink()
    step = program_step(plan, out, plan_only=False, need=False)
    assert step.missing is False and step().lines()[0].endswith(
        "not checked: there is no program.p4 beside plan.json (a plan alone: nothing else to check)")


@pytest.mark.slow
@needs_p4test
@pytest.mark.parametrize("target", ["tofino", "bmv2"])
def test_the_default_builds_verify_with_their_program(target, tmp_path, capsys):
    out = tmp_path / target
    assert main(["build", "--target", target, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "program.p4" in ln)
    assert line.split()[:2] == ["program.p4", "proved"], line
    rep = json.loads((out / "verify.json").read_text())["program"]
    assert rep["verdict"] == "proved" and rep["differences"] == []
    assert rep["checked"]["decision actions"] >= 15 and rep["checked"]["keys"] >= 10


@pytest.mark.slow
@needs_p4test
@pytest.mark.parametrize("target,stem,fields", regen.CASES, ids=[f"{t}/{s}" for t, s, _ in regen.CASES])
def test_every_golden_is_its_plan_as_p4c_reads_it(target, stem, fields):
    from p4gen.verify.program import check_ir
    from p4gen.verify.program.p4test import read_ir

    plan = regen.plan(target, fields)
    res = check_ir(plan, read_ir(HERE / "golden" / target / f"{stem}.p4", plan.arch))
    assert res.differences == []
    assert res.checked["decision actions"] >= 10


@pytest.mark.slow
@needs_p4test
@pytest.mark.parametrize("target", ["tofino", "bmv2"])
def test_generator_mutants_are_refused_with_the_element_named(target, tmp_path):
    """Each fault of the catalogue that the target's program prints is refused by the program check
    itself (not by p4c), in one line that names the P4 element."""
    from p4gen.plan import Plan
    from p4gen.verify.program import mutants

    out = tmp_path / target
    assert main(["build", "--target", target, "--out", str(out)]) == 0
    plan = Plan.load(out)
    results = mutants.run(plan, out, jobs=2)
    applied = [r for r in results if r.applicable]
    assert len(applied) >= 8, [r.mutant.name for r in results if not r.applicable]
    for r in applied:
        assert r.refused, r.mutant.name
        assert r.difference.startswith("program.p4: ") and "\n" not in r.difference, (r.mutant.name, r.difference)
    by = {r.mutant.name: r.difference for r in applied}
    if target == "tofino":
        assert by["add_as_sub"].startswith("program.p4: RegisterAction values0_add_ra stores (value - hdr.data0.d0) "
                                           "in values0 where ops.py's values add stores (value + hdr.data0.d0)")
        assert by["entry_choice_swapped"] == ("program.p4: table dt_counter entry 2 is cmp=1 seen=0 -> "
                                              "counter_probe_full() where the plan's is cmp=1 seen=0 -> "
                                              "counter_inc_sat()")
    else:
        assert by["lane_slice_swapped"].startswith("program.p4: the ingress apply block (program.p4 line ")
        assert "in values0 lane 1 where ops.py's values add stores (value.lane1 + hdr.data0.d1)" in \
            by["lane_slice_swapped"]


def test_every_generator_mutant_applies_to_a_golden():
    """No mutant of the catalogue is vacuous: each edits the form it names in some golden program."""
    from p4gen.verify.program.mutants import CATALOGUE

    texts = {}
    for target, stem, _f in regen.CASES:
        texts[(target, stem)] = (HERE / "golden" / target / f"{stem}.p4").read_text()
    arch = {"tofino": "tna", "tofino2": "t2na", "bmv2": "v1model"}
    for m in CATALOGUE:
        assert any(arch[t] in m.archs and m.apply(text) not in (None, text) for (t, _s), text in texts.items()), m.name
