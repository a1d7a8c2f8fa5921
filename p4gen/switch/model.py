"""Executable semantics of a Plan: the software data plane's switch model.

:class:`SwitchModel` holds the plan's registers, the control-plane state a
P4Runtime server would hold (table entries, multicast groups, counters)
and processes one frame at a time with :meth:`SwitchModel.process`.

The per-packet aggregation decision is *read from the plan*
(``plan.data["decision"]``, or a table passed as ``decision=``): nothing
here knows which operation follows which observation.  Two executions of
that table exist:

* ``fast=False`` (:meth:`SwitchModel._decide_reference`): for every step,
  ``decision.lookup(step["rules"], observations)`` picks the operation and
  ``p4gen.ops`` (``chunk_op``, ``bitmap_op``, ``counter_op``,
  ``exponent_op``, ``values_op``) executes it, exactly as written there.
* ``fast=True`` (default, :meth:`SwitchModel._decide_fast`): at construction
  :meth:`SwitchModel._compile_fast` expands every step with
  ``decision.expand`` into a dict ``observation codes -> kernel``, and the
  outcome into ``codes -> (action, stat)``.  Kernels (``FAST_KERNELS``) are
  integer specialisations of ``p4gen.ops``; ``tests/test_model_fastpath.py``
  checks each against ``p4gen.ops`` and both executions against each other.

Value registers are one numpy array per plan (column = element index, as
given by each ``values{j}`` register's ``elements``); the per-packet value
work is one vectorised numpy operation.  Scalar registers (chunk, bitmap
words, counter, exponent) are kept as Python lists, which are faster than
numpy scalars per packet; :meth:`register_read` returns numpy arrays.
"""

from __future__ import annotations

import copy as _copy
import json
import operator
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .. import decision as dmod
from .. import ops
from ..errors import P4genError
from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP, Layout, ip as ip_int, mac as mac_int
from ..plan import Plan


class ModelError(P4genError):
    """A control-plane request names an unknown table, action, field or group, or a value does not fit."""


# -- fast integer kernels (same results as p4gen.ops over IntAlgebra) ------------
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


# batches at least this long take the vectorised path; shorter ones run frame by frame, which is
# faster there: a vectorised call has a fixed cost of some hundreds of us (its numpy calls), while
# ``process`` costs the same per frame whatever the batch (bench/model.py prints both)
VEC_MIN_BATCH = 32

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


@dataclass
class _Table:
    spec: dict[str, Any]
    keys: list[dict[str, Any]]
    actions: dict[str, list[dict[str, Any]]]
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


class SwitchModel:
    """The switch of one Plan: registers, tables, groups, counters and ``process``."""

    def __init__(self, plan: Plan | Mapping[str, Any] | str | Path, decision: Mapping[str, Any] | None = None,
                 fast: bool = True):
        if isinstance(plan, (str, Path)):
            plan = Plan.load(plan)
        elif not isinstance(plan, Plan):
            plan = Plan(dict(plan))
        self.plan = plan
        data = plan.data
        self.params = p = data["params"]
        self.layout = Layout(data)
        table = _copy.deepcopy(dict(decision) if decision is not None else data["decision"])
        roles = {st["role"] for st in table.get("steps", [])} - set(FAST_KERNELS)
        if roles:
            raise ModelError(f"the model does not implement register role(s) {', '.join(sorted(roles))} "
                             f"(protocol {data.get('protocol')!r})")
        try:
            dmod.validate(table)
        except (ValueError, LookupError, KeyError) as exc:
            raise ModelError(f"decision table is invalid: {exc}") from None
        self.decision = table
        self.fast = fast
        self.stat_names = list(data["counters"][0]["indices"]) if data.get("counters") else list(p["stats"])
        self._stat = {n: i for i, n in enumerate(self.stat_names)}
        # agg_rx (every accepted aggregation packet) is counted only by plans whose counter has it
        self._agg_rx = self._stat.get("agg_rx")
        for need in ("drop_unknown", "drop_bad_slot", "drop_malformed", "l2_unicast", "l2_flood"):
            if need not in self._stat:
                raise ModelError(f"plan counter 'stats' lacks the index {need!r}")
        self._init_registers(data["registers"])
        self._init_tables(data)
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self.counter_reset()
        self._init_fields()
        if dmod.step(table, "minnext") is not None and self._minnext is None:
            raise ModelError("the decision table has a minnext step but the plan has no minnext register")
        if not self._omni and any("data" in st["keys"] for st in table["steps"] + [table["outcome"]]):
            raise ModelError("the decision table observes 'data', which only an omnireduce plan's parser provides")
        self._compile_fast()
        self._init_vec()

    # ------------------------------------------------------------------ registers
    def _init_registers(self, regs: list[dict[str, Any]]) -> None:
        L, p = self.layout, self.params
        self._regs = {r["name"]: r for r in regs}
        self._chunk = self._counter = self._exponent = self._minnext = None
        self._chunk_name = self._counter_name = self._exponent_name = self._minnext_name = None
        bm = sorted((r for r in regs if r["role"] == "bitmap"), key=lambda r: r["word"])
        self._bm = [[[0] * r["entries"] for _ in range(r["lanes"])] for r in bm]
        self._bm_names = [r["name"] for r in bm]
        self._bm_full = [(1 << r["lane_bits"]) - 1 for r in bm]
        for r in regs:
            if r["role"] in ("chunk", "counter", "exponent", "minnext"):
                setattr(self, f"_{r['role']}", [0] * r["entries"])
                setattr(self, f"_{r['role']}_name", r["name"])
                setattr(self, f"_{r['role']}_full", (1 << r["lane_bits"]) - 1)
        vregs = [r for r in regs if r["role"] == "values"]
        self._vcols: dict[str, list[int]] = {}
        entries = {r["entries"] for r in vregs}
        if len(entries) > 1:
            raise ModelError("plan value registers differ in size")
        for r in vregs:
            if r["lane_bits"] != L.value_width:
                raise ModelError(f"value register {r['name']} lane width {r['lane_bits']} != value width {L.value_width}")
            self._vcols[r["name"]] = list(r["elements"])
        cols = sorted(c for cs in self._vcols.values() for c in cs)
        if vregs and cols != list(range(L.elements_per_pass)):
            raise ModelError("plan value registers do not cover each element of a pass exactly once")
        self._vals = np.zeros((entries.pop() if entries else 0, L.elements_per_pass), dtype=L.native_dtype)
        self._pass_bits = int(p["pass_bits"])
        self._passes = L.passes

    def register_names(self) -> list[str]:
        return list(self._regs)

    def register_read(self, name: str) -> np.ndarray:
        """The register's contents: shape (entries,) for one lane, (entries, lanes) otherwise."""
        r = self._reg(name)
        role = r["role"]
        if role == "values":
            a = self._vals[:, self._vcols[name]].copy()
        elif role == "bitmap":
            lanes = self._bm[self._bm_names.index(name)]
            a = np.array(lanes, dtype=np.uint64).T
        else:
            a = np.array(getattr(self, f"_{role}"), dtype=np.uint64)
        return a

    def register_write(self, name: str, index: int, value) -> None:
        r = self._reg(name)
        if not 0 <= index < r["entries"]:
            raise ModelError(f"register {name} index {index} outside 0..{r['entries'] - 1}")
        vals = np.atleast_1d(np.asarray(value, dtype=np.uint64))
        if vals.size != r["lanes"] or np.any(vals >> np.uint64(r["lane_bits"])):
            raise ModelError(f"register {name} holds {r['lanes']} lane(s) of {r['lane_bits']} bits; got {value!r}")
        role = r["role"]
        if role == "values":
            self._vals[index, self._vcols[name]] = vals
        elif role == "bitmap":
            for lane, v in zip(self._bm[self._bm_names.index(name)], vals):
                lane[index] = int(v)
        else:
            getattr(self, f"_{role}")[index] = int(vals[0])

    def register_reset(self, name: str | None = None) -> None:
        """Zero one register (or all of them)."""
        names = [name] if name is not None else list(self._regs)
        for n in names:
            r = self._reg(n)
            role = r["role"]
            if role == "values":
                self._vals[:, self._vcols[n]] = 0
            elif role == "bitmap":
                for lane in self._bm[self._bm_names.index(n)]:
                    lane[:] = [0] * len(lane)
            else:
                lst = getattr(self, f"_{role}")
                lst[:] = [0] * len(lst)

    def _reg(self, name: str) -> dict[str, Any]:
        try:
            return self._regs[name]
        except KeyError:
            raise ModelError(f"unknown register {name!r}; the plan has {', '.join(self._regs)}") from None

    # ------------------------------------------------------------------ tables
    def _init_tables(self, data: dict[str, Any]) -> None:
        acts = {a["name"]: a["params"] for a in data["actions"]}
        self._tables: dict[str, _Table] = {}
        for t in data["tables"]:
            if t.get("const"):
                continue
            self._tables[t["name"]] = _Table(t, list(t["keys"]), {a: acts[a] for a in t["actions"]}, {})
        for need in ("workers", "l2_forward", "result_dst"):
            if need not in self._tables:
                raise ModelError(f"plan lacks the table {need!r}")
        self._workers: dict[tuple, tuple | None] = {}
        self._l2: dict[bytes, int | None] = {}
        self._rdst: dict[int, tuple | None] = {}

    def _table(self, name: str) -> _Table:
        try:
            return self._tables[name]
        except KeyError:
            raise ModelError(f"unknown table {name!r}; writable tables: {', '.join(self._tables)}") from None

    def _match_key(self, t: _Table, match: Mapping[str, Any]) -> tuple:
        names = [k["name"] for k in t.keys]
        extra = set(match) - set(names)
        if extra:
            raise ModelError(f"table {t.spec['name']} has no key {sorted(extra)[0]!r}; keys: {', '.join(names)}")
        key = []
        for k in t.keys:
            if k["name"] not in match:
                raise ModelError(f"table {t.spec['name']} entry lacks the key {k['name']!r}")
            v = _to_int(match[k["name"]], f"{t.spec['name']}.{k['name']}")
            if not 0 <= v < (1 << k["bits"]):
                raise ModelError(f"{t.spec['name']}.{k['name']}={v} does not fit in {k['bits']} bits")
            key.append(v)
        return tuple(key)

    def _action(self, t: _Table, action: str, params: Mapping[str, Any] | None) -> tuple:
        if action not in t.actions:
            raise ModelError(f"table {t.spec['name']} has no action {action!r}; actions: {', '.join(t.actions)}")
        params = dict(params or {})
        spec = t.actions[action]
        names = [q["name"] for q in spec]
        extra = set(params) - set(names)
        if extra:
            raise ModelError(f"action {action} has no parameter {sorted(extra)[0]!r}")
        out = []
        for q in spec:
            if q["name"] not in params:
                raise ModelError(f"action {action} lacks the parameter {q['name']!r}")
            v = _to_int(params[q["name"]], f"{action}.{q['name']}")
            if not 0 <= v < (1 << q["bits"]):
                raise ModelError(f"{action}.{q['name']}={v} does not fit in {q['bits']} bits")
            out.append(v)
        return tuple(out)

    def insert(self, table: str, match: Mapping[str, Any], action: str, params: Mapping[str, Any] | None = None) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        val = self._action(t, action, params)
        if key in t.entries:
            raise ModelError(f"table {table} already holds an entry for {dict(match)}")
        self._check_entry(table, action, val)
        if len(t.entries) >= int(t.spec.get("size", 1 << 30)):
            raise ModelError(f"table {table} is full ({t.spec['size']} entries)")
        t.entries[key] = (action, val)
        self._sync(table)

    def modify(self, table: str, match: Mapping[str, Any], action: str, params: Mapping[str, Any] | None = None) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        val = self._action(t, action, params)
        if key not in t.entries:
            raise ModelError(f"table {table} holds no entry for {dict(match)}")
        self._check_entry(table, action, val)
        t.entries[key] = (action, val)
        self._sync(table)

    def delete(self, table: str, match: Mapping[str, Any]) -> None:
        t = self._table(table)
        key = self._match_key(t, match)
        if key not in t.entries:
            raise ModelError(f"table {table} holds no entry for {dict(match)}")
        del t.entries[key]
        self._sync(table)

    def read(self, table: str) -> list[dict[str, Any]]:
        t = self._table(table)
        out = []
        for key, (action, val) in t.entries.items():
            out.append({"table": table, "match": {k["name"]: v for k, v in zip(t.keys, key)}, "action": action,
                        "params": {q["name"]: v for q, v in zip(t.actions[action], val)}})
        return out

    def _check_entry(self, table: str, action: str, val: tuple) -> None:
        if table == "workers" and action == "set_worker":
            q = dict(zip((x["name"] for x in self._tables["workers"].actions["set_worker"]), val))
            slots = self.params["slots"]
            if q["slot_base"] + q["slot_count"] > slots:
                raise ModelError(f"set_worker slot_base={q['slot_base']} + slot_count={q['slot_count']} "
                                 f"exceeds the plan's {slots} slots")
            if q["word"] >= len(self._bm):
                raise ModelError(f"set_worker word={q['word']} outside the plan's {len(self._bm)} bitmap word(s)")
            if q["num_workers"] < 1:
                raise ModelError("set_worker num_workers must be at least 1")

    def _sync(self, table: str) -> None:
        """Rebuild the per-packet lookup dict of one table from its entries."""
        t = self._tables[table]
        if table == "workers":
            order = self._wkey_order
            fast = {}
            for key, (action, val) in t.entries.items():
                fast[tuple(key[i] for i in order)] = val if action == "set_worker" else None
            self._workers = fast
            self._vec_workers_sync()
        elif table == "l2_forward":
            self._l2 = {key[0].to_bytes(6, "big"): (val[0] if action == "l2_unicast" else None)
                        for key, (action, val) in t.entries.items()}
        elif table == "result_dst":
            self._rdst = {key[0]: ((val[0].to_bytes(6, "big"), val[1], val[2]) if action == "set_result_dst" else None)
                          for key, (action, val) in t.entries.items()}

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
        self._pk = [0] * len(self.stat_names)
        self._by = [0] * len(self.stat_names)

    def counter_read(self, name: str = "stats") -> dict[str, tuple[int, int]]:
        if name != "stats":
            raise ModelError(f"unknown counter {name!r}; the plan has 'stats'")
        return {n: (self._pk[i], self._by[i]) for i, n in enumerate(self.stat_names)}

    @property
    def stats(self) -> dict[str, int]:
        """Packets per stats index."""
        return dict(zip(self.stat_names, self._pk))

    # -- configuration files
    def load_config(self, cfg: Mapping[str, Any] | str | Path) -> None:
        """Apply a control-plane config: {"tables": {name: [entry...]}, "groups": {mgid: [[port, rid]...]}}.

        An entry is {"match": {...}, "action": name, "params": {...}}; values
        may be integers, "0x.." strings, MAC or dotted IPv4 addresses.
        """
        if isinstance(cfg, (str, Path)):
            try:
                cfg = json.loads(Path(cfg).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ModelError(f"control-plane config {str(cfg)!r} cannot be read: {exc}") from None
        unknown = set(cfg) - {"tables", "groups"}
        if unknown:
            raise ModelError(f"control-plane config has an unknown section {sorted(unknown)[0]!r}")
        for mgid, reps in dict(cfg.get("groups", {})).items():
            self.set_group(int(mgid), [tuple(r) for r in reps])
        for table, entries in dict(cfg.get("tables", {})).items():
            for e in entries:
                self.insert(table, e.get("match", {}), e["action"], e.get("params", {}))

    def dump_config(self) -> dict[str, Any]:
        return {"tables": {n: [{k: e[k] for k in ("match", "action", "params")} for e in self.read(n)]
                           for n in self._tables},
                "groups": {str(g): [list(r) for r in reps] for g, reps in self.groups.items()}}

    # ------------------------------------------------------------------ fields
    def _init_fields(self) -> None:
        L = self.layout
        S = L.slot
        def idx(name: str, whole: bool = True) -> int:
            s = S(name)
            if whole and (s.shift is not None):
                raise ModelError(f"header field {name} is not a whole struct unit")
            return s.index
        self._i_eth_dst = idx("ethernet.dst_addr")
        self._i_eth_src = idx("ethernet.src_addr")
        self._i_etype = idx("ethernet.ether_type")
        self._i_proto = idx("ipv4.protocol")
        self._i_ip_src = idx("ipv4.src_addr")
        self._i_ip_dst = idx("ipv4.dst_addr")
        self._i_sport = idx("udp.src_port")
        self._i_dport = idx("udp.dst_port")
        self._i_udp_ck = idx("udp.checksum")
        self._i_ip_ck = idx("ipv4.hdr_checksum")
        self._i_tsi = idx("agg.tsi")
        self._i_pool = idx("agg.pool_index")
        self._i_exp = idx("agg.exponent")
        s = S("ipv4.ihl")
        self._ihl = (s.index, s.shift or 0, s.mask)
        s = S("agg.msg_type")
        self._msg = (s.index, s.shift or 0, s.mask)
        s = S("agg.job")
        self._job = (s.index, s.shift or 0, s.mask)
        self._set_msg = L.setter("agg.msg_type")
        # OmniReduce: the data header follows agg only when agg.flags bit 0 is set; agg.next carries
        # the worker's next non-zero block offset; a header-only packet that returns values grows
        self._omni = L.omni
        if self._omni:
            s = S("agg.flags")
            self._flags = (s.index, s.shift or 0, s.mask)
            self._set_flags = L.setter("agg.flags")
            self._i_next = idx("agg.next")
            self._i_total_len = idx("ipv4.total_len")
            self._i_udp_len = idx("udp.length")
            self._data_bytes = L.frame_len - L.values_offset
        # workers key: plan key order -> internal order (ingress port first, then unpacked fields)
        wt = self._tables["workers"]
        internal = []
        for k in wt.keys:
            internal.append(-1 if k["field"] == "ingress_port" else S(k["field"]).index)
        if internal.count(-1) != 1 or len(set(internal)) != len(internal):
            raise ModelError("workers table must key on ingress_port once and on distinct header fields")
        plan_order = list(range(len(internal)))
        port_pos = internal.index(-1)
        hdr_pos = [i for i in plan_order if i != port_pos]
        self._wkey_order = [port_pos] + hdr_pos
        self._wkey_fields = [internal[i] for i in hdr_pos]
        self._wkey_sub = [S(wt.keys[i]["field"]) for i in hdr_pos]
        whole = all(x.shift is None and not x.raw for x in self._wkey_sub) and self._wkey_sub
        if whole and len(self._wkey_sub) > 1:
            self._wkey_get = operator.itemgetter(*(x.index for x in self._wkey_sub))
        elif whole:
            idx0 = self._wkey_sub[0].index
            self._wkey_get = lambda u: (u[idx0],)
        else:
            self._wkey_get = None
        self._ck = struct.Struct(f">{L.ipv4_len // 2}H")
        self._ck_off = L.ipv4_checksum_offset
        self._ip_off = L.ipv4_offset
        self._ip_end = L.ipv4_offset + L.ipv4_len
        slot_bits = int(self.params["slot_bits"])
        self._slot_mask = (1 << slot_bits) - 1
        self._slot_bits = slot_bits
        self._msg_contrib = int(self.params["msg_contribution"])
        self._msg_result = int(self.params["msg_result"])
        self._flood_base = int(self.params["flood_group_base"])

    def _worker_key(self, u, port: int) -> tuple:
        getter = self._wkey_get
        if getter is not None:                      # every key field is a whole struct unit
            return (port, *getter(u))
        key = [port]
        for s in self._wkey_sub:
            v = u[s.index]
            if s.raw:
                v = int.from_bytes(v, "big")
            key.append(v if s.shift is None else (v >> s.shift) & s.mask)
        return tuple(key)

    # ------------------------------------------------------------------ decision
    def _compile_fast(self) -> None:
        """Expand every step of the decision table into codes -> kernel dicts."""
        table = self.decision
        chain = []
        # observation names available so far, in order; OmniReduce's parser observes ``data`` first
        prior: list[str] = ["data"] if self._omni else []
        for step in table["steps"]:
            role = step["role"]
            kern = FAST_KERNELS[role]
            lut = {}
            for obs, rule in dmod.expand(prior, step["rules"]):
                lut[tuple(dmod.CODES[k][obs[k]] for k in prior)] = (kern[rule["op"]], rule["op"])
            chain.append((role, lut))
            if step["yields"]:
                prior.append(step["yields"])
        out = {}
        for obs, rule in dmod.expand(prior, table["outcome"]["rules"]):
            out[tuple(dmod.CODES[k][obs[k]] for k in prior)] = (dmod.OUTCOME_CODES[rule["action"]],
                                                                  self._stat[rule["stat"]])
        self._chain = chain
        self._outcome = out
        self._yields = prior
        self._decide_fast = self._make_decider()

    def _make_decider(self):
        """The compiled decision as one closure over the registers (locals, not attribute lookups).

        ``decide(frame, sc, slot, copy, word, mask, n, tsi, exp, data=1, nxt=0, defer=None)``
        returns (outcome code, stat index, exponent out, values out, next out); with
        ``defer`` (a list) the values step is not executed but appended as
        (op name, first register row) for :meth:`_apply_values_batch`.  ``data``
        (OmniReduce) says whether the packet carries a data header; without one
        the value kernels read zeros.
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

        def decide(frame, sc, slot, copy, word, mask, n, tsi, exp, data=1, nxt=0, defer=None):
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
                    chunk_reg[sc], y = k(chunk_reg[sc], tsi)
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
                        if vals_out is None and not data and names[o] != "nop":
                            vals_out = zeros(frame)       # a write on a header-only packet carries zeros
            action, stat = outcome[o]
            return action, stat, exp_out, vals_out, nxt_out

        return decide

    def _decide_reference(self, frame, sc: int, slot: int, copy: int, word: int, mask: int, n: int, tsi: int,
                          exp: int, data: int = 1, nxt: int = 0):
        """The same decision, straight from decision.lookup and p4gen.ops (no precomputation)."""
        obs: dict[str, str] = {"data": str(data)} if self._omni else {}
        exp_out = exp
        nxt_out = nxt
        vals_out = None
        for step in self.decision["steps"]:
            op = dmod.lookup(step["rules"], obs)["op"]
            role = step["role"]
            y = None
            if role == "chunk":
                self._chunk[sc], c = ops.chunk_op(op, self._chunk[sc], tsi, ops.INT)
                y = ops.CMP_NAMES[c]
            elif role == "bitmap":
                seen = False
                for i, lanes in enumerate(self._bm):
                    bits = self._regs[self._bm_names[i]]["lane_bits"]
                    t, u, s = ops.bitmap_op(op, lanes[copy][slot], lanes[1 - copy][slot],
                                            mask if i == word else 0, bits, ops.INT)
                    lanes[copy][slot], lanes[1 - copy][slot] = t, u
                    seen = seen or bool(s)
                y = "1" if seen else "0"
            elif role == "counter":
                bits = self._regs[self._counter_name]["lane_bits"]
                self._counter[sc], c = ops.counter_op(op, self._counter[sc], n, bits, ops.INT)
                y = ops.COUNT_NAMES[c]
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
                # nop on a header-only packet: nothing to carry (the packet keeps no data header)
                if op != "nop" or data:
                    vals_out = np.broadcast_to(np.asarray(carried).astype(rows.dtype), rows.shape)
            if step["yields"]:
                obs[step["yields"]] = y
        rule = dmod.lookup(self.decision["outcome"]["rules"], obs)
        return dmod.OUTCOME_CODES[rule["action"]], self._stat[rule["stat"]], exp_out, vals_out, nxt_out

    def _zero_payload(self, frame) -> np.ndarray:
        """What the value kernels read from a packet without a data header (OmniReduce header-only)."""
        L = self.layout
        return np.zeros((L.passes, L.elements_per_pass) if L.passes > 1 else L.elements, L.value_dtype)

    def _payload(self, frame) -> np.ndarray:
        L = self.layout
        if L.passes == 1:           # broadcasts against the (1, elements) register rows
            return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset)
        return np.frombuffer(frame, L.value_dtype, L.elements, L.values_offset).reshape(L.passes, L.elements_per_pass)

    # ------------------------------------------------------------------ packets
    def process(self, frame: bytes, ingress_port: int) -> list[tuple[int, bytes]]:
        """One frame in on ``ingress_port``; the frames out as (egress_port, bytes)."""
        L = self.layout
        n = len(frame)
        if n < L.fixed_len:
            return self._process_short(frame, ingress_port)
        u = L.struct.unpack_from(frame)
        ihl_i, ihl_s, ihl_m = self._ihl
        if (u[self._i_etype] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5
                or u[self._i_proto] != IPPROTO_UDP or not L.udp_port_min <= u[self._i_dport] <= L.udp_port_max):
            return self._forward_l2(frame, ingress_port, u[self._i_eth_dst])
        return self._agg(frame, ingress_port, u)

    def _count(self, stat: int, nbytes: int) -> None:
        self._pk[stat] += 1
        self._by[stat] += nbytes

    def _process_short(self, frame, port: int) -> list[tuple[int, bytes]]:
        """Frames shorter than the fixed headers: L2 traffic, or a truncated (malformed) packet."""
        L = self.layout
        n = len(frame)
        mal = self._stat["drop_malformed"]
        eth = L.headers["ethernet"]
        if n < eth.nbytes:
            self._count(mal, n)
            return []
        e = eth.decode(frame)
        if e["ether_type"] != ETHERTYPE_IPV4:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        iph = L.headers["ipv4"]
        if n < iph.offset + iph.nbytes:
            self._count(mal, n)
            return []
        ipf = iph.decode(frame)
        if ipf["ihl"] != 5 or ipf["protocol"] != IPPROTO_UDP:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        uh = L.headers["udp"]
        if n < uh.offset + uh.nbytes:
            self._count(mal, n)
            return []
        if not L.udp_port_min <= uh.decode(frame)["dst_port"] <= L.udp_port_max:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        self._count(mal, n)
        return []

    def _forward_l2(self, frame, port: int, dst: bytes) -> list[tuple[int, bytes]]:
        n = len(frame)
        out = self._l2.get(dst, None)
        frame = bytes(frame)
        if out is not None:
            self._count(self._stat["l2_unicast"], n)
            return [(out, frame)]
        self._count(self._stat["l2_flood"], n)
        return [(p, frame) for p, _rid in self.groups.get(self._flood_base + port, ())]

    def _admit(self, frame, port: int, u: tuple):
        """Parser / workers table / slot range checks.  None (counted, dropped) or the worker's context."""
        n = len(frame)
        mi, ms, mm = self._msg
        data = 1
        if self._omni:
            fi, fs, fm = self._flags
            data = (u[fi] >> fs) & 1
        if n < (self.layout.frame_len if data else self.layout.fixed_len) or (u[mi] >> ms) & mm != self._msg_contrib:
            self._count(self._stat["drop_malformed"], n)
            return None
        w = self._workers.get(self._worker_key(u, port))
        if w is None:
            self._count(self._stat["drop_unknown"], n)
            return None
        _wid, word, mask, nw, slot_base, slot_count, mgid = w
        pool = u[self._i_pool]
        sij = pool & self._slot_mask
        if sij >= slot_count:
            self._count(self._stat["drop_bad_slot"], n)
            return None
        copy = (pool >> self._slot_bits) & 1
        slot = (slot_base + sij) & 0xFFFF
        if self._agg_rx is not None:
            self._count(self._agg_rx, n)
        return (slot << 1) | copy, slot, copy, word, mask, nw, mgid, data

    def _agg(self, frame, port: int, u: tuple) -> list[tuple[int, bytes]]:
        ctx = self._admit(frame, port, u)
        if ctx is None:
            return []
        sc, slot, copy, word, mask, nw, mgid, data = ctx
        decide = self._decide_fast if self.fast else self._decide_reference
        nxt = u[self._i_next] if self._omni else 0
        action, stat, exp_out, vals_out, nxt_out = decide(frame, sc, slot, copy, word, mask, nw, u[self._i_tsi],
                                                          u[self._i_exp], data, nxt)
        self._count(stat, len(frame))
        if action == ops.OUT_DROP:
            return []
        L = self.layout
        payload = None if vals_out is None else vals_out.astype(L.value_dtype).tobytes()
        return self._emit(frame, port, u, action, exp_out, payload, mgid, data, nxt_out)

    # -- batches -----------------------------------------------------------------
    def process_batch(self, packets) -> list[list[tuple[int, bytes]]]:
        """Process frames in order, as ``process`` would one by one; one output list per frame.

        Batches shorter than ``VEC_MIN_BATCH`` run frame by frame.  Longer ones
        are vectorised: admission, the workers look-up and the output frames
        are numpy operations over the whole batch; the per-packet decisions
        (chunk / bitmap / counter / exponent registers) run in one generated
        loop over int lists; the value-register operations of the whole batch
        are applied at once (segment sums, see ``_values_vec``).  This gives
        the same outputs, counters and registers as processing the frames one
        at a time.  A call costs a fixed part plus a part per frame, so larger
        batches run faster (``bench/model.py``).  A plan the vectorised path
        cannot run decides frame by frame and applies the value operations of
        the batch at once.
        """
        L = self.layout
        if not self.fast or len(packets) < VEC_MIN_BATCH:
            return [self.process(f, p) for f, p in packets]
        if self._vec and self._vw is not False:
            return self._process_batch_vec(packets)
        results: list = [None] * len(packets)
        fixed_len, unpack = L.fixed_len, L.struct.unpack_from
        ihl_i, ihl_s, ihl_m = self._ihl
        i_et, i_pr, i_dp = self._i_etype, self._i_proto, self._i_dport
        lo, hi = L.udp_port_min, L.udp_port_max
        i_tsi, i_exp = self._i_tsi, self._i_exp
        decide = self._decide_fast
        omni = self._omni
        i_next = self._i_next if omni else 0
        pk, by = self._pk, self._by
        deferred = []          # (index, frame, port, u, action, exp_out, mgid, op, base)
        for i, (frame, port) in enumerate(packets):
            if len(frame) < fixed_len:
                results[i] = self._process_short(frame, port)
                continue
            u = unpack(frame)
            if (u[i_et] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5 or u[i_pr] != IPPROTO_UDP
                    or not lo <= u[i_dp] <= hi):
                results[i] = self._forward_l2(frame, port, u[self._i_eth_dst])
                continue
            ctx = self._admit(frame, port, u)
            if ctx is None:
                results[i] = []
                continue
            sc, slot, copy, word, mask, nw, mgid, data = ctx
            vop: list = []
            action, stat, exp_out, _, nxt_out = decide(frame, sc, slot, copy, word, mask, nw, u[i_tsi], u[i_exp],
                                                       data, u[i_next] if omni else 0, vop)
            pk[stat] += 1
            by[stat] += len(frame)
            deferred.append((i, frame, port, u, action, exp_out, mgid, vop[0] if vop else None, data, nxt_out))
        if deferred:
            carried = self._apply_values_batch(deferred)
            for (i, frame, port, u, action, exp_out, mgid, _v, data, nxt_out), payload in zip(deferred, carried):
                results[i] = [] if action == ops.OUT_DROP else self._emit(frame, port, u, action, exp_out,
                                                                         payload, mgid, data, nxt_out)
        return results

    _VCODE = {"write": 0, "add": 1, "read": 2, "nop": 3, "clear": 4}
    # per values-op code: whether the packet carries the register on, resets the row, adds its values
    _V_CARRY = np.array([False, True, True, False, True])
    _V_RESET = np.array([True, False, False, False, True])
    _V_ADDS = np.array([True, True, False, False, False])

    def _apply_values_batch(self, deferred) -> list:
        """Apply the deferred value ops in order; return each packet's carried payload bytes (or None)."""
        L = self.layout
        P_, E = self._passes, L.elements_per_pass
        vals = self._vals
        todo = [(k, d[7]) for k, d in enumerate(deferred) if d[7] is not None]
        carried: list = [None] * len(deferred)
        if not todo:
            return carried
        codes = np.array([self._VCODE[v[0]] for _, v in todo], dtype=np.int8)
        bases = np.array([v[1] for _, v in todo], dtype=np.int64)
        off, vlen = L.values_offset, L.data_bytes
        zero = bytes(vlen)
        blob = b"".join([deferred[k][1][off:off + vlen] if deferred[k][8] else zero for k, _ in todo])
        pkt = np.frombuffer(blob, L.value_dtype).reshape(len(todo) * P_, E).astype(np.uint64)
        rows = (bases[:, None] + np.arange(P_)).reshape(-1)
        code = np.repeat(codes, P_)
        contrib = np.where(((code == 0) | (code == 1))[:, None], pkt, np.uint64(0))
        reset = (code == 0) | (code == 4)
        order = np.argsort(rows, kind="stable")
        r = rows[order]
        c = contrib[order]
        rs = reset[order]
        m = len(r)
        first = np.ones(m, dtype=bool)
        first[1:] = r[1:] != r[:-1]
        idx = np.arange(m)
        anchor = np.maximum.accumulate(np.where(rs | first, idx, 0))
        csum = np.zeros((m + 1, E), dtype=np.uint64)
        np.cumsum(c, axis=0, out=csum[1:])
        after = csum[1:] - csum[anchor]
        keep = ~rs[anchor]                              # no reset since the row's first op: start from the register
        if keep.any():
            after[keep] += vals[r[keep]].astype(np.uint64)
        last = np.ones(m, dtype=bool)
        last[:-1] = r[1:] != r[:-1]
        vals[r[last]] = after[last].astype(vals.dtype)
        out = np.empty_like(after)
        out[order] = after
        out_be = out.astype(vals.dtype).astype(L.value_dtype).reshape(len(todo), P_ * E)
        for j, (k, v) in enumerate(todo):
            if codes[j] in (1, 2, 4) or (codes[j] == 0 and not deferred[k][8]):
                # add, read, clear: the packet carries the register; a write without data carries zeros
                carried[k] = out_be[j].tobytes()
        return carried

    # -- vectorised batches ---------------------------------------------------------
    _HASH_MUL = np.uint64(0x9E3779B97F4A7C15)

    def _init_vec(self) -> None:
        """Precompute what :meth:`_process_batch_vec` needs: record dtypes, field views, the decision loop.

        ``self._vec`` stays False when the plan's layout has something the
        vector path does not handle (then batches run frame by frame).
        """
        L = self.layout
        self._vec = False
        self._rec_cache: dict[int, np.dtype] = {}
        units, off = [], 0
        fmt = L.struct.format.lstrip(">")
        codes = []
        k = 0
        while k < len(fmt):                     # struct codes, e.g. "6s6sHBBHHHBBHII..."
            j = k
            while fmt[j].isdigit():
                j += 1
            codes.append(fmt[k:j + 1])
            k = j + 1
        for code, size in zip(codes, L.unit_sizes):
            units.append((off, {"B": "u1", "H": ">u2", "I": ">u4", "Q": ">u8"}.get(code, f"V{size}")))
            off += size
        self._units = units
        self._sig = self._kx = self._vx = self._res_bytes = None
        self._gvec: dict[int, _GroupVec] = {}
        # byte offsets of the fields a result rewrites (whole units of the sizes below)
        fields = (self._i_eth_dst, self._i_eth_src, self._i_ip_src, self._i_ip_dst, self._i_sport, self._i_dport)
        if [L.unit_sizes[i] for i in fields] != [6, 6, 4, 4, 2, 2]:
            return
        self._rw = tuple(units[i][0] for i in fields) + (self._ip_off, L.ipv4_len, self._ck_off)
        self._sig = self._signature(units)
        mt, ex = L.slot("agg.msg_type"), L.slot("agg.exponent")
        if (L.unit_sizes[mt.index] == 1 and ex.shift is None and L.unit_sizes[ex.index] in (1, 2, 4)
                and L.unit_sizes[self._i_udp_ck] == 2):
            self._res_bytes = (units[mt.index][0], 0xFF & ~(mt.mask << (mt.shift or 0)),
                               self._msg_result << (mt.shift or 0), units[ex.index][0], L.unit_sizes[ex.index],
                               units[self._i_udp_ck][0])
        key_subs = self._wkey_sub
        if any(s.raw for s in key_subs):
            return
        # the decision loop over ints: observation codes must be dense 0..r-1
        for name in self._yields:
            if sorted(dmod.CODES[name].values()) != list(range(len(dmod.OBSERVATIONS[name]))):
                return
        self._vec_loop = self._make_loop()
        # workers keys of whole bytes that leave at least one byte for the ingress port: exact look-ups
        kb = []
        for s_ in key_subs:
            if s_.shift is not None:
                kb = None
                break
            o_ = units[s_.index][0]
            kb.extend(range(o_, o_ + L.unit_sizes[s_.index]))
        if kb is not None and len(kb) <= 7:
            self._kx = (np.array(kb, dtype=np.int64), 8 - len(kb), [L.unit_sizes[s_.index] for s_ in key_subs])
        self._vec_workers_sync()
        self._vec = True

    def _signature(self, units):
        """(byte offsets, masks, values): a frame whose bytes there, masked, equal the values is
        IPv4 with a 5-word header, UDP to the aggregation port range and a contribution, so it needs
        none of the checks of :meth:`_parse_checks` but the length.  None when the port range is
        not an aligned power-of-two block (then every batch takes those checks)."""
        L = self.layout
        lo, hi = L.udp_port_min, L.udp_port_max
        size = hi - lo + 1
        if size & (size - 1) or lo % size:
            return None
        want = [("ethernet.ether_type", 0xFFFF, ETHERTYPE_IPV4), ("ipv4.ihl", 0xF, 5),
                ("ipv4.protocol", 0xFF, IPPROTO_UDP), ("udp.dst_port", 0xFFFF & ~(size - 1), lo),
                ("agg.msg_type", 0xF, self._msg_contrib)]
        masks: dict[int, list[int]] = {}
        for name, mask, value in want:
            sl = self.layout.slot(name)
            off, _fmt = units[sl.index]
            n = L.unit_sizes[sl.index]
            mask &= sl.mask
            if value & ~mask:
                return None
            shift = sl.shift or 0
            for b in range(n):                    # big-endian bytes of the unit
                bit = 8 * (n - 1 - b)
                mb, vb = ((mask << shift) >> bit) & 0xFF, ((value << shift) >> bit) & 0xFF
                if mb:
                    m0, v0 = masks.get(off + b, [0, 0])
                    masks[off + b] = [m0 | mb, v0 | vb]
        offs = sorted(masks)
        return (np.array(offs, dtype=np.int64), np.array([masks[o][0] for o in offs], dtype=np.uint8),
                np.array([masks[o][1] for o in offs], dtype=np.uint8))

    def _rec(self, length: int) -> np.dtype:
        """Structured dtype of one frame of ``length`` bytes: field ``u{i}`` is struct unit i."""
        dt = self._rec_cache.get(length)
        if dt is None:
            dt = np.dtype({"names": [f"u{i}" for i in range(len(self._units))],
                           "formats": [f for _, f in self._units],
                           "offsets": [o for o, _ in self._units], "itemsize": length})
            self._rec_cache[length] = dt
        return dt

    def _vec_workers_sync(self) -> None:
        """The workers table as sorted key hashes and per-entry parameter columns."""
        order = self._wkey_order
        keys, params = [], []
        for key, val in self._workers.items():
            keys.append(key)
            params.append(val)
        if not keys:
            self._vw = self._vx = None
            return
        kcols = np.array(keys, dtype=np.uint64).reshape(len(keys), len(order))
        h = np.zeros(len(keys), dtype=np.uint64)
        for c in range(kcols.shape[1]):
            h = h * self._HASH_MUL + kcols[:, c]
        srt = np.argsort(h, kind="stable")
        hs = h[srt]
        if len(hs) > 1 and np.any(hs[1:] == hs[:-1]):      # a hash collision between entries: no vector lookup
            self._vw = False
            self._vx = None
            return
        known0 = np.array([p is not None for p in params], dtype=bool)
        pv0 = np.array([p if p is not None else (0,) * 7 for p in params], dtype=np.int64).reshape(len(keys), 7)
        # an eighth column: the mask when the word is 0 (what a one-word bitmap step reads), else 0
        pv0 = np.concatenate([pv0, np.where(pv0[:, 1] == 0, pv0[:, 2], 0)[:, None]], axis=1)
        known, pv = known0[srt], pv0[srt]
        # exact keys: the ingress port's bytes then the key fields' bytes as on the wire, one uint64
        self._vx = None
        kx = getattr(self, "_kx", None)
        if kx is not None:
            _kb, kport, sizes = kx
            try:
                ex = np.array([int.from_bytes(k[0].to_bytes(kport, "big")
                                              + b"".join(v.to_bytes(z, "big") for v, z in zip(k[1:], sizes)), "big")
                               for k in keys], dtype=np.uint64)
            except OverflowError:             # a port (or field) wider than its bytes: hashed look-ups only
                ex = None
            if ex is not None:
                s2 = np.argsort(ex, kind="stable")
                self._vx = (ex[s2], known0[s2], pv0[s2])
        self._vw = (hs, kcols[srt], known, pv)

    def _make_loop(self):
        """The decision of a batch as one generated loop over int lists.

        The plan's decision table is expanded per observation code into lists
        indexed by one mixed-radix int ``o`` (so per packet and step one list
        read picks the operation); the operations are inlined from the
        FAST_KERNELS semantics, with a branch only for the ops the table uses
        in that step.  The loop takes the int lists it reads, named in
        ``self._vec_inputs`` (of ``_VEC_INPUTS``), and returns the lists of
        final observation codes, then of exponents out and next offsets out
        when a step sets them; the outcome and the values op follow from the
        final code by table look-ups (numpy) in :meth:`_process_batch_vec`.
        """
        C = ops
        env: dict[str, Any] = {}
        roles = [r for r, _ in self._chain]
        src = ["        o = data" if self._omni else "        o = 0"]
        prior = ["data"] if self._omni else []
        radix = {name: len(dmod.OBSERVATIONS[name]) for name in dmod.OBSERVATIONS}

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

        def branches(K, used, bodies, ind="        "):
            """if/elif over the ops this step uses (op names -> lines); one op needs no test."""
            used = sorted(used)
            if len(used) == 1:
                return [ind + line for line in bodies[used[0]]]
            codes = {name: i for i, name in enumerate(used)}
            env[K] = [codes[x] for x in env[K]]
            lines = [f"{ind}op = {K}[o]"]
            for i, name in enumerate(used):
                lines.append(f"{ind}{'if' if i == 0 else 'elif'} op == {i}:")
                lines += [ind + "    " + line for line in bodies[name]]
            return lines

        self._vec_values_div = None
        for si, (role, lut) in enumerate(self._chain):
            K = f"K{si}"
            names = table(lut, lambda kv: kv[1])
            used = set(names)
            if role == "values":
                env["VOP"] = np.array([self._VCODE[x] for x in names], dtype=np.int8)
                self._vec_values_at = len(prior)
                continue
            env[K] = names
            if role == "chunk":
                env["chunk"] = self._chunk
                src += ["        s = chunk[sc]"]
                src += branches(K, used, {"advance": [
                    "if tsi > s:", f"    chunk[sc] = tsi; y = {C.CMP_GT}",
                    "else:", f"    y = {C.CMP_EQ} if tsi == s else {C.CMP_LT}"]})
            elif role == "counter":
                env["cnt"], env["cfull"] = self._counter, self._counter_full
                src += ["        c = cnt[sc]"]
                src += branches(K, used, {
                    "inc_mod": ["inc = (c + 1) & cfull",
                                "if inc == n:", "    cnt[sc] = 0",
                                f"    y = {C.COUNT_FIRST} if c == 0 else {C.COUNT_LAST}",
                                "else:", "    cnt[sc] = inc",
                                f"    y = {C.COUNT_FIRST} if c == 0 else {C.COUNT_MID}"],
                    "probe_zero": [f"y = {C.COUNT_COMPLETE} if c == 0 else {C.COUNT_INCOMPLETE}"],
                    "reset_one": ["cnt[sc] = 1", f"y = {C.COUNT_FIRST}"],
                    "inc_sat": ["if c == n:", f"    y = {C.COUNT_COMPLETE}",
                                "else:", "    inc = (c + 1) & cfull", "    cnt[sc] = inc",
                                f"    y = {C.COUNT_LAST} if inc == n else {C.COUNT_MID}"],
                    "probe_full": [f"y = {C.COUNT_COMPLETE} if c == n else {C.COUNT_INCOMPLETE}"],
                    "nop": [f"y = {C.COUNT_NONE}"]})
            elif role == "exponent":
                env["expo"] = self._exponent
                src += branches(K, used, {
                    "write": ["expo[sc] = exp", "e_out = exp"],
                    "max": ["s = expo[sc]", "e_out = exp if exp > s else s", "expo[sc] = e_out"],
                    "read": ["e_out = expo[sc]"],
                    "nop": ["e_out = exp"]})
            elif role == "minnext":
                env["mnx"] = self._minnext
                src += branches(K, used, {
                    "write": ["mnx[sc] = nxt", "n_out = nxt"],
                    "min": ["s = mnx[sc]", "n_out = nxt if s > nxt else s", "mnx[sc] = n_out"],
                    "read": ["n_out = mnx[sc]"],
                    "nop": ["n_out = nxt"]})
            elif role == "bitmap" and len(self._bm) == 1:
                env["bm0"], env["bm1"], env["bmf"] = self._bm[0][0], self._bm[0][1], self._bm_full[0]
                src += ["        if copy:", "            t_l = bm1; o_l = bm0",
                        "        else:", "            t_l = bm0; o_l = bm1"]
                src += branches(K, used, {
                    "set_clear": ["t = t_l[slot]", "y = 1 if t & m else 0", "t_l[slot] = t | m",
                                  "o_l[slot] = o_l[slot] & (bmf ^ m)"],
                    "set": ["t = t_l[slot]", "y = 1 if t & m else 0", "t_l[slot] = t | m"],
                    "reset_set": ["t_l[slot] = m", "y = 0"],
                    "nop": ["y = 0"]})
            elif role == "bitmap":
                env["bm"], env["bmf"] = self._bm, self._bm_full
                env[K] = table(lut, lambda kv: kv[0])
                src += ["        y = 0", f"        k = {K}[o]",
                        "        for i, lanes in enumerate(bm):",
                        "            t_l = lanes[copy]; o_l = lanes[1 - copy]",
                        "            a, b, s = k(t_l[slot], o_l[slot], mask if i == word else 0, bmf[i])",
                        "            t_l[slot] = a; o_l[slot] = b; y |= s"]
            else:
                raise ModelError(f"no batch execution for register role {role!r}")
            step = self.decision["steps"][si]
            if step["yields"]:
                src.append(f"        o = o * {radix[step['yields']]} + y" if prior else "        o = y")
                prior.append(step["yields"])
        # the values op from the final code: drop the digits of the observations made after the values step
        div = 1
        for name in prior[getattr(self, "_vec_values_at", len(prior)):]:
            div *= radix[name]
        self._vec_values_div = div if "values" in roles else None
        self._vec_vop = env.get("VOP")
        self._vec_oa = np.array(table(self._outcome, lambda v: v[0]), dtype=np.int8)
        self._vec_os = np.array(table(self._outcome, lambda v: v[1]), dtype=np.int64)
        # the values op of every final code (3: nop when the table has no values step)
        ncodes = len(self._vec_oa)
        self._vec_vo_full = (self._vec_vop[np.arange(ncodes) // self._vec_values_div].astype(np.intp)
                             if self._vec_values_div is not None else np.full(ncodes, 3, dtype=np.intp))
        # the loop takes only the columns its body reads (m: the packet's bitmap mask when its
        # word is 0, else 0) and returns the codes, then exponents / next offsets when a step sets them
        body = "\n".join(src)
        self._vec_inputs = [x for x in self._VEC_INPUTS if re.search(rf"\b{x}\b", body)]
        self._vec_has_e, self._vec_has_n = "exponent" in roles, "minnext" in roles
        outs = ["O"] + (["E"] if self._vec_has_e else []) + (["N"] if self._vec_has_n else [])
        var = {"O": "o", "E": "e_out", "N": "n_out"}
        args = ", ".join(f"{x}_l" for x in self._vec_inputs)
        names = ", ".join(self._vec_inputs)
        head = [f"def loop({args}):",
                "    " + "; ".join(f"{o} = []" for o in outs),
                "    " + "; ".join(f"a{o} = {o}.append" for o in outs),
                f"    for {names} in zip({args}):" if len(self._vec_inputs) > 1 else f"    for {names} in {args}:"]
        tail = ["        " + "; ".join(f"a{o}({var[o]})" for o in outs), f"    return {', '.join(outs)},"]
        exec(compile("\n".join(head + src + tail), "<p4gen decision loop>", "exec"), env)   # noqa: S102
        return env["loop"]

    # columns a generated decision loop may read, in its argument order
    _VEC_INPUTS = ("sc", "slot", "copy", "word", "mask", "m", "n", "tsi", "exp", "data", "nxt")

    def _col(self, rec, name: str) -> np.ndarray:
        """One header field of every frame of a record array (a view for whole units)."""
        s = self.layout.slot(name)
        u = rec[f"u{s.index}"]
        if s.shift is None:
            return u
        return (u >> s.shift) & s.mask

    def _parse_checks(self, rec, Lg, idx, frames, ports, data, results):
        """The admission checks of one length group frame by frame (as arrays): other traffic is
        forwarded, malformed aggregation frames counted and dropped.  Returns the rows that remain,
        or None when none does."""
        L = self.layout
        cand = ((self._col(rec, "ethernet.ether_type") == ETHERTYPE_IPV4) & (self._col(rec, "ipv4.ihl") == 5)
                & (self._col(rec, "ipv4.protocol") == IPPROTO_UDP))
        dport = self._col(rec, "udp.dst_port")
        cand &= (dport >= L.udp_port_min) & (dport <= L.udp_port_max)
        if not cand.all():
            for r in (~cand).nonzero()[0].tolist():
                i = idx[r]
                results[i] = self._forward_l2(frames[i], ports[i], frames[i][:6])
        if self._omni:
            bad = ((data == 1) & (Lg < L.frame_len)) if Lg < L.frame_len else np.zeros(len(idx), bool)
        else:
            bad = np.zeros(len(idx), bool) if Lg >= L.frame_len else np.ones(len(idx), bool)
        bad |= self._col(rec, "agg.msg_type") != self._msg_contrib
        bad &= cand
        nbad = int(np.count_nonzero(bad))
        if nbad:
            s = self._stat["drop_malformed"]
            self._pk[s] += nbad
            self._by[s] += nbad * Lg
            for r in bad.nonzero()[0].tolist():
                results[idx[r]] = []
        rows = (cand & ~bad).nonzero()[0]
        return rows if len(rows) else None

    def _process_batch_vec(self, packets) -> list[list[tuple[int, bytes]]]:
        L = self.layout
        B = len(packets)
        results: list = [None] * B
        frames, ports = zip(*packets)
        lens = list(map(len, frames))
        fixed = L.fixed_len
        first = lens[0]
        if lens.count(first) == B:
            groups = {first: list(range(B))}
        else:
            groups = {}
            for i, n in enumerate(lens):
                groups.setdefault(n, []).append(i)
        st = self._stat
        pk, by = self._pk, self._by
        adm = []              # per length group: (Lg, idx, arr rows, fields...)
        for Lg, idx in groups.items():
            if Lg < fixed:
                for i in idx:
                    results[i] = self._process_short(frames[i], ports[i])
                continue
            blob = b"".join([frames[i] for i in idx]) if len(idx) != B else b"".join(frames)
            rec = np.frombuffer(blob, self._rec(Lg))
            A8 = np.frombuffer(blob, np.uint8).reshape(-1, Lg)      # the group's frames as a byte matrix
            data = self._col(rec, "agg.flags") & 1 if self._omni else None
            sig = self._sig
            if sig is not None and Lg >= L.frame_len and ((A8[:, sig[0]] & sig[1]) == sig[2]).all():
                rows = np.arange(len(idx))        # every frame an aggregation contribution of full length
            else:
                rows = self._parse_checks(rec, Lg, idx, frames, ports, data, results)
                if rows is None:
                    continue
            sub = rec if len(rows) == len(rec) else rec[rows]      # copying records is slow: view when all pass
            port_col = np.fromiter(ports if len(idx) == B else [ports[i] for i in idx], dtype=np.int64,
                                   count=len(idx))
            if len(rows) != len(idx):
                port_col = port_col[rows]
            known, pv = self._workers_batch(A8, rows, sub, port_col)
            all_known = bool(known.all())
            if not all_known:
                nunk = len(known) - int(np.count_nonzero(known))
                s = st["drop_unknown"]
                pk[s] += nunk
                by[s] += nunk * Lg
            pool = self._col(sub, "agg.pool_index").astype(np.int64)
            sij = pool & self._slot_mask
            badslot = sij >= pv[:, 5]
            if not all_known:
                badslot &= known
            nbs = int(np.count_nonzero(badslot))
            if nbs:
                s = st["drop_bad_slot"]
                pk[s] += nbs
                by[s] += nbs * Lg
            grow_rows = rows
            if nbs or not all_known:
                go = known & ~badslot
                for r in rows[~go].tolist():
                    results[idx[r]] = []
                g = go.nonzero()[0]
                if not len(g):
                    continue
                pv, pool, sij, grow_rows, sub = pv[g], pool[g], sij[g], rows[g], sub[g]
            if self._agg_rx is not None:
                pk[self._agg_rx] += len(grow_rows)
                by[self._agg_rx] += len(grow_rows) * Lg
            copy = (pool >> self._slot_bits) & 1
            slot = (pv[:, 4] + sij) & 0xFFFF
            gidx = np.asarray(idx, dtype=np.int64)[grow_rows] if len(idx) != B else grow_rows
            adm.append((Lg, A8, rec, grow_rows, gidx, slot, copy, pv, sub,
                        None if data is None else data[grow_rows]))
        if not adm:
            return results
        if len(adm) == 1:
            Lg, A8, rec, grow_rows, gidx, slot, copy, pv, sub, data = adm[0]
            order = None
        else:
            gidx = np.concatenate([a[4] for a in adm])
            order = np.argsort(gidx, kind="stable")
            slot = np.concatenate([a[5] for a in adm])[order]
            copy = np.concatenate([a[6] for a in adm])[order]
            pv = np.concatenate([a[7] for a in adm])[order]
            sub = None
            data = None if not self._omni else np.concatenate([a[9] for a in adm])[order]
        # per-packet header columns in global order
        def gcol(name):
            if order is None:
                return self._col(sub, name)
            return np.concatenate([self._col(a[8], name) for a in adm])[order]
        m = len(slot)
        sc = (slot << 1) | copy
        exp_c = gcol("agg.exponent")
        column = {"sc": lambda: sc, "slot": lambda: slot, "copy": lambda: copy, "word": lambda: pv[:, 1],
                  "mask": lambda: pv[:, 2], "m": lambda: pv[:, 7],
                  "n": lambda: pv[:, 3], "tsi": lambda: gcol("agg.tsi"), "exp": lambda: exp_c,
                  "data": lambda: data, "nxt": lambda: gcol("agg.next")}
        outs = self._vec_loop(*[column[x]().tolist() for x in self._vec_inputs])
        O_a = np.fromiter(outs[0], dtype=np.int64, count=m)      # fromiter: far cheaper than asarray on a list
        E_a = np.fromiter(outs[1], dtype=np.int64, count=m) if self._vec_has_e else exp_c.astype(np.int64)
        if self._vec_has_n:
            N_a = np.fromiter(outs[-1], dtype=np.int64, count=m)
        else:
            N_a = gcol("agg.next").astype(np.int64) if self._omni else None
        S_a = self._vec_os[O_a]
        A_a = self._vec_oa[O_a]
        VO_a = self._vec_vo_full[O_a]
        # counters
        cnt = np.bincount(S_a, minlength=len(pk)).tolist()
        if len(adm) == 1:
            Lg0 = adm[0][0]
            byt = [c * Lg0 for c in cnt]
        else:
            lens_adm = np.concatenate([np.full(len(a[4]), a[0], dtype=np.int64) for a in adm])[order]
            byt = np.bincount(S_a, weights=lens_adm, minlength=len(pk)).tolist()
        for s, c in enumerate(cnt):
            if c:
                pk[s] += c
                by[s] += int(byt[s])
        # value registers: the whole batch at once
        data_a = data.astype(bool) if self._omni else None      # every packet carries data otherwise
        emits = A_a != ops.OUT_DROP
        carried, has_carry = self._values_vec(sc, VO_a, data_a, adm, order, emits)
        # outputs
        emit = emits.nonzero()[0]
        gl = gidx.tolist() if order is None else gidx[order].tolist()
        if m == B:
            results = [[] for _ in gl]
        else:
            for k in gl:
                results[k] = []
        if not len(emit):
            return results
        if order is None:
            grp = np.zeros(m, dtype=np.int64)
            row = adm[0][3]
        else:
            grp = np.concatenate([np.full(len(a[4]), j, dtype=np.int64) for j, a in enumerate(adm)])[order]
            row = np.concatenate([a[3] for a in adm])[order]
        MG = pv[:, 6]
        for j, a in enumerate(adm):
            sel = emit if order is None else emit[grp[emit] == j]
            if not len(sel):
                continue
            if not self._omni:
                self._emit_vec(a[0], a[1], sel, False, row, A_a, E_a, N_a, MG, carried, has_carry, gl, ports,
                               results)
                continue
            grow = (~data_a[sel]) & has_carry[sel]
            for gsel in ((sel[~grow], False), (sel[grow], True)):
                if len(gsel[0]):
                    self._emit_vec(a[0], a[1], gsel[0], gsel[1], row, A_a, E_a, N_a, MG, carried, has_carry,
                                   gl, ports, results)
        return results

    def _wkey_col(self, sub, s) -> np.ndarray:
        u = sub[f"u{s.index}"]
        if s.shift is not None:
            u = (u >> s.shift) & s.mask
        return u.astype(np.uint64)

    def _workers_batch(self, A8, rows, sub, port_col):
        """Workers table look-up of frames ``rows`` of a length group: whether each hits a set_worker
        entry, and its parameters (worker_id, word, mask, n, slot_base, slot_count, mgid)."""
        vx = self._vx
        if vx is not None:
            kb, kport, _sizes = self._kx
            if not (port_col >> (8 * kport)).any():          # every port fits its bytes (none negative)
                K = np.empty((len(rows), 8), np.uint8)
                K[:, kport:] = A8[:, kb] if len(rows) == len(A8) else A8[rows[:, None], kb]
                if kport == 1:
                    K[:, 0] = port_col
                else:
                    K[:, :kport] = (port_col[:, None] >> (8 * np.arange(kport - 1, -1, -1))) & 0xFF
                key = K.view(">u8").reshape(-1).astype(np.uint64)
                ks, kn, kpv = vx
                ent = np.searchsorted(ks, key)
                np.minimum(ent, len(ks) - 1, out=ent)
                return (ks[ent] == key) & kn[ent], kpv[ent]
        cols = [port_col.astype(np.uint64)] + [self._wkey_col(sub, s_) for s_ in self._wkey_sub]
        ent, known = self._vec_lookup(cols)
        return known, (self._vw[3][ent] if self._vw else np.zeros((len(rows), 8), dtype=np.int64))

    def _vec_lookup(self, cols):
        """Workers table lookup for a batch: entry index and whether it is a set_worker hit."""
        vw = self._vw
        m = len(cols[0])
        if vw is None:
            return np.zeros(m, dtype=np.int64), np.zeros(m, dtype=bool)
        hs, kcols, known, pv = vw
        # the packet key in the table's internal order: ingress port, then the header fields
        h = np.zeros(m, dtype=np.uint64)
        for c in cols:
            h = h * self._HASH_MUL + c
        ent = np.searchsorted(hs, h)
        np.minimum(ent, len(hs) - 1, out=ent)
        hit = hs[ent] == h
        for c, col in enumerate(cols):
            hit &= kcols[ent, c] == col
        return ent, hit & known[ent]

    def _values_vec(self, sc, VO, data, adm, order, emits):
        """Apply the batch's value ops (codes as in _VCODE) in packet order, all at once.

        Returns the values each emitting packet carries on (native dtype,
        (m, passes * elements); rows of other packets are left zero) and
        which packets carry values.  One op per (packet, pass), sorted by
        register row (stably, so packet order holds within a row).  A row's
        value after op k is the sum of the adding ops since the row's last
        reset (write / clear), plus the register's old contents when the batch
        has no reset before k; it is needed only after each row's last op
        (the register) and after the ops of emitting packets that carry
        values.  So every adding op is scattered (``np.add.at``) into the
        first needed position of its run, and runs with several needed
        positions take a running sum over them.  Unsigned sums wrap modulo
        2^width like the register does, so the result is exact.
        """
        L = self.layout
        P_, E = self._passes, L.elements_per_pass
        m = len(VO)
        has_carry = self._V_CARRY[VO]
        if self._omni:
            has_carry |= (VO == 0) & ~data        # a write without data carries the zeros it wrote
        touched = VO != 3
        if touched.all():
            todo = None                           # every packet has a value op
        else:
            todo = touched.nonzero()[0]
            if not len(todo):
                return None, has_carry
        vals = self._vals
        dt = vals.dtype
        rows = (sc if todo is None else sc[todo]).astype(np.int64, copy=False) << self._pass_bits
        if P_ > 1:
            rows = (rows[:, None] + np.arange(P_)).reshape(-1)
        order2 = np.argsort(rows, kind="stable")
        r = rows[order2]
        pk = order2 // P_ if P_ > 1 else order2                  # packet of each sorted op
        if todo is not None:
            pk = todo[pk]
        cs = VO[pk]
        reset = self._V_RESET[cs]
        adds = self._V_ADDS[cs]
        if self._omni:
            adds &= data[pk]                      # a header-only packet resets without adding
        n2 = len(r)
        newrow = np.empty(n2, dtype=bool)
        newrow[0] = True
        newrow[1:] = r[1:] != r[:-1]
        last = np.empty(n2, dtype=bool)
        last[-1] = True
        last[:-1] = newrow[1:]
        want = (emits & has_carry)[pk]
        need = (last | want).nonzero()[0]
        start = np.maximum.accumulate(np.where(reset | newrow, np.arange(n2), 0))[need]
        # each adding op goes to the first needed position at or after it in its run; the adds of a run
        # that a later reset ends before any needed position are never seen and are left out
        after = np.zeros((len(need), E), dtype=dt)
        pa = adds.nonzero()[0]
        if len(pa):
            j = np.searchsorted(need, pa)
            live = start[j] <= pa
            if not live.all():
                pa, j = pa[live], j[live]
            V = self._op_values(pk[pa], order2[pa] % P_ if P_ > 1 else None, adm, order)   # in j's order
            step = (j[1:] != j[:-1]).nonzero()[0] + 1
            run = len(pa) // (len(step) + 1)
            if run * (len(step) + 1) == len(pa) and not (step % run).any():
                # every target gets a run of the same length (e.g. whole rounds of n packets): sum them
                if run <= 4:                      # short runs: add strided slices (a reduction over a short
                    acc = V[::run].astype(dt)     # middle axis is slow in numpy)
                    for k in range(1, run):
                        acc += V[k::run]
                    after[j[::run]] = acc
                else:
                    after[j[::run]] = V.reshape(len(step) + 1, run, -1).sum(axis=1, dtype=dt)
            elif len(pa) >= 6 * (len(step) + 1):    # long runs of one target: a segmented sum is cheaper
                seg = np.concatenate([[0], step])
                after[j[seg]] = np.add.reduceat(V, seg, axis=0, dtype=dt)
            else:
                np.add.at(after.reshape(-1), ((j * E)[:, None] + np.arange(E)).reshape(-1),
                          V.astype(dt).reshape(-1))
            more = start[1:] == start[:-1]        # a run with several needed positions: sum up to each
            if more.any():
                k = np.arange(len(need))
                first = np.maximum.accumulate(np.where(np.concatenate([[True], ~more]), k, 0))
                c = np.zeros((len(need) + 1, E), dtype=dt)
                np.cumsum(after, axis=0, dtype=dt, out=c[1:])
                after = c[1:] - c[first]
        keep = ~reset[start]                      # no reset since the row's first op: add the register
        if keep.any():
            after[keep] += vals[r[need[keep]]]
        carried = np.zeros((m, P_ * E), dtype=dt)
        w = want[need]
        if w.any():
            q = need[w]
            if P_ > 1:
                carried.reshape(m, P_, E)[pk[q], order2[q] % P_] = after[w]
            else:
                carried[pk[q]] = after[w]
        fin = last[need]
        vals[r[need[fin]]] = after[fin]
        return carried, has_carry

    def _op_values(self, pk, passes, adm, order) -> np.ndarray:
        """The values (wire dtype, (len(pk), elements per pass)) of packets ``pk`` (admitted order) in
        pass ``passes`` (None: one pass); every such packet carries data."""
        L = self.layout
        P_, E = self._passes, L.elements_per_pass
        off, vlen = L.values_offset, L.data_bytes
        if order is None:
            _Lg, A8, _rec, grow_rows = adm[0][:4]
            src = A8[:, off:off + vlen].view(L.value_dtype)
            brow = grow_rows[pk]
        else:
            parts = []
            for Lg, A8, _rec, grow_rows, *_ in adm:
                if Lg >= L.frame_len:
                    a = A8[grow_rows, off:off + vlen]
                    parts.append(a.view(L.value_dtype))
                else:
                    parts.append(np.zeros((len(grow_rows), L.elements), L.value_dtype))
            src = np.concatenate(parts)[order]
            brow = pk
        if passes is None:
            return src[brow]
        return src.reshape(len(src), P_, E)[brow, passes]

    def _emit_vec(self, Lg, arr, sel, grow, row, A, E, N, MG, carried, has_carry, gl, ports, results):
        """Result frames of the admitted packets ``sel`` (one length group): header rewrites on the whole
        (k, Lg) array, multicast replication with np.repeat, IPv4 checksums vectorised."""
        L = self.layout
        src = arr[row[sel]]
        off, vlen = L.values_offset, L.data_bytes
        if grow:
            vb = carried[sel].astype(L.value_dtype).view(np.uint8).reshape(len(sel), vlen)
            X = np.concatenate([src[:, :L.fixed_len], vb, src[:, L.fixed_len:]], axis=1)
        else:
            X = src
            hc = has_carry[sel]
            if carried is not None and hc.all():
                X[:, off:off + vlen] = carried[sel].astype(L.value_dtype).view(np.uint8)
            elif carried is not None and hc.any():
                w = hc.nonzero()[0]
                X[w, off:off + vlen] = carried[sel[w]].astype(L.value_dtype).view(np.uint8)
        Lx = X.shape[1]
        rb = self._res_bytes
        if rb is not None and not self._omni:
            # byte-level rewrites of msg_type, exponent and UDP checksum (cheaper than a record view)
            mo, mk, mv, eo, es, co = rb
            X[:, mo] = (X[:, mo] & mk) | mv
            if es == 1:
                X[:, eo] = E[sel]
            else:
                X[:, eo:eo + es] = E[sel].astype(f">u{es}").view(np.uint8).reshape(-1, es)
            X[:, co:co + 2] = 0
            R = None
        else:
            R = self._rewrite_result_fields(X, Lx, sel, grow, E, N, vlen)
        acts = A[sel]
        if (acts == ops.OUT_MULTICAST).all():
            uni, mc = acts[:0], np.arange(len(sel))
        else:
            uni = (acts == ops.OUT_UNICAST).nonzero()[0]
            mc = (acts == ops.OUT_MULTICAST).nonzero()[0]
        if len(uni):
            if R is None:
                R = X.view(self._rec(Lx)).reshape(-1)
            U = R[uni]
            for a_, b_ in ((self._i_eth_dst, self._i_eth_src), (self._i_ip_dst, self._i_ip_src),
                           (self._i_dport, self._i_sport)):
                fa, fb = f"u{a_}", f"u{b_}"
                t = U[fa].copy()
                U[fa] = U[fb]
                U[fb] = t
            R[uni] = U
        nrep = 0
        mblob = b""
        if len(mc):
            mg_a = MG[sel[mc]]
            mg0 = int(mg_a[0])
            if (mg_a == mg0).all():
                mgs = None
                gs = [self._group_vec(mg0)]
            else:
                mgs = mg_a.tolist()
                gs = [self._group_vec(mg) for mg in set(mgs)]
            one_group = len(gs) == 1 and gs[0].all_rewritten
            if one_group:
                g = gs[0]
                counts = [len(g.ports)] * len(mc)
                rports = g.ports * len(mc)
                mblob = self._replicate_one_group(X, mc, g)
            else:
                if mgs is None:
                    mgs = [mg0] * len(mc)
                gmap = {mg: self._group_vec(mg) for mg in set(mgs)}
                counts = [len(gmap[mg].ports) for mg in mgs]
                rports = [p for mg in mgs for p in gmap[mg].ports]
                mblob = self._replicate_groups(X, mc, [gmap[mg] for mg in mgs], counts)
            nrep = len(rports)
        if len(uni):
            self._checksums(X, uni)
            xblob = X.tobytes()
        gsel = sel.tolist()
        if len(uni):
            for j in uni.tolist():
                k = gsel[j]
                results[gl[k]] = [(ports[gl[k]], xblob[j * Lx:(j + 1) * Lx])]
        if len(mc):
            # every replica as (port, frame) in one pass, then one list slice per multicast packet
            pairs = list(zip(rports, [mblob[q:q + Lx] for q in range(0, nrep * Lx, Lx)]))
            tgt = [gl[gsel[j]] for j in mc.tolist()]
            if one_group:
                k = counts[0] if counts else 0
                for t, q in zip(tgt, range(0, nrep, k) if k else [0] * len(tgt)):
                    results[t] = pairs[q:q + k]
            else:
                pos = 0
                for t, cnt in zip(tgt, counts):
                    results[t] = pairs[pos:pos + cnt]
                    pos += cnt

    def _rewrite_result_fields(self, X, Lx, sel, grow, E, N, vlen):
        """The result header fields of every row of ``X``, through a record view (returned): msg_type (and
        OmniReduce's flags, next offset and grown lengths), exponent, UDP checksum 0."""
        R = X.view(self._rec(Lx)).reshape(-1)
        mt = self.layout.slot("agg.msg_type")
        u = R[f"u{mt.index}"]
        if self._omni:
            fl = self.layout.slot("agg.flags")
            keep = 0xFF & ~((mt.mask << mt.shift) | (fl.mask << fl.shift))
            R[f"u{mt.index}"] = (u & keep) | (self._msg_result << mt.shift) | (1 << fl.shift)
            R[f"u{self._i_next}"] = N[sel]
            if grow:
                R[f"u{self._i_total_len}"] = (R[f"u{self._i_total_len}"].astype(np.int64) + vlen) & 0xFFFF
                R[f"u{self._i_udp_len}"] = (R[f"u{self._i_udp_len}"].astype(np.int64) + vlen) & 0xFFFF
        else:
            R[f"u{mt.index}"] = (u & (0xFF & ~(mt.mask << mt.shift))) | (self._msg_result << mt.shift)
        R[f"u{self._i_exp}"] = E[sel]
        R[f"u{self._i_udp_ck}"] = 0
        return R

    def _group_vec(self, mgid: int) -> "_GroupVec":
        """Multicast group ``mgid`` as arrays for :meth:`_emit_vec`; rebuilt when the group or the
        result_dst table has been replaced since the last call."""
        reps = self.groups.get(mgid, ())
        rdst = self._rdst
        hit = self._gvec.get(mgid)
        if hit is not None and hit.reps is reps and hit.rdst is rdst:
            return hit
        g = _GroupVec(reps, rdst)
        self._gvec[mgid] = g
        return g

    def _replicate_one_group(self, X, mc, g: "_GroupVec") -> bytes:
        """The replicas of rows ``mc`` of ``X``, all to group ``g`` whose every replica has a
        result_dst: the shared rewrites and the checksum's shared part once per row, then the
        per-replica fields and checksums broadcast over (rows, replicas)."""
        q, k = len(mc), len(g.ports)
        if not k:
            return b""
        ed, es, isr, ids, sp, dp, o, n, ck = self._rw
        S = X if q == len(X) else X[mc]           # X is the batch's own copy: rewrite it in place
        S[:, es:es + 6] = S[:, ed:ed + 6]
        S[:, isr:isr + 4] = S[:, ids:ids + 4]
        S[:, sp:sp + 2] = S[:, dp:dp + 2]
        S[:, ids:ids + 4] = 0
        S[:, ck:ck + 2] = 0
        part = S[:, o:o + n].view(">u2").sum(axis=1, dtype=np.int64)
        M = np.repeat(S, k, axis=0)
        M3 = M.reshape(q, k, -1)
        M3[:, :, ed:ed + 6] = g.mac
        M3[:, :, ids:ids + 4] = g.ip
        M3[:, :, dp:dp + 2] = g.dport
        c = part[:, None] + g.dsum
        c = (c & 0xFFFF) + (c >> 16)
        c = (c & 0xFFFF) + (c >> 16)
        M3[:, :, ck:ck + 2] = (~c & 0xFFFF).astype(">u2").view(np.uint8).reshape(q, k, 2)
        return M.tobytes()

    def _replicate_groups(self, X, mc, gs: list, counts: list[int]) -> bytes:
        """The replicas of rows ``mc`` of ``X``, row i to group ``gs[i]`` (``counts[i]`` replicas);
        a replica whose rid has no result_dst keeps the packet's addresses."""
        if not sum(counts):
            return b""
        ed, es, isr, ids, sp, dp, _o, _n, _ck = self._rw
        M = X[np.repeat(mc, counts)]
        w = np.concatenate([g.has for g in gs]).nonzero()[0]
        if len(w):
            sub = M[w]
            sub[:, es:es + 6] = sub[:, ed:ed + 6]
            sub[:, isr:isr + 4] = sub[:, ids:ids + 4]
            sub[:, sp:sp + 2] = sub[:, dp:dp + 2]
            sub[:, ed:ed + 6] = np.concatenate([g.mac for g in gs])[w]
            sub[:, ids:ids + 4] = np.concatenate([g.ip for g in gs])[w]
            sub[:, dp:dp + 2] = np.concatenate([g.dport for g in gs])[w]
            M[w] = sub
        self._checksums(M)
        return M.tobytes()

    def _checksums(self, X, rows=None) -> None:
        """Recompute the IPv4 header checksum of every row of the (k, L) byte array ``X`` (or of ``rows``)."""
        o, n, c = self._ip_off, self.layout.ipv4_len, self._ck_off
        H = X[:, o:o + n] if rows is None else X[rows, o:o + n]
        H = np.ascontiguousarray(H)
        H[:, c - o:c - o + 2] = 0
        s = H.view(">u2").sum(axis=1, dtype=np.uint32)
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        ck = (~s & 0xFFFF).astype(">u2").view(np.uint8).reshape(-1, 2)
        if rows is None:
            X[:, c:c + 2] = ck
        else:
            X[rows, c:c + 2] = ck

    def _emit(self, frame, port: int, u: tuple, action: int, exp_out: int, payload: bytes | None, mgid: int,
              data: int = 1, nxt_out: int = 0):
        """The result frames of one packet: msg_type, exponent, values set, UDP checksum 0, IPv4 checksum fixed.

        OmniReduce results also carry flags = 1 and the slot's next offset; a
        header-only packet that returns values grows by the data header.
        """
        L = self.layout
        pack = L.struct.pack
        vals = list(u)
        self._set_msg(vals, self._msg_result)
        vals[self._i_exp] = exp_out
        vals[self._i_udp_ck] = 0
        ck = self._i_ip_ck
        vals[ck] = 0
        if self._omni:
            self._set_flags(vals, 1)
            vals[self._i_next] = nxt_out
            if not data and payload is not None:
                grow = self._data_bytes
                vals[self._i_total_len] = (vals[self._i_total_len] + grow) & 0xFFFF
                vals[self._i_udp_len] = (vals[self._i_udp_len] + grow) & 0xFFFF
                body = payload + bytes(frame[L.fixed_len:])
            elif payload is None:
                body = bytes(frame[L.fixed_len:])
            else:
                body = bytes(frame[L.fixed_len:L.values_offset]) + payload + bytes(frame[L.frame_len:])
        elif payload is None:
            body = bytes(frame[L.fixed_len:])
        else:
            body = bytes(frame[L.fixed_len:L.values_offset]) + payload + bytes(frame[L.frame_len:])
        if action == ops.OUT_UNICAST:
            vals[self._i_eth_dst], vals[self._i_eth_src] = u[self._i_eth_src], u[self._i_eth_dst]
            vals[self._i_ip_dst], vals[self._i_ip_src] = u[self._i_ip_src], u[self._i_ip_dst]
            vals[self._i_dport], vals[self._i_sport] = u[self._i_sport], u[self._i_dport]
            vals[ck] = self._checksum(pack(*vals))
            return [(port, pack(*vals) + body)]
        out = []
        rdst = self._rdst
        plain = None
        mv = None
        partial = 0
        i_ip_dst = self._i_ip_dst
        for eport, rid in self.groups.get(mgid, ()):
            r = rdst.get(rid) if rid else None
            if r is None:
                if plain is None:
                    p = list(vals)
                    p[ck] = self._checksum(pack(*p))
                    plain = pack(*p) + body
                out.append((eport, plain))
                continue
            if mv is None:
                # fields every rewritten replica shares; the checksum is finished per destination address
                mv = list(vals)
                mv[self._i_eth_src] = u[self._i_eth_dst]
                mv[self._i_ip_src] = u[self._i_ip_dst]
                mv[self._i_sport] = u[self._i_dport]
                mv[i_ip_dst] = 0
                partial = sum(self._ck.unpack_from(pack(*mv), self._ip_off))
            mv[self._i_eth_dst] = r[0]
            mv[i_ip_dst] = r[1]
            mv[self._i_dport] = r[2]
            c = partial + (r[1] >> 16) + (r[1] & 0xFFFF)
            c = (c & 0xFFFF) + (c >> 16)
            c = (c & 0xFFFF) + (c >> 16)
            mv[ck] = ~c & 0xFFFF
            out.append((eport, pack(*mv) + body))
            mv[ck] = 0
        return out

    def _checksum(self, head: bytes) -> int:
        """IPv4 header checksum of a packed header whose checksum field is zero."""
        c = sum(self._ck.unpack_from(head, self._ip_off))
        c = (c & 0xFFFF) + (c >> 16)
        c = (c & 0xFFFF) + (c >> 16)
        return ~c & 0xFFFF


class _GroupVec:
    """One multicast group as arrays: replica ports, and per replica whether its rid has a
    result_dst and that destination's MAC, IPv4 address and UDP port as big-endian bytes
    (zeros where it has none) plus the address's two 16-bit words summed (for checksums)."""

    __slots__ = ("reps", "rdst", "ports", "has", "all_rewritten", "mac", "ip", "dport", "dsum")

    def __init__(self, reps, rdst):
        self.reps, self.rdst = reps, rdst
        self.ports = [p for p, _r in reps]
        dsts = [rdst.get(rid) if rid else None for _p, rid in reps]
        self.has = np.array([d is not None for d in dsts], dtype=bool)
        self.all_rewritten = bool(self.has.all())
        k = len(dsts)
        self.mac = np.frombuffer(b"".join(d[0] if d else bytes(6) for d in dsts), np.uint8).reshape(k, 6)
        ips = np.array([d[1] if d else 0 for d in dsts], dtype=np.int64)
        self.ip = ips.astype(">u4").view(np.uint8).reshape(k, 4)
        self.dport = np.array([d[2] if d else 0 for d in dsts], dtype=">u2").view(np.uint8).reshape(k, 2)
        self.dsum = (ips >> 16) + (ips & 0xFFFF)


# -- job setup helper ------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerAddr:
    port: int          # switch port the worker is attached to
    mac: int
    ip: int
    udp_port: int


def job_config(plan: Plan | Mapping[str, Any], job: int, workers: list[WorkerAddr], *, slot_base: int = 0,
               slot_count: int | None = None, mgid: int = 1, rid_base: int = 1) -> dict[str, Any]:
    """Control-plane config (for :meth:`SwitchModel.load_config`) of one job.

    Worker i gets bit i % 32 of word i // 32; the job's results are multicast
    to group ``mgid`` whose replica for worker i has rid ``rid_base + i``,
    which ``result_dst`` maps to the worker's addresses.
    """
    data = plan.data if hasattr(plan, "data") else plan
    p = data["params"]
    count = p["slots"] - slot_base if slot_count is None else slot_count
    word_bits = p["bitmap_word_bits"]
    tables: dict[str, list] = {"workers": [], "result_dst": []}
    reps = []
    for i, w in enumerate(workers):
        tables["workers"].append({
            "match": {"job": job, "ingress_port": w.port, "src_addr": w.ip, "src_port": w.udp_port},
            "action": "set_worker",
            "params": {"worker_id": i, "word": i // word_bits, "mask": 1 << (i % word_bits),
                       "num_workers": len(workers), "slot_base": slot_base, "slot_count": count, "mgid": mgid}})
        tables["result_dst"].append({"match": {"rid": rid_base + i}, "action": "set_result_dst",
                                     "params": {"dst_mac": w.mac, "dst_ip": w.ip, "dst_port": w.udp_port}})
        reps.append([w.port, rid_base + i])
    return {"tables": tables, "groups": {str(mgid): reps}}
