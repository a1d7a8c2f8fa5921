"""Codegen: golden files, bad inputs with their exact messages, cache and output safety."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from p4gen import build as buildmod
from p4gen.cli import main
from p4gen.decision import expand
from p4gen.emit.p4 import render_p4
from p4gen.emit.p4info import build_p4info
from p4gen import protocols
from p4gen.errors import InfeasibleError
from p4gen.plan import Plan
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "golden"))
import regen  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("target,stem,fields", regen.CASES, ids=[f"{t}-{s}" for t, s, _ in regen.CASES])
def test_golden(target, stem, fields):
    fresh = regen.outputs(target, fields)
    for ext, text in fresh.items():
        golden = (HERE / "golden" / target / f"{stem}.{ext}").read_text()
        assert text == golden, f"{target}/{stem}.{ext} differs from its golden; run python tests/golden/regen.py and review the diff"


@pytest.mark.parametrize("case", json.loads((HERE / "data" / "bad_builds.json").read_text()),
                         ids=lambda c: " ".join(c["args"][1:]))
def test_bad_builds_fail_with_one_line(case, capsys, tmp_path):
    rc = main(case["args"] + ["--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == f"p4gen: error: {case['error']}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", json.loads((HERE / "data" / "bad_targets.json").read_text()),
                         ids=lambda c: c["error"][:30])
def test_bad_target_files(case, capsys, tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(case["text"])
    rc = main(["build", "--target-file", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("p4gen: error: target ") and case["error"] in err and err.count("\n") == 1


def test_missing_target_file(capsys, tmp_path):
    assert main(["build", "--target-file", str(tmp_path / "none.toml")]) == 1
    assert capsys.readouterr().err == f"p4gen: error: target file '{tmp_path / 'none.toml'}' does not exist\n"


def test_user_target_file_builds(tmp_path, capsys):
    text = (Path(buildmod.__file__).parent / "target" / "tofino.toml").read_text()
    text = text.replace('name = "tofino"', 'name = "tofino-small"').replace("stages = 12", "stages = 8")
    path = tmp_path / "small.toml"
    path.write_text(text)
    assert main(["build", "--target-file", str(path), "--out", str(tmp_path / "o")]) == 0
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    # 8 stages leave the hardened variant's values no stage (chunk 2, bitmap 4 and its test, counter 6, the
    # values' table 7): the reference variant (bitmap 1, counter 3, exponent 4) has 3 stages of 4 value
    # arrays, and the largest power of two of them is 8
    assert plan["target"]["name"] == "tofino-small"
    assert (plan["variant"], plan["params"]["elements_per_packet"]) == ("reference", 8)


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["build", "--slots", "many"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == "p4gen build: error: argument --slots: invalid int value: 'many'\n"


def test_cli_has_no_traceback_as_process(tmp_path):
    res = subprocess.run([sys.executable, "-m", "p4gen.cli", "build", "--slots", "100000", "--target", "tofino",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("target", ["tofino", "tofino2", "bmv2"])
def test_build_writes_all_outputs(target, tmp_path):
    assert main(["build", "--slots", "512", "--target", target, "--out", str(tmp_path / target)]) == 0
    names = sorted(p.name for p in (tmp_path / target).iterdir())
    assert names == sorted(list(buildmod.OUTPUTS) + [buildmod.MARKER])
    report = (tmp_path / target / "report.txt").read_text()
    assert f"switchml on {target}" in report and "slots        512 per copy" in report


def test_p4info_ids_are_pinned_in_the_program():
    plan = make_plan(make_spec(slots=64), load_target("bmv2"))
    p4 = render_p4(plan)
    info = build_p4info(plan)
    ids = {int(m, 16) for m in re.findall(r"@id\((0x[0-9a-f]+)\)", p4)}
    entities = list(info.tables) + list(info.actions) + list(info.counters) + list(info.registers)
    assert {e.preamble.id for e in entities} == ids
    prefixes = {e.preamble.id >> 24 for e in info.tables} | {e.preamble.id >> 24 for e in info.actions}
    assert prefixes == {0x01, 0x02}


@pytest.mark.parametrize("variant", ["hardened", "reference"])
def test_decision_table_is_rendered_entry_for_entry(variant):
    plan = make_plan(make_spec(slots=64, variant=variant), load_target("tofino"))
    p4 = render_p4(plan)
    for name, keys, rules in ([(s.name, s.keys, s.rules) for s in plan.decision.steps]
                              + [("outcome", plan.decision.outcome.keys, plan.decision.outcome.rules)]):
        rows = expand(keys, rules)
        table = plan.table(f"dt_{name}")
        copies = 2 if any(k.name == "copy" for k in table.keys) else 1     # one entry per copy of each row
        assert len(table.entries) == copies * len(rows)
        for entry in table.entries:
            if keys:
                assert f"// {entry.comment}\n" in p4


def test_multi_pass_plan_and_program():
    # 24 reference values a pass (28 fit one, 24 two resident passes: a stage rotates the values)
    plan = make_plan(make_spec(slots=512, elements_per_packet=48, variant="reference"), load_target("tofino"))
    assert (plan.params.passes, plan.params.elements_per_pass, plan.params.pass_bits) == (2, 24, 1)
    assert plan.params.pass_mode == "resident"
    assert all(r.entries == 2 * 512 * 2 for r in plan.registers_of("values"))
    p4 = render_p4(plan)
    assert "hdr.recirc.setValid();" in p4 and "data_h data1;" in p4 and "RECIRC_PORT = 68;" in p4
    assert "rotate_values();" in p4
    # 32 hardened values: 16 a pass, which fit only streamed passes (no stage to rotate them)
    plan = make_plan(make_spec(slots=512, elements_per_packet=32), load_target("tofino"))
    assert (plan.params.passes, plan.params.elements_per_pass, plan.params.pass_mode) == (2, 16, "stream")


def test_variant_auto_prefers_hardened_and_reports_the_other():
    plan = make_plan(make_spec(slots=512), load_target("tofino"))
    assert plan.variant == "hardened"
    alt = plan.to_dict()["alternative"]
    assert alt == {"variant": "reference", "fits": True, "register_arrays": 19, "register_arrays_delta": -1,
                   "stages": 9, "stages_delta": -3, "sram_blocks": 38, "sram_blocks_delta": -2,
                   "register_bits_delta": -32768}


# -- cache -------------------------------------------------------------------------

def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_warm_build_is_a_byte_identical_hit(tmp_path):
    spec, prof = make_spec(slots=512), load_target("tofino")
    cold = buildmod.build(spec, prof, tmp_path / "a")
    warm = buildmod.build(spec, prof, tmp_path / "b")
    assert (cold.cache_hit, warm.cache_hit) == (False, True)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    spec, prof = make_spec(slots=256), load_target("bmv2")
    first = buildmod.build(spec, prof, tmp_path / "a")
    entry = buildmod.cache_root() / first.key[:2] / first.key
    (entry / "program.p4").write_text("truncated")
    again = buildmod.build(spec, prof, tmp_path / "b")
    assert not again.cache_hit
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    (entry / "manifest.json").unlink()
    assert not buildmod.build(spec, prof, tmp_path / "c").cache_hit
    assert buildmod.build(spec, prof, tmp_path / "d").cache_hit


def test_key_changes_with_spec_target_and_templates(monkeypatch):
    a = buildmod.build_key(make_spec(slots=512), load_target("tofino"))
    assert a == buildmod.build_key(make_spec(slots=512), load_target("tofino"))
    assert a != buildmod.build_key(make_spec(slots=511), load_target("tofino"))
    assert a != buildmod.build_key(make_spec(slots=512), load_target("tofino2"))
    from p4gen.emit import p4 as p4mod

    real = p4mod.template_sources()
    monkeypatch.setattr(buildmod, "template_sources", lambda: {**real, "tna.p4.j2": real["tna.p4.j2"] + " "})
    assert a != buildmod.build_key(make_spec(slots=512), load_target("tofino"))


def test_no_cache_neither_reads_nor_writes(tmp_path):
    buildmod.build(make_spec(slots=8), load_target("bmv2"), tmp_path / "a", use_cache=False)
    assert not buildmod.cache_root().exists()


# -- output safety ------------------------------------------------------------------

def test_foreign_directory_is_refused_then_forced_without_losing_files(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "program.p4").write_text("my own program")
    assert main(["build", "--target", "bmv2", "--out", str(out)]) == 1
    assert "was not created by p4gen" in capsys.readouterr().err
    assert (out / "program.p4").read_text() == "my own program"
    assert main(["build", "--target", "bmv2", "--out", str(out), "--force"]) == 0
    assert (out / "notes.txt").read_text() == "keep me"
    assert (out / "program.p4").read_text().startswith("// Generated by p4gen")


def test_rebuild_replaces_own_directory_and_keeps_user_files(tmp_path):
    out = tmp_path / "o"
    assert main(["build", "--target", "bmv2", "--slots", "16", "--out", str(out)]) == 0
    (out / "compiled.json").write_text("{}")
    assert main(["build", "--target", "bmv2", "--slots", "32", "--out", str(out)]) == 0
    assert json.loads((out / "plan.json").read_text())["params"]["slots"] == 32
    assert (out / "compiled.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "o"]   # no temporary siblings left


def test_output_path_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    assert main(["build", "--out", str(f)]) == 1
    assert capsys.readouterr().err == f"p4gen: error: output '{f}' exists and is not a directory\n"
    assert f.read_text() == "x"


def test_targets_lists_the_limits_builds_use(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["targets"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out[0]
    names = ("target", "arch", "pipes", "stages", "ALUs/stage", "register SRAM blk/stage", "PHV bits", "lanes/reg",
             "passes", "MTU")
    cols = [head.index(h) for h in names] + [None]
    rows = {ln.split()[0]: dict(zip(names, (ln[a:b].strip() for a, b in zip(cols, cols[1:])))) for ln in out[1:5]}
    assert list(rows) == ["bmv2", "soft", "tofino", "tofino2"]
    got = {t: (r["register SRAM blk/stage"], r["PHV bits"]) for t, r in rows.items()}
    assert got == {"bmv2": ("-", "-"), "soft": ("-", "-"), "tofino": ("48 of 80", "6144 (4096 + 2048 tagalong)"),
                   "tofino2": ("48 of 80", "3760 of 5120")}
    assert rows["bmv2"]["MTU"].split()[0] == "1500" and rows["soft"]["MTU"].split()[0] == "9000"
    assert out[5].startswith("register SRAM and PHV bits are the limits a build is held to")
    # the same limits as a build's report.txt
    for target in ("tofino", "tofino2"):
        assert main(["build", "--target", target, "--slots", "64", "--out", str(tmp_path / target)]) == 0
        report = (tmp_path / target / "report.txt").read_text()
        assert f"/{got[target][0].split()[0]}  " in report                   # a stage's SRAM blocks x/48
        assert re.search(rf"PHV bits \d+/{got[target][1].split()[0]},", report), report


# -- real compilers, where installed -------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None, reason="p4c-bm2-ss is not on PATH")
@pytest.mark.parametrize("stem", [s for t, s, _ in regen.CASES if t == "bmv2"])
def test_bmv2_goldens_compile_without_warnings(stem):
    # through p4gen's compile (p4c-bm2-ss -o program.json --p4runtime-files p4info.p4c.txtpb), so the run's
    # compile cache serves the testbed and the docs' builds of the same programs
    files = buildmod.compile_program("v1model", (HERE / "golden" / "bmv2" / f"{stem}.p4").read_bytes())
    log = files["compile.log"].decode()
    assert log.startswith("$ p4c-bm2-ss ") and "warning" not in log.lower(), log
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2

    theirs = text_format.Parse(files["p4info.p4c.txtpb"].decode(), p4info_pb2.P4Info())
    ours = text_format.Parse((HERE / "golden" / "bmv2" / f"{stem}.p4info.txt").read_text(), p4info_pb2.P4Info())
    assert {(t.preamble.id, t.preamble.name) for t in theirs.tables} == {(t.preamble.id, t.preamble.name) for t in ours.tables}
    assert {(a.preamble.id, a.preamble.name) for a in theirs.actions} >= {(a.preamble.id, a.preamble.name) for a in ours.actions}


def _tna_include() -> str | None:
    import os

    inc = os.environ.get("P4GEN_TNA_INCLUDE")
    return inc if inc and (Path(inc) / "tna.p4").is_file() else None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("p4test") is None or _tna_include() is None,
                    reason="p4test or tna.p4 (P4GEN_TNA_INCLUDE) is not available")
@pytest.mark.parametrize("target,stem", [(t, s) for t, s, _ in regen.CASES if t != "bmv2"])
def test_tna_goldens_pass_the_frontend(target, stem):
    src = HERE / "golden" / target / f"{stem}.p4"
    arch = load_target(target).arch
    name, argv = buildmod.find_compiler(arch, backend=False)   # `p4gen build --compile` with no Tofino compiler
    assert name == "p4test" and buildmod.TOFINO_DEFINE[arch] in argv
    res = subprocess.run(argv + [str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "warning" not in (res.stdout + res.stderr).lower(), res.stderr


@pytest.mark.parametrize("target,define", [("tofino", "-D__TARGET_TOFINO__=1"), ("tofino2", "-D__TARGET_TOFINO__=2")])
def test_tna_compile_defines_the_tofino_target(target, define, tmp_path, monkeypatch, capsys):
    """`p4gen build --compile` passes the define the open tna.p4 / t2na.p4 need (checked with a stand-in p4test),
    and says that p4test checked the front end only: the stages, PHV and SRAM stay predictions."""
    fake = tmp_path / "bin" / "p4test"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo p4test; echo Version 0.0; exit 0; fi\n"
                    f"echo \"$@\" > {tmp_path / 'argv'}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    monkeypatch.setenv("P4GEN_TNA_INCLUDE", "/opt/tna-include")
    assert main(["build", "--target", target, "--slots", "64", "--compile", "--out", str(tmp_path / "o")]) == 0
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:4] == ["--std", "p4-16", define, "-I"] and argv[4] == "/opt/tna-include"
    assert argv[5].endswith("program.p4")
    checked = ("the front end only (syntax, types, the architecture's externs), not stages, PHV or SRAM")
    cap = capsys.readouterr()
    assert cap.out.splitlines()[1] == f"  checked by p4test Version 0.0: {checked}"
    assert re.fullmatch(rf"build \+[0-9.]+ s: compiling program.p4 for {target} with p4test: {re.escape(checked)}\n",
                        cap.err), cap.err                           # announced as the compile starts
    assert (tmp_path / "o" / "compile.log").read_text() == f"$ p4test --std p4-16 {define} -I /opt/tna-include program.p4\n"
    assert (tmp_path / "o" / "report.txt").read_text().splitlines()[-3:] == [
        "  predicted    the figures above are p4gen's model: no Tofino compiler allocated them (--compile with "
        "p4c-barefoot or bf-p4c on PATH does)",
        "  compiled by  p4test Version 0.0; its log is compile.log",
        f"  checked      {checked}"]
    assert json.loads((tmp_path / "o" / "report.json").read_text())["compiled"] == {
        "compiler": "p4test Version 0.0", "covers": checked}


def test_a_program_compiled_before_is_taken_from_the_compile_cache(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    fake = tmp_path / "bin" / "p4test"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then echo p4test; echo Version 0.0; exit 0; fi\n"
                    f"echo run >> {runs}\necho 'compiled by the stand-in'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    monkeypatch.setenv(buildmod.COMPILE_CACHE_ENV, str(tmp_path / "compiled"))
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))
    for out in ("a", "b"):                                      # --no-cache: the build cache is not asked
        assert main(["build", "--target", "tofino", "--slots", "64", "--compile", "--no-cache", "--out",
                     str(tmp_path / out)]) == 0
    assert runs.read_text() == "run\n"                         # the second build's program was compiled once
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert (tmp_path / "b" / "compile.log").read_text().endswith("program.p4\ncompiled by the stand-in\n")
    assert main(["build", "--target", "tofino", "--slots", "128", "--compile", "--no-cache", "--out",
                 str(tmp_path / "c")]) == 0
    assert runs.read_text() == "run\nrun\n"                   # another program: compiled


def test_several_targets_build_in_parallel(tmp_path, capsys):
    assert main(["build", "--slots", "64", "--target", "tofino,tofino2,bmv2", "--out", str(tmp_path / "all")]) == 0
    for t in ("tofino", "tofino2", "bmv2"):
        assert json.loads((tmp_path / "all" / t / "plan.json").read_text())["target"]["name"] == t
    assert capsys.readouterr().out.splitlines()[-1].startswith("3 build(s) in ")


def test_several_targets_refused_before_any_build(tmp_path, capsys):
    (tmp_path / "all" / "bmv2").mkdir(parents=True)
    (tmp_path / "all" / "bmv2" / "mine.txt").write_text("x")
    assert main(["build", "--target", "tofino,bmv2", "--out", str(tmp_path / "all")]) == 1
    assert "was not created by p4gen" in capsys.readouterr().err
    assert not (tmp_path / "all" / "tofino").exists()


def test_spec_file_with_overrides(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text('slots = 128\nmax_workers = 8\nvariant = "reference"\n')
    assert main(["build", "--spec", str(spec), "--slots", "256", "--target", "bmv2", "--out", str(tmp_path / "o")]) == 0
    plan = json.loads((tmp_path / "o" / "plan.json").read_text())
    assert (plan["params"]["slots"], plan["params"]["max_workers"], plan["variant"]) == (256, 8, "reference")


def test_spec_file_errors(tmp_path, capsys):
    spec = tmp_path / "job.toml"
    spec.write_text('slots = 128\nwidth = 8\n')
    assert main(["build", "--spec", str(spec)]) == 1
    assert capsys.readouterr().err == ("p4gen: error: unknown spec field 'width'; known fields: elements_per_packet, "
                                       "jobs, max_workers, protocol, slots, value_width, variant\n")
    spec.write_text('slots = "many"\n')
    assert main(["build", "--spec", str(spec)]) == 1
    assert capsys.readouterr().err == "p4gen: error: slots='many' must be an integer in 1..16777216\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None, reason="p4c-bm2-ss is not on PATH")
def test_build_compile_caches_the_compiler_output(tmp_path, monkeypatch):
    monkeypatch.delenv(buildmod.COMPILE_CACHE_ENV, raising=False)          # the build cache alone
    assert main(["build", "--target", "bmv2", "--slots", "64", "--compile", "--out", str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "program.json").read_text())["program"].endswith("program.p4")
    assert (tmp_path / "a" / "compile.log").read_text() == (
        "$ p4c-bm2-ss --std p4-16 --arch v1model -o program.json --p4runtime-files p4info.p4c.txtpb program.p4\n")
    assert "  checked      the whole program for BMv2" in (tmp_path / "a" / "report.txt").read_text()
    res = buildmod.build(make_spec(slots=64), load_target("bmv2"), tmp_path / "b", compile_p4=True)
    assert res.cache_hit and _files(tmp_path / "a") == _files(tmp_path / "b")


def _counting_pass(monkeypatch, planner, real, calls):
    """Replace pass ``real`` by one that records (variant, elements, slots) in every pass list of the planner."""
    def counted(fit):
        calls.append((fit.variant, fit.elements, fit.slots))
        return real(fit)

    for name in ("PASSES", "FITTING", "SLOTTED"):
        monkeypatch.setattr(planner, name, tuple(counted if p is real else p for p in getattr(planner, name)))


@pytest.mark.parametrize("target", ["tofino", "tofino2", "bmv2"])
def test_a_build_lays_its_registers_out_once(target, monkeypatch):
    # the default element count is found by trying shapes only; the registers are laid out once for the
    # chosen count, once more for the other variant plan.json compares with, and then only by the
    # bisection for the most slots the chosen shape holds (``limits``)
    from p4gen import planner

    calls = []
    _counting_pass(monkeypatch, planner, planner.registers, calls)
    spec = make_spec(slots=512)
    plan = make_plan(spec, load_target(target))
    chosen = (plan.variant, plan.params.elements_per_packet, 512)
    assert calls[:2] == [chosen, (plan.alternative.variant, plan.params.elements_per_packet, 512)]
    assert {c[:2] for c in calls[2:]} == {chosen[:2]}          # the bisection of the chosen shape
    assert len(calls) <= 2 + 16                                   # bisection over 0..2**15 slots


@pytest.mark.parametrize("target", ["tofino", "tofino2", "bmv2"])
def test_a_build_times_its_steps_once_per_variant_tried(target, monkeypatch):
    # the first pass resolves a variant's table and step timing once; every later pass, the bisections and
    # a failed fit's message read them from the Fit (a default Tofino build computed them 45 times before)
    from p4gen.planner import placement

    calls = []
    real = placement.timing

    def timing(profile, table, max_workers, value_width):
        calls.append(table.variant)
        return real(profile, table, max_workers, value_width)

    monkeypatch.setattr(placement, "timing", timing)
    plan = make_plan(make_spec(slots=512), load_target(target))
    assert calls == [plan.variant, plan.alternative.variant]      # the chosen variant, the one compared with
    calls.clear()
    with pytest.raises(InfeasibleError, match="the largest slots that fits"):
        make_plan(make_spec(slots=30000, elements_per_packet=64), load_target("tofino"))
    assert calls == [v.name for v in protocols.variants("switchml")]     # auto tries each variant once


def test_the_planner_builds_the_plan_it_would_read():
    # make_plan builds the typed Plan directly, without a JSON document: it is the Plan plan.json reads back
    for target in ("tofino", "tofino2", "bmv2", "soft"):
        for kw in ({}, {"protocol": "omnireduce"}, {"elements_per_packet": 64, "slots": 100},
                   {"variant": "reference", "max_workers": 64, "jobs": 2}):
            plan = make_plan(make_spec(**kw), load_target(target))
            assert plan == Plan.from_json(plan.to_json()), (target, kw)
