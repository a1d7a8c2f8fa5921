"""`p4gen verify` checks what it is given: one-line errors, NOT COVERED, --jobs, progress only on a terminal."""

import argparse
import io
import json
import re

import pytest

from p4gen.cli import main
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import cli


def _args(*argv):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers()
    cli.register(sub)
    return ap.parse_args(["verify", *argv])


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("p4gen: error:"), err
    assert "Traceback" not in err[0]
    return err[0]


def test_missing_outdir(tmp_path, capsys):
    args = _args(str(tmp_path / "nope"))
    assert args.func(args) == 1
    assert "does not exist" in _one_error(capsys)


def test_bad_plan(tmp_path, capsys):
    (tmp_path / "plan.json").write_text("{not json")
    args = _args(str(tmp_path))
    assert args.func(args) == 1
    assert "not valid JSON" in _one_error(capsys)


def test_dir_without_plan(tmp_path, capsys):
    args = _args(str(tmp_path))
    assert args.func(args) == 1
    assert "does not exist (run p4gen build first)" in _one_error(capsys)


def _write(tmp_path, edit=None, **spec):
    plan = make_plan(make_spec(**{"variant": "hardened", "max_workers": 4, **spec}), load_target("bmv2"))
    data = plan.to_dict()
    if edit:
        edit(data)
    (tmp_path / "plan.json").write_text(json.dumps(data))
    return tmp_path


def _set(path, value):
    def edit(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value
    return edit


def _drop_rule(d):
    # the values step of the hardened table without its default rule: lt packets match nothing
    step = next(s for s in d["decision"]["steps"] if s["role"] == "values")
    step["rules"] = step["rules"][:-1]


BAD_PLANS = [
    (_set(("params", "max_workers"), 1), "plan.json: max_workers=1 must be an integer in 2..256"),
    (_set(("params", "max_workers"), 0), "plan.json: max_workers=0 must be an integer in 2..256"),
    (_set(("params", "max_workers"), -3), "plan.json: max_workers=-3 must be an integer in 2..256"),
    (_set(("params", "max_workers"), 4.5), "max_workers=4.5 must be an integer in 2..256"),
    (_set(("params", "slots"), -1), "slots=-1 must be an integer in 1..16777216"),
    (_set(("protocol",), "allreduce"), "protocol='allreduce' must be one of switchml, omnireduce"),
    (_set(("registers",), []), "registers must be a non-empty list (got [])"),
    (_set(("headers",), []), "headers must be a non-empty list (got [])"),
    (_set(("params", "value_width"), 8), "value_width=8 must be one of 16, 32"),
    (_drop_rule, "has no valid decision table: no rule matches {'cmp': 'lt', 'seen': '0', 'count': 'mid'}"),
    (_set(("params", "value_width"), 32.0), "plan.json: value_width=32.0 must be one of 16, 32"),
    (_set(("params",), []), "plan.json: params must be an object, not a list"),
    (_set(("registers",), [1]), "plan.json: registers[0] must be an object, not an integer"),
    (_set(("decision",), {}), "plan.json has no valid decision table: the key 'steps' is missing"),
]


@pytest.mark.parametrize("edit,message", BAD_PLANS, ids=[m.split("=")[0].split(" ")[0] for _, m in BAD_PLANS])
def test_plan_checked_before_anything_runs(tmp_path, capsys, edit, message):
    d = _write(tmp_path, edit)
    assert main(["verify", str(d), "--jobs", "1"]) == 1
    line = _one_error(capsys)
    assert message in line, line
    assert not (d / "verify.json").exists()


def test_plan_check_names_a_table_that_is_not_total():
    from p4gen.errors import PlanError
    from p4gen.plan import Plan

    plan = make_plan(make_spec(variant="hardened", max_workers=4), load_target("bmv2"))
    data = plan.to_dict()
    _drop_rule(data)
    with pytest.raises(PlanError) as exc:
        Plan.from_dict(data, "plan.json")
    assert str(exc.value) == ("plan.json has no valid decision table: no rule matches "
                              "{'cmp': 'lt', 'seen': '0', 'count': 'mid'}")


def test_workers_out_of_range(tmp_path, capsys):
    args = _args(str(_write(tmp_path)), "--workers", "9")
    assert args.func(args) == 1
    assert "--workers 9 must be in 2..4 (the plan's max_workers)" in _one_error(capsys)


def test_jobs_must_be_positive(tmp_path, capsys):
    args = _args(str(_write(tmp_path)), "--jobs", "0")
    assert args.func(args) == 1
    assert "--jobs 0 must be at least 1" in _one_error(capsys)


@pytest.mark.slow
def test_verify_writes_json_and_its_progress_on_a_pipe_is_plain_lines(tmp_path, capsys):
    args = _args(str(_write(tmp_path, max_workers=3)), "--jobs", "1")
    assert args.func(args) == 0
    cap = capsys.readouterr()
    assert "protocol/exact_result" in cap.out and " proved " in cap.out
    # on a pipe no line is redrawn: progress (if the proofs took 5 s) is plain ``verify k/N  label`` lines
    assert all(re.fullmatch(r"verify \d+/\d+  [^\x1b\r]*", line) for line in cap.err.splitlines()), cap.err
    rep = json.loads((tmp_path / "verify.json").read_text())
    assert rep["ok"] and rep["variant"] == "hardened" and rep["n_required"] == [2, 3]
    assert all(p["status"] == "proved" and p["n"] == [2, 3] for p in rep["properties"])


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_line_on_a_terminal():
    stream = _Tty()
    show = cli._progress_line(stream)
    show(3, 40, "protocol deliver(worker, copy 0; path advance/set/inc_sat/max/add)")
    assert stream.getvalue() == "\r\x1b[Kverify 3/40  protocol deliver(worker, copy 0; path advance/set/inc_sat/max/add)"


def test_progress_on_a_pipe_is_plain_lines_every_few_seconds():
    stream, now = io.StringIO(), [100.0]
    show = cli._progress_line(stream)
    show.clock = lambda: now[0]
    show.last = now[0]
    assert show.every == 5
    show(1, 40, "fixed point")                 # at once: a short run prints nothing
    now[0] += 5
    show(2, 40, "protocol deliver")
    now[0] += 1
    show(3, 40, "protocol deliver copy 1")     # within 5 s of the last line
    now[0] += 6
    show(9, 40, "omnireduce round")
    assert stream.getvalue() == "verify 2/40  protocol deliver\nverify 9/40  omnireduce round\n"


def test_result_lines_do_not_land_on_the_progress_line(tmp_path, monkeypatch):
    import sys

    from p4gen.verify import runner
    from p4gen.verify.report import VerifyReport

    def fake_run(plan, *, out, progress, **kw):
        progress(1, 2, "fixed point")
        out("fixedpoint/no_overflow  proved")
        return VerifyReport(variant="hardened", fifo=False, assumptions=[], required=[2])
    monkeypatch.setattr(runner, "run", fake_run)
    term = _Tty()              # stdout and stderr are the same terminal
    monkeypatch.setattr(sys, "stdout", term)
    monkeypatch.setattr(sys, "stderr", term)
    args = _args(str(_write(tmp_path)))
    assert args.func(args) == 1        # the fake report has no lines: not ok
    assert term.getvalue().startswith("\r\x1b[Kverify 1/2  fixed point\r\x1b[Kfixedpoint/no_overflow  proved\n")


@pytest.mark.slow
def test_not_covered_when_a_proof_covers_fewer_n(tmp_path, monkeypatch):
    from p4gen.verify import fixedpoint, runner

    real = fixedpoint.prove_all

    def short(ns, w, rlimit):       # a fixed-point run that (wrongly) covers only the first n
        res = real(ns[:1], w, rlimit)
        return res
    monkeypatch.setattr(fixedpoint, "prove_all", short)
    plan = make_plan(make_spec(variant="hardened", max_workers=3), load_target("bmv2"))
    lines = []
    rep = runner.run(plan, jobs=1, out=lines.append)
    assert not rep.ok
    fp = [l for l in rep.lines if l.group == "fixedpoint"]
    assert fp and all(l.status == "NOT COVERED" and l.detail == "not proved for n=3..3" for l in fp), lines


# -- what verify vouches for: the program and P4Info beside plan.json, and the op codes they dispatch on
def _built(tmp_path, **spec):
    from p4gen.build import build

    out = tmp_path / "b"
    build(make_spec(**{"slots": 16, "max_workers": 2, **spec}), load_target("bmv2"), out, use_cache=False)
    return out


def test_verify_refuses_a_program_edited_by_hand_after_the_build(tmp_path, capsys):
    b = _built(tmp_path)
    prog = b / "program.p4"
    text = prog.read_text()
    edited = text.replace("(values0_v[31:0] + hdr.data0.d0);", "(values0_v[31:0] - hdr.data0.d0);", 1)  # one op
    assert edited != text
    prog.write_text(edited)
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1"]) == 1
    line = _one_error(capsys)
    assert line.startswith(f"p4gen: error: {str(prog)!r} is not what plan.json renders to (line ")
    assert ("'bit<32> values0_t0 = (values0_v[31:0] - hdr.data0.d0);', the plan renders "
            "'bit<32> values0_t0 = (values0_v[31:0] + hdr.data0.d0);'") in line
    assert not (b / "verify.json").exists()
    prog.write_text(text)
    (b / "p4info.txt").write_text((b / "p4info.txt").read_text().replace("size: 16", "size: 17", 1))
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1"]) == 1
    assert "p4info.txt' is not what plan.json renders to" in _one_error(capsys)


def test_verify_refuses_a_plan_where_two_operations_share_a_code(tmp_path, capsys):
    from p4gen import decision

    b = _built(tmp_path)
    d = json.loads((b / "plan.json").read_text())
    codes = d["params"]["op_codes"]
    codes["values"]["add"] = codes["values"]["write"]        # add and write now one code ...
    dt, acts = decision.p4_tables(decision.DecisionTable.from_dict(d["decision"], d["protocol"]), codes)  # ... re-derived
    ids = {t["name"]: t["id"] for t in d["tables"]}
    d["tables"] = [t for t in d["tables"] if not t["name"].startswith("dt_")] + [{**t, "id": ids[t["name"]]}
                                                                                 for t in dt]
    (b / "plan.json").write_text(json.dumps(d))
    (b / "program.p4").unlink()
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1"]) == 1
    line = _one_error(capsys)
    assert line.endswith("plan.json: params.op_codes.values.add is 0, the code of write too; p4gen/ops.py gives 1: "
                         "the program dispatches on these codes, so a plan with others is not the program the "
                         "decision names (rebuild with p4gen build)"), line
    assert not (b / "verify.json").exists()


@pytest.mark.slow
def test_verify_records_the_digests_of_what_it_vouches_for(tmp_path):
    import hashlib

    b = _built(tmp_path)
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1", "--plan-only"]) == 0
    rep = json.loads((b / "verify.json").read_text())
    assert rep["program"]["verdict"] == "not checked"       # tests/test_verify_program.py checks the program
    for name in ("plan.json", "program.p4", "p4info.txt"):
        assert rep["artifacts"][name] == hashlib.sha256((b / name).read_bytes()).hexdigest()
    assert rep["artifacts"]["program.json"] is None


def test_verify_refuses_a_decision_variant_that_is_not_the_plans(tmp_path, capsys):
    d = _write(tmp_path, _set(("decision", "variant"), ["hardened"]))
    assert main(["verify", str(d), "--jobs", "1"]) == 1
    assert _one_error(capsys).endswith("plan.json has no valid decision table: the decision table's protocol, "
                                       "variant and assumption must be text")
