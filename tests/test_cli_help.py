"""Every option of every command line has a help text, and the help of each option with a default says it.

Walks the parsers of ``p4gen`` (every subcommand) and of the ``python -m`` entry points a user
starts by hand; an option hidden on purpose is listed here.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from p4gen.cli import make_parser

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = {("testbed", "run", "--plan-cache"), ("testbed", "up", "--plan-cache"), ("testbed", "train", "--plan-cache")}
ENTRY_POINTS = ("p4gen.switch.dataplane", "p4gen.switch.udp", "p4gen.torch.train")


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _walk(sub, path + (name,))
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield path, a


class _Parsed(Exception):
    pass


def _entry_parser(module: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``module``'s main() builds (caught as it starts parsing)."""
    def grab(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", grab)
    with pytest.raises(_Parsed) as got:
        importlib.import_module(module).main([])
    monkeypatch.undo()
    return got.value.args[0]


def _options(monkeypatch):
    yield from _walk(make_parser(), ("p4gen",))
    for m in ENTRY_POINTS:
        yield from _walk(_entry_parser(m, monkeypatch), (m,))


def test_every_option_has_help_and_says_its_default(monkeypatch):
    seen, bad = 0, []
    for path, a in list(_options(monkeypatch)):
        name = "/".join(a.option_strings) or a.dest
        where = " ".join(path[1:] + (name,)) if path[0] == "p4gen" else f"{path[0]} {name}"
        if (*path[1:], name) in HIDDEN:
            assert a.help == argparse.SUPPRESS, where
            continue
        seen += 1
        if not a.help or a.help == argparse.SUPPRESS:
            bad.append(f"{where}: no help")
            continue
        if a.default not in (None, False, [], argparse.SUPPRESS) and "default" not in a.help:
            bad.append(f"{where}: default {a.default!r} not in its help")
        if a.required and a.option_strings and "required" not in a.help:
            bad.append(f"{where}: required, and its help does not say so")
    assert seen > 120
    assert bad == [], "\n".join(bad)


def test_build_help_lists_both_protocols():
    out = subprocess.run([sys.executable, "-m", "p4gen.cli", "build", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    assert "switchml (default: dense) or omnireduce (block-sparse)" in " ".join(out.stdout.split())


def test_plan_says_what_is_missing_before_loading_anything_heavy():
    # runs p4gen's CLI in this process, then prints which heavy modules it imported
    driver = ("import sys\nfrom p4gen.cli import main\nrc = main(sys.argv[1:])\n"
              "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'grpc', 'z3', 'mininet', 'torch'})\n"
              "print('exit', rc, 'imported', ','.join(heavy) or '-')\n")
    out = subprocess.run([sys.executable, "-c", driver, "plan", "--target", "tofino", "--workers", "8"],
                         capture_output=True, text=True, timeout=60)
    assert out.stderr == "p4gen: error: --link-gbps --rtt-us --size are needed to plan a layout\n"
    assert out.stdout == "exit 1 imported -\n"
    help_text = subprocess.run([sys.executable, "-m", "p4gen.cli", "plan", "--help"], capture_output=True,
                               text=True, timeout=60).stdout.split("options:")[1]
    for flag in ("--workers", "--link-gbps", "--rtt-us", "--size"):
        line = " ".join(help_text.split(flag + " ", 1)[1].split("\n  -")[0].split())
        assert "required unless --jobs" in line, (flag, line)


BENCH = sorted(p for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text())


def test_the_bench_scripts_are_the_ones_with_a_main():
    assert {p.name for p in BENCH} >= {"codegen.py", "model.py", "plan.py", "testbed.py", "tofino.py", "train.py"}


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_every_bench_script_answers_help_without_running(script):
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.startswith("usage: ") and "--help" in out.stdout
