"""A build directory as the controller sees it, and P4Info comparison.

``load_build(DIR)`` reads ``plan.json`` (the source of every ID), the
P4Info to push and the device config: BMv2's JSON (``program.json``, written
by ``p4gen build --compile``) when present, else empty bytes, which is what
the software data plane expects.  When p4c wrote its own P4Info
(``p4info.p4c.txtpb``) it is pushed with the JSON it belongs to.

:func:`p4info_diff` compares two P4Infos by ID and shape (key and parameter
widths, sizes).  The software switch's server uses it to refuse a foreign
pipeline; the controller uses it to refuse to program a switch that runs
another program than the plan describes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from ..emit.p4info import build_p4info
from ..errors import PlanError
from ..files import parse_json, read_text
from ..plan import Plan

DEVICE_CONFIG = "program.json"
P4INFO = "p4info.txt"
P4INFO_P4C = "p4info.p4c.txtpb"


@dataclass(frozen=True)
class Build:
    path: Path
    plan: Plan
    p4info: p4info_pb2.P4Info
    device_config: bytes

    @property
    def device_config_name(self) -> str:
        return DEVICE_CONFIG if self.device_config else "none (software data plane)"


def _read_p4info(path: Path) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text = read_text(path, "P4Info", PlanError)
    try:
        text_format.Parse(text, info)
    except text_format.ParseError as exc:
        raise PlanError(f"{str(path)!r} is not a text-format P4Info: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise PlanError(f"{str(path)!r} nests messages too deeply") from None
    return info


def read_device_config(path: Path) -> bytes:
    """BMv2's JSON (p4c-bm2-ss output), checked to be one: a JSON object with its ``pipelines``."""
    text = read_text(path, "device config", PlanError)
    doc = parse_json(text, f"device config {str(path)!r}", PlanError)
    if not isinstance(doc, dict) or not isinstance(doc.get("pipelines"), list):
        raise PlanError(f"device config {str(path)!r} is not BMv2 JSON (a p4c-bm2-ss output has a 'pipelines' "
                        f"list); rebuild with p4gen build --compile or remove it")
    return text.encode("utf-8")


def load_build(path: str | Path) -> Build:
    """Plan, P4Info and device config of a ``p4gen build`` output directory."""
    d = Path(path)
    if not d.is_dir():
        raise PlanError(f"build directory {str(d)!r} does not exist (run p4gen build first)")
    plan = Plan.load(d)
    expected = build_p4info(plan)
    dev = d / DEVICE_CONFIG
    device_config = read_device_config(dev) if os.path.lexists(dev) else b""
    p4c = d / P4INFO_P4C
    name = P4INFO_P4C if device_config and p4c.is_file() else P4INFO
    if not (d / name).is_file():
        raise PlanError(f"{str(d / name)!r} does not exist (run p4gen build first)")
    info = _read_p4info(d / name)
    diff = p4info_diff(expected, info, strict=(name == P4INFO))
    if diff:
        raise PlanError(f"{str(d / name)!r} does not match plan.json in the same directory: {diff}")
    return Build(d, plan, info, device_config)


def _shape(info: p4info_pb2.P4Info) -> dict[str, dict[int, tuple[str, tuple]]]:
    """kind -> id -> (name, shape) for the objects the controller writes or reads."""
    out: dict[str, dict[int, tuple[str, tuple]]] = {"table": {}, "action": {}, "counter": {}, "register": {}}
    for t in info.tables:
        keys = tuple((m.name, m.bitwidth, m.match_type) for m in t.match_fields)
        out["table"][t.preamble.id] = (t.preamble.name, (("keys", keys),
                                                         ("actions", tuple(sorted(a.id for a in t.action_refs))),
                                                         ("size", t.size)))
    for a in info.actions:
        out["action"][a.preamble.id] = (a.preamble.name, (("params", tuple((p.name, p.bitwidth) for p in a.params)),))
    for c in info.counters:
        out["counter"][c.preamble.id] = (c.preamble.name, (("size", c.size), ("unit", c.spec.unit)))
    for r in info.registers:
        out["register"][r.preamble.id] = (r.preamble.name, (("size", r.size),
                                                            ("bits", r.type_spec.bitstring.bit.bitwidth)))
    return out


def _describe(field: str, value) -> str:
    if field == "keys":
        return "keys " + (", ".join(f"{n}:{b}" for n, b, _ in value) or "none")
    if field == "params":
        return "params " + (", ".join(f"{n}:{b}" for n, b in value) or "none")
    if field == "actions":
        return "action ids " + ",".join(str(a) for a in value)
    return f"{field} {value}"


def p4info_diff(expected: p4info_pb2.P4Info, actual: p4info_pb2.P4Info, strict: bool = True,
                ref: str = "the plan") -> str | None:
    """The first difference between two P4Infos (by ID and shape), or None.

    With ``strict=False`` (``actual`` comes from p4c), objects that only ``actual`` has are allowed
    (p4c adds a few the plan does not list), and the size of a table ``expected`` marks const is not
    compared.  ``ref`` names ``expected`` in the message.
    """
    want, got = _shape(expected), _shape(actual)
    # a const table's entries are fixed by the program, which declares no size for it: p4c gives it
    # its default size (1024), and the controller never writes into it
    fixed = set() if strict else {t.preamble.id for t in expected.tables if t.is_const_table}
    for kind in ("table", "action", "counter", "register"):
        for oid, (name, shape) in sorted(want[kind].items()):
            if oid not in got[kind]:
                return f"it lacks {kind} {name} (id {oid})"
            for (field, w), (_f, g) in zip(shape, got[kind][oid][1]):
                if kind == "table" and field == "size" and oid in fixed:
                    continue
                if w != g:
                    return f"{kind} {name} (id {oid}) has {_describe(field, g)}; {ref} has {_describe(field, w)}"
        if strict:
            extra = sorted(set(got[kind]) - set(want[kind]))
            if extra:
                return f"it has {kind} {got[kind][extra[0]][0]} (id {extra[0]}), which {ref} lacks"
    return None
