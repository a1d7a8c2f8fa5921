"""Proof time of the slot-reuse protocol vs workers n and vs slot count, from one run.

    python bench/verify.py [--variant hardened|reference|both] [--ns 2,4,8,16,32]

Slot count does not enter the model (one slot is modelled; slots are
independent registers), so the time vs slots only shows noise; it is
measured at n=4 to demonstrate that.
"""

from __future__ import annotations

import argparse
import time

from p4gen import decision
from p4gen.verify import fixedpoint, protocol


def prove_time(variant: str, n: int, slots: int = 512) -> tuple[bool, float, int]:
    cfg = protocol.ModelConfig(n=n, table=decision.decision_table(variant), fifo=(variant == "reference"), slots=slots)
    t0 = time.perf_counter()
    res = protocol.prove(cfg)
    return res.proved, time.perf_counter() - t0, res.queries


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="both", choices=["both", "hardened", "reference"])
    ap.add_argument("--ns", default="2,4,8,16,32")
    a = ap.parse_args(argv)
    variants = ["reference", "hardened"] if a.variant == "both" else [a.variant]
    ns = [int(x) for x in a.ns.split(",")]
    print("protocol proof time vs n (one slot, induction, worker-0 events by symmetry)")
    print(f"{'variant':<10} {'n':>3} {'result':<8} {'queries':>7} {'seconds':>8}")
    for v in variants:
        for n in ns:
            ok, dt, q = prove_time(v, n)
            print(f"{v:<10} {n:>3} {'proved' if ok else 'FAILED':<8} {q:>7} {dt:8.2f}", flush=True)
    print()
    print("protocol proof time vs slots (n=4): slots only label chunks (tsi = slot + k*slots); the model is one slot")
    print(f"{'variant':<10} {'slots':>6} {'seconds':>8}")
    for v in variants:
        for slots in (1, 64, 512, 8192):
            ok, dt, _ = prove_time(v, 4, slots)
            print(f"{v:<10} {slots:>6} {dt:8.2f}{'' if ok else '  FAILED'}", flush=True)
    print()
    t0 = time.perf_counter()
    fp = fixedpoint.prove_all(list(range(2, 33)), 32)
    ok = all(r.proved for rs in fp.values() for r in rs)
    print(f"fixed point, w=32, n=2..32: {'proved' if ok else 'FAILED'} in {time.perf_counter() - t0:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
