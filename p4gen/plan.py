"""The Plan IR: everything downstream of the planner reads this, and only this.

A Plan is a JSON document (``plan.json``) with a versioned schema.  It
holds the normalised spec, the target profile, the header layout, the
register arrays and their stages, the P4 tables and their P4Runtime IDs,
the decision table and the resource table.  Emitters, the software data
plane, the verifier and the controller all take a :class:`Plan`.

The decision logic is stored twice, for readers of plan.json: the rules
(``decision``) and their expansion into the ``dt_*`` const-entry tables
(``tables``).  A :class:`Plan` is only ever made of a plan whose ``tables``
are exactly the expansion of its ``decision`` (``p4gen.decision.p4_tables``),
so the P4 program, the P4Info, the model, the verifier and the controller
all read one decision; an edited table is refused with one line.  To change
the decision of a plan, use :meth:`Plan.with_decision`, which re-derives
the tables.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PlanError
from .files import parse_json, read_text

SCHEMA = "p4gen.plan/1"

# the top-level keys of plan.json and their JSON types; every list holds objects
_REQUIRED: dict[str, type] = {
    "schema": str, "generator": dict, "spec": dict, "target": dict, "protocol": str, "variant": str,
    "params": dict, "headers": list, "metadata": list, "registers": list, "stages": list, "tables": list,
    "actions": list, "counters": list, "decision": dict, "resources": dict, "p4names": dict,
}
_JSON_TYPE = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
              bool: "a boolean", type(None): "null"}


@dataclass(frozen=True)
class Plan:
    data: dict[str, Any]
    source: str = "plan"

    def __post_init__(self) -> None:
        if "decision" in self.data or "tables" in self.data:
            check_decision(self.data, self.source)

    def with_decision(self, table: dict[str, Any]) -> "Plan":
        """This plan with ``table`` as its decision and the ``dt_*`` tables re-derived from it.

        The table's steps must be those of this plan (the same step names:
        other steps need other registers, i.e. a new ``p4gen build``).  The
        P4Runtime IDs of the tables and actions are kept.
        """
        from . import decision as dmod

        data = copy.deepcopy(self.data)
        table = copy.deepcopy(dict(table))
        table.setdefault("protocol", data.get("protocol", "switchml"))
        try:
            dmod.validate(table)
            new_tables, new_actions = dmod.p4_tables(table, data["params"]["op_codes"])
        except (KeyError, LookupError, TypeError, ValueError) as exc:
            raise PlanError(f"the decision table is not valid: {exc}") from None
        old_t = {t["name"]: t for t in data["tables"]}
        old_a = {a["name"]: a for a in data["actions"]}
        if {t["name"] for t in new_tables} != {n for n in old_t if n.startswith("dt_")}:
            raise PlanError(f"the decision table's steps ({', '.join(s['name'] for s in table['steps'])}) are not "
                            f"those of this plan ({', '.join(s['name'] for s in self.decision['steps'])}); "
                            f"other steps need a new layout: run p4gen build")
        for new, old in [(t, old_t[t["name"]]) for t in new_tables] + [(a, old_a[a["name"]]) for a in new_actions]:
            pid = old.get("id")
            old.clear()
            old.update(new, id=pid)
        data["decision"] = table
        return Plan(data, self.source)

    # -- convenient views -------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        return self.data["params"]

    @property
    def target(self) -> dict[str, Any]:
        return self.data["target"]

    @property
    def arch(self) -> str:
        return self.data["target"]["arch"]

    @property
    def variant(self) -> str:
        return self.data["variant"]

    @property
    def decision(self) -> dict[str, Any]:
        return self.data["decision"]

    def header(self, name: str) -> dict[str, Any]:
        for h in self.data["headers"]:
            if h["name"] == name:
                return h
        raise KeyError(name)

    def registers(self, role: str) -> list[dict[str, Any]]:
        return [r for r in self.data["registers"] if r["role"] == role]

    def table(self, name: str) -> dict[str, Any]:
        for t in self.data["tables"]:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def action(self, name: str) -> dict[str, Any]:
        for a in self.data["actions"]:
            if a["name"] == name:
                return a
        raise KeyError(name)

    def counter(self, name: str) -> dict[str, Any]:
        for c in self.data["counters"]:
            if c["name"] == name:
                return c
        raise KeyError(name)

    # -- serialisation ----------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "plan.json") -> "Plan":
        data = parse_json(text, source, PlanError)
        if not isinstance(data, dict):
            raise PlanError(f"{source} must hold a JSON object")
        if data.get("schema") != SCHEMA:
            raise PlanError(f"{source} has schema {data.get('schema')!r}; this p4gen reads {SCHEMA!r}")
        for key, kind in _REQUIRED.items():
            if key not in data:
                raise PlanError(f"{source} lacks the key {key!r}")
            _check_type(source, key, data[key], kind)
            if kind is list:
                for i, item in enumerate(data[key]):
                    _check_type(source, f"{key}[{i}]", item, dict)
        return cls(data, source)

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        p = Path(path)
        if p.is_dir():
            p = p / "plan.json"
        if not p.exists():
            raise PlanError(f"{str(p)!r} does not exist (run p4gen build first)")
        return cls.from_json(read_text(p, "plan", PlanError), str(p))


def _check_type(source: str, where: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise PlanError(f"{source}: {where} must be {_JSON_TYPE[kind]}, not {_JSON_TYPE.get(type(value), 'that')}")


def check_decision(data: dict[str, Any], source: str = "plan") -> None:
    """Refuse (PlanError, one line) a plan whose ``dt_*`` tables are not the expansion of its ``decision``."""
    from . import decision as dmod

    try:
        why = dmod.p4_tables_mismatch(data)
    except (KeyError, LookupError, TypeError, ValueError, AttributeError) as exc:
        why = (f"the key {exc.args[0]!r} is missing" if type(exc) is KeyError and exc.args
               else str(exc).strip() or exc.__class__.__name__)
        raise PlanError(f"{source} has no valid decision table: {why}") from None
    if why is not None:
        raise PlanError(f"{source}: {why}; the dt_* tables are derived from 'decision': edit only 'decision' "
                        f"and re-derive them (Plan.with_decision), or rebuild with p4gen build")
