"""Verification time: one proof for every n, the pool's speed-up, and the mutants' verdicts, from one run.

    python bench/verify.py [--skip-jobs] [--skip-mutants] [--ranges 2..32,2..128,2..256]

1. Proof time vs the worker range.  ``p4gen verify`` proves each protocol
   model once, on a symbolic worker count n in lo..hi (see docs/verification.md);
   the time of that one proof is printed for several ranges, per model
   (SwitchML reference under per-worker FIFO, SwitchML hardened and
   OmniReduce with no network assumption).  It should not grow with hi.
2. ``--jobs 2`` against ``--jobs 1``: the whole ``p4gen verify`` of a
   ``p4gen build --slots 512 --target tofino`` plan, run in-process once
   with each setting, one after the other; the ratio is the speed-up.
3. Every catalogue mutant (``verify/mutants.py``): the time to its verdict
   at its n (2, or 3 for the mid-round mutants), and the slowest.

The machine is shared: each timing line carries the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import time

from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.verify import runner
from p4gen.verify.engine import Prover, bmc
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranges", default="2..32,2..128,2..256")
    ap.add_argument("--skip-jobs", action="store_true")
    ap.add_argument("--skip-mutants", action="store_true")
    a = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs")
    ranges = [tuple(int(x) for x in r.split("..")) for r in a.ranges.split(",")]
    print("1. one proof for every n in lo..hi (symbolic n; one process)")
    print(f"{'model':<11} {'n':>8} {'result':<7} {'units':>5} {'queries':>7} {'seconds':>8} {'load':>6}")
    for v in ("reference", "hardened", "omnireduce"):
        for lo, hi in ranges:
            ok, dt, units, q = prove_range(v, lo, hi)
            print(f"{v:<11} {f'{lo}..{hi}':>8} {'proved' if ok else 'FAILED':<7} {units:>5} {q:>7} {dt:8.2f} {_load():>6}",
                  flush=True)
    if not a.skip_jobs:
        print()
        print("2. p4gen verify of `p4gen build --slots 512 --target tofino` (n=2..32), --jobs 1 then --jobs 2")
        plan = make_plan(make_spec(slots=512), load_target("tofino"))
        times = {}
        for jobs in (1, 2):
            t0 = time.perf_counter()
            rep = runner.run(plan, jobs=jobs, out=lambda _: None)
            times[jobs] = time.perf_counter() - t0
            print(f"--jobs {jobs}: {'verified' if rep.ok else 'FAILED'} in {times[jobs]:.2f}s  load {_load()}", flush=True)
        print(f"speed-up of --jobs 2 over --jobs 1: {times[1] / times[2]:.2f}x")
    if not a.skip_mutants:
        print()
        print("3. catalogue mutants: time to the verdict (counterexample search, up to 12 events)")
        print(f"{'mutant':<36} {'n':>2} {'verdict':<40} {'seconds':>8} {'load':>6}")
        worst = ("", 0.0)
        for m in CATALOGUE:
            t0 = time.perf_counter()
            cex = bmc(mutant_model(m), m.n, runner.BMC_DEPTH)
            dt = time.perf_counter() - t0
            verdict = f"refuted ({cex.prop}, {cex.steps} steps)" if cex else "NOT REFUTED"
            print(f"{m.name:<36} {m.n:>2} {verdict:<40} {dt:8.2f} {_load():>6}", flush=True)
            worst = max(worst, (m.name, dt), key=lambda x: x[1])
        print(f"slowest mutant: {worst[0]} in {worst[1]:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
