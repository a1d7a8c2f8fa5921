"""The inner level of the search: register arrays onto MAU stages.

Rules (the planner re-checks them, p4gen.stages.place): stage 0 holds the worker look-up;
a stage hosts at most ``alus_per_stage`` arrays (one stateful ALU and one RegisterAction
per array and pass) and ``sram_blocks_per_stage`` SRAM blocks; the arrays of one decision
step other than the values (the bitmap words) share a stage; a step sits in a later stage
than every step whose result it keys on.  The objective is the fewest stages.

:func:`place` is exact: a shortest-path search over the stages, one stage at a time, whose
state is the set of steps already placed and the number of value arrays placed.  Value
arrays are identical and nothing depends on them, so of two states with the same steps
placed the one with more value arrays dominates, and each stage takes as many value
arrays as fit.  :func:`certify` states the same problem for Z3 Optimize, with no such reasoning, and
confirms the minimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any

from ..target import TargetProfile


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
    roles = frozenset(size)
    vdeps = deps.get("values", set())
    # state: steps placed -> (values placed, path)
    frontier: dict[frozenset, tuple[int, tuple]] = {frozenset(): (0, ())}
    for _stage in range(1, nstages):
        nxt: dict[frozenset, tuple[int, tuple]] = {}
        for placed, (nv, path) in frontier.items():
            ready = [r for r in roles - placed if deps.get(r, set()) <= placed]
            values_ready = vdeps <= placed and nv < nvalues
            for k in range(len(ready) + 1):
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
