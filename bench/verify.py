"""Verification time: one proof for every n, the pool's speed-up, and the mutants' verdicts, from one run.

    python bench/verify.py [--skip-ranges] [--skip-jobs] [--skip-mutants] [--ranges 2..32,2..128,2..256]

1. Proof time vs the worker range.  ``p4gen verify`` proves each protocol
   model once, on a symbolic worker count n in lo..hi (see docs/verification.md);
   the time of that one proof is printed for several ranges, per model
   (SwitchML reference under per-worker FIFO, SwitchML hardened and
   OmniReduce with no network assumption).  It should not grow with hi.
2. ``--jobs 2`` against ``--jobs 1``: the whole ``p4gen verify`` of a
   ``p4gen build --slots 512 --target tofino`` build, each run a fresh
   process as a user starts it (nothing cached from an earlier run), in the
   order 1, 2, 2, 1 so that a change of load hits both settings alike; the
   ratio of the two settings' faster runs is the speed-up.  Each run also
   shows the CPU time it used (its pool included) and the cores that kept
   busy on average (CPU time / wall time).  Where Linux schedules by
   session (autogroup, ``/proc/sys/kernel/sched_autogroup_enabled`` = 1)
   and other sessions load the machine, the processes of one run share
   that session's part of the CPUs: ``--jobs 2`` then shows about 1 core
   busy, and gains only from a core that is idle.
3. Every catalogue mutant (``verify/mutants.py``): the time to its verdict
   at its n (2, or 3 for the mid-round mutants), and the slowest.

The machine is shared: each timing line carries the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

from p4gen.verify import runner
from p4gen.verify.engine import Prover
from p4gen.verify.explore import bmc
from p4gen.verify.mutants import CATALOGUE, base_model, mutant_model
from p4gen.verify.workers import Workers


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def prove_range(variant: str, lo: int, hi: int) -> tuple[bool, float, int, int]:
    t0 = time.perf_counter()
    p = Prover(base_model(variant), Workers.between(lo, hi))
    res = [p.check(u) for u in p.units()]
    ok = not any(r.failed_clauses or r.failed_props for r in res)
    return ok, time.perf_counter() - t0, len(res), sum(r.queries for r in res)


def _child_cpu() -> float:
    """CPU seconds of the finished child processes (a verify run and its pool), user + system."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cli(*argv: str, check: bool = True) -> int:
    """``p4gen ARGV`` in a fresh process, its output discarded; the exit code."""
    rc = subprocess.run([sys.executable, "-c", "from p4gen.cli import main; raise SystemExit(main())", *argv],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    if check and rc:
        raise SystemExit(f"p4gen {' '.join(argv)} exited {rc}")
    return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranges", default="2..32,2..128,2..256")
    ap.add_argument("--skip-ranges", action="store_true")
    ap.add_argument("--skip-jobs", action="store_true")
    ap.add_argument("--skip-mutants", action="store_true")
    a = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs")
    ranges = [tuple(int(x) for x in r.split("..")) for r in a.ranges.split(",")]
    if not a.skip_ranges:
        print("1. one proof for every n in lo..hi (symbolic n; one process)")
        print(f"{'model':<11} {'n':>8} {'result':<7} {'units':>5} {'queries':>7} {'seconds':>8} {'load':>6}")
        for v in ("reference", "hardened", "omnireduce"):
            for lo, hi in ranges:
                ok, dt, units, q = prove_range(v, lo, hi)
                print(f"{v:<11} {f'{lo}..{hi}':>8} {'proved' if ok else 'FAILED':<7} {units:>5} {q:>7} {dt:8.2f} "
                      f"{_load():>6}", flush=True)
    if not a.skip_jobs:
        print()
        print("2. p4gen verify of `p4gen build --slots 512 --target tofino` (n=2..32), a fresh process each, "
              "--jobs 1, 2, 2, 1")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "s512")
            _cli("build", "--slots", "512", "--target", "tofino", "--out", out)
            times: dict[int, list[float]] = {1: [], 2: []}
            for jobs in (1, 2, 2, 1):
                t0, c0 = time.perf_counter(), _child_cpu()
                rc = _cli("verify", out, "--jobs", str(jobs), check=False)
                wall, cpu = time.perf_counter() - t0, _child_cpu() - c0
                times[jobs].append(wall)
                print(f"--jobs {jobs}: {'verified' if rc == 0 else f'FAILED (exit {rc})'} in {wall:.2f}s, "
                      f"{cpu:.2f} CPU-s ({cpu / wall:.2f} cores busy on average)  load {_load()}", flush=True)
        print(f"speed-up of --jobs 2 over --jobs 1 (faster run of each): {min(times[1]) / min(times[2]):.2f}x")
    if not a.skip_mutants:
        print()
        print(f"3. catalogue mutants: time to the verdict (counterexample search, up to {runner.SEARCH_DEPTH} events)")
        print(f"{'mutant':<36} {'n':>2} {'verdict':<40} {'seconds':>8} {'load':>6}")
        worst = ("", 0.0)
        for m in CATALOGUE:
            t0 = time.perf_counter()
            cex = bmc(mutant_model(m), m.n, runner.SEARCH_DEPTH)
            dt = time.perf_counter() - t0
            verdict = (f"refuted ({cex.prop}, {cex.steps} steps{', then a deadlock' if cex.deadlock else ''})"
                       if cex else "NOT REFUTED")
            print(f"{m.name:<36} {m.n:>2} {verdict:<40} {dt:8.2f} {_load():>6}", flush=True)
            worst = max(worst, (m.name, dt), key=lambda x: x[1])
        print(f"slowest mutant: {worst[0]} in {worst[1]:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
