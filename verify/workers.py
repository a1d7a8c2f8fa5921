"""The workers of a model: a concrete count, or every count in a range at once.

A protocol model has one slot and n workers.  :class:`Workers` is that
worker set, in one of two forms:

* **concrete** (``Workers.exactly(n)``): worker ids are the Python ints
  ``0..n-1``; a per-worker vector (:class:`Vec`) is a tuple of n terms;
  ``all`` / ``some`` are finite conjunctions / disjunctions.  The bounded
  model checker runs on this form, so a trace names real workers;
* **symbolic** (``Workers.between(lo, hi)``): n is the Z3 integer ``N`` with
  ``lo <= N <= hi``; worker ids are integer terms in ``0..N-1``; a vector is
  a Z3 array from worker id to value; ``all`` / ``some`` are quantifiers over
  the ids.  An induction query on this form holds for every n in the range
  at once, which is how one proof covers every worker count a plan admits.

Quantifiers never reach the solver.  :func:`ground` turns a query
(hypothesis and negated goal, one formula) into a quantifier-free one that
is satisfiable whenever the original is.  What it does with a quantifier
follows the quantifier's *polarity*: whether the query asserts it (an even
number of negations above it, counting the left of an implication as one)
or denies it.  ``forall`` asserted and ``exists`` denied are *universal*;
``exists`` asserted and ``forall`` denied are *existential*.

* an existential quantifier becomes its body at a fresh worker id, a Skolem
  constant (sound: the same formula up to satisfiability).  Outside every
  universal quantifier, the Skolem constants of alternatives of one
  disjunction share a name, which is also sound (``exists u. A(u) or exists
  u. B(u)`` is ``exists u. A(u) or B(u)``); those are the query's *Skolem
  terms*.  Inside a universal quantifier each instance gets its own constant
  (``forall u. exists v. P(u, v)`` at ids t1, t2 is ``P(t1, c1) and
  P(t2, c2)``), and those constants are not Skolem terms;
* a universal quantifier becomes its body at every worker id the query names:
  the acting worker, one other worker and the Skolem terms (a conjunction
  for ``forall`` asserted, a disjunction for ``exists`` denied).  That is
  weaker than the quantifier, so an unsat answer stays an unsat answer of
  the original query (the converse may fail: a query can be unknown by
  instantiation, which reports a failed clause, never a wrong proof);
* a quantifier whose polarity is not one or the other (under an
  if-then-else's condition, either side of a Boolean ``==``, ``xor`` or
  ``distinct``, inside a term) cannot be placed: :func:`ground` raises
  :class:`UnplacedQuantifier` rather than guess.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import z3

_fresh = itertools.count()


def _bound_var() -> z3.ArithRef:
    return z3.Int(f"_u{next(_fresh)}")


@dataclass(frozen=True)
class Workers:
    concrete: bool
    n: Any            # int (concrete) or the Z3 Int N (symbolic)
    lo: int
    hi: int

    @classmethod
    def exactly(cls, n: int) -> "Workers":
        return cls(True, n, n, n)

    @classmethod
    def between(cls, lo: int, hi: int) -> "Workers":
        return cls(False, z3.Int("N"), lo, hi)

    @property
    def N(self):
        """n as a Z3 term."""
        return z3.IntVal(self.n) if self.concrete else self.n

    def axioms(self) -> list:
        return [] if self.concrete else [self.n >= self.lo, self.n <= self.hi]

    def ids(self) -> range:
        if not self.concrete:
            raise TypeError("a symbolic worker set has no list of ids")
        return range(self.n)

    def in_range(self, u):
        return z3.BoolVal(True) if self.concrete else z3.And(u >= 0, u < self.n)

    def same(self, u, w):
        """u == w: a Python bool for concrete ids, a Z3 term otherwise."""
        if isinstance(u, int) and isinstance(w, int):
            return u == w
        return z3.IntVal(u) == w if isinstance(u, int) else u == w

    def all(self, f: Callable[[Any], Any]):
        if self.concrete:
            return z3.And([f(u) for u in range(self.n)])
        u = _bound_var()
        return z3.ForAll([u], z3.Implies(self.in_range(u), f(u)))

    def some(self, f: Callable[[Any], Any]):
        if self.concrete:
            return z3.Or([f(u) for u in range(self.n)])
        u = _bound_var()
        return z3.Exists([u], z3.And(self.in_range(u), f(u)))

    # -- vectors ------------------------------------------------------------
    def vec(self, name: str, sort) -> "Vec":
        if self.concrete:
            return Vec(tuple(z3.Const(f"{name}_{u}", sort) for u in range(self.n)), None)
        return Vec(None, z3.Array(name, z3.IntSort(), sort))

    def const_vec(self, value) -> "Vec":
        if self.concrete:
            return Vec(tuple(value for _ in range(self.n)), None)
        return Vec(None, z3.K(z3.IntSort(), value))

    def tabulate(self, f: Callable[[Any], Any]) -> "Vec":
        """The vector whose entry for worker u is ``f(u)``."""
        if self.concrete:
            return Vec(tuple(f(u) for u in range(self.n)), None)
        u = _bound_var()
        return Vec(None, z3.Lambda([u], f(u)))


def define(ws: "Workers", guard: list, name: str, formula):
    """A Boolean constant equal to ``formula``, its definition appended to ``guard``.

    A per-worker vector built with :meth:`Workers.tabulate` may then use the
    constant: its body stays free of quantifiers (which :func:`ground` only
    removes from the Boolean structure of a query, not from inside terms).
    """
    if ws.concrete:
        return formula
    b = z3.Bool(name)
    guard += [z3.Implies(b, formula), z3.Implies(formula, b)]
    return b


def sel(c, a, b):
    """ite that folds a Python bool."""
    if isinstance(c, bool):
        return a if c else b
    return z3.If(c, a, b)


@dataclass(frozen=True)
class Vec:
    """One value per worker: a tuple (concrete workers) or an array (symbolic workers)."""
    items: tuple | None
    arr: Any

    def get(self, u):
        if self.items is not None:
            return self.items[u]
        return z3.Select(self.arr, u)

    def set(self, u, value) -> "Vec":
        if self.items is not None:
            t = list(self.items)
            t[u] = value
            return Vec(tuple(t), None)
        return Vec(None, z3.Store(self.arr, u, value))

    def map2(self, other: "Vec", f: Callable[[Any, Any], Any]) -> "Vec":
        if self.items is not None:
            return Vec(tuple(f(a, b) for a, b in zip(self.items, other.items)), None)
        u = _bound_var()
        return Vec(None, z3.Lambda([u], f(z3.Select(self.arr, u), z3.Select(other.arr, u))))

    @staticmethod
    def ite(c, a: "Vec", b: "Vec") -> "Vec":
        if isinstance(c, bool):
            return a if c else b
        if a.items is not None:
            return Vec(tuple(z3.If(c, x, y) for x, y in zip(a.items, b.items)), None)
        return Vec(None, z3.If(c, a.arr, b.arr))

    def eq_terms(self, other: "Vec"):
        if self.items is not None:
            return z3.And([x == y for x, y in zip(self.items, other.items)])
        return self.arr == other.arr

    def terms(self) -> list:
        return list(self.items) if self.items is not None else [self.arr]


# ---------------------------------------------------------------------------
# quantifier grounding

class UnplacedQuantifier(ValueError):
    """A quantifier in a position with no single polarity (see the module docstring)."""


def _quantifier(e) -> bool:
    """A quantifier over a Boolean body (not a lambda, which is a term)."""
    return z3.is_quantifier(e) and not e.is_lambda()


def _connective(e) -> bool:
    return z3.is_and(e) or z3.is_or(e) or z3.is_not(e) or z3.is_implies(e) or (
        z3.is_app_of(e, z3.Z3_OP_ITE) and z3.is_bool(e))


class _Grounder:
    def __init__(self):
        self.pool: list = []
        self.memo: dict = {}
        self.quantified: dict[int, bool] = {}

    def has_quantifier(self, e) -> bool:
        """Does ``e`` hold a quantifier over a Boolean body (a lambda only if its body holds one)?"""
        i = e.get_id()
        if i not in self.quantified:
            self.memo["q", i] = e            # keeps e alive, so its id is not reused within this query
            kids = [e.body()] if z3.is_quantifier(e) else e.children()
            self.quantified[i] = _quantifier(e) or any(self.has_quantifier(c) for c in kids)
        return self.quantified[i]

    def placeable(self, e) -> None:
        """Raise unless every quantifier in ``e`` sits under connectives that give it one polarity."""
        if not self.has_quantifier(e) or _quantifier(e):
            return
        if _connective(e):
            if z3.is_app_of(e, z3.Z3_OP_ITE) and self.has_quantifier(e.arg(0)):
                raise UnplacedQuantifier(f"a quantifier in an if-then-else's condition has both polarities: "
                                         f"{str(e.arg(0))[:120]}")
            return
        what = "a lambda's body" if z3.is_quantifier(e) else f"{e.decl().name()}"
        raise UnplacedQuantifier(f"a quantifier under {what} has no single polarity: {str(e)[:120]}")

    def skolem(self, i: int):
        while len(self.pool) <= i:
            self.pool.append(z3.Int(f"_sk{next(_fresh)}"))
        return self.pool[i]

    def walk(self, e, pos: bool, i: int):
        """(e with the existential quantifiers outside every universal one skolemised, next free Skolem index)."""
        key = (e.get_id(), pos, i)
        if key in self.memo:
            return self.memo[key][1]
        out = self._walk(e, pos, i)
        self.memo[key] = (e, out)       # keeps e alive, so its id is not reused within this query
        return out

    def _walk(self, e, pos: bool, i: int):
        if not self.has_quantifier(e):
            return e, i
        self.placeable(e)
        if _quantifier(e):
            if e.num_vars() != 1:
                raise TypeError("one bound worker per quantifier")
            if e.is_forall() != pos:      # existential: a Skolem constant
                return self.walk(z3.substitute_vars(e.body(), self.skolem(i)), pos, i + 1)
            return e, i                   # universal: instantiated by ``expand``
        kids = e.children()
        if z3.is_not(e):
            c, i = self.walk(kids[0], not pos, i)
            return z3.Not(c), i
        if z3.is_app_of(e, z3.Z3_OP_ITE):  # the condition is quantifier-free (placeable): alternatives
            a, j = self.walk(kids[1], pos, i)
            b, k = self.walk(kids[2], pos, i)
            return z3.If(kids[0], a, b), max(j, k)
        if z3.is_implies(e):
            a, j = self.walk(kids[0], not pos, i)
            if pos:                       # not a or b: alternatives
                b, k = self.walk(kids[1], pos, i)
                return z3.Implies(a, b), max(j, k)
            b, k = self.walk(kids[1], pos, j)
            return z3.Implies(a, b), k
        if z3.is_and(e) == pos:           # a conjunction as asserted: Skolem constants one after another
            out = []
            for c in kids:
                c2, i = self.walk(c, pos, i)
                out.append(c2)
            return (z3.And(out) if z3.is_and(e) else z3.Or(out)), i
        out, top = [], i                  # alternatives: they may share Skolem constants
        for c in kids:
            c2, j = self.walk(c, pos, i)
            out.append(c2)
            top = max(top, j)
        return (z3.And(out) if z3.is_and(e) else z3.Or(out)), top

    def expand(self, e, pos: bool, terms: list):
        """``e`` without quantifiers: universal ones instantiated at ``terms``, existential ones (all inside a
        universal one by now) at a fresh constant per instance."""
        key = ("x", e.get_id(), pos)
        if key in self.memo:
            return self.memo[key][1]
        out = self._expand(e, pos, terms)
        self.memo[key] = (e, out)
        return out

    def _expand(self, e, pos: bool, terms: list):
        if not self.has_quantifier(e):
            return e
        self.placeable(e)
        if _quantifier(e):
            if e.num_vars() != 1:
                raise TypeError("one bound worker per quantifier")
            if e.is_forall() == pos:      # universal: every named id
                body = [self.expand(z3.substitute_vars(e.body(), t), pos, terms) for t in terms]
                return z3.And(body) if e.is_forall() else z3.Or(body)
            c = z3.Int(f"_sk{next(_fresh)}")   # existential inside a universal instance: its own witness
            return self.expand(z3.substitute_vars(e.body(), c), pos, terms)
        kids = e.children()
        if z3.is_not(e):
            return z3.Not(self.expand(kids[0], not pos, terms))
        if z3.is_implies(e):
            return z3.Implies(self.expand(kids[0], not pos, terms), self.expand(kids[1], pos, terms))
        if z3.is_app_of(e, z3.Z3_OP_ITE):
            return z3.If(kids[0], self.expand(kids[1], pos, terms), self.expand(kids[2], pos, terms))
        out = [self.expand(c, pos, terms) for c in kids]
        return z3.And(out) if z3.is_and(e) else z3.Or(out)


def ground(formula, ws: Workers, named: list) -> tuple[Any, list]:
    """A quantifier-free formula satisfiable whenever ``formula`` is (see the module docstring).

    ``named``: the worker ids the query is about (the acting worker).
    Returns (formula, Skolem terms) -- every id the universal quantifiers
    were instantiated at is ``named`` plus those terms.  Raises
    :class:`UnplacedQuantifier` for a quantifier with no single polarity.
    """
    if ws.concrete:
        return formula, []
    g = _Grounder()
    f, used = g.walk(formula, True, 0)
    sks = g.pool[:used]
    return g.expand(f, True, list(named) + sks), sks
