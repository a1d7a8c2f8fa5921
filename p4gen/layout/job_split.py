"""Several jobs on one switch: one program (layout) for all, slots and pipes split between them.

The switch runs one program, so every job uses the same layout (elements per packet,
passes, mode, pipes, value width); a sparse job makes it an OmniReduce program, on which
dense jobs run with every block present.  The split gives each job

* a slot range (``slot_base``, ``slot_count``): the ranges are disjoint and together fit
  the layout's largest slot count, because the controller checks slot ranges switch-wide;
* a pipe group: with folded passes over ``f`` pipes the switch has ``pipes // f`` groups of
  pipes (home pipe ``g * f``); a job's workers sit in its group's home pipe, whose ports
  bound the workers a group takes.

Jobs meet on shared resources: the recirculation port (every job of a same-pipe layout
recirculates through pipe 0's; a folded layout's harvest passes through its group's
pipes), a group's home-pipe ingress and a software switch's packet rate.  Each job uses
a fraction of a resource at its own saturated window; when the fractions of a
resource's users add up to a load above 1, the model slows every user by that load (each
gets a share in proportion to its demand): the job's time is at least its saturated time
times the load.  That floor does not depend on the split, so the split stays separable.  Each job's own time falls with its window and is convex in it
up to saturation, so the split is exact: a bisection on the makespan (each job's smallest
window that meets it), or for the sum of completion times a bisection on the marginal
gain of one more slot.  Layouts are tried in order of a lower bound (every job alone
with all the slots it can use) and the search stops when the bound passes the best
found; every pipe-group assignment is tried for each layout that remains.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from .. import protocols
from ..errors import InfeasibleError
from ..spec import make_spec
from ..target import TargetProfile
from . import search as S
from .cost import Geometry, Prediction, Workload, ports_per_pipe, predict, workload_problem
from ..pass_shape import PassShape

SPLIT_OBJECTIVES = ("makespan", "sum")


@dataclass(frozen=True)
class Job:
    name: str
    workload: Workload


@dataclass
class JobPlan:
    job: Job
    group: int
    slot_base: int
    slot_count: int
    time_s: float
    prediction: Prediction


@dataclass
class Split:
    spec: Any                      # the common Spec (slots = the layout's largest)
    shape: PassShape
    jobs: list[JobPlan]
    objective: str

    @property
    def value(self) -> float:
        return _objective(self.objective, [j.time_s for j in self.jobs])


def _objective(objective: str, times: list[float]) -> float:
    return max(times) if objective == "makespan" else sum(times)


class _JobModel:
    """One job's predicted time as a function of its window, on one layout."""

    def __init__(self, profile: TargetProfile, job: Job, spec, shape: PassShape, smax: int):
        self.profile, self.job, self.spec, self.shape = profile, job, spec, shape
        self._cache: dict[int, Prediction] = {}
        self.sat = max(1, min(smax, self.at(smax).window_saturates_at))

    def at(self, slots: int) -> Prediction:
        p = self._cache.get(slots)
        if p is None:
            geo = Geometry(self.spec.protocol, self.spec.elements_per_packet, self.shape.passes, self.shape.mode,
                           self.shape.pipes, self.spec.value_width, slots)
            p = self._cache[slots] = predict(self.profile, self.job.workload, geo)
        return p

    def demand(self, resource: str) -> float:
        """The fraction of ``resource`` the job uses at its saturated window (0 when it does not use it)."""
        p = self.at(self.sat)
        rate = p.rates.get(resource)
        return p.rate / rate if rate else 0.0


SHARED = ("recirculation", "pipe", "switch")


def _share_groups(resource: str, shape: PassShape, group_of: list[int]) -> list[list[int]]:
    """Which jobs share ``resource``: switch-wide, or per pipe group."""
    n = len(group_of)
    if resource == "switch" or (resource == "recirculation" and shape.pipes == 1):
        return [list(range(n))]
    out: dict[int, list[int]] = {}
    for j, g in enumerate(group_of):
        out.setdefault(g, []).append(j)
    return list(out.values())


def _floors(models: list[_JobModel], shape: PassShape, group_of: list[int]) -> list[float]:
    """Each job's time floor from the resources it shares: an overloaded resource slows all its users alike."""
    floors = [0.0] * len(models)
    for res in SHARED:
        for members in _share_groups(res, shape, group_of):
            load = sum(models[j].demand(res) for j in members)
            if len(members) < 2 or load <= 1:
                continue
            for j in members:
                if models[j].demand(res):
                    floors[j] = max(floors[j], models[j].at(models[j].sat).time_s * load)
    return floors


def _time(m: _JobModel, floor: float, s: int) -> float:
    return max(m.at(s).time_s, floor)


def _smallest(m: _JobModel, floor: float, target: float) -> int | None:
    if _time(m, floor, m.sat) > target:
        return None
    lo, hi = 1, m.sat
    while lo < hi:
        mid = (lo + hi) // 2
        if _time(m, floor, mid) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _split_makespan(models, floors, total: int) -> list[int] | None:
    if len(models) > total:
        return None
    lo = max(_time(m, f, m.sat) for m, f in zip(models, floors))
    hi = max(_time(m, f, 1) for m, f in zip(models, floors))

    def need(t: float) -> list[int] | None:
        out = [_smallest(m, f, t) for m, f in zip(models, floors)]
        return None if any(s is None for s in out) or sum(out) > total else out

    if need(lo) is not None:
        best = need(lo)
    else:
        for _ in range(200):
            mid = (lo + hi) / 2
            if need(mid) is not None:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-12 * hi:
                break
        best = need(hi)
    if best is None:
        return None
    # slots left over raise the windows of the jobs that can still use them (never a slower job)
    return _spread(models, best, total)


def _spread(models, slots: list[int], total: int, headroom: float = 2.0) -> list[int]:
    """Slots left over go first to every job up to its saturating window (slowest first), then as
    headroom, up to that window times ``headroom`` (the time stays the same; a slower round trip
    no longer idles the link).  A sparse job gets no headroom: its time grows past saturation."""
    left = total - sum(slots)
    out = list(slots)
    order = sorted(range(len(models)), key=lambda j: -models[j].at(out[j]).time_s)
    sparse = lambda m: protocols.protocol(m.spec.protocol).sparse  # noqa: E731
    for cap in (lambda m: m.sat, lambda m: m.sat if sparse(m) else int(headroom * m.sat)):
        for j in order:
            extra = max(0, min(left, cap(models[j]) - out[j]))
            out[j] += extra
            left -= extra
    return out


def _split_sum(models, floors, total: int) -> list[int] | None:
    """Minimise the sum of convex, non-increasing times under a slot budget (marginal bisection)."""
    if len(models) > total:
        return None
    if sum(m.sat for m in models) <= total:
        return _spread(models, [m.sat for m in models], total)

    def gain(j: int, s: int) -> float:
        m, f = models[j], floors[j]
        return _time(m, f, s) - _time(m, f, s + 1) if s < m.sat else 0.0

    def take(j: int, lam: float) -> int:
        # the smallest s whose next slot gains no more than lam (gains fall as s grows)
        lo, hi = 1, models[j].sat
        while lo < hi:
            mid = (lo + hi) // 2
            if gain(j, mid) <= lam:
                hi = mid
            else:
                lo = mid + 1
        return lo

    lo, hi = 0.0, max(gain(j, 1) for j in range(len(models)))
    for _ in range(200):
        lam = (lo + hi) / 2
        if sum(take(j, lam) for j in range(len(models))) > total:
            lo = lam
        else:
            hi = lam
        if hi - lo <= 1e-15 + 1e-12 * hi:
            break
    out = [take(j, hi) for j in range(len(models))]
    left = total - sum(out)
    # the budget left goes, one slot at a time, to the largest remaining gains (all equal to ~lam)
    while left > 0:
        j = max(range(len(models)), key=lambda j: gain(j, out[j]))
        if gain(j, out[j]) <= 0:
            break
        out[j] += 1
        left -= 1
    return out


def _assignments(n: int, groups: int):
    """Jobs onto groups, up to renaming the (identical) groups: each job joins a used group or the next."""
    def rec(j: int, used: int, acc: list[int]):
        if j == n:
            yield list(acc)
            return
        for g in range(min(used + 1, groups)):
            acc.append(g)
            yield from rec(j + 1, max(used, g + 1), acc)
            acc.pop()
    yield from rec(0, 0, [])


def _ports_ok(profile: TargetProfile, jobs: list[Job], group_of: list[int]) -> bool:
    """Each pipe group's home pipe has a port for every worker of its jobs (a port's share of the pipe each)."""
    share: dict[int, float] = {}
    for job, g in zip(jobs, group_of):
        ports = ports_per_pipe(profile, job.workload)
        if ports is not None:
            share[g] = share.get(g, 0.0) + job.workload.workers / ports
    return all(v <= 1 + 1e-9 for v in share.values())


def _evaluate(profile, jobs, spec, shape, smax, group_of, objective) -> Split | None:
    models = [_JobModel(profile, j, spec, shape, smax) for j in jobs]
    floors = _floors(models, shape, group_of)
    slots = (_split_makespan if objective == "makespan" else _split_sum)(models, floors, smax)
    if slots is None:
        return None
    plans, base = [], 0
    for job, m, f, g, s in zip(jobs, models, floors, group_of, slots):
        plans.append(JobPlan(job, g, base, s, _time(m, f, s), m.at(s)))
        base += s
    return Split(replace(spec, slots=smax), shape, plans, objective)


def equal_split(profile: TargetProfile, jobs: list[Job], split: Split) -> Split:
    """The same layout with the slots split equally and the jobs dealt round-robin onto the pipe groups."""
    smax = split.spec.slots
    groups = max(1, profile.pipes // split.shape.pipes) if profile.is_tna else 1
    group_of = [i % groups for i in range(len(jobs))]
    if not _ports_ok(profile, jobs, group_of):
        group_of = [p.group for p in split.jobs]
    models = [_JobModel(profile, j, split.spec, split.shape, smax) for j in jobs]
    floors = _floors(models, split.shape, group_of)
    each = smax // len(jobs)
    plans = [JobPlan(j, g, i * each, each, _time(m, f, each), m.at(each))
             for i, (j, m, f, g) in enumerate(zip(jobs, models, floors, group_of))]
    return Split(split.spec, split.shape, plans, split.objective)


def plan_jobs(profile: TargetProfile, jobs: list[Job], objective: str = "makespan",
              variant: str | None = None, widths: list[int] | None = None,
              progress: Callable[[str], None] | None = None) -> tuple[Split, int]:
    """The best common layout and split for ``jobs``; also the number of layouts evaluated.  ``progress``
    is called with one line as each stage of the search begins."""
    note = progress or (lambda _line: None)
    if objective not in SPLIT_OBJECTIVES:
        raise InfeasibleError(f"objective={objective!r} must be makespan or sum for several jobs")
    protocol = (protocols.sparse_protocol() if any(j.workload.density < 1 for j in jobs) else protocols.DEFAULT).name
    variant = variant or protocols.without_fifo(protocol).name
    if variant not in protocols.search_variant_names(protocol):
        raise InfeasibleError(f"variant={variant!r}: a layout search takes one variant, "
                              f"{' or '.join(protocols.search_variant_names(protocol))}")
    if len(jobs) < 2:
        raise InfeasibleError(f"a jobs file needs at least 2 jobs; it has {len(jobs)} (plan one job with --workers)")
    for j in jobs:
        why = workload_problem(profile, j.workload)
        if why:
            raise InfeasibleError(f"job {j.name}: {why}")
    mw = max(32, max(j.workload.workers for j in jobs))
    base = make_spec(protocol=protocol, variant=variant, max_workers=mw, slots=1, elements_per_packet=2,
                     jobs=len(jobs), value_width=max(widths or [32]))
    ctx = S.SearchContext(profile, jobs[0].workload, base)
    layouts = []
    all_shapes = S.shapes(ctx, widths or [32])
    note(f"fitting {len(all_shapes)} layouts of {protocol} ({variant}) to {profile.name} with a slot for each of "
         f"{len(jobs)} jobs")
    for e, p, mode, pipes, w in all_shapes:
        spec = replace(base, elements_per_packet=e, value_width=w)
        shape = PassShape(p, mode, pipes)
        smax = S.largest_slots(ctx, spec, shape)
        if smax >= len(jobs):
            bound = _objective(objective, [_JobModel(profile, j, spec, shape, smax).at(smax).time_s for j in jobs])
            layouts.append((bound, spec, shape, smax))
    if not layouts:
        raise InfeasibleError(f"no layout of {protocol} on {profile.name} has a slot for each of {len(jobs)} jobs")
    layouts.sort(key=lambda t: t[0])
    note(f"{len(layouts)} fit; splitting the slots between the jobs, best bound first")
    best: Split | None = None
    evaluated = 0
    for bound, spec, shape, smax in layouts:
        if best is not None and bound >= best.value:
            break
        evaluated += 1
        groups = max(1, profile.pipes // shape.pipes) if profile.is_tna else 1
        for group_of in _assignments(len(jobs), groups):
            if not _ports_ok(profile, jobs, group_of):
                continue
            split = _evaluate(profile, jobs, spec, shape, smax, group_of, objective)
            if split is not None and (best is None or split.value < best.value):
                best = split
    if best is None:
        raise InfeasibleError(f"the jobs' workers do not fit the ports of {profile.name}'s pipes with any layout")
    # the program's placement: the inner level's, re-checked by the planner when it is built
    cand = S.candidate(ctx, best.spec, best.shape, best.spec.slots)
    best.shape = cand.shape if cand else best.shape
    return best, evaluated


def home_pipe(profile: TargetProfile, split: Split, group: int) -> int:
    return group * split.shape.pipes if profile.is_tna else 0
