"""The control-plane config file of the software switch (``--config control.json``), checked for shape.

::

    {"tables": {"workers": [{"match": {...}, "action": "set_worker", "params": {...}}, ...], ...},
     "groups": {"7": [[port, rid], ...], ...}}

:func:`parse_config` checks every level of the document (types, keys,
integers) and names the first bad item by its path, e.g.
``control-plane config 'c.json': tables.workers[2].match must be an object``;
values themselves (widths, table and action names) are checked by the
model as it applies them.  Nothing here imports the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import P4genError
from ..fileread import load_json

_ENTRY_KEYS = ("match", "action", "params")


class ConfigError(P4genError):
    """A control-plane config is unreadable or not of the documented shape."""


def _int(value: Any, where: str, lo: int, hi: int, fail) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise fail(f"{where}={value!r} must be an integer in {lo}..{hi}")
    return value


def parse_config(cfg: Mapping[str, Any] | str | Path, source: str | None = None):
    """(groups, entries) of a config: [(mgid, [(port, rid), ...])], [(table, match, action, params)]."""
    if isinstance(cfg, (str, Path)):
        source = source or f"control-plane config {str(cfg)!r}"
        cfg = load_json(cfg, "control-plane config", ConfigError)
    source = source or "control-plane config"

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"{source}: {msg}")

    if not isinstance(cfg, Mapping):
        raise fail(f"must be a JSON object with 'tables' and 'groups', not {type(cfg).__name__}")
    unknown = sorted(set(cfg) - {"tables", "groups"})
    if unknown:
        raise fail(f"unknown section {unknown[0]!r}; sections: groups, tables")
    groups_doc = cfg.get("groups", {})
    tables_doc = cfg.get("tables", {})
    for name, doc in (("groups", groups_doc), ("tables", tables_doc)):
        if not isinstance(doc, Mapping):
            raise fail(f"{name} must be an object, not {type(doc).__name__}")
    groups = []
    for key, reps in groups_doc.items():
        if isinstance(key, str) and key.isascii() and key.isdigit():
            key = int(key)
        if isinstance(key, bool) or not isinstance(key, int):
            raise fail(f"groups key {key!r} must be a multicast group id (a decimal integer)")
        mgid = _int(key, f"groups.{key}", 1, 65535, fail)
        if not isinstance(reps, list):
            raise fail(f"groups.{key} must be a list of [port, rid] pairs")
        pairs = []
        for i, r in enumerate(reps):
            if not isinstance(r, list) or len(r) != 2:
                raise fail(f"groups.{key}[{i}]={r!r} must be a [port, rid] pair")
            pairs.append((_int(r[0], f"groups.{key}[{i}].port", 0, 511, fail),
                          _int(r[1], f"groups.{key}[{i}].rid", 0, 65535, fail)))
        groups.append((mgid, pairs))
    entries = []
    for table, rows in tables_doc.items():
        if not isinstance(rows, list):
            raise fail(f"tables.{table} must be a list of entries")
        for i, e in enumerate(rows):
            where = f"tables.{table}[{i}]"
            if not isinstance(e, Mapping):
                raise fail(f"{where} must be an object with match, action and params")
            extra = sorted(set(e) - set(_ENTRY_KEYS))
            if extra:
                raise fail(f"{where} has an unknown key {extra[0]!r}; keys: {', '.join(_ENTRY_KEYS)}")
            if not isinstance(e.get("action"), str):
                raise fail(f"{where}.action must be an action name (a string)")
            for part in ("match", "params"):
                if not isinstance(e.get(part, {}), Mapping):
                    raise fail(f"{where}.{part} must be an object")
            entries.append((table, dict(e.get("match", {})), e["action"], dict(e.get("params", {}))))
    return groups, entries
