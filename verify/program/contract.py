"""What a packet means to the switch, in the terms of the program's inputs: the plan's side of the check.

The proofs reason about the decision table of plan.json and the ops of ``p4gen.ops``.  A program
implements them if, for every packet and every control-plane setting the controller can make, it runs
each op on the registers and fields the plan says.  This module states that meaning from the plan alone
(its wire format, register layout, codes and the worker table's action), never from the emitter:

* a *contribution* is a frame the parser took as far as the aggregation header, with ``msg_type`` the
  plan's contribution code, from a registered worker (the ``workers`` table ran ``set_worker``), whose
  slot index (the low ``slot_bits`` of ``pool_index``) is below the job's ``slot_count``;
* its slot is ``slot_base + index`` and its copy the top bit of ``pool_index``; a register is indexed
  as the plan's ``index`` says (``slot``, ``slot_copy`` = slot·2 + copy, ``slot_copy_pass`` =
  (slot·2 + copy)·2^pass_bits + pass);
* the ops' inputs: ``tsi``, ``exp`` and ``nxt`` are the aggregation header's ``tsi``, ``exponent`` and
  ``next``; ``n`` is ``set_worker``'s ``num_workers``; ``bound`` is two of the job's windows
  (2·``slot_count``); the bitmap word i's ``mask`` is ``set_worker``'s ``mask`` when its ``word`` is i,
  else 0; a value lane's ``pkt`` is the packet's value of that lane; lane i of a register of two lanes
  is its struct's i-th field (TNA) or bits [w·(i+1)-1 : w·i] (v1model), and a bitmap's lane c is copy c;
* the control plane keeps ``slot_base + slot_count`` within the plan's slots, ``word`` below the plan's
  bitmap words, ``slot_count`` at least 1 and ``mgid`` non-zero (``p4gen ctl`` refuses anything else).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from p4gen import decision
from p4gen.ops import graph as opgraph

from .symexec import Event, Executor, fit

PKT = "pkt:hdr."


@dataclass
class Contract:
    """The plan's meaning of one run of a program's ingress (``ex`` after the run)."""
    plan: Any
    ex: Executor
    events: list[Event]
    parsed: Any          # the state the parser leaves (which headers it made valid)

    def valid(self, header: str) -> Any:
        """Whether the parser extracted ``header`` (an instance name: ``agg``, ``data0``, ``recirc``)."""
        return self.ex.read(self.parsed, f"hdr.{header}.$valid", None)

    # -- the run's inputs ----------------------------------------------------------------------------

    def field(self, header: str, name: str) -> Any:
        bits = next(f.bits for f in self.plan.header(header).fields if f.name == name)
        inst = "data0" if header == "data" else header
        return self.ex.read(self.parsed, f"hdr.{inst}.{name}", bits)     # as the parser left it

    def table(self, name: str) -> Event:
        evs = [e for e in self.events if e.kind == "table" and e.name == name]
        if not evs:
            raise LookupError(name)
        return evs[0]

    def arm(self, table: str, action: str) -> tuple[Any, list[Any]]:
        """(condition, arguments) under which ``table``'s application ran ``action`` (by its user name)."""
        ev = self.table(table)
        conds = [(c, args) for c, a, args in ev.data["arms"] if a == action]
        if not conds:
            raise LookupError(f"{table}.{action}")
        return z3.Or([c for c, _ in conds]), conds[0][1]

    def worker_param(self, name: str) -> Any:
        """Parameter ``name`` of the ``set_worker`` the control plane installed (as the run made it)."""
        ev = self.table("workers")
        _cond, args = self.arm("workers", "set_worker")
        names = ev.data["params"]["set_worker"]
        if name not in names:
            raise LookupError(f"set_worker.{name}")
        return args[names.index(name)]

    @property
    def registered(self) -> Any:
        return self.arm("workers", "set_worker")[0]

    @property
    def pool_index(self) -> Any:
        return self.field("agg", "pool_index")

    @property
    def slot_index(self) -> Any:
        return z3.Extract(self.plan.params.slot_bits - 1, 0, self.pool_index)

    @property
    def copy(self) -> Any:
        pi = self.pool_index
        return z3.Extract(pi.size() - 1, pi.size() - 1, pi)

    @property
    def slot(self) -> Any:
        base = self.worker_param("slot_base")
        return fit(base, 32) + fit(self.slot_index, 32)

    def index(self, reg, pass_no: int = 0) -> Any:
        slot, copy = self.slot, fit(self.copy, 32)
        if reg.index == "slot":
            return slot
        if reg.index == "slot_copy":
            return (slot << 1) | copy
        if reg.index == "slot_copy_pass":
            return (((slot << 1) | copy) << self.plan.params.pass_bits) | pass_no
        raise ValueError(f"register {reg.name}: an index {reg.index!r} the program check does not know")

    @property
    def control_plane(self) -> Any:
        """What ``p4gen ctl`` keeps true of every worker entry."""
        p = self.plan.params
        base, count = (fit(self.worker_param(n), 33) for n in ("slot_base", "slot_count"))
        facts = [z3.UGE(count, 1), z3.ULE(base + count, p.slots),
                 z3.ULT(self.worker_param("word"), p.bitmap_words), self.worker_param("mgid") != 0]
        if self.plan.arch == "v1model":
            facts.append(self.ex.input("std.ingress_port", 9) != 511)    # BMv2's drop port is no port
        return z3.And(facts)

    def parser_ok(self) -> Any:
        if self.plan.arch == "v1model":
            return self.ex.input("std.parser_error", 16) == 0
        return self.ex.input("ig_prsr_md.parser_err", 16) == 0

    def first_pass(self) -> Any:
        """The packet entered from a port, not from a recirculation (always, for one pass)."""
        if self.plan.params.passes == 1:
            return z3.BoolVal(True)
        return z3.Not(self.valid("recirc"))

    @property
    def contribution(self) -> Any:
        """The packet is a contribution the switch aggregates (first pass)."""
        p = self.plan.params
        return z3.And(self.first_pass(), self.parser_ok(), self.valid("agg"),
                      self.field("agg", "msg_type") == p.msg_contribution, self.registered,
                      z3.ULT(fit(self.slot_index, 32), fit(self.worker_param("slot_count"), 32)))

    # -- the ops -------------------------------------------------------------------------------------

    def inputs(self, role: str) -> dict[str, Any]:
        """The inputs of ``role``'s ops other than register lanes and masks (see the module's docstring)."""
        out: dict[str, Any] = {}
        for p in opgraph.ROLE_CALLS[role].params:
            if p == "tsi":
                out[p] = self.field("agg", "tsi")
            elif p == "exp":
                out[p] = self.field("agg", "exponent")
            elif p == "nxt":
                out[p] = self.field("agg", "next")
            elif p == "n":
                out[p] = fit(self.worker_param("num_workers"), 32)
            elif p == "bound":
                out[p] = fit(self.worker_param("slot_count"), 32) << 1
        return out

    def mask(self, word: int) -> Any:
        m = fit(self.worker_param("mask"), 32)
        return z3.If(self.worker_param("word") == word, m, z3.BitVecVal(0, 32))

    def data_flag(self) -> Any:
        flags = self.field("agg", "flags")
        return z3.Extract(0, 0, flags)

    def observation(self, name: str, outputs: dict[str, Any]) -> Any:
        """The value of observation ``name`` (a table key) given the step outputs made so far."""
        if name == "copy":
            return self.copy
        if name == "data":
            return fit(self.data_flag(), 8)
        return outputs[name]


def op_of(plan, step, action: str) -> str | None:
    """The op of ``step`` that the plan's table runs with ``action`` (None: the action runs no op)."""
    table = plan.table(f"dt_{step.name}")
    inverse = {k: {code: name for name, code in v.items()} for k, v in decision.CODES.items()}
    for e in table.entries:
        if e.action == action:
            obs = {k: inverse[k][v] for k, v in e.match.items() if k != "copy"}
            rule = decision.lookup(step.rules, obs)
            return rule.op
    if action == table.default_action and action == decision.step_action(step.name, step.role, "nop", None):
        return "nop"
    return None          # a default no key combination reaches (every combination has an entry)
