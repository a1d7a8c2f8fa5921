"""The decision steps of a build on Tofino's stateful ALUs: which RegisterAction each entry runs, and the
metadata and match-action work around it.

:mod:`p4gen.ops.salu` lowers one op on one register; this module does it for every op a decision step names
on every register array of the step, and says where things go in the program:

* the fields an op reads (``hdr.agg.tsi``, ``meta.num_workers``, this word's ``meta.mask<i>``, a value
  lane's ``hdr.data0.d<j>``) and the field its output goes to (``meta.cmp``, ``meta.seen``, ...);
* the metadata it adds: what is computed before the step's table (``<register>_h<i>``), the words a
  RegisterAction returns when the output is computed after it (``<register>_rv<k>``), and the
  temporaries of that computation (``<step>_p<i>``);
* per action of the step's table, which RegisterActions it executes and how its output is formed.

The planner counts the metadata (PHV) from here, the P4 emitter (``p4gen.emit.p4ops``) prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import decision
from . import graph as opgraph, salu
from .graph import BOOLEAN, Expr
from .salu import IN, RV, TMP, SaluCaps

# where each role's op reads its inputs and where its output goes
INPUT = {"tsi": ("hdr.agg.tsi", 32), "bound": ("meta.bound", 32), "n": ("meta.num_workers", 32),
         "exp": ("hdr.agg.exponent", 8), "nxt": ("hdr.agg.next", 32)}
OUTPUT = {"chunk": "meta.cmp", "bitmap": "meta.seen", "counter": "meta.count", "exponent": "hdr.agg.exponent",
          "minnext": "hdr.agg.next"}
BITS = {"chunk": 32, "counter": 32, "minnext": 32, "exponent": 8, "bitmap": 32}


@dataclass(frozen=True)
class Array:
    """What the steps need of one register array (a planner register or a Plan's)."""
    name: str
    role: str
    lanes: int
    lane_bits: int
    word: int | None = None
    elements: tuple[int, ...] = ()

    @classmethod
    def of(cls, r: Any) -> "Array":
        get = (lambda k: r.get(k)) if isinstance(r, dict) else (lambda k: getattr(r, k, None))
        return cls(get("name"), get("role"), get("lanes"), get("lane_bits"), get("word"),
                   tuple(get("elements") or ()))

    @property
    def pair(self) -> bool:
        return self.lanes == 2


@dataclass(frozen=True)
class Run:
    """One RegisterAction an action executes: on ``array``, returning into ``carriers`` (metadata fields,
    one per returned word, when the output is computed after the ALU) or straight into ``target``."""
    array: str
    low: salu.Lowered
    carriers: tuple[str, ...] = ()
    target: str | None = None


@dataclass(frozen=True)
class OpCode:
    """One action of a step's table: the op (for one copy), what it executes and how its output is set.

    ``result`` (None when the executes set it) is the output over fields (leaves are P4 names); a
    field or constant is assigned in the action, anything else is computed after the table."""
    action: str
    op: str
    copy: int | None
    runs: tuple[Run, ...]
    result: Expr | None

    @property
    def after(self) -> bool:
        return self.result is not None and self.result.kind not in ("leaf", "const")


@dataclass(frozen=True)
class StepCode:
    name: str
    role: str
    arrays: tuple[Array, ...]
    ops: tuple[OpCode, ...]
    hoisted: tuple[tuple[str, Expr], ...]              # metadata field -> what it holds, before the table
    post: tuple[tuple[tuple[str, ...], salu.MauForm], ...]   # (actions, the work after them), for .action_run
    fields: tuple[tuple[str, int], ...]                # metadata the step adds

    @property
    def output(self) -> str | None:
        return OUTPUT.get(self.role)


def inputs_of(role: str, a: Array) -> dict[str, tuple[str, int]]:
    """Leaf name -> (P4 field, bits) of what ``role``'s ops read on array ``a``."""
    if role == "bitmap":
        return {IN + "mask": (f"meta.mask{a.word}", 32)}
    if role == "values":
        if a.pair:
            return {f"{IN}pkt{i}": (f"hdr.data0.d{e}", a.lane_bits) for i, e in enumerate(a.elements)}
        return {IN + "pkt": (f"hdr.data0.d{a.elements[0]}", a.lane_bits)}
    return {IN + p: INPUT[p] for p in opgraph.ROLE_CALLS[role].params if p in INPUT}


def outputs_of(role: str, a: Array) -> list[str]:
    if role == "values":
        return [f"hdr.data0.d{e}" for e in a.elements]
    return [OUTPUT[role]]


def widths(role: str, value_width: int) -> tuple[dict[str, int], int]:
    """(input -> bits, the register lane's bits) of ``role``."""
    if role == "values":
        return {}, value_width
    call = opgraph.ROLE_CALLS[role]
    w = BITS[role]
    return {p: (w if p in call.registers else INPUT.get(p, ("", w))[1]) for p in call.params}, w


def used_ops(st: decision.Step) -> list[str]:
    """The ops some entry of step ``st``'s table runs, in ``p4gen.ops`` order."""
    from .. import ops

    order = list(ops.OPS[st.role])
    return sorted({rule.op for _obs, rule in decision.expand(st.keys, st.rules)}, key=order.index)


def any_of(results: list[Expr]) -> Expr:
    """Whether any of the words' truth values holds (the bitmap step's output, 1 or 0)."""
    if any(r.kind == "const" and bool(r.args[0]) for r in results):
        return opgraph.const(1, 8)
    rest = [r for r in results if r.kind != "const"]
    out = opgraph.const(0, 8)
    for r in reversed(rest):
        out = opgraph.SYM.ite(r, opgraph.const(1, 8), out)
    return out


def step_code(st: decision.Step, arrays: list[Array], caps: SaluCaps, value_width: int) -> StepCode:
    """The stateful-ALU program of step ``st`` on its register ``arrays``."""
    role = st.role
    keyed = decision.copy_keyed(st)
    ws, w = widths(role, value_width)
    pair = bool(arrays) and arrays[0].pair
    fields: dict[str, int] = {}
    hoisted: dict[str, Expr] = {}
    codes: list[OpCode] = []
    per_array: dict[str, list[salu.Lowered]] = {a.name: [] for a in arrays}
    for op in used_ops(st):
        for copy in ((0, 1) if keyed and decision.touches(role, op) else (None,)):
            action = decision.step_action(st.name, role, op, copy)
            runs, results = [], []
            for a in arrays:
                low = salu.lower(role, op, caps, pair=pair, copy=copy, widths=ws, width=w, prefix=f"{a.name}_h")
                per_array[a.name].append(low)
                names = {n: opgraph.leaf(p4, b) for n, (p4, b) in inputs_of(role, a).items()}
                for tmp, e in low.hoisted:
                    field = tmp[len(TMP):]
                    hoisted[field] = opgraph.substitute(e, names)
                    fields[field] = e.bits if isinstance(e.bits, int) else 32
                    names[tmp] = opgraph.leaf(f"meta.{field}", fields[field])
                returned = {}
                carriers: tuple[str, ...] = ()
                target = None
                if low.touches and low.split:
                    carriers = tuple(f"{a.name}_rv{k}" for k in range(len(low.outputs)))
                    for k, c in enumerate(carriers):
                        fields[c] = w
                        returned[f"{RV}{k}"] = opgraph.leaf(f"meta.{c}", w)
                elif low.touches:
                    for k, o in enumerate(low.outputs):
                        if o.kind == "const":
                            returned[f"{RV}{k}"] = o          # a constant: set by the action, not returned
                    if role != "values" and role != "bitmap" and not returned:
                        target = OUTPUT[role]
                if low.touches:
                    runs.append(Run(a.name, low, carriers, target))
                if target is None and role != "values":
                    results.append(opgraph.substitute(low.results[0], {**names, **returned}))
            if role == "values":
                result = None
            elif role == "bitmap":
                result = any_of(results)
            else:
                result = results[0] if results else None
            codes.append(OpCode(action, op, copy, tuple(runs), result))
    for a in arrays:
        salu.check_register(a.name, per_array[a.name], caps)
    post: dict[str, tuple[list[str], salu.MauForm]] = {}
    returned = frozenset(f"meta.{f}" for c in codes for run in c.runs for f in run.carriers)
    for c in codes:
        if c.after:
            form = salu.mau_form(c.result, f"{st.name}_p", returned)
            k = salu.key(form.tree) + "|" + ";".join(salu.key(t) for _n, t in form.temps)
            post.setdefault(k, ([], form))[0].append(c.action)
            for n, t in form.temps:
                fields[n[len(TMP):]] = _bits(t)
    return StepCode(st.name, role, tuple(arrays), tuple(codes), tuple(hoisted.items()),
                    tuple((tuple(acts), form) for acts, form in post.values()), tuple(fields.items()))


def _bits(e: Expr) -> int:
    if isinstance(e.bits, int):
        return e.bits
    for c in e.children():
        if isinstance(c.bits, int):
            return c.bits
    return 32


def step_facts(table: decision.DecisionTable, caps: SaluCaps, value_width: int, lanes: int,
               max_workers: int) -> dict[str, tuple[bool, bool]]:
    """Per step's role: (some op's output is computed after the ALU, the step needs metadata computed in a
    stage before its registers').  The second holds for a step with hoisted work, for the bitmap when the
    worker's bit may sit in one of several words (each word's mask is set by a gateway on the word), and
    for the values, whose index the hash unit forms from the slot once the worker look-up has set it."""
    out = {}
    words = -(-max_workers // 32)
    for st in table.steps:
        if st.role == "values":
            a = Array("values", "values", lanes, value_width, elements=tuple(range(lanes)))
        elif st.role == "bitmap":
            a = Array("bitmap0", "bitmap", 2, 32, word=0)
        else:
            a = Array(st.role, st.role, 1, BITS[st.role])
        sc = step_code(st, [a], caps, value_width)
        split = any(c.after for c in sc.ops)
        before = bool(sc.hoisted) or st.role == "values" or (st.role == "bitmap" and words > 1)
        out[st.role] = (split, before)
    return out


def program(table: decision.DecisionTable, registers: list[Any], caps: SaluCaps, value_width: int) -> list[StepCode]:
    """The stateful-ALU program of every step of ``table`` on ``registers`` (planner dicts or a Plan's)."""
    arrays = [Array.of(r) for r in registers]
    return [step_code(st, [a for a in arrays if a.role == st.role], caps, value_width) for st in table.steps]


def fields(steps: list[StepCode]) -> list[tuple[str, int]]:
    """The metadata the steps add, each once, in program order."""
    out: dict[str, int] = {}
    for s in steps:
        for n, b in s.fields:
            out.setdefault(n, b)
    return list(out.items())


__all__ = ["Array", "OpCode", "Run", "StepCode", "any_of", "fields", "inputs_of", "outputs_of", "program",
           "step_code", "used_ops", "widths", "BOOLEAN"]
