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
is satisfiable whenever the original is:

* a quantifier the query asserts existentially (``some`` where the formula
  holds, ``all`` where it is negated) becomes its body at a fresh worker id,
  a Skolem constant (sound: it is the same formula up to satisfiability);
  Skolem constants of alternatives of one disjunction share a name, which is
  also sound (``exists u. A(u) or exists u. B(u)`` is ``exists u. A(u) or
  B(u)``);
* a quantifier the query asserts universally becomes the conjunction of its
  body at every worker id the query names: the acting worker and every
  Skolem constant.  That is weaker than the quantifier, so an unsat answer
  stays an unsat answer of the original query (the converse may fail: a
  query can be unknown-by-instantiation, which reports a failed clause, never
  a wrong proof).
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

class _Grounder:
    def __init__(self, in_range: Callable[[Any], Any]):
        self.in_range = in_range
        self.pool: list = []
        self.memo: dict = {}

    def skolem(self, i: int):
        while len(self.pool) <= i:
            self.pool.append(z3.Int(f"_sk{next(_fresh)}"))
        return self.pool[i]

    def walk(self, e, pos: bool, i: int):
        """(e with existentially asserted quantifiers skolemised, next free Skolem index)."""
        key = (e.get_id(), pos, i)
        if key in self.memo:
            return self.memo[key][1]
        out = self._walk(e, pos, i)
        self.memo[key] = (e, out)       # keeps e alive, so its id is not reused within this query
        return out

    def _walk(self, e, pos: bool, i: int):
        if z3.is_quantifier(e):
            if e.num_vars() != 1:
                raise TypeError("one bound worker per quantifier")
            if e.is_forall() != pos:      # asserted existentially: a Skolem constant
                return self.walk(z3.substitute_vars(e.body(), self.skolem(i)), pos, i + 1)
            return e, i                   # asserted universally: instantiated by ``expand``
        if z3.is_and(e) or z3.is_or(e):
            kids = e.children()
            if z3.is_and(e) == pos:       # a conjunction as asserted: Skolem constants one after another
                out = []
                for c in kids:
                    c2, i = self.walk(c, pos, i)
                    out.append(c2)
                return (z3.And(out) if z3.is_and(e) else z3.Or(out)), i
            out, top = [], i              # alternatives: they may share Skolem constants
            for c in kids:
                c2, j = self.walk(c, pos, i)
                out.append(c2)
                top = max(top, j)
            return (z3.And(out) if z3.is_and(e) else z3.Or(out)), top
        if z3.is_not(e):
            c, i = self.walk(e.arg(0), not pos, i)
            return z3.Not(c), i
        if z3.is_implies(e):
            a, j = self.walk(e.arg(0), not pos, i)
            if pos:                       # not a or b: alternatives
                b, k = self.walk(e.arg(1), pos, i)
                return z3.Implies(a, b), max(j, k)
            b, k = self.walk(e.arg(1), pos, j)
            return z3.Implies(a, b), k
        return e, i

    def expand(self, e, terms: list):
        key = ("x", e.get_id())
        if key in self.memo:
            return self.memo[key][1]
        if z3.is_quantifier(e):
            body = [z3.substitute_vars(e.body(), t) for t in terms]
            body = [self.expand(b, terms) for b in body]
            out = z3.And(body) if e.is_forall() else z3.Or(body)
        elif z3.is_app(e) and e.sort() == z3.BoolSort() and (z3.is_and(e) or z3.is_or(e) or z3.is_not(e)
                                                              or z3.is_implies(e)):
            kids = [self.expand(c, terms) for c in e.children()]
            out = e.decl()(*kids) if not z3.is_and(e) and not z3.is_or(e) else (
                z3.And(kids) if z3.is_and(e) else z3.Or(kids))
        else:
            out = e
        self.memo[key] = (e, out)
        return out


def ground(formula, ws: Workers, named: list) -> tuple[Any, list]:
    """A quantifier-free formula satisfiable whenever ``formula`` is (see the module docstring).

    ``named``: the worker ids the query is about (the acting worker).
    Returns (formula, Skolem constants) -- every id the universal
    quantifiers were instantiated at is ``named`` plus those constants.
    """
    if ws.concrete:
        return formula, []
    g = _Grounder(ws.in_range)
    f, used = g.walk(formula, True, 0)
    sks = g.pool[:used]
    return g.expand(f, list(named) + sks), sks
