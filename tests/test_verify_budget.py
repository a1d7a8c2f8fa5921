"""Verdicts are bounded by work, never by time: the same plan gets the same answer on any machine at any load."""

import itertools
import re
import time
from pathlib import Path

import pytest

from p4gen.cli import main
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import budget, explore, runner
from p4gen.verify.mutants import CATALOGUE, mutant_model

VERIFY = Path(__file__).resolve().parents[1] / "verify"


@pytest.fixture
def racing_clock(monkeypatch):
    """Every clock jumps a day per reading: any deadline, however long, has passed at every check."""
    ticks = itertools.count(0.0, 86_400.0)
    for name in ("monotonic", "perf_counter", "time"):
        monkeypatch.setattr(time, name, lambda: next(ticks))


def _other_bit():
    m = next(x for x in CATALOGUE if x.name == "other_bit_not_cleared")     # an 8-event trace at n=2
    return mutant_model(m)


def _result(r: explore.Search):
    cex = r.counterexample
    return (r.searched, r.steps, r.budget_hit, cex and (cex.prop, cex.steps, [row.__dict__ for row in cex.rows]))


def test_no_solver_in_the_verifier_has_a_time_limit():
    for p in VERIFY.glob("*.py"):
        text = p.read_text()
        assert not re.search(r"""set\(\s*["']timeout""", text), p.name
        assert "monotonic" not in text and "deadline" not in text, p.name


@pytest.mark.slow
def test_a_search_gives_the_same_answer_whatever_the_clock_says(monkeypatch):
    short = [_result(explore.search(_other_bit(), 2, 12, budget=b)) for b in (60, 10_000)]
    assert short[0][2] and short[0][3] is None           # 60 transitions: the budget ends it, no trace
    assert short[1][3][:2] == ("exact_result", 8)
    ticks = itertools.count(0.0, 86_400.0)
    for name in ("monotonic", "perf_counter", "time"):
        monkeypatch.setattr(time, name, lambda: next(ticks))
    raced = [_result(explore.search(_other_bit(), 2, 12, budget=b)) for b in (60, 10_000)]
    assert raced == short


def _plan(**kw):
    return make_plan(make_spec(variant="reference", slots=64, **kw), load_target("bmv2"))


@pytest.mark.slow
def test_a_verdict_cut_short_by_the_search_budget_names_it_and_budget_raises_it(monkeypatch, racing_clock):
    monkeypatch.setattr(budget, "SEARCH_STEPS", 40)
    lines = []
    rep = runner.run(_plan(), fifo=False, workers=[2], jobs=1, out=lines.append)
    text = "\n".join(lines)
    proto = [l for l in rep.lines if l.group == "protocol" and l.status != "proved"]
    assert proto and all(l.status == "NOT PROVED" for l in proto), text
    assert all("(search budget of 40 transitions used up)" in l.detail for l in proto), text
    assert "budget: rlimit 200,000,000 per query, 40 transitions per search" in text
    # --budget multiplies it: the late-duplicate trace (5 events) is then found
    lines = []
    rep = runner.run(_plan(), fifo=False, workers=[2], jobs=1, budget=1000, out=lines.append)
    text = "\n".join(lines)
    assert any(l.status == "COUNTEREXAMPLE" and l.counterexample.steps == 5 for l in rep.lines), text
    assert "40,000 transitions per search (--budget 1000)" in text


@pytest.mark.slow
def test_a_verdict_cut_short_by_the_solver_budget_names_it(monkeypatch, racing_clock):
    monkeypatch.setattr(budget, "QUERY_RLIMIT", 2_000)
    monkeypatch.setattr(runner, "SEARCH_DEPTH", 3)
    lines = []
    rep = runner.run(_plan(max_workers=4), jobs=1, out=lines.append)
    text = "\n".join(lines)
    proto = [l for l in rep.lines if l.group == "protocol"]
    assert not rep.ok and proto and all(l.status == "NOT PROVED" for l in proto), text
    assert all("budget (rlimit 2,000 per query) ran out" in l.detail for l in proto), text
    fp = [l for l in rep.lines if l.group == "fixedpoint"]
    assert fp and all(l.status != "proved" and "rlimit 2,000" in l.detail for l in fp), text


@pytest.mark.parametrize("value", ["0", "0.5", "inf", "nan", "x"])
def test_bad_budget_is_one_line(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["verify", str(tmp_path), "--budget", value])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget" in err[0] and "Traceback" not in err[0], err
