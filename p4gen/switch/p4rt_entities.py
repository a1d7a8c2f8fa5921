"""The entities a P4Runtime client writes and reads on the software switch, checked field by field.

:class:`EntityStore` turns one ``p4.v1.Update`` or read ``Entity`` into calls
on a :class:`~p4gen.switch.model.SwitchModel`, with every ID, width and
index checked against the Plan first.  A bad update raises :class:`Fail`
with the google.rpc code P4Runtime prescribes: INVALID_ARGUMENT for an
unknown update type, ID, field or action, a value wider than its field and
an index outside its array; NOT_FOUND / ALREADY_EXISTS for a missing or
present entry; PERMISSION_DENIED for const tables; UNIMPLEMENTED for what
the software switch does not have (meters, action profiles, clone sessions).
The caller holds the model's lock around a write; a read takes it itself, only
while it copies the state it answers from (:meth:`EntityStore.read`).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from ..p4runtime import codec
from ..p4runtime.ids import by_id, numbered
from .model import ModelError, SwitchModel
from .p4rt_common import UPDATE, UPDATE_TYPES, Fail, check_enum


class EntityStore:
    """Tables, multicast groups, counters and registers of one model, as P4Runtime entities."""

    def __init__(self, model: SwitchModel):
        self.model = model
        self.plan = model.plan
        plan = self.plan
        self._tables = {t.id: t for t in plan.tables}
        self._actions = {a.id: a for a in plan.actions}
        self._counters = {c.id: c for c in plan.counters}
        self._registers = {r.id: r for r in plan.registers}
        self._action_ids = {a.name: a.id for a in plan.actions}

    def clear(self, lock) -> None:
        """Empty tables and groups, zero counters and registers (a fresh pipeline); ``lock`` is held."""
        m = self.model
        with m.state.deferred(lock):
            for t in self.plan.tables:
                if not t.const:
                    for e in m.read(t.name):
                        m.delete(t.name, e["match"])
        for mgid in list(m.groups):
            m.delete_group(mgid)
        m.counter_reset()
        m.register_reset()

    def write(self, up: p4runtime_pb2.Update) -> None:
        check_enum(up.type, UPDATE_TYPES, "update type", UPDATE.Type)
        kind = up.entity.WhichOneof("entity")
        if kind == "table_entry":
            self._write_table(up.type, up.entity.table_entry)
        elif kind == "packet_replication_engine_entry":
            pre = up.entity.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise Fail(code_pb2.UNIMPLEMENTED, f"{pre.WhichOneof('type')} is not supported by the software switch")
            self._write_group(up.type, pre.multicast_group_entry)
        elif kind == "counter_entry":
            self._write_counter(up.type, up.entity.counter_entry)
        elif kind == "register_entry":
            self._write_register(up.type, up.entity.register_entry)
        else:
            raise Fail(code_pb2.UNIMPLEMENTED, f"{kind} is not supported by the software switch")

    # -- tables
    def _table(self, table_id: int) -> dict[str, Any]:
        t = self._tables.get(table_id)
        if t is None:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"unknown table id {table_id}")
        return t

    def _decode_match(self, t: dict[str, Any], te: p4runtime_pb2.TableEntry, partial: bool = False) -> dict[str, int]:
        match: dict[str, int] = {}
        for fm in te.match:
            k = by_id(t.keys, fm.field_id)
            if k is None:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"table {t.name} has no match field id {fm.field_id}")
            if fm.WhichOneof("field_match_type") != "exact":
                raise Fail(code_pb2.INVALID_ARGUMENT, f"table {t.name} key {k.name} is an exact match")
            if k.name in match:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"table {t.name} key {k.name} is given twice")
            try:
                match[k.name] = codec.decode(fm.exact.value, k.bits)
            except ValueError as exc:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"table {t.name} key {k.name}: {exc}") from None
        if not partial:
            missing = [k.name for k in t.keys if k.name not in match]
            if missing:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"table {t.name} entry lacks the key {missing[0]}")
        return match

    def _decode_action(self, t: dict[str, Any], te: p4runtime_pb2.TableEntry) -> tuple[str, dict[str, int]]:
        if te.action.WhichOneof("type") != "action":
            raise Fail(code_pb2.UNIMPLEMENTED if te.HasField("action") else code_pb2.INVALID_ARGUMENT,
                        f"table {t.name} entry needs a direct action"
                        + (" (action profiles are not supported)" if te.HasField("action") else ""))
        act = te.action.action
        a = self._actions.get(act.action_id)
        if a is None or a.name not in t.actions:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"action id {act.action_id} is not an action of table {t.name}")
        args: dict[str, int] = {}
        for p in act.params:
            spec = by_id(a.params, p.param_id)
            if spec is None:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"action {a.name} has no parameter id {p.param_id}")
            try:
                args[spec.name] = codec.decode(p.value, spec.bits)
            except ValueError as exc:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"action {a.name} parameter {spec.name}: {exc}") from None
        missing = [q.name for q in a.params if q.name not in args]
        if missing:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"action {a.name} lacks the parameter {missing[0]}")
        return a.name, args

    def _write_table(self, kind: int, te: p4runtime_pb2.TableEntry) -> None:
        t = self._table(te.table_id)
        name = t.name
        if t.const:
            raise Fail(code_pb2.PERMISSION_DENIED, f"table {name} is const")
        if te.is_default_action:
            raise Fail(code_pb2.PERMISSION_DENIED, f"the default action of table {name} is const")
        if te.priority:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"table {name} is exact-match; priority must be 0")
        for extra in ("meter_config", "counter_data", "meter_counter_data"):
            if te.HasField(extra):
                raise Fail(code_pb2.UNIMPLEMENTED, f"{extra} is not supported by the software switch")
        if te.idle_timeout_ns:
            raise Fail(code_pb2.UNIMPLEMENTED, "idle timeouts are not supported by the software switch")
        match = self._decode_match(t, te)
        exists = self.model.holds(name, match)
        try:
            if kind == UPDATE.INSERT:
                if exists:
                    raise Fail(code_pb2.ALREADY_EXISTS, f"table {name} already holds an entry for {match}")
                if self.model.size(name) >= t.size:
                    raise Fail(code_pb2.RESOURCE_EXHAUSTED, f"table {name} is full ({t.size} entries)")
                action, params = self._decode_action(t, te)
                self.model.insert(name, match, action, params)
            elif kind == UPDATE.MODIFY:
                if not exists:
                    raise Fail(code_pb2.NOT_FOUND, f"table {name} holds no entry for {match}")
                action, params = self._decode_action(t, te)
                self.model.modify(name, match, action, params)
            else:
                if not exists:
                    raise Fail(code_pb2.NOT_FOUND, f"table {name} holds no entry for {match}")
                self.model.delete(name, match)
        except ModelError as exc:
            raise Fail(code_pb2.INVALID_ARGUMENT, str(exc)) from None

    # -- multicast groups
    def _write_group(self, kind: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
        mgid = g.multicast_group_id
        if not 0 < mgid < (1 << 16):
            raise Fail(code_pb2.INVALID_ARGUMENT, f"multicast group id {mgid} outside 1..65535")
        exists = mgid in self.model.groups
        if kind == UPDATE.INSERT and exists:
            raise Fail(code_pb2.ALREADY_EXISTS, f"multicast group {mgid} already exists")
        if kind != UPDATE.INSERT and not exists:
            raise Fail(code_pb2.NOT_FOUND, f"multicast group {mgid} does not exist")
        if kind == UPDATE.DELETE:
            self.model.delete_group(mgid)
            return
        reps = []
        for r in g.replicas:
            port = int.from_bytes(r.port, "big") if r.WhichOneof("port_kind") == "port" else r.egress_port
            if (port, r.instance) in reps:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"multicast group {mgid} repeats replica "
                                                       f"(port {port}, instance {r.instance})")
            reps.append((port, r.instance))
        try:
            self.model.set_group(mgid, reps)
        except ModelError as exc:
            raise Fail(code_pb2.INVALID_ARGUMENT, str(exc)) from None

    # -- counters and registers
    def _write_counter(self, kind: int, c: p4runtime_pb2.CounterEntry) -> None:
        cnt = self._counters.get(c.counter_id)
        if cnt is None:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"unknown counter id {c.counter_id}")
        self._check_counter_index(cnt, c)
        if kind != UPDATE.MODIFY:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"counter {cnt.name} can only be modified")
        if c.HasField("index") or c.data.packet_count or c.data.byte_count:
            raise Fail(code_pb2.UNIMPLEMENTED, f"the software switch only resets counter {cnt.name} as a whole "
                                                "(index unset, zero data)")
        self.model.counter_reset()

    @staticmethod
    def _check_counter_index(cnt: dict[str, Any], c: p4runtime_pb2.CounterEntry) -> None:
        size = len(cnt.indices)
        if c.HasField("index") and not 0 <= c.index.index < size:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"counter {cnt.name} index {c.index.index} outside 0..{size - 1}")

    def _register(self, register_id: int) -> dict[str, Any]:
        r = self._registers.get(register_id)
        if r is None:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"unknown register id {register_id}")
        return r

    def _write_register(self, kind: int, e: p4runtime_pb2.RegisterEntry) -> None:
        r = self._register(e.register_id)
        name = r.name
        if kind != UPDATE.MODIFY:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"register {name} can only be modified")
        if e.data.WhichOneof("data") != "bitstring":
            raise Fail(code_pb2.INVALID_ARGUMENT, f"register {name} holds bit<{r.entry_bits}> bitstrings")
        try:
            value = codec.decode(e.data.bitstring, r.entry_bits)
        except ValueError as exc:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"register {name}: {exc}") from None
        mask = (1 << r.lane_bits) - 1
        lanes = [(value >> (i * r.lane_bits)) & mask for i in range(r.lanes)]
        if not e.HasField("index"):
            if value == 0:
                self.model.register_reset(name)
            else:
                for i in range(r.entries):
                    self.model.register_write(name, i, lanes)
            return
        if not 0 <= e.index.index < r.entries:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"register {name} index {e.index.index} outside "
                                                   f"0..{r.entries - 1}")
        self.model.register_write(name, e.index.index, lanes)

    # -- reads: sized first, then state copied under the lock piece by piece, messages built outside it
    def read_count(self, ent: p4runtime_pb2.Entity) -> int:
        """How many entities ``ent`` selects (at most): checks it as :meth:`read` would, builds nothing."""
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            te = ent.table_entry
            tables = [self._table(te.table_id)] if te.table_id else list(self._tables.values())
            if te.table_id and not te.is_default_action:
                self._decode_match(tables[0], te, partial=True)
            return sum(1 if te.is_default_action else
                       len(t.entries) if t.const else self.model.size(t.name) for t in tables)
        if kind == "packet_replication_engine_entry":
            pre = ent.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise Fail(code_pb2.UNIMPLEMENTED, f"{pre.WhichOneof('type')} is not supported by the software switch")
            return len(self.model.groups)
        if kind == "counter_entry":
            c = ent.counter_entry
            if c.counter_id and c.counter_id not in self._counters:
                raise Fail(code_pb2.INVALID_ARGUMENT, f"unknown counter id {c.counter_id}")
            if c.HasField("index"):
                if not c.counter_id:
                    raise Fail(code_pb2.INVALID_ARGUMENT, "a counter index needs a counter id")
                self._check_counter_index(self._counters[c.counter_id], c)
                return 1
            return sum(len(cnt.indices) for cid, cnt in self._counters.items() if c.counter_id in (0, cid))
        if kind == "register_entry":
            r = ent.register_entry
            regs = [self._register(r.register_id)] if r.register_id else list(self._registers.values())
            if r.HasField("index"):
                for reg in regs:
                    if not 0 <= r.index.index < reg.entries:
                        raise Fail(code_pb2.INVALID_ARGUMENT, f"register {reg.name} index {r.index.index} outside "
                                                               f"0..{reg.entries - 1}")
                return len(regs)
            return sum(reg.entries for reg in regs)
        raise Fail(code_pb2.UNIMPLEMENTED, f"{kind} is not supported by the software switch")

    def read(self, ent: p4runtime_pb2.Entity, lock, piece: int, encode=None) -> Iterator[bytes]:
        """The entities ``ent`` selects (checked by :meth:`read_count` first), as serialized ReadResponses
        of at most ``piece`` entities.

        The model's state is copied while ``lock`` is held -- one register array, table or the groups at
        a time -- and the messages are built after it is released, so a Read of any size holds the
        packet path only for those copies.  ``encode(fn, *args)`` runs :func:`register_responses` (the
        bulk of a large Read: protobuf here is pure Python) where the caller wants it, e.g. in another
        process, so that it does not take the packet loop's interpreter lock either; default: here."""
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            yield from self._read_tables(ent.table_entry, lock, piece)
        elif kind == "packet_replication_engine_entry":
            want = ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
            with lock:
                groups = {g: list(reps) for g, reps in self.model.groups.items() if want in (0, g)}
            rows = sorted(groups)
            for lo in range(0, len(rows), piece):
                resp = p4runtime_pb2.ReadResponse()
                for mgid in rows[lo:lo + piece]:
                    g = resp.entities.add().packet_replication_engine_entry.multicast_group_entry
                    g.multicast_group_id = mgid
                    for port, rid in groups[mgid]:
                        g.replicas.add(egress_port=port, instance=rid)
                yield resp.SerializeToString()
        elif kind == "counter_entry":
            yield from self._read_counters(ent.counter_entry, lock, piece)
        else:
            yield from self._read_registers(ent.register_entry, lock, piece, encode)

    def _entry(self, e: p4runtime_pb2.Entity, t, match: dict[str, int], action: str,
               args: dict[str, int], default: bool = False) -> None:
        """Fill ``e`` with the table entry (match -> action(params)) of table ``t``."""
        te = e.table_entry
        te.table_id = t.id
        if default:
            te.is_default_action = True
        for fid, k in numbered(t.keys):
            if k.name in match:
                te.match.add(field_id=fid).exact.value = codec.encode(int(match[k.name]), k.bits)
        a = self._actions[self._action_ids[action]]
        te.action.action.action_id = a.id
        for pid, q in numbered(a.params):
            te.action.action.params.add(param_id=pid, value=codec.encode(int(args[q.name]), q.bits))
        if t.const:
            te.is_const = True

    def _read_tables(self, te: p4runtime_pb2.TableEntry, lock, piece: int) -> Iterator[bytes]:
        tables = [self._table(te.table_id)] if te.table_id else list(self._tables.values())
        for t in tables:
            if te.is_default_action:
                resp = p4runtime_pb2.ReadResponse()
                self._entry(resp.entities.add(), t, {}, t.default_action, dict(t.default_args or {}),
                            default=True)
                yield resp.SerializeToString()
                continue
            want = self._decode_match(t, te, partial=True) if te.table_id else {}
            if t.const:
                rows = [(dict(e.match), e.action, dict(e.args)) for e in t.entries]
            else:
                with lock:
                    rows = [(e["match"], e["action"], e["params"]) for e in self.model.read(t.name)]
            rows = [r for r in rows if all(r[0].get(k) == v for k, v in want.items())]
            for lo in range(0, len(rows), piece):
                resp = p4runtime_pb2.ReadResponse()
                for match, action, params in rows[lo:lo + piece]:
                    self._entry(resp.entities.add(), t, match, action, params)
                yield resp.SerializeToString()

    def _read_counters(self, c: p4runtime_pb2.CounterEntry, lock, piece: int) -> Iterator[bytes]:
        for cid, cnt in sorted(self._counters.items()):
            if c.counter_id not in (0, cid):
                continue
            with lock:
                values = self.model.counter_read(cnt.name)
            rows = [(i, stat) for i, stat in enumerate(cnt.indices) if not c.HasField("index") or c.index.index == i]
            for lo in range(0, len(rows), piece):
                resp = p4runtime_pb2.ReadResponse()
                for i, stat in rows[lo:lo + piece]:
                    ce = resp.entities.add().counter_entry
                    ce.counter_id = cid
                    ce.index.index = i
                    ce.data.packet_count, ce.data.byte_count = values[stat]
                yield resp.SerializeToString()

    def _read_registers(self, r: p4runtime_pb2.RegisterEntry, lock, piece: int, encode) -> Iterator[bytes]:
        regs = [self._register(r.register_id)] if r.register_id else list(self._registers.values())
        for reg in regs:
            with lock:                                   # a copy of one array: the only time the lock is held
                arr = self.model.register_read(reg.name)
            first = r.index.index if r.HasField("index") else 0
            if r.HasField("index"):
                arr = arr[first:first + 1]
            args = (reg.id, reg.lane_bits, reg.entry_bits, first, arr, piece)
            yield from (encode(register_responses, *args) if encode is not None and len(arr) > piece
                        else register_responses(*args))


def register_responses(rid: int, lane_bits: int, entry_bits: int, first: int, arr: np.ndarray,
                       piece: int) -> list[bytes]:
    """Serialized ReadResponses of the register rows ``arr`` (``first`` the index of its first row), at most
    ``piece`` RegisterEntry entities each (a function of its arguments only: it may run in another process)."""
    values = _entry_values(arr, lane_bits, entry_bits)
    encode, out = codec.encode, []
    for lo in range(0, len(values), piece):
        resp = p4runtime_pb2.ReadResponse()
        add = resp.entities.add
        for i, v in enumerate(values[lo:lo + piece], start=first + lo):
            re_ = add().register_entry
            re_.register_id = rid
            re_.index.index = i
            re_.data.bitstring = encode(v, entry_bits)
        out.append(resp.SerializeToString())
    return out


def _entry_values(arr: np.ndarray, lane_bits: int, entry_bits: int) -> list[int]:
    """Each row's lanes as one integer, lane 0 low (as the v1model program packs them)."""
    rows = arr.reshape(len(arr), -1)
    if entry_bits <= 64:                                 # the whole array at once
        rows = rows.astype(np.uint64)
        value = rows[:, 0].copy()
        for j in range(1, rows.shape[1]):
            value |= rows[:, j] << np.uint64(j * lane_bits)
        return value.tolist()
    return [sum(int(v) << (j * lane_bits) for j, v in enumerate(row)) for row in rows.tolist()]
