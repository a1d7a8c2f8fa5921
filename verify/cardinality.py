"""How many bits a bitmap holds, for concrete and symbolic worker sets, and the bitmap word split.

The counter clauses of the invariants say "the counter equals the number of
set bits".  For a concrete worker set that number is a plain sum.  For a
symbolic one (n = N, bitmaps as arrays) it is :data:`CARD`, an
uninterpreted function, and every query assumes instances of facts about
the size of a finite set ``{u in 0..N-1 : S[u]}`` (:func:`card_facts`):

* ``0 <= card(S) <= N``;
* ``card(S) = N`` implies every worker's bit is set, ``card(S) = 0`` that
  none is, ``card(S) > 0`` that some worker's is, and ``card(S) < N`` that
  some worker's is not;
* setting a clear bit adds one, clearing a set bit takes one away, and the
  empty set has none (for every ``Store`` / constant array the step builds).

These hold for the size of every finite set, so the real size is one
interpretation of :data:`CARD` that satisfies every instance: a query with
no model for any interpretation has none for the real size either.

The switch keeps a bitmap of ``max_workers`` bits as 32-bit words and runs
a bitmap op on every word, with the worker's bit in its own word and an
empty mask in the others, taking ``seen`` as the or of the words' answers.
:func:`prove_word_split` proves, for each op of ``p4gen.ops`` and the
plan's word count, that this is the op on the whole bitmap, which is what
the models (one set of worker ids) evaluate.
"""

from __future__ import annotations

import functools

import z3

from p4gen import ops

from .budget import QUERY_RLIMIT
from .workers import Workers
from .z3alg import BitSet

CARD = z3.Function("card", z3.ArraySort(z3.IntSort(), z3.BoolSort()), z3.IntSort())
WORD = 32


def card(ws: Workers, b: BitSet):
    """The number of workers whose bit ``b`` holds."""
    if ws.concrete:
        return z3.Sum([z3.If(b.has(u), 1, 0) for u in ws.ids()]) if ws.n else z3.IntVal(0)
    return CARD(b.bits.arr)


def full(ws: Workers, b: BitSet):
    return card(ws, b) == ws.N


def _structure(ws: Workers, arr, seen: set, out: list) -> None:
    """Size facts of ``arr`` and of the arrays it is built from."""
    if arr.get_id() in seen:
        return
    seen.add(arr.get_id())
    N = ws.N
    c = CARD(arr)
    out.append(z3.And(c >= 0, c <= N))
    out.append(z3.Implies(c == N, ws.all(lambda u: z3.Select(arr, u))))
    out.append(z3.Implies(c == 0, ws.all(lambda u: z3.Not(z3.Select(arr, u)))))
    out.append(z3.Implies(c > 0, ws.some(lambda u: z3.Select(arr, u))))
    out.append(z3.Implies(c < N, ws.some(lambda u: z3.Not(z3.Select(arr, u)))))
    if z3.is_app_of(arr, z3.Z3_OP_STORE):
        base, idx, val = arr.children()
        was = z3.Select(base, idx)
        if z3.is_true(val):
            out.append(z3.Implies(ws.in_range(idx), c == CARD(base) + z3.If(was, 0, 1)))
        elif z3.is_false(val):
            out.append(z3.Implies(ws.in_range(idx), c == CARD(base) - z3.If(was, 1, 0)))
        _structure(ws, base, seen, out)
    elif z3.is_app_of(arr, z3.Z3_OP_CONST_ARRAY):
        v = arr.children()[0]
        if z3.is_false(v):
            out.append(c == 0)
        elif z3.is_true(v):
            out.append(c == N)


def card_facts(ws: Workers, bitmaps: list[BitSet]) -> list:
    """Instances of the size facts for every bitmap of a query (empty for a concrete worker set)."""
    if ws.concrete:
        return []
    out: list = []
    seen: set = set()
    for b in bitmaps:
        _structure(ws, b.bits.arr, seen, out)
    return out


@functools.lru_cache(maxsize=None)
def prove_word_split(words: int, op: str, rlimit: int = QUERY_RLIMIT) -> bool | None:
    """Bitmap op ``op`` run word by word (the worker's bit in its word, empty masks elsewhere, seen = or of
    the words' answers) equals ``op`` on the ``words * 32``-bit bitmap, for every worker and every state.

    True when proved, False when refuted, None when the query ran out of its budget (``rlimit``)."""
    from .z3alg import Z3

    width = words * WORD
    this, other = z3.BitVec("this", width), z3.BitVec("other", width)
    w = z3.BitVec("w", width)
    mask = z3.BitVecVal(1, width) << w
    whole_t, whole_o, whole_s = ops.bitmap_op(op, this, other, mask, width, Z3)
    parts_t, parts_o, seen = [], [], []
    for i in range(words):
        hi, lo = WORD * i + WORD - 1, WORD * i
        m_i = z3.Extract(hi, lo, mask)
        t, o, s = ops.bitmap_op(op, z3.Extract(hi, lo, this), z3.Extract(hi, lo, other), m_i, WORD, Z3)
        parts_t.append(t)
        parts_o.append(o)
        seen.append(s)
    cat = lambda xs: xs[0] if len(xs) == 1 else z3.Concat(list(reversed(xs)))  # noqa: E731
    sol = z3.Solver()
    sol.set("rlimit", rlimit)
    sol.add(z3.ULT(w, width))
    sol.add(z3.Not(z3.And(cat(parts_t) == whole_t, cat(parts_o) == whole_o, z3.Or(seen) == whole_s)))
    r = sol.check()
    return True if r == z3.unsat else False if r == z3.sat else None


def word_split_lemmas(words: int, rlimit: int = QUERY_RLIMIT) -> dict[str, bool | None]:
    return {op: prove_word_split(words, op, rlimit) for op in ops.OPS["bitmap"]}
