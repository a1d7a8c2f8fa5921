"""Which entries of each register array hold a range of slots: what a job owns on the switch.

A register array is indexed, as its ``index`` in plan.json (:attr:`p4gen.plan.Register.index`) says and the templates and the model
compute it, by

* ``slot``: the bitmaps (both copies' words in one entry);
* ``slot_copy``: ``slot << 1 | copy`` -- chunk, counter, exponent, minnext, and the value arrays
  of folded layouts (each pipe has its own copy);
* ``slot_copy_pass``: ``(slot << 1 | copy) << pass_bits | pass`` -- the value arrays of layouts
  whose passes recirculate through one pipe.

so the entries of slots ``base .. base + count - 1`` are one contiguous range of each array.
``tests/test_slot_reuse.py`` runs a job through the model and checks that it touches no entry
outside these ranges.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .plan import Params, Plan, Register


def rows(register: Register, params: Params, base: int, count: int) -> range:
    """The entries of ``register`` that hold slots ``base .. base + count - 1`` (both copies, every pass)."""
    kind = register.index
    if kind == "slot":
        lo, hi = base, base + count
    elif kind == "slot_copy":
        lo, hi = 2 * base, 2 * (base + count)
    elif kind == "slot_copy_pass":
        bits = params.pass_bits
        lo, hi = (2 * base) << bits, (2 * (base + count)) << bits
    else:
        raise ValueError(f"register {register.name} has index {kind!r}; known: slot, slot_copy, slot_copy_pass")
    return range(lo, min(hi, register.entries))


def job_rows(plan: Plan, base: int, count: int) -> list[tuple[Register, range]]:
    """(register, its entries) of every register array of ``plan`` for slots ``base .. base + count - 1``."""
    return [(r, rows(r, plan.params, base, count)) for r in plan.registers]
