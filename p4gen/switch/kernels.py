"""The register operations of ``p4gen.ops`` as executable code, derived from their one definition.

``p4gen.ops`` writes every operation once, over an abstract algebra.  This
module runs those same functions over two more interpretations and builds
the model's executable forms from what they return; it says nothing of its
own about what an operation does.

* :data:`p4gen.ops.graph.SYM`: values are expression graphs.  Running, say,
  ``ops.counter_op("inc_mod", count, n, bits, A)`` over it returns the
  operation's body as a graph, which :func:`_lines` prints as Python
  statements (a sub-expression used twice becomes one local).  From it come
  the scalar kernels (``Kernels.fast``, the per-packet path) and the
  statements the batch path's generated decision loop inlines
  (:meth:`Kernels.inline`).
* :class:`AffineAlgebra`: a value lane as ``a * stored + b * packet + c``.
  ``ops.values_op`` over it tells what each values operation does to a
  register row and to the packet (:class:`ValueForm`); the in-place numpy
  kernels and the batch path's per-op tables are built from that.  An
  operation outside this form (one that compares values, say) runs through
  ``ops.values_op`` over :class:`NumpyAlgebra` instead, and batches of a
  table that uses it run frame by frame.

:func:`derive` returns the kernels of the ``p4gen.ops`` functions as they
are when it is called (cached per function object), so a changed or added
operation reaches every path at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ops import graph as opgraph
from .. import ops

# -- Python source ------------------------------------------------------------------------------


class Width:
    """A register width known only by name at derivation time: its all-ones mask is the variable ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


def _mask(bits) -> str:
    return bits.name if isinstance(bits, Width) else hex((1 << bits) - 1)


Expr = opgraph.Expr
SRC = opgraph.SYM


_FORMS = {"eq": "({} == {})", "gt": "({} > {})", "and": "({} & {})", "or": "({} | {})", "ne0": "({} != 0)"}


def _text(e: Expr, names: dict[int, str]) -> str:
    if id(e) in names:
        return names[id(e)]
    k, a = e.kind, e.args
    if k == "leaf":
        return a[0]
    if k == "const":
        return str(int(a[0]))
    if k == "ite":
        return f"({_text(a[1], names)} if {_text(a[0], names)} else {_text(a[2], names)})"
    if k == "add":
        return f"(({_text(a[0], names)} + {_text(a[1], names)}) & {_mask(e.bits)})"
    if k == "sub":
        return f"(({_text(a[0], names)} - {_text(a[1], names)}) & {_mask(e.bits)})"
    if k == "ssub":
        x, y = _text(a[0], names), _text(a[1], names)
        return f"(({x} - {y}) if {x} > {y} else 0)"
    if k == "not":
        return f"(~{_text(a[0], names)} & {_mask(e.bits)})"
    return _FORMS[k].format(*(_text(x, names) for x in a))


def leaves(roots) -> set[str]:
    """Names of the leaves the expressions ``roots`` read."""
    return opgraph.leaves(roots)


def _lines(outputs: list[tuple[str, Expr]], temp: str) -> list[str]:
    """Statements assigning each (target, expression): shared sub-expressions first, as locals."""
    roots = [e for _t, e in outputs]
    counts = opgraph.references(roots)
    order = opgraph.walk(roots)
    names: dict[int, str] = {}
    lines = []
    for e in order:
        if counts[id(e)] > 1:
            text = _text(e, names)
            names[id(e)] = f"{temp}{len(names)}"
            lines.append(f"{names[id(e)]} = {text}")
    return lines + [f"{t} = {_text(e, names)}" for t, e in outputs]


# -- scalar roles ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarRole:
    """How the model calls one scalar role's operations: the role's call (:data:`p4gen.ops.graph.ROLE_CALLS`)
    with, for a role whose ops take the register's width, the kernel's ``full`` parameter (that width's
    all-ones mask)."""

    call: opgraph.RoleCall
    width: bool

    @property
    def params(self) -> tuple[str, ...]:
        return self.call.params + (("full",) if self.width else ())

    @property
    def stores(self) -> tuple[str | None, ...]:
        return self.call.stores


SCALAR_ROLES: dict[str, ScalarRole] = {role: ScalarRole(opgraph.ROLE_CALLS[role], role in ("bitmap", "counter"))
                                       for role in ("chunk", "bitmap", "counter", "exponent", "minnext")}


def _symbolic(role: str, op: str, names: dict[str, str]) -> tuple[Expr, ...]:
    """The results of ``op`` over leaves named ``names[param]`` (the width's mask: ``names["full"]``)."""
    spec = SCALAR_ROLES[role]
    vals = {p: opgraph.leaf(names.get(p, p)) for p in spec.call.params}
    return tuple(spec.call.call(op, vals, SRC, Width(names.get("full", "full"))))


def _compile(src: str, name: str, env: dict[str, Any] | None = None):
    scope: dict[str, Any] = dict(env or {})
    exec(compile(src, f"<p4gen.ops {name}>", "exec"), scope)  # noqa: S102 -- text built by _lines from p4gen.ops
    return scope["kernel"]


def scalar_kernel(role: str, op: str):
    """``op`` of ``role`` as one Python function of the role's parameters (e.g. ``(count, n, full)``),
    returning what the ``p4gen.ops`` function returns."""
    spec = SCALAR_ROLES[role]
    outs = _symbolic(role, op, {})
    body = _lines([(f"_r{i}", e) for i, e in enumerate(outs)], "_t")
    src = "\n".join([f"def kernel({', '.join(spec.params)}):"] + [f"    {x}" for x in body]
                    + [f"    return {', '.join(f'_r{i}' for i in range(len(outs)))}"])
    return _compile(src, f"{role}.{op}")


def _values_of(e: Expr) -> set[int] | None:
    """The values expression ``e`` can take, when they are constants or truth values (else None)."""
    if e.kind == "const":
        return {int(e.value())}
    if e.kind == "ite":
        a, b = _values_of(e.args[1]), _values_of(e.args[2])
        return None if a is None or b is None else a | b
    if e.kind in ("eq", "gt", "ne0"):
        return {0, 1}
    return None


def observed(role: str, op: str) -> list[int] | None:
    """The observation codes ``op`` of ``role`` can report (its result that goes to no register), read
    off its expression graph, in increasing order; None when that result is not of that form."""
    spec = SCALAR_ROLES[role]
    vals = _values_of(_symbolic(role, op, {})[spec.stores.index(None)])
    return None if vals is None else sorted(vals)


# -- value lanes --------------------------------------------------------------------------------------


class NotAffine(Exception):
    """A values operation that is not ``a * stored + b * packet + c``."""


@dataclass(frozen=True)
class Lin:
    a: int   # times the stored value
    b: int   # times the packet's value
    c: int   # plus a constant


class AffineAlgebra:
    """``p4gen.ops.Algebra`` over :class:`Lin` (addition and constants only)."""

    def add(self, x, y, bits):
        return Lin(x.a + y.a, x.b + y.b, x.c + y.c)

    def const(self, value, bits):
        return Lin(0, 0, int(value))

    def _no(self, *a):
        raise NotAffine

    ite = eq = ugt = ssub = band = bor = bnot = ne0 = false = _no


AFFINE = AffineAlgebra()
STORED, PACKET = Lin(1, 0, 0), Lin(0, 1, 0)


class NumpyAlgebra:
    """``p4gen.ops.Algebra`` over numpy arrays of unsigned lanes (wrap-around at ``bits``)."""

    def ite(self, cond, a, b):
        return np.where(cond, a, b)

    def eq(self, a, b):
        return np.asarray(a) == np.asarray(b)

    def ugt(self, a, b):
        return np.asarray(a, dtype=np.uint64) > np.asarray(b, dtype=np.uint64)

    def add(self, a, b, bits):
        return ((np.asarray(a, dtype=np.uint64) + np.asarray(b, dtype=np.uint64)) & ((1 << bits) - 1))

    def ssub(self, a, b, bits):
        a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
        return np.where(a > b, a - b, np.uint64(0))

    def band(self, a, b):
        return np.bitwise_and(a, b)

    def bor(self, a, b):
        return np.bitwise_or(a, b)

    def bnot(self, a, bits):
        return np.bitwise_and(np.invert(np.asarray(a, dtype=np.uint64)), (1 << bits) - 1)

    def const(self, value, bits):
        return np.uint64(value)

    def ne0(self, a):
        return np.asarray(a) != 0

    def false(self):
        return np.False_


NP = NumpyAlgebra()


@dataclass(frozen=True)
class ValueForm:
    """What one values operation does, read off ``ops.values_op``.

    ``touches``: it accesses the register (it is not "keep the row, the packet
    keeps its values"); ``carries``: the packet leaves with values other than
    its own.  With ``new``/``carried`` (None when the op is not affine): the
    row after the op and the packet's values after it.  ``batchable``: the
    batch path's segment sums apply (the row restarts or not, the packet adds
    its values once or not, no constant, and a carrying packet carries the
    row after the op).
    """

    op: str
    touches: bool
    carries: bool
    new: Lin | None
    carried: Lin | None

    @property
    def batchable(self) -> bool:
        n, c = self.new, self.carried
        return (n is not None and n.a in (0, 1) and n.b in (0, 1) and n.c == 0
                and (c == PACKET or c == n))

    @property
    def resets(self) -> bool:
        return self.new is not None and self.new.a == 0

    @property
    def adds(self) -> bool:
        return self.new is not None and self.new.b == 1


def value_form(op: str) -> ValueForm:
    s, p = opgraph.leaf("stored"), opgraph.leaf("packet")
    new_e, car_e = ops.values_op(op, s, p, Width("full"), SRC)
    touches = not (new_e is s and car_e is p)
    try:
        new, carried = ops.values_op(op, STORED, PACKET, 32, AFFINE)
    except NotAffine:
        new = carried = None
    return ValueForm(op, touches, car_e is not p, new, carried)


def _np_store(f: Lin) -> str:
    """A numpy statement leaving ``f`` (of the old row and the packet) in ``rows``, in place."""
    if f == Lin(1, 1, 0):
        return "np.add(rows, load(frame), out=rows, casting='unsafe')"
    if f == PACKET:
        return "rows[...] = load(frame)"
    if f.a == f.b == 0:
        return f"rows[...] = {f.c}"
    return f"np.copyto(rows, {_np_value(f)}, casting='unsafe')"


def _np_value(f: Lin) -> str:
    """A numpy expression of ``f`` (of the old row and the packet), as a new array."""
    if f == STORED:
        return "rows.copy()"
    if f == PACKET:
        return "load(frame)"
    return f"(rows.astype(np.uint64) * {f.a} + load(frame).astype(np.uint64) * {f.b} + {f.c}).astype(rows.dtype)"


def values_kernel(form: ValueForm):
    """The values op on the register rows in place: ``kernel(rows, frame, load)`` returns the values the
    packet carries on, or None when it keeps its own (``load(frame)``: the packet's values)."""
    if form.new is None:
        def kernel(rows, frame, load, _op=form.op):
            new, carried = ops.values_op(_op, rows.copy(), load(frame).astype(rows.dtype), 8 * rows.itemsize, NP)
            rows[...] = np.asarray(new).astype(rows.dtype)
            return np.broadcast_to(np.asarray(carried).astype(rows.dtype), rows.shape)
        return kernel
    body, ret = [], "rows"
    if form.carried == PACKET:
        ret = "None"
    elif form.carried != form.new:            # carries something other than the new row: taken before the store
        body.append(f"car = {_np_value(form.carried)}")
        ret = "car"
    if form.new != STORED:
        body.append(_np_store(form.new))
    src = "\n".join(["def kernel(rows, frame, load):"] + [f"    {x}" for x in body] + [f"    return {ret}"])
    return _compile(src, f"values.{form.op}", {"np": np})


# -- all of them, from the current p4gen.ops ---------------------------------------------------------


class Kernels:
    """Every operation of ``p4gen.ops`` as the model executes it.

    ``fast[role][op]``: the per-packet kernels (scalar roles as in
    :func:`scalar_kernel`, values as in :func:`values_kernel`);
    ``values[op]``: each values op's :class:`ValueForm`; ``vcode``: values op
    -> its code in the batch path (the order of ``ops.OPS["values"]``), with
    the per-code tables ``v_touch``, ``v_carry``, ``v_reset`` and ``v_adds``.
    """

    def __init__(self):
        self.fast: dict[str, dict[str, Callable]] = {
            role: {op: scalar_kernel(role, op) for op in ops.OPS[role]} for role in SCALAR_ROLES}
        self.values = {op: value_form(op) for op in ops.OPS["values"]}
        self.fast["values"] = {op: values_kernel(f) for op, f in self.values.items()}
        self.vcode = {op: i for i, op in enumerate(self.values)}
        forms = list(self.values.values())
        self.v_touch = np.array([f.touches for f in forms])
        self.v_carry = np.array([f.carries for f in forms])
        self.v_reset = np.array([f.resets for f in forms])
        self.v_adds = np.array([f.adds for f in forms])
        self.v_nop = next((i for i, f in enumerate(forms) if not f.touches), None)

    def inline(self, role: str, op: str, inputs: dict[str, str], loads: dict[str, str],
               outputs: tuple[str | None, ...], temp: str) -> list[str]:
        """Statements of ``op`` for a generated loop.

        ``inputs``: parameter -> the local that holds it; ``loads``: parameter
        -> the expression a local is loaded from when the body reads it (a
        register entry); ``outputs``: per result, the target it is assigned to
        (None: dropped).  A result that is the register's own unchanged value
        is not stored back.
        """
        spec = SCALAR_ROLES[role]
        outs = _symbolic(role, op, inputs)
        todo = []
        for e, target, reg in zip(outs, outputs, spec.stores):
            if target is None:
                continue
            if reg is not None and e.kind == "leaf" and e.args[0] == inputs[reg]:
                continue                      # the register keeps its value
            todo.append((target, e))
        used = leaves([e for _t, e in todo])
        pre = [f"{inputs[p]} = {loads[p]}" for p in spec.params if p in loads and inputs[p] in used]
        return pre + _lines(todo, temp)


_CACHE: dict[tuple, Kernels] = {}


def derive() -> Kernels:
    """The kernels of ``p4gen.ops`` as it is now (derived once per set of operation functions)."""
    key = (ops.chunk_op, ops.bitmap_op, ops.counter_op, ops.exponent_op, ops.minnext_op, ops.values_op,
           tuple((r, tuple(v)) for r, v in ops.OPS.items()))
    k = _CACHE.get(key)
    if k is None:
        k = _CACHE[key] = Kernels()
    return k


FAST_KERNELS = derive().fast
