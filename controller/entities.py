"""P4Runtime entities named by the Plan.

:class:`PlanEntities` turns (table, match, action, params) dicts into
``p4.v1.Entity`` messages and back, taking every ID, key order and width
from the plan -- nothing here keeps an ID of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from p4.v1 import p4runtime_pb2

from p4gen.controller.errors import ControllerError
from p4gen.p4runtime import codec
from p4gen.p4runtime.ids import by_id, numbered
from p4gen.plan import Plan

Update = p4runtime_pb2.Update


@dataclass(frozen=True)
class Entry:
    """One table entry in plan terms."""
    table: str
    match: dict[str, int]
    action: str
    args: dict[str, int]          # the action's parameters


class PlanEntities:
    def __init__(self, plan: Plan):
        self.plan = plan
        self.tables = {t.name: t for t in plan.tables}
        self.actions = {a.name: a for a in plan.actions}
        self.counters = {c.name: c for c in plan.counters}
        self.registers = {r.name: r for r in plan.registers}
        self._table_by_id = {t.id: t for t in plan.tables}
        self._action_by_id = {a.id: a for a in plan.actions}
        self._counter_by_id = {c.id: c for c in plan.counters}
        self._register_by_id = {r.id: r for r in plan.registers}

    # ------------------------------------------------------------ tables
    def table_entry(self, table: str, match: Mapping[str, int], action: str | None = None,
                    params: Mapping[str, int] | None = None) -> p4runtime_pb2.Entity:
        """An exact-match entry; without ``action`` only the key (for DELETE and Read)."""
        t = self.tables[table]
        ent = p4runtime_pb2.Entity()
        te = ent.table_entry
        te.table_id = t.id
        for fid, k in numbered(t.keys):
            fm = te.match.add()
            fm.field_id = fid
            fm.exact.value = codec.encode(int(match[k.name]), k.bits)
        if action is not None:
            a = self.actions[action]
            act = te.action.action
            act.action_id = a.id
            for pid, prm in numbered(a.params):
                p = act.params.add()
                p.param_id = pid
                p.value = codec.encode(int((params or {})[prm.name]), prm.bits)
        return ent

    def table_wildcard(self, table: str) -> p4runtime_pb2.Entity:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = self.tables[table].id
        return ent

    def decode_table_entry(self, te: p4runtime_pb2.TableEntry) -> Entry:
        t = self._table_by_id[te.table_id]
        match = {}
        for fm in te.match:
            k = by_id(t.keys, fm.field_id)
            if k is None:
                raise ControllerError(f"the switch answered with match field id {fm.field_id}, which table {t.name} "
                                      f"does not have (its P4Info is not this plan's)")
            match[k.name] = codec.decode(fm.exact.value, k.bits)
        a = self._action_by_id[te.action.action.action_id]
        args = {}
        for p in te.action.action.params:
            prm = by_id(a.params, p.param_id)
            if prm is None:
                raise ControllerError(f"the switch answered with parameter id {p.param_id}, which action {a.name} "
                                      f"does not have (its P4Info is not this plan's)")
            args[prm.name] = codec.decode(p.value, prm.bits)
        return Entry(t.name, match, a.name, args)

    # ------------------------------------------------------------ multicast
    @staticmethod
    def group(mgid: int, replicas: Iterable[tuple[int, int]] = ()) -> p4runtime_pb2.Entity:
        ent = p4runtime_pb2.Entity()
        g = ent.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = mgid
        for port, rid in replicas:
            r = g.replicas.add()
            r.egress_port = port
            r.instance = rid
        return ent

    @staticmethod
    def decode_group(g: p4runtime_pb2.MulticastGroupEntry) -> tuple[int, list[tuple[int, int]]]:
        reps = []
        for r in g.replicas:
            port = r.egress_port if r.WhichOneof("port_kind") != "port" else int.from_bytes(r.port, "big")
            reps.append((port, r.instance))
        return g.multicast_group_id, reps

    # ------------------------------------------------------------ counters and registers
    def counter_wildcard(self, name: str) -> p4runtime_pb2.Entity:
        ent = p4runtime_pb2.Entity()
        ent.counter_entry.counter_id = self.counters[name].id
        return ent

    def counter_index_name(self, name: str, index: int) -> str:
        indices = self.counters[name].indices
        return indices[index] if index < len(indices) else str(index)

    def register_zero(self, name: str) -> p4runtime_pb2.Entity:
        """Every index of register ``name`` set to zero (index unset = the whole array)."""
        r = self.registers[name]
        ent = p4runtime_pb2.Entity()
        ent.register_entry.register_id = r.id
        ent.register_entry.data.bitstring = codec.encode(0, r.entry_bits)
        return ent

    def fq_name(self, kind: str, name: str) -> str:
        """The fully qualified P4 name of a register/table/counter (as BMv2's JSON spells it)."""
        obj = {"register": self.registers, "table": self.tables, "counter": self.counters}[kind][name]
        scope = getattr(obj, "scope", "ingress")
        return self.plan.p4names.qualified(scope, name)


def update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    u = p4runtime_pb2.Update()
    u.type = kind
    u.entity.CopyFrom(entity)
    return u
