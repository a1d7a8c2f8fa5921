"""Regenerate the golden files: python tests/golden/regen.py

Each golden is the exact output of `p4gen build` for one (target, spec);
tests/test_golden.py diffs fresh output against them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from p4gen.emit.p4 import render_p4
from p4gen.emit.p4info import render_p4info
from p4gen.pass_shape import shape_from_dict
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent

# (target, file stem, spec fields; "shape": a layout's pass shape as in a layout file)
CASES = [
    ("tofino", "switchml", {"slots": 512}),
    ("tofino", "switchml-reference", {"slots": 512, "variant": "reference"}),
    ("tofino", "switchml-2pass", {"slots": 512, "elements_per_packet": 32}),
    ("tofino2", "switchml", {"slots": 512}),
    ("bmv2", "switchml", {"slots": 512}),
    ("bmv2", "switchml-reference", {"slots": 512, "variant": "reference"}),
    ("tofino", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
    ("tofino2", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
    ("bmv2", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
    # layouts p4gen plan chooses: 256 B in 4 streamed passes (each pass parses only its 16 values), in one
    # pipe or folded over 4; 128 B in 2 resident passes folded over 2 pipes; Tofino2's 336 in 4 folded
    # streamed passes (its PHV 33 bits under what the Tofino compiler allocates)
    ("tofino", "switchml-stream4", {"slots": 512, "elements_per_packet": 64,
                                    "shape": {"passes": 4, "mode": "stream", "pipes": 1}}),
    ("tofino", "switchml-stream4-folded", {"slots": 512, "elements_per_packet": 64,
                                           "shape": {"passes": 4, "mode": "stream", "pipes": 4}}),
    ("tofino", "switchml-2pass-folded", {"slots": 512, "elements_per_packet": 32,
                                         "shape": {"passes": 2, "mode": "resident", "pipes": 2}}),
    ("tofino2", "switchml-stream4-folded", {"slots": 512, "elements_per_packet": 336,
                                            "shape": {"passes": 4, "mode": "stream", "pipes": 4}}),
]


def plan(target: str, fields: dict):
    """The Plan of one case (spec fields, and a pass shape when the case gives one)."""
    fields = dict(fields)
    shape = shape_from_dict(fields.pop("shape")) if "shape" in fields else None
    return make_plan(make_spec(**fields), load_target(target), shape)


def outputs(target: str, fields: dict) -> dict[str, str]:
    p = plan(target, fields)
    return {"p4": render_p4(p), "p4info.txt": render_p4info(p)}


def main() -> int:
    for target, stem, fields in CASES:
        (HERE / target).mkdir(exist_ok=True)
        for ext, text in outputs(target, fields).items():
            path = HERE / target / f"{stem}.{ext}"
            path.write_text(text)
            print(path.relative_to(HERE.parent.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
