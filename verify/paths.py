"""Paths through a decision table: the switch step of every protocol model.

Every step of the plan's decision table is taken entry by entry from
``p4gen.decision.expand`` (the const entries of the P4 tables), each entry's
op is evaluated with the ``p4gen.ops`` definition over the Z3 algebras of
:mod:`p4gen.verify.z3alg`, and the entries select among the results.  A
delivery is split by its path (:class:`Path`): at each step the entries are
tried in the order :func:`_select` lists them and the last one is the
default (taken when none of the others is), so the paths of a packet are
mutually exclusive and together cover every state; splitting a query by path
is a tautological case split.  Along a path every register's new value is
the op's result with no selection term around it, so a bit the op does not
touch stays the very same term.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from p4gen import decision, ops
from p4gen.decision import Codes, DecisionTable

from .budget import FEASIBLE_RLIMIT
from .workers import Workers
from .z3alg import Z3, BitsAlgebra, Mask, ValuesAlgebra

COUNTER_BITS = 32


@dataclass
class Packet:
    """What a delivery brings to the table (chunk tsi, the worker's bit, the packet's register inputs)."""
    tsi: Any
    mask: Mask
    n: Any                 # the job's worker count the counter compares with
    values: Any            # Shares
    exponent: Any          # Shares
    nxt: Any = None        # OmniReduce: the packet's next offset
    obs: dict = field(default_factory=dict)   # observations before the first step (OmniReduce: data)
    bound: Any = None      # how far ahead of the stored chunk advance_window takes a tsi


@dataclass
class Path:
    """One entry sequence through the register steps (``cond``: the entry selections it takes)."""
    cond: list
    reg: dict
    obs: dict
    ops: dict

    @property
    def label(self) -> str:
        return "/".join(self.ops[r] for r in self.ops)


def _select(keys, rules, obs: dict[str, Any], codes: Codes, label: Callable[[Any], Any]):
    """Group a step's expanded const entries by what they select: {selection: condition}, in entry order."""
    groups: dict[Any, list] = {}
    eqs: dict[tuple[str, str], Any] = {}
    for combo, rule in decision.expand(keys, rules):
        for key, val in combo.items():
            if (key, val) not in eqs:
                eqs[key, val] = obs[key] == codes.observation(key, val)
        cond = z3.And([eqs[key, val] for key, val in combo.items()])
        groups.setdefault(label(rule), []).append(cond)
    return {sel: (conds[0] if len(conds) == 1 else z3.Or(conds)) for sel, conds in groups.items()}


def feasible(conds: list, extra: list = ()) -> bool:
    """Can the path conditions ``conds`` hold?  Unknown counts as yes: a path kept needlessly costs a query,
    a path dropped wrongly would leave a case unproved."""
    sol = z3.Solver()
    sol.set("rlimit", FEASIBLE_RLIMIT)
    sol.add(list(conds) + list(extra))
    return sol.check() != z3.unsat


def _code(y):
    return y if isinstance(y, bool) else z3.simplify(y)


def table_paths(table: DecisionTable, ws: Workers, regs: dict[str, Any], pkt: Packet, codes: Codes,
                prune: Callable[[tuple, list], bool] | None = None) -> list[Path]:
    """Run ``table`` on a packet, one :class:`Path` per entry sequence.

    ``regs``: the copy's registers (chk, this, other, cnt, val, exp, mn).
    Paths whose condition simplifies to false are left out (they are never
    taken); with ``prune(ops so far, condition)`` so are those it rejects.
    """
    bits, valg = BitsAlgebra(ws), ValuesAlgebra(ws)
    reg0 = dict(regs, carried=pkt.values, exp_carried=pkt.exponent, mn_carried=pkt.nxt)
    paths = [Path([], reg0, dict(pkt.obs), {})]
    for stp in table.steps:
        role = stp.role
        nxt: list[Path] = []
        for pa in paths:
            choices = _select(stp.keys, stp.rules, pa.obs, codes, lambda r: r.op)
            sels = list(choices)
            for i, op in enumerate(sels):
                taken = [z3.Not(choices[x]) for x in sels[:i]] + ([choices[op]] if i < len(sels) - 1 else [])
                taken = [z3.simplify(t) for t in taken]
                if any(z3.is_false(t) for t in taken):
                    continue
                cond = pa.cond + [t for t in taken if not z3.is_true(t)]
                path_ops = {**pa.ops, role: op}
                if prune is not None and taken and not prune(tuple(path_ops.values()), cond):
                    continue
                reg, obs = dict(pa.reg), dict(pa.obs)
                y = None
                if role == "chunk":
                    if op == "advance_window" and pkt.bound is None:
                        raise KeyError("advance_window in a table of a protocol whose tsi gaps have no bound")
                    reg["chk"], y = ops.chunk_op(op, reg["chk"], pkt.tsi, Z3, pkt.bound)
                elif role == "bitmap":
                    t, o, seen = ops.bitmap_op(op, reg["this"], reg["other"], pkt.mask, COUNTER_BITS, bits)
                    reg["this"], reg["other"] = bits.word(t), bits.word(o)
                    y = z3.If(seen, Z3.const(1, 8), Z3.const(0, 8))
                elif role == "counter":
                    reg["cnt"], y = ops.counter_op(op, reg["cnt"], pkt.n, COUNTER_BITS, Z3)
                elif role == "values":
                    reg["val"], reg["carried"] = ops.values_op(op, reg["val"], pkt.values, COUNTER_BITS, valg)
                elif role == "exponent":
                    # the packet's exponent stands for its contribution, like its values
                    reg["exp"], reg["exp_carried"] = ops.exponent_op(op, reg["exp"], pkt.exponent, Z3)
                elif role == "minnext":
                    if reg.get("mn") is None:
                        raise KeyError("a minnext step in a table of a protocol without next offsets")
                    reg["mn"], reg["mn_carried"] = ops.minnext_op(op, reg["mn"], pkt.nxt, Z3)
                else:
                    raise KeyError(f"register role {role!r}")
                if stp.yields:
                    obs[stp.yields] = _code(y)
                nxt.append(Path(cond, reg, obs, path_ops))
        paths = nxt
    return paths


def outcome(table: DecisionTable, pa: Path, codes: Codes, stats: tuple[str, ...]) -> dict[str, Any]:
    """The outcome step on a path: multicast / unicast (Z3 Bools) and the packet counter index."""
    oc = table.outcome
    outs = _select(oc.keys, oc.rules, pa.obs, codes, lambda r: (r.action, r.stat))
    sels = list(outs)
    # first-listed selection wins, the last one is the default (as for the register steps)
    mc = uc = stat = None
    for i in reversed(range(len(sels))):
        (a, st), c = sels[i], outs[sels[i]]
        if i == len(sels) - 1:
            mc, uc, stat = z3.BoolVal(a == "multicast"), z3.BoolVal(a == "unicast"), z3.IntVal(stats.index(st))
        else:
            mc = z3.If(c, z3.BoolVal(a == "multicast"), mc)
            uc = z3.If(c, z3.BoolVal(a == "unicast"), uc)
            stat = z3.If(c, z3.IntVal(stats.index(st)), stat)
    return {"mc": z3.simplify(mc), "uc": z3.simplify(uc), "stat": z3.simplify(stat)}
