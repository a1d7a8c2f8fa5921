"""The decision of a batch as one generated loop over int lists (the batch path's decision).

:class:`DecisionLoop` turns a :class:`.DecisionProgram`'s expansion of the
decision table into Python source, with the register lists of a
:class:`.SwitchState` bound in its namespace, and compiles it.  The
operations' statements are those :meth:`.Kernels.inline` derives from
``p4gen.ops``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from .kernels import observed
from .state import ModelError, SwitchState

if TYPE_CHECKING:
    from .decider import DecisionProgram


# how the generated loop reaches each scalar role's registers: the lists it binds (loop name -> the
# role's list in SwitchState.scalar), the loop's locals for the op parameters, the register entries a
# parameter is loaded from, and where each op result goes (the bitmap step picks this copy's and the other
# copy's lanes first)
_LOOP_WIRING = {
    "chunk": ({"chunk": "chunk"}, {"stored": "s", "tsi": "tsi", "bound": "bound"}, {"stored": "chunk[sc]"},
              ("chunk[sc]", "y")),
    "counter": ({"cnt": "counter"}, {"count": "c", "n": "n"}, {"count": "cnt[sc]"}, ("cnt[sc]", "y")),
    "exponent": ({"expo": "exponent"}, {"stored": "s", "exp": "exp"}, {"stored": "expo[sc]"},
                 ("expo[sc]", "e_out")),
    "minnext": ({"mnx": "minnext"}, {"stored": "s", "nxt": "nxt"}, {"stored": "mnx[sc]"}, ("mnx[sc]", "n_out")),
    "bitmap": ({}, {"this": "t", "other": "u", "mask": "m"},
               {"this": "t_l[slot]", "other": "o_l[slot]"}, ("t_l[slot]", "o_l[slot]", "y")),
}

# columns a generated decision loop may read, in its argument order
INPUTS = ("sc", "slot", "copy", "word", "mask", "m", "n", "tsi", "bound", "exp", "data", "nxt")


class DecisionLoop:
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
    or code arithmetic.

    Interface: :attr:`run` takes the int lists named in :attr:`inputs` (of
    :data:`INPUTS`, in that order) and returns the list of final observation
    codes, then of exponents out when :attr:`has_exponent` and of next
    offsets out when :attr:`has_next`; :attr:`outcome_action`,
    :attr:`outcome_stat` and :attr:`values_op` (its code in
    ``Kernels.vcode``) map a final code to the packet's outcome, stats
    index and values op (numpy arrays, for look-ups over a batch);
    :attr:`source` is the generated text.
    """

    def __init__(self, program: DecisionProgram, state: SwitchState):
        kernels = program.kernels
        omni = program.omni
        codes_ = program.codes
        bm = state.bitmap
        bm_full = [(1 << b) - 1 for b in state.bitmap_bits]
        env: dict[str, Any] = {}
        roles = [r for r, _ in program.chain]
        src = ["        o = data" if omni else "        o = 0"]
        prior = ["data"] if omni else []
        radix = {name: len(values) for name, values in codes_.observations.items()}

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

        values_at = None
        steps = []           # (role, op name per code, kernel per code, its observation's radix or None)
        for si, (role, lut) in enumerate(program.chain):
            names = table(lut, lambda kv: kv[1])
            if role == "values":
                env["VOP"] = np.array([kernels.vcode[x] for x in names], dtype=np.int8)
                values_at = len(prior)
                continue
            if role not in _LOOP_WIRING:
                raise ModelError(f"no batch execution for register role {role!r}")
            y = program.table.steps[si].yields
            steps.append((role, names, table(lut, lambda kv: kv[0]), radix[y] if y else None))
            if y:
                prior.append(y)
        bodies: dict[tuple[str, str], list[str]] = {}

        def body(role: str, op: str, kern, keep_y: bool) -> list[str]:
            """The statements of ``op`` (derived from p4gen.ops), with the registers they touch bound in env;
            ``keep_y``: its observation is assigned to ``y`` (not when the op can report one code only)."""
            if role == "bitmap" and len(bm) > 1:
                env["bm"], env["bmf"] = bm, bm_full
                k = env.setdefault(f"k_{role}_{op}", kern)
                return ["y = 0", "for i, lanes in enumerate(bm):",
                        "    t_l = lanes[copy]; o_l = lanes[1 - copy]",
                        f"    a, b, s = k_{role}_{op}(t_l[slot], o_l[slot], mask if i == word else 0, bmf[i])",
                        "    t_l[slot] = a; o_l[slot] = b; y |= s"] if k is kern else []
            if (role, op, keep_y) not in bodies:
                regs, inputs, loads, outputs = _LOOP_WIRING[role]
                if not keep_y:
                    outputs = tuple(None if t == "y" else t for t in outputs)
                for name, reg in regs.items():
                    env[name] = state.scalar[reg]
                if role == "bitmap":
                    inputs = {**inputs, "full": hex(bm_full[0])}
                elif role == "counter":
                    inputs = {**inputs, "full": hex((1 << state.scalar_bits["counter"]) - 1)}
                lines = kernels.inline(role, op, inputs, loads, outputs, "_t")
                if role == "bitmap" and re.search(r"\b[to]_l\b", "\n".join(lines)):
                    env["bm0"], env["bm1"] = bm[0][0], bm[0][1]
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
            lines = [ind + line for line in body(role, op, kerns[o], len(ys) > 1 or role == "bitmap" and len(bm) > 1)]
            if r is None:
                return lines + node(k + 1, o, ind)
            if len(ys) == 1:
                return lines + node(k + 1, o * r + ys[0], ind)
            for i, v in enumerate(ys):
                lines.append(ind + ("else:" if i == len(ys) - 1 else f"{'if' if i == 0 else 'elif'} y == {v}:"))
                lines += node(k + 1, o * r + v, ind + "    ")
            return lines

        ind = "        "
        if omni:                          # OmniReduce's parser observes ``data`` first
            src = [ind + "if data:"] + node(0, 1, ind + "    ") + [ind + "else:"] + node(0, 0, ind + "    ")
        else:
            src = node(0, 0, ind)
        # the values op from the final code: drop the digits of the observations made after the values step
        div = 1
        for name in prior[len(prior) if values_at is None else values_at:]:
            div *= radix[name]
        self.outcome_action = np.array(table(program.outcome, lambda v: v[0]), dtype=np.int8)
        self.outcome_stat = np.array(table(program.outcome, lambda v: v[1]), dtype=np.int64)
        # the values op of every final code (one that does not touch the register when the table has no values step)
        ncodes = len(self.outcome_action)
        self.values_op = (env["VOP"][np.arange(ncodes) // div].astype(np.intp) if "values" in roles
                          else np.full(ncodes, kernels.v_nop, dtype=np.intp))
        # the loop takes only the columns its body reads (m: the packet's bitmap mask when its
        # word is 0, else 0) and returns the codes, then exponents / next offsets when a step sets them
        text = "\n".join(src)
        self.inputs = [x for x in INPUTS if re.search(rf"\b{x}\b", text)]
        self.has_exponent, self.has_next = "exponent" in roles, "minnext" in roles
        args = ", ".join(f"{x}_l" for x in self.inputs)
        names = ", ".join(self.inputs)
        head = [f"def loop({args}):",
                "    " + "; ".join(f"{o} = []" for o in outs),
                "    " + "; ".join(f"a{o} = {o}.append" for o in outs),
                f"    for {names} in zip({args}):" if len(self.inputs) > 1 else f"    for {names} in {args}:"]
        tail = [f"    return {', '.join(outs)},"]
        self.source = "\n".join(head + src + tail)
        exec(compile(self.source, "<p4gen decision loop>", "exec"), env)   # noqa: S102
        self.run = env["loop"]
