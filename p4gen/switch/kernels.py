"""Integer and numpy kernels of the register operations (same results as ``p4gen.ops``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import ops


def _chunk_advance(stored, tsi):
    if tsi > stored:
        return tsi, ops.CMP_GT
    return stored, (ops.CMP_EQ if tsi == stored else ops.CMP_LT)


def _bm_set_clear(this, other, mask, full):
    return this | mask, other & (full ^ mask), 1 if this & mask else 0


def _bm_set(this, other, mask, full):
    return this | mask, other, 1 if this & mask else 0


def _bm_reset_set(this, other, mask, full):
    return mask, other, 0


def _bm_nop(this, other, mask, full):
    return this, other, 0


def _cnt_inc_mod(count, n, full):
    inc = (count + 1) & full
    wraps = inc == n
    state = ops.COUNT_FIRST if count == 0 else (ops.COUNT_LAST if wraps else ops.COUNT_MID)
    return (0 if wraps else inc), state


def _cnt_probe_zero(count, n, full):
    return count, (ops.COUNT_COMPLETE if count == 0 else ops.COUNT_INCOMPLETE)


def _cnt_reset_one(count, n, full):
    return 1, ops.COUNT_FIRST


def _cnt_inc_sat(count, n, full):
    if count == n:
        return count, ops.COUNT_COMPLETE
    inc = (count + 1) & full
    return inc, (ops.COUNT_LAST if inc == n else ops.COUNT_MID)


def _cnt_probe_full(count, n, full):
    return count, (ops.COUNT_COMPLETE if count == n else ops.COUNT_INCOMPLETE)


def _cnt_nop(count, n, full):
    return count, ops.COUNT_NONE


def _exp_write(stored, exp):
    return exp, exp


def _exp_max(stored, exp):
    m = exp if exp > stored else stored
    return m, m


def _exp_read(stored, exp):
    return stored, stored


def _exp_nop(stored, exp):
    return stored, exp


# values kernels work in place on the register rows; ``load(frame)`` gives the
# packet's values (only called by the kernels that read them).  They return the
# values the packet carries on, or None when the packet keeps its own values.
def _val_write(rows, frame, load):
    rows[...] = load(frame)
    return None


def _val_add(rows, frame, load):
    np.add(rows, load(frame), out=rows, casting="unsafe")
    return rows


def _val_read(rows, frame, load):
    return rows


def _val_nop(rows, frame, load):
    return None


def _val_clear(rows, frame, load):
    rows[...] = 0
    return rows


def _mn_write(stored, nxt):
    return nxt, nxt


def _mn_min(stored, nxt):
    m = nxt if stored > nxt else stored
    return m, m


def _mn_read(stored, nxt):
    return stored, stored


def _mn_nop(stored, nxt):
    return stored, nxt


FAST_KERNELS: dict[str, dict[str, Callable]] = {
    "chunk": {"advance": _chunk_advance},
    "bitmap": {"set_clear": _bm_set_clear, "set": _bm_set, "reset_set": _bm_reset_set, "nop": _bm_nop},
    "counter": {"inc_mod": _cnt_inc_mod, "probe_zero": _cnt_probe_zero, "reset_one": _cnt_reset_one,
                "inc_sat": _cnt_inc_sat, "probe_full": _cnt_probe_full, "nop": _cnt_nop},
    "exponent": {"write": _exp_write, "max": _exp_max, "read": _exp_read, "nop": _exp_nop},
    "values": {"write": _val_write, "add": _val_add, "read": _val_read, "nop": _val_nop, "clear": _val_clear},
    "minnext": {"write": _mn_write, "min": _mn_min, "read": _mn_read, "nop": _mn_nop},
}


class NumpyAlgebra:
    """Unsigned wrap-around addition on numpy arrays (what ``ops.values_op`` needs)."""

    def add(self, a, b, bits):
        return ((np.asarray(a, dtype=np.uint64) + np.asarray(b, dtype=np.uint64)) & ((1 << bits) - 1))

    def const(self, value, bits):
        return np.uint64(value)


NP = NumpyAlgebra()
