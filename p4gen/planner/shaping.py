"""Pass 2, shape: the element count, the passes and their PHV mode and pipes, the frame size and the PHV
(a layout's shape, :class:`p4gen.pass_shape.PassShape`, is checked here)."""

from __future__ import annotations

import dataclasses
import functools

from . import placement
from ..decision import DecisionTable
from ..pass_shape import shape_problem
from ..program import register_geometry
from ..registers import BITMAP_WORD_BITS, Geometry, arrays_of
from ..spec import MAX_ELEMENTS
from ..target import TargetProfile
from ..wire import pass_header
from .fit import Fit
from .objects import metadata


def _value_capacity(fit: Fit, passes: int = 1, mode: str = "resident") -> int | None:
    """Value arrays one pass can host besides the table's other steps, or None when unbounded."""
    profile, spec = fit.profile, fit.spec
    if not profile.has_stage_limits:
        return None
    return _capacity(profile, fit.table, spec.max_workers, spec.value_width, placement.tail_stages(profile, passes, mode))


@functools.lru_cache(maxsize=256)
def _capacity(profile: TargetProfile, table: DecisionTable, max_workers: int, value_width: int, tail: int) -> int:
    """The search over stages of :func:`_value_capacity`, once per process for what it depends on: a failed
    fit asks it for every element count it tries (refusing tofino2 --elements 88 ran it 500 times, 4 CPU-s)."""
    g = Geometry(1, max_workers, value_width, 0, profile.lanes_per_register, 0, 1)
    arrays = {role: arrays_of(table, g, role) for role in table.roles if role != "values"}
    tm = placement.timing(profile, table, max_workers, value_width).with_tail(tail)
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
