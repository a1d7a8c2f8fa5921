"""The models' Z3 terms compiled into Python, for running a model on concrete states.

The explicit-state search (:mod:`p4gen.verify.explore`) steps a model on a
concrete worker set through millions of concrete states.  Asking Z3 to
simplify every term in every state would be far too slow, so each term is
compiled once into a Python function of the values of the constants it
names (:func:`compile_terms`).  The compiled function computes exactly what
Z3 would: the operators below have the same meaning on Python's unbounded
integers and booleans (``%`` and ``//`` by a positive constant are Z3's
Euclidean ones), and an enumeration constant is its name.  The search checks
every trace it reports against Z3 itself (:func:`p4gen.verify.explore`), so
a slip here could hide a trace but never produce a false one.

An uninterpreted function application (OmniReduce's ``omni_data`` and
``omni_next``: what a worker sends in a round) is looked up through a
callback; the search raises :class:`Undecided` from it for a value it has not
chosen yet, and branches.  Such terms are evaluated lazily (``x if c else y``,
``and``, ``or``), so a value is only asked for when the outcome depends on it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import z3

_INFIX = {
    z3.Z3_OP_LE: "<=", z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=", z3.Z3_OP_GT: ">", z3.Z3_OP_EQ: "==",
    z3.Z3_OP_ADD: "+", z3.Z3_OP_SUB: "-", z3.Z3_OP_MUL: "*",
}
_INLINE_LIMIT = 4000     # characters: a longer lazy expression is computed once, up front (same value)


class Undecided(Exception):
    """The callback has no value for this application yet: ``key`` = (function name, argument values)."""

    def __init__(self, key: tuple):
        super().__init__(key)
        self.key = key


def value_of(v) -> Any:
    """The Python value of a Z3 literal (int, bool or an enumeration constant's name)."""
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    if z3.is_app(v) and v.decl().kind() == z3.Z3_OP_DT_CONSTRUCTOR and v.num_args() == 0:
        return str(v)
    raise TypeError(f"{v} is not a literal")


class _Node:
    """What the compiler needs of one Z3 term, read once through the (slow) Python API."""
    __slots__ = ("term", "kind", "kids", "name", "arity", "value")

    def __init__(self, e, kids: list):
        self.term, self.kids = e, kids
        self.kind = e.decl().kind() if z3.is_app(e) else None
        self.arity = e.num_args() if z3.is_app(e) else 0
        self.name = e.decl().name() if self.kind == z3.Z3_OP_UNINTERPRETED else str(e) if not kids else ""
        self.value = e.as_long() if z3.is_int_value(e) else None


class Compiler:
    """Compiles terms into Python functions; terms compiled by one compiler share what is read of them.

    ``names``: constant name -> index of its value in ``env``.
    """

    def __init__(self, names: dict[str, int]):
        self.names = names
        self.nodes: dict[int, _Node] = {}     # keeps every term read alive, so its id stays its own
        self.enums: dict[str, Any] = {}

    def node(self, e) -> _Node:
        i = e.get_id()
        nd = self.nodes.get(i)
        if nd is None:
            nd = _Node(e, [self.node(c) for c in e.children()])
            self.nodes[i] = nd
        return nd

    def walk(self, terms):
        """Every node of ``terms``, once each."""
        seen: set[int] = set()
        todo = [self.node(t) for t in terms]
        while todo:
            nd = todo.pop()
            if id(nd) in seen:
                continue
            seen.add(id(nd))
            yield nd
            todo.extend(nd.kids)

    def constants(self, terms) -> set[str]:
        return {nd.name for nd in self.walk(terms) if nd.kind == z3.Z3_OP_UNINTERPRETED and nd.arity == 0}

    def functions(self, terms) -> dict[str, Any]:
        return {nd.name: nd.term.decl() for nd in self.walk(terms)
                if nd.kind == z3.Z3_OP_UNINTERPRETED and nd.arity > 0}

    def compile(self, terms: Sequence) -> Callable[[Sequence, Callable], tuple]:
        """``f(env, fn)``: the values of ``terms`` where the constant named ``c`` has the value
        ``env[names[c]]`` and an uninterpreted function application ``g(x, ..)`` the value ``fn("g", x, ..)``."""
        u = _Unit(self)
        roots = [self.node(t) for t in terms]
        for nd in roots:
            u.count(nd)
        outs = [u.expr(nd) for nd in roots]
        src = ("def f(env, fn):\n" + "".join(line + "\n" for line in u.lines)
               + f"    return ({''.join(o + ', ' for o in outs)})\n")
        scope: dict[str, Any] = {}
        exec(compile(src, "<p4gen.verify.concrete>", "exec"), scope)   # noqa: S102 - source built from Z3 terms
        return scope["f"]


class _Unit:
    """The source of one compiled function."""

    def __init__(self, c: Compiler):
        self.c = c
        self.lines: list[str] = []
        self.code: dict[int, str] = {}
        self.lazy: dict[int, bool] = {}
        self.uses: dict[int, int] = {}
        self.temps = 0

    def count(self, root: _Node) -> None:
        todo = [root]
        while todo:
            nd = todo.pop()
            i = id(nd)
            self.uses[i] = self.uses.get(i, 0) + 1
            if self.uses[i] == 1:
                todo.extend(nd.kids)

    def is_lazy(self, nd: _Node) -> bool:
        """Does the term apply an uninterpreted function (so that it must be evaluated only where needed)?"""
        i = id(nd)
        if i not in self.lazy:
            own = nd.kind == z3.Z3_OP_UNINTERPRETED and nd.arity > 0
            self.lazy[i] = own or any(self.is_lazy(k) for k in nd.kids)
        return self.lazy[i]

    def expr(self, nd: _Node) -> str:
        i = id(nd)
        if i in self.code:
            return self.code[i]
        text = self._expr(nd)
        simple = text.isidentifier() or text.lstrip("-").isdigit() or text.startswith(("env[", "'"))
        if not simple and ((self.uses.get(i, 0) > 1 and not self.is_lazy(nd)) or len(text) > _INLINE_LIMIT):
            name = f"t{self.temps}"
            self.temps += 1
            self.lines.append(f"    {name} = {text}")
            text = name
        self.code[i] = text
        return text

    def _expr(self, nd: _Node) -> str:
        kind = nd.kind
        if kind == z3.Z3_OP_TRUE:
            return "True"
        if kind == z3.Z3_OP_FALSE:
            return "False"
        if nd.value is not None:
            return str(nd.value)
        if kind == z3.Z3_OP_DT_CONSTRUCTOR and nd.arity == 0:
            self.c.enums[nd.name] = nd.term
            return repr(nd.name)
        if kind == z3.Z3_OP_UNINTERPRETED:
            if nd.arity == 0:
                if nd.name not in self.c.names:
                    raise KeyError(f"the term names {nd.name}, which the state and the step do not give a value")
                return f"env[{self.c.names[nd.name]}]"
            args = "".join(f", {self.expr(k)}" for k in nd.kids)
            return f"fn({nd.name!r}{args})"
        a = [self.expr(k) for k in nd.kids]
        if kind == z3.Z3_OP_ITE:
            return f"({a[1]} if {a[0]} else {a[2]})"
        if kind == z3.Z3_OP_AND:
            return "(" + " and ".join(a) + ")"
        if kind == z3.Z3_OP_OR:
            return "(" + " or ".join(a) + ")"
        if kind == z3.Z3_OP_NOT:
            return f"(not {a[0]})"
        if kind == z3.Z3_OP_IMPLIES:
            return f"((not {a[0]}) or {a[1]})"
        if kind == z3.Z3_OP_XOR:
            return f"({a[0]} != {a[1]})"
        if kind == z3.Z3_OP_DISTINCT:
            return f"(len({{{', '.join(a)}}}) == {len(a)})"
        if kind == z3.Z3_OP_UMINUS:
            return f"(-{a[0]})"
        if kind in (z3.Z3_OP_MOD, z3.Z3_OP_IDIV):
            d = nd.kids[1].value
            if d is None or d <= 0:
                raise TypeError(f"{nd.term}: only a division by a positive constant has the same meaning in Python")
            return f"({a[0]} {'%' if kind == z3.Z3_OP_MOD else '//'} {a[1]})"
        if kind in _INFIX:
            return "(" + f" {_INFIX[kind]} ".join(a) + ")"
        raise TypeError(f"no concrete evaluation for {nd.term.decl()} (in {str(nd.term)[:80]})")
