"""The plan's decision table, executed: compiled per packet and per batch, and by reference.

:class:`Decider` expands every step of the table (``decision.expand``) into
a dict ``observation codes -> kernel`` and builds ``_decide_fast``, one
closure over the registers; ``_decide_reference`` looks every rule up and
runs ``p4gen.ops`` directly; ``_make_loop`` generates the batch path's
decision loop over int lists.  The kernels and the loop's operation
statements come from :mod:`.kernels`, which derives them from ``p4gen.ops``;
this module only wires registers and observations to them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .. import decision as dmod
from .. import ops
from .kernels import NP, observed
from .state import ModelError


class Decider:
    """The decision table as code (a mixin of :class:`SwitchModel`)."""

    # ------------------------------------------------------------------ decision
    def _compile_fast(self) -> None:
        """Expand every step of the decision table into codes -> kernel dicts."""
        table = self.decision
        chain = []
        # observation names available so far, in order; OmniReduce's parser observes ``data`` first
        prior: list[str] = ["data"] if self._omni else []
        codes = self.codes
        for step in table.steps:
            role = step.role
            kern = self._kernels.fast[role]
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
        self._chain = chain
        self._outcome = out
        # batches run frame by frame when a values op of the table is outside the batch path's segment sums
        self._values_batchable = all(self._kernels.values[op].batchable
                                     for role, lut in chain if role == "values" for _k, op in lut.values())
        self._yields = prior
        self._decide_fast = self._make_decider()

    def _make_decider(self):
        """The compiled decision as one closure over the registers (locals, not attribute lookups).

        ``decide(frame, sc, slot, copy, word, mask, n, tsi, exp, data=1, nxt=0, defer=None, bound=0)``
        returns (outcome code, stat index, exponent out, values out, next out); with
        ``defer`` (a list) the values step is not executed but appended as
        (op name, first register row) for :meth:`_apply_values_batch`.  ``data``
        (OmniReduce) says whether the packet carries a data header; without one
        the value kernels read zeros.  ``bound``: how far ahead of a copy's
        chunk a tsi may be (two of the job's windows, ``2 * slot_count``).
        """
        CHUNK, BITMAP, COUNTER, EXPONENT, VALUES, MINNEXT = range(6)
        role_id = {"chunk": CHUNK, "bitmap": BITMAP, "counter": COUNTER, "exponent": EXPONENT, "values": VALUES,
                   "minnext": MINNEXT}
        chain = tuple((role_id[role], {o: kv[0] for o, kv in lut.items()}, {o: kv[1] for o, kv in lut.items()})
                      for role, lut in self._chain)
        outcome = self._outcome
        chunk_reg, counter_reg, exp_reg, mn_reg = self._chunk, self._counter, self._exponent, self._minnext
        counter_full = getattr(self, "_counter_full", 0)
        bm = self._bm
        bm_full = self._bm_full
        one_word = len(bm) == 1
        if one_word:
            bm_l0, bm_l1 = bm[0][0], bm[0][1]
            bm_full0 = bm_full[0]
        vals, pass_bits, passes = self._vals, self._pass_bits, self._passes
        payload = self._payload
        zeros = self._zero_payload
        omni = self._omni
        touches = {op: f.touches for op, f in self._kernels.values.items()}

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

    def _decide_reference(self, frame, sc: int, slot: int, copy: int, word: int, mask: int, n: int, tsi: int,
                          exp: int, data: int = 1, nxt: int = 0, defer=None, bound: int = 0):
        """The same decision, straight from decision.lookup and p4gen.ops (no precomputation).

        With ``self.entry_trace`` a list, every step appends the const entry it
        takes: ``("dt_<step>", ((key, value), ...))``, then ``dt_outcome``'s.
        """
        obs: dict[str, str] = {"data": str(data)} if self._omni else {}
        exp_out = exp
        nxt_out = nxt
        vals_out = None
        trace = self.entry_trace
        codes = self.codes
        for step in self.decision.steps:
            if trace is not None:
                trace.append((f"dt_{step.name}", tuple((k, obs[k]) for k in step.keys)))
            op = dmod.lookup(step.rules, obs).op
            role = step.role
            y = None
            if role == "chunk":
                self._chunk[sc], c = ops.chunk_op(op, self._chunk[sc], tsi, ops.INT, bound)
                y = codes.observation_names("cmp")[c]
            elif role == "bitmap":
                seen = False
                for i, lanes in enumerate(self._bm):
                    bits = self._regs[self._bm_names[i]].lane_bits
                    t, u, s = ops.bitmap_op(op, lanes[copy][slot], lanes[1 - copy][slot],
                                            mask if i == word else 0, bits, ops.INT)
                    lanes[copy][slot], lanes[1 - copy][slot] = t, u
                    seen = seen or bool(s)
                y = "1" if seen else "0"
            elif role == "counter":
                bits = self._regs[self._counter_name].lane_bits
                self._counter[sc], c = ops.counter_op(op, self._counter[sc], n, bits, ops.INT)
                y = codes.observation_names("count")[c]
            elif role == "exponent":
                self._exponent[sc], exp_out = ops.exponent_op(op, self._exponent[sc], exp, ops.INT)
            elif role == "minnext":
                self._minnext[sc], nxt_out = ops.minnext_op(op, self._minnext[sc], nxt, ops.INT)
            else:
                base = sc << self._pass_bits
                rows = self._vals[base:base + self._passes]
                pkt = self._payload(frame) if data else self._zero_payload(frame)
                new, carried = ops.values_op(op, rows.copy(), pkt.astype(rows.dtype), self.layout.value_width, NP)
                rows[...] = np.asarray(new).astype(rows.dtype)
                # an op that does not touch the register on a header-only packet: nothing to carry
                if self._kernels.values[op].touches or data:
                    vals_out = np.broadcast_to(np.asarray(carried).astype(rows.dtype), rows.shape)
            if step.yields:
                obs[step.yields] = y
        out = self.decision.outcome
        if trace is not None:
            trace.append(("dt_outcome", tuple((k, obs[k]) for k in out.keys)))
        rule = dmod.lookup(out.rules, obs)
        return codes.outcome(rule.action), self._stat[rule.stat], exp_out, vals_out, nxt_out

    def _zero_payload(self, frame) -> np.ndarray:
        """What the value kernels read from a packet without a data header (OmniReduce header-only)."""
        L = self.layout
        return np.zeros((L.passes, L.elements_per_pass) if L.passes > 1 else L.elements, L.value_dtype)

    def _payload(self, frame) -> np.ndarray:
        L = self.layout
        if L.passes == 1:           # broadcasts against the (1, elements) register rows
            return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset)
        return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset).reshape(L.passes, L.elements_per_pass)

    def _make_loop(self):
        """The decision of a batch as one generated loop over int lists.

        The plan's decision table is expanded per observation code (mixed-radix
        ints ``o``), and the loop body is a tree over
        those codes: at each node the observations so far are known, so the
        step's operation is too, and its statements -- those
        :meth:`Kernels.inline` derives from ``p4gen.ops`` -- are written out
        there; a branch per code the operation can report (read off its
        expression graph by :func:`.kernels.observed`) leads to the next step,
        and each leaf appends its final code as a constant.  So a packet pays
        for its own path's statements and comparisons, with no table look-up
        or code arithmetic.  The loop takes the int lists it reads, named in
        ``self._vec_inputs`` (of ``_VEC_INPUTS``), and returns the lists of
        final observation codes, then of exponents out and next offsets out
        when a step sets them; the outcome and the values op follow from the
        final code by table look-ups (numpy) in :meth:`_decide_vec`.
        """
        kernels = self._kernels
        env: dict[str, Any] = {}
        roles = [r for r, _ in self._chain]
        src = ["        o = data" if self._omni else "        o = 0"]
        prior = ["data"] if self._omni else []
        radix = {name: len(values) for name, values in self.codes.observations.items()}

        def size() -> int:
            s = 1
            for name in prior:
                s *= radix[name]
            return s

        def table(lut, pick):
            out = [None] * size()
            for codes, v in lut.items():
                o = 0
                for name, c in zip(prior, codes):
                    o = o * radix[name] + c
                out[o] = pick(v)
            return out

        self._vec_values_div = None
        steps = []           # (role, op name per code, kernel per code, its observation's radix or None)
        for si, (role, lut) in enumerate(self._chain):
            names = table(lut, lambda kv: kv[1])
            if role == "values":
                env["VOP"] = np.array([kernels.vcode[x] for x in names], dtype=np.int8)
                self._vec_values_at = len(prior)
                continue
            if role not in self._LOOP_WIRING:
                raise ModelError(f"no batch execution for register role {role!r}")
            y = self.decision.steps[si].yields
            steps.append((role, names, table(lut, lambda kv: kv[0]), radix[y] if y else None))
            if y:
                prior.append(y)
        bodies: dict[tuple[str, str], list[str]] = {}

        def body(role: str, op: str, kern, keep_y: bool) -> list[str]:
            """The statements of ``op`` (derived from p4gen.ops), with the registers they touch bound in env;
            ``keep_y``: its observation is assigned to ``y`` (not when the op can report one code only)."""
            if role == "bitmap" and len(self._bm) > 1:
                env["bm"], env["bmf"] = self._bm, self._bm_full
                k = env.setdefault(f"k_{role}_{op}", kern)
                return ["y = 0", "for i, lanes in enumerate(bm):",
                        "    t_l = lanes[copy]; o_l = lanes[1 - copy]",
                        f"    a, b, s = k_{role}_{op}(t_l[slot], o_l[slot], mask if i == word else 0, bmf[i])",
                        "    t_l[slot] = a; o_l[slot] = b; y |= s"] if k is kern else []
            if (role, op, keep_y) not in bodies:
                regs, inputs, loads, outputs = self._LOOP_WIRING[role]
                if not keep_y:
                    outputs = tuple(None if t == "y" else t for t in outputs)
                for name, attr in regs.items():
                    env[name] = getattr(self, attr)
                if role == "bitmap":
                    inputs = {**inputs, "full": hex(self._bm_full[0])}
                elif role == "counter":
                    inputs = {**inputs, "full": hex(self._counter_full)}
                lines = kernels.inline(role, op, inputs, loads, outputs, "_t")
                if role == "bitmap" and re.search(r"\b[to]_l\b", "\n".join(lines)):
                    env["bm0"], env["bm1"] = self._bm[0][0], self._bm[0][1]
                    lines = ["if copy:", "    t_l = bm1; o_l = bm0", "else:", "    t_l = bm0; o_l = bm1"] + lines
                bodies[(role, op, keep_y)] = lines
            return bodies[(role, op, keep_y)]

        outs = ["O"] + (["E"] if "exponent" in roles else []) + (["N"] if "minnext" in roles else [])

        def node(k: int, o: int, ind: str) -> list[str]:
            """Steps k.. for packets whose observations so far have the code ``o``: the op of each step
            is known here, and a branch per code the op can report leads to the next step (leaves
            append the final code as a constant)."""
            if k == len(steps):
                return [ind + "; ".join(f"a{x}({ {'O': o, 'E': 'e_out', 'N': 'n_out'}[x] })" for x in outs)]
            role, names, kerns, r = steps[k]
            op = names[o]
            ys = (observed(role, op) or list(range(r))) if r is not None else []
            lines = [ind + line for line in body(role, op, kerns[o], len(ys) > 1 or role == "bitmap" and len(self._bm) > 1)]
            if r is None:
                return lines + node(k + 1, o, ind)
            if len(ys) == 1:
                return lines + node(k + 1, o * r + ys[0], ind)
            for i, v in enumerate(ys):
                lines.append(ind + ("else:" if i == len(ys) - 1 else f"{'if' if i == 0 else 'elif'} y == {v}:"))
                lines += node(k + 1, o * r + v, ind + "    ")
            return lines

        ind = "        "
        if self._omni:                    # OmniReduce's parser observes ``data`` first
            src = [ind + "if data:"] + node(0, 1, ind + "    ") + [ind + "else:"] + node(0, 0, ind + "    ")
        else:
            src = node(0, 0, ind)
        # the values op from the final code: drop the digits of the observations made after the values step
        div = 1
        for name in prior[getattr(self, "_vec_values_at", len(prior)):]:
            div *= radix[name]
        self._vec_values_div = div if "values" in roles else None
        self._vec_vop = env.get("VOP")
        self._vec_oa = np.array(table(self._outcome, lambda v: v[0]), dtype=np.int8)
        self._vec_os = np.array(table(self._outcome, lambda v: v[1]), dtype=np.int64)
        # the values op of every final code (one that does not touch the register when the table has no values step)
        ncodes = len(self._vec_oa)
        self._vec_vo_full = (self._vec_vop[np.arange(ncodes) // self._vec_values_div].astype(np.intp)
                             if self._vec_values_div is not None else np.full(ncodes, kernels.v_nop, dtype=np.intp))
        # the loop takes only the columns its body reads (m: the packet's bitmap mask when its
        # word is 0, else 0) and returns the codes, then exponents / next offsets when a step sets them
        text = "\n".join(src)
        self._vec_inputs = [x for x in self._VEC_INPUTS if re.search(rf"\b{x}\b", text)]
        self._vec_has_e, self._vec_has_n = "exponent" in roles, "minnext" in roles
        args = ", ".join(f"{x}_l" for x in self._vec_inputs)
        names = ", ".join(self._vec_inputs)
        head = [f"def loop({args}):",
                "    " + "; ".join(f"{o} = []" for o in outs),
                "    " + "; ".join(f"a{o} = {o}.append" for o in outs),
                f"    for {names} in zip({args}):" if len(self._vec_inputs) > 1 else f"    for {names} in {args}:"]
        tail = [f"    return {', '.join(outs)},"]
        self._vec_source = "\n".join(head + src + tail)
        exec(compile(self._vec_source, "<p4gen decision loop>", "exec"), env)   # noqa: S102
        return env["loop"]

    # how the generated loop reaches each scalar role's registers: the lists it binds (loop name ->
    # attribute), the loop's locals for the op parameters, the register entries a parameter is loaded
    # from, and where each op result goes (the bitmap step picks this copy's and the other copy's lanes first)
    _LOOP_WIRING = {
        "chunk": ({"chunk": "_chunk"}, {"stored": "s", "tsi": "tsi", "bound": "bound"}, {"stored": "chunk[sc]"},
                  ("chunk[sc]", "y")),
        "counter": ({"cnt": "_counter"}, {"count": "c", "n": "n"}, {"count": "cnt[sc]"}, ("cnt[sc]", "y")),
        "exponent": ({"expo": "_exponent"}, {"stored": "s", "exp": "exp"}, {"stored": "expo[sc]"},
                     ("expo[sc]", "e_out")),
        "minnext": ({"mnx": "_minnext"}, {"stored": "s", "nxt": "nxt"}, {"stored": "mnx[sc]"}, ("mnx[sc]", "n_out")),
        "bitmap": ({}, {"this": "t", "other": "u", "mask": "m"},
                   {"this": "t_l[slot]", "other": "o_l[slot]"}, ("t_l[slot]", "o_l[slot]", "y")),
    }

    # columns a generated decision loop may read, in its argument order
    _VEC_INPUTS = ("sc", "slot", "copy", "word", "mask", "m", "n", "tsi", "bound", "exp", "data", "nxt")
