"""Pass 3, registers: the register arrays of the table's steps at a fit's slots (:mod:`p4gen.registers`)."""

from __future__ import annotations

import dataclasses

from ..program import MAX_HEADER_SLOTS, SLOT_BITS, register_geometry
from ..registers import register_arrays
from .fit import Fit


def registers(fit: Fit) -> Fit:
    """The register arrays of the table's steps at ``fit.slots`` (:mod:`p4gen.registers`), not yet placed."""
    lay = dataclasses.replace(fit, arrays=(), registers=(), stages=())
    slots = fit.slots
    if slots > MAX_HEADER_SLOTS:
        return lay.failed("slots", f"slots={slots} exceeds the {SLOT_BITS}-bit slot field of pool_index "
                                   f"({MAX_HEADER_SLOTS} slots)")
    g = register_geometry(fit.spec, fit.profile, slots, fit.per_pass, fit.pass_bits, fit.pipes)
    return dataclasses.replace(lay, arrays=tuple(register_arrays(fit.table, g)))
