"""Proof time of the slot-reuse protocol vs workers n and vs slot count, from one run.

    python bench/verify.py [--variant hardened|reference|both] [--ns 2,4,8,16,32] [--sweep]

What one protocol proof covers (``p4gen.verify.protocol.prove``): for one n,
the five slot-reuse properties, by induction over a one-slot model built from
the plan's decision table (register, exponent and value rows), worker 0's
events checked by symmetry.  The reference variant is proved under per-worker
FIFO delivery to the switch, the hardened one with no network assumption.
``--sweep`` also proves every n from 2 to 32 (what ``p4gen verify`` does for a
plan with max_workers=32) and prints the total per variant.

Slot count does not enter the model (one slot is modelled; slots are
independent registers), so the time vs slots only shows noise; it is
measured at n=4 to demonstrate that.  Every timing line carries the 1-minute
load average, since the numbers move with whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import time

from p4gen import decision
from p4gen.verify import fixedpoint, protocol


def prove_time(variant: str, n: int, slots: int = 512) -> tuple[bool, float, int]:
    cfg = protocol.ModelConfig(n=n, table=decision.decision_table(variant), fifo=(variant == "reference"), slots=slots)
    t0 = time.perf_counter()
    res = protocol.prove(cfg)
    return res.proved, time.perf_counter() - t0, res.queries


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="both", choices=["both", "hardened", "reference"])
    ap.add_argument("--ns", default="2,4,8,16,32")
    ap.add_argument("--sweep", action="store_true", help="also prove every n from 2 to 32 and print the totals")
    a = ap.parse_args(argv)
    variants = ["reference", "hardened"] if a.variant == "both" else [a.variant]
    ns = [int(x) for x in a.ns.split(",")]
    print(f"machine: {os.cpu_count()} CPUs")
    print("protocol proof time vs n (one slot, plain induction, worker-0 events by symmetry; "
          "reference under per-worker FIFO, hardened with no network assumption)")
    print(f"{'variant':<10} {'n':>3} {'result':<8} {'queries':>7} {'seconds':>8} {'load':>6}")
    for v in variants:
        for n in ns:
            ok, dt, q = prove_time(v, n)
            print(f"{v:<10} {n:>3} {'proved' if ok else 'FAILED':<8} {q:>7} {dt:8.2f} {_load():>6}", flush=True)
    if a.sweep:
        print()
        print("sweep n=2..32 (every n p4gen verify proves for max_workers=32)")
        print(f"{'variant':<10} {'result':<22} {'total s':>8} {'max s':>7} {'load':>6}")
        for v in variants:
            times, failed = [], []
            for n in range(2, 33):
                ok, dt, _ = prove_time(v, n)
                times.append(dt)
                if not ok:
                    failed.append(n)
            res = "proved n=2..32" if not failed else "FAILED n=" + ",".join(map(str, failed))
            print(f"{v:<10} {res:<22} {sum(times):8.1f} {max(times):7.2f} {_load():>6}", flush=True)
    print()
    print("protocol proof time vs slots (n=4): slots only label chunks (tsi = slot + k*slots); the model is one slot")
    print(f"{'variant':<10} {'slots':>6} {'seconds':>8} {'load':>6}")
    for v in variants:
        for slots in (1, 64, 512, 8192):
            ok, dt, _ = prove_time(v, 4, slots)
            print(f"{v:<10} {slots:>6} {dt:8.2f} {_load():>6}{'' if ok else '  FAILED'}", flush=True)
    print()
    t0 = time.perf_counter()
    fp = fixedpoint.prove_all(list(range(2, 33)), 32)
    ok = all(r.proved for rs in fp.values() for r in rs)
    print(f"fixed point (no_overflow, error_bound, max_exponent), w=32, n=2..32: {'proved' if ok else 'FAILED'} "
          f"in {time.perf_counter() - t0:.2f}s")
    print("exponent: the protocol proofs cover which contributions each result's exponent is the max of "
          "(the table's exponent rows); max_exponent covers the 8-bit max itself. Not covered: float64 rounding "
          "in x*scale and the float32 cast after dequantisation.")
    print("not covered: n > 32 (more than one bitmap word), liveness beyond retransmission_answered, "
          "that the emitted P4 implements the table.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
