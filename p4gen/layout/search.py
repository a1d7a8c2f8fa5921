"""The outer level of the search: elements per packet, passes, pipes, PHV mode, value width, slots.

Every shape (elements E, passes P, mode, pipes, value width) that the target's frame size,
pass limit, lanes and PHV allow is enumerated; none is skipped.  Along the slot axis the
search is exact without enumerating every count: fitting never gets easier with more slots
(every array grows), so the largest slot count that fits is found by bisection; below the
window that reaches the other bounds (``window_saturates_at``) the predicted time falls
with every slot added, and above it a dense job's time stays flat while a sparse job's
grows (one more discovery round per stream), so the time-optimal window is
``min(largest that fits, window_saturates_at)``.  For each shape and slot count the inner
level (:mod:`p4gen.planner.placement`) finds the placement with the fewest stages exactly.  The result is
the optimum on the cost model over the whole space; its size is reported.
"""

from __future__ import annotations

import functools

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..planner import placement
from .. import planner, protocols
from ..errors import InfeasibleError
from ..pass_shape import PassShape
from ..planner import Fit, fit, phv_bits
from ..program import MAX_HEADER_SLOTS
from ..spec import Spec, make_spec
from ..target import TargetProfile
from ..wire import wire_headers
from .cost import Geometry, Prediction, Workload, predict, workload_problem

OBJECTIVES = ("time", "slots", "stages")


@dataclass
class Candidate:
    spec: Spec                 # protocol, variant, workers, slots, elements, value width
    shape: PassShape           # passes, mode, pipes, placement
    placement: placement.Placement | None
    prediction: Prediction
    label: str = ""

    @property
    def key(self) -> tuple:
        return (self.spec.elements_per_packet, self.shape.passes, self.shape.mode, self.shape.pipes,
                self.spec.value_width)

    @property
    def stages_used(self) -> int | None:
        return self.placement.stages_used if self.placement else None

    @property
    def sram_blocks(self) -> int | None:
        return self.placement.sram_blocks if self.placement else None

    def describe(self) -> dict[str, Any]:
        s, p = self.spec, self.prediction
        return {"label": self.label, "elements_per_packet": s.elements_per_packet, "passes": self.shape.passes,
                "mode": self.shape.mode, "pipes": self.shape.pipes, "value_width": s.value_width, "slots": s.slots,
                "variant": s.variant, "stages_used": self.stages_used, "sram_blocks": self.sram_blocks,
                "predicted": p.to_dict()}


@dataclass
class SearchResult:
    profile: TargetProfile
    workload: Workload
    objective: str
    best: Candidate
    runners_up: list[Candidate]
    references: list[Candidate]
    shapes: int                # shapes enumerated
    shapes_fitting: int        # shapes with a slot count that fits
    slot_range: int            # slot counts per shape covered by the bisection
    certified: bool | None = None   # Z3 confirmed the best placement's stage count (None: not asked)
    notes: list[str] = field(default_factory=list)

    def gain(self, ref: Candidate) -> float:
        return 100.0 * (ref.prediction.time_s - self.best.prediction.time_s) / ref.prediction.time_s


@dataclass
class SearchContext:
    """What every step of one search shares: the target, the workload, the base spec (protocol, variant,
    workers, jobs) and the variant resolved once by the planner's first pass (its decision table and
    step timing)."""

    profile: TargetProfile
    workload: Workload
    base: Spec
    headroom: float = 1.0      # the window over the smallest that reaches the other bounds (dense jobs)
    _shaped: dict[tuple[Spec, PassShape], Fit] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def seed(self) -> Fit:
        """The base spec's variant, resolved (:func:`p4gen.planner.choose_variant`)."""
        return planner.choose_variant(Fit(self.base, self.profile, variant=self.base.variant))

    def timing(self, shape: PassShape) -> placement.Timing:
        """The variant's step timing with the stages ``shape`` needs after its value arrays."""
        return self.seed.timing.with_tail(placement.tail_stages(self.profile, shape.passes, shape.mode))

    def shaped(self, spec: Spec, shape: PassShape) -> Fit:
        """The planner's shape pass on ``spec`` (its elements and width) and ``shape``, with the base's timing."""
        key = (replace(spec, slots=1), shape)
        if key not in self._shaped:
            self._shaped[key] = planner.shape(replace(self.seed, spec=spec, shape=shape,
                                                      elements=spec.elements_per_packet))
        return self._shaped[key]


def _mtu_elements(profile: TargetProfile, protocol: str, width: int) -> int:
    hdr = sum(b for name, f in wire_headers(protocol) if name != "ethernet" for _, b in f) // 8
    top = (profile.mtu_bytes - hdr) * 8 // width
    if protocols.protocol(protocol).sparse and profile.packet_headroom_bytes is not None:
        top = min(top, profile.packet_headroom_bytes * 8 // width)     # a result grows by the block
    return top


def shapes(ctx: "SearchContext", widths: list[int]) -> list[tuple[int, int, str, int, int]]:
    """Every (elements, passes, mode, pipes, width) the frame, pass and lane limits and the PHV allow."""
    profile, protocol = ctx.profile, ctx.base.protocol
    out = []
    lanes = profile.lanes_per_register
    budget = profile.phv_budget_bits
    for w in widths:
        for e in range(lanes, _mtu_elements(profile, protocol, w) + 1, lanes):
            if e % 2:
                continue
            for p in range(1, (1 if protocols.protocol(protocol).sparse else profile.max_passes) + 1):
                if e % p or (e // p) % lanes:
                    continue
                modes = ["resident"] + (["stream"] if p > 1 and profile.is_tna else [])
                for mode in modes:
                    if budget is not None and phv_bits(replace(ctx.seed, spec=replace(ctx.base, value_width=w)), e, p,
                                                       mode) > budget:
                        continue
                    for pipes in sorted({1, p}):
                        if pipes > 1 and (not profile.is_tna or pipes > profile.pipes):
                            continue
                        out.append((e, p, mode, pipes, w))
    return out


def _placed(ctx: SearchContext, spec: Spec, shape: PassShape, slots: int) -> Fit:
    """The planner's shape, registers and place passes for one layout at ``slots``."""
    lay = ctx.shaped(spec, shape)
    return lay if lay.failure is not None else planner.run(planner.SLOTTED, replace(lay, slots=slots))


def _fits(ctx: SearchContext, spec: Spec, shape: PassShape, slots: int) -> placement.Placement | None:
    lay = _placed(ctx, spec, shape, slots)
    if lay.failure is not None:
        return None
    if not ctx.profile.has_stage_limits:
        return placement.Placement(None, None, 0)       # no MAU stages: nothing to place
    return placement.Placement({r.name: r.stage for r in lay.registers}, planner.stages_used(lay),
                               sum(r.sram_blocks for r in lay.registers))


def largest_slots(ctx: SearchContext, spec: Spec, shape: PassShape) -> int:
    lo, hi = 0, MAX_HEADER_SLOTS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _fits(ctx, spec, shape, mid) is not None:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _geometry(spec: Spec, shape: PassShape, slots: int) -> Geometry:
    return Geometry(spec.protocol, spec.elements_per_packet, shape.passes, shape.mode, shape.pipes, spec.value_width,
                    slots)


def candidate(ctx: SearchContext, spec: Spec, shape: PassShape, slots: int, label: str = "") -> Candidate | None:
    spec = replace(spec, slots=slots)
    found = _fits(ctx, spec, shape, slots)
    if found is None:
        return None
    shape = replace(shape, placement=found.as_tuple())
    return Candidate(spec, shape, found, predict(ctx.profile, ctx.workload, _geometry(spec, shape, slots)), label)


def _window_for(ctx: SearchContext, spec: Spec, shape: PassShape, smax: int, target: float | None) -> int:
    """Time objective (target None): the smallest window that reaches the other bounds; else the
    smallest window whose predicted time is within ``target``.  Then, for dense jobs, that window
    times the headroom where it fits: the time stays the same, and a round trip slower than the
    mean no longer idles the link (bench/plan.py measures what a window without headroom loses)."""
    sat = predict(ctx.profile, ctx.workload, _geometry(spec, shape, smax)).window_saturates_at
    if target is None:
        w = max(1, min(smax, sat))
    else:
        lo, hi = 1, max(1, min(smax, sat))
        while lo < hi:
            mid = (lo + hi) // 2
            if predict(ctx.profile, ctx.workload, _geometry(spec, shape, mid)).time_s <= target:
                hi = mid
            else:
                lo = mid + 1
        w = lo
    if not protocols.protocol(spec.protocol).sparse:    # a sparse job's time grows with the window past saturation
        w = min(smax, math.ceil(ctx.headroom * w - 1e-9))
    return w


def _order(objective: str):
    if objective == "time":
        return lambda c: (c.prediction.time_s, c.stages_used or 0, c.sram_blocks or 0, c.spec.slots)
    if objective == "slots":
        return lambda c: (c.sram_blocks or 0, c.spec.slots, c.prediction.time_s)
    return lambda c: (c.stages_used or 0, c.prediction.time_s, c.sram_blocks or 0)


def search(profile: TargetProfile, workload: Workload, *, protocol: str = protocols.DEFAULT.name,
           variant: str | None = None,
           widths: list[int] | None = None, objective: str = "time", slack: float = 0.05,
           max_workers: int | None = None, top: int = 4, certify: bool = True,
           fill_rtt: bool = False, headroom: float = 2.0,
           progress: Callable[[str], None] | None = None) -> SearchResult:
    """The best layout of ``workload`` on ``profile`` for ``objective``, its runners-up and the references.
    ``progress`` is called with one line as each stage of the search begins (the CLI prints them)."""
    note = progress or (lambda _line: None)
    if objective not in OBJECTIVES:
        raise InfeasibleError(f"objective={objective!r} must be one of {', '.join(OBJECTIVES)}")
    why = workload_problem(profile, workload)
    if why:
        raise InfeasibleError(why)
    protocols.protocol(protocol)
    variant = variant or protocols.without_fifo(protocol).name
    names = protocols.search_variant_names(protocol)
    if variant not in names:
        raise InfeasibleError(f"variant={variant!r}: a layout search takes one variant, {' or '.join(names)}")
    widths = widths or [32]
    mw = max_workers or max(32, workload.workers)
    base = make_spec(protocol=protocol, variant=variant, max_workers=mw, slots=1, elements_per_packet=2,
                     value_width=max(widths))
    if not 1 <= headroom <= 100:
        raise InfeasibleError(f"window headroom {headroom:g} must be in 1..100")
    ctx = SearchContext(profile, workload, base, headroom)
    all_shapes = shapes(ctx, widths)
    note(f"fitting {len(all_shapes)} layouts of {protocol} ({variant}) to {profile.name}: elements per packet, "
         f"passes, pipes, each at its most slots")
    fitted: list[tuple[Spec, PassShape, int]] = []
    for e, p, mode, pipes, w in all_shapes:
        spec = replace(base, elements_per_packet=e, value_width=w)
        shape = PassShape(p, mode, pipes)
        smax = largest_slots(ctx, spec, shape)
        if smax:
            fitted.append((spec, shape, smax))
    if not fitted:
        raise InfeasibleError(_nothing_fits(profile, protocol, variant, mw))
    note(f"{len(fitted)} fit; predicting each one's time at its best window")
    fastest = [candidate(ctx, spec, shape, _window_for(ctx, spec, shape, smax, None)) for spec, shape, smax in fitted]
    all_fitted = fitted
    if fill_rtt:
        # the window must cover the bandwidth-delay product: the window bound at least the link's
        full = [i for i, c in enumerate(fastest) if c and c.prediction.rates["window"] >= c.prediction.rates["link"]]
        if not full:
            raise InfeasibleError(_window_limit(ctx, fitted, fastest))
        fitted = [fitted[i] for i in full]
        fastest = [fastest[i] for i in full]
    t_best = min(c.prediction.time_s for c in fastest if c)
    if objective == "time":
        pool = [c for c in fastest if c]
    else:
        target = t_best * (1 + slack)
        pool = [c for c in (candidate(ctx, spec, shape, _window_for(ctx, spec, shape, smax, target))
                            for spec, shape, smax in fitted) if c and c.prediction.time_s <= target]
    pool.sort(key=_order(objective))
    best = pool[0]
    # runners-up: the best of each other family (passes, mode, pipes, width), so they differ in kind
    seen, runners = {best.key[1:]}, []
    for c in pool[1:]:
        if c.key[1:] not in seen and len(runners) < top:
            seen.add(c.key[1:])
            runners.append(c)
    best.label = "best"
    for c in [best] + runners:
        _recheck(profile, c)
    result = SearchResult(profile, workload, objective, best, runners, references(ctx, all_fitted), len(all_shapes),
                          len(all_fitted), MAX_HEADER_SLOTS)
    if certify and profile.has_stage_limits:
        note("certifying with Z3 that the best layout's stage placement uses the fewest stages")
        lay = _placed(ctx, best.spec, best.shape, best.spec.slots)
        regs = [{"name": r.name, "role": r.role, "entries": r.entries, "entry_bits": r.entry_bits} for r in lay.registers]
        result.certified = placement.certify(profile, regs, lay.timing_with_tail, best.stages_used)
    return result


def _recheck(profile: TargetProfile, c: Candidate) -> None:
    """The planner's fit pass re-checks every layout the search returns."""
    try:
        fit(c.spec, profile, c.shape)
    except InfeasibleError as exc:
        raise InfeasibleError(f"the planner refuses the searched layout ({c.spec.elements_per_packet} elements, "
                              f"{c.shape.passes} {c.shape.mode} passes over {c.shape.pipes} pipes, {c.spec.slots} "
                              f"slots): {exc}") from None


def _window_limit(ctx: SearchContext, fitted, fastest: list[Candidate | None]) -> str:
    """One line: the window that would fill the RTT, and the limit that stops it (the closest layout)."""
    def need(c: Candidate) -> int:      # the window whose bound reaches the link's
        return math.ceil(c.prediction.rates["link"] * c.prediction.cycle_us * 1e-6 - 1e-9)

    i = max(range(len(fitted)), key=lambda i: fitted[i][2] / need(fastest[i]) if fastest[i] else 0)
    spec, shape, smax = fitted[i]
    need = need(fastest[i])
    wl = ctx.workload
    if smax >= MAX_HEADER_SLOTS:
        limit = f"the {MAX_HEADER_SLOTS.bit_length() - 1}-bit slot field of pool_index allows {MAX_HEADER_SLOTS}"
    elif ctx.profile.has_stage_limits:
        limit = (f"{ctx.profile.name}'s SRAM ({ctx.profile.register_sram_limit} blocks per stage, "
                 f"{ctx.profile.stages} stages) fits {smax}")
    else:
        limit = f"{ctx.profile.name} allows {ctx.profile.max_register_entries} entries per register: {smax} slots"
    return (f"filling a {wl.rtt_us:g} us RTT at {wl.link_gbps:g} Gb/s needs a window of {need} slots even with the "
            f"closest layout ({spec.elements_per_packet} elements in {shape.passes} pass(es) over {shape.pipes} "
            f"pipe(s)); {limit}")


def _nothing_fits(profile: TargetProfile, protocol: str, variant: str, workers: int) -> str:
    try:
        fit(make_spec(protocol=protocol, variant=variant, max_workers=workers, slots=1), profile)
    except InfeasibleError as exc:
        return str(exc)
    return f"no layout of {protocol} ({variant}) fits {profile.name}"


def references(ctx: SearchContext, fitted: list[tuple[Spec, PassShape, int]]) -> list[Candidate]:
    """Today's planner rule at its best window, and the protocol's published layouts (TNA targets)."""
    out: list[Candidate] = []
    prof, base = ctx.profile, ctx.base
    try:
        lay = fit(replace(base, elements_per_packet=None, slots=1), prof)
    except InfeasibleError:
        lay = None
    if lay is not None:
        spec = replace(base, elements_per_packet=lay.elements)
        shape = PassShape(lay.passes, lay.mode, lay.pipes)
        smax = next((m for s, sh, m in fitted if s.elements_per_packet == lay.elements and sh == shape
                     and s.value_width == base.value_width), 0)
        if smax:
            c = candidate(ctx, spec, shape, _window_for(ctx, spec, shape, smax, None),
                           f"p4gen default ({lay.elements} per packet, {lay.passes} pass)")
            if c:
                out.append(c)
    proto = protocols.protocol(base.protocol)
    if prof.is_tna:
        for e, passes, pipes, label in proto.published_layouts:
            if pipes > prof.pipes:
                continue
            geo = Geometry(proto.name, e, passes, "stream", pipes, 32, 1, harvest_lanes=32, label=label)
            sat = predict(prof, ctx.workload, replace(geo, slots=proto.published_slots)).window_saturates_at
            geo = replace(geo, slots=min(proto.published_slots, sat))
            spec = replace(base, elements_per_packet=e, value_width=32, slots=geo.slots)
            out.append(Candidate(spec, PassShape(passes, "stream", pipes), None, predict(prof, ctx.workload, geo), label))
    return out
