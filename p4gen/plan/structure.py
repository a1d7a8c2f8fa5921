"""One meaning per name: a plan's program parts must be those p4gen writes for its spec and target.

The P4 program reads an action's parameters and a table's keys by name, a P4Runtime client and server
by their IDs, and the switch by name into its own order; a header's fields, a register's size and a
table's size are read by all of them.  A plan whose ``set_worker`` lists its parameters in another
order, or whose register has another size, would therefore mean one thing to one reader and another
to the next.  :func:`check_structure` refuses such a plan with one line that names the first place
where it differs from what :mod:`p4gen.program` (the functions the planner writes plans with) gives
for the plan's spec, target, variant and pass layout.  The ``dt_*`` tables and their actions are the
decision's expansion, which :func:`p4gen.plan.check_decision` checks.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .. import protocols
from ..decision import DERIVED
from ..pass_shape import PASS_MODES, PassShape, shape_problem
from ..program import expected_parts

_MISSING = object()
_IDS = ("tables", "actions", "counters", "registers")        # the kinds of object with a P4Runtime ID


def plain(obj: Any) -> Any:
    """A typed plan part as plan.json holds it (fields that are None by default left out)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not (getattr(obj, f.name) is None and f.default is None)}
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return [plain(x) for x in obj]
    return obj


def _first_diff(have: Any, want: Any, path: str) -> tuple[str, Any, Any] | None:
    """(where, what the plan has, what p4gen writes) of the first difference, or None."""
    if isinstance(have, dict) and isinstance(want, dict):
        for k in list(want) + [k for k in have if k not in want]:
            d = _first_diff(have.get(k, _MISSING), want.get(k, _MISSING), f"{path}.{k}")
            if d is not None:
                return d
        return None
    if isinstance(have, list) and isinstance(want, list):
        for i, (h, w) in enumerate(zip(have, want)):
            named = isinstance(h, dict) and isinstance(w, dict) and "name" in w and h.get("name") == w["name"]
            d = _first_diff(h, w, f"{path}.{w['name']}" if named else f"{path}[{i}]")
            if d is not None:
                return d
        if len(have) != len(want):
            return f"{path} has {len(have)} entries", None, f"{len(want)}"
        return None
    if have == want and type(have) is type(want):
        return None
    return path, have, want


def _say(diff: tuple[str, Any, Any]) -> str:
    where, have, want = diff
    if have is None and isinstance(want, str) and where.endswith("entries"):
        return f"{where}; p4gen writes {want} for this spec and target"
    if have is _MISSING:
        return f"{where} is missing; p4gen writes {want!r} for this spec and target"
    if want is _MISSING:
        return f"{where} is not part of a plan p4gen writes for this spec and target"
    return f"{where} is {have!r}; p4gen writes {want!r} for this spec and target"


def _by_name(items: list[dict], skip: tuple[str, ...] = ()) -> dict[str, dict]:
    return {d["name"]: {k: v for k, v in d.items() if k not in skip} for d in items}


def structure_problem(plan) -> str | None:
    """Where ``plan`` (a :class:`p4gen.plan.Plan`) differs from what p4gen writes for its spec and target
    (one line), or None."""
    p, profile, spec = plan.params, plan.target, plan.spec
    if p.pass_mode not in PASS_MODES:
        return f"params.pass_mode is {p.pass_mode!r}; p4gen writes one of {', '.join(PASS_MODES)}"
    why = shape_problem(profile, PassShape(p.passes, p.pass_mode, p.pass_pipes), p.elements_per_packet)
    if why:
        return f"params: {why}"
    for name, have, want in (("spec.variant", spec.variant, plan.variant),
                             ("spec.elements_per_packet", spec.elements_per_packet, p.elements_per_packet)):
        if have != want:
            return f"{name} is {have!r}; p4gen writes the plan's {want!r}"
    want = expected_parts(spec, profile, protocols.decision_table(plan.variant, plan.protocol), slots=spec.slots,
                          elements=p.elements_per_packet, passes=p.passes, mode=p.pass_mode, pipes=p.pass_pipes)
    have_params = {k: v for k, v in plain(p).items()}
    derived = {t.name for t in plan.tables if t.name.startswith(DERIVED)}
    dt_actions = {a for t in plan.tables if t.name in derived for a in t.actions + (t.default_action,)}
    have_tables = _by_name([plain(t) for t in plan.tables if t.name not in derived], ("id",))
    for t in have_tables.values():
        if not t["const"] and not t["entries"]:
            del t["entries"]
    sections = [
        ("params", have_params, want["params"]),
        ("headers", [header_dict(h) for h in plan.headers], want["headers"]),
        ("metadata", plain(plan.metadata), want["metadata"]),
        ("registers", _by_name(plain(plan.registers), ("stage", "sram_blocks", "id")),
         _by_name(want["registers"])),
        ("tables", have_tables, _by_name(want["tables"], ("id",))),
        ("actions", _by_name([plain(a) for a in plan.actions if a.name not in dt_actions], ("id",)),
         _by_name(want["actions"], ("id",))),
        ("counters", _by_name(plain(plan.counters), ("id",)), _by_name(want["counters"], ("id",))),
        ("p4names", plain(plan.p4names), want["p4names"]),
    ]
    for name, have, wanted in sections:
        d = _first_diff(have, wanted, name)
        if d is not None:
            return _say(d)
    for r in plan.registers:
        blocks = profile.sram_blocks_for(r.entries, r.entry_bits) if profile.sram_block_words else 0
        if r.sram_blocks != blocks:
            return f"registers.{r.name}.sram_blocks is {r.sram_blocks}; p4gen writes {blocks} for this target"
        if not 0 <= r.stage < (profile.stages or 1 << 16):
            return f"registers.{r.name}.stage is {r.stage}; {profile.name} has stages 0..{(profile.stages or 1 << 16) - 1}"
    return _ids_problem(plan, want)


def header_dict(h) -> dict:
    """A header as plan.json holds it: ``repeat`` only for the values (or when not 1), ``internal`` only when set."""
    d = plain(h)
    if h.repeat == 1 and h.name != "data":
        d.pop("repeat")
    if not h.internal:
        d.pop("internal")
    return d


def _ids_problem(plan, want: dict[str, Any]) -> str | None:
    """Every P4Runtime ID once, each with the type prefix p4gen gives its kind of object."""
    seen: dict[int, str] = {}
    for kind in _IDS:
        prefix = want[f"{kind}_id_prefix"]
        for obj in getattr(plan, kind):
            if obj.id >> 24 != prefix or not obj.id & 0xFFFFFF:
                return f"{kind}.{obj.name}.id is {obj.id:#x}; p4gen gives {kind} IDs {prefix:#04x}000001 and up"
            if obj.id in seen:
                return f"{kind}.{obj.name}.id {obj.id:#x} is also the ID of {seen[obj.id]}"
            seen[obj.id] = f"{kind}.{obj.name}"
    return None
