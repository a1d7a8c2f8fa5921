"""Register arrays onto MAU stages: the one placement of every build, and the layout search's inner level.

:func:`assign` places the arrays of a build (:mod:`p4gen.registers`) on stages, or checks a placement it
is given (a layout from ``p4gen plan``); :func:`place` is the optimiser it uses on targets with MAU
stages, and the layout search uses for every layout it weighs.  Without MAU stages (BMv2) a step sits at
its dependency level.

Rules (:func:`check` states them for a given placement): stage 0 holds the worker look-up; a stage
hosts at most ``alus_per_stage`` arrays (one stateful ALU and one RegisterAction per array and pass)
and ``register_sram_limit`` SRAM blocks (the blocks its stateful ALUs reach); the arrays of one decision step other than the values (the
bitmap words) share a stage.  When each step may run is its :class:`Timing`: a step's arrays sit no
earlier than its ``earliest`` stage and no earlier than the stage where every result it keys on is
available (a step's result is available ``latency`` stages after its arrays' stage: one when the
stateful ALU returns it, two when a gateway computes it from the returned word in the next stage);
the value arrays sit at least ``values_gap`` stages after the last result the values step keys on
(its table sets the op they run).  The objective is the fewest stages.

:func:`place` is exact: a shortest-path search over the stages, one stage at a time, whose state is the
steps already placed, when each one's result is available and the number of value arrays placed.
Value arrays are identical and nothing depends on them, so of two states with the same steps placed
at the same times the one with more value arrays dominates, and each stage takes as many value arrays
as fit.  Of placements with as many stages, the one that puts each step in the earliest stage its
dependencies allow is taken (every step that is ready and fits goes in).  :func:`certify` states the
same problem for Z3 Optimize, with no such reasoning, and confirms the minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, permutations
from typing import Any

from .. import decision
from ..decision import DecisionTable
from ..target import TargetProfile

COUNTER_ENTRY_BITS = 128     # a packets-and-bytes counter entry: two 64-bit counts


@dataclass(frozen=True)
class Placement:
    stage_of: dict[str, int] | None        # None: a target without MAU stages
    stages_used: int | None                # stage 0 (tables) and the tail included; None without MAU stages
    sram_blocks: int

    def as_tuple(self) -> tuple[tuple[str, int], ...] | None:
        return tuple(sorted(self.stage_of.items())) if self.stage_of is not None else None


@dataclass(frozen=True)
class Timing:
    """When each decision step's arrays may sit, and when a later step can key on its result."""
    deps: dict[str, frozenset[str]]                             # role -> roles whose results it keys on
    earliest: dict[str, int] = field(default_factory=dict)      # role -> first stage (default 1)
    latency: dict[str, int] = field(default_factory=dict)       # role -> stages until its result is keyed on (1)
    values_gap: int = 0                                         # stages from the values step's keys to its arrays
    tail: int = 0                                               # stages after the last array's (moving values)
    counter_blocks: int = 0     # SRAM blocks the packet counter takes in the first stage the value arrays may use

    def first(self, role: str) -> int:
        return self.earliest.get(role, 1)

    def lat(self, role: str) -> int:
        return self.latency.get(role, 1)

    def key(self) -> tuple:
        return (tuple(sorted((k, tuple(sorted(v))) for k, v in self.deps.items())),
                tuple(sorted(self.earliest.items())), tuple(sorted(self.latency.items())), self.values_gap, self.tail,
                self.counter_blocks)

    @classmethod
    def from_key(cls, k: tuple) -> "Timing":
        deps, earliest, latency, gap, tail, counter = k
        return cls({r: frozenset(d) for r, d in deps}, dict(earliest), dict(latency), gap, tail, counter)

    def with_tail(self, tail: int) -> "Timing":
        return Timing(self.deps, self.earliest, self.latency, self.values_gap, tail, self.counter_blocks)

    def values_first(self, avail: dict[str, int]) -> int:
        """The first stage the value arrays may sit in, given when the results they key on are available."""
        return max([self.first("values")] + [avail[d] + self.values_gap for d in self.deps.get("values", ())])

    def ready(self, role: str, stage: int, avail: dict[str, int]) -> bool:
        """Whether ``role``'s arrays may sit in ``stage`` given when each placed step's result is available."""
        if stage < self.first(role):
            return False
        gap = self.values_gap if role == "values" else 0
        return all(d in avail and avail[d] + gap <= stage for d in self.deps.get(role, ()))


def timing(profile: TargetProfile, table: DecisionTable, max_workers: int, value_width: int) -> Timing:
    """The :class:`Timing` of ``table``'s steps on ``profile``: from their stateful-ALU lowering on a
    target with stateful ALUs (:mod:`p4gen.ops.salu_steps`), else every result one stage after its step."""
    from ..ops import salu_steps
    from ..ops.salu import SaluCaps

    deps = {r: frozenset(d) for r, d in step_dependencies(table).items()}
    caps = SaluCaps.of(profile)
    if caps is None or not profile.has_stage_limits:
        return Timing(deps)
    facts = salu_steps.step_facts(table, caps, value_width, profile.lanes_per_register, max_workers)
    earliest, latency = {}, {}
    for role, (split, before) in facts.items():
        latency[role] = 2 if split else 1
        earliest[role] = 2 if before else 1
    # the packet counter counts after the outcome table, which keys on what the values' table keys on: it
    # sits in the first stage of the value arrays, in the SRAM their stateful ALUs reach
    counter = profile.sram_blocks_for(len(decision.STATS), COUNTER_ENTRY_BITS) if profile.sram_block_words else 0
    return Timing(deps, earliest, latency, values_gap=1, counter_blocks=counter)


def tail_stages(profile: TargetProfile, passes: int, mode: str) -> int:
    """Stages a layout needs after its last value array: a resident layout of several passes rotates
    the values into place for the next pass, which waits for the arrays' results (a stage of its own)."""
    return 1 if profile.has_stage_limits and profile.is_tna and passes > 1 and mode == "resident" else 0


def blocks(profile: TargetProfile, reg: dict[str, Any]) -> int:
    return profile.sram_blocks_for(reg["entries"], reg["entry_bits"]) if profile.sram_block_words else 0


@dataclass(frozen=True)
class RamGeometry:
    """Where a stage's registers can sit: ``rows`` rows of ``per_row`` SRAM blocks (the ones with map
    RAMs), a stateful ALU on every other row (the odd ones), and from an ALU's row a register's blocks
    reach down ``reach`` rows, not across ``group`` rows (a memory core split in halves).  None of it
    bounds a target without those facts: then only ``limit`` blocks in all."""
    limit: int | None
    rows: int = 0
    per_row: int = 0
    reach: int = 0
    group: int = 0

    @classmethod
    def of(cls, profile: TargetProfile) -> "RamGeometry":
        rows = profile.register_sram_rows
        if not rows:
            return cls(profile.register_sram_limit)
        return cls(profile.register_sram_limit, rows, profile.register_sram_limit // rows,
                   profile.register_sram_reach or rows, profile.register_sram_group or rows)

    def fits(self, sizes: tuple[int, ...], counter: int = 0) -> bool:
        """Whether registers of these SRAM blocks (and the packet counter's ``counter``) fit one stage."""
        if self.limit is not None and sum(sizes) + counter > self.limit:
            return False
        if not self.rows or not sizes:
            return True
        return _packs(tuple(sorted(sizes, reverse=True)), self)


@lru_cache(maxsize=65536)
def _packs(sizes: tuple[int, ...], geo: RamGeometry) -> bool:
    """Whether some order of the registers packs from the top row down: each starts on a stateful ALU's
    row at or below where the last one ended (that ALU unused, with free blocks) and takes blocks row by
    row downward, within its reach and its group of rows (the compiler's overflow bus runs down, one
    register at a time through a row boundary; p4c backends/tofino/bf-p4c/mau/tofino/memories.cpp)."""
    for order in set(permutations(sizes)):
        free = [geo.per_row] * geo.rows
        row = geo.rows - 1
        ok = True
        for need in order:
            home = row if row % 2 == 1 else row - 1
            while home >= 1 and free[home] == 0:
                home -= 2
            if home < 1:
                ok = False
                break
            low = max(home - geo.reach, (home // geo.group) * geo.group)
            x = home
            while True:
                take = min(free[x], need)
                free[x] -= take
                need -= take
                if need == 0 or x == low:
                    break
                x -= 1
            if need:
                ok = False
                break
            row = x if x != home else home - 1      # the next register's ALU is below this one's
        if ok:
            return True
    return False


def _steps(regs: list[dict[str, Any]], profile: TargetProfile) -> tuple[tuple[str, int, tuple[int, ...]], ...]:
    """(role, arrays, each array's SRAM blocks) of every non-value step, in register order."""
    out: dict[str, list] = {}
    for r in regs:
        if r["role"] != "values":
            a = out.setdefault(r["role"], [0, ()])
            a[0] += 1
            a[1] += (blocks(profile, r),)
    return tuple((role, a, b) for role, (a, b) in out.items())


def place(profile: TargetProfile, regs: list[dict[str, Any]], tm: Timing) -> Placement | None:
    """The placement with the fewest stages, or None when none fits."""
    if not profile.has_stage_limits:
        return Placement(None, None, 0)     # no MAU stages: nothing to place
    values = [r for r in regs if r["role"] == "values"]
    vblocks = blocks(profile, values[0]) if values else 0
    steps = _steps(regs, profile)
    path = _search(steps, len(values), vblocks, tm.key(), profile.stages - tm.tail, profile.alus_per_stage,
                   RamGeometry.of(profile))
    if path is None:
        return None
    stage_of: dict[str, int] = {}
    vi = iter(values)
    for st, (roles, nvals) in enumerate(path, start=1):
        for r in regs:
            if r["role"] in roles:
                stage_of[r["name"]] = st
        for _ in range(nvals):
            stage_of[next(vi)["name"]] = st
    used = max(stage_of.values(), default=0) + 1 + tm.tail
    return Placement(stage_of, used, sum(blocks(profile, r) for r in regs))


def _stage_moves(roles: frozenset, placed: frozenset, avail: dict[str, int], nv: int, nvalues: int, stage: int,
                 tm: Timing, size: dict[str, tuple[int, tuple[int, ...]]], order: dict[str, int], vblocks: int,
                 alus: int, geo: RamGeometry):
    """Every way stage ``stage`` can be filled from this state: (steps placed there, value arrays placed)."""
    ready = sorted((r for r in roles - placed if tm.ready(r, stage, avail)), key=order.get)
    values_ready = nv < nvalues and tm.ready("values", stage, avail)
    counter = tm.counter_blocks if values_ready and _PASSED not in avail and stage == tm.values_first(avail) else 0
    for k in range(len(ready), -1, -1):        # every ready step first: the earliest stages win ties
        for chosen in combinations(ready, k):
            a = sum(size[r][0] for r in chosen)
            b = tuple(x for r in chosen for x in size[r][1])
            if a > alus or not geo.fits(b):
                continue
            take = 0
            if values_ready:
                take = max(0, min(alus - a, nvalues - nv))
                while take and vblocks and not geo.fits(b + (vblocks,) * take, counter):
                    take -= 1
            yield chosen, take


def _settled(avail: dict[str, int], chosen: tuple[str, ...], stage: int, tm: Timing) -> tuple:
    """When each placed step's result is available after ``stage`` places ``chosen``, as a state key.
    A result available early enough for every later stage (by the next stage, less the values' gap) is
    recorded as available just then: states that differ only in how long ago a result became available
    are one state, so the search's states grow with the steps, not with the stages."""
    floor = stage + 1 - tm.values_gap
    new = {**avail, **{r: stage + tm.lat(r) for r in chosen}}
    deps = tm.deps.get("values", ())
    if all(d in new for d in deps) and tm.values_first(new) <= stage:
        new[_PASSED] = 0        # the values' first stage (the packet counter's) is behind: say so, as
    return tuple(sorted((r, max(v, floor)) for r, v in new.items()))   # the clamp hides when it was


_PASSED = "(values' first stage passed)"


@lru_cache(maxsize=65536)
def _search(steps: tuple[tuple[str, int, tuple[int, ...]], ...], nvalues: int, vblocks: int, tkey: tuple,
            nstages: int, alus: int, geo: RamGeometry) -> tuple[tuple[frozenset, int], ...] | None:
    """Per stage from 1: (steps placed there, value arrays placed there); None if nothing fits."""
    tm = Timing.from_key(tkey)
    size = {role: (a, b) for role, a, b in steps}
    order = {role: i for i, (role, _a, _b) in enumerate(steps)}
    roles = frozenset(size)
    # state: (steps placed, when each one's result is available) -> (values placed, path)
    frontier: dict[tuple, tuple[int, tuple]] = {(frozenset(), ()): (0, ())}
    for stage in range(1, nstages):
        nxt: dict[tuple, tuple[int, tuple]] = {}
        for (placed, avail_items), (nv, path) in frontier.items():
            avail = dict(avail_items)
            for chosen, take in _stage_moves(roles, placed, avail, nv, nvalues, stage, tm, size, order, vblocks,
                                             alus, geo):
                key = (placed | frozenset(chosen), _settled(avail, chosen, stage, tm))
                cand = (nv + take, path + ((frozenset(chosen), take),))
                if key not in nxt or nxt[key][0] < cand[0]:
                    nxt[key] = cand
        for (placed, _a), (nv, path) in nxt.items():
            if placed == roles and nv == nvalues:
                return path
        frontier = nxt
        if not frontier:
            return None
    return None


def value_capacity(profile: TargetProfile, arrays: dict[str, int], tm: Timing) -> int:
    """The most value arrays one pass can hold (SRAM aside): ``arrays`` gives each other step's array count.

    The same search over stages as :func:`place`, each stage filling its free stateful ALUs with value
    arrays once the results the values step keys on are available; 0 when the other steps do not fit."""
    if not profile.has_stage_limits:
        raise ValueError("a target without MAU stages holds any number of value arrays")
    roles = frozenset(arrays)
    size = {r: (a, ()) for r, a in arrays.items()}
    order = {r: i for i, r in enumerate(arrays)}
    big = 1 << 30
    frontier: dict[tuple, int] = {(frozenset(), ()): 0}
    best = 0
    for stage in range(1, profile.stages - tm.tail):
        nxt: dict[tuple, int] = {}
        for (placed, avail_items), nv in frontier.items():
            avail = dict(avail_items)
            for chosen, take in _stage_moves(roles, placed, avail, nv, big, stage, tm, size, order, 0,
                                             profile.alus_per_stage, RamGeometry(None)):
                key = (placed | frozenset(chosen), _settled(avail, chosen, stage, tm))
                nxt[key] = max(nxt.get(key, -1), nv + take)
        frontier = nxt
        best = max([best] + [nv for (placed, _a), nv in frontier.items() if placed == roles])
    return best


def certify(profile: TargetProfile, regs: list[dict[str, Any]], tm: Timing, stages_used: int,
            timeout_ms: int = 20000) -> bool:
    """Z3 Optimize: the fewest stages of any placement equals ``stages_used``.

    Each non-value step gets a stage variable; the value arrays, being identical, a count
    per stage.  The constraints are the rules above, stated directly; no dominance or
    greedy argument is used."""
    import z3

    opt = z3.Optimize()
    opt.set("timeout", timeout_ms)
    top = profile.stages - 1 - tm.tail
    steps = _steps(regs, profile)
    values = [r for r in regs if r["role"] == "values"]
    vb = blocks(profile, values[0]) if values else 0
    x = {role: z3.Int(f"stage_{role}") for role, _, _ in steps}
    n = {s: z3.Int(f"values_in_{s}") for s in range(1, top + 1)}
    last = z3.Int("last")
    for role, _, _ in steps:
        opt.add(x[role] >= tm.first(role), x[role] <= top, last >= x[role])
    opt.add(z3.Sum(list(n.values())) == len(values))
    for s, ns in n.items():
        opt.add(ns >= 0, z3.Implies(ns > 0, last >= s))
        if s < tm.first("values"):
            opt.add(ns == 0)
    for role, ds in tm.deps.items():
        for d in ds:
            if d not in x:
                continue
            if role == "values":
                for s, ns in n.items():
                    opt.add(z3.Implies(x[d] + tm.lat(d) + tm.values_gap > s, ns == 0))
            elif role in x:
                opt.add(x[role] >= x[d] + tm.lat(d))
    vdeps = [d for d in tm.deps.get("values", ()) if d in x]
    vfirst = tm.first("values")
    for d in vdeps:
        vfirst = z3.If(x[d] + tm.lat(d) + tm.values_gap > vfirst, x[d] + tm.lat(d) + tm.values_gap, vfirst)
    # what a stage holds: for each set of steps in it, the most value arrays its ALUs and RAMs take beside them
    # (RamGeometry.fits, tabulated: with and without the packet counter, which sits in the values' first stage)
    geo = RamGeometry.of(profile)
    for s, ns in n.items():
        first = vfirst == s
        for k in range(len(steps) + 1):
            for chosen in combinations(steps, k):
                roles_in = {c[0] for c in chosen}
                here = z3.And([x[r] == s for r in roles_in] + [x[r] != s for r in x if r not in roles_in])
                a = sum(c[1] for c in chosen)
                sizes = tuple(b for c in chosen for b in c[2])
                for with_counter in (False, True):
                    counter = tm.counter_blocks if with_counter else 0
                    if a > profile.alus_per_stage or not geo.fits(sizes):
                        cap = -1
                    else:
                        cap = profile.alus_per_stage - a
                        while cap > 0 and vb and not geo.fits(sizes + (vb,) * cap, counter):
                            cap -= 1
                    cond = z3.And(here, first if with_counter else z3.Not(first)) if tm.counter_blocks else here
                    opt.add(z3.Implies(cond, ns <= cap) if cap >= 0 else z3.Not(cond))
                    if not tm.counter_blocks:
                        break
    h = opt.minimize(last)
    if opt.check() != z3.sat:
        return False
    return opt.lower(h).as_long() + 1 + tm.tail == stages_used == opt.upper(h).as_long() + 1 + tm.tail


# ---------------------------------------------------------------------------------------------- one build


def step_dependencies(table: DecisionTable) -> dict[str, set[str]]:
    """Register role -> roles whose results its decision step keys on (they run in earlier stages)."""
    yielded = {s.yields: s.role for s in table.steps if s.yields}
    return {s.role: {yielded[k] for k in s.keys if k in yielded} for s in table.steps}


def levels(tm: Timing, table: DecisionTable) -> dict[str, int]:
    """Role -> the earliest stage its arrays can sit in, ALUs aside."""
    out: dict[str, int] = {}
    for s in table.steps:
        gap = tm.values_gap if s.role == "values" else 0
        out[s.role] = max([tm.first(s.role)] + [out[d] + tm.lat(d) + gap for d in tm.deps.get(s.role, ())])
    return out


def _earliest(profile: TargetProfile, regs: list[dict[str, Any]], table: DecisionTable, tm: Timing) -> None:
    """Each step at its level, the value arrays from theirs on, as many a stage as its free ALUs take
    (SRAM aside): the placement a target without MAU stages gets, and the one a failure is told in."""
    lv = levels(tm, table)
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


def assign(profile: TargetProfile, regs: list[dict[str, Any]], table: DecisionTable, tm: Timing,
           fixed: dict[str, int] | None = None) -> tuple[int, str | None]:
    """Give every register of ``regs`` its ``stage``: ``fixed`` (checked, :func:`check`), else the
    placement :func:`place` finds with the fewest stages, else (nothing fits the SRAM) the earliest one, so
    that the caller's SRAM check can say where it overflows.  Returns (stages of the program, why the
    fixed placement is refused or None)."""
    if fixed is not None:
        return profile.stages or 0, check(profile, regs, fixed, tm)
    if not profile.has_stage_limits:
        _earliest(profile, regs, table, tm)
        return max(r["stage"] for r in regs) + 1, None
    found = place(profile, regs, tm)
    if found is None:
        _earliest(profile, regs, table, tm)
        last = max(r["stage"] for r in regs)
        if last >= profile.stages - tm.tail:
            values = sum(1 for r in regs if r["role"] == "values")
            return profile.stages, (f"the {len(regs)} register arrays ({values} of values) need stages up to {last}; "
                                    f"{profile.name} has stages 1..{profile.stages - 1 - tm.tail} for registers"
                                    + (" (the last moves the values to their next pass)" if tm.tail else ""))
    else:
        for r in regs:
            r["stage"] = found.stage_of[r["name"]]
    return profile.stages, None


def check(profile: TargetProfile, regs: list[dict[str, Any]], placement: dict[str, int], tm: Timing) -> str | None:
    """Put each register in its stage of ``placement``; why the placement is not valid, or None.

    The rules: stage 0 holds the worker look-up, so registers sit in stages 1..stages-1; a stage hosts
    at most alus_per_stage arrays (one stateful ALU and one RegisterAction per array and pass); the
    arrays of one decision step other than the values (the bitmap words) share a stage; a step's arrays
    sit no earlier than its first stage and no earlier than the stage where the results it keys on are
    available (:class:`Timing`).  SRAM per stage is checked with the planner's own rule afterwards."""
    if not profile.has_stage_limits:
        return f"{profile.name} has no MAU stages; a stage placement does not apply"
    names = {r["name"] for r in regs}
    extra, missing = sorted(set(placement) - names), sorted(names - set(placement))
    if extra or missing:
        return (f"the placement names register {extra[0]!r}, which this layout does not have" if extra
                else f"the placement leaves register {missing[0]!r} without a stage")
    for r in regs:
        r["stage"] = placement[r["name"]]
        if not 1 <= r["stage"] < profile.stages - tm.tail:
            return (f"register {r['name']} in stage {r['stage']}; {profile.name} has stages "
                    f"1..{profile.stages - 1 - tm.tail} for registers"
                    + (" (the last moves the values to their next pass)" if tm.tail else ""))
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
    for role, st in stages_of.items():
        if min(st) < tm.first(role):
            return f"{role} in stage {min(st)}; its arrays sit in stage {tm.first(role)} or later"
    for role, deps in tm.deps.items():
        gap = tm.values_gap if role == "values" else 0
        for dep in sorted(deps):
            if role in stages_of and dep in stages_of:
                ready = max(stages_of[dep]) + tm.lat(dep) + gap
                if min(stages_of[role]) < ready:
                    return (f"{role} in stage {min(stages_of[role])} keys on the result of {dep} in stage "
                            f"{max(stages_of[dep])}; it must sit in stage {ready} or later")
    return None
