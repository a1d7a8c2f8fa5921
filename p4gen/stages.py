"""Checks of a chosen layout: its pass shape and its register-to-stage placement.

The planner runs these on every layout it is given (``p4gen build --layout``), so a layout
found by the search is re-checked by the same fit pass as any other build.
"""

from __future__ import annotations

from typing import Any

from .decision import DecisionTable
from .pass_shape import PassShape
from .target import TargetProfile


def shape_problem(profile: TargetProfile, shape: PassShape, elements: int) -> str | None:
    """Why ``shape`` cannot carry ``elements`` on ``profile``, or None."""
    lanes, p = profile.lanes_per_register, shape.passes
    if p > profile.max_passes:
        return f"passes={p} exceeds the {profile.max_passes} pipeline passes {profile.name} allows"
    if elements % p or (elements // p) % lanes:
        return (f"elements_per_packet={elements} cannot be split into {p} equal passes of whole "
                f"{lanes}-lane register entries")
    if shape.mode == "stream" and (p == 1 or not profile.is_tna):
        return (f"a streamed layout needs several passes on a TNA target; {profile.name} with passes={p} "
                f"holds every value in one pass")
    if shape.pipes not in (1, p):
        return f"pipes={shape.pipes} must be 1 (recirculation in one pipe) or passes={p} (one pipe per pass)"
    if shape.pipes > 1 and (not profile.is_tna or shape.pipes > profile.pipes):
        return f"pipes={shape.pipes} folds the passes over {shape.pipes} pipes; {profile.name} has {profile.pipes}"
    return None


def step_dependencies(table: DecisionTable) -> dict[str, set[str]]:
    """Register role -> roles whose results its decision step keys on (they run in earlier stages)."""
    yielded = {s.yields: s.role for s in table.steps if s.yields}
    return {s.role: {yielded[k] for k in s.keys if k in yielded} for s in table.steps}


def place(profile: TargetProfile, regs: list[dict[str, Any]], placement: dict[str, int],
           table: DecisionTable) -> str | None:
    """Put each register in its stage of ``placement``; why the placement is not valid, or None.

    The rules: stage 0 holds the worker look-up, so registers sit in stages 1..stages-1; a
    stage hosts at most alus_per_stage arrays (one stateful ALU and one RegisterAction per
    array and pass); the arrays of one decision step other than the values (the bitmap
    words) share a stage; a step runs in a later stage than every step whose result it
    keys on.  SRAM per stage is checked with the planner's own rule afterwards."""
    if not profile.has_stage_limits:
        return f"{profile.name} has no MAU stages; a stage placement does not apply"
    names = {r["name"] for r in regs}
    extra, missing = sorted(set(placement) - names), sorted(names - set(placement))
    if extra or missing:
        return (f"the placement names register {extra[0]!r}, which this layout does not have" if extra
                else f"the placement leaves register {missing[0]!r} without a stage")
    for r in regs:
        r["stage"] = placement[r["name"]]
        if not 1 <= r["stage"] < profile.stages:
            return f"register {r['name']} in stage {r['stage']}; {profile.name} has stages 1..{profile.stages - 1} for registers"
    for st in range(1, profile.stages):
        here = [r["name"] for r in regs if r["stage"] == st]
        if len(here) > profile.alus_per_stage:
            return f"stage {st} holds {len(here)} register arrays; {profile.name} has {profile.alus_per_stage} stateful ALUs per stage"
    stages_of: dict[str, set[int]] = {}
    for r in regs:
        stages_of.setdefault(r["role"], set()).add(r["stage"])
    for role, st in stages_of.items():
        if role != "values" and len(st) > 1:
            return f"the {role} arrays sit in stages {sorted(st)}; they must share one stage"
    for role, deps in step_dependencies(table).items():
        for dep in sorted(deps):
            if role in stages_of and dep in stages_of and min(stages_of[role]) <= max(stages_of[dep]):
                return (f"{role} in stage {min(stages_of[role])} keys on the result of {dep} in stage "
                        f"{max(stages_of[dep])}; it must come later")
    return None
