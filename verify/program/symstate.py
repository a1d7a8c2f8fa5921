"""The values a symbolic run (:mod:`.symexec`) carries: its state, the events it records, and widths."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

VALID = "$valid"          # the place of a header's validity: ``hdr.agg.$valid``


@dataclass
class Event:
    """Something a run did, under path condition ``pc``: ``kind`` is ``table``, ``write`` or ``count``."""
    kind: str
    name: str
    pc: Any
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class State:
    env: dict[str, Any] = field(default_factory=dict)
    regs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def copy(self) -> "State":
        return State(dict(self.env), {k: dict(v) for k, v in self.regs.items()})


def same_term(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef) and a.eq(b))


def fit(v: Any, bits: int | None) -> Any:
    """``v`` as a value of ``bits`` bits (truncated or zero-extended); a truth value as 1 / 0."""
    if bits is None:
        if isinstance(v, z3.BoolRef):
            return v
        if isinstance(v, bool):
            return z3.BoolVal(v)
        return v != 0 if z3.is_bv(v) else z3.BoolVal(bool(v))
    if isinstance(v, bool):
        v = z3.BoolVal(v)
    if isinstance(v, int):
        return z3.BitVecVal(v % (1 << bits), bits)
    if isinstance(v, z3.BoolRef):
        return z3.If(v, z3.BitVecVal(1, bits), z3.BitVecVal(0, bits))
    w = v.size()
    if w == bits:
        return v
    return z3.Extract(bits - 1, 0, v) if w > bits else z3.ZeroExt(bits - w, v)
