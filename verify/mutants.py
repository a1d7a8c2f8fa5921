"""Seeded mutants: broken decision tables and worker behaviours the verifier must refute.

Each mutant is a :class:`~p4gen.verify.protocol.ModelConfig` transform.  The
catalogue is a test fixture: ``p4gen verify --mutants`` and
``tests/test_verify_mutants.py`` check that every one is refuted with a
concrete trace from the initial state.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Callable

from p4gen import decision

from .protocol import ModelConfig


def _drop_seen(table: dict[str, Any]) -> dict[str, Any]:
    """Ignore the bitmap: rules for seen=1 vanish, rules for seen=0 match always."""
    t = copy.deepcopy(table)
    for st in t["steps"] + [t["outcome"]]:
        if "seen" not in st.get("keys", []):
            continue
        rules = []
        for r in st["rules"]:
            if r["match"].get("seen") == "1":
                continue
            r["match"].pop("seen", None)
            rules.append(r)
        st["rules"] = rules
    return t


def _set_op(table: dict[str, Any], role: str, old: str, new: str) -> dict[str, Any]:
    t = copy.deepcopy(table)
    for r in decision.step(t, role)["rules"]:
        if r["op"] == old:
            r["op"] = new
    return t


def _complete_seen_drops(table: dict[str, Any]) -> dict[str, Any]:
    t = copy.deepcopy(table)
    for r in t["outcome"]["rules"]:
        if r["action"] == "unicast":
            r["action"], r["stat"] = "drop", "drop_duplicate"
    return t


def _stale_as_current(table: dict[str, Any]) -> dict[str, Any]:
    """Hardened: packets older than the stored chunk are treated like current ones."""
    t = copy.deepcopy(table)
    for st in t["steps"] + [t["outcome"]]:
        rules = []
        for r in st["rules"]:
            if r["match"].get("cmp") == "lt":
                continue
            if r["match"].get("cmp") == "eq":
                r = copy.deepcopy(r)
                r["match"]["cmp"] = "*"
            rules.append(r)
        st["rules"] = rules
    # gt rules must still win over the widened eq rules: move them first
    for st in t["steps"] + [t["outcome"]]:
        st["rules"].sort(key=lambda r: 0 if r["match"].get("cmp") == "gt" else 1)
    return t


@dataclass(frozen=True)
class Mutant:
    name: str
    variant: str
    description: str
    apply: Callable[[ModelConfig], ModelConfig]


CATALOGUE: list[Mutant] = [
    Mutant("no_shadow_copy", "reference", "workers always use copy 0 (no shadow copy)",
           lambda c: replace(c, copy_rule="zero")),
    Mutant("no_bitmap_check", "reference", "the switch adds a contribution even when the worker's bit is set",
           lambda c: replace(c, table=_drop_seen(c.table))),
    Mutant("counter_off_by_one", "reference", "the counter completes after n-1 contributions",
           lambda c: replace(c, counter_delta=-1)),
    Mutant("no_unicast_on_retransmission", "reference",
           "a retransmission to a complete slot is dropped instead of answered by unicast",
           lambda c: replace(c, table=_complete_seen_drops(c.table))),
    Mutant("other_bit_not_cleared", "reference", "the worker's bit in the other copy is not cleared (set, not set_clear)",
           lambda c: replace(c, table=_set_op(c.table, "bitmap", "set_clear", "set"))),
    Mutant("wrong_copy_flip", "reference", "the worker flips the copy on every send, retransmissions included",
           lambda c: replace(c, copy_rule="toggle")),
    Mutant("unlabelled_results", "reference", "results are not labelled with the chunk (workers accept any result)",
           lambda c: replace(c, label_check=False)),
    Mutant("exponent_last_writer", "reference",
           "the exponent register keeps the last contribution's exponent (write, not max)",
           lambda c: replace(c, table=_set_op(c.table, "exponent", "max", "write"))),
    Mutant("hardened_no_bitmap_check", "hardened", "hardened: contributions are added even when the bit is set",
           lambda c: replace(c, table=_drop_seen(c.table))),
    Mutant("hardened_no_stale_drop", "hardened", "hardened: packets for an older chunk are treated as current",
           lambda c: replace(c, table=_stale_as_current(c.table))),
]


def mutant_config(m: Mutant, n: int, slots: int = 512, value_width: int = 32,
                  table: dict[str, Any] | None = None) -> ModelConfig:
    """``m`` applied to ``table`` (a plan's decision of variant ``m.variant``; default: the built-in one)."""
    base = ModelConfig(n=n, table=table if table is not None else decision.decision_table(m.variant),
                       fifo=(m.variant == "reference"), slots=slots, value_width=value_width)
    return m.apply(base)
