"""Seeded mutants: broken decision tables and worker behaviours the verifier must refute.

Each mutant is a transform of a protocol model (:class:`~p4gen.verify.protocol.SwitchML`
or :class:`~p4gen.verify.omni.OmniReduce`): most edit the decision table the
way a developer might slip, a few change what workers do.  The catalogue is
a test fixture: ``p4gen verify --mutants`` applies the mutants of the plan's
protocol and variant to the plan's own table, and ``tests/test_verify_mutants.py``
checks that every one is refuted with a concrete trace from the initial state.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from p4gen import protocols
from p4gen.decision import STANDARD_CODES, STATS, Codes, DecisionTable

from .engine import Model


def _edited(f: Callable[[dict[str, Any]], None]) -> Callable[[DecisionTable], DecisionTable]:
    """A table edit written on the table's JSON form (``f`` changes it in place), as a function of tables."""
    def edit(table: DecisionTable) -> DecisionTable:
        t = table.to_dict()
        f(t)
        return DecisionTable.from_dict(t)
    return edit


def _rules(t: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return next(s for s in t["steps"] if s["role"] == role)["rules"]


def drop_seen(table: DecisionTable) -> DecisionTable:
    """Ignore the bitmap: rules for seen=1 vanish, rules for seen=0 match always."""
    t = table.to_dict()
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
    return DecisionTable.from_dict(t)


def set_op(table: DecisionTable, role: str, old: str, new: str, **match: str) -> DecisionTable:
    """Every ``role`` rule naming ``old`` (and matching ``match``) names ``new`` instead."""
    def f(t):
        for r in _rules(t, role):
            if r["op"] == old and all(r["match"].get(k) == v for k, v in match.items()):
                r["op"] = new
    return _edited(f)(table)


def swap_ops(table: DecisionTable, role: str, a: str, b: str) -> DecisionTable:
    def f(t):
        for r in _rules(t, role):
            r["op"] = {a: b, b: a}.get(r["op"], r["op"])
    return _edited(f)(table)


def set_outcome(table: DecisionTable, old_action: str, action: str, stat: str) -> DecisionTable:
    """Every outcome rule with ``old_action`` becomes (``action``, ``stat``)."""
    def f(t):
        for r in t["outcome"]["rules"]:
            if r["action"] == old_action:
                r["action"], r["stat"] = action, stat
    return _edited(f)(table)


def stale_as_current(table: DecisionTable) -> DecisionTable:
    """Hardened: packets older than the stored chunk are treated like current ones."""
    t = table.to_dict()
    for st in t["steps"] + [t["outcome"]]:
        rules = []
        for r in st["rules"]:
            if r["match"].get("cmp") == "lt":
                continue
            if r["match"].get("cmp") == "eq":
                r["match"]["cmp"] = "*"
            rules.append(r)
        st["rules"] = rules
    # gt rules must still win over the widened eq rules: move them first
    for st in t["steps"] + [t["outcome"]]:
        st["rules"].sort(key=lambda r: 0 if r["match"].get("cmp") == "gt" else 1)
    return DecisionTable.from_dict(t)


def header_only_adds(table: DecisionTable) -> DecisionTable:
    """OmniReduce: the values step adds whatever a packet carries, data header or not."""
    def f(t):
        for r in _rules(t, "values"):
            if r["op"] == "add":
                r["match"]["data"] = "*"
    return _edited(f)(table)


def equal_as_newer(table: DecisionTable) -> DecisionTable:
    """Hardened and OmniReduce: a tsi equal to the copy's chunk is taken as a new chunk (the new-chunk test
    is >=, not >): every step treats cmp=eq as it treats cmp=gt."""
    t = table.to_dict()
    for st in t["steps"] + [t["outcome"]]:
        newer = [dict(copy.deepcopy(r), match={**r["match"], "cmp": "eq"}) for r in st["rules"]
                 if r["match"].get("cmp") == "gt"]
        st["rules"] = newer + st["rules"]
    return DecisionTable.from_dict(t)


def _table(f: Callable[[DecisionTable], DecisionTable]) -> Callable[[Model], Model]:
    return lambda m: replace(m, table=f(m.table))


_REFERENCE = protocols.SWITCHML_REFERENCE.label
_HARDENED = protocols.SWITCHML_HARDENED.label
_OMNIREDUCE = protocols.OMNIREDUCE_HARDENED.label


@dataclass(frozen=True)
class Mutant:
    name: str
    variant: str        # the label of the registry variant whose table it applies to
    description: str
    apply: Callable[[Model], Model]
    n: int = 2          # the worker count the trace needs (a round has a middle contribution from n = 3 on)
    deadlock: bool = False   # the table strands the slot: its trace must end in a deadlock


_ABSORB = lambda t: set_outcome(t, "multicast", "drop", "absorbed")  # noqa: E731
_MULTICAST_ANSWER = lambda t: set_outcome(t, "unicast", "multicast", "multicast")  # noqa: E731
_MID_WRITE = lambda t: set_op(t, "values", "add", "write", count="mid")  # noqa: E731
_SWAP = lambda t: swap_ops(t, "values", "add", "write")  # noqa: E731

CATALOGUE: list[Mutant] = [
    # SwitchML, reference table
    Mutant("no_shadow_copy", _REFERENCE, "workers always use copy 0 (no shadow copy)",
           lambda m: replace(m, copy_rule="zero")),
    Mutant("no_bitmap_check", _REFERENCE, "the switch adds a contribution even when the worker's bit is set",
           _table(drop_seen)),
    Mutant("counter_off_by_one", _REFERENCE, "the counter completes after n-1 contributions",
           lambda m: replace(m, counter_delta=-1)),
    Mutant("no_unicast_on_retransmission", _REFERENCE,
           "a retransmission to a complete slot is dropped instead of answered by unicast",
           _table(lambda t: set_outcome(t, "unicast", "drop", "drop_duplicate"))),
    Mutant("other_bit_not_cleared", _REFERENCE, "the worker's bit in the other copy is not cleared (set, not set_clear)",
           _table(lambda t: set_op(t, "bitmap", "set_clear", "set"))),
    Mutant("wrong_copy_flip", _REFERENCE, "the worker flips the copy on every send, retransmissions included",
           lambda m: replace(m, copy_rule="toggle")),
    Mutant("unlabelled_results", _REFERENCE, "results are not labelled with the chunk (workers accept any result)",
           lambda m: replace(m, label_check=False)),
    Mutant("exponent_last_writer", _REFERENCE,
           "the exponent register keeps the last contribution's exponent (write, not max)",
           _table(lambda t: set_op(t, "exponent", "max", "write"))),
    Mutant("last_absorbed", _REFERENCE, "the last contribution is absorbed instead of multicast",
           _table(_ABSORB)),
    Mutant("retransmission_multicast", _REFERENCE, "the answer to a retransmission is multicast to every worker",
           _table(_MULTICAST_ANSWER)),
    Mutant("mid_write", _REFERENCE, "a mid-round contribution writes instead of adds", _table(_MID_WRITE), 3),
    Mutant("add_write_swapped", _REFERENCE, "the first contribution adds and the later ones write",
           _table(_SWAP)),
    Mutant("counter_never_resets", _REFERENCE,
           "the counter counts up to n and stays there (inc_sat, not inc_mod): it never resets for the copy's next "
           "chunk", _table(lambda t: set_op(t, "counter", "inc_mod", "inc_sat")), deadlock=True),
    # SwitchML, hardened table
    Mutant("hardened_no_bitmap_check", _HARDENED, "hardened: contributions are added even when the bit is set",
           _table(drop_seen)),
    Mutant("hardened_no_stale_drop", _HARDENED, "hardened: packets for an older chunk are treated as current",
           _table(stale_as_current)),
    Mutant("hardened_last_absorbed", _HARDENED, "hardened: the last contribution is absorbed instead of multicast",
           _table(_ABSORB)),
    Mutant("hardened_retransmission_multicast", _HARDENED,
           "hardened: the answer to a retransmission is multicast to every worker", _table(_MULTICAST_ANSWER)),
    Mutant("hardened_mid_write", _HARDENED, "hardened: a mid-round contribution writes instead of adds",
           _table(_MID_WRITE), 3),
    Mutant("hardened_add_write_swapped", _HARDENED, "hardened: the first contribution adds and the later ones write",
           _table(_SWAP)),
    Mutant("hardened_equal_tsi_restarts", _HARDENED,
           "hardened: a tsi equal to the copy's chunk restarts the round (a new chunk needs >=, not >)",
           _table(equal_as_newer), deadlock=True),
    Mutant("hardened_bitmap_set_not_reset", _HARDENED,
           "hardened: a new chunk sets the worker's bit without clearing the others' (set, not reset_set)",
           _table(lambda t: set_op(t, "bitmap", "reset_set", "set", cmp="gt")), deadlock=True),
    Mutant("hardened_new_chunk_not_counted", _HARDENED,
           "hardened: the counter row of a new chunk is the stale one (nop, not reset_one)",
           _table(lambda t: set_op(t, "counter", "reset_one", "nop", cmp="gt")), deadlock=True),
    Mutant("hardened_counter_never_counts", _HARDENED,
           "hardened: a contribution for the current chunk only probes the counter (probe_full, not inc_sat)",
           _table(lambda t: set_op(t, "counter", "inc_sat", "probe_full")), deadlock=True),
    Mutant("hardened_unbounded_advance", _HARDENED,
           "hardened: a newer tsi moves the copy on however far ahead it is (advance, not advance_window)",
           _table(lambda t: set_op(t, "chunk", "advance_window", "advance"))),
    # OmniReduce
    Mutant("omni_minnext_last_writer", _OMNIREDUCE, "the minnext register keeps the last packet's offset (write, not min)",
           _table(lambda t: set_op(t, "minnext", "min", "write"))),
    Mutant("omni_header_only_adds", _OMNIREDUCE, "a header-only packet is added to the sum (values add when data=0)",
           _table(header_only_adds)),
    Mutant("omni_no_shadow_copy", _OMNIREDUCE, "workers run every round on copy 0 (no shadow copy)",
           lambda m: replace(m, copy_rule="zero")),
    Mutant("omni_header_only_first_writes", _OMNIREDUCE,
           "a header-only first packet stores what it carries (write, not clear)",
           _table(lambda t: set_op(t, "values", "clear", "write"))),
    Mutant("omni_no_bitmap_check", _OMNIREDUCE, "the switch takes a packet even when the worker's bit is set",
           _table(drop_seen)),
    Mutant("omni_last_absorbed", _OMNIREDUCE, "the round's last packet is absorbed instead of multicast",
           _table(_ABSORB)),
    Mutant("omni_retransmission_multicast", _OMNIREDUCE,
           "the answer to a retransmission is multicast to every worker", _table(_MULTICAST_ANSWER)),
    Mutant("omni_mid_write", _OMNIREDUCE, "a mid-round block writes instead of adds", _table(_MID_WRITE), 3),
    Mutant("omni_unbounded_advance", _OMNIREDUCE,
           "a newer tsi moves the copy's round on however far ahead it is (advance, not advance_window)",
           _table(lambda t: set_op(t, "chunk", "advance_window", "advance"))),
    Mutant("omni_equal_tsi_restarts", _OMNIREDUCE,
           "a tsi equal to the copy's round restarts the round (a new round needs >=, not >)",
           _table(equal_as_newer), deadlock=True),
    Mutant("omni_bitmap_set_not_reset", _OMNIREDUCE,
           "a new round sets the worker's bit without clearing the others' (set, not reset_set)",
           _table(lambda t: set_op(t, "bitmap", "reset_set", "set", cmp="gt")), deadlock=True),
]

def _variants() -> dict[str, protocols.Variant]:
    return {v.label: v for name in protocols.protocol_names() for v in protocols.variants(name)}


VARIANTS = tuple(_variants())
"""The labels of the registry's variants (``reference``, ``hardened``, ``omnireduce``)."""


def model_class(variant: protocols.Variant) -> type:
    """The verifier's model a registry variant names (``module:Class``)."""
    module, _, name = variant.model.partition(":")
    return getattr(importlib.import_module(module), name)


def base_model(variant: protocols.Variant | str, table: DecisionTable | None = None, slots: int = 512,
               codes: Codes = STANDARD_CODES, stats: tuple[str, ...] = tuple(STATS)) -> Model:
    """The model of a variant's table (``variant``: a registry variant or its label; ``table``: a plan's
    decision of that variant, with the plan's ``codes`` and ``stats``; default: the variant's own table)."""
    v = variant if isinstance(variant, protocols.Variant) else _variants()[variant]
    cls = model_class(v)
    kwargs: dict[str, Any] = {"slots": slots, "codes": codes, "stats": stats}
    if "fifo" in {f.name for f in fields(cls)}:
        kwargs["fifo"] = v.fifo
    return cls(table if table is not None else v.table, **kwargs)


def mutant_model(m: Mutant, table: DecisionTable | None = None, slots: int = 512, codes: Codes = STANDARD_CODES,
                 stats: tuple[str, ...] = tuple(STATS)) -> Model:
    return m.apply(base_model(m.variant, table, slots, codes, stats))


def of_variant(variant: protocols.Variant | str) -> list[Mutant]:
    label = variant.label if isinstance(variant, protocols.Variant) else variant
    return [m for m in CATALOGUE if m.variant == label]
