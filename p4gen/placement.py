"""Register arrays onto MAU stages: the one placement of every build, and the layout search's inner level.

:func:`assign` places the arrays of a build (:mod:`p4gen.registers`) on stages, or checks a placement it
is given (a layout from ``p4gen plan``); :func:`place` is the optimiser it uses on targets with MAU
stages, and the layout search uses for every layout it weighs.  Without MAU stages (BMv2) a step sits at
its dependency level.

Rules (:func:`check` states them for a given placement): stage 0 holds the worker look-up;
a stage hosts at most ``alus_per_stage`` arrays (one stateful ALU and one RegisterAction
per array and pass) and ``sram_blocks_per_stage`` SRAM blocks; the arrays of one decision
step other than the values (the bitmap words) share a stage; a step sits in a later stage
than every step whose result it keys on.  The objective is the fewest stages.

:func:`place` is exact: a shortest-path search over the stages, one stage at a time, whose
state is the set of steps already placed and the number of value arrays placed.  Value
arrays are identical and nothing depends on them, so of two states with the same steps
placed the one with more value arrays dominates, and each stage takes as many value
arrays as fit.  Of placements with as many stages, the one that puts each step in the earliest stage
its dependencies allow is taken (every step that is ready and fits goes in).  :func:`certify` states
the same problem for Z3 Optimize, with no such reasoning, and confirms the minimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any

from .decision import DecisionTable
from .target import TargetProfile


@dataclass(frozen=True)
class Placement:
    stage_of: dict[str, int] | None        # None: a target without MAU stages
    stages_used: int | None                # stage 0 (tables) included; None without MAU stages
    sram_blocks: int

    def as_tuple(self) -> tuple[tuple[str, int], ...] | None:
        return tuple(sorted(self.stage_of.items())) if self.stage_of is not None else None


def blocks(profile: TargetProfile, reg: dict[str, Any]) -> int:
    return profile.sram_blocks_for(reg["entries"], reg["entry_bits"]) if profile.sram_block_words else 0


def _steps(regs: list[dict[str, Any]], profile: TargetProfile) -> tuple[tuple[str, int, int], ...]:
    """(role, arrays, SRAM blocks) of every non-value step, in register order."""
    out: dict[str, list[int]] = {}
    for r in regs:
        if r["role"] != "values":
            a = out.setdefault(r["role"], [0, 0])
            a[0] += 1
            a[1] += blocks(profile, r)
    return tuple((role, a, b) for role, (a, b) in out.items())


def place(profile: TargetProfile, regs: list[dict[str, Any]], deps: dict[str, set[str]]) -> Placement | None:
    """The placement with the fewest stages, or None when none fits."""
    if not profile.has_stage_limits:
        return Placement(None, None, 0)     # no MAU stages: nothing to place
    values = [r for r in regs if r["role"] == "values"]
    vblocks = blocks(profile, values[0]) if values else 0
    steps = _steps(regs, profile)
    dep_key = tuple(sorted((k, tuple(sorted(v))) for k, v in deps.items()))
    plan = _search(steps, len(values), vblocks, dep_key, profile.stages, profile.alus_per_stage,
                   profile.sram_blocks_per_stage)
    if plan is None:
        return None
    stage_of: dict[str, int] = {}
    vi = iter(values)
    for st, (roles, nvals) in enumerate(plan, start=1):
        for r in regs:
            if r["role"] in roles:
                stage_of[r["name"]] = st
        for _ in range(nvals):
            stage_of[next(vi)["name"]] = st
    used = max(stage_of.values(), default=0) + 1
    return Placement(stage_of, used, sum(blocks(profile, r) for r in regs))


@lru_cache(maxsize=65536)
def _search(steps: tuple[tuple[str, int, int], ...], nvalues: int, vblocks: int,
            dep_key: tuple[tuple[str, tuple[str, ...]], ...], nstages: int, alus: int,
            sram: int) -> tuple[tuple[frozenset, int], ...] | None:
    """Per stage from 1: (steps placed there, value arrays placed there); None if nothing fits."""
    deps = {k: set(v) for k, v in dep_key}
    size = {role: (a, b) for role, a, b in steps}
    order = {role: i for i, (role, _a, _b) in enumerate(steps)}
    roles = frozenset(size)
    vdeps = deps.get("values", set())
    # state: steps placed -> (values placed, path)
    frontier: dict[frozenset, tuple[int, tuple]] = {frozenset(): (0, ())}
    for _stage in range(1, nstages):
        nxt: dict[frozenset, tuple[int, tuple]] = {}
        for placed, (nv, path) in frontier.items():
            ready = sorted((r for r in roles - placed if deps.get(r, set()) <= placed), key=order.get)
            values_ready = vdeps <= placed and nv < nvalues
            for k in range(len(ready), -1, -1):        # every ready step first: the earliest stages win ties
                for chosen in combinations(ready, k):
                    a = sum(size[r][0] for r in chosen)
                    b = sum(size[r][1] for r in chosen)
                    if a > alus or b > sram:
                        continue
                    take = 0
                    if values_ready:
                        room = alus - a if not vblocks else min(alus - a, (sram - b) // vblocks)
                        take = max(0, min(room, nvalues - nv))
                    if not chosen and not take:
                        continue
                    key = placed | frozenset(chosen)
                    cand = (nv + take, path + ((frozenset(chosen), take),))
                    if key not in nxt or nxt[key][0] < cand[0]:
                        nxt[key] = cand
        for key, (nv, path) in nxt.items():
            if key == roles and nv == nvalues:
                return path

        # an idle stage never helps: every state that can move did, so only moved states go on
        frontier = nxt
        if not frontier:
            return None
    return None


def value_capacity(profile: TargetProfile, arrays: dict[str, int], deps: dict[str, set[str]]) -> int:
    """The most value arrays one pass can hold (SRAM aside): ``arrays`` gives each other step's array count.

    The same search over stages as :func:`place`, each stage filling its free stateful ALUs with value
    arrays once the steps the values key on are placed; 0 when the other steps do not fit."""
    if not profile.has_stage_limits:
        raise ValueError("a target without MAU stages holds any number of value arrays")
    roles = frozenset(arrays)
    vdeps = deps.get("values", set())
    frontier: dict[frozenset, int] = {frozenset(): 0}
    best = 0
    for _stage in range(1, profile.stages):
        nxt: dict[frozenset, int] = {}
        for placed, nv in frontier.items():
            ready = [r for r in roles - placed if deps.get(r, set()) <= placed]
            for k in range(len(ready) + 1):
                for chosen in combinations(ready, k):
                    used = sum(arrays[r] for r in chosen)
                    if used > profile.alus_per_stage:
                        continue
                    take = profile.alus_per_stage - used if vdeps <= placed else 0
                    key = placed | frozenset(chosen)
                    nxt[key] = max(nxt.get(key, -1), nv + take)
        frontier = nxt
        best = max([best] + [nv for key, nv in frontier.items() if key == roles])
    return best


def certify(profile: TargetProfile, regs: list[dict[str, Any]], deps: dict[str, set[str]],
            stages_used: int, timeout_ms: int = 20000) -> bool:
    """Z3 Optimize: the fewest stages of any placement equals ``stages_used``.

    Each non-value step gets a stage variable; the value arrays, being identical, a count
    per stage.  The constraints are the rules above, stated directly; no dominance or
    greedy argument is used."""
    import z3

    opt = z3.Optimize()
    opt.set("timeout", timeout_ms)
    top = profile.stages - 1
    steps = _steps(regs, profile)
    values = [r for r in regs if r["role"] == "values"]
    vb = blocks(profile, values[0]) if values else 0
    x = {role: z3.Int(f"stage_{role}") for role, _, _ in steps}
    n = {s: z3.Int(f"values_in_{s}") for s in range(1, top + 1)}
    last = z3.Int("last")
    for role, _, _ in steps:
        opt.add(x[role] >= 1, x[role] <= top, last >= x[role])
    opt.add(z3.Sum(list(n.values())) == len(values))
    for s, ns in n.items():
        opt.add(ns >= 0, z3.Implies(ns > 0, last >= s))
    for role, ds in deps.items():
        for d in ds:
            if d not in x:
                continue
            if role == "values":
                for s, ns in n.items():
                    opt.add(z3.Implies(x[d] >= s, ns == 0))
            elif role in x:
                opt.add(x[role] > x[d])
    for s, ns in n.items():
        opt.add(z3.Sum([z3.If(x[r] == s, a, 0) for r, a, _ in steps]) + ns <= profile.alus_per_stage)
        opt.add(z3.Sum([z3.If(x[r] == s, b, 0) for r, _, b in steps]) + ns * vb <= profile.sram_blocks_per_stage)
    h = opt.minimize(last)
    if opt.check() != z3.sat:
        return False
    return opt.lower(h).as_long() + 1 == stages_used == opt.upper(h).as_long() + 1


# ---------------------------------------------------------------------------------------------- one build


def step_dependencies(table: DecisionTable) -> dict[str, set[str]]:
    """Register role -> roles whose results its decision step keys on (they run in earlier stages)."""
    yielded = {s.yields: s.role for s in table.steps if s.yields}
    return {s.role: {yielded[k] for k in s.keys if k in yielded} for s in table.steps}


def levels(table: DecisionTable) -> dict[str, int]:
    """Role -> the earliest stage its step can run in: 1 + the latest stage of the steps it keys on."""
    deps = step_dependencies(table)
    out: dict[str, int] = {}
    for s in table.steps:
        out[s.role] = 1 + max((out[d] for d in deps[s.role]), default=0)
    return out


def _earliest(profile: TargetProfile, regs: list[dict[str, Any]], table: DecisionTable) -> None:
    """Each step at its level, the value arrays from theirs on, as many a stage as its free ALUs take
    (SRAM aside): the placement a target without MAU stages gets, and the one a failure is told in."""
    lv = levels(table)
    alus = profile.alus_per_stage if profile.has_stage_limits else None
    used: dict[int, int] = {}
    for r in regs:
        if r["role"] != "values":
            r["stage"] = lv[r["role"]]
            used[r["stage"]] = used.get(r["stage"], 0) + 1
    stage = lv.get("values", 1)
    for r in regs:
        if r["role"] == "values":
            while alus is not None and used.get(stage, 0) >= alus:
                stage += 1
            r["stage"] = stage
            used[stage] = used.get(stage, 0) + 1


def assign(profile: TargetProfile, regs: list[dict[str, Any]], table: DecisionTable,
           fixed: dict[str, int] | None = None) -> tuple[int, str | None]:
    """Give every register of ``regs`` its ``stage``: ``fixed`` (checked, :func:`check`), else the
    placement :func:`place` finds with the fewest stages, else (nothing fits the SRAM) the earliest one, so
    that the caller's SRAM check can say where it overflows.  Returns (stages of the program, why the
    fixed placement is refused or None)."""
    if fixed is not None:
        return profile.stages or 0, check(profile, regs, fixed, table)
    if not profile.has_stage_limits:
        _earliest(profile, regs, table)
        return max(r["stage"] for r in regs) + 1, None
    found = place(profile, regs, step_dependencies(table))
    if found is None:
        _earliest(profile, regs, table)
    else:
        for r in regs:
            r["stage"] = found.stage_of[r["name"]]
    return profile.stages, None


def check(profile: TargetProfile, regs: list[dict[str, Any]], placement: dict[str, int],
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
