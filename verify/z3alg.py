"""The Z3 interpretation of ``p4gen.ops.Algebra``, and the abstract domains the proofs evaluate it on.

The register operations in ``p4gen.ops`` are written once over an abstract
algebra; :class:`Z3Algebra` interprets them over Z3 terms, so the proofs run
the very definitions the software data plane and the P4 templates use.

Domains:

* integers of a given width (counters, observation codes): ``add`` and
  ``sub`` wrap modulo ``2**bits`` (exact for operands kept in
  ``0..2**bits-1``, written as one comparison instead of ``mod``, which keeps
  the queries linear); unbounded integers (the chunk register and the
  packet's chunk index: the proofs assume the 32-bit ``tsi`` does not wrap
  within a job);
* :class:`Shares`, the abstract value of a value register: for every
  worker, which of its contributions the register holds.  ``add`` on this
  domain is the union of contributions, so ``values_op`` run over it tells
  exactly which contributions a sum contains.  The exponent and minnext
  registers use it too: ``max``/``min``, ``ite(ugt(a, b), ..)``, covers the
  contributions of both operands (:class:`Order`), and a contribution seen
  twice is still one, because max and min are idempotent;
* :class:`BitSet`, a bitmap as the set of worker ids whose bit is set, with
  :class:`Mask`, one worker's bit (:class:`BitsAlgebra`).  On single-bit
  masks ``band``/``bor``/``bnot``/``ne0`` mean exactly "test / set / clear
  this worker's bit", which is all ``ops.bitmap_op`` does; the plan's words
  (32 bits each) are the id ranges ``32*i .. 32*i+31`` of this set, and
  :func:`p4gen.verify.cardinality.prove_word_split` proves, op by op, that the
  switch's per-word application is the op on the whole bitmap.

Share of one worker: ``stt`` EMPTY = none, ONE = exactly one contribution
(of chunk ``rnd``), MANY = anything else (two contributions, or
contributions of different chunks), JUNK = what a value op reads from a
packet that carries no contribution.  Treating contributions as distinct symbols is
exact for "is this the sum of exactly one contribution per worker for chunk
c": the property must hold for every input, and for generic inputs two
different multisets of contributions give different sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from .workers import Vec, Workers

# a share's state is an enumeration, not an integer: the solver then never does arithmetic on it
STT, (EMPTY, ONE, MANY, JUNK) = z3.EnumSort("Stt", ["empty", "one", "many", "junk"])


@dataclass(frozen=True)
class Share:
    stt: Any   # an STT term: EMPTY / ONE / MANY / JUNK
    rnd: Any   # z3 Int: the chunk (round) when stt == ONE

    def is_empty(self):
        return self.stt == EMPTY

    def is_one(self, rnd):
        return z3.And(self.stt == ONE, self.rnd == rnd)

    def same(self, other: "Share"):
        """Semantic equality (rnd is irrelevant unless stt is ONE)."""
        return z3.And(self.stt == other.stt, z3.Or(self.stt != ONE, self.rnd == other.rnd))


def _share_add(a: Share, b: Share) -> Share:
    stt = z3.If(a.stt == EMPTY, b.stt, z3.If(b.stt == EMPTY, a.stt, MANY))
    return Share(stt, z3.If(a.stt == EMPTY, b.rnd, a.rnd))


def _share_join(a: Share, b: Share) -> Share:
    """Contributions covered by the max (or min) of two values: the union; one chunk's contribution twice is
    still one (max is idempotent), contributions of two chunks are MANY."""
    same = z3.And(a.stt == ONE, b.stt == ONE, a.rnd == b.rnd)
    stt = z3.If(a.stt == EMPTY, b.stt, z3.If(b.stt == EMPTY, a.stt, z3.If(same, ONE, MANY)))
    return Share(stt, z3.If(a.stt == EMPTY, b.rnd, a.rnd))


@dataclass(frozen=True)
class Shares:
    """A value (or exponent, or minnext) register's contributions, one :class:`Share` per worker.

    ``only``: when set, the one worker whose share may be non-empty (a
    packet's values), so combining with it touches that worker's entry alone.
    """
    stt: Vec
    rnd: Vec
    only: Any = None

    @classmethod
    def fresh(cls, ws: Workers, prefix: str) -> "Shares":
        return cls(ws.vec(f"{prefix}_s", STT), ws.vec(f"{prefix}_r", z3.IntSort()))

    @classmethod
    def empty(cls, ws: Workers) -> "Shares":
        return cls(ws.const_vec(EMPTY), ws.const_vec(z3.IntVal(0)))

    @classmethod
    def packet(cls, ws: Workers, worker, rnd, stt=None) -> "Shares":
        """Worker ``worker``'s contribution for chunk ``rnd`` (``stt``: ONE by default)."""
        e = cls.empty(ws)
        return cls(e.stt.set(worker, ONE if stt is None else stt), e.rnd.set(worker, rnd), worker)

    def at(self, u) -> Share:
        return Share(self.stt.get(u), self.rnd.get(u))

    def set(self, u, sh: Share) -> "Shares":
        return Shares(self.stt.set(u, sh.stt), self.rnd.set(u, sh.rnd))

    def exact(self, ws: Workers, rnd):
        """Exactly one contribution of every worker, all for chunk ``rnd``."""
        return ws.all(lambda u: self.at(u).is_one(rnd))

    def same(self, ws: Workers, other: "Shares"):
        return ws.all(lambda u: self.at(u).same(other.at(u)))

    def eq_terms(self, other: "Shares"):
        """Syntactic equality (for binding fresh next-state variables)."""
        return z3.And(self.stt.eq_terms(other.stt), self.rnd.eq_terms(other.rnd))

    def terms(self) -> list:
        return self.stt.terms() + self.rnd.terms()

    def combine(self, other: "Shares", f) -> "Shares":
        """Entry-wise ``f`` (which must map (x, empty) and (empty, x) to x)."""
        for a, b in ((self, other), (other, self)):
            if b.only is not None:
                w = b.only
                return a.set(w, f(a.at(w), b.at(w)))
        if self.stt.items is not None:
            out = [f(self.at(u), other.at(u)) for u in range(len(self.stt.items))]
            return Shares(Vec(tuple(x.stt for x in out), None), Vec(tuple(x.rnd for x in out), None))
        u = z3.Int("_cu")
        out = f(self.at(u), other.at(u))
        return Shares(Vec(None, z3.Lambda([u], out.stt)), Vec(None, z3.Lambda([u], out.rnd)))


@dataclass(frozen=True)
class Order:
    """``ugt(a, b)`` on :class:`Shares` values: kept symbolic until ``ite`` picks one of a, b.

    Whichever of the two the comparison picks, the result is the max (or the
    min) of the two values, and the contributions it covers are those of a
    and of b: ``ite(Order(a, b), x, y)`` with {x, y} = {a, b} is their
    :func:`_share_join`.  Any other use has no meaning on this domain and raises.
    """
    a: Shares
    b: Shares


class BitVecAlgebra:
    """``p4gen.ops.Algebra`` over Z3 bit-vectors of the registers' and fields' own widths: the ops as a
    switch computes them (the program check, and the stateful-ALU lowering proofs)."""

    def ite(self, cond, a, b):
        if isinstance(cond, bool):
            return a if cond else b
        if z3.is_bv(a) and z3.is_bv(b) and a.size() != b.size():
            w = max(a.size(), b.size())
            a, b = z3.ZeroExt(w - a.size(), a), z3.ZeroExt(w - b.size(), b)
        return z3.If(cond, a, b)

    def eq(self, a, b):
        return a == b

    def ugt(self, a, b):
        return z3.UGT(a, b)

    def add(self, a, b, bits):
        return a + b

    def sub(self, a, b, bits):
        return a - b

    def ssub(self, a, b, bits):
        return z3.If(z3.UGT(a, b), a - b, z3.BitVecVal(0, a.size()))

    def band(self, a, b):
        return a & b

    def bor(self, a, b):
        return a | b

    def bxor(self, a, b):
        return a ^ b

    def bnot(self, a, bits):
        return ~a

    def const(self, value, bits):
        return z3.BitVecVal(value, bits)

    def ne0(self, a):
        return a != 0

    def false(self):
        return z3.BoolVal(False)


BV = BitVecAlgebra()


class Z3Algebra:
    """``p4gen.ops.Algebra`` over Z3 terms (and :class:`Shares` values)."""

    def ite(self, cond, a, b):
        if isinstance(cond, bool):
            return a if cond else b
        if isinstance(cond, Order):
            if {id(a), id(b)} != {id(cond.a), id(cond.b)}:
                raise TypeError("a comparison of contribution sets only selects between its operands")
            return a.combine(b, _share_join)
        if isinstance(a, Shares):
            return Shares(Vec.ite(cond, a.stt, b.stt), Vec.ite(cond, a.rnd, b.rnd))
        return z3.If(cond, a, b)

    def eq(self, a, b):
        return a == b

    def ugt(self, a, b):
        if isinstance(a, Shares):
            return Order(a, b)
        if z3.is_bv(a):
            return z3.UGT(a, b)
        return a > b

    def add(self, a, b, bits):
        if isinstance(a, Shares):
            return a.combine(b, _share_add)
        if z3.is_bv(a):
            return a + b   # bit-vectors of width ``bits``: wrap-around
        s, m = a + b, 1 << bits
        return z3.If(s >= m, s - m, s)   # operands in 0..2**bits-1: one wrap at most

    def sub(self, a, b, bits):
        if z3.is_bv(a):
            return a - b
        d = a - b
        return z3.If(d < 0, d + (1 << bits), d)

    def ssub(self, a, b, bits):
        if z3.is_bv(a):
            return z3.If(z3.UGT(a, b), a - b, 0)
        return z3.If(a > b, a - b, 0)

    def band(self, a, b):
        return a & b

    def bor(self, a, b):
        return a | b

    def bnot(self, a, bits):
        return ~a

    def const(self, value, bits):
        # constants (observation codes, counter increments) are unsigned
        # integers below 2**bits, as Z3 integers; registers they meet (the
        # counter) are integers kept in 0..2**bits-1, so add/eq/ugt are exact
        return z3.IntVal(value)

    def ne0(self, a):
        return a != 0

    def false(self):
        return z3.BoolVal(False)


Z3 = Z3Algebra()


class ValuesAlgebra(Z3Algebra):
    """The Z3 algebra on a value lane: the one constant a value op stores (``clear``: zeros) holds no
    contribution."""

    def __init__(self, ws: Workers):
        self.ws = ws

    def const(self, value, bits):
        if value != 0:
            raise ValueError("a value register only ever takes the constant 0")
        return Shares.empty(self.ws)


# ---------------------------------------------------------------------------
# bitmaps as sets of worker ids

@dataclass(frozen=True)
class BitSet:
    """A bitmap: worker u's bit is ``bits.get(u)``."""
    bits: Vec

    @classmethod
    def fresh(cls, ws: Workers, name: str) -> "BitSet":
        return cls(ws.vec(name, z3.BoolSort()))

    @classmethod
    def empty(cls, ws: Workers) -> "BitSet":
        return cls(ws.const_vec(z3.BoolVal(False)))

    def has(self, u):
        return self.bits.get(u)

    def eq_terms(self, other: "BitSet"):
        return self.bits.eq_terms(other.bits)

    def terms(self) -> list:
        return self.bits.terms()


@dataclass(frozen=True)
class Mask:
    """Worker ``w``'s bit (as ``1 << w`` over the whole bitmap)."""
    w: Any


@dataclass(frozen=True)
class _CoMask:
    w: Any


@dataclass(frozen=True)
class _Probe:
    """``word & mask``: only whether it is zero is ever asked."""
    word: BitSet
    w: Any


class BitsAlgebra:
    """``p4gen.ops.Algebra`` on :class:`BitSet` words and single-bit :class:`Mask` values."""

    def __init__(self, ws: Workers):
        self.ws = ws

    def band(self, a, b):
        if isinstance(a, Mask):
            a, b = b, a
        if isinstance(a, BitSet) and isinstance(b, Mask):
            return _Probe(a, b.w)
        if isinstance(a, BitSet) and isinstance(b, _CoMask):
            return BitSet(a.bits.set(b.w, z3.BoolVal(False)))
        raise TypeError(f"bitmap and of {type(a).__name__} and {type(b).__name__}")

    def bor(self, a, b):
        if isinstance(a, Mask):
            a, b = b, a
        if isinstance(a, BitSet) and isinstance(b, Mask):
            return BitSet(a.bits.set(b.w, z3.BoolVal(True)))
        raise TypeError(f"bitmap or of {type(a).__name__} and {type(b).__name__}")

    def bnot(self, a, bits):
        if isinstance(a, Mask):
            return _CoMask(a.w)
        raise TypeError(f"bitmap not of {type(a).__name__}")

    def ne0(self, a):
        if isinstance(a, _Probe):
            return a.word.has(a.w)
        raise TypeError(f"bitmap test of {type(a).__name__}")

    def false(self):
        return z3.BoolVal(False)

    def word(self, x) -> BitSet:
        """A register value: a mask stored as the word (``reset_set``) is the set of that worker alone."""
        if isinstance(x, Mask):
            return BitSet(BitSet.empty(self.ws).bits.set(x.w, z3.BoolVal(True)))
        if isinstance(x, BitSet):
            return x
        raise TypeError(f"bitmap register value {type(x).__name__}")
