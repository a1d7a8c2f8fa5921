"""The register operations the P4 templates render are the ``p4gen.ops`` definitions (proved with Z3).

The TNA template lays each operation out as a ``RegisterAction`` (Tofino's stateful ALUs constrain
their form) dispatched on the op code a decision-table step set; the v1model template as a register
read, modify and write under the same dispatch.  For every step of a rendered program and every op
the program can dispatch there, ``tests/p4_subset.py`` runs the step's code symbolically (registers,
header fields and metadata as free 32/8-bit vectors, the op code fixed) and Z3 proves the register
cells and the step's outputs equal to the ``p4gen.ops`` function over bit-vectors, for all inputs at
the registers' real widths.  Every ``RegisterAction`` of the program must be reached by one of these
checks, and a template that disagrees with ``p4gen.ops`` fails (the last test edits one).

Header-only OmniReduce packets (a block the switch returns without having parsed one) are not
covered: which values a header made valid in the pipeline holds is the target's business.
"""

from __future__ import annotations

import re

import pytest
import z3

from p4_subset import Interpreter, Program, matching_brace, tokens
from p4gen import ops
from p4gen.emit.p4 import render_p4
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target


class BitVecAlgebra:
    """``p4gen.ops.Algebra`` over Z3 bit-vectors of the registers' widths (observation codes: 8 bits)."""

    def ite(self, cond, a, b):
        return (a if cond else b) if isinstance(cond, bool) else z3.If(cond, a, b)

    def eq(self, a, b):
        return a == b

    def ugt(self, a, b):
        return z3.UGT(a, b)

    def add(self, a, b, bits):
        return a + b

    def sub(self, a, b, bits):
        return a - b

    def band(self, a, b):
        return a & b

    def bor(self, a, b):
        return a | b

    def bnot(self, a, bits):
        return ~a

    def const(self, value, bits):
        return z3.BitVecVal(value, bits)

    def ne0(self, a):
        return a != 0

    def false(self):
        return z3.BoolVal(False)


BV = BitVecAlgebra()

CASES = [(target, protocol, variant) for target in ("tofino", "bmv2")
         for protocol, variant in (("switchml", "reference"), ("switchml", "hardened"), ("omnireduce", "hardened"))]


def _plan(target, protocol, variant):
    return make_plan(make_spec(protocol=protocol, variant=variant, slots=4, elements_per_packet=8, max_workers=8),
                     load_target(target))


def _segment(text: str, step: str) -> str:
    """The apply-block code of one decision step: from its table's apply to the next table's; for TNA's
    values step, the block after the outcome that executes the value RegisterActions."""
    start = text.index(f"dt_{step}.apply();") + len(f"dt_{step}.apply();")
    seg = text[start:re.compile(r"dt_\w+\.apply\(\);").search(text, start).start()]
    if step == "values" and "meta.values_op" not in seg:
        i = text.index("if (hdr.agg.isValid() && meta.known == 1 && meta.values_op != OP_VALUES_NOP)")
        seg = text[i:matching_brace(text, text.index("{", i))]
    return seg


def _cell(get, prog: Program, reg: str):
    """A register's cell as its lanes (lo, hi) or its one value."""
    kind = prog.registers[reg]
    if kind[0] != "bit":
        return tuple(get(f"reg:{reg}.{f}") for f in prog.structs[kind[0]])
    v = get(f"reg:{reg}")
    return (z3.Extract(31, 0, v), z3.Extract(63, 32, v)) if kind[1] == 64 else v


def _initial(prog: Program, plan, role: str, op: str) -> dict:
    """State before the step: metadata zero (both architectures start it so) but the fields the apply
    block set before the step, free symbols for headers and registers, the op code of ``op``."""
    state = {k: z3.BitVecVal(0, b) for k, b in prog.widths.items() if k.startswith("meta.")}
    for f in ("copy", "num_workers", "sc_index", "vidx", "slot", "word", "mask", "mask0", "slot_count"):
        state[f"meta.{f}"] = z3.BitVec(f"meta.{f}", prog.widths[f"meta.{f}"])
    state["meta.known"] = z3.BitVecVal(1, 1)
    state[f"meta.{role}_op"] = z3.BitVecVal(plan.codes.op(role, op), 8)   # what the step's table sets
    for r in plan.registers:
        name, kind = r.name, prog.registers[r.name]
        if kind[0] != "bit":
            for f, b in prog.structs[kind[0]].items():
                state[f"reg:{name}.{f}"] = z3.BitVec(f"{name}.{f}", b)
        elif kind[1] == 64:
            state[f"reg:{name}"] = z3.Concat(z3.BitVec(f"{name}.hi", 32), z3.BitVec(f"{name}.lo", 32))
        else:
            state[f"reg:{name}"] = z3.BitVec(name, kind[1])
    return state


def _pairs(plan, role: str, op: str, b, a, prog: Program) -> list:
    """(template value, p4gen.ops value) for every register cell and output of the step; ``b`` and ``a``
    read the state before and after it."""
    regs = [r for r in plan.registers if r.role == role]
    if role == "bitmap":
        copy0 = b("meta.copy") == 0
        out, seen = [], z3.BoolVal(False)
        for r in regs:
            lo, hi = _cell(b, prog, r.name)
            this, other = z3.If(copy0, lo, hi), z3.If(copy0, hi, lo)
            t, u, sn = ops.bitmap_op(op, this, other, b(f"meta.mask{r.word}"), 32, BV)
            out += list(zip(_cell(a, prog, r.name), (z3.If(copy0, t, u), z3.If(copy0, u, t))))
            seen = z3.Or(seen, sn)
        return out + [(a("meta.seen"), z3.If(seen, z3.BitVecVal(1, 8), z3.BitVecVal(0, 8)))]
    if role == "values":
        out = []
        for r in regs:
            for lane, (c0, c1) in enumerate(zip(_cell(b, prog, r.name), _cell(a, prog, r.name))):
                d = f"hdr.data0.d{r.elements[lane]}"
                new, carried = ops.values_op(op, c0, b(d), plan.params.value_width, BV)
                out += [(c1, new), (a(d), carried)]
        return out
    (r,) = regs
    stored, cell = _cell(b, prog, r.name), _cell(a, prog, r.name)
    if role == "chunk":
        # the switch's bound: two of the job's windows
        new, y = ops.chunk_op(op, stored, b("hdr.agg.tsi"), BV, z3.ZeroExt(16, b("meta.slot_count")) << 1)
        return [(cell, new), (a("meta.cmp"), y)]
    if role == "counter":
        new, y = ops.counter_op(op, stored, b("meta.num_workers"), 32, BV)
        return [(cell, new), (a("meta.count"), y)]
    fld, fn = {"exponent": ("hdr.agg.exponent", ops.exponent_op), "minnext": ("hdr.agg.next", ops.minnext_op)}[role]
    new, carried = fn(op, stored, b(fld), BV)
    return [(cell, new), (a(fld), carried)]


def check_program(text: str, plan) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """Prove every (role, op) a rendered program dispatches against p4gen.ops.  Returns a message per
    disagreement (none when all hold) and the (role, op) pairs checked; fails when a RegisterAction is
    reached by no check."""
    prog = Program.parse(text)
    failures, reached, checked = {}, set(), set()

    def reader(state):
        return lambda k: state[k] if k in state else z3.BitVec(k, prog.widths[k])

    for step in plan.decision.steps:
        role = step.role
        seg = tokens(_segment(text, step.name))
        names = {r.name for r in plan.registers if r.role == role}
        for op in ops.OPS[role]:
            # the ops the program lays out here: the table's, nop, any with a code constant or a RegisterAction
            if not (op == "nop" or op in {r.op for r in step.rules} or f"OP_{role.upper()}_{op.upper()}"
                    in prog.consts or any(f"{n}_{op}" in prog.actions for n in names)):
                continue
            checked.add((role, op))
            before = _initial(prog, plan, role, op)
            it = Interpreter(prog, dict(before))
            it.run(seg)
            reached |= it.executed
            solver = z3.Solver()
            solver.add(z3.Or([got != want for got, want in _pairs(plan, role, op, reader(before),
                                                                  reader(it.state), prog)]))
            if solver.check() != z3.unsat:
                failures[(role, op)] = f"{role}.{op} differs from p4gen.ops, e.g. at {solver.model()}"
    missing = set(prog.actions) - reached
    assert not missing, f"RegisterActions no check reached: {sorted(missing)}"
    return failures, checked


@pytest.mark.parametrize("target,protocol,variant", CASES)
def test_every_rendered_register_operation_is_the_ops_definition(target, protocol, variant):
    plan = _plan(target, protocol, variant)
    failures, checked = check_program(render_p4(plan), plan)
    assert failures == {}
    assert {(s.role, r.op) for s in plan.decision.steps for r in s.rules} <= checked


@pytest.mark.parametrize("edit,bad", [
    # TNA: the counter reports last one worker early
    ("            } else if (value + 1 == meta.num_workers) {\n                rv = COUNT_LAST;",
     ("counter", "inc_mod")),
    # TNA: the bitmap RegisterAction forgets to clear the other copy's bit
    ("                value.hi = value.hi & ~meta.mask0;\n", ("bitmap", "set_clear")),
    # TNA: the exponent keeps the smaller exponent
    ("            if (hdr.agg.exponent > value) {\n                value = hdr.agg.exponent;",
     ("exponent", "max")),
])
def test_a_register_action_that_disagrees_with_ops_fails(edit, bad):
    plan = _plan("tofino", "switchml", "reference")
    text = render_p4(plan)
    assert edit in text
    broken = {"counter": lambda s: s.replace("rv = COUNT_LAST;", "rv = COUNT_MID;", 1),
              "bitmap": lambda s: "",
              "exponent": lambda s: s.replace(">", "<", 1)}[bad[0]](edit)
    failures, _checked = check_program(text.replace(edit, broken, 1), plan)
    assert list(failures) == [bad]


def test_a_v1model_operation_that_disagrees_with_ops_fails():
    plan = _plan("bmv2", "switchml", "hardened")
    text = render_p4(plan)
    edit = "                                s0 = s0 + hdr.data0.d0;"
    assert edit in text
    failures, _checked = check_program(text.replace(edit, "                                s0 = s0 + s0;", 1), plan)
    assert list(failures) == [("values", "add")]
