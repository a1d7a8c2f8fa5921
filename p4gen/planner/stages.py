"""Pass 4, place: each register array's stage (:mod:`p4gen.planner.placement`), the stages, and the SRAM and
entry limits of the target."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import placement
from ..plan import Register, Stage
from .fit import Fit


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
    by_stage: dict[int, list[Register]] = {}
    for r in placed:
        by_stage.setdefault(r.stage, []).append(r)
    stages, counters = [], {}
    limits = profile.has_stage_limits
    for s in range(nstages):
        in_stage = by_stage.get(s, [])
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
