"""`p4gen verify` argument handling and one-line errors."""

import argparse
import json

from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import cli


def _args(*argv):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers()
    cli.register(sub)
    return ap.parse_args(["verify", *argv])


def test_missing_outdir(tmp_path, capsys):
    args = _args(str(tmp_path / "nope"))
    assert args.func(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("p4gen: error:") and "does not exist" in err[0]


def test_bad_plan(tmp_path, capsys):
    (tmp_path / "plan.json").write_text("{not json")
    args = _args(str(tmp_path))
    assert args.func(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0]


def test_dir_without_plan(tmp_path, capsys):
    args = _args(str(tmp_path))
    assert args.func(args) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_workers_out_of_range(tmp_path, capsys):
    plan = make_plan(make_spec(variant="hardened", max_workers=4), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    args = _args(str(tmp_path), "--workers", "9")
    assert args.func(args) == 1
    assert "--workers 9" in capsys.readouterr().err


def test_verify_writes_json(tmp_path, capsys):
    plan = make_plan(make_spec(variant="hardened", max_workers=3), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    args = _args(str(tmp_path))
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "protocol/exact_result" in out and "proved" in out
    rep = json.loads((tmp_path / "verify.json").read_text())
    assert rep["ok"] and rep["variant"] == "hardened"
