"""Layout files: what ``p4gen plan`` chose, as ``p4gen build --layout FILE`` reads it.

A JSON document::

    {"schema": "p4gen.layout/1", "target": "tofino",
     "spec": {"protocol": "switchml", "variant": "hardened", "max_workers": 32, "slots": 188,
              "elements_per_packet": 256, "value_width": 32, "jobs": 1},
     "shape": {"passes": 4, "mode": "stream", "pipes": 4, "placement": {"chunk": 1, ...}},
     "objective": "time", "workload": {...}, "predicted": {...}}

``spec`` and ``shape`` are what the build uses; the rest records why it was chosen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..fileread import load_json
from ..filewrite import JSON, write_file
from ..spec import Spec, make_spec
from ..pass_shape import PassShape, shape_from_dict

SCHEMA = "p4gen.layout/1"
SPEC_KEYS = ("protocol", "variant", "max_workers", "slots", "elements_per_packet", "value_width", "jobs")


def layout_document(target: str, spec: Spec, shape: PassShape, **extra: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "target": target, "spec": spec.to_dict(), "shape": shape.to_dict(), **extra}


OUT_HINT = "move it away or choose another --out"


def layout_text(doc: dict[str, Any]) -> bytes:
    """The layout file of ``doc`` as p4gen writes it: with the digest that tells it from an edited one."""
    return JSON.seal(json.dumps(doc).encode())


def write_layout(path: str | Path, doc: dict[str, Any]) -> Path:
    """Write a layout file; an existing one is replaced only if p4gen wrote it and nobody edited it."""
    return write_file(path, json.dumps(doc), JSON, "layout file", SpecError, hint=OUT_HINT)


def read_layout(path: str | Path) -> tuple[str, Spec, PassShape]:
    """(target name, spec, shape) of a layout file; one-line SpecError on any problem."""
    name = f"layout file {str(Path(path))!r}"
    if not Path(path).exists():
        raise SpecError(f"{name} does not exist (write one with p4gen plan)")
    doc = load_json(path, "layout file", SpecError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise SpecError(f"{name} has schema {got!r}; this p4gen reads {SCHEMA!r}")
    for key in ("target", "spec", "shape"):
        if key not in doc:
            raise SpecError(f"{name} lacks the key {key!r}")
    if not isinstance(doc["target"], str) or not isinstance(doc["spec"], dict):
        raise SpecError(f"{name}: target must be a name and spec a table")
    missing = [k for k in SPEC_KEYS if k not in doc["spec"]]
    if missing:
        raise SpecError(f"{name}: spec lacks {missing[0]!r} (a layout file gives the whole spec, as p4gen plan "
                        f"writes it; a default would build another layout than the one planned)")
    try:
        spec = make_spec(**doc["spec"])
    except SpecError as exc:
        raise SpecError(f"{name}: {exc}") from None
    return doc["target"], spec, shape_from_dict(doc["shape"], name)
