"""The Z3 interpretation of ``p4gen.ops.Algebra``.

The register operations in ``p4gen.ops`` are written once over an abstract
algebra; :class:`Z3Algebra` interprets them over Z3 terms so the proofs run
the very definitions the software data plane and the P4 templates use.

Two domains appear:

* bit-vectors (bitmap words), integers of a given width (counters and
  observation codes: ``add`` wraps modulo ``2**bits``, ``ugt`` is unsigned
  comparison; integer arithmetic keeps the counting argument in linear
  arithmetic, where Z3 is fast) and unbounded integers (the chunk register
  and the packet's chunk index; the proofs assume the 32-bit ``tsi`` does
  not wrap within a job);
* :class:`ShareVec`, the abstract value of a value register: for every
  worker, which of its contributions the register holds.  ``add`` on this
  domain is the union of contributions, so ``values_op`` run over it tells
  exactly which contributions a sum contains.  The exponent register uses
  the same domain: ``exponent_op``'s max, ``ite(ugt(e, s), e, s)``, covers
  the contributions of both operands (:class:`Order`), and a contribution
  seen twice is still one, because max is idempotent.

Share of one worker: ``stt`` 0 = none, 1 = exactly one contribution (of
chunk ``rnd``), 2 = anything else (two contributions, or contributions of
different chunks).  Treating contributions as distinct symbols is exact for
"is this the sum of exactly one contribution per worker for chunk c": the
property must hold for every input, and for generic inputs two different
multisets of contributions give different sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

EMPTY, ONE, MANY = 0, 1, 2


@dataclass(frozen=True)
class Share:
    stt: Any   # z3 Int: EMPTY / ONE / MANY
    rnd: Any   # z3 Int: the chunk (round) when stt == ONE

    def is_empty(self):
        return self.stt == EMPTY

    def is_one(self, rnd):
        return z3.And(self.stt == ONE, self.rnd == rnd)

    def same(self, other: "Share"):
        """Semantic equality (rnd is irrelevant for an empty share)."""
        return z3.And(self.stt == other.stt, z3.Or(self.stt == EMPTY, self.rnd == other.rnd))


@dataclass(frozen=True)
class ShareVec:
    items: tuple[Share, ...]

    @classmethod
    def fresh(cls, prefix: str, n: int) -> "ShareVec":
        return cls(tuple(Share(z3.Int(f"{prefix}_s{w}"), z3.Int(f"{prefix}_r{w}")) for w in range(n)))

    @classmethod
    def empty(cls, n: int) -> "ShareVec":
        return cls(tuple(Share(z3.IntVal(EMPTY), z3.IntVal(0)) for _ in range(n)))

    @classmethod
    def packet(cls, n: int, worker: int, rnd) -> "ShareVec":
        """The values of worker ``worker``'s packet for chunk ``rnd``."""
        return cls(tuple(Share(z3.IntVal(ONE), rnd) if u == worker else Share(z3.IntVal(EMPTY), z3.IntVal(0))
                         for u in range(n)))

    def __len__(self) -> int:
        return len(self.items)

    def exact(self, rnd):
        """Exactly one contribution of every worker, all for chunk ``rnd``."""
        return z3.And([s.is_one(rnd) for s in self.items])

    def same(self, other: "ShareVec"):
        return z3.And([a.same(b) for a, b in zip(self.items, other.items)])

    def eq_terms(self, other: "ShareVec"):
        """Syntactic equality (for binding fresh next-state variables)."""
        return z3.And([z3.And(a.stt == b.stt, a.rnd == b.rnd) for a, b in zip(self.items, other.items)])


def _share_join(a: Share, b: Share) -> Share:
    """Contributions covered by the max (or min) of two values: the union; one chunk's contribution twice is
    still one (max is idempotent), contributions of two chunks are MANY."""
    same = z3.And(a.stt == ONE, b.stt == ONE, a.rnd == b.rnd)
    stt = z3.If(a.stt == EMPTY, b.stt, z3.If(b.stt == EMPTY, a.stt, z3.If(same, z3.IntVal(ONE), z3.IntVal(MANY))))
    rnd = z3.If(a.stt == EMPTY, b.rnd, a.rnd)
    return Share(stt, rnd)


@dataclass(frozen=True)
class Order:
    """``ugt(a, b)`` on :class:`ShareVec` values: kept symbolic until ``ite`` picks one of a, b.

    Whichever of the two the comparison picks, the result is the max (or the
    min) of the two values, and the contributions it covers are those of a
    and of b: ``ite(Order(a, b), x, y)`` with {x, y} = {a, b} is their
    :func:`_share_join`.  Any other use has no meaning on this domain and raises.
    """
    a: "ShareVec"
    b: "ShareVec"


def _share_add(a: Share, b: Share) -> Share:
    stt = z3.If(a.stt == EMPTY, b.stt, z3.If(b.stt == EMPTY, a.stt, z3.IntVal(MANY)))
    rnd = z3.If(a.stt == EMPTY, b.rnd, a.rnd)
    return Share(stt, rnd)


class Z3Algebra:
    """``p4gen.ops.Algebra`` over Z3 terms (and :class:`ShareVec` values)."""

    def ite(self, cond, a, b):
        if isinstance(cond, bool):
            return a if cond else b
        if isinstance(cond, Order):
            if {id(a), id(b)} != {id(cond.a), id(cond.b)}:
                raise TypeError("a comparison of contribution sets only selects between its operands")
            return ShareVec(tuple(_share_join(x, y) for x, y in zip(a.items, b.items)))
        if isinstance(a, ShareVec):
            return ShareVec(tuple(Share(z3.If(cond, x.stt, y.stt), z3.If(cond, x.rnd, y.rnd))
                                  for x, y in zip(a.items, b.items)))
        return z3.If(cond, a, b)

    def eq(self, a, b):
        return a == b

    def ugt(self, a, b):
        if isinstance(a, ShareVec):
            return Order(a, b)
        if z3.is_bv(a):
            return z3.UGT(a, b)
        return a > b

    def add(self, a, b, bits):
        if isinstance(a, ShareVec):
            return ShareVec(tuple(_share_add(x, y) for x, y in zip(a.items, b.items)))
        if z3.is_bv(a):
            return a + b   # bit-vectors of width ``bits``: wrap-around
        return (a + b) % (1 << bits)   # unsigned integers of ``bits`` bits: the same wrap-around

    def band(self, a, b):
        return a & b

    def bor(self, a, b):
        return a | b

    def bnot(self, a, bits):
        return ~a

    def const(self, value, bits):
        # constants (observation codes, counter increments) are unsigned
        # integers below 2**bits, as Z3 integers; arithmetic on them wraps
        # in ``add``.  Registers they meet (the counter) are integers kept in
        # 0..2**bits-1, so ``add``/``eq``/``ugt`` are exact.
        return z3.IntVal(value)

    def ne0(self, a):
        return a != 0

    def false(self):
        return z3.BoolVal(False)


Z3 = Z3Algebra()
