"""The protocol proofs read what an op does from its definition in p4gen.ops, never from its name.

An accumulating op added to ``p4gen.ops`` (here: ``accumulate``, the sum under another name, and
``store``, the write under another name) is covered by the copy-reuse obligation exactly as ``add`` and
``write`` are: the no-shadow-copy mutant of a table that uses them is refuted by ``copy_reuse`` in the
same four events.  Were "contributes" decided by the op's name, those steps would take nothing into the
copy as far as the proof knows, and the obligation would hold vacuously.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from p4gen import ops
from p4gen.verify.explore import bmc
from p4gen.verify.mutants import base_model, set_op
from p4gen.verify.slotmodel import changes_sum


@pytest.fixture
def accumulating_ops(monkeypatch):
    defined = ops.values_op

    def values_op(op, stored, pkt, bits, A=ops.INT):
        if op == "accumulate":
            s = A.add(stored, pkt, bits)
            return s, s
        if op == "store":
            return pkt, pkt
        return defined(op, stored, pkt, bits, A)

    monkeypatch.setattr(ops, "values_op", values_op)
    monkeypatch.setitem(ops.OPS["values"], "accumulate", "add the packet's values under another name")
    monkeypatch.setitem(ops.OPS["values"], "store", "store the packet's values under another name")


def test_what_an_op_does_to_the_sum_is_read_from_its_definition(accumulating_ops):
    assert [op for op in ops.OPS["values"] if changes_sum(op)] == ["write", "add", "clear", "accumulate", "store"]
    assert not changes_sum("read") and not changes_sum("nop") and not changes_sum(None)


def test_copy_reuse_covers_an_accumulating_op(accumulating_ops):
    model = base_model("omnireduce")
    table = set_op(set_op(model.table, "values", "add", "accumulate"), "values", "write", "store")
    assert {r.op for r in table.step("values").rules} >= {"accumulate", "store"}
    assert not {r.op for r in table.step("values").rules} & {"add", "write"}
    mutant = replace(model, table=table, copy_rule="zero")          # workers run every round on copy 0
    cex = bmc(mutant, 2, 6)
    assert cex is not None and cex.prop == "copy_reuse" and cex.steps == 4, "\n".join(cex.format()) if cex else None
