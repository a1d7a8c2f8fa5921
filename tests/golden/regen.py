"""Regenerate the golden files: python tests/golden/regen.py

Each golden is the exact output of `p4gen build` for one (target, spec);
tests/test_golden.py diffs fresh output against them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from p4gen.emit.p4 import render_p4
from p4gen.emit.p4info import render_p4info
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent

# (target, file stem, spec fields)
CASES = [
    ("tofino", "switchml", {"slots": 512}),
    ("tofino", "switchml-reference", {"slots": 512, "variant": "reference"}),
    ("tofino", "switchml-2pass", {"slots": 512, "elements_per_packet": 128}),
    ("tofino2", "switchml", {"slots": 512}),
    ("bmv2", "switchml", {"slots": 512}),
    ("bmv2", "switchml-reference", {"slots": 512, "variant": "reference"}),
    ("tofino", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
    ("tofino2", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
    ("bmv2", "omnireduce", {"slots": 512, "protocol": "omnireduce"}),
]


def outputs(target: str, fields: dict) -> dict[str, str]:
    plan = make_plan(make_spec(**fields), load_target(target))
    return {"p4": render_p4(plan), "p4info.txt": render_p4info(plan)}


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
