"""What a ``p4gen verify`` report vouches for: plan.json and the program and P4Info beside it.

The proofs read plan.json; what a switch runs is ``program.p4`` (compiled) and ``p4info.txt``.
So before anything is proved, the program and the P4Info are rendered again from plan.json (the
same emitters ``p4gen build`` runs), and a directory whose ``program.p4`` or ``p4info.txt`` holds
anything else -- a register operation edited by hand, say -- is refused with one line naming the
first line that differs.  The report records the SHA-256 of every file it vouches for (and of the
compiled ``program.json`` / ``p4info.p4c.txtpb``, which only p4c can derive from ``program.p4``:
for those the digest is the binding).  A file that is absent is recorded as ``null``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from p4gen.errors import PlanError
from p4gen.fileread import read_text

RENDERED = ("program.p4", "p4info.txt")
COMPILED = ("program.json", "p4info.p4c.txtpb")


def _render(plan) -> dict[str, str]:
    from p4gen.emit.p4 import render_p4
    from p4gen.emit.p4info import render_p4info

    try:
        return {"program.p4": render_p4(plan), "p4info.txt": render_p4info(plan)}
    except Exception as exc:  # noqa: BLE001 - any failure of the emitters on a checked plan is one line
        raise PlanError(f"{plan.source}: the program cannot be rendered from this plan "
                        f"({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def _first_difference(have: str, want: str) -> str:
    a, b = have.splitlines(), want.splitlines()
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return f"line {i} is {x.strip()[:60]!r}, the plan renders {y.strip()[:60]!r}"
    return f"it has {len(a)} lines, the plan renders {len(b)}"


def bind(plan, directory: str | Path) -> dict[str, str | None]:
    """The digests of plan.json and the artifacts beside it, after checking that ``program.p4`` and
    ``p4info.txt``, where present, are exactly what plan.json renders to (else PlanError)."""
    d = Path(directory)
    rendered = _render(plan)
    digests: dict[str, str | None] = {}
    plan_file = Path(plan.source) if Path(plan.source).name == "plan.json" else d / "plan.json"
    for name in ("plan.json",) + RENDERED + COMPILED:
        p = plan_file if name == "plan.json" else d / name
        if not p.exists():
            digests[name] = None
            continue
        text = read_text(p, name, PlanError)
        if name in rendered and text != rendered[name]:
            raise PlanError(f"{str(p)!r} is not what plan.json renders to ({_first_difference(text, rendered[name])}); "
                            f"verify proves plan.json and the {name} it renders, so it does not vouch for this one: "
                            f"rebuild with p4gen build")
        digests[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return digests
