"""Semantics of the stateful register operations named in decision tables.

A decision table (``p4gen.decision``) says *which* operation each register
performs for a packet; this module says *what* each operation does.  The
semantics are written once, over an abstract algebra, and every execution is
derived from that one definition: the software data plane's kernels and batch
loop (``p4gen.switch.kernels``), the Z3 encoding of the proofs
(``p4gen.verify.z3alg``) and the P4 program, which ``p4gen.emit.p4ops`` prints
from the expression graphs of :mod:`p4gen.ops.graph` (a Tofino RegisterAction in
the form a stateful ALU accepts, ``p4gen.ops.salu``; a v1model register
read-modify-write).  ``tests/test_ops.py`` pins the semantics with exact
examples, ``tests/test_salu.py`` proves each stateful-ALU form equal to its
definition here, and ``tests/test_ops_derivation.py`` that a changed op moves
the model, the proofs and the P4 together.

Observations produced by the operations, as small integer codes shared by
the P4 program, the model and the verifier:
"""

from __future__ import annotations

from typing import Any, Protocol

# chunk comparison (hardened variant): packet chunk vs the stored chunk
CMP_LT, CMP_EQ, CMP_GT = 0, 1, 2
CMP_NAMES = {CMP_LT: "lt", CMP_EQ: "eq", CMP_GT: "gt"}

# worker counter states.  A Tofino stateful ALU returns 0 at no cost and two other constants from its
# spare ALUs, and an increment reports one of three states: mid, the common one, is 0.
COUNT_MID, COUNT_FIRST, COUNT_LAST, COUNT_COMPLETE, COUNT_INCOMPLETE, COUNT_NONE = 0, 1, 2, 3, 4, 5
COUNT_NAMES = {
    COUNT_MID: "mid",
    COUNT_FIRST: "first",
    COUNT_LAST: "last",
    COUNT_COMPLETE: "complete",
    COUNT_INCOMPLETE: "incomplete",
    COUNT_NONE: "none",
}

# outcomes
OUT_DROP, OUT_MULTICAST, OUT_UNICAST = 0, 1, 2
OUTCOME_NAMES = {OUT_DROP: "drop", OUT_MULTICAST: "multicast", OUT_UNICAST: "unicast"}

# Operations per register role.  Each entry: op name -> one-line meaning.
OPS: dict[str, dict[str, str]] = {
    "chunk": {
        "advance": "store the packet's chunk if it is newer; report lt / eq / gt",
        "advance_window": "store the packet's chunk if it is newer by at most the bound (the job's two windows); "
                          "report gt; eq when equal; lt when older or further ahead (dropped as stale)",
    },
    "bitmap": {
        "set_clear": "set the worker's bit in this copy, clear it in the other; report whether it was set",
        "set": "set the worker's bit in this copy; report whether it was set",
        "reset_set": "this copy's word becomes the worker's bit alone; report not set",
        "nop": "no access; report not set",
    },
    "counter": {
        "inc_mod": "count modulo n; first if it was 0, last if it wraps to 0, else mid",
        "probe_zero": "no change; complete if 0 (slot drained), else incomplete",
        "reset_one": "restart the count at 1; first",
        "inc_sat": "count up to n; last on reaching n, complete if already n, else mid",
        "probe_full": "no change; complete if n, else incomplete",
        "nop": "no access; none",
    },
    "exponent": {
        "write": "store the packet's exponent; return it",
        "max": "store the larger of the two; return it",
        "read": "return the stored exponent",
        "nop": "no access",
    },
    "values": {
        "write": "store the packet's values; return them",
        "add": "add the packet's values (wrap-around); return the sums",
        "read": "return the stored values",
        "nop": "no access; the packet keeps its values",
        "clear": "store zeros; return them (a first packet without data)",
    },
    # OmniReduce: smallest next non-zero block offset announced in the round
    "minnext": {
        "write": "store the packet's next offset; return it",
        "min": "store the smaller of the two; return it",
        "read": "return the stored offset",
        "nop": "no access; the packet keeps its offset",
    },
}


# roles whose op reads this copy's word and the other copy's (the bitmap): their arrays hold both copies of
# a slot, so which lane is "this" depends on the packet's copy
COPY_LANES = frozenset({"bitmap"})


class Algebra(Protocol):
    def ite(self, cond: Any, a: Any, b: Any) -> Any: ...
    def eq(self, a: Any, b: Any) -> Any: ...
    def ugt(self, a: Any, b: Any) -> Any: ...
    def add(self, a: Any, b: Any, bits: int) -> Any: ...
    def sub(self, a: Any, b: Any, bits: int) -> Any: ...
    def ssub(self, a: Any, b: Any, bits: int) -> Any: ...
    def band(self, a: Any, b: Any) -> Any: ...
    def bor(self, a: Any, b: Any) -> Any: ...
    def bnot(self, a: Any, bits: int) -> Any: ...
    def const(self, value: int, bits: int) -> Any: ...
    def ne0(self, a: Any) -> Any: ...
    def false(self) -> Any: ...


class IntAlgebra:
    """Plain Python integers (unsigned, masked to the given widths)."""

    def ite(self, cond, a, b):
        return a if cond else b

    def eq(self, a, b):
        return a == b

    def ugt(self, a, b):
        return a > b

    def add(self, a, b, bits):
        return (a + b) & ((1 << bits) - 1)

    def sub(self, a, b, bits):
        return (a - b) & ((1 << bits) - 1)

    def ssub(self, a, b, bits):
        return a - b if a > b else 0

    def band(self, a, b):
        return a & b

    def bor(self, a, b):
        return a | b

    def bnot(self, a, bits):
        return ~a & ((1 << bits) - 1)

    def const(self, value, bits):
        return value

    def ne0(self, a):
        return a != 0

    def false(self):
        return False


INT = IntAlgebra()


def chunk_op(op: str, stored, tsi, A: Algebra = INT, bound=0):
    """Return (new_stored, cmp_code).  ``bound``: how far ahead of the stored chunk ``advance_window``
    accepts a tsi (the switch passes two of the job's windows, ``2 * slot_count``)."""
    newer = A.ugt(tsi, stored)
    gt, eq, lt = A.const(CMP_GT, 8), A.const(CMP_EQ, 8), A.const(CMP_LT, 8)
    if op == "advance":
        return A.ite(newer, tsi, stored), A.ite(newer, gt, A.ite(A.eq(tsi, stored), eq, lt))
    if op == "advance_window":
        # a newer tsi is too far ahead when tsi - stored > bound, i.e. when the stored chunk is below
        # tsi - bound (the floor, 0 when tsi <= bound); one corrupted frame cannot move the copy further
        # ahead than the protocol ever does, so it cannot strand the copy's round.  The floor is computed
        # from the packet alone, so a switch compares the register with it once (Tofino's stateful ALU
        # compares a register with one packet field).
        far = A.ugt(A.ssub(tsi, bound, 32), stored)
        return (A.ite(newer, A.ite(far, stored, tsi), stored),
                A.ite(newer, A.ite(far, lt, gt), A.ite(A.eq(tsi, stored), eq, lt)))
    raise KeyError(f"chunk op {op!r}")


def bitmap_op(op: str, this, other, mask, bits: int = 32, A: Algebra = INT):
    """One bitmap word pair.  Return (new_this, new_other, seen)."""
    if op == "nop":
        return this, other, A.false()
    seen = A.ne0(A.band(this, mask))
    if op == "set_clear":
        return A.bor(this, mask), A.band(other, A.bnot(mask, bits)), seen
    if op == "set":
        return A.bor(this, mask), other, seen
    if op == "reset_set":
        return mask, other, A.false()
    raise KeyError(f"bitmap op {op!r}")


def counter_op(op: str, count, n, bits: int = 32, A: Algebra = INT):
    """Return (new_count, state_code)."""
    c = lambda v: A.const(v, 8)  # noqa: E731
    if op == "nop":
        return count, c(COUNT_NONE)
    if op == "inc_mod":
        inc = A.add(count, A.const(1, bits), bits)
        wraps = A.eq(inc, n)
        new = A.ite(wraps, A.const(0, bits), inc)
        state = A.ite(A.eq(count, A.const(0, bits)), c(COUNT_FIRST), A.ite(wraps, c(COUNT_LAST), c(COUNT_MID)))
        return new, state
    if op == "probe_zero":
        return count, A.ite(A.eq(count, A.const(0, bits)), c(COUNT_COMPLETE), c(COUNT_INCOMPLETE))
    if op == "reset_one":
        return A.const(1, bits), c(COUNT_FIRST)
    if op == "inc_sat":
        full = A.eq(count, n)
        inc = A.add(count, A.const(1, bits), bits)
        new = A.ite(full, count, inc)
        state = A.ite(full, c(COUNT_COMPLETE), A.ite(A.eq(inc, n), c(COUNT_LAST), c(COUNT_MID)))
        return new, state
    if op == "probe_full":
        return count, A.ite(A.eq(count, n), c(COUNT_COMPLETE), c(COUNT_INCOMPLETE))
    raise KeyError(f"counter op {op!r}")


def exponent_op(op: str, stored, exp, A: Algebra = INT):
    """Return (new_stored, returned exponent)."""
    if op == "write":
        return exp, exp
    if op == "max":
        m = A.ite(A.ugt(exp, stored), exp, stored)
        return m, m
    if op == "read":
        return stored, stored
    if op == "nop":
        return stored, exp
    raise KeyError(f"exponent op {op!r}")


def minnext_op(op: str, stored, nxt, A: Algebra = INT):
    """Return (new_stored, offset the packet carries on)."""
    if op == "write":
        return nxt, nxt
    if op == "min":
        m = A.ite(A.ugt(stored, nxt), nxt, stored)
        return m, m
    if op == "read":
        return stored, stored
    if op == "nop":
        return stored, nxt
    raise KeyError(f"minnext op {op!r}")


def values_op(op: str, stored, pkt, bits: int, A: Algebra = INT):
    """One value lane.  Return (new_stored, value the packet carries on)."""
    if op == "write":
        return pkt, pkt
    if op == "add":
        s = A.add(stored, pkt, bits)
        return s, s
    if op == "read":
        return stored, stored
    if op == "nop":
        return stored, pkt
    if op == "clear":
        zero = A.const(0, bits)
        return zero, zero
    raise KeyError(f"values op {op!r}")
