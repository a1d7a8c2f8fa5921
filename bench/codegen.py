"""Benchmark: cold vs warm `p4gen build`, and how plan+render cost grows with slots.

Run: .venv/bin/python bench/codegen.py
Prints what it compares and the ratio from this one run.
``--before REV``: instead, cold builds of git revision REV (exported as an install
lays it out, bench/revision.py) and of this checkout, taking turns, and the ratio
after / before of their median wall and CPU time.

Process level: `python -m p4gen.cli build --slots 512 --target tofino --out DIR`
as a new process each time, interpreter start-up included.  A cold build
gets a new, empty build cache (it plans, renders and fills the cache); a
warm one hits the cache the first cold build filled (direct mode: it
imports only the compiler's cache code, see tests/test_cli_imports.py) and
is checked to write the same bytes.  Every build writes a new directory.
The processes keep their bytecode in a cache of their own (in the
temporary directory, filled by one unmeasured cold and warm build first),
as an installed package has its modules compiled.  Cold builds, warm
builds and a bare interpreter start-up (`python -c pass`, same
environment) take turns, --rounds times (9), so that a change of the machine's
load hits all three alike; the figures are medians of the rounds, and the
ratio is that of the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 9
ARGS = ["build", "--slots", "512", "--target", "tofino"]


def _process(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, check=True, env=env, stdout=subprocess.PIPE, text=True).stdout
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), out


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) + f" on {os.cpu_count()} cores"


def bench_process(tmp: Path, rounds: int = ROUNDS) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
    build = [sys.executable, "-m", "p4gen.cli", *ARGS, "--out"]
    warm_env = dict(env, P4GEN_CACHE_DIR=str(tmp / "cache"))

    def cold(name: str):
        return _process(build + [str(tmp / name)], dict(env, P4GEN_CACHE_DIR=str(tmp / f"cache-{name}")))

    def warm(name: str):
        return _process(build + [str(tmp / name)], warm_env)

    # unmeasured: fills the build cache the warm builds hit, and the bytecode cache
    first = _process(build + [str(tmp / "first")], warm_env)[2]
    assert "(built)" in first.splitlines()[0], first
    warm("warm-up")
    runs: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": [], "start": []}
    print(f"process: `p4gen {' '.join(ARGS)}`, {rounds} rounds of a cold build, a warm build and "
          f"`python -c pass`; {_load()}")
    for i in range(rounds):
        wall, cpu, out = cold(f"cold{i}")
        assert "(built)" in out.splitlines()[0], out
        runs["cold"].append((wall, cpu))
        wall, cpu, out = warm(f"warm{i}")
        assert "(cache hit)" in out.splitlines()[0], out
        runs["warm"].append((wall, cpu))
        runs["start"].append(_process([sys.executable, "-c", "pass"], env)[:2])
    assert _files(tmp / f"warm{rounds - 1}") == _files(tmp / "first") == _files(tmp / "cold0")
    med = {k: (statistics.median(w for w, _c in v), statistics.median(c for _w, c in v)) for k, v in runs.items()}
    low = {k: (min(w for w, _c in v), min(c for _w, c in v)) for k, v in runs.items()}
    print(f"  {'':28} {'wall ms':>9} {'CPU ms':>9}   (median of {rounds}; fastest; CPU = user + system time)")
    for k, label in (("cold", "cold (empty cache)"), ("warm", "warm (cache hit)"),
                     ("start", "interpreter start-up alone")):
        print(f"  {label:28} {med[k][0] * 1000:9.1f} {med[k][1] * 1000:9.1f}   "
              f"(fastest {low[k][0] * 1000:.1f} / {low[k][1] * 1000:.1f})")
    print(f"  {'cold / warm':28} {med['cold'][0] / med['warm'][0]:8.2f}x {med['cold'][1] / med['warm'][1]:8.2f}x"
          f"   (warm less start-up: {(med['warm'][0] - med['start'][0]) * 1000:.1f} ms wall, "
          f"{(med['warm'][1] - med['start'][1]) * 1000:.1f} ms CPU)")
    print(f"  warm output byte-identical to the cold build's; {_load()}")


def bench_in_process(tmp: Path) -> None:
    from p4gen import build as buildmod
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    os.environ["P4GEN_CACHE_DIR"] = str(tmp / "cache-in-process")
    spec, prof = make_spec(slots=512), load_target("tofino")
    t0 = time.perf_counter()
    r1 = buildmod.build(spec, prof, tmp / "c")
    cold_in = time.perf_counter() - t0
    t0 = time.perf_counter()
    r2 = buildmod.build(spec, prof, tmp / "d")
    warm_in = time.perf_counter() - t0
    assert (r1.cache_hit, r2.cache_hit) == (False, True)
    print("in-process: p4gen.build.build(slots=512, tofino) into a new directory")
    print(f"  cold (plan, render, write)   {cold_in * 1000:8.1f} ms")
    print(f"  warm (key, verify, copy)     {warm_in * 1000:8.1f} ms")
    print(f"  cold / warm                  {cold_in / warm_in:8.2f}x")


def bench_slots() -> None:
    from p4gen.emit.p4 import render_p4
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    prof = load_target("tofino")
    print("in-process plan + render (P4 text) against slots, tofino, 64 elements:")
    print(f"  {'slots':>6}  {'plan ms':>8}  {'render ms':>9}  {'largest-slots search':>20}")
    slots = 1
    while slots <= 16384:
        spec = make_spec(slots=slots)
        t0 = time.perf_counter()
        plan = make_plan(spec, prof)
        t1 = time.perf_counter()
        render_p4(plan)
        t2 = time.perf_counter()
        print(f"  {slots:>6}  {(t1 - t0) * 1000:8.2f}  {(t2 - t1) * 1000:9.2f}  {plan.limits.largest_slots:>20}")
        slots *= 4 if slots < 16384 else 2


# A cold build in a new process: argv[1] is an exported tree ('' for this checkout's installed p4gen).
CHILD = r"""
import sys
tree = sys.argv[1]
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, tree)
import p4gen
assert (str(p4gen.__file__).startswith(tree)) if tree else "__editable__" not in p4gen.__file__, p4gen.__file__
from p4gen.cli import main
sys.exit(main(sys.argv[2:]))
"""


def bench_before(rev: str, tmp: Path, rounds: int = ROUNDS) -> None:
    """Cold builds of ``rev`` and of this checkout, ``rounds`` each, taking turns; the ratio of the medians."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import revision

    tree = revision.export(rev, tmp / "before")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "bytecode")
    sides = {"before": str(tree), "after": ""}

    def cold(side: str, name: str):
        out = tmp / f"{side}-{name}"
        wall, cpu, text = _process([sys.executable, "-c", CHILD, sides[side], *ARGS, "--out", str(out)],
                                   dict(env, P4GEN_CACHE_DIR=str(tmp / f"cache-{side}-{name}")))
        assert "(built)" in text.splitlines()[0], text
        return wall, cpu

    for side in sides:                                   # unmeasured: fills each side's bytecode cache
        cold(side, "first")
    print(f"cold `p4gen {' '.join(ARGS)}` in a new process, {rounds} rounds taking turns: before = "
          f"{revision.describe(rev)}; after = this checkout; {_load()}")
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    for i in range(rounds):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            runs[side].append(cold(side, str(i)))
    med = {s: (statistics.median(w for w, _c in v), statistics.median(c for _w, c in v)) for s, v in runs.items()}
    for s in sides:
        print(f"  {s:8} {med[s][0] * 1000:9.1f} ms wall {med[s][1] * 1000:9.1f} ms CPU   (median of {rounds})")
    print(f"  after / before: {med['after'][0] / med['before'][0]:.3f}x wall, "
          f"{med['after'][1] / med['before'][1]:.3f}x CPU; {_load()}")


def make_parser() -> argparse.ArgumentParser:
    doc = __doc__.split("\n\n")
    p = argparse.ArgumentParser(prog="bench/codegen.py", description=doc[0],
                                epilog="\n\n".join(doc[1:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help=f"rounds of a cold build, a warm build and an interpreter start-up (default {ROUNDS})")
    p.add_argument("--before", metavar="REV",
                   help="instead: cold builds of git revision REV and of this checkout, taking turns, and their ratio")
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.rounds < 1:
        make_parser().error(f"--rounds {args.rounds} must be at least 1")
    if args.before:
        with tempfile.TemporaryDirectory(prefix="p4gen-bench-") as tmp:
            bench_before(args.before, Path(tmp), args.rounds)
        return 0
    with tempfile.TemporaryDirectory(prefix="p4gen-bench-") as tmp:
        bench_process(Path(tmp), args.rounds)
        bench_in_process(Path(tmp))
    bench_slots()
    return 0


if __name__ == "__main__":
    sys.exit(main())
