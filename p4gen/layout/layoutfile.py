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
from ..files import check_replaceable, load_json, sha256_text, write_atomic
from ..spec import Spec, make_spec
from ..pass_shape import PassShape, shape_from_dict

SCHEMA = "p4gen.layout/1"


def layout_document(target: str, spec: Spec, shape: PassShape, **extra: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "target": target, "spec": spec.to_dict(), "shape": shape.to_dict(), **extra}


DIGEST = "p4gen_digest"        # of the rest of the document, as written: was it edited since?


def _body(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def layout_text(doc: dict[str, Any]) -> str:
    return _body({**doc, DIGEST: sha256_text(_body(doc))})


def layout_unchanged(text: str) -> bool:
    """Whether ``text`` is a layout file as p4gen wrote it (its digest matches the rest)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    if not isinstance(doc, dict) or not isinstance(doc.get(DIGEST), str):
        return False
    d = doc.pop(DIGEST)
    return d == sha256_text(_body(doc))


def write_layout(path: str | Path, doc: dict[str, Any]) -> Path:
    """Write a layout file; an existing one is replaced only if p4gen wrote it and nobody edited it."""
    check_replaceable(path, "layout file", SpecError, layout_unchanged)
    return write_atomic(path, layout_text(doc), "layout file", SpecError)


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
    try:
        spec = make_spec(**doc["spec"])
    except SpecError as exc:
        raise SpecError(f"{name}: {exc}") from None
    return doc["target"], spec, shape_from_dict(doc["shape"], name)
