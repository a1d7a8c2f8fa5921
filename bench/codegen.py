"""Benchmark: cold vs warm `p4gen build`, and how plan+render cost grows with slots.

Run: .venv/bin/python bench/codegen.py
Prints what it compares and the ratio from this one run.  The process-level
figures are each the fastest of three runs (a cold run gets a new, empty
cache; warm runs hit the cache the first cold run filled), since other work
shares this machine; a warm build imports only the compiler (no numpy, Z3,
Jinja or protobuf: tests/test_cli_imports.py).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


REPEATS = 3


def _process(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `python -m p4gen.cli` process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "p4gen.cli", *args], check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> int:
    from p4gen import build as buildmod
    from p4gen.emit.p4 import render_p4
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    with tempfile.TemporaryDirectory(prefix="p4gen-bench-") as tmp:
        env = dict(os.environ, P4GEN_CACHE_DIR=str(Path(tmp) / "cache"))
        args = ["build", "--slots", "512", "--target", "tofino"]
        colds = [_process(args + ["--out", str(Path(tmp) / f"a{i}")],
                          env if i == 0 else dict(env, P4GEN_CACHE_DIR=str(Path(tmp) / f"cache{i}")))
                 for i in range(REPEATS)]
        warms = [_process(args + ["--out", str(Path(tmp) / f"b{i}")], env) for i in range(REPEATS)]
        cold, warm = min(c[0] for c in colds), min(w[0] for w in warms)
        cold_cpu, warm_cpu = min(c[1] for c in colds), min(w[1] for w in warms)
        print(f"process: `p4gen build --slots 512 --target tofino` (includes interpreter start-up; "
              f"fastest of {REPEATS}; CPU = user + system time of the process)")
        print(f"  cold (empty cache) {cold * 1000:8.1f} ms   CPU {cold_cpu * 1000:8.1f} ms")
        print(f"  warm (cache hit)   {warm * 1000:8.1f} ms   CPU {warm_cpu * 1000:8.1f} ms")
        print(f"  cold / warm        {cold / warm:8.2f}x      {cold_cpu / warm_cpu:8.2f}x")

        os.environ["P4GEN_CACHE_DIR"] = str(Path(tmp) / "cache-in-process")
        spec, prof = make_spec(slots=512), load_target("tofino")
        t0 = time.perf_counter()
        r1 = buildmod.build(spec, prof, Path(tmp) / "c")
        cold_in = time.perf_counter() - t0
        t0 = time.perf_counter()
        r2 = buildmod.build(spec, prof, Path(tmp) / "d")
        warm_in = time.perf_counter() - t0
        assert (r1.cache_hit, r2.cache_hit) == (False, True)
        print("in-process: p4gen.build.build(slots=512, tofino) into a new directory")
        print(f"  cold (plan, render, write)   {cold_in * 1000:8.1f} ms")
        print(f"  warm (key, verify, copy)     {warm_in * 1000:8.1f} ms")
        print(f"  cold / warm                  {cold_in / warm_in:8.2f}x")

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
        print(f"  {slots:>6}  {(t1 - t0) * 1000:8.2f}  {(t2 - t1) * 1000:9.2f}  {plan.data['limits']['largest_slots']:>20}")
        slots *= 4 if slots < 16384 else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
