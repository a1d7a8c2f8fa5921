"""The one object the planner's passes hand on: a frozen :class:`Fit`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from . import placement
from ..decision import DecisionTable
from ..pass_shape import PassShape
from ..plan import Action, Alternative, Counter, Register, Resources, Stage, Table
from ..spec import Spec
from ..target import TargetProfile


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
