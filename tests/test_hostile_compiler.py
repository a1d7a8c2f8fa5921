"""An adversarial compiler on PATH cannot hang or exhaust p4gen: each case of ``tests/data/bad_compilers.json``
puts its scripts first on PATH under a compiler's name and runs ``p4gen build --compile`` for its target,
which must end with the case's one line and exit 1, within a bound, and leave no process of the compile
running.  A compiler that writes 70 MiB of log leaves a build directory that the next build replaces without
``--force``.

Before, a FIFO at ``logs/resources.json`` blocked the build forever, a link to ``/dev/zero`` read until
memory ran out, non-UTF-8 output, logs of another shape and a failed compile in a build for several targets
ended in tracebacks, NaN from a log reached report.json, the timeout left the compiler's children running,
terminal escape sequences were printed raw, and a log over 64 MiB made the directory unbuildable.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
from pathlib import Path

import pytest

from p4gen.cli import main as p4gen_main

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "data" / "bad_compilers.json").read_text())
CASE_SECONDS = 60


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer within {CASE_SECONDS} s")


def _compilers(tmp: Path, scripts: dict[str, str], monkeypatch) -> None:
    bin_ = tmp / "bin"
    bin_.mkdir()
    for name, text in scripts.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp / "cache"))


def _build(args: list[str]) -> int:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        return p4gen_main(args)
    except SystemExit as exc:
        return exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_every_case_has_a_unique_name():
    assert len({c["name"] for c in CASES}) == len(CASES) >= 10


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_an_adversarial_compiler_gets_one_line(case, tmp_path, monkeypatch, capfd):
    _compilers(tmp_path, case["scripts"], monkeypatch)
    pids = tmp_path / "pids"
    monkeypatch.setenv("P4GEN_TEST_PIDS", str(pids))
    for k, v in case.get("env", {}).items():
        monkeypatch.setenv(k, v)
    multi = "," in case["target"]
    rc = _build(["build", "--compile", "--target", case["target"], "--out", str(tmp_path / "out")])
    out, err = capfd.readouterr()
    err = re.sub(r"^build \+[0-9.]+ s: compiling .*\n", "", err)        # the compile's announcement, as it starts
    assert (rc, err, out) == (1, case["error"].replace("{tmp}", str(tmp_path)) + "\n", "")
    if multi:
        assert not (tmp_path / "out").exists()
    if pids.exists():                                    # what the compiler left running was ended with it
        left = [int(p) for p in pids.read_text().split() if _alive(int(p))]
        assert not left, f"the compiler's children {left} outlived the compile"


def test_a_compiler_log_over_64_mib_is_kept_cut_and_the_directory_stays_rebuildable(tmp_path, monkeypatch, capfd):
    script = ("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n"
              "head -c 73400320 /dev/zero | tr '\\0' 'x'\n"
              "while [ $# -gt 1 ]; do case \"$1\" in -o) out=$2;; --p4runtime-files) info=$2;; esac; shift; done\n"
              "printf '{\"pipelines\": []}' > \"$out\"\nprintf 'pkg_info {}' > \"$info\"\nexit 0\n")
    _compilers(tmp_path, {"p4c-bm2-ss": script}, monkeypatch)
    out = tmp_path / "out"
    for _ in range(2):                                   # the second build replaces the first's files itself
        assert _build(["build", "--compile", "--target", "bmv2", "--no-cache", "--out", str(out)]) == 0, \
            capfd.readouterr().err
    log = (out / "compile.log").read_bytes()
    assert len(log) <= 16 << 20 and log.endswith(b"[p4gen: p4c-bm2-ss wrote 73400320 bytes; the 56627200 after the "
                                                 b"first 16773120 were dropped]\n")
    assert stat.S_ISREG((out / "program.json").stat().st_mode)
