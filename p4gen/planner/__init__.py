"""Fit a Spec to a target and lay it out: Spec + TargetProfile -> Plan, as an ordered list of passes.

Every pass takes one frozen :class:`Fit` and returns one (:data:`PASSES`, in the order they run):

1. :func:`choose_variant` resolves the variant once: its decision table, its step timing on the target
   (:func:`p4gen.planner.placement.timing`), the protocol's headers and the variant to compare with.  It is the
   only pass that reads the protocol registry.  ``variant=auto`` tries the protocol's variants in the
   order :mod:`p4gen.protocols` declares them, each until one fits.
2. :func:`shape`: the element count (the spec's, or the largest power of two whose packet fits one
   pass), frame size, headroom, passes and PHV; independent of the slots.
3. :func:`registers`: the register arrays of the table's steps at the fit's slots (:mod:`p4gen.registers`).
4. :func:`place`: their stages (:func:`p4gen.planner.placement.assign`) and the SRAM and entry limits.
5. :func:`program`: the P4 program's tables, actions, counters and their P4Runtime IDs, with the
   decision table expanded into ``dt_*`` const entries.
6. :func:`account`: the resource table, the other variant laid out at the same shape for comparison
   (``alternative``) and the most slots the chosen shape holds (``limits``).

Passes 2-4 stop at the first failure; :func:`fit` then tries the next variant, and when none fits raises
one line that names the requested value, the limit, the target and the largest value that fits.
:func:`make_plan` builds the Plan from the last Fit directly (no JSON document in between).

Stages (targets with MAU stages): stage 0 looks the worker up, and each step of the decision table goes
to the earliest stage after the steps whose observations it reads.  On tofino, for instance, that gives
``chunk | bitmap | counter + exponent | values ...`` for SwitchML's hardened variant and
``bitmap | counter | exponent + values ...`` for its reference variant.  Each stateful ALU hosts one
register array and runs one RegisterAction per pass; a value array holds ``lanes_per_register`` values
per entry.  Packets whose elements do not fit one pass are recirculated: pass p uses the same value
arrays at index ``(slot_copy << pass_bits) | p``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from .. import __version__, decision, protocols
from . import placement
from ..decision import Codes, DecisionTable, FrozenMap
from ..errors import InfeasibleError
from ..pass_shape import PassShape, shape_problem
from ..plan import (Action, Alternative, Counter, Entry, Field, Generator, Header, Key, Limits, P4Names, Params,
                   Plan, Register, Resources, Stage, Table, op_codes as ops_op_codes)
from ..program import (MAX_HEADER_SLOTS, SLOT_BITS, p4names, plan_headers, plan_params, program_metadata,
                      program_objects, register_geometry)
from ..registers import BITMAP_WORD_BITS, Geometry, arrays_of, register_arrays
from ..spec import MAX_ELEMENTS, Spec
from ..target import TargetProfile
from ..wire import pass_header, wire_headers

@dataclass(frozen=True)
class Fit:
    """One fit of a spec to a target, as the passes fill it in: what each pass resolved, and the failure
    that stopped the fit, if any (``(limit name, explanation)``)."""

    spec: Spec
    profile: TargetProfile
    shape: PassShape | None = None           # a layout's shape (``p4gen plan``); None: the planner's rule
    variant: str = ""
    elements: int = 0                        # 0: the default element count (shape chooses it)
    slots: int = 0
    # choose_variant
    table: DecisionTable | None = None
    timing: placement.Timing | None = None   # the steps' timing on the target, without the tail
    sparse: bool = False
    headers: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()      # the protocol's wire headers
    other: tuple[str, str | None] = ("", None)       # the variant to compare with, why there is none
    # shape
    passes: int = 1
    per_pass: int = 0
    pass_bits: int = 0
    mode: str = "resident"                   # PassShape.mode
    pipes: int = 1                           # PassShape.pipes: pipes the passes run in
    phv_bits: int = 0
    tail: int = 0                            # stages after the last value array (placement.tail_stages)
    fallback: tuple[str, str] | None = None  # no default element count fits one pass: the failure if the rest fits
    # registers, place
    arrays: tuple[dict[str, Any], ...] = ()  # the register arrays (p4gen.registers), before they are placed
    registers: tuple[Register, ...] = ()     # the arrays placed
    stages: tuple[Stage, ...] = ()
    # program
    tables: tuple[Table, ...] = ()
    actions: tuple[Action, ...] = ()
    counters: tuple[Counter, ...] = ()
    # account (``compared`` and ``largest_slots`` are given by the caller, who re-runs the passes)
    compared: "Fit | None" = None
    largest_slots: int = 0
    resources: Resources | None = None
    alternative: Alternative | None = None
    failure: tuple[str, str] | None = None

    def failed(self, limit: str, why: str) -> "Fit":
        return dataclasses.replace(self, failure=(limit, why))

    @property
    def timing_with_tail(self) -> placement.Timing:
        return self.timing.with_tail(self.tail)


# ---------------------------------------------------------------------------------------------- 1. variant

def variants_to_try(spec: Spec) -> list[str]:
    """The variants ``spec`` allows, in the order they are tried."""
    if spec.variant == "auto":
        return [v.name for v in protocols.variants(spec.protocol)]
    return [protocols.variant(spec.protocol, spec.variant).name]


def choose_variant(fit: Fit) -> Fit:
    """Resolve ``fit.variant`` once: its decision table, its step timing, the protocol's headers and
    sparseness, and the variant plan.json compares it with."""
    spec, profile = fit.spec, fit.profile
    proto = protocols.protocol(spec.protocol)
    table = protocols.variant(spec.protocol, fit.variant).table
    return dataclasses.replace(
        fit, table=table, timing=placement.timing(profile, table, spec.max_workers, spec.value_width),
        sparse=proto.sparse, headers=tuple((n, tuple(f)) for n, f in wire_headers(spec.protocol)),
        other=protocols.other_variant(spec.protocol, fit.variant))


# ---------------------------------------------------------------------------------------------- 2. shape

def _value_capacity(fit: Fit, passes: int = 1, mode: str = "resident") -> int | None:
    """Value arrays one pass can host besides the table's other steps, or None when unbounded."""
    profile, spec, table = fit.profile, fit.spec, fit.table
    if not profile.has_stage_limits:
        return None
    g = Geometry(1, spec.max_workers, spec.value_width, 0, profile.lanes_per_register, 0, 1)
    arrays = {role: arrays_of(table, g, role) for role in table.roles if role != "values"}
    tm = fit.timing.with_tail(placement.tail_stages(profile, passes, mode))
    return placement.value_capacity(profile, arrays, tm)


def _header_bits(fit: Fit, passes: int, mode: str = "resident") -> int:
    bits = sum(w for _, fields in fit.headers for _, w in fields)
    if passes > 1:
        bits += sum(w for _, w in pass_header(mode)[1])
    return bits


def phv_bits(fit: Fit, elements: int, passes: int, mode: str) -> int:
    """PHV bits the program occupies, ingress and egress: the headers each parses (and a bit a header
    for its validity), the values a pass holds, the metadata (:func:`metadata`) and the
    target's fixed part (``phv_fixed_bits``: intrinsic metadata and the compiler's own fields).

    A resident layout holds every value of the packet in each pass; a streamed one only
    the values of the pass (the rest of the payload is not parsed)."""
    spec, profile = fit.spec, fit.profile
    held = elements // passes if mode == "stream" else elements
    data_headers = 1 if mode == "stream" or passes == 1 else passes
    ingress = _header_bits(fit, passes, mode) + held * spec.value_width
    ingress += len(fit.headers) + data_headers + (1 if passes > 1 else 0)
    egress = _header_bits(fit, 1) + len(fit.headers)
    meta = sum(b for _n, b in metadata(fit, passes, mode))
    return ingress + meta + egress + (profile.phv_fixed_bits or 0)


def _choose_passes(fit: Fit, elements: int) -> tuple[int, int, str] | None:
    """(passes, per_pass, mode) for ``elements``, or None when no split fits.  Several passes are
    resident where their values fit, else streamed (a streamed pass needs no stage to move the values).
    The fewest passes whose PHV fits win; a dense packet whose values fit the stages but not the PHV in
    fewer passes takes more (when none fits the PHV, the fewest passes, and the PHV check says why)."""
    profile = fit.profile
    lanes = profile.lanes_per_register
    cap = _value_capacity(fit)
    if cap is None:
        return (1, elements, "resident") if elements % lanes == 0 else None
    budget = None if fit.sparse else profile.phv_budget_bits
    first = None
    for passes in range(1, profile.max_passes + 1):
        if elements % passes:
            continue
        k = elements // passes
        if k % lanes:
            continue
        for mode in ("resident", "stream") if passes > 1 else ("resident",):
            if k // lanes <= _value_capacity(fit, passes, mode):
                first = first or (passes, k, mode)
                if budget is None or phv_bits(fit, elements, passes, mode) <= budget:
                    return passes, k, mode
    return first


def _shape_at(fit: Fit, elements: int) -> Fit:
    """The shape of ``elements`` per packet: frame size, headroom, passes, PHV."""
    profile, spec, variant, shape = fit.profile, fit.spec, fit.variant, fit.shape
    lay = dataclasses.replace(fit, elements=elements)
    lanes = profile.lanes_per_register
    w = spec.value_width
    words = arrays_of(fit.table, register_geometry(spec, profile, 1, 0, 0, 1), "bitmap")

    # 1. worker bitmap: all words of one copy live in one stage
    if profile.has_stage_limits and words > profile.alus_per_stage:
        return lay.failed("workers", f"max_workers={spec.max_workers} needs {words} bitmap words of {BITMAP_WORD_BITS} "
                                     f"workers in one stage; {profile.name} has {profile.alus_per_stage} stateful ALUs per stage")
    # 2. frame size
    hdr_bytes = sum(w_ for name, f in fit.headers if name != "ethernet" for _, w_ in f) // 8
    payload_limit = (profile.mtu_bytes - hdr_bytes) * 8 // w
    if elements > payload_limit:
        return lay.failed("elements", f"elements_per_packet={elements} makes a {hdr_bytes + elements * w // 8}-byte IP packet; "
                                      f"{profile.name} assumes an MTU of {profile.mtu_bytes} bytes")
    # 2b. headroom: a sparse protocol's result that answers a header-only packet grows by the block
    grow = elements * w // 8
    if fit.sparse and profile.packet_headroom_bytes is not None and grow > profile.packet_headroom_bytes:
        return lay.failed("elements", f"elements_per_packet={elements} makes an {spec.protocol} result {grow} bytes longer "
                                      f"than the header-only packet it answers; {profile.name} gives a packet "
                                      f"{profile.packet_headroom_bytes} bytes of headroom")
    # 3. passes
    if shape is None:
        split = _choose_passes(fit, elements)
        if split is None:
            cap = _value_capacity(fit)
            return lay.failed("elements", f"elements_per_packet={elements} cannot be split into at most {profile.max_passes} "
                                          f"equal passes of at most {(cap or 0) * lanes} values ({cap} value arrays of {lanes} "
                                          f"lane{'s' if lanes > 1 else ''} per pass on {profile.name}, {variant} variant)")
        passes, per_pass, mode = split
        pipes = 1
    else:
        why = shape_problem(profile, shape, elements)
        if why:
            return lay.failed("layout", why)
        passes, per_pass, mode, pipes = shape.passes, elements // shape.passes, shape.mode, shape.pipes
    lay = dataclasses.replace(lay, passes=passes, per_pass=per_pass, mode=mode, pipes=pipes)
    if fit.sparse and passes > 1:
        return lay.failed("elements", f"elements_per_packet={elements} needs {passes} pipeline passes on {profile.name}; "
                                      f"an {spec.protocol} block must fit one pass")
    # 4. PHV (the passes above were chosen to fit it where any split does)
    budget = profile.phv_budget_bits
    lay = dataclasses.replace(lay, pass_bits=(passes - 1).bit_length(), phv_bits=phv_bits(fit, elements, passes, mode),
                              tail=placement.tail_stages(profile, passes, mode))
    if budget is not None and lay.phv_bits > budget:
        held = per_pass if mode == "stream" else elements
        return lay.failed("elements", f"elements_per_packet={elements} needs {lay.phv_bits} PHV bits (headers, {held} x "
                                      f"{w}-bit values, metadata); {profile.phv_budget_text}")
    return lay


def shape(fit: Fit) -> Fit:
    """The fit's element count and how its elements cross the pipeline: ``fit.elements``, or (0) the
    largest power of two whose packet fits one pass.  Only shapes are tried for the default; the
    registers are laid out once, for the element count chosen."""
    if fit.elements:
        return _shape_at(fit, fit.elements)
    e = 1 << (MAX_ELEMENTS.bit_length() - 1)
    while e >= 2:
        lay = _shape_at(fit, e)
        if lay.failure is None and lay.passes == 1:
            return lay
        e //= 2
    lay = _shape_at(fit, fit.profile.lanes_per_register)
    return lay if lay.failure is not None else dataclasses.replace(
        lay, fallback=("elements", f"no element count fits one pass of {fit.profile.name} ({fit.variant} variant)"))


# ---------------------------------------------------------------------------------------------- 3. registers

def registers(fit: Fit) -> Fit:
    """The register arrays of the table's steps at ``fit.slots`` (:mod:`p4gen.registers`), not yet placed."""
    lay = dataclasses.replace(fit, arrays=(), registers=(), stages=())
    slots = fit.slots
    if slots > MAX_HEADER_SLOTS:
        return lay.failed("slots", f"slots={slots} exceeds the {SLOT_BITS}-bit slot field of pool_index "
                                   f"({MAX_HEADER_SLOTS} slots)")
    g = register_geometry(fit.spec, fit.profile, slots, fit.per_pass, fit.pass_bits, fit.pipes)
    return dataclasses.replace(lay, arrays=tuple(register_arrays(fit.table, g)))


# ---------------------------------------------------------------------------------------------- 4. place

def _counter_stage(regs: list[dict[str, Any]], tm: placement.Timing) -> int | None:
    """The stage the packet counter shares with the first value arrays (None: no value arrays)."""
    if not any(r["role"] == "values" for r in regs):
        return None
    avail = {}
    for r in regs:
        if r["role"] != "values":
            avail[r["role"]] = max(avail.get(r["role"], 0), r["stage"] + tm.lat(r["role"]))
    first = tm.values_first(avail) if all(d in avail for d in tm.deps.get("values", ())) else None
    return first if first is not None and any(r["role"] == "values" and r["stage"] == first for r in regs) else None


def _sram_problem(fit: Fit, stages: list[Stage], counters: dict[int, int]) -> str | None:
    """Why the registers of some stage do not fit its SRAM (the SRAM rows its stateful ALUs reach)."""
    profile, regs = fit.profile, fit.registers
    geo = placement.RamGeometry.of(profile)
    for st in stages:
        counter = counters.get(st.index, 0)
        used = st.sram_blocks_used + counter
        in_stage = [r for r in regs if r.stage == st.index]
        if not geo.fits(tuple(r.sram_blocks for r in in_stage), counter):
            big = max(in_stage, key=lambda r: r.sram_blocks)
            also = f" and the packet counter's {counter}" if counter else ""
            where = (f"{profile.name} gives registers {profile.register_sram_limit} per stage"
                     if used > profile.register_sram_limit else
                     f"{profile.name}'s stateful ALUs reach them only in rows of {geo.per_row}, each register "
                     f"from its ALU's row down")
            return (f"slots={fit.slots} needs {used} SRAM blocks in stage {st.index} "
                    f"({len(st.registers)} arrays of {big.entries} x {big.entry_bits}-bit entries{also}); {where}")
    return None


def place(fit: Fit) -> Fit:
    """Each register array's stage (:func:`p4gen.planner.placement.assign`: the layout's placement, checked,
    else the one with the fewest stages), the stages, and the SRAM and entry limits."""
    profile, tm = fit.profile, fit.timing_with_tail
    regs = [dict(a) for a in fit.arrays]
    nstages, why = placement.assign(profile, regs, fit.table, tm, fit.shape.stage_of if fit.shape is not None else None)
    if why:
        return fit.failed("layout", why)
    sram = profile.sram_blocks_for if profile.sram_block_words else lambda entries, bits: 0
    placed = tuple(Register(a["name"], a["role"], a["entries"], a["lane_bits"], a["lanes"], a["entry_bits"], a["index"],
                            a["stage"], sram(a["entries"], a["entry_bits"]), 0, a.get("word"),
                            tuple(a["elements"]) if "elements" in a else None) for a in regs)
    counter_stage = _counter_stage(regs, tm)
    stages, counters = [], {}
    for s in range(nstages):
        in_stage = [r for r in placed if r.stage == s]
        limits = profile.has_stage_limits
        stages.append(Stage(index=s, registers=tuple(r.name for r in in_stage), alus_used=len(in_stage),
                            sram_blocks_used=sum(r.sram_blocks for r in in_stage),
                            tables=("workers", "l2_forward") if s == 0 else (),
                            alus_limit=profile.alus_per_stage if limits else None,
                            sram_blocks_limit=profile.register_sram_limit if limits else None))
        if s == counter_stage and tm.counter_blocks:
            counters[s] = tm.counter_blocks
    lay = dataclasses.replace(fit, registers=placed, stages=tuple(stages))
    if profile.has_stage_limits:
        why = _sram_problem(lay, stages, counters)
        if why:
            return lay.failed("slots", why)
    if profile.max_register_entries is not None:
        for r in placed:
            if r.entries > profile.max_register_entries:
                return lay.failed("slots", f"slots={fit.slots} needs {r.entries} entries in register {r.name}; "
                                           f"{profile.name} allows {profile.max_register_entries}")
    return lay.failed(*fit.fallback) if fit.fallback else lay


# ---------------------------------------------------------------------------------------------- 5. program

def _table(t: dict[str, Any]) -> Table:
    args = t.get("default_args")
    return Table(name=t["name"], scope=t["scope"], size=t["size"], keys=tuple(Key(**k) for k in t["keys"]),
                 actions=tuple(t["actions"]), default_action=t["default_action"], const=t["const"], id=t["id"],
                 default_args=None if args is None else FrozenMap(args),
                 entries=tuple(Entry(FrozenMap(e["match"]), e["action"], FrozenMap(e["args"]), e["comment"])
                               for e in t.get("entries", ())))


def program(fit: Fit) -> Fit:
    """The P4 program's tables, actions and counters, with their P4Runtime IDs (and the registers'), as
    :func:`p4gen.program.program_objects` writes them."""
    regs = [{"name": r.name, "role": r.role, "entries": r.entries, "entry_bits": r.entry_bits} for r in fit.registers]
    tables, actions, counters, p4regs = program_objects(fit.spec, ops_op_codes(), fit.table, regs, fit.profile)
    return dataclasses.replace(
        fit, tables=tuple(_table(t) for t in tables),
        actions=tuple(Action(a["name"], a["scope"], tuple(Field(x["name"], x["bits"]) for x in a["params"]), a["id"])
                      for a in actions),
        counters=tuple(Counter(c["name"], c["scope"], c["size"], c["unit"], tuple(c["indices"]), c["id"])
                       for c in counters),
        registers=tuple(dataclasses.replace(r, id=p["id"]) for r, p in zip(fit.registers, p4regs)))


def metadata(fit: Fit, passes: int, mode: str) -> list[tuple[str, int]]:
    """The program's metadata fields (:func:`p4gen.program.program_metadata`) for ``passes`` in ``mode``."""
    return program_metadata(fit.profile, fit.table, fit.spec, passes, mode)


# ---------------------------------------------------------------------------------------------- 6. account

def stages_used(fit: Fit) -> int:
    """Stages the program needs: the last one holding a register, plus one (stage 0 looks the worker up),
    plus the stage a resident layout of several passes moves its values in."""
    return 1 + max((r.stage for r in fit.registers), default=0) + fit.tail


def _sram_blocks(fit: Fit) -> int:
    return sum(s.sram_blocks_used for s in fit.stages)


def _register_bits(fit: Fit) -> int:
    return sum(r.entries * r.entry_bits for r in fit.registers)


def account(fit: Fit) -> Fit:
    """The resource table and the comparison with the other variant (``fit.compared``)."""
    profile = fit.profile
    limits = profile.has_stage_limits
    res = Resources(
        stages_used=stages_used(fit), stages_limit=profile.stages,
        alus_used=sum(s.alus_used for s in fit.stages),
        alus_limit=(profile.stages * profile.alus_per_stage) if limits else None,
        sram_blocks_used=_sram_blocks(fit),
        sram_blocks_limit=(profile.stages * profile.register_sram_limit) if limits else None,
        phv_bits_used=fit.phv_bits, phv_bits_limit=profile.phv_budget_bits, passes=fit.passes,
        passes_limit=profile.max_passes, register_bits=_register_bits(fit))
    other, none = fit.other
    alt = fit.compared
    if none:
        out = Alternative(variant=other, fits=False, why=none)
    elif alt is None or alt.failure is not None:
        out = Alternative(variant=other, fits=False, why=alt.failure[1] if alt is not None else None)
    else:
        out = Alternative(variant=other, fits=True, register_arrays=len(alt.registers),
                          register_arrays_delta=len(alt.registers) - len(fit.registers),
                          stages=stages_used(alt), stages_delta=stages_used(alt) - stages_used(fit),
                          sram_blocks=_sram_blocks(alt), sram_blocks_delta=_sram_blocks(alt) - _sram_blocks(fit),
                          register_bits_delta=_register_bits(alt) - _register_bits(fit))
    return dataclasses.replace(fit, resources=res, alternative=out)


# ---------------------------------------------------------------------------------------------- the order

PASSES: tuple[Callable[[Fit], Fit], ...] = (choose_variant, shape, registers, place, program, account)
FITTING = PASSES[:4]          # per variant tried; the first failure stops it
SLOTTED = (registers, place)  # the slot-dependent part of a fit (bisection over the slots)


def run(passes: tuple[Callable[[Fit], Fit], ...], fit: Fit) -> Fit:
    for p in passes:
        fit = p(fit)
        if fit.failure is not None:
            break
    return fit


def _fit_variant(spec: Spec, profile: TargetProfile, variant: str, layout: PassShape | None = None,
                 elements: int | None = None) -> Fit:
    elements = spec.elements_per_packet if elements is None else elements
    return run(FITTING, Fit(spec, profile, layout, variant, elements or 0, spec.slots))


def largest_slots(fit: Fit) -> int:
    """The most slots the shape of ``fit`` holds (fitting never gets easier with more slots: bisection over
    the slot-dependent passes only)."""
    base = dataclasses.replace(fit, failure=None, fallback=None)
    lo, hi = 0, MAX_HEADER_SLOTS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if run(SLOTTED, dataclasses.replace(base, slots=mid)).failure is None:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _largest_elements(fit: Fit, slots: int) -> int:
    """The largest even element count that fits at ``slots`` (for the message of a failed fit)."""
    base = dataclasses.replace(fit, shape=None, slots=slots, failure=None, fallback=None)
    for e in range(MAX_ELEMENTS, 1, -2):
        if run(FITTING[1:], dataclasses.replace(base, elements=e)).failure is None:
            return e
    return 0


def _infeasible(fit: Fit) -> InfeasibleError:
    limit, why = fit.failure
    profile, variant = fit.profile, fit.variant
    if limit == "layout":
        return InfeasibleError(why)
    if limit == "slots":
        best = largest_slots(fit)       # the failure is in the slot-dependent passes: the shape holds
        tail = f"the largest slots that fits {profile.name} is {best}" if best else "no slot count fits"
        tail += f" (at elements_per_packet={fit.elements}, {variant} variant)"
    elif limit == "elements":
        best = _largest_elements(fit, min(fit.slots, MAX_HEADER_SLOTS))
        tail = f"the largest elements_per_packet that fits {profile.name} is {best}" if best else "no element count fits"
        tail += f" (at slots={fit.slots}, {variant} variant)"
    else:
        best = BITMAP_WORD_BITS * (profile.alus_per_stage or 0)
        tail = f"the largest max_workers that fits {profile.name} is {best}"
    return InfeasibleError(f"{why}; {tail}")


def fit(spec: Spec, profile: TargetProfile, shape: PassShape | None = None) -> Fit:
    """Run the fitting passes for each variant the spec allows until one fits; the fit, or raise.

    ``shape`` fixes the passes, their PHV mode, the pipes and the stage placement (a layout
    chosen by ``p4gen plan``); the passes re-check it against every limit of the target."""
    if shape is not None and spec.elements_per_packet is None:
        raise InfeasibleError("a layout's shape needs elements_per_packet; the layout file gives none")
    first_failure: Fit | None = None
    for variant in variants_to_try(spec):
        lay = _fit_variant(spec, profile, variant, shape)
        if lay.failure is None:
            return lay
        first_failure = first_failure or lay
    assert first_failure is not None
    raise _infeasible(first_failure)


# ---------------------------------------------------------------------------------------------- the Plan

def _params(fit: Fit) -> Params:
    return Params(**plan_params(fit.spec, fit.profile, fit.slots, fit.elements, fit.per_pass, fit.passes, fit.mode,
                                fit.pipes))


def _headers(fit: Fit) -> tuple[Header, ...]:
    return tuple(Header(h["name"], tuple(Field(f["name"], f["bits"]) for f in h["fields"]), h["bytes"],
                        h.get("repeat", 1), h.get("internal", False))
                 for h in plan_headers(fit.spec.protocol, fit.spec.value_width, fit.per_pass, fit.passes, fit.mode))


def _plan(fit: Fit) -> Plan:
    spec, profile = fit.spec, fit.profile
    codes = Codes(FrozenMap({r: FrozenMap(c) for r, c in ops_op_codes().items()}),
                  FrozenMap({k: FrozenMap(c) for k, c in decision.CODES.items()}), FrozenMap(decision.OUTCOME_CODES))
    return Plan(
        generator=Generator("p4gen", __version__),
        spec=dataclasses.replace(spec, variant=fit.variant, elements_per_packet=fit.elements),
        requested_variant=spec.variant, target=dataclasses.replace(profile, source="in the plan"),
        protocol=spec.protocol, variant=fit.variant,
        params=_params(fit), codes=codes, stats=tuple(decision.STATS), headers=_headers(fit),
        metadata=tuple(Field(n, b) for n, b in metadata(fit, fit.passes, fit.mode)),
        registers=fit.registers, stages=fit.stages, tables=fit.tables, actions=fit.actions, counters=fit.counters,
        decision=fit.table, resources=fit.resources, alternative=fit.alternative,
        limits=Limits(fit.largest_slots),
        p4names=P4Names(**p4names(profile)))


def make_plan(spec: Spec, profile: TargetProfile, shape: PassShape | None = None) -> Plan:
    """Run the planner passes and return the Plan (``shape``: a layout from ``p4gen plan``)."""
    lay = program(fit(spec, profile, shape))
    other, none = lay.other
    # the other variant has other registers: same passes, mode and pipes, the placement of its own steps
    alt_shape = PassShape(shape.passes, shape.mode, shape.pipes) if shape is not None else None
    compared = None if none else _fit_variant(spec, profile, other, alt_shape, lay.elements)
    lay = account(dataclasses.replace(lay, compared=compared, largest_slots=largest_slots(lay)))
    return _plan(lay)
