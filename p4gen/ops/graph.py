"""The register operations of ``p4gen.ops`` as expression graphs, and how each role's operations are called.

``p4gen.ops`` writes every operation once, over an abstract algebra.  Run over :data:`SYM`, an op returns
its results as graphs of :class:`Expr` nodes over named leaves (the register's value, a packet field, ...),
with constant conditions folded.  Printers read these graphs, so no operation is written a second time:
``p4gen.switch.kernels`` prints them as Python (the software switch), ``p4gen.emit.p4ops`` as P4
(RegisterActions for Tofino's stateful ALUs, action bodies for v1model).

:data:`ROLE_CALLS` says, per register role, which inputs an op of the role reads (the leaves), how
``p4gen.ops`` is called on them and which input each result replaces (the register values it writes
back; ``None``: an output the packet or the decision carries on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .. import ops

# kinds whose value is a truth value
BOOLEAN = frozenset({"eq", "gt", "ne0"})


class Expr:
    """One node: a leaf (``args = (name,)``), a constant (``(value,)``) or an operation on nodes.

    Kinds: ``leaf const ite eq gt ne0 add sub ssub and or xor not``; ``gt`` is unsigned, ``ssub`` the
    unsigned subtraction that stops at 0.  ``bits`` is the width ``p4gen.ops`` gave the node (an int,
    or any object a printer knows as a width; None for truth values and for ``and``/``or``/``ite``,
    which have their operands' width)."""

    __slots__ = ("kind", "args", "bits")

    def __init__(self, kind: str, *args, bits: Any = None):
        self.kind, self.args, self.bits = kind, args, bits

    def value(self):
        return self.args[0] if self.kind == "const" else None

    def children(self) -> tuple["Expr", ...]:
        return tuple(a for a in self.args if isinstance(a, Expr)) if self.kind not in ("leaf", "const") else ()

    def __repr__(self) -> str:
        if self.kind in ("leaf", "const"):
            return f"{self.kind}({self.args[0]!r})"
        return f"{self.kind}({', '.join(map(repr, self.children()))})"


def leaf(name: str, bits: Any = None) -> Expr:
    return Expr("leaf", name, bits=bits)


def const(value: int, bits: Any = None) -> Expr:
    return Expr("const", value, bits=bits)


class SymbolicAlgebra:
    """``p4gen.ops.Algebra`` over :class:`Expr` graphs (folding constant conditions)."""

    def ite(self, cond, a, b):
        if cond.kind == "const":
            return a if cond.value() else b
        if a is b:
            return a
        return Expr("ite", cond, a, b)

    def eq(self, a, b):
        if a.kind == b.kind == "const":
            return const(a.value() == b.value())
        return Expr("eq", a, b)

    def ugt(self, a, b):
        if a.kind == b.kind == "const":
            return const(a.value() > b.value())
        return Expr("gt", a, b)

    def add(self, a, b, bits):
        return Expr("add", a, b, bits=bits)

    def sub(self, a, b, bits):
        return Expr("sub", a, b, bits=bits)

    def ssub(self, a, b, bits):
        if a.kind == b.kind == "const":
            return const(max(0, a.value() - b.value()), bits)
        return Expr("ssub", a, b, bits=bits)

    def band(self, a, b):
        return Expr("and", a, b)

    def bor(self, a, b):
        return Expr("or", a, b)

    def bnot(self, a, bits):
        return Expr("not", a, bits=bits)

    def const(self, value, bits):
        return const(int(value), bits)

    def ne0(self, a):
        if a.kind == "const":
            return const(a.value() != 0)
        return Expr("ne0", a)

    def false(self):
        return const(False)


SYM = SymbolicAlgebra()


# -- walking graphs -------------------------------------------------------------------------------


def walk(roots) -> list[Expr]:
    """Every operation node under ``roots`` (leaves and constants left out), children before parents,
    each once."""
    seen: set[int] = set()
    order: list[Expr] = []
    stack = [(e, False) for e in reversed(list(roots))]
    while stack:
        e, done = stack.pop()
        if e.kind in ("leaf", "const"):
            continue
        if done:
            order.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        stack.extend((x, False) for x in reversed(e.children()))
    return order


def references(roots) -> dict[int, int]:
    """How many parents (or roots) refer to each operation node under ``roots``, by ``id``."""
    counts: dict[int, int] = {}
    stack = list(roots)
    while stack:
        e = stack.pop()
        if e.kind in ("leaf", "const"):
            continue
        counts[id(e)] = counts.get(id(e), 0) + 1
        if counts[id(e)] == 1:
            stack.extend(e.children())
    return counts


def leaves(roots) -> set[str]:
    """Names of the leaves the expressions ``roots`` read."""
    out, stack = set(), list(roots)
    while stack:
        e = stack.pop()
        if e.kind == "leaf":
            out.add(e.args[0])
        elif e.kind != "const":
            stack.extend(e.children())
    return out


def substitute(e: Expr, repl: dict[str, Expr], memo: dict[int, Expr] | None = None) -> Expr:
    """``e`` with the leaves named in ``repl`` replaced (shared nodes stay shared)."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    if e.kind == "leaf":
        out = repl.get(e.args[0], e)
    elif e.kind == "const":
        out = e
    else:
        args = tuple(substitute(a, repl, memo) if isinstance(a, Expr) else a for a in e.args)
        out = e if all(x is y for x, y in zip(args, e.args)) else Expr(e.kind, *args, bits=e.bits)
    memo[id(e)] = out
    return out


def evaluate(e: Expr, env: dict[str, int], widths: dict[str, int] | None = None) -> int:
    """The value of ``e`` with the leaves given by ``env`` (plain integers; a node's ``bits`` bounds its
    wrap-around; a truth value is 0 or 1)."""
    def w(node):
        return node.bits if isinstance(node.bits, int) else None

    cache: dict[int, int] = {}

    def ev(x: Expr) -> int:
        if id(x) in cache:
            return cache[id(x)]
        k, a = x.kind, x.args
        if k == "leaf":
            v = env[a[0]]
        elif k == "const":
            v = int(a[0])
        elif k == "ite":
            v = ev(a[1]) if ev(a[0]) else ev(a[2])
        elif k == "eq":
            v = int(ev(a[0]) == ev(a[1]))
        elif k == "gt":
            v = int(ev(a[0]) > ev(a[1]))
        elif k == "ne0":
            v = int(ev(a[0]) != 0)
        elif k == "add":
            v = ev(a[0]) + ev(a[1])
        elif k == "sub":
            v = ev(a[0]) - ev(a[1])
        elif k == "ssub":
            v = max(0, ev(a[0]) - ev(a[1]))
        elif k == "and":
            v = ev(a[0]) & ev(a[1])
        elif k == "or":
            v = ev(a[0]) | ev(a[1])
        elif k == "xor":
            v = ev(a[0]) ^ ev(a[1])
        elif k == "not":
            v = ~ev(a[0])
        else:
            raise ValueError(f"unknown node kind {k!r}")
        if w(x) is not None:
            v &= (1 << w(x)) - 1
        cache[id(x)] = v
        return v

    return ev(e)


def run(e: Expr, env: dict[str, Any], A: Any) -> Any:
    """The value of ``e`` over the algebra ``A`` (any ``p4gen.ops.Algebra``, plus ``bxor`` for ``xor``
    nodes), the leaves taking their values from ``env``."""
    cache: dict[int, Any] = {}

    def ev(x: Expr) -> Any:
        if id(x) in cache:
            return cache[id(x)]
        k, a = x.kind, x.args
        if k == "leaf":
            v = env[a[0]]
        elif k == "const":
            v = _truth(A, a[0]) if isinstance(a[0], bool) else A.const(int(a[0]), x.bits)
        elif k == "ite":
            v = A.ite(ev(a[0]), ev(a[1]), ev(a[2]))
        elif k == "eq":
            v = A.eq(ev(a[0]), ev(a[1]))
        elif k == "gt":
            v = A.ugt(ev(a[0]), ev(a[1]))
        elif k == "ne0":
            v = A.ne0(ev(a[0]))
        elif k == "add":
            v = A.add(ev(a[0]), ev(a[1]), x.bits)
        elif k == "sub":
            v = A.sub(ev(a[0]), ev(a[1]), x.bits)
        elif k == "ssub":
            v = A.ssub(ev(a[0]), ev(a[1]), x.bits)
        elif k == "and":
            v = A.band(ev(a[0]), ev(a[1]))
        elif k == "or":
            v = A.bor(ev(a[0]), ev(a[1]))
        elif k == "xor":
            v = A.bxor(ev(a[0]), ev(a[1]))
        elif k == "not":
            v = A.bnot(ev(a[0]), x.bits)
        else:
            raise ValueError(f"unknown node kind {k!r}")
        cache[id(x)] = v
        return v

    return ev(e)


def _truth(A: Any, value: bool) -> Any:
    """A truth value in algebra ``A``: ``false()``, or its negation."""
    f = A.false()
    return f if not value else A.eq(f, f)


# -- how each role's operations are called -------------------------------------------------------


@dataclass(frozen=True)
class RoleCall:
    """How one register role's operations are called: the inputs (``params``, the leaves), the
    ``p4gen.ops`` call over them (``call(op, values, algebra, width)``; ``width`` is the register's
    lane width where the op needs one), and which input each result replaces (``stores``; None: an
    output)."""

    params: tuple[str, ...]
    call: Callable[[str, dict[str, Any], Any, Any], tuple]
    stores: tuple[str | None, ...]

    @property
    def registers(self) -> tuple[str, ...]:
        """The inputs that are register values (each result that is not an output replaces one)."""
        return tuple(s for s in self.stores if s is not None)

    @property
    def output(self) -> int:
        """The position of the one result that is an output."""
        return self.stores.index(None)


ROLE_CALLS: dict[str, RoleCall] = {
    "chunk": RoleCall(("stored", "tsi", "bound"),
                      lambda op, v, A, w: ops.chunk_op(op, v["stored"], v["tsi"], A, v["bound"]),
                      ("stored", None)),
    "bitmap": RoleCall(("this", "other", "mask"),
                       lambda op, v, A, w: ops.bitmap_op(op, v["this"], v["other"], v["mask"], w, A),
                       ("this", "other", None)),
    "counter": RoleCall(("count", "n"),
                        lambda op, v, A, w: ops.counter_op(op, v["count"], v["n"], w, A),
                        ("count", None)),
    "exponent": RoleCall(("stored", "exp"), lambda op, v, A, w: ops.exponent_op(op, v["stored"], v["exp"], A),
                         ("stored", None)),
    "minnext": RoleCall(("stored", "nxt"), lambda op, v, A, w: ops.minnext_op(op, v["stored"], v["nxt"], A),
                        ("stored", None)),
    "values": RoleCall(("stored", "pkt"), lambda op, v, A, w: ops.values_op(op, v["stored"], v["pkt"], w, A),
                       ("stored", None)),
}
assert set(ROLE_CALLS) == set(ops.OPS), "every register role of p4gen.ops needs a call"


def symbolic(role: str, op: str, names: dict[str, str] | None = None, widths: dict[str, Any] | None = None,
             width: Any = 32) -> tuple[Expr, ...]:
    """The results of ``op`` of ``role`` as graphs over leaves named ``names[param]`` (default: the
    parameter's own name) of widths ``widths[param]``; ``width`` is the register lane width."""
    call = ROLE_CALLS[role]
    names = names or {}
    widths = widths or {}
    vals = {p: leaf(names.get(p, p), widths.get(p)) for p in call.params}
    return tuple(call.call(op, vals, SYM, width))
