"""Pass 5, program: the P4 program's tables, actions and counters with their P4Runtime IDs, as
:mod:`p4gen.program` writes them, and its metadata."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..decision import FrozenMap
from ..plan import Action, Counter, Entry, Field, Key, Table, op_codes as ops_op_codes
from ..program import program_metadata, program_objects
from .fit import Fit


def _table(t: dict[str, Any]) -> Table:
    args = t.get("default_args")
    return Table(name=t["name"], scope=t["scope"], size=t["size"], keys=tuple(Key(**k) for k in t["keys"]),
                 actions=tuple(t["actions"]), default_action=t["default_action"], const=t["const"], id=t["id"],
                 default_args=None if args is None else FrozenMap(args),
                 entries=tuple(Entry(FrozenMap(e["match"]), e["action"], FrozenMap(e["args"]), e["comment"])
                               for e in t.get("entries", ())))


def program(fit: Fit) -> Fit:
    """The P4 program's tables, actions and counters, with their P4Runtime IDs (and the registers'), as
    :func:`p4gen.program.program_objects` writes them."""
    regs = [{"name": r.name, "role": r.role, "entries": r.entries, "entry_bits": r.entry_bits} for r in fit.registers]
    tables, actions, counters, p4regs = program_objects(fit.spec, ops_op_codes(), fit.table, regs, fit.profile)
    return dataclasses.replace(
        fit, tables=tuple(_table(t) for t in tables),
        actions=tuple(Action(a["name"], a["scope"], tuple(Field(x["name"], x["bits"]) for x in a["params"]), a["id"])
                      for a in actions),
        counters=tuple(Counter(c["name"], c["scope"], c["size"], c["unit"], tuple(c["indices"]), c["id"])
                       for c in counters),
        registers=tuple(dataclasses.replace(r, id=p["id"]) for r, p in zip(fit.registers, p4regs)))


def metadata(fit: Fit, passes: int, mode: str) -> list[tuple[str, int]]:
    """The program's metadata fields (:func:`p4gen.program.program_metadata`) for ``passes`` in ``mode``."""
    return program_metadata(fit.profile, fit.table, fit.spec, passes, mode)
