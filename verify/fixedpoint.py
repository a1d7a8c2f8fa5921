"""Fixed-point (block floating point) proofs, over Z3 integers, bit-vectors and reals, for every n at once.

The codec contract (``p4gen.host.codec``): ``L = floor((2**(w-1)-1)/n)``,
``scale(e_max, n) = (2**(w-1)-1)/(n*2**e_max)``, ``q = clip(rint(x*scale),
-L, L)``, the switch adds n w-bit values with wrap-around, and
``dequantize = q_sum/scale``.  Write ``B = (2**(w-1)-1)/n`` (so ``L =
floor(B)``) and ``P = n*L``.  Every query below quantifies over ``L``, ``P``
and ``B`` instead of n, so one query covers every worker count; what is
left of n is the integer fact ``n*L <= 2**(w-1)-1`` (floor division), which
is computed for every n of the range, and the codec's own ``limit`` is
checked against the contract for each of them.

``no_overflow``
    One step of the running sum, as w-bit two's complement: for all
    ``0 <= L <= P <= 2**(w-1)-1``, partial sums ``|S| <= P-L`` and addends
    ``|q| <= L``, the switch's register add (``p4gen.ops.values_op("add")``
    on the w-bit unsigned words that hold S and q, over Z3 integers: one
    wrap modulo ``2**w``), read back as a signed number, equals the exact
    sum, and ``|S+q| <= P``.  With ``P = n*L``, ``P - L = (n-1)*L`` bounds the partial
    sum before the n-th addition (after j additions it is at most j*L), so
    by induction over the n additions the switch's wrapped total equals the
    exact total for every input the codec can produce, in any arrival order.
``error_bound``
    Over the reals, for every ``B > 0`` and integer ``L`` with ``L <= B < L+1``,
    ``|y| < B`` (which ``max_exponent`` establishes), ``r`` an integer with
    ``|r - y| <= 1/2`` (rint) and ``q = clip(r, -L, L)``: ``|q - y| < 1``; and
    a sum of per-element errors in (-1, 1) stays in (-j, j) after j terms
    (one induction step, every j).  So ``|sum q_i - sum y_i| < n``; dividing
    by ``scale > 0``: ``|sum(q)/scale - sum(x)| < n/scale = n**2 *
    2**e_max / (2**(w-1)-1)``, the bound ``p4gen.host.codec.error_bound``
    states.
``max_exponent``
    The switch keeps the biased exponent with ``p4gen.ops.exponent_op``
    ("max" on the unsigned 8-bit field) and that equals the biased maximum
    exponent for every pair in -127..128 (so, folded over the workers, the
    switch holds the max exponent whatever the arrival order); and with
    ``e_i <= e_max``, ``|x_i| < 2**e_i`` gives ``|x_i*scale| < B`` for every
    ``B > 0``: every worker's value is in range before clipping (clipping
    changes it by less than one unit).

Not modelled: float64 rounding inside ``x*scale`` and the final cast to
float32 (a relative error of 2**-53 per product, and half a float32 ulp).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import z3

from p4gen import ops

from .budget import QUERY_RLIMIT

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
    ns: list[int]
    proved: bool
    seconds: float
    detail: str = ""

    @property
    def unknown(self) -> bool:
        """Not proved because a query ran out of its budget (not because of a counterexample)."""
        return not self.proved and self.detail.startswith("the solver's budget")


def _unsat(solver: z3.Solver, rlimit: int = QUERY_RLIMIT) -> tuple[bool, str]:
    solver.set("rlimit", rlimit)
    r = solver.check()
    if r == z3.unsat:
        return True, ""
    if r == z3.sat:
        return False, f"counterexample: {solver.model()}"
    return False, f"the solver's budget (rlimit {rlimit:,}) ran out: {solver.reason_unknown()}"


def _limits(ns: list[int], w: int) -> tuple[bool, str]:
    """n*L <= 2**(w-1)-1 and L <= B < L+1 for every n (exact integer arithmetic; L from :func:`limit`)."""
    top = (1 << (w - 1)) - 1
    for n in ns:
        L = limit(n, w)
        if not (0 <= n * L <= top < n * (L + 1)):
            return False, f"n={n}: L={L} is not floor((2**{w - 1}-1)/n)"
    return True, ""


def prove_no_overflow(ns: list[int], w: int, rlimit: int = QUERY_RLIMIT) -> FPResult:
    t0 = time.perf_counter()
    from .z3alg import Z3

    half, mod = 1 << (w - 1), 1 << w
    S, q, L, P = z3.Ints("S q L P")
    unsigned = lambda x: z3.If(x < 0, x + mod, x)  # noqa: E731  (a w-bit register holds x mod 2**w)
    signed = lambda u: z3.If(u >= half, u - mod, u)  # noqa: E731
    absle = lambda x, b: z3.And(x <= b, x >= -b)  # noqa: E731
    stored, _ = ops.values_op("add", unsigned(S), unsigned(q), w, Z3)   # the switch's register add
    s = z3.Solver()
    s.add(L >= 0, L <= P, P <= half - 1, absle(S, P - L), absle(q, L))
    s.add(z3.Not(z3.And(signed(stored) == S + q, absle(S + q, P))))
    ok, detail = _unsat(s, rlimit)
    ok2, d2 = _limits(ns, w)
    return FPResult("no_overflow", ns, ok and ok2, time.perf_counter() - t0, detail or d2)


def prove_error_bound(ns: list[int], w: int, rlimit: int = QUERY_RLIMIT) -> FPResult:
    t0 = time.perf_counter()
    # 1. one element: |clip(rint(y)) - y| < 1 whenever |y| < B, L <= B < L + 1
    s = z3.Solver()
    y, r, L, B = z3.Real("y"), z3.Int("r"), z3.Int("L"), z3.Real("B")
    rr, Lr = z3.ToReal(r), z3.ToReal(L)
    s.add(L >= 0, Lr <= B, B < Lr + 1, B > 0)
    s.add(y < B, y > -B, rr - y <= z3.RealVal("1/2"), y - rr <= z3.RealVal("1/2"))
    q = z3.ToReal(z3.If(r > L, L, z3.If(r < -L, -L, r)))
    s.add(z3.Not(z3.And(q - y < 1, y - q < 1)))
    ok1, d1 = _unsat(s, rlimit)
    # 2. errors in (-1, 1) summed: |D| < j and |d| < 1 give |D + d| < j + 1 (every j; induction from D = 0)
    s2 = z3.Solver()
    D, d, j = z3.Real("D"), z3.Real("d"), z3.Int("j")
    s2.add(j >= 0, D > -z3.ToReal(j), D < z3.ToReal(j), d > -1, d < 1)
    s2.add(z3.Not(z3.And(D + d < z3.ToReal(j) + 1, D + d > -z3.ToReal(j) - 1)))
    ok2, d2 = _unsat(s2, rlimit)
    ok3, d3 = _limits(ns, w)
    return FPResult("error_bound", ns, ok1 and ok2 and ok3, time.perf_counter() - t0, d1 or d2 or d3)


@functools.lru_cache(maxsize=None)
def _max_op_is_max(rlimit: int) -> tuple[bool, str]:
    """ops.exponent_op("max") on biased 8-bit fields is the biased max (independent of n and w)."""
    from .z3alg import Z3

    e1, e2 = z3.Int("e1"), z3.Int("e2")
    f1, f2 = z3.BitVec("f1", 8), z3.BitVec("f2", 8)
    s = z3.Solver()
    rng = lambda e: z3.And(e >= EXPONENT_MIN, e <= EXPONENT_MAX)  # noqa: E731
    s.add(rng(e1), rng(e2))
    s.add(z3.BV2Int(f1) == e1 + EXPONENT_BIAS, z3.BV2Int(f2) == e2 + EXPONENT_BIAS)
    stored, ret = ops.exponent_op("max", f1, f2, Z3)
    emax = z3.If(e1 > e2, e1, e2)
    s.add(z3.Not(z3.And(z3.BV2Int(stored) == emax + EXPONENT_BIAS, z3.BV2Int(ret) == emax + EXPONENT_BIAS)))
    return _unsat(s, rlimit)


def prove_max_exponent(ns: list[int], w: int, rlimit: int = QUERY_RLIMIT) -> FPResult:
    t0 = time.perf_counter()
    ok1, d1 = _max_op_is_max(rlimit)
    # 2. scaling by the max exponent keeps |x*scale| < B: with u = x/2**e_max and
    #    t = 2**(e_i - e_max) in (0, 1] (because e_i <= e_max), |u| < t; for every B > 0
    u, t, B = z3.Real("u"), z3.Real("t"), z3.Real("B")
    s2 = z3.Solver()
    s2.add(B > 0, t > 0, t <= 1, u < t, u > -t)
    y = u * B   # = x * scale
    s2.add(z3.Not(z3.And(y < B, y > -B)))
    ok2, d2 = _unsat(s2, rlimit)
    # 3. the biased field of every exponent the codec produces fits 8 bits
    ok3 = 0 <= EXPONENT_MIN + EXPONENT_BIAS and EXPONENT_MAX + EXPONENT_BIAS <= 255
    return FPResult("max_exponent", ns, ok1 and ok2 and ok3, time.perf_counter() - t0, d1 or d2)


def prove_all(ns: list[int], w: int, rlimit: int = QUERY_RLIMIT) -> dict[str, FPResult]:
    """Every fixed-point property for the worker counts ``ns`` (one query per property covers all of them);
    ``rlimit``: Z3 resource units per query."""
    return {"no_overflow": prove_no_overflow(ns, w, rlimit), "error_bound": prove_error_bound(ns, w, rlimit),
            "max_exponent": prove_max_exponent(ns, w, rlimit)}
