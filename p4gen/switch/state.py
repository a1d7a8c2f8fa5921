"""The switch's state and its control API: registers, tables, multicast groups, counters, config files.

:class:`SwitchState` holds what a P4Runtime server holds for one Plan: the
register arrays (scalar registers as Python lists, value registers as one
numpy array), the writable tables with their per-packet look-up dicts, the
multicast groups and the ``stats`` counter.  Every request is checked
against the plan and refused with a :class:`ModelError` that names what was
asked and what the plan has.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..errors import P4genError
from ..wire import ip as ip_int, mac as mac_int


class ModelError(P4genError):
    """A control-plane request names an unknown table, action, field or group, or a value does not fit."""


# What the packet paths read of an entry, by parameter name (the look-up dicts hold these, in this order,
# whatever order the plan lists an action's parameters in: every reader takes them by name)
WORKER_ARGS = ("worker_id", "word", "mask", "num_workers", "slot_base", "slot_count", "mgid")
RESULT_DST_ARGS = ("dst_mac", "dst_ip", "dst_port")
L2_ARGS = ("port",)


@dataclass
class _Table:
    spec: Any                                # p4gen.plan.Table
    keys: list[Any]                          # p4gen.plan.Key
    actions: dict[str, tuple[Any, ...]]      # action -> its parameters (p4gen.plan.Field)
    entries: dict[tuple, tuple[str, tuple]]


def _to_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ModelError(f"{what}={value!r} must be an integer")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        try:
            if ":" in s:
                return mac_int(s)
            if s.count(".") == 3:
                return ip_int(s)
            return int(s, 0)
        except (ValueError, P4genError):
            pass
    raise ModelError(f"{what}={value!r} is not an integer, MAC or IPv4 address")


class SwitchState:
    """Registers, tables, multicast groups, counters and config of one Plan: what a P4Runtime server reads
    and writes.

    The control API (``register_*``, ``insert`` / ``modify`` / ``delete`` /
    ``read``, ``set_group``, ``counter_*``, ``load_config``) checks every
    request against the plan.  The packet paths read and update the state
    through these attributes, which are created once and then only changed
    in place (so a path may bind them at its construction):

    * registers: ``scalar[role]`` (an int list per scalar role the plan has:
      chunk, counter, exponent, minnext), ``scalar_bits[role]`` (its lane
      width), ``bitmap[word]`` (the word's two lanes, copy 0 and copy 1, as int
      lists), ``bitmap_bits[word]``, ``values`` (one numpy array, row
      ``(slot_copy << pass_bits) | pass``, column = element of a pass),
      ``pass_bits`` and ``passes``;
    * counters: ``stat_names``, ``stat_index`` (name -> index),
      ``stat_packets`` and ``stat_bytes`` (per index);
    * the writable tables as per-packet look-up dicts: ``workers`` (the key in
      the internal order of :attr:`worker_key_fields` -> the ``set_worker``
      parameters, or None for another action), ``l2`` (destination MAC bytes
      -> egress port or None), ``result_dst`` (rid -> (MAC bytes, IPv4, UDP
      port) or None); ``groups`` (mgid -> [(egress port, rid)]);
    * ``version[table]``: how often each table has changed, so a cache built
      from a table knows when to rebuild; :meth:`subscribe` tells a subscriber
      of every change of a table instead (for a derived form the packet path
      must find up to date, rebuilt by the control plane's write rather than
      by the next packet; :meth:`deferred` rebuilds it once for many changes).
    """

    def __init__(self, plan, layout):
        self._params = plan.params
        self._init_registers(plan.registers, layout)
        self._init_tables(plan)
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self.stat_names: list[str] = list(plan.stats)
        self.stat_index = {n: i for i, n in enumerate(self.stat_names)}
        self.stat_packets = [0] * len(self.stat_names)
        self.stat_bytes = [0] * len(self.stat_names)

    # ------------------------------------------------------------------ registers
    def _init_registers(self, regs, layout) -> None:
        L, p = layout, self._params
        self._regs = {r.name: r for r in regs}
        self.scalar: dict[str, list[int]] = {}
        self.scalar_bits: dict[str, int] = {}
        bm = sorted((r for r in regs if r.role == "bitmap"), key=lambda r: r.word)
        self.bitmap: list[list[list[int]]] = [[[0] * r.entries for _ in range(r.lanes)] for r in bm]
        self.bitmap_bits: list[int] = [r.lane_bits for r in bm]
        self._bm_names = [r.name for r in bm]
        for r in regs:
            if r.role in ("chunk", "counter", "exponent", "minnext"):
                self.scalar[r.role] = [0] * r.entries
                self.scalar_bits[r.role] = r.lane_bits
        vregs = [r for r in regs if r.role == "values"]
        self._vcols: dict[str, list[int]] = {}
        entries = {r.entries for r in vregs}
        if len(entries) > 1:
            raise ModelError("plan value registers differ in size")
        for r in vregs:
            if r.lane_bits != L.value_width:
                raise ModelError(f"value register {r.name} lane width {r.lane_bits} != value width {L.value_width}")
            self._vcols[r.name] = list(r.elements)
        cols = sorted(c for cs in self._vcols.values() for c in cs)
        if vregs and cols != list(range(L.elements_per_pass)):
            raise ModelError("plan value registers do not cover each element of a pass exactly once")
        rows = entries.pop() if entries else 0
        if p.pass_pipes > 1:
            # folded passes: each pipe holds its own copy of the value arrays (slot, copy); the model keeps
            # them as one array with pass k of (slot, copy) at row (slot_copy << pass_bits) | k
            rows <<= p.pass_bits
        self.values = np.zeros((rows, L.elements_per_pass), dtype=L.native_dtype)
        self.pass_bits = p.pass_bits
        self.passes = L.passes

    def register_names(self) -> list[str]:
        return list(self._regs)

    def register_read(self, name: str) -> np.ndarray:
        """The register's contents: shape (entries,) for one lane, (entries, lanes) otherwise."""
        r = self._reg(name)
        role = r.role
        if role == "values":
            a = self.values[:, self._vcols[name]].copy()
        elif role == "bitmap":
            lanes = self.bitmap[self._bm_names.index(name)]
            a = np.array(lanes, dtype=np.uint64).T
        else:
            a = np.array(self.scalar[role], dtype=np.uint64)
        return a

    def register_write(self, name: str, index: int, value) -> None:
        r = self._reg(name)
        if not 0 <= index < r.entries:
            raise ModelError(f"register {name} index {index} outside 0..{r.entries - 1}")
        vals = np.atleast_1d(np.asarray(value, dtype=np.uint64))
        if vals.size != r.lanes or np.any(vals >> np.uint64(r.lane_bits)):
            raise ModelError(f"register {name} holds {r.lanes} lane(s) of {r.lane_bits} bits; got {value!r}")
        role = r.role
        if role == "values":
            self.values[index, self._vcols[name]] = vals
        elif role == "bitmap":
            for lane, v in zip(self.bitmap[self._bm_names.index(name)], vals):
                lane[index] = int(v)
        else:
            self.scalar[role][index] = int(vals[0])

    def register_reset(self, name: str | None = None) -> None:
        """Zero one register (or all of them)."""
        names = [name] if name is not None else list(self._regs)
        for n in names:
            r = self._reg(n)
            role = r.role
            if role == "values":
                self.values[:, self._vcols[n]] = 0
            elif role == "bitmap":
                for lane in self.bitmap[self._bm_names.index(n)]:
                    lane[:] = [0] * len(lane)
            else:
                lst = self.scalar[role]
                lst[:] = [0] * len(lst)

    def _reg(self, name: str):
        try:
            return self._regs[name]
        except KeyError:
            raise ModelError(f"unknown register {name!r}; the plan has {', '.join(self._regs)}") from None

    # ------------------------------------------------------------------ tables
    def _init_tables(self, plan) -> None:
        acts = {a.name: a.params for a in plan.actions}
        self._tables: dict[str, _Table] = {}
        for t in plan.tables:
            if t.const:
                continue
            self._tables[t.name] = _Table(t, list(t.keys), {a: acts[a] for a in t.actions}, {})
        for need in ("workers", "l2_forward", "result_dst"):
            if need not in self._tables:
                raise ModelError(f"plan lacks the table {need!r}")
        # the workers key in its internal order: the ingress port first, then the header fields
        keys = self._tables["workers"].keys
        port = [i for i, k in enumerate(keys) if k.field == "ingress_port"]
        if len(port) != 1:
            raise ModelError("workers table must key on ingress_port once and on distinct header fields")
        self._wkey_order = port + [i for i in range(len(keys)) if i != port[0]]
        self.worker_key_fields: list[str] = [keys[i].field for i in self._wkey_order[1:]]
        self.workers: dict[tuple, tuple | None] = {}
        self._worker_ports: dict[tuple[int, int], int] | None = None
        self.l2: dict[bytes, int | None] = {}
        self.result_dst: dict[int, tuple | None] = {}
        self.version = {name: 0 for name in self._tables}
        self._subscribers: dict[str, list] = {name: [] for name in self._tables}
        self._deferring = 0
        self._stale: set[str] = set()

    def subscribe(self, table: str, subscriber) -> None:
        """Tell ``subscriber`` (a derived form of ``table``) of every change of the table's entries, once its
        look-up dict is up to date: ``subscriber.changed(deferred)``, where ``deferred`` says that the change
        is part of a :meth:`deferred` run (only mark the form stale then), and ``subscriber.refresh(lock)``
        at the end of such a run."""
        self._table(table)
        self._subscribers[table].append(subscriber)

    def _table(self, name: str) -> _Table:
        try:
            return self._tables[name]
        except KeyError:
            raise ModelError(f"unknown table {name!r}; writable tables: {', '.join(self._tables)}") from None

    def _match_key(self, t: _Table, match: Mapping[str, Any]) -> tuple:
        names = [k.name for k in t.keys]
        extra = set(match) - set(names)
        if extra:
            raise ModelError(f"table {t.spec.name} has no key {sorted(extra)[0]!r}; keys: {', '.join(names)}")
        key = []
        for k in t.keys:
            if k.name not in match:
                raise ModelError(f"table {t.spec.name} entry lacks the key {k.name!r}")
            v = _to_int(match[k.name], f"{t.spec.name}.{k.name}")
            if not 0 <= v < (1 << k.bits):
                raise ModelError(f"{t.spec.name}.{k.name}={v} does not fit in {k.bits} bits")
            key.append(v)
        return tuple(key)

    def _action(self, t: _Table, action: str, params: Mapping[str, Any] | None) -> tuple:
        if action not in t.actions:
            raise ModelError(f"table {t.spec.name} has no action {action!r}; actions: {', '.join(t.actions)}")
        args = dict(params or {})
        spec = t.actions[action]
        names = [q.name for q in spec]
        extra = set(args) - set(names)
        if extra:
            raise ModelError(f"action {action} has no parameter {sorted(extra)[0]!r}")
        out = []
        for q in spec:
            if q.name not in args:
                raise ModelError(f"action {action} lacks the parameter {q.name!r}")
            v = _to_int(args[q.name], f"{action}.{q.name}")
            if not 0 <= v < (1 << q.bits):
                raise ModelError(f"{action}.{q.name}={v} does not fit in {q.bits} bits")
            out.append(v)
        return tuple(out)

    def insert(self, table: str, match: Mapping[str, Any], action: str, params: Mapping[str, Any] | None = None) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        val = self._action(t, action, params)
        if key in t.entries:
            raise ModelError(f"table {table} already holds an entry for {dict(match)}")
        self._check_entry(table, action, val)
        if len(t.entries) >= t.spec.size:
            raise ModelError(f"table {table} is full ({t.spec.size} entries)")
        t.entries[key] = (action, val)
        self._sync(table, key)

    def modify(self, table: str, match: Mapping[str, Any], action: str, params: Mapping[str, Any] | None = None) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        val = self._action(t, action, params)
        if key not in t.entries:
            raise ModelError(f"table {table} holds no entry for {dict(match)}")
        self._check_entry(table, action, val)
        t.entries[key] = (action, val)
        self._sync(table, key)

    def delete(self, table: str, match: Mapping[str, Any]) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        if key not in t.entries:
            raise ModelError(f"table {table} holds no entry for {dict(match)}")
        del t.entries[key]
        self._sync(table, key)

    def holds(self, table: str, match: Mapping[str, Any]) -> bool:
        """Whether ``table`` has an entry for ``match`` (without listing the table)."""
        t = self._table(table)
        return self._match_key(t, match) in t.entries

    def size(self, table: str) -> int:
        return len(self._table(table).entries)

    def read(self, table: str) -> list[dict[str, Any]]:
        t = self._table(table)
        out = []
        for key, (action, val) in t.entries.items():
            out.append({"table": table, "match": {k.name: v for k, v in zip(t.keys, key)}, "action": action,
                        "params": {q.name: v for q, v in zip(t.actions[action], val)}})
        return out

    def worker_ports(self) -> dict[tuple[int, int], int]:
        """(source IPv4 address, source UDP port) -> ingress port of every ``workers`` entry (kept until the
        table changes)."""
        if self._worker_ports is None:
            self._worker_ports = {(e["match"]["src_addr"], e["match"]["src_port"]): e["match"]["ingress_port"]
                                  for e in self.read("workers")}
        return self._worker_ports

    def _args(self, table: str, action: str, val: tuple, names: tuple[str, ...]) -> tuple:
        """An entry's action arguments ``val`` (in the plan's order) as the values of ``names``."""
        q = dict(zip((x.name for x in self._tables[table].actions[action]), val))
        return tuple(q[n] for n in names)

    def _check_entry(self, table: str, action: str, val: tuple) -> None:
        if table == "workers" and action == "set_worker":
            q = dict(zip(WORKER_ARGS, self._args(table, action, val, WORKER_ARGS)))
            slots = self._params.slots
            if q["slot_base"] + q["slot_count"] > slots:
                raise ModelError(f"set_worker slot_base={q['slot_base']} + slot_count={q['slot_count']} "
                                 f"exceeds the plan's {slots} slots")
            if q["word"] >= len(self.bitmap):
                raise ModelError(f"set_worker word={q['word']} outside the plan's {len(self.bitmap)} bitmap word(s)")
            if q["num_workers"] < 1:
                raise ModelError("set_worker num_workers must be at least 1")

    def _sync(self, table: str, key: tuple) -> None:
        """Bring the per-packet look-up dict of one table up to date for the entry of ``key`` (in place:
        one entry, so a change costs the same however full the table is), count the change and tell the
        table's subscribers."""
        t = self._tables[table]
        self.version[table] += 1
        entry = t.entries.get(key)
        if table == "workers":
            fast, k = self.workers, tuple(key[i] for i in self._wkey_order)
            self._worker_ports = None
            value = None if entry is None or entry[0] != "set_worker" else self._args(table, *entry, WORKER_ARGS)
        elif table == "l2_forward":
            fast, k = self.l2, key[0].to_bytes(6, "big")
            value = None if entry is None or entry[0] != "l2_unicast" else self._args(table, *entry, L2_ARGS)[0]
        else:
            fast, k = self.result_dst, key[0]
            value = None
            if entry is not None and entry[0] == "set_result_dst":
                mac, ip, port = self._args(table, *entry, RESULT_DST_ARGS)
                value = (mac.to_bytes(6, "big"), ip, port)
        if entry is None:
            fast.pop(k, None)
        else:
            fast[k] = value
        deferred = self._deferring > 0
        if deferred:
            self._stale.add(table)
        for sub in self._subscribers[table]:
            sub.changed(deferred)

    @contextlib.contextmanager
    def deferred(self, lock):
        """Changes made inside tell each subscriber only that its form of the table is stale
        (``changed(True)``: it must not be used until it is rebuilt); at the end each subscriber of a
        changed table rebuilds once (``refresh(lock)``, which takes ``lock`` only to copy the table and
        to install what it built).  A P4Runtime Write of many entries runs inside, so it pays one rebuild,
        not one per entry, and holds the lock for one entry at a time."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
            if not self._deferring:
                stale, self._stale = self._stale, set()
                for table in stale:
                    for sub in self._subscribers[table]:
                        sub.refresh(lock)

    # -- multicast groups
    def set_group(self, mgid: int, replicas: Iterable[tuple[int, int]]) -> None:
        """Create or replace multicast group ``mgid`` with (egress_port, rid) replicas."""
        mgid = _to_int(mgid, "mgid")
        if not 0 < mgid < (1 << 16):
            raise ModelError(f"mgid={mgid} must be in 1..65535")
        reps = []
        for rep in replicas:
            port, rid = (int(rep[0]), int(rep[1]))
            if not 0 <= port < 512 or not 0 <= rid < (1 << 16):
                raise ModelError(f"replica (port={port}, rid={rid}) out of range (port 0..511, rid 0..65535)")
            reps.append((port, rid))
        self.groups[mgid] = reps

    def delete_group(self, mgid: int) -> None:
        if mgid not in self.groups:
            raise ModelError(f"no multicast group {mgid}")
        del self.groups[mgid]

    # -- counters
    def counter_reset(self) -> None:
        self.stat_packets[:] = [0] * len(self.stat_names)
        self.stat_bytes[:] = [0] * len(self.stat_names)

    def counter_read(self, name: str = "stats") -> dict[str, tuple[int, int]]:
        if name != "stats":
            raise ModelError(f"unknown counter {name!r}; the plan has 'stats'")
        pk, by = self.stat_packets, self.stat_bytes
        return {n: (pk[i], by[i]) for i, n in enumerate(self.stat_names)}

    @property
    def stats(self) -> dict[str, int]:
        """Packets per stats index."""
        return dict(zip(self.stat_names, self.stat_packets))

    # -- configuration files
    def load_config(self, cfg: Mapping[str, Any] | str | Path) -> None:
        """Apply a control-plane config: {"tables": {name: [entry...]}, "groups": {mgid: [[port, rid]...]}}.

        An entry is {"match": {...}, "action": name, "params": {...}}; values
        may be integers, "0x.." strings, MAC or dotted IPv4 addresses.
        """
        from .config import parse_config

        groups, entries = parse_config(cfg)
        for mgid, reps in groups:
            self.set_group(mgid, reps)
        for table, match, action, params in entries:
            self.insert(table, match, action, params)

    def dump_config(self) -> dict[str, Any]:
        return {"tables": {n: [{k: e[k] for k in ("match", "action", "params")} for e in self.read(n)]
                           for n in self._tables},
                "groups": {str(g): [list(r) for r in reps] for g, reps in self.groups.items()}}
