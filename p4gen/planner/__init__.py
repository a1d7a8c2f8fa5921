"""Fit a Spec to a target and lay it out: Spec + TargetProfile -> Plan, as an ordered list of passes.

Every pass takes one frozen :class:`Fit` (:mod:`.fit`) and returns one; :data:`PASSES` lists them in the
order they run, and only this module knows that order (each pass lives in a module of its own):

1. :func:`choose_variant` (:mod:`.variant`) resolves the variant once: its decision table, its step timing on the target
   (:func:`p4gen.planner.placement.timing`), the protocol's headers and the variant to compare with.  It is the
   only pass that reads the protocol registry.  ``variant=auto`` tries the protocol's variants in the
   order :mod:`p4gen.protocols` declares them, each until one fits.
2. :func:`shape` (:mod:`.shaping`): the element count (the spec's, or the largest power of two whose packet fits one
   pass), frame size, headroom, passes and PHV; independent of the slots.
3. :func:`registers` (:mod:`.arrays`): the register arrays of the table's steps at the fit's slots
   (:mod:`p4gen.registers`).
4. :func:`place` (:mod:`.stages`): their stages (:func:`p4gen.planner.placement.assign`) and the SRAM and entry limits.
5. :func:`program` (:mod:`.objects`): the P4 program's tables, actions, counters and their P4Runtime IDs, with the
   decision table expanded into ``dt_*`` const entries.
6. :func:`account` (:mod:`.accounting`): the resource table, the other variant laid out at the same shape for comparison
   (``alternative``); :func:`make_plan` gives it that fit and the most slots the chosen shape holds
   (``limits``), found by re-running passes 3-4.

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
from typing import Callable

from .. import __version__, decision
from ..decision import Codes, FrozenMap
from ..errors import InfeasibleError
from ..pass_shape import PassShape
from ..plan import Field, Generator, Header, Limits, P4Names, Params, Plan, op_codes as ops_op_codes
from ..program import MAX_HEADER_SLOTS, p4names, plan_headers, plan_params
from ..registers import BITMAP_WORD_BITS
from ..spec import MAX_ELEMENTS, Spec
from ..target import TargetProfile
from .accounting import account, stages_used
from .arrays import registers
from .fit import Fit
from .objects import metadata, program
from .stages import place
from .shaping import phv_bits, shape
from .variant import choose_variant, variants_to_try

__all__ = ["FITTING", "PASSES", "SLOTTED", "Fit", "fit", "largest_slots", "make_plan", "phv_bits", "run",
           "stages_used"]


# ---------------------------------------------------------------------------------------------- the order

# choose_variant runs first, once for each variant the spec allows, because every later pass reads what it
# resolves; shape comes before registers because the arrays' count and size follow from a pass's elements;
# place needs the arrays; program needs the placed arrays (its per-array tables); account needs the stages.
PASSES: tuple[Callable[[Fit], Fit], ...] = (choose_variant, shape, registers, place, program, account)
FITTING = PASSES[:4]          # per variant tried; the first failure stops it
SLOTTED = (registers, place)  # the slot-dependent part of a fit (bisection over the slots)


def run(passes: tuple[Callable[[Fit], Fit], ...], fit: Fit) -> Fit:
    """Run ``passes`` in order on ``fit``; the first failure stops them."""
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
