"""Fit a Spec to a target and lay it out: Spec + TargetProfile -> Plan.

:func:`make_plan` runs :func:`fit` and then derives the rest of the Plan from the fit:

1. :func:`fit` takes the variants the spec allows (``variant=auto``: the protocol's variants in the
   order :mod:`p4gen.protocols` declares them) and, for each until one fits, the element count (the
   spec's, or the largest power of two whose packet fits one pass), then lays the variant out once:
   :func:`_shape` (frame size, headroom, passes, PHV; independent of the slots) and
   :func:`_registers` (the register arrays of the table's steps, :mod:`p4gen.registers`, their stages,
   :func:`p4gen.placement.assign`, SRAM and entry limits, at the spec's slots).
2. :func:`_program`: the P4 program's tables, actions, counters and their P4Runtime IDs, with the
   decision table expanded into ``dt_*`` const entries.
3. The resource table, the other variant of the protocol laid out at the same shape for comparison
   (``alternative``) and the most slots the chosen shape holds (``limits``).

The first failure stops the build with one line that names the requested value, the limit, the
target and the largest value that fits.

Stages (targets with MAU stages) are not written here: stage 0 looks the worker up, and each step
of the decision table goes to the earliest stage after the steps whose observations it reads.  On
tofino, for instance, that gives ``chunk | bitmap | counter + exponent | values ...`` for
SwitchML's hardened variant and ``bitmap | counter | exponent + values ...`` for its reference
variant.  Each stateful ALU hosts one register array and runs one RegisterAction per pass; a value
array holds ``lanes_per_register`` values per entry.  Packets whose elements do not fit one pass are
recirculated: pass p uses the same value arrays at index ``(slot_copy << pass_bits) | p``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import __version__, decision, placement, protocols
from .errors import InfeasibleError
from .pass_shape import PassShape, shape_problem
from .plan import SCHEMA, Plan, op_codes as ops_op_codes
from .program import (MAX_HEADER_SLOTS, SLOT_BITS, pass_header, plan_headers, plan_params, program_metadata,
                      p4names, program_objects, register_geometry, wire_headers)
from .registers import BITMAP_WORD_BITS, Geometry, arrays_of, register_arrays
from .spec import Spec
from .target import TargetProfile

@dataclass
class Fit:
    """One fit of a spec to a target: the outcome of fitting (elements, slots, variant), with the failure
    that stopped it, if any."""

    variant: str
    elements: int
    slots: int
    passes: int = 1
    per_pass: int = 0
    pass_bits: int = 0
    registers: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    phv_bits: int = 0
    mode: str = "resident"                   # PassShape.mode
    pipes: int = 1                           # PassShape.pipes: pipes the passes run in
    failure: tuple[str, str] | None = None   # (limit name, explanation)
    tail: int = 0                            # stages after the last value array (placement.tail_stages)


def _value_capacity(profile: TargetProfile, table: decision.DecisionTable, spec: Spec, passes: int = 1,
                    mode: str = "resident") -> int | None:
    """Value arrays one pass can host besides the table's other steps, or None when unbounded."""
    if not profile.has_stage_limits:
        return None
    g = Geometry(1, spec.max_workers, spec.value_width, 0, profile.lanes_per_register, 0, 1)
    arrays = {role: arrays_of(table, g, role) for role in table.roles if role != "values"}
    tm = step_timing(profile, table, spec).with_tail(placement.tail_stages(profile, passes, mode))
    return placement.value_capacity(profile, arrays, tm)


def step_timing(profile: TargetProfile, table: decision.DecisionTable, spec: Spec) -> placement.Timing:
    return placement.timing(profile, table, spec.max_workers, spec.value_width)


def _header_bits(passes: int, protocol: str, mode: str = "resident") -> int:
    bits = sum(w for _, fields in wire_headers(protocol) for _, w in fields)
    if passes > 1:
        bits += sum(w for _, w in pass_header(mode)[1])
    return bits


def phv_bits(profile: TargetProfile, table: decision.DecisionTable, spec: Spec, elements: int, passes: int,
             mode: str) -> int:
    """PHV bits the program occupies, ingress and egress: the headers each parses (and a bit a header
    for its validity), the values a pass holds, the metadata (:func:`program_metadata`) and the
    target's fixed part (``phv_fixed_bits``: intrinsic metadata and the compiler's own fields).

    A resident layout holds every value of the packet in each pass; a streamed one only
    the values of the pass (the rest of the payload is not parsed)."""
    held = elements // passes if mode == "stream" else elements
    data_headers = 1 if mode == "stream" or passes == 1 else passes
    ingress = _header_bits(passes, spec.protocol, mode) + held * spec.value_width
    ingress += len(wire_headers(spec.protocol)) + data_headers + (1 if passes > 1 else 0)
    egress = _header_bits(1, spec.protocol) + len(wire_headers(spec.protocol))
    meta = sum(b for _n, b in program_metadata(profile, table, spec, passes, mode))
    return ingress + meta + egress + (profile.phv_fixed_bits or 0)


def _choose_passes(profile: TargetProfile, table: decision.DecisionTable, spec: Spec,
                   elements: int) -> tuple[int, int, str] | None:
    """(passes, per_pass, mode) for ``elements``, or None when no split fits.  Several passes are
    resident where their values fit, else streamed (a streamed pass needs no stage to move the values).
    The fewest passes whose PHV fits win; a dense packet whose values fit the stages but not the PHV in
    fewer passes takes more (when none fits the PHV, the fewest passes, and the PHV check says why)."""
    lanes = profile.lanes_per_register
    cap = _value_capacity(profile, table, spec)
    if cap is None:
        return (1, elements, "resident") if elements % lanes == 0 else None
    budget = None if protocols.protocol(spec.protocol).sparse else profile.phv_budget_bits
    first = None
    for passes in range(1, profile.max_passes + 1):
        if elements % passes:
            continue
        k = elements // passes
        if k % lanes:
            continue
        for mode in ("resident", "stream") if passes > 1 else ("resident",):
            if k // lanes <= _value_capacity(profile, table, spec, passes, mode):
                first = first or (passes, k, mode)
                if budget is None or phv_bits(profile, table, spec, elements, passes, mode) <= budget:
                    return passes, k, mode
    return first


def _shape(profile: TargetProfile, spec: Spec, variant: str, elements: int, slots: int,
           shape: PassShape | None = None) -> Fit:
    """The slot-independent part of a fit: frame size, headroom, passes, PHV."""
    lay = Fit(variant=variant, elements=elements, slots=slots)
    table = protocols.decision_table(variant, spec.protocol)
    sparse = protocols.protocol(spec.protocol).sparse
    lanes = profile.lanes_per_register
    w = spec.value_width
    words = arrays_of(table, register_geometry(spec, profile, 1, 0, 0, 1), "bitmap")

    # 1. worker bitmap: all words of one copy live in one stage
    if profile.has_stage_limits and words > profile.alus_per_stage:
        lay.failure = ("workers", f"max_workers={spec.max_workers} needs {words} bitmap words of {BITMAP_WORD_BITS} "
                                  f"workers in one stage; {profile.name} has {profile.alus_per_stage} stateful ALUs per stage")
        return lay
    # 2. frame size
    hdr_bytes = sum(w_ for name, f in wire_headers(spec.protocol) if name != "ethernet" for _, w_ in f) // 8
    payload_limit = (profile.mtu_bytes - hdr_bytes) * 8 // w
    if elements > payload_limit:
        lay.failure = ("elements", f"elements_per_packet={elements} makes a {hdr_bytes + elements * w // 8}-byte IP packet; "
                                   f"{profile.name} assumes an MTU of {profile.mtu_bytes} bytes")
        return lay
    # 2b. headroom: a sparse protocol's result that answers a header-only packet grows by the block
    grow = elements * w // 8
    if sparse and profile.packet_headroom_bytes is not None and grow > profile.packet_headroom_bytes:
        lay.failure = ("elements", f"elements_per_packet={elements} makes an {spec.protocol} result {grow} bytes longer "
                                   f"than the header-only packet it answers; {profile.name} gives a packet "
                                   f"{profile.packet_headroom_bytes} bytes of headroom")
        return lay
    # 3. passes
    if shape is None:
        split = _choose_passes(profile, table, spec, elements)
        if split is None:
            cap = _value_capacity(profile, table, spec)
            lay.failure = ("elements", f"elements_per_packet={elements} cannot be split into at most {profile.max_passes} "
                                       f"equal passes of at most {(cap or 0) * lanes} values ({cap} value arrays of {lanes} "
                                       f"lane{'s' if lanes > 1 else ''} per pass on {profile.name}, {variant} variant)")
            return lay
        lay.passes, lay.per_pass, lay.mode = split
    else:
        why = shape_problem(profile, shape, elements)
        if why:
            lay.failure = ("layout", why)
            return lay
        lay.passes, lay.per_pass, lay.mode, lay.pipes = shape.passes, elements // shape.passes, shape.mode, shape.pipes
    if sparse and lay.passes > 1:
        lay.failure = ("elements", f"elements_per_packet={elements} needs {lay.passes} pipeline passes on {profile.name}; "
                                   f"an {spec.protocol} block must fit one pass")
        return lay
    lay.pass_bits = (lay.passes - 1).bit_length()
    # 4. PHV (the passes above were chosen to fit it where any split does)
    budget = profile.phv_budget_bits
    lay.phv_bits = phv_bits(profile, table, spec, elements, lay.passes, lay.mode)
    if budget is not None and lay.phv_bits > budget:
        held = lay.per_pass if lay.mode == "stream" else elements
        lay.failure = ("elements", f"elements_per_packet={elements} needs {lay.phv_bits} PHV bits (headers, {held} x {w}-bit "
                                   f"values, metadata); {profile.phv_budget_text}")
    return lay


def _registers(profile: TargetProfile, spec: Spec, lay: Fit, slots: int, shape: PassShape | None = None) -> Fit:
    """The slot-dependent part of a fit (``lay`` has a shape and no failure): the register arrays of the
    table's steps, their stages (:func:`p4gen.placement.assign`), SRAM and entry limits."""
    lay = dataclasses.replace(lay, slots=slots, registers=[], stages=[])
    if slots > MAX_HEADER_SLOTS:
        lay.failure = ("slots", f"slots={slots} exceeds the {SLOT_BITS}-bit slot field of pool_index "
                                f"({MAX_HEADER_SLOTS} slots)")
        return lay
    table = protocols.decision_table(lay.variant, spec.protocol)
    regs = register_arrays(table, register_geometry(spec, profile, slots, lay.per_pass, lay.pass_bits, lay.pipes))
    tm = step_timing(profile, table, spec).with_tail(placement.tail_stages(profile, lay.passes, lay.mode))
    nstages, why = placement.assign(profile, regs, table, tm, shape.stage_of if shape is not None else None)
    if why:
        lay.failure = ("layout", why)
        return lay

    # SRAM / entry limits
    for r in regs:
        r["sram_blocks"] = profile.sram_blocks_for(r["entries"], r["entry_bits"]) if profile.sram_block_words else 0
    stages = []
    counter_stage = _counter_stage(regs, tm)
    for s in range(nstages):
        in_stage = [r for r in regs if r["stage"] == s]
        st = {"index": s, "registers": [r["name"] for r in in_stage], "alus_used": len(in_stage),
              "sram_blocks_used": sum(r["sram_blocks"] for r in in_stage)}
        if s == 0:
            st["tables"] = ["workers", "l2_forward"]
        if s == counter_stage and tm.counter_blocks:
            st["counter_sram_blocks"] = tm.counter_blocks
        if profile.has_stage_limits:
            st["alus_limit"] = profile.alus_per_stage
            st["sram_blocks_limit"] = profile.register_sram_limit
        stages.append(st)
    lay.registers, lay.stages, lay.tail = regs, stages, tm.tail
    if profile.has_stage_limits:
        geo = placement.RamGeometry.of(profile)
        for st in stages:
            used = st["sram_blocks_used"] + st.get("counter_sram_blocks", 0)
            sizes = tuple(r["sram_blocks"] for r in regs if r["stage"] == st["index"])
            if not geo.fits(sizes, st.get("counter_sram_blocks", 0)):
                big = max((r for r in regs if r["stage"] == st["index"]), key=lambda r: r["sram_blocks"])
                counter = (f" and the packet counter's {st['counter_sram_blocks']}" if st.get("counter_sram_blocks")
                           else "")
                where = (f"{profile.name} gives registers {profile.register_sram_limit} per stage"
                         if used > profile.register_sram_limit else
                         f"{profile.name}'s stateful ALUs reach them only in rows of {geo.per_row}, each register "
                         f"from its ALU's row down")
                lay.failure = ("slots", f"slots={slots} needs {used} SRAM blocks in stage {st['index']} "
                                        f"({len(st['registers'])} arrays of {big['entries']} x {big['entry_bits']}-bit entries"
                                        f"{counter}); {where}")
                return lay
    if profile.max_register_entries is not None:
        for r in regs:
            if r["entries"] > profile.max_register_entries:
                lay.failure = ("slots", f"slots={slots} needs {r['entries']} entries in register {r['name']}; "
                                        f"{profile.name} allows {profile.max_register_entries}")
                return lay
    return lay


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


def _build_layout(profile: TargetProfile, spec: Spec, variant: str, elements: int, slots: int,
                  shape: PassShape | None = None) -> Fit:
    lay = _shape(profile, spec, variant, elements, slots, shape)
    return lay if lay.failure is not None else _registers(profile, spec, lay, slots, shape)


def _largest_slots(profile: TargetProfile, spec: Spec, lay: Fit, shape: PassShape | None = None) -> int:
    """The most slots the shape of ``lay`` holds (fitting never gets easier with more slots: bisection over
    the slot-dependent part only)."""
    lo, hi = 0, MAX_HEADER_SLOTS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _registers(profile, spec, lay, mid, shape).failure is None:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _largest_elements(profile: TargetProfile, spec: Spec, variant: str, slots: int) -> int:
    """The largest even element count that fits at ``slots`` (for the message of a failed fit)."""
    from .spec import MAX_ELEMENTS

    for e in range(MAX_ELEMENTS, 1, -2):
        if _build_layout(profile, spec, variant, e, slots).failure is None:
            return e
    return 0


def _default_shape(profile: TargetProfile, spec: Spec, variant: str) -> Fit | None:
    """The slot-independent fit of the default element count: the largest power of two whose packet
    fits one pass (None when none does).  Only shapes are tried; the registers are laid out once, for
    the element count chosen."""
    from .spec import MAX_ELEMENTS

    e = 1 << (MAX_ELEMENTS.bit_length() - 1)
    while e >= 2:
        lay = _shape(profile, spec, variant, e, 1)
        if lay.failure is None and lay.passes == 1:
            return lay
        e //= 2
    return None


def _infeasible(profile: TargetProfile, spec: Spec, lay: Fit, shape: PassShape | None = None) -> InfeasibleError:
    limit, why = lay.failure
    variant = lay.variant
    if limit == "layout":
        return InfeasibleError(why)
    if limit == "slots":
        base = _shape(profile, spec, variant, lay.elements, 1, shape)
        best = _largest_slots(profile, spec, base, shape) if base.failure is None else 0
        tail = f"the largest slots that fits {profile.name} is {best}" if best else "no slot count fits"
        tail += f" (at elements_per_packet={lay.elements}, {variant} variant)"
    elif limit == "elements":
        best = _largest_elements(profile, spec, variant, min(lay.slots, MAX_HEADER_SLOTS))
        tail = f"the largest elements_per_packet that fits {profile.name} is {best}" if best else "no element count fits"
        tail += f" (at slots={lay.slots}, {variant} variant)"
    else:
        best = BITMAP_WORD_BITS * (profile.alus_per_stage or 0)
        tail = f"the largest max_workers that fits {profile.name} is {best}"
    return InfeasibleError(f"{why}; {tail}")


def fit(spec: Spec, profile: TargetProfile, shape: PassShape | None = None) -> Fit:
    """Choose the variant and element count and lay the spec out, or raise.

    ``shape`` fixes the passes, their PHV mode, the pipes and the stage placement (a layout
    chosen by ``p4gen plan``); this pass re-checks it against every limit of the target."""
    if shape is not None and spec.elements_per_packet is None:
        raise InfeasibleError("a layout's shape needs elements_per_packet; the layout file gives none")
    if spec.variant == "auto":
        variants = [v.name for v in protocols.variants(spec.protocol)]
    else:
        variants = [protocols.variant(spec.protocol, spec.variant).name]
    first_failure: Fit | None = None
    for variant in variants:
        if spec.elements_per_packet is None:
            base = _default_shape(profile, spec, variant)
            if base is None:
                lay = _build_layout(profile, spec, variant, profile.lanes_per_register, spec.slots)
                if lay.failure is None:
                    lay.failure = ("elements", f"no element count fits one pass of {profile.name} ({variant} variant)")
                first_failure = first_failure or lay
                continue
            lay = _registers(profile, spec, base, spec.slots)
        else:
            lay = _build_layout(profile, spec, variant, spec.elements_per_packet, spec.slots, shape)
        if lay.failure is None:
            return lay
        first_failure = first_failure or lay
    assert first_failure is not None
    raise _infeasible(profile, spec, first_failure, shape)


def _stages_used(lay: Fit) -> int:
    """Stages the program needs: the last one holding a register, plus one (stage 0 looks the worker up),
    plus the stage a resident layout of several passes moves its values in."""
    return 1 + max((r["stage"] for r in lay.registers), default=0) + lay.tail


def _resources(profile: TargetProfile, lay: Fit) -> dict[str, Any]:
    res: dict[str, Any] = {
        "stages_used": _stages_used(lay),
        "stages_limit": profile.stages,
        "alus_used": sum(s["alus_used"] for s in lay.stages),
        "alus_limit": (profile.stages * profile.alus_per_stage) if profile.has_stage_limits else None,
        "sram_blocks_used": sum(s["sram_blocks_used"] for s in lay.stages),
        "sram_blocks_limit": (profile.stages * profile.register_sram_limit) if profile.has_stage_limits else None,
        "phv_bits_used": lay.phv_bits,
        "phv_bits_limit": profile.phv_budget_bits,
        "passes": lay.passes,
        "passes_limit": profile.max_passes,
        "register_bits": sum(r["entries"] * r["entry_bits"] for r in lay.registers),
    }
    return res


def _alternative(profile: TargetProfile, spec: Spec, lay: Fit, shape: PassShape | None = None) -> dict[str, Any]:
    other, none = protocols.other_variant(spec.protocol, lay.variant)
    if none:
        return {"variant": other, "fits": False, "why": none}
    # the other variant has other registers: same passes, mode and pipes, the placement of its own steps
    alt_shape = PassShape(shape.passes, shape.mode, shape.pipes) if shape is not None else None
    alt = _build_layout(profile, spec, other, lay.elements, lay.slots, alt_shape)
    if alt.failure is not None:
        return {"variant": other, "fits": False, "why": alt.failure[1]}
    return {"variant": other, "fits": True,
            "register_arrays": len(alt.registers), "register_arrays_delta": len(alt.registers) - len(lay.registers),
            "stages": _stages_used(alt), "stages_delta": _stages_used(alt) - _stages_used(lay),
            "sram_blocks": sum(s["sram_blocks_used"] for s in alt.stages),
            "sram_blocks_delta": sum(s["sram_blocks_used"] for s in alt.stages) - sum(s["sram_blocks_used"] for s in lay.stages),
            "register_bits_delta": sum(r["entries"] * r["entry_bits"] for r in alt.registers)
                                   - sum(r["entries"] * r["entry_bits"] for r in lay.registers)}


def make_plan(spec: Spec, profile: TargetProfile, shape: PassShape | None = None) -> Plan:
    """Run the planner passes and return the Plan (``shape``: a layout from ``p4gen plan``)."""
    lay = fit(spec, profile, shape)
    table = protocols.decision_table(lay.variant, spec.protocol)
    op_codes = ops_op_codes()
    params = {**plan_params(spec, profile, lay.slots, lay.elements, lay.per_pass, lay.passes, lay.mode, lay.pipes),
              "op_codes": op_codes, "codes": decision.CODES, "outcome_codes": decision.OUTCOME_CODES,
              "stats": list(decision.STATS)}
    headers = plan_headers(spec.protocol, spec.value_width, lay.per_pass, lay.passes, lay.mode)
    tables, actions, counters, p4regs = program_objects(spec, op_codes, table, lay.registers, profile)
    for r, p in zip(lay.registers, p4regs):
        r["id"] = p["id"]
    norm_spec = spec.to_dict()
    norm_spec.update({"variant": lay.variant, "elements_per_packet": lay.elements})
    data = {
        "schema": SCHEMA,
        "generator": {"name": "p4gen", "version": __version__},
        "spec": norm_spec,
        "requested_variant": spec.variant,
        "target": profile.to_dict(),
        "protocol": spec.protocol,
        "variant": lay.variant,
        "params": params,
        "headers": headers,
        "metadata": [{"name": n, "bits": b} for n, b in program_metadata(profile, table, spec, lay.passes, lay.mode)],
        "registers": lay.registers,
        "stages": lay.stages,
        "tables": tables,
        "actions": actions,
        "counters": counters,
        "decision": table.to_dict(),
        "resources": _resources(profile, lay),
        "alternative": _alternative(profile, spec, lay, shape),
        "limits": {"largest_slots": _largest_slots(profile, spec, lay, shape)},
        "p4names": p4names(profile),
    }
    return Plan.from_dict(data)
