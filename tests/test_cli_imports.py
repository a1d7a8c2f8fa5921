"""A warm-cache ``p4gen build`` loads only the compiler: no numpy, Z3, Jinja, Hypothesis, gRPC or protobuf,
and not argparse."""

from __future__ import annotations

import os
import subprocess
import sys

# (``google`` alone is the namespace package protobuf's .pth file creates at start-up; ``p4`` is p4runtime)
HEAVY = ("numpy", "z3", "jinja2", "hypothesis", "grpc", "google.protobuf", "p4", "scapy", "mininet", "torch")

# runs p4gen's CLI in this process, then prints its exit code and the heavy modules it imported
DRIVER = ("import sys\n"
          "from p4gen.cli import main\n"
          "rc = main(sys.argv[1:])\n"
          f"heavy = sorted({{h for h in {HEAVY!r} for m in sys.modules if m == h or m.startswith(h + '.')}})\n"
          "print('exit', rc, 'imported', ','.join(heavy) or '-', 'argparse' in sys.modules)\n")


def _build(tmp_path, out: str) -> list[str]:
    env = dict(os.environ, P4GEN_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-c", DRIVER, "build", "--slots", "64", "--target", "tofino",
                          "--out", str(tmp_path / out)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_a_warm_build_imports_no_numpy_z3_jinja_or_grpc(tmp_path):
    cold = _build(tmp_path, "a")
    assert "(built)" in cold[0]
    assert cold[-1].startswith("exit 0 imported ") and "jinja2" in cold[-1]     # a miss renders
    assert cold[-1].endswith(" True")                                          # through argparse
    warm = _build(tmp_path, "b")
    assert "(cache hit)" in warm[0]
    assert warm[-1] == "exit 0 imported - False"


def test_the_top_level_help_still_lists_every_subcommand():
    res = subprocess.run([sys.executable, "-m", "p4gen.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for cmd in ("build", "targets", "verify", "ctl", "testbed"):
        assert cmd in res.stdout.split("positional arguments:")[1], cmd
