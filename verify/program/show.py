"""Z3 terms printed the way a P4 reader writes them, for the one line a refusal prints."""

from __future__ import annotations

from typing import Any

import z3

_INFIX = {z3.Z3_OP_BADD: "+", z3.Z3_OP_BSUB: "-", z3.Z3_OP_BMUL: "*", z3.Z3_OP_BAND: "&", z3.Z3_OP_BOR: "|",
          z3.Z3_OP_BXOR: "^", z3.Z3_OP_EQ: "==", z3.Z3_OP_ULT: "<", z3.Z3_OP_ULEQ: "<=", z3.Z3_OP_UGT: ">",
          z3.Z3_OP_UGEQ: ">=", z3.Z3_OP_AND: "&&", z3.Z3_OP_OR: "||", z3.Z3_OP_CONCAT: "++",
          z3.Z3_OP_BSHL: "<<", z3.Z3_OP_BLSHR: ">>"}


def name_of(const: str) -> str:
    """A run's input name as the program writes the place (``pkt:hdr.agg.tsi`` -> ``hdr.agg.tsi``)."""
    if const.startswith("pkt:"):
        const = const[4:]
    if const.startswith("cp."):
        const = const.split(".")[-1]
    return const.split("!")[0]


def show(t: Any, names: dict[str, str] | None = None, limit: int = 90) -> str:
    """``t`` as a P4-like expression (cut at ``limit`` characters); ``names`` renames constants and
    register reads (by their Z3 text)."""
    names = names or {}
    text = _show(t, names, 0)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _show(t: Any, names: dict[str, str], depth: int) -> str:
    if depth > 12:
        return "..."
    key = str(t) if z3.is_select(t) or z3.is_const(t) else None
    if key is not None and key in names:
        return names[key]
    if z3.is_bv_value(t):
        v, w = t.as_long(), t.size()
        return str(v) if v < (1 << (w - 1)) or w < 8 else f"-{(1 << w) - v}"
    if z3.is_true(t):
        return "true"
    if z3.is_false(t):
        return "false"
    if z3.is_const(t):
        return name_of(str(t))
    k = t.decl().kind()
    kids = [_show(c, names, depth + 1) for c in t.children()]
    if z3.is_select(t):
        return f"{kids[0]}[{kids[1]}]"
    if k == z3.Z3_OP_BMUL and len(kids) == 2 and kids[0] == "-1":
        return f"-{kids[1]}"
    if k == z3.Z3_OP_BADD:
        pos = [x for x in kids if not x.startswith("-")]
        neg = [x[1:] for x in kids if x.startswith("-")]
        if pos:
            text = pos[-1] if len(pos) == 1 else " + ".join(reversed(pos))
            return "(" + text + "".join(f" - {x}" for x in neg) + ")"
    if k in _INFIX:
        return "(" + f" {_INFIX[k]} ".join(kids) + ")"
    if k == z3.Z3_OP_ITE:
        return f"({kids[0]} ? {kids[1]} : {kids[2]})"
    if k == z3.Z3_OP_NOT:
        return f"!{kids[0]}"
    if k == z3.Z3_OP_DISTINCT:
        return f"({kids[0]} != {kids[1]})"
    if k == z3.Z3_OP_BNOT:
        return f"~{kids[0]}"
    if k == z3.Z3_OP_EXTRACT:
        hi, lo = t.params()
        return f"{kids[0]}[{hi}:{lo}]"
    if k == z3.Z3_OP_ZERO_EXT:
        return kids[0]
    return f"{t.decl().name()}({', '.join(kids)})"


def along(t: Any, m: z3.ModelRef) -> Any:
    """``t`` with every ``If`` replaced by the branch model ``m`` takes: the expression the counterexample
    computes."""
    memo: dict[int, Any] = {}

    def go(x: Any) -> Any:
        k = x.get_id()
        if k in memo:
            return memo[k]
        if z3.is_app(x) and x.decl().kind() == z3.Z3_OP_ITE:
            r = go(x.arg(1) if z3.is_true(m.eval(x.arg(0), model_completion=True)) else x.arg(2))
        elif z3.is_app(x) and x.num_args() > 0:
            r = x.decl()(*[go(c) for c in x.children()])
        else:
            r = x
        memo[k] = r
        return r

    return go(t)


def concretize(t: Any, m: z3.ModelRef, keep: set[str]) -> Any:
    """``t`` with every constant but those named in ``keep`` replaced by its value in ``m``, simplified."""
    subs = []
    for d in m.decls():
        if d.arity() == 0 and d.name() not in keep:
            v = m[d]
            if v is not None and not z3.is_array(v) and not isinstance(v, z3.FuncInterp):
                subs.append((d(), v))
    return z3.simplify(z3.substitute(t, *subs) if subs else t)
