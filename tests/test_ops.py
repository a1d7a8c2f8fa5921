"""Register-operation semantics (exact examples), and every op a table names is an action of its program."""

from __future__ import annotations

import re

import pytest

from p4gen import decision, ops
from p4gen.emit.p4 import render_p4
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target


def test_chunk_advance():
    assert ops.chunk_op("advance", 5, 7) == (7, ops.CMP_GT)
    assert ops.chunk_op("advance", 7, 7) == (7, ops.CMP_EQ)
    assert ops.chunk_op("advance", 7, 5) == (7, ops.CMP_LT)


def test_bitmap_ops():
    # this copy 0b0101, other copy 0b0110, worker bit 0b0100
    assert ops.bitmap_op("set_clear", 0b0101, 0b0110, 0b0100) == (0b0101, 0b0010, True)
    assert ops.bitmap_op("set_clear", 0b0001, 0b0110, 0b1000) == (0b1001, 0b0110, False)
    assert ops.bitmap_op("set", 0b0001, 0b0110, 0b0100) == (0b0101, 0b0110, False)
    assert ops.bitmap_op("reset_set", 0b1111, 0b0110, 0b0100) == (0b0100, 0b0110, False)
    assert ops.bitmap_op("nop", 0b1111, 0b0110, 0b0100) == (0b1111, 0b0110, False)


def test_counter_ops():
    n = 3
    assert ops.counter_op("inc_mod", 0, n) == (1, ops.COUNT_FIRST)
    assert ops.counter_op("inc_mod", 1, n) == (2, ops.COUNT_MID)
    assert ops.counter_op("inc_mod", 2, n) == (0, ops.COUNT_LAST)
    assert ops.counter_op("probe_zero", 0, n) == (0, ops.COUNT_COMPLETE)
    assert ops.counter_op("probe_zero", 2, n) == (2, ops.COUNT_INCOMPLETE)
    assert ops.counter_op("reset_one", 3, n) == (1, ops.COUNT_FIRST)
    assert ops.counter_op("inc_sat", 1, n) == (2, ops.COUNT_MID)
    assert ops.counter_op("inc_sat", 2, n) == (3, ops.COUNT_LAST)
    assert ops.counter_op("inc_sat", 3, n) == (3, ops.COUNT_COMPLETE)
    assert ops.counter_op("probe_full", 3, n) == (3, ops.COUNT_COMPLETE)
    assert ops.counter_op("probe_full", 2, n) == (2, ops.COUNT_INCOMPLETE)


def test_exponent_minnext_and_values_ops():
    assert ops.exponent_op("max", 130, 128) == (130, 130)
    assert ops.exponent_op("max", 120, 128) == (128, 128)
    assert ops.exponent_op("write", 120, 100) == (100, 100)
    assert ops.exponent_op("read", 120, 100) == (120, 120)
    assert ops.exponent_op("nop", 120, 100) == (120, 100)
    assert ops.minnext_op("min", 9, 4) == (4, 4)
    assert ops.minnext_op("min", 3, 4) == (3, 3)
    assert ops.values_op("add", 0xFFFFFFFF, 2, 32) == (1, 1)          # 32-bit wrap-around
    assert ops.values_op("add", 0x7FFF, 1, 16) == (0x8000, 0x8000)
    assert ops.values_op("clear", 77, 5, 32) == (0, 0)
    assert ops.values_op("nop", 77, 5, 32) == (77, 5)


@pytest.mark.parametrize("target", ["tofino", "tofino2", "bmv2"])
@pytest.mark.parametrize("protocol,variant", [("switchml", "hardened"), ("switchml", "reference"),
                                              ("omnireduce", "hardened")])
def test_every_op_in_the_table_is_rendered(target, protocol, variant):
    """Every op a step names is an action of the step's table, declared in the program with its body,
    and an entry of the table runs it (for each copy where the role's lanes are the copies)."""
    plan = make_plan(make_spec(slots=16, protocol=protocol, variant=variant), load_target(target))
    p4 = render_p4(plan)
    for step in plan.decision.steps:
        table = plan.table(f"dt_{step.name}")
        for rule in step.rules:
            touches = decision.touches(step.role, rule.op)
            copies = (0, 1) if decision.copy_keyed(step) and touches else (None,)
            for copy in copies:
                name = decision.step_action(step.name, step.role, rule.op, copy)
                assert any(e.action == name for e in table.entries), name
                body = re.search(rf"action {name}\(\) {{(.*?)\n    }}", p4, re.S)
                assert body is not None, f"action {name} is not in the program"
                if step.role == "values":
                    assert f"meta.values_op = {plan.codes.op('values', rule.op)};" in body.group(1)
                elif touches and target != "bmv2":
                    assert re.search(r"_ra\.execute\(", body.group(1)), name      # runs its RegisterAction
                elif touches:
                    assert re.search(r"\.read\(", body.group(1)), name            # reads its register


def test_no_template_holds_a_register_operation():
    """The templates lay out what p4gen.emit.p4ops prints: no RegisterAction, register access or op
    arithmetic of their own (an op changed in p4gen.ops reaches the program with nothing else edited)."""
    from p4gen.emit.templates import template_sources

    for name, text in template_sources().items():
        assert "RegisterAction" not in text, name
        assert not re.search(r"\.(read|write|execute)\(", text), name
        assert not re.search(r"\bvalue(\.lo|\.hi)?\s*=", text), name
