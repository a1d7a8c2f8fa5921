"""What README.md and docs/ quote of p4gen's own output is what p4gen prints today.

Each quote is found in the text it is part of (a code block after its heading, a ``$ p4gen``
line and the output under it, a figure in a sentence) and compared with a real run, so a
change to the planner or the report cannot leave the docs behind.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from p4gen.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _text(name: str) -> str:
    return (ROOT / name).read_text()


def _block_after(text: str, heading: str) -> list[str]:
    """The lines of the first fenced code block after ``heading``."""
    rest = text.split(heading, 1)[1]
    return rest.split("```", 2)[1].split("\n", 1)[1].rstrip("\n").splitlines()


def _run(argv: list[str], capsys, monkeypatch, cwd: Path) -> tuple[int, list[str], list[str]]:
    monkeypatch.chdir(cwd)
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out.splitlines(), out.err.splitlines()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def test_the_sample_report_is_the_report_of_that_build(tmp_path, capsys, monkeypatch, cache):
    heading = "## Sample report (`p4gen build --slots 512 --target tofino`)"
    quoted = _block_after(_text("docs/building.md"), heading)
    argv = shlex.split(heading.split("`")[1])[1:] + ["--out", str(tmp_path / "t1")]
    assert _run(argv, capsys, monkeypatch, tmp_path)[0] == 0
    assert quoted == (tmp_path / "t1" / "report.txt").read_text().rstrip("\n").splitlines()


def _quoted_errors():
    """(file, command line, the error lines quoted under it) of every ``$ p4gen build`` that fails."""
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ p4gen build ") and i + 1 < len(lines) and lines[i + 1].startswith("p4gen: error:"):
                yield doc.name, line[2:], lines[i + 1]


@pytest.mark.parametrize("doc,command,error", list(_quoted_errors()))
def test_quoted_build_errors_are_the_errors_printed(doc, command, error, tmp_path, capsys, monkeypatch, cache):
    rc, out, err = _run(shlex.split(command)[1:], capsys, monkeypatch, tmp_path)
    assert (rc, out, err) == (1, [], [error]), doc


def test_the_quoted_errors_were_found():
    assert {d for d, _, _ in _quoted_errors()} == {"README.md", "building.md"}


def test_phv_bits_quoted_for_the_streamed_build(tmp_path, capsys, monkeypatch, cache):
    m = re.search(r"`p4gen build --target\s+tofino --elements 64` builds 4 passes of 16 \((\d+) PHV bits\)",
                  _text("docs/layout.md"))
    assert m, "docs/layout.md no longer quotes the PHV bits of the --elements 64 build"
    argv = ["build", "--target", "tofino", "--elements", "64", "--out", str(tmp_path / "e64")]
    assert _run(argv, capsys, monkeypatch, tmp_path)[0] == 0
    report = (tmp_path / "e64" / "report.txt").read_text()
    assert "64 per packet = 4 pass(es) of 16" in report
    printed = re.search(r"PHV bits (\d+)/\d+", report).group(1)
    assert m.group(1) == printed


@pytest.mark.slow
def test_the_three_job_plan_is_what_plan_prints(tmp_path, capsys, monkeypatch):
    quoted = _block_after(_text("docs/layout.md"), "The three-job example")
    assert quoted[0] == "$ p4gen plan --target tofino --jobs docs/examples/three-jobs.toml"
    argv = shlex.split(quoted[0])[2:] + ["--out", str(tmp_path / "jobs")]
    rc, out, err = _run(argv, capsys, monkeypatch, ROOT)
    assert rc == 0 and [re.sub(r"^plan \+[0-9.]+ s: |\d+", "N", e) for e in err] == [    # the search's progress
        "Nfitting N layouts of switchml (hardened) to tofino with a slot for each of N jobs",
        "NN fit; splitting the slots between the jobs, best bound first"]
    assert out[:len(quoted) - 1] == quoted[1:]
    assert out[len(quoted) - 1].startswith(f"layout written to {tmp_path / 'jobs'}")


@pytest.mark.slow
def test_readme_layout_figures_are_what_plan_prints(tmp_path, capsys, monkeypatch):
    readme = _text("README.md")
    command = re.search(r"^(p4gen plan [^\n&]+?) &&", readme, re.M).group(1)
    saving = re.search(r"On Tofino1 the best is 64 elements in 4 folded\s+passes, (\d+)% faster than p4gen's default of "
                       r"16 per pass\. SwitchML's\s+hand-written 1 KiB layout, which p4gen cannot build, is predicted to "
                       r"take\s+(\d+)% less time than that", readme)
    assert saving, "README.md no longer quotes the layout search's figures on Tofino1"
    rc, out, _ = _run(shlex.split(command)[1:] + ["--out", str(tmp_path / "l.json"), "--json"], capsys,
                      monkeypatch, tmp_path)
    assert rc == 0
    res = json.loads("\n".join(out))
    best = res["best"]
    assert (best["elements_per_packet"], best["passes"], best["pipes"]) == (64, 4, 4), best   # folded
    default = next(r for r in res["references"] if r["label"].startswith("p4gen default (16 per packet"))
    assert round(default["gain_pct"]) == int(saving.group(1)), default["gain_pct"]
    switchml = next(r for r in res["references"] if r["label"] == "SwitchML 256 in 4 passes")
    less = 1 - switchml["predicted"]["time_s"] / best["predicted"]["time_s"]
    assert round(100 * less) == int(saving.group(2)), less
