"""The register arrays of a build, derived from its decision table: one role per step, one shape per role.

Every step of a decision table names a register role (``p4gen.ops.OPS``); :data:`ROLES` says what the
arrays of a role look like: how many (the bitmap: one per 32 workers; the values: one per register pair
of a pass), their lanes and lane width, and what indexes them (the slot, or the slot and its copy, or
the slot, copy and pass).  :func:`register_arrays` lays out the arrays of a table's steps, in the order
of ``p4gen.ops``' roles (which fixes their P4Runtime ids); stages are placed afterwards
(:mod:`p4gen.planner.placement`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from . import ops
from .decision import DecisionTable

BITMAP_WORD_BITS = 32
COUNTER_BITS = 32
CHUNK_BITS = 32
EXPONENT_BITS = 8
MINNEXT_BITS = 32


@dataclass(frozen=True)
class Geometry:
    """What the register shapes depend on: slots, workers, values of a pass and how passes share arrays."""
    slots: int
    max_workers: int
    value_width: int
    per_pass: int
    lanes: int
    pass_bits: int
    pipes: int


@dataclass(frozen=True)
class Role:
    """The arrays of one register role: ``arrays(g)`` their names and extra fields, and their shape."""
    arrays: Callable[[Geometry], list[tuple[str, dict[str, Any]]]]
    lane_bits: Callable[[Geometry], int]
    lanes: Callable[[Geometry], int]
    index: Callable[[Geometry], tuple[int, str]]      # (entries, what indexes them)


def _slot_copy(g: Geometry) -> tuple[int, str]:
    return 2 * g.slots, "slot_copy"


def _one(name: str) -> Callable[[Geometry], list[tuple[str, dict[str, Any]]]]:
    return lambda g: [(name, {})]


def _values_index(g: Geometry) -> tuple[int, str]:
    # folded passes: each pipe holds its own copy of the value arrays, indexed by (slot, copy)
    return (2 * g.slots, "slot_copy") if g.pipes > 1 else (2 * g.slots << g.pass_bits, "slot_copy_pass")


ROLES: dict[str, Role] = {
    "chunk": Role(_one("chunk"), lambda g: CHUNK_BITS, lambda g: 1, _slot_copy),
    # all words of one copy live in one stage (the step's arrays share a stage); lo = copy 0, hi = copy 1
    "bitmap": Role(lambda g: [(f"bitmap{i}", {"word": i}) for i in range(math.ceil(g.max_workers / BITMAP_WORD_BITS))],
                   lambda g: BITMAP_WORD_BITS, lambda g: 2, lambda g: (g.slots, "slot")),
    "counter": Role(_one("worker_count"), lambda g: COUNTER_BITS, lambda g: 1, _slot_copy),
    "exponent": Role(_one("exponent"), lambda g: EXPONENT_BITS, lambda g: 1, _slot_copy),
    "values": Role(lambda g: [(f"values{j}", {"elements": [j * g.lanes + i for i in range(g.lanes)]})
                              for j in range(g.per_pass // g.lanes)],
                   lambda g: g.value_width, lambda g: g.lanes, _values_index),
    "minnext": Role(_one("minnext"), lambda g: MINNEXT_BITS, lambda g: 1, _slot_copy),
}
assert set(ROLES) == set(ops.OPS), "every register role of p4gen.ops needs a shape"


def register_arrays(table: DecisionTable, g: Geometry) -> list[dict[str, Any]]:
    """The register arrays of ``table``'s steps (planner dicts: name, role, entries, lane_bits, lanes,
    entry_bits, index and the role's extra fields), without stages, in ``p4gen.ops`` role order."""
    steps = set(table.roles)
    regs = []
    for role in ops.OPS:
        if role not in steps:
            continue
        spec = ROLES[role]
        entries, index = spec.index(g)
        bits, lanes = spec.lane_bits(g), spec.lanes(g)
        for name, extra in spec.arrays(g):
            regs.append({"name": name, "role": role, "entries": entries, "lane_bits": bits, "lanes": lanes,
                         "entry_bits": bits * lanes, "index": index, **extra})
    return regs


def arrays_of(table: DecisionTable, g: Geometry, role: str) -> int:
    """How many arrays role ``role`` has (0 when the table has no such step)."""
    return len(ROLES[role].arrays(g)) if role in table.roles else 0
