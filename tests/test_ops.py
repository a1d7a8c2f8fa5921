"""Register-operation semantics (exact examples) and their presence in both templates."""

from __future__ import annotations

import re

import pytest

from p4gen import ops
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


@pytest.mark.parametrize("target", ["tofino", "bmv2"])
@pytest.mark.parametrize("protocol,variant", [("switchml", "hardened"), ("switchml", "reference"),
                                              ("omnireduce", "hardened")])
def test_every_op_in_the_table_is_rendered(target, protocol, variant):
    plan = make_plan(make_spec(slots=16, protocol=protocol, variant=variant), load_target(target))
    p4 = render_p4(plan)
    for step in plan.decision.steps:
        for rule in step.rules:
            const = f"OP_{step.role}_{rule.op}".upper()
            code = plan.codes.op(step.role, rule.op)
            # every op's code reaches the program through its table entry
            table = plan.table(f"dt_{step.name}")
            assert any(e.args["op"] == code for e in table.entries)
            if rule.op != "nop" and (step.role, rule.op) != ("values", "read"):
                assert f"const bit<8> {const} = {code};" in p4
                # (values "read" is the fall-through branch of every value register)
                # used in a branch of the program, not just declared
                assert re.search(rf"meta\.{step.role}_op (==|!=) {const}\)", p4), (step.role, rule.op)
