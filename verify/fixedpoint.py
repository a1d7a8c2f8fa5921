"""Fixed-point (block floating point) proofs, over Z3 bit-vectors and reals.

The codec contract (``p4gen.host.codec``): ``L = floor((2**(w-1)-1)/n)``,
``scale(e_max, n) = (2**(w-1)-1)/(n*2**e_max)``, ``q = clip(rint(x*scale),
-L, L)``, the switch adds n w-bit values with wrap-around, and
``dequantize = q_sum/scale``.  For the plan's value width w and every n, the
proofs are:

``no_overflow``
    One step of the running sum, as w-bit two's complement: for all
    partial sums ``S`` with ``|S| <= (n-1)*L`` and addends ``|q| <= L``, the
    wrapped sum ``bvadd(S, q)`` equals the exact sum (no signed overflow)
    and ``|S+q| <= n*L``.  By induction over the n additions (the partial
    sum after j additions is bounded by j*L <= (n-1)*L before the last
    one), the switch's wrapped total equals the exact total for every
    input the codec can produce, in any arrival order.
``error_bound``
    Over the reals, with ``y_i = x_i*scale`` and ``|y_i| < B =
    (2**(w-1)-1)/n`` (which ``max_exponent`` establishes), ``r_i`` an
    integer with ``|r_i - y_i| <= 1/2`` (rint) and ``q_i = clip(r_i, -L, L)``:
    ``|sum q_i - sum y_i| < n``.  Dividing by ``scale > 0``:
    ``|sum(q)/scale - sum(x)| < n/scale = n**2 * 2**e_max / (2**(w-1)-1)``,
    the bound ``p4gen.host.codec.error_bound`` states.
``max_exponent``
    The switch keeps the biased exponent with ``p4gen.ops.exponent_op``
    ("max" on the unsigned 8-bit field) and that equals the biased maximum
    exponent for every pair in -127..128 (so, folded over the workers, the
    switch holds the max exponent whatever the arrival order); and with
    ``e_i <= e_max``, ``|x_i| < 2**e_i`` gives ``|x_i*scale| < B``: every
    worker's value is in range before clipping (clipping changes it by less
    than one unit).

Not modelled: float64 rounding inside ``x*scale`` and the final cast to
float32 (a relative error of 2**-53 per product, and half a float32 ulp).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import z3

from p4gen import ops

try:  # the codec lands separately; the contract above is what is proved
    from p4gen.host import codec as _codec
except ImportError:  # pragma: no cover - codec absent in a partial checkout
    _codec = None

EXPONENT_BIAS = getattr(_codec, "EXPONENT_BIAS", 127)
EXPONENT_MIN = getattr(_codec, "EXPONENT_MIN", -127)
EXPONENT_MAX = getattr(_codec, "EXPONENT_MAX", 128)

PROPERTIES = {
    "no_overflow": "the switch's w-bit wrap-around sum of n codec values equals the exact sum",
    "error_bound": "|sum(q)/scale - sum(x)| < n/scale per element of the sum",
    "max_exponent": "the switch's max over biased exponents is the max exponent, and scaling by it keeps "
                    "every worker's value within (2**(w-1)-1)/n before clipping",
}


def limit(n: int, w: int) -> int:
    """L from the contract; cross-checked against ``p4gen.host.codec.limit`` when present."""
    L = ((1 << (w - 1)) - 1) // n
    if _codec is not None:
        got = _codec.limit(n, w)
        if got != L:
            raise AssertionError(f"p4gen.host.codec.limit({n}, {w}) = {got}, contract says {L}")
    return L


@dataclass
class FPResult:
    prop: str
    n: int
    proved: bool
    seconds: float
    detail: str = ""


def _unsat(solver: z3.Solver) -> tuple[bool, str]:
    r = solver.check()
    if r == z3.unsat:
        return True, ""
    if r == z3.sat:
        return False, f"counterexample: {solver.model()}"
    return False, f"solver returned {r}"


def prove_no_overflow(n: int, w: int) -> FPResult:
    t0 = time.perf_counter()
    L = limit(n, w)
    S, q = z3.BitVec("S", w), z3.BitVec("q", w)
    wide = w + 8
    Sx, qx = z3.SignExt(8, S), z3.SignExt(8, q)
    exact = Sx + qx
    wrapped = z3.SignExt(8, S + q)

    def absle(x, bound, width):
        b = z3.BitVecVal(bound, width)
        return z3.And(x <= b, x >= -b)

    s = z3.Solver()
    s.add(absle(Sx, (n - 1) * L, wide), absle(qx, L, wide))
    s.add(z3.Not(z3.And(wrapped == exact, absle(exact, n * L, wide))))
    ok, detail = _unsat(s)
    # the bound itself: n*L fits the signed w-bit range
    ok = ok and n * L <= (1 << (w - 1)) - 1
    return FPResult("no_overflow", n, ok, time.perf_counter() - t0, detail)


def prove_error_bound(n: int, w: int) -> FPResult:
    t0 = time.perf_counter()
    L = limit(n, w)
    B = z3.RealVal((1 << (w - 1)) - 1) / n
    # 1. one element: |clip(rint(y)) - y| < 1 whenever |y| < B
    s = z3.Solver()
    y, r = z3.Real("y"), z3.Int("r")
    rr = z3.ToReal(r)
    s.add(y < B, y > -B, rr - y <= z3.RealVal("1/2"), y - rr <= z3.RealVal("1/2"))
    q = z3.ToReal(z3.If(r > L, z3.IntVal(L), z3.If(r < -L, z3.IntVal(-L), r)))
    s.add(z3.Not(z3.And(q - y < 1, y - q < 1)))
    ok1, d1 = _unsat(s)
    # 2. n elements: per-element errors in (-1, 1) sum to less than n in magnitude
    s2 = z3.Solver()
    ds = [z3.Real(f"d{i}") for i in range(n)]
    s2.add(*[z3.And(d > -1, d < 1) for d in ds])
    tot = z3.Sum(ds)
    s2.add(z3.Not(z3.And(tot < n, tot > -n)))
    ok2, d2 = _unsat(s2)
    return FPResult("error_bound", n, ok1 and ok2, time.perf_counter() - t0, d1 or d2)


@functools.lru_cache(maxsize=None)
def _max_op_is_max() -> tuple[bool, str]:
    """ops.exponent_op("max") on biased 8-bit fields is the biased max (independent of n and w)."""
    from .z3alg import Z3


    # 1. the switch's "max" op over biased 8-bit fields is the biased max
    e1, e2 = z3.Int("e1"), z3.Int("e2")
    f1, f2 = z3.BitVec("f1", 8), z3.BitVec("f2", 8)
    s = z3.Solver()
    rng = lambda e: z3.And(e >= EXPONENT_MIN, e <= EXPONENT_MAX)  # noqa: E731
    s.add(rng(e1), rng(e2))
    s.add(z3.BV2Int(f1) == e1 + EXPONENT_BIAS, z3.BV2Int(f2) == e2 + EXPONENT_BIAS)
    stored, ret = ops.exponent_op("max", f1, f2, Z3)
    emax = z3.If(e1 > e2, e1, e2)
    s.add(z3.Not(z3.And(z3.BV2Int(stored) == emax + EXPONENT_BIAS, z3.BV2Int(ret) == emax + EXPONENT_BIAS)))
    return _unsat(s)


def prove_max_exponent(n: int, w: int) -> FPResult:
    t0 = time.perf_counter()
    ok1, d1 = _max_op_is_max()
    # 2. scaling by the max exponent keeps |x*scale| < B: with u = x/2**e_max and
    #    t = 2**(e_i - e_max) in (0, 1] (because e_i <= e_max), |u| < t
    B = z3.RealVal((1 << (w - 1)) - 1) / n
    u, t = z3.Real("u"), z3.Real("t")
    s2 = z3.Solver()
    s2.add(t > 0, t <= 1, u < t, u > -t)
    y = u * B   # = x * scale
    s2.add(z3.Not(z3.And(y < B, y > -B)))
    ok2, d2 = _unsat(s2)
    # 3. the biased field of every exponent the codec produces fits 8 bits
    ok3 = 0 <= EXPONENT_MIN + EXPONENT_BIAS and EXPONENT_MAX + EXPONENT_BIAS <= 255
    return FPResult("max_exponent", n, ok1 and ok2 and ok3, time.perf_counter() - t0, d1 or d2)


def prove_all(ns: list[int], w: int) -> dict[str, list[FPResult]]:
    out: dict[str, list[FPResult]] = {p: [] for p in PROPERTIES}
    for n in ns:
        out["no_overflow"].append(prove_no_overflow(n, w))
        out["error_bound"].append(prove_error_bound(n, w))
        out["max_exponent"].append(prove_max_exponent(n, w))
    return out
