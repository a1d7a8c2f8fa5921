"""A build directory as the controller sees it.

``load_build(DIR)`` reads ``plan.json`` (the source of every ID), the
P4Info to push and the device config: BMv2's JSON (``program.json``, written
by ``p4gen build --compile``) when present, else empty bytes, which is what
the software data plane expects.  When p4c wrote its own P4Info
(``p4info.p4c.txtpb``) it is pushed with the JSON it belongs to.

The P4Info found there must match the plan's (:func:`p4gen.p4runtime.compare.p4info_diff`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from p4gen.emit.p4info import build_p4info
from p4gen.errors import PlanError
from p4gen.fileread import parse_json, read_text
from p4gen.p4runtime.compare import p4info_diff
from p4gen.plan import Plan

DEVICE_CONFIG = "program.json"
P4INFO = "p4info.txt"
P4INFO_P4C = "p4info.p4c.txtpb"


@dataclass(frozen=True)
class Build:
    path: Path
    plan: Plan
    p4info: p4info_pb2.P4Info
    device_config: bytes
    p4info_file: str = P4INFO        # the file the P4Info came from: p4gen's, or p4c's beside its JSON

    @property
    def device_config_name(self) -> str:
        return DEVICE_CONFIG if self.device_config else "none (software data plane)"


def _read_p4info(path: Path) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text = read_text(path, "P4Info", PlanError)
    try:
        text_format.Parse(text, info)
    except text_format.ParseError as exc:
        why = " ".join(str(exc).split())
        why = why if len(why) <= 200 else why[:197] + "..."
        raise PlanError(f"{str(path)!r} is not a text-format P4Info: {why}") from None
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
    return Build(d, plan, info, device_config, name)
