"""Translation validation of the ingress: the program's register actions, keys, gating and outcome against
the plan's ops (:mod:`.contract`), by Z3 over one symbolic run (:mod:`.symexec`).

For every decision step and every action its table runs, under "a contribution, and the step's table
chose this action" (the program's own choice, whatever its keys):

* every register array of the step's role holds, at the packet's index, what the op of ``p4gen.ops``
  that the plan names for the action stores (every lane), and nothing else changed;
* the op's output is where the next steps read it: every later table's key of that observation holds
  it when the table is applied, and an output that is a packet field (the exponent, the next offset,
  each value lane) leaves the ingress holding it.

Then: a packet that is not a contribution changes no register, and one with an aggregation header is
dropped (and counted as the plan's stat says); a contribution is multicast to the worker's group,
answered to its sender (addresses and ports swapped) or dropped as ``dt_outcome`` chose, and counted
under that entry's stat.
"""

from __future__ import annotations

from typing import Any, Iterator

import z3

from p4gen.ops import graph as opgraph

from ..z3alg import BV
from .contract import PKT, Contract, op_of
from .show import along, concretize, name_of, show
from .symexec import VALID, Executor, State, fit

RLIMIT = 50_000_000          # Z3 resource count per query (work, not time: see verify/budget.py)


class Undecided(Exception):
    """Z3 ran out of its resource budget on a query."""


def counterexample(assume: list[Any], goal: Any) -> z3.ModelRef | None:
    """A model of ``assume`` where ``goal`` fails, or None when ``goal`` holds under ``assume``."""
    s = z3.Solver()
    s.set("rlimit", RLIMIT)
    s.add(*assume)
    s.add(z3.Not(goal))
    r = s.check()
    if r == z3.unsat:
        return None
    if r == z3.sat:
        return s.model()
    raise Undecided(str(goal)[:80])


def contribution_pins(plan) -> dict[str, Any]:
    """The inputs every contribution has: no parser error, an IPv4 / UDP frame to the plan's first port,
    the contribution message type, a worker the ``workers`` table knows."""
    p = plan.params
    pins = {"pkt:hdr.ethernet.ether_type": 0x0800, "pkt:hdr.ipv4.ihl": 5, "pkt:hdr.ipv4.protocol": 17,
            "pkt:hdr.udp.dst_port": p.udp_port_min, "pkt:hdr.agg.msg_type": p.msg_contribution,
            "cp.workers": "set_worker"}
    pins["std.parser_error" if plan.arch == "v1model" else "ig_prsr_md.parser_err"] = 0
    return pins


def first_failure(assume: list[Any], goals: list[Any]) -> tuple[int, z3.ModelRef] | None:
    """(index, model) of the first of ``goals`` that fails under ``assume``, or None when all hold.  One
    solver holds the assumptions and each goal is asked on its own (a conjunction of many goals makes
    the solver split on their negations and is far slower than asking them one by one)."""
    s = z3.Solver()
    s.set("rlimit", RLIMIT * max(1, len(goals)))
    s.add(*assume)
    for i, g in enumerate(goals):
        s.push()
        s.add(z3.Not(g))
        r = s.check()
        if r == z3.sat:
            return i, s.model()
        if r != z3.unsat:
            raise Undecided(str(g)[:80])
        s.pop()
    return None


def _consts(t: Any) -> list[Any]:
    """The uninterpreted constants under ``t``."""
    out, stack, seen = [], [t], set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(x)
        stack.extend(x.children())
    return out


class IngressCheck:
    """One symbolic run of parser and ingress, and the checks over it (``differences`` lists what fails)."""

    def __init__(self, plan, ir, parser, ingress):
        self.plan, self.ir = plan, ir
        # the run of a contribution: what the contract fixes about one is fixed, which folds the branches
        # that only other packets take (a parser error, another message, an unknown worker)
        self.ex = Executor(ir, plan.arch, contribution_pins(plan), free=lambda t: t.startswith("dt_"))
        self.parsed = self.ex.parser(parser, State())
        self.final = self.ex.control(ingress, self.parsed.copy())
        self.c = Contract(plan, self.ex, self.ex.events, self.parsed)
        self.base = [self.c.contribution, self.c.control_plane]
        # the run of any packet, for what must hold of the others
        self.any = Executor(ir, plan.arch)
        self.any_parsed = self.any.parser(parser, State())
        self.any_final = self.any.control(ingress, self.any_parsed.copy())
        self.any_c = Contract(plan, self.any, self.any.events, self.any_parsed)
        self.differences: list[str] = []
        self.covered: dict[str, int] = {"decision actions": 0, "register lanes": 0, "keys": 0}

    # -- registers -----------------------------------------------------------------------------------

    def arrays(self, reg, ex: Executor | None = None, final: State | None = None) -> tuple[list[Any], list[Any]]:
        """(initial, final) arrays of plan register ``reg`` in a run (the contribution's by default), one
        per lane the program gives it."""
        ex, final = ex or self.ex, final or self.final
        inst = next((i for i, n in ex.reg_names.items() if n == reg.name), None)
        if inst is None:
            return [], []
        init = list(ex.reg_arrays[inst].values())
        return init, list(final.regs.get(inst, ex.reg_arrays[inst]).values())

    def lanes(self, reg, arrays: list[Any], idx: Any) -> list[Any]:
        """The lanes of ``reg``'s entry ``idx`` (lane i of a two-lane entry: its i-th field, or its bits
        [w(i+1)-1 : wi] when the program keeps the entry as one word)."""
        if len(arrays) == reg.lanes:
            return [a[idx] for a in arrays]
        word = arrays[0][idx]
        w = reg.lane_bits
        return [z3.Extract(w * (i + 1) - 1, w * i, word) for i in range(reg.lanes)]

    def expected(self, step, reg, op: str, old: list[Any]) -> tuple[list[Any], list[Any]]:
        """(new lanes, outputs) of ``op`` on ``reg``'s entry holding ``old``: the plan's meaning."""
        role = step.role
        if role == "bitmap":
            c0 = self.c.copy == 0
            this, other = z3.If(c0, old[0], old[1]), z3.If(c0, old[1], old[0])
            from p4gen import ops
            t, o, seen = ops.bitmap_op(op, this, other, self.c.mask(reg.word), reg.lane_bits, BV)
            return [z3.If(c0, t, o), z3.If(c0, o, t)], [seen]
        if role == "values":
            news, outs = [], []
            from p4gen import ops
            for lane, e in enumerate(reg.elements or (0,)):
                new, out = ops.values_op(op, old[lane], self.c.field("data", f"d{e}"), reg.lane_bits, BV)
                news.append(new)
                outs.append(out)
            return news, outs
        call = opgraph.ROLE_CALLS[role]
        vals = dict(self.c.inputs(role))
        vals[call.registers[0]] = old[0]
        res = call.call(op, vals, BV, reg.lane_bits)
        return [res[call.stores.index(call.registers[0])]], [res[call.output]]

    def writers(self, reg_name: str, model: z3.ModelRef, ex: Executor | None = None) -> list[str]:
        """The elements that wrote ``reg_name`` in the run ``model`` describes."""
        out = []
        for e in (ex or self.ex).events:
            if e.kind == "write" and e.name == reg_name and z3.is_true(model.eval(e.pc, model_completion=True)):
                out.append(e.data["element"])
        return list(dict.fromkeys(out))

    # -- the checks ----------------------------------------------------------------------------------

    def check_parser(self) -> bool:
        """A contribution's frame is parsed in the plan's wire order (its block, for a sparse protocol, only
        when its data flag says one follows), and no other frame is taken for one."""
        from .structure import data_instances, wire_order

        wire = wire_order(self.plan)
        sparse = "data" in self.plan.decision.parsed
        cases = [([], wire)] if not sparse else \
            [([self.c.data_flag() == 1], wire), ([self.c.data_flag() == 0], [w for w in wire if w not in
                                                                              data_instances(self.plan)])]
        for extra, want in cases:
            s = z3.Solver()
            s.set("rlimit", RLIMIT)
            s.add(*self.base, *extra)
            have = []
            for e in self.ex.events:
                if e.kind != "extract" or not e.name.startswith("hdr."):
                    continue
                s.push()
                s.add(e.pc)
                if s.check() == z3.sat:
                    have.append(e.name[len("hdr."):])
                s.pop()
            have = [h for h in have if h != "recirc"]
            if have != want:
                self.differences.append(f"program.p4: the parser extracts {', '.join(have) or 'nothing'} from a "
                                        f"contribution{' with data flag ' + str(len(cases) - cases.index((extra, want)) - 1) if sparse else ''} "
                                        f"where the plan's wire format is {', '.join(want)}")
                return False
        a, p = self.any_c, self.plan.params
        rd = lambda f, b: self.any.input(f"pkt:hdr.{f}", b)  # noqa: E731
        port = rd("udp.dst_port", 16)
        frame = z3.And(rd("ethernet.ether_type", 16) == 0x0800, rd("ipv4.ihl", 4) == 5, rd("ipv4.protocol", 8) == 17,
                       z3.ULE(p.udp_port_min, port), z3.ULE(port, p.udp_port_max))
        m = counterexample([a.first_pass(), a.valid("agg")], frame)
        if m is not None:
            ev = lambda x: m.eval(x, model_completion=True)  # noqa: E731
            self.differences.append(f"program.p4: the parser takes a frame for an aggregation packet that is not one "
                                    f"(ether_type {ev(rd('ethernet.ether_type', 16))}, UDP port {ev(port)}; the plan's "
                                    f"ports are {p.udp_port_min}..{p.udp_port_max})")
            return False
        return True

    def index(self, reg) -> Any:
        """The index the program addresses ``reg`` with (proved equal to the plan's by
        :meth:`check_indexes`; using the program's own term keeps the queries small)."""
        for e in self.ex.events:
            if e.kind == "write" and e.name == reg.name:
                return e.data["index"]
        return self.c.index(reg)

    def check_indexes(self) -> bool:
        """Every register a contribution's run writes is written at the index the plan gives it."""
        goals = []
        for reg in self.plan.registers:
            want = self.c.index(reg)
            for e in self.ex.events:
                if e.kind == "write" and e.name == reg.name:
                    goals.append((z3.Implies(e.pc, e.data["index"] == want), lambda m, e=e, want=want, reg=reg:
                                  self.differences.append(
                                      f"program.p4: {e.data['element']} addresses {reg.name} at "
                                      f"{m.eval(e.data['index'], model_completion=True)} where the plan's index "
                                      f"({reg.index}) is {m.eval(want, model_completion=True)}")))
        return self.all_hold(self.base, goals)

    def run(self) -> list[str]:
        # each decision table's free choice is one the plan's entries allow for the packet's own keys
        for step in self.plan.decision.steps:
            alts = [z3.And(cond, self.entry_inputs(step, a)) for a, _op, cond in self.step_actions(step, quiet=True)]
            self.base.append(z3.Or(alts))
        outputs: dict[str, Any] = {}
        if not self.check_parser() or not self.check_indexes():
            return self.differences
        for step in self.plan.decision.steps:
            self.check_step(step, outputs)
        self.check_keys(outputs)
        self.check_gating()
        self.check_outcome()
        self.check_later_passes()
        return self.differences

    def check_later_passes(self) -> None:
        """A later pass of a layout of several passes (the packet came back with its pass header) changes no
        register but the value arrays: the decision was taken, and counted, in the first pass."""
        if self.plan.params.passes == 1:
            return
        a = self.any_c
        goals = []
        for reg in self.plan.registers:
            if reg.role == "values":
                continue
            init, final = self.arrays(reg, self.any, self.any_final)
            j = z3.BitVec(f"later.{reg.name}", 32)
            goals.append((z3.And([x[j] == y[j] for x, y in zip(init, final)]), lambda m, reg=reg: self.differences.append(
                f"program.p4: {', '.join(self.writers(reg.name, m, self.any)) or 'the ingress'} changes {reg.name} in "
                f"a later pass (the packet came back with its pass header); only the value arrays run after the "
                f"first pass")))
        self.all_hold([a.valid("recirc"), a.control_plane], goals)

    def _runs(self, step, action: str) -> bool:
        try:
            self.c.arm(f"dt_{step.name}", action)
            return True
        except LookupError:
            return False

    def step_actions(self, step, quiet: bool = False) -> Iterator[tuple[str, str, Any]]:
        table = self.plan.table(f"dt_{step.name}")
        for action in table.actions:
            op = op_of(self.plan, step, action)
            if op is None:
                continue
            try:
                cond, _args = self.c.arm(f"dt_{step.name}", action)
                cond = z3.And(cond, self.entry_inputs(step, action))
            except LookupError:
                if quiet:
                    continue
                self.differences.append(f"program.p4: table dt_{step.name} cannot run action {action}, which "
                                        f"the plan's table runs for {step.role} {op}")
                continue
            yield action, op, cond

    def entry_inputs(self, step, action: str) -> Any:
        """The packet's own keys (its copy, its data flag) of the plan's entries that run ``action``."""
        table = self.plan.table(f"dt_{step.name}")
        alts = []
        for e in table.entries:
            if e.action == action:
                alts.append(z3.And([self.c.observation(k, {}) == v for k, v in e.match.items()
                                    if k in ("copy", "data")] + [z3.BoolVal(True)]))
        if action == table.default_action or not alts:
            return z3.BoolVal(True)
        return z3.Or(alts)

    def check_step(self, step, outputs: dict[str, Any]) -> None:
        regs = self.plan.registers_of(step.role)
        obs_arms: list[tuple[Any, Any]] = []
        for action, op, cond in self.step_actions(step):
            goals: list[tuple[Any, Any]] = []        # (what must hold, the refusal when it does not)
            seen = []
            for reg in regs:
                init, final = self.arrays(reg)
                if not init:
                    self.differences.append(f"program.p4: the plan's register {reg.name} ({reg.role}) is not in "
                                            f"the program")
                    return
                idx = self.index(reg)
                old = self.lanes(reg, init, idx)
                new = self.lanes(reg, final, idx)
                want, outs = self.expected(step, reg, op, old)
                for lane, (have, exp) in enumerate(zip(new, want)):
                    goals.append((have == exp, lambda m, reg=reg, lane=lane, have=have, exp=exp, old=old:
                                  self.refuse_store(step, reg, action, op, lane, have, exp, m, old)))
                j = z3.BitVec(f"other.{reg.name}", 32)
                goals.append((z3.Implies(j != idx, z3.And([a[j] == b[j] for a, b in zip(init, final)])),
                              lambda m, reg=reg, j=j, idx=idx: self.differences.append(
                                  f"program.p4: {', '.join(self.writers(reg.name, m)) or 'the ingress'} writes "
                                  f"{reg.name} at index {m.eval(j)}, not at the packet's index "
                                  f"{m.eval(idx, model_completion=True)} (the plan indexes {reg.name} by {reg.index}; "
                                  f"dt_{step.name} action {action})")))
                places = [f"hdr.data0.d{e}" for e in (reg.elements or (0,))] if step.role == "values" else \
                    [{"exponent": "hdr.agg.exponent", "minnext": "hdr.agg.next"}[step.role]] \
                    if step.role in ("exponent", "minnext") else []
                for place, out in zip(places, outs):
                    have = self.ex.read(self.final, place, reg.lane_bits)
                    inst = place.rsplit(".", 1)[0]
                    carried = self.ex.read(self.final, f"{inst}.{VALID}", None) if step.role == "values" else True
                    if step.role == "values" and self.plan.params.passes > 1:
                        continue      # a later pass moves the values on: checked by the pass chain
                    goals.append((z3.Implies(carried, have == out), lambda m, place=place, have=have, out=out:
                                  self.refuse_output(place, step, action, op, have, out, m)))
                seen += outs
            if not self.all_hold(self.base + [cond], goals):
                return
            self.covered["decision actions"] += 1
            self.covered["register lanes"] += sum(r.lanes for r in regs)
            out = self.output(step, seen)
            if out is not None:
                obs_arms.append((cond, out))
        if step.yields and obs_arms:
            term = obs_arms[-1][1]
            for cond, out in reversed(obs_arms[:-1]):
                term = z3.If(cond, out, term)
            outputs[step.yields] = term
        if step.role == "values":
            codes = self.plan.codes.ops["values"]
            arms = [(cond, z3.BitVecVal(codes[op], 8)) for _a, op, cond in self.step_actions(step)]
            if arms:
                term = arms[-1][1]
                for cond, v in reversed(arms[:-1]):
                    term = z3.If(cond, v, term)
                outputs["values_op"] = term

    def all_hold(self, assume: list[Any], goals: list[tuple[Any, Any]]) -> bool:
        """Whether every goal holds under ``assume``; else the first failing one's refusal is recorded."""
        bad = first_failure(assume, [g for g, _ in goals])
        if bad is None:
            return True
        i, m = bad
        goals[i][1](m)
        return False

    def output(self, step, outs: list[Any]) -> Any:
        """The step's observation code (8 bits) from its ops' outputs; a packet-field output is checked
        here and yields no observation."""
        role = step.role
        if role == "bitmap":
            return fit(z3.Or([o if z3.is_bool(o) else o != 0 for o in outs]), 8)
        if role in ("chunk", "counter"):
            return fit(outs[0], 8)
        return None

    # -- refusals ------------------------------------------------------------------------------------

    def explain(self, have: Any, want: Any, m: z3.ModelRef, old: list[Any], inputs: list[Any]) -> tuple[str, str, str]:
        """(program's expression, ops.py's expression, an example) of a difference: both along the
        counterexample's branch, over the register's old value (``value``) and the op's inputs."""
        names = ["value"] if len(old) == 1 else [f"value.lane{i}" for i in range(len(old))]
        values = [z3.Const(n, o.sort()) for n, o in zip(names, old)]
        keep = set(names) | {str(x) for x in inputs}

        def expr(t: Any) -> str:
            t = along(t, m)
            t = z3.substitute(t, *zip([along(o, m) for o in old], values)) if old else t
            return show(concretize(t, m, keep), limit=70)

        eg = ", ".join(f"{n}={m.eval(o, model_completion=True)}" for n, o in zip(names, old))
        eg += "".join(f", {name_of(str(x))}={m.eval(x, model_completion=True)}" for x in inputs)
        return expr(have), expr(want), eg.lstrip(", ")

    def refuse_store(self, step, reg, action, op, lane, have, want, m, old) -> None:
        who = ", ".join(self.writers(reg.name, m))
        kind = "RegisterAction" if self.plan.arch != "v1model" and who else \
            "" if who.startswith("the ingress apply block") else "action"
        who = who or f"dt_{step.name}'s action {action}"
        inputs = self._input_terms(step, reg, lane)
        h, w, eg = self.explain(have, want, m, old, inputs)
        lane_txt = "" if reg.lanes == 1 else f" lane {lane}"
        self.differences.append(
            f"program.p4: {(kind + ' ') if kind else ''}{who} stores {h} in {reg.name}{lane_txt} where ops.py's {step.role} {op} stores "
            f"{w} (dt_{step.name} action {action}; e.g. {eg}: {m.eval(have, model_completion=True)} instead of "
            f"{m.eval(want, model_completion=True)})")

    def _input_terms(self, step, reg=None, lane: int = 0) -> list[Any]:
        """The op's inputs as the run names them: the constants (packet fields, action data) under a value
        lane's packet value, the bitmap's mask, or the role's inputs."""
        role = step.role
        if role == "values":
            terms = [self.c.field("data", f"d{(reg.elements or (0,))[lane]}")] if reg is not None else []
        elif role == "bitmap":
            terms = [self.c.worker_param("mask")]
        else:
            terms = list(self.c.inputs(role).values())
        out = [c for t in terms for c in _consts(t) if z3.is_bv(c) and str(c).startswith(("pkt:", "cp."))]
        return list({str(c): c for c in out}.values())

    def refuse_output(self, place, step, action, op, have, want, m) -> None:
        self.differences.append(
            f"program.p4: {place} leaves the ingress holding {m.eval(have, model_completion=True)} where ops.py's "
            f"{step.role} {op} returns {m.eval(want, model_completion=True)} (dt_{step.name} action {action})")

    # -- keys, gating, outcome -----------------------------------------------------------------------

    def check_keys(self, outputs: dict[str, Any]) -> None:
        """Every decision table's key holds, when the table is applied, the observation the plan names."""
        for ev in self.ex.events:
            if ev.kind != "table" or not ev.name.startswith(("dt_", "run_")):
                continue
            for kname, term, _mt in ev.data["keys"]:
                if kname not in outputs and kname not in ("copy", "data"):
                    continue
                want = self.c.observation(kname, outputs)
                have = term if term.size() == want.size() else fit(term, want.size())
                self.covered["keys"] += 1
                m = counterexample(self.base + [ev.pc], have == want)
                if m is not None:
                    self.differences.append(
                        f"program.p4: table {ev.name}'s key {kname} is {m.eval(have, model_completion=True)} when it "
                        f"is applied where {self._source(kname, m).format(m.eval(want, model_completion=True))}")
                    return

    def _source(self, kname: str, m: z3.ModelRef) -> str:
        """What makes observation ``kname`` in the run ``m`` describes: the op and the program's element."""
        if kname == "copy":
            return "the packet's copy (pool_index's top bit) is {}"
        if kname == "data":
            return "the packet's data flag is {}"
        step = next((s for s in self.plan.decision.steps if s.yields == kname or
                     (kname == "values_op" and s.role == "values")), None)
        if step is None:
            return f"the plan's observation {kname} is {{}}"
        for action, op, cond in self.step_actions(step):
            if z3.is_true(m.eval(cond, model_completion=True)):
                who = [w for r in self.plan.registers_of(step.role) for w in self.writers(r.name, m)]
                kind = "RegisterAction " if self.plan.arch != "v1model" else ""
                by = f", {kind}{', '.join(dict.fromkeys(who))}" if who else ""
                if kname == "values_op":
                    return f"ops.py's values {op} has code {{}} (dt_{step.name} action {action}{by})"
                return f"ops.py's {step.role} {op} reports {{}} (dt_{step.name} action {action}{by})"
        return f"the plan's observation {kname} is {{}}"

    def check_gating(self) -> None:
        """A packet that is not a contribution changes no register."""
        c = self.any_c
        assume = [z3.Not(c.contribution), c.control_plane, c.first_pass()]
        goals = []
        for reg in self.plan.registers:
            init, final = self.arrays(reg, self.any, self.any_final)
            j = z3.BitVec(f"any.{reg.name}", 32)
            goals.append((z3.And([a[j] == b[j] for a, b in zip(init, final)]), lambda m, reg=reg: self.differences.append(
                f"program.p4: {', '.join(self.writers(reg.name, m, self.any)) or 'the ingress'} changes {reg.name} "
                f"for a packet that is not a contribution the switch aggregates ({self._why_not(m, c)})")))
        self.all_hold(assume, goals)

    def _why_not(self, m: z3.ModelRef, c: Contract) -> str:
        p = self.plan.params
        ev = lambda x: z3.is_true(m.eval(x, model_completion=True))  # noqa: E731
        if not ev(c.parser_ok()):
            return "a parser error"
        if not ev(self.c.valid("agg")):
            return "no aggregation header"
        if not ev(c.field("agg", "msg_type") == p.msg_contribution):
            return "msg_type is not a contribution"
        if not ev(c.registered):
            return "an unknown worker"
        return "a slot past the job's slot_count"

    def check_outcome(self) -> None:
        """The packet's fate is the one ``dt_outcome`` chose: multicast to the worker's group, unicast back
        to its sender, or dropped; and a packet that is not a contribution but has an aggregation header is
        dropped."""
        if self.plan.params.passes > 1:
            return       # the packet leaves in its last pass, which the program check does not follow
        p = self.plan.params
        codes = self.plan.codes.outcomes
        arms = self.c.table("dt_outcome").data["arms"]
        outcome = arms[-1][2][0]
        for cond, _a, args in reversed(arms[:-1]):
            outcome = z3.If(cond, args[0], outcome)
        fwd = self.forwarding()
        mgid = self.c.worker_param("mgid")
        result = self.ex.read(self.final, "hdr.agg.msg_type", 4)
        rd = lambda p, b: self.ex.read(self.final, p, b)  # noqa: E731
        swaps = [("hdr.ethernet.dst_addr", "ethernet.src_addr", 48), ("hdr.ethernet.src_addr", "ethernet.dst_addr", 48),
                 ("hdr.ipv4.dst_addr", "ipv4.src_addr", 32), ("hdr.ipv4.src_addr", "ipv4.dst_addr", 32),
                 ("hdr.udp.dst_port", "udp.src_port", 16), ("hdr.udp.src_port", "udp.dst_port", 16)]
        sent = [("it is dropped", z3.Not(fwd["dropped"])),
                ("its msg_type is not the result's", result == p.msg_result)]
        want = {
            "multicast": sent + [("it is not multicast to the worker's group", fwd["mcast"] == fit(mgid, 16))],
            "unicast": sent + [("it is multicast", fwd["mcast"] == 0),
                               ("it does not go back out of its ingress port", fwd["port"] == fwd["in_port"])] +
                       [(f"{have} is not the frame's {src}", rd(have, b) == self.ex.input(PKT + src, b))
                        for have, src, b in swaps],
            "drop": [("it is not dropped", fwd["dropped"])],
        }
        for name, goals in want.items():
            bad = first_failure(self.base + [outcome == codes[name]], [g for _w, g in goals])
            if bad is not None:
                i, m = bad
                self.differences.append(
                    f"program.p4: a contribution for which dt_outcome chose {name} leaves the ingress, but "
                    f"{goals[i][0]}: {self._fate(fwd, m)}")
                return
        a = self.any_c
        fwd = self.forwarding(self.any, self.any_final)
        m = counterexample([z3.Not(a.contribution), a.control_plane, a.first_pass(), a.valid("agg")], fwd["dropped"])
        if m is not None:
            self.differences.append(f"program.p4: a packet with an aggregation header that the switch does not "
                                    f"aggregate ({self._why_not(m, a)}) is not dropped: {self._fate(fwd, m, a)}")

    def swapped(self) -> list[Any]:
        rd = lambda p, b: self.ex.read(self.final, p, b)  # noqa: E731
        inp = lambda p, b: self.ex.input(PKT + p, b)  # noqa: E731
        return [rd("hdr.ethernet.dst_addr", 48) == inp("ethernet.src_addr", 48),
                rd("hdr.ethernet.src_addr", 48) == inp("ethernet.dst_addr", 48),
                rd("hdr.ipv4.dst_addr", 32) == inp("ipv4.src_addr", 32),
                rd("hdr.ipv4.src_addr", 32) == inp("ipv4.dst_addr", 32),
                rd("hdr.udp.dst_port", 16) == inp("udp.src_port", 16),
                rd("hdr.udp.src_port", 16) == inp("udp.dst_port", 16)]

    def forwarding(self, ex: Executor | None = None, final: State | None = None) -> dict[str, Any]:
        """Where the ingress sends the packet, in the architecture's terms."""
        ex, final = ex or self.ex, final or self.final
        rd = lambda p, b: ex.read(final, p, b)  # noqa: E731
        if self.plan.arch == "v1model":
            mcast = rd("std.mcast_grp", 16)
            port = rd("std.egress_spec", 9)
            return {"dropped": z3.And(mcast == 0, port == 511), "mcast": mcast, "port": port,
                    "in_port": ex.input("std.ingress_port", 9)}
        drop = rd("ig_dprsr_md.drop_ctl", 3)
        return {"dropped": z3.Extract(0, 0, drop) == 1, "mcast": rd("ig_tm_md.mcast_grp_a", 16),
                "port": rd("ig_tm_md.ucast_egress_port", 9), "in_port": ex.input("pkt:ig_intr_md.ingress_port", 9)}

    def _fate(self, fwd: dict[str, Any], m: z3.ModelRef, c: Contract | None = None) -> str:
        ev = lambda x: m.eval(x, model_completion=True)  # noqa: E731
        if z3.is_true(ev(fwd["dropped"])):
            return "dropped"
        mc = ev(fwd["mcast"]).as_long()
        if mc:
            return f"multicast to group {mc} (the worker's group is {ev((c or self.c).worker_param('mgid'))})"
        return f"sent to port {ev(fwd['port'])} (it came in on port {ev(fwd['in_port'])})"
