"""Pass 6, account: the resource table and the comparison with the other variant."""

from __future__ import annotations

import dataclasses

from ..plan import Alternative, Resources
from .fit import Fit


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
