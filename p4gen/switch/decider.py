"""The plan's decision table, compiled: the per-packet decision, fast and by reference.

:class:`DecisionProgram` expands every step of the table
(``decision.expand``) into a dict ``observation codes -> kernel`` and builds
:attr:`DecisionProgram.decide`, one closure over the registers of a
:class:`.SwitchState`; :meth:`DecisionProgram.decide_reference` looks every
rule up and runs ``p4gen.ops`` directly.  The kernels come from
:mod:`.kernels`, which derives them from ``p4gen.ops``; this module only
wires registers and observations to them.  The batch path's generated loop
over the same expansion is :mod:`.decision_loop`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import decision as dmod
from .. import ops
from .kernels import NP, Kernels
from .state import ModelError, SwitchState


class DecisionProgram:
    """The decision table of one plan, executable against the registers of ``state``.

    Interface: :attr:`decide` (the compiled decision) and
    :meth:`decide_reference` take the same arguments and return (outcome
    code, stat index, exponent out, values out, next out); :attr:`entry_trace`
    (a list, or None) records the table entries :meth:`decide_reference`
    takes; :attr:`chain` (per step: its role and ``observation codes ->
    (kernel, op name)``), :attr:`outcome` (``codes -> (outcome code, stat
    index)``) and :attr:`observations` (the observation names, in the order
    the codes list them) are the expansion the batch loop is generated from;
    :attr:`values_batchable` says whether every values op of the table has the
    batch path's segment-sum form.
    """

    def __init__(self, table: dmod.DecisionTable, codes: Any, layout: Any, state: SwitchState, kernels: Kernels):
        if table.step("minnext") is not None and "minnext" not in state.scalar:
            raise ModelError("the decision table has a minnext step but the plan has no minnext register")
        self.omni = layout.omni
        if not self.omni and any("data" in st.keys for st in table.steps + (table.outcome,)):
            raise ModelError("the decision table observes 'data', which only an omnireduce plan's parser provides")
        self.table = table
        self.codes = codes
        self.kernels = kernels
        self._layout = layout
        self._state = state
        self._stat = state.stat_index
        # fast=False: a list here records the dt_* entry every step takes (see decide_reference)
        self.entry_trace: list[tuple[str, tuple]] | None = None
        self._compile()
        self.decide = self._make_decider()

    def _compile(self) -> None:
        """Expand every step of the decision table into codes -> kernel dicts."""
        table = self.table
        chain = []
        # observation names available so far, in order; OmniReduce's parser observes ``data`` first
        prior: list[str] = ["data"] if self.omni else []
        codes = self.codes
        for step in table.steps:
            role = step.role
            kern = self.kernels.fast[role]
            lut = {}
            for obs, rule in dmod.expand(prior, step.rules):
                lut[tuple(codes.observation(k, obs[k]) for k in prior)] = (kern[rule.op], rule.op)
            chain.append((role, lut))
            if step.yields:
                prior.append(step.yields)
        out = {}
        for obs, rule in dmod.expand(prior, table.outcome.rules):
            out[tuple(codes.observation(k, obs[k]) for k in prior)] = (codes.outcome(rule.action),
                                                                        self._stat[rule.stat])
        self.chain: list[tuple[str, dict]] = chain
        self.outcome: dict[tuple, tuple[int, int]] = out
        # batches run frame by frame when a values op of the table is outside the batch path's segment sums
        self.values_batchable = all(self.kernels.values[op].batchable
                                    for role, lut in chain if role == "values" for _k, op in lut.values())
        self.observations: list[str] = prior

    def _make_decider(self):
        """The compiled decision as one closure over the registers (locals, not attribute lookups).

        ``decide(frame, sc, slot, copy, word, mask, n, tsi, exp, data=1, nxt=0, defer=None, bound=0)``
        returns (outcome code, stat index, exponent out, values out, next out); with
        ``defer`` (a list) the values step is not executed but appended as
        (op name, first register row) for :meth:`.BatchValues.apply_deferred`.  ``data``
        (OmniReduce) says whether the packet carries a data header; without one
        the value kernels read zeros.  ``bound``: how far ahead of a copy's
        chunk a tsi may be (two of the job's windows, ``2 * slot_count``).
        """
        CHUNK, BITMAP, COUNTER, EXPONENT, VALUES, MINNEXT = range(6)
        role_id = {"chunk": CHUNK, "bitmap": BITMAP, "counter": COUNTER, "exponent": EXPONENT, "values": VALUES,
                   "minnext": MINNEXT}
        chain = tuple((role_id[role], {o: kv[0] for o, kv in lut.items()}, {o: kv[1] for o, kv in lut.items()})
                      for role, lut in self.chain)
        outcome = self.outcome
        st = self._state
        chunk_reg, counter_reg, exp_reg, mn_reg = (st.scalar.get(r) for r in ("chunk", "counter", "exponent",
                                                                            "minnext"))
        counter_full = (1 << st.scalar_bits["counter"]) - 1 if "counter" in st.scalar_bits else 0
        bm = st.bitmap
        bm_full = [(1 << b) - 1 for b in st.bitmap_bits]
        one_word = len(bm) == 1
        if one_word:
            bm_l0, bm_l1 = bm[0][0], bm[0][1]
            bm_full0 = bm_full[0]
        vals, pass_bits, passes = st.values, st.pass_bits, st.passes
        payload = self.payload
        zeros = self.zero_payload
        omni = self.omni
        touches = {op: f.touches for op, f in self.kernels.values.items()}

        def decide(frame, sc, slot, copy, word, mask, n, tsi, exp, data=1, nxt=0, defer=None, bound=0):
            o = (data,) if omni else ()
            exp_out = exp
            nxt_out = nxt
            vals_out = None
            for role, kernels, names in chain:
                k = kernels[o]
                if role == BITMAP:
                    if one_word:
                        if copy:
                            bm_l1[slot], bm_l0[slot], seen = k(bm_l1[slot], bm_l0[slot],
                                                               mask if word == 0 else 0, bm_full0)
                        else:
                            bm_l0[slot], bm_l1[slot], seen = k(bm_l0[slot], bm_l1[slot],
                                                               mask if word == 0 else 0, bm_full0)
                    else:
                        seen = 0
                        for i, lanes in enumerate(bm):
                            this_l, other_l = lanes[copy], lanes[1 - copy]
                            this_l[slot], other_l[slot], sn = k(this_l[slot], other_l[slot],
                                                                mask if i == word else 0, bm_full[i])
                            seen |= sn
                    o = o + (seen,)
                elif role == COUNTER:
                    counter_reg[sc], y = k(counter_reg[sc], n, counter_full)
                    o = o + (y,)
                elif role == CHUNK:
                    chunk_reg[sc], y = k(chunk_reg[sc], tsi, bound)
                    o = o + (y,)
                elif role == EXPONENT:
                    exp_reg[sc], exp_out = k(exp_reg[sc], exp)
                elif role == MINNEXT:
                    mn_reg[sc], nxt_out = k(mn_reg[sc], nxt)
                else:
                    base = sc << pass_bits
                    if defer is not None:
                        defer.append((names[o], base))
                    else:
                        vals_out = k(vals[base:base + passes], frame, payload if data else zeros)
                        if vals_out is None and not data and touches[names[o]]:
                            vals_out = zeros(frame)       # e.g. a write on a header-only packet carries zeros
            action, stat = outcome[o]
            return action, stat, exp_out, vals_out, nxt_out

        return decide

    def decide_reference(self, frame, sc: int, slot: int, copy: int, word: int, mask: int, n: int, tsi: int,
                         exp: int, data: int = 1, nxt: int = 0, defer=None, bound: int = 0):
        """The same decision, straight from decision.lookup and p4gen.ops (no precomputation).

        With ``self.entry_trace`` a list, every step appends the const entry it
        takes: ``("dt_<step>", ((key, value), ...))``, then ``dt_outcome``'s.
        """
        obs: dict[str, str] = {"data": str(data)} if self.omni else {}
        exp_out = exp
        nxt_out = nxt
        vals_out = None
        trace = self.entry_trace
        codes = self.codes
        st = self._state
        scalar = st.scalar
        for step in self.table.steps:
            if trace is not None:
                trace.append((f"dt_{step.name}", tuple((k, obs[k]) for k in step.keys)))
            op = dmod.lookup(step.rules, obs).op
            role = step.role
            y = None
            if role == "chunk":
                scalar["chunk"][sc], c = ops.chunk_op(op, scalar["chunk"][sc], tsi, ops.INT, bound)
                y = codes.observation_names("cmp")[c]
            elif role == "bitmap":
                seen = False
                for i, lanes in enumerate(st.bitmap):
                    bits = st.bitmap_bits[i]
                    t, u, s = ops.bitmap_op(op, lanes[copy][slot], lanes[1 - copy][slot],
                                            mask if i == word else 0, bits, ops.INT)
                    lanes[copy][slot], lanes[1 - copy][slot] = t, u
                    seen = seen or bool(s)
                y = "1" if seen else "0"
            elif role == "counter":
                bits = st.scalar_bits["counter"]
                scalar["counter"][sc], c = ops.counter_op(op, scalar["counter"][sc], n, bits, ops.INT)
                y = codes.observation_names("count")[c]
            elif role == "exponent":
                scalar["exponent"][sc], exp_out = ops.exponent_op(op, scalar["exponent"][sc], exp, ops.INT)
            elif role == "minnext":
                scalar["minnext"][sc], nxt_out = ops.minnext_op(op, scalar["minnext"][sc], nxt, ops.INT)
            else:
                base = sc << st.pass_bits
                rows = st.values[base:base + st.passes]
                pkt = self.payload(frame) if data else self.zero_payload(frame)
                new, carried = ops.values_op(op, rows.copy(), pkt.astype(rows.dtype), self._layout.value_width, NP)
                rows[...] = np.asarray(new).astype(rows.dtype)
                # an op that does not touch the register on a header-only packet: nothing to carry
                if self.kernels.values[op].touches or data:
                    vals_out = np.broadcast_to(np.asarray(carried).astype(rows.dtype), rows.shape)
            if step.yields:
                obs[step.yields] = y
        out = self.table.outcome
        if trace is not None:
            trace.append(("dt_outcome", tuple((k, obs[k]) for k in out.keys)))
        rule = dmod.lookup(out.rules, obs)
        return codes.outcome(rule.action), self._stat[rule.stat], exp_out, vals_out, nxt_out

    def zero_payload(self, frame) -> np.ndarray:
        """What the value kernels read from a packet without a data header (OmniReduce header-only)."""
        L = self._layout
        return np.zeros((L.passes, L.elements_per_pass) if L.passes > 1 else L.elements, L.value_dtype)

    def payload(self, frame) -> np.ndarray:
        """The values a frame carries, shaped as the register rows of one (slot, copy) (a view)."""
        L = self._layout
        if L.passes == 1:           # broadcasts against the (1, elements) register rows
            return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset)
        return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset).reshape(L.passes, L.elements_per_pass)
