"""The build cache's direct mode: a build's raw inputs find its entry, and are never a stale hit."""

from __future__ import annotations

import pytest

from p4gen import build as buildmod
from p4gen.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _run(capsys, *argv) -> list[str]:
    assert main(["build", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_direct_hit_writes_what_the_build_wrote_and_says_the_same(tmp_path, capsys, monkeypatch):
    first = _run(capsys, "--target", "bmv2", "--slots", "64", "--out", str(tmp_path / "a"))
    assert first[0].endswith("(built)")
    calls = []
    real = buildmod.build
    monkeypatch.setattr(buildmod, "build", lambda *a, **k: calls.append(1) or real(*a, **k))
    second = _run(capsys, "--target", "bmv2", "--slots", "64", "--out", str(tmp_path / "b"))
    assert calls == []                                   # found from the raw inputs alone
    assert second[0] == first[0].replace(str(tmp_path / "a"), str(tmp_path / "b")).replace("(built)", "(cache hit)")
    assert second[1:-1] == [ln.replace(str(tmp_path / "a"), str(tmp_path / "b")) for ln in first[1:-1]]
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_changed_spec_and_target_files_are_misses(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text("slots = 64\n")
    out = str(tmp_path / "o")
    assert _run(capsys, "--spec", str(spec), "--target", "bmv2", "--out", out)[0].endswith("(built)")
    assert _run(capsys, "--spec", str(spec), "--target", "bmv2", "--out", out)[0].endswith("(cache hit)")
    spec.write_text("slots = 32\n")
    line = _run(capsys, "--spec", str(spec), "--target", "bmv2", "--out", out)[0]
    assert "slots=32 " in line and line.endswith("(built)")
    target = tmp_path / "t.toml"
    text = (buildmod.Path(buildmod.__file__).parent / "target" / "bmv2.toml").read_text()
    target.write_text(text)
    assert _run(capsys, "--target-file", str(target), "--slots", "8", "--out", out)[0].endswith("(built)")
    assert _run(capsys, "--target-file", str(target), "--slots", "8", "--out", out)[0].endswith("(cache hit)")
    target.write_text(text + "\n# a comment\n")        # new raw inputs, the same normalised build: the build key hits
    assert _run(capsys, "--target-file", str(target), "--slots", "8", "--out", out)[0].endswith("(cache hit)")
    target.write_text(text.replace('name = "bmv2"', 'name = "mybmv2"'))
    line = _run(capsys, "--target-file", str(target), "--slots", "8", "--out", out)[0]
    assert " for mybmv2: " in line and line.endswith("(built)")


def test_a_corrupt_entry_behind_a_direct_key_is_rebuilt(tmp_path, capsys):
    _run(capsys, "--target", "bmv2", "--slots", "16", "--out", str(tmp_path / "a"))
    key = next((tmp_path / "cache" / "direct").rglob("*")).parent
    entry = next(p for p in (tmp_path / "cache").iterdir() if p.name != "direct")
    for e in entry.iterdir():
        (e / "program.p4").write_text("truncated")
    assert key.exists()
    line = _run(capsys, "--target", "bmv2", "--slots", "16", "--out", str(tmp_path / "b"))[0]
    assert line.endswith("(built)")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _run(capsys, "--target", "bmv2", "--slots", "16", "--out", str(tmp_path / "c"))[0].endswith("(cache hit)")


def test_a_direct_hit_refuses_a_foreign_directory_like_a_build(tmp_path, capsys):
    _run(capsys, "--target", "bmv2", "--out", str(tmp_path / "a"))
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["build", "--target", "bmv2", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (f"p4gen: error: output directory {str(out)!r} is not empty and was not created by p4gen; "
                   f"choose another --out or pass --force to write p4gen's files into it\n")
    assert _files(out) == {"notes.txt": b"keep me"}


def test_invalid_inputs_never_reach_the_direct_cache(tmp_path, capsys):
    assert main(["build", "--target", "bmv2", "--slots", "0", "--out", str(tmp_path / "a")]) == 1
    first = capsys.readouterr().err
    assert main(["build", "--target", "bmv2", "--slots", "0", "--out", str(tmp_path / "a")]) == 1
    assert capsys.readouterr().err == first and first.startswith("p4gen: error: ")
    assert not (tmp_path / "cache" / "direct").exists()


# Command lines the cache-hit path reads without argparse, and what argparse makes of each.
PLAIN = [
    ["build"],
    ["build", "--out", "o"],
    ["build", "--target", "bmv2", "--slots", "64", "--out", "o"],
    ["build", "--out", "o", "--force", "--spec", "s.toml", "--protocol", "omnireduce", "--variant", "reference",
     "--workers", "8", "--slots", " 32 ", "--elements", "128", "--value-width", "16", "--jobs", "2"],
    ["build", "--target-file", "t.toml", "--out", ""],
    ["build", "--target", "tofino,bmv2", "--out", "a=b", "--workers", "+3"],
]
# ... and some it leaves to argparse: abbreviations, --flag=value, help, repeats, both targets, values
# that are no ints or start with '-', the options a direct hit never has, other subcommands
NOT_PLAIN = [
    [], ["targets"], ["--version"], ["-h"], ["build", "-h"], ["build", "--help"], ["build", "--slot", "4"],
    ["build", "--slots=4"], ["build", "--slots", "4", "--slots", "8"], ["build", "--force", "--force"],
    ["build", "--target", "bmv2", "--target-file", "t.toml"], ["build", "--slots", "0x10"],
    ["build", "--slots", "-4"], ["build", "--out", "--force"], ["build", "--out"], ["build", "out"],
    ["build", "--", "--out", "o"], ["build", "--no-cache", "--out", "o"], ["build", "--verify", "--out", "o"],
    ["build", "--compile", "--out", "o"], ["build", "--layout", "best", "--out", "o"],
    ["build", "--size", "64", "--out", "o"], ["build", "--out", "o", "-f"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_build_line_is_read_as_argparse_reads_it(argv):
    from p4gen.cli import _plain_build_args, make_parser

    plain = _plain_build_args(argv)
    assert plain is not None
    parsed = vars(make_parser("build").parse_args(argv))
    assert plain == {k: parsed[k] for k in plain}


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=" ".join)
def test_other_command_lines_are_left_to_argparse(argv):
    from p4gen.cli import _plain_build_args

    assert _plain_build_args(argv) is None


def test_a_hit_through_argparse_says_and_writes_what_the_plain_one_does(tmp_path, capsys):
    _run(capsys, "--target", "bmv2", "--slots", "16", "--out", str(tmp_path / "a"))
    plain = _run(capsys, "--target", "bmv2", "--slots", "16", "--out", str(tmp_path / "b"))
    parsed = _run(capsys, "--target=bmv2", "--slots=16", "--out", str(tmp_path / "c"))     # argparse's forms only
    assert plain[0].endswith("(cache hit)")
    assert [ln.replace(str(tmp_path / "c"), str(tmp_path / "b")) for ln in parsed[:-1]] == plain[:-1]
    assert _files(tmp_path / "a") == _files(tmp_path / "b") == _files(tmp_path / "c")
