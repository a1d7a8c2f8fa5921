"""The Plan IR: everything downstream of the planner reads this, and only this.

A Plan is a JSON document (``plan.json``) with a versioned schema.  It
holds the normalised spec, the target profile, the header layout, the
register arrays and their stages, the P4 tables and their P4Runtime IDs,
the decision table and the resource table.  Emitters, the software data
plane, the verifier and the controller all take a :class:`Plan`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import PlanError

SCHEMA = "p4gen.plan/1"

_REQUIRED = ("schema", "generator", "spec", "target", "protocol", "variant", "params",
             "headers", "metadata", "registers", "stages", "tables", "actions", "counters",
             "decision", "resources", "p4names")


@dataclass(frozen=True)
class Plan:
    data: dict[str, Any]

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
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"{source} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise PlanError(f"{source} must hold a JSON object")
        if data.get("schema") != SCHEMA:
            raise PlanError(f"{source} has schema {data.get('schema')!r}; this p4gen reads {SCHEMA!r}")
        for key in _REQUIRED:
            if key not in data:
                raise PlanError(f"{source} lacks the key {key!r}")
        return cls(data)

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        p = Path(path)
        if p.is_dir():
            p = p / "plan.json"
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PlanError(f"{str(p)!r} does not exist (run p4gen build first)") from None
        except OSError as exc:
            raise PlanError(f"{str(p)!r} cannot be read: {exc.__class__.__name__}") from None
        return cls.from_json(text, str(p))
