"""A P4Runtime server for the software data plane, over real gRPC.

It serves one :class:`p4gen.switch.model.SwitchModel` (one Plan, one device):

* ``StreamChannel``: arbitration; the stream with the highest election id
  is the primary and every stream is told who is.  Packet-out and other
  stream messages are answered with a StreamError (UNIMPLEMENTED).
* ``SetForwardingPipelineConfig``: only the plan's program is accepted
  (the P4Info must match the plan's, by ID and shape); committing it
  clears tables, groups, counters and registers.  ``Get...`` returns it.
* ``Write``: TableEntry (the plan's non-const tables), multicast groups,
  CounterEntry (reset to zero), RegisterEntry (one index or the whole
  array).  Only the primary may write (PERMISSION_DENIED otherwise).  A
  failed batch is a gRPC UNKNOWN status whose details hold one
  ``p4.v1.Error`` per update, as P4Runtime prescribes.
* ``Read``: the same entities, with wildcards.

Everything else is UNIMPLEMENTED, never a silent success.

Every model access holds ``lock``.  A data plane that runs the same model
in its own thread passes its lock (``serve(model, addr, lock=lock)``) and
holds it around ``model.process``.  Standalone:
``python -m p4gen.switch.p4rt_server --plan DIR --addr 127.0.0.1:9559``.
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from ..controller import codec
from ..controller.errors import STATUS_DETAILS_KEY
from ..controller.pipeline import p4info_diff
from ..emit.p4info import build_p4info
from ..errors import P4genError
from .model import ModelError, SwitchModel

API_VERSION = "1.4.1"
_END = object()
_UPDATE = p4runtime_pb2.Update
_SET = p4runtime_pb2.SetForwardingPipelineConfigRequest
_GET = p4runtime_pb2.GetForwardingPipelineConfigRequest


class ServerError(P4genError):
    """The server cannot start (address in use, bad plan)."""


class _Fail(Exception):
    """One request or update fails with a google.rpc code and a message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class _RpcStatus(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple


_GRPC_CODE = {c.value[0]: c for c in grpc.StatusCode}


class _Stream:
    def __init__(self) -> None:
        self.out: queue.Queue = queue.Queue()
        self.election_id: int | None = None


def _eid(msg) -> int:
    return (msg.high << 64) | msg.low


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service of one SwitchModel (device ``device_id``)."""

    def __init__(self, model: SwitchModel, lock: threading.Lock | threading.RLock | None = None,
                 device_id: int = 0, pipeline_set: bool = False):
        self.model = model
        self.plan = model.plan
        self.lock = lock if lock is not None else threading.RLock()
        self.device_id = device_id
        self.p4info = build_p4info(self.plan)
        d = self.plan.data
        self._tables = {t["id"]: t for t in d["tables"]}
        self._actions = {a["id"]: a for a in d["actions"]}
        self._counters = {c["id"]: c for c in d["counters"]}
        self._registers = {r["id"]: r for r in d["registers"]}
        self._action_ids = {a["name"]: a["id"] for a in d["actions"]}
        self._config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self._saved: p4runtime_pb2.ForwardingPipelineConfig | None = None
        if pipeline_set:
            self._config = p4runtime_pb2.ForwardingPipelineConfig()
            self._config.p4info.CopyFrom(self.p4info)
        self._arb_lock = threading.Lock()
        self._streams: set[_Stream] = set()
        self._primary: _Stream | None = None
        self._readers: set[threading.Thread] = set()

    # ================================================================ arbitration
    def StreamChannel(self, request_iterator, context):
        st = _Stream()
        context.add_callback(lambda: st.out.put(_END))

        def reader() -> None:
            try:
                for req in request_iterator:
                    kind = req.WhichOneof("update")
                    if kind == "arbitration":
                        err = self._arbitrate(st, req.arbitration)
                        if err is not None:
                            st.out.put(err)
                            return
                    else:
                        resp = p4runtime_pb2.StreamMessageResponse()
                        resp.error.canonical_code = code_pb2.UNIMPLEMENTED
                        resp.error.message = f"stream message {kind!r} is not supported by the software switch"
                        if kind == "packet":
                            resp.error.packet_out.packet_out.CopyFrom(req.packet)
                        st.out.put(resp)
            except Exception:  # noqa: BLE001 - the stream ended (cancelled or the server stops)
                pass
            finally:
                st.out.put(_END)
                with self._arb_lock:
                    self._readers.discard(threading.current_thread())

        t = threading.Thread(target=reader, name="p4rt-stream-reader", daemon=True)
        with self._arb_lock:
            self._readers.add(t)
        t.start()
        try:
            while True:
                item = st.out.get()
                if item is _END:
                    return
                if isinstance(item, _Fail):
                    context.abort(_GRPC_CODE[item.code], item.message)
                yield item
        finally:
            self._leave(st)

    def _arbitrate(self, st: _Stream, arb: p4runtime_pb2.MasterArbitrationUpdate) -> _Fail | None:
        if arb.device_id != self.device_id:
            return _Fail(code_pb2.NOT_FOUND, f"device id {arb.device_id} is not served here (this is device "
                                             f"{self.device_id})")
        if arb.HasField("role") and (arb.role.name or arb.role.id):
            return _Fail(code_pb2.UNIMPLEMENTED, "roles are not supported; use the default role")
        eid = _eid(arb.election_id)
        with self._arb_lock:
            if any(o is not st and o.election_id == eid for o in self._streams):
                return _Fail(code_pb2.INVALID_ARGUMENT, f"election id {eid} is in use by another controller")
            st.election_id = eid
            self._streams.add(st)
            self._elect_locked(force=st)
        return None

    def _leave(self, st: _Stream) -> None:
        with self._arb_lock:
            if st in self._streams:
                self._streams.discard(st)
                self._elect_locked()

    def _elect_locked(self, force: _Stream | None = None) -> None:
        """Pick the primary; tell every stream when it changes (and ``force`` in any case)."""
        new = max(self._streams, key=lambda s: s.election_id, default=None)
        changed = new is not self._primary
        self._primary = new
        for s in self._streams:
            if changed or s is force:
                resp = p4runtime_pb2.StreamMessageResponse()
                a = resp.arbitration
                a.device_id = self.device_id
                if new is not None:
                    a.election_id.high = new.election_id >> 64
                    a.election_id.low = new.election_id & ((1 << 64) - 1)
                a.status.code = code_pb2.OK if s is new else code_pb2.ALREADY_EXISTS
                a.status.message = "primary" if s is new else "backup"
                s.out.put(resp)

    def _check_writer(self, device_id: int, election_id, what: str) -> None:
        self._check_device(device_id)
        eid = _eid(election_id)
        with self._arb_lock:
            primary = self._primary.election_id if self._primary is not None else None
        if primary is None or eid != primary:
            who = f"the primary's is {primary}" if primary is not None else "no controller has arbitrated"
            raise _Fail(code_pb2.PERMISSION_DENIED, f"{what} with election id {eid} refused: {who}")

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise _Fail(code_pb2.NOT_FOUND, f"device id {device_id} is not served here (this is device "
                                            f"{self.device_id})")

    def _check_pipeline(self) -> None:
        if self._config is None:
            raise _Fail(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config has been set")

    @staticmethod
    def _abort(context, fail: _Fail) -> None:
        context.abort(_GRPC_CODE[fail.code], fail.message)

    # ================================================================ pipeline
    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_writer(request.device_id, request.election_id, "SetForwardingPipelineConfig")
            act = request.action
            if act == _SET.COMMIT:
                with self.lock:
                    if self._saved is None:
                        raise _Fail(code_pb2.FAILED_PRECONDITION, "COMMIT without a saved config (VERIFY_AND_SAVE)")
                    self._commit(self._saved, clear=True)
                    self._saved = None
                return p4runtime_pb2.SetForwardingPipelineConfigResponse()
            if act == _SET.UNSPECIFIED:
                raise _Fail(code_pb2.INVALID_ARGUMENT, "the pipeline config action is unspecified")
            diff = p4info_diff(self.p4info, request.config.p4info, strict=True, ref="the switch's program")
            if diff:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"the P4Info does not match the program this switch runs "
                                                       f"({self.p4info.pkg_info.name}): {diff}")
            with self.lock:
                if act == _SET.VERIFY_AND_SAVE:
                    self._saved = p4runtime_pb2.ForwardingPipelineConfig()
                    self._saved.CopyFrom(request.config)
                elif act in (_SET.VERIFY_AND_COMMIT, _SET.RECONCILE_AND_COMMIT):
                    self._commit(request.config, clear=act == _SET.VERIFY_AND_COMMIT)
        except _Fail as f:
            self._abort(context, f)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _commit(self, config, clear: bool) -> None:
        """Install ``config`` (lock held); a fresh commit starts from empty tables and zeroed state."""
        if clear:
            m = self.model
            for t in self.plan.data["tables"]:
                if not t["const"]:
                    for e in m.read(t["name"]):
                        m.delete(t["name"], e["match"])
            for mgid in list(m.groups):
                m.delete_group(mgid)
            m.counter_reset()
            m.register_reset()
        self._config = p4runtime_pb2.ForwardingPipelineConfig()
        self._config.CopyFrom(config)

    def GetForwardingPipelineConfig(self, request, context):
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        try:
            self._check_device(request.device_id)
            with self.lock:
                self._check_pipeline()
                cfg = self._config
                rt = request.response_type
                if rt in (_GET.ALL, _GET.P4INFO_AND_COOKIE):
                    resp.config.p4info.CopyFrom(cfg.p4info)
                if rt in (_GET.ALL, _GET.DEVICE_CONFIG_AND_COOKIE):
                    resp.config.p4_device_config = cfg.p4_device_config
                resp.config.cookie.CopyFrom(cfg.cookie)
        except _Fail as f:
            self._abort(context, f)
        return resp

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ================================================================ write
    def Write(self, request, context):
        try:
            self._check_writer(request.device_id, request.election_id, "Write")
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise _Fail(code_pb2.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported")
            if request.role:
                raise _Fail(code_pb2.UNIMPLEMENTED, "roles are not supported; use the default role")
            with self.lock:
                self._check_pipeline()
                results = []
                for up in request.updates:
                    try:
                        self._write_one(up)
                        results.append(None)
                    except _Fail as f:
                        results.append(f)
        except _Fail as f:
            self._abort(context, f)
        failed = [r for r in results if r is not None]
        if failed:
            status = status_pb2.Status(code=code_pb2.UNKNOWN,
                                       message=f"{len(failed)} of {len(results)} updates failed")
            for r in results:
                err = p4runtime_pb2.Error(canonical_code=code_pb2.OK if r is None else r.code,
                                          message="" if r is None else r.message)
                a = any_pb2.Any()
                a.Pack(err)
                status.details.append(a)
            context.abort_with_status(_RpcStatus(grpc.StatusCode.UNKNOWN, status.message,
                                                 ((STATUS_DETAILS_KEY, status.SerializeToString()),)))
        return p4runtime_pb2.WriteResponse()

    def _write_one(self, up: p4runtime_pb2.Update) -> None:
        if up.type == _UPDATE.UNSPECIFIED:
            raise _Fail(code_pb2.INVALID_ARGUMENT, "update type is unspecified")
        kind = up.entity.WhichOneof("entity")
        if kind == "table_entry":
            self._write_table(up.type, up.entity.table_entry)
        elif kind == "packet_replication_engine_entry":
            pre = up.entity.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise _Fail(code_pb2.UNIMPLEMENTED, f"{pre.WhichOneof('type')} is not supported by the software switch")
            self._write_group(up.type, pre.multicast_group_entry)
        elif kind == "counter_entry":
            self._write_counter(up.type, up.entity.counter_entry)
        elif kind == "register_entry":
            self._write_register(up.type, up.entity.register_entry)
        else:
            raise _Fail(code_pb2.UNIMPLEMENTED, f"{kind} is not supported by the software switch")

    # -- tables
    def _table(self, table_id: int) -> dict[str, Any]:
        t = self._tables.get(table_id)
        if t is None:
            raise _Fail(code_pb2.NOT_FOUND, f"unknown table id {table_id}")
        return t

    def _decode_match(self, t: dict[str, Any], te: p4runtime_pb2.TableEntry, partial: bool = False) -> dict[str, int]:
        match: dict[str, int] = {}
        for fm in te.match:
            if not 1 <= fm.field_id <= len(t["keys"]):
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {t['name']} has no match field id {fm.field_id}")
            k = t["keys"][fm.field_id - 1]
            if fm.WhichOneof("field_match_type") != "exact":
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {t['name']} key {k['name']} is an exact match")
            if k["name"] in match:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {t['name']} key {k['name']} is given twice")
            try:
                match[k["name"]] = codec.decode(fm.exact.value, k["bits"])
            except ValueError as exc:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {t['name']} key {k['name']}: {exc}") from None
        if not partial:
            missing = [k["name"] for k in t["keys"] if k["name"] not in match]
            if missing:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {t['name']} entry lacks the key {missing[0]}")
        return match

    def _decode_action(self, t: dict[str, Any], te: p4runtime_pb2.TableEntry) -> tuple[str, dict[str, int]]:
        if te.action.WhichOneof("type") != "action":
            raise _Fail(code_pb2.UNIMPLEMENTED if te.HasField("action") else code_pb2.INVALID_ARGUMENT,
                        f"table {t['name']} entry needs a direct action"
                        + (" (action profiles are not supported)" if te.HasField("action") else ""))
        act = te.action.action
        a = self._actions.get(act.action_id)
        if a is None or a["name"] not in t["actions"]:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"action id {act.action_id} is not an action of table {t['name']}")
        params: dict[str, int] = {}
        for p in act.params:
            if not 1 <= p.param_id <= len(a["params"]):
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"action {a['name']} has no parameter id {p.param_id}")
            spec = a["params"][p.param_id - 1]
            try:
                params[spec["name"]] = codec.decode(p.value, spec["bits"])
            except ValueError as exc:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"action {a['name']} parameter {spec['name']}: {exc}") from None
        missing = [q["name"] for q in a["params"] if q["name"] not in params]
        if missing:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"action {a['name']} lacks the parameter {missing[0]}")
        return a["name"], params

    def _write_table(self, kind: int, te: p4runtime_pb2.TableEntry) -> None:
        t = self._table(te.table_id)
        name = t["name"]
        if t["const"]:
            raise _Fail(code_pb2.PERMISSION_DENIED, f"table {name} is const")
        if te.is_default_action:
            raise _Fail(code_pb2.PERMISSION_DENIED, f"the default action of table {name} is const")
        if te.priority:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"table {name} is exact-match; priority must be 0")
        for extra in ("meter_config", "counter_data", "meter_counter_data"):
            if te.HasField(extra):
                raise _Fail(code_pb2.UNIMPLEMENTED, f"{extra} is not supported by the software switch")
        if te.idle_timeout_ns:
            raise _Fail(code_pb2.UNIMPLEMENTED, "idle timeouts are not supported by the software switch")
        match = self._decode_match(t, te)
        entries = self.model.read(name)
        exists = any(e["match"] == match for e in entries)
        try:
            if kind == _UPDATE.INSERT:
                if exists:
                    raise _Fail(code_pb2.ALREADY_EXISTS, f"table {name} already holds an entry for {match}")
                if len(entries) >= int(t["size"]):
                    raise _Fail(code_pb2.RESOURCE_EXHAUSTED, f"table {name} is full ({t['size']} entries)")
                action, params = self._decode_action(t, te)
                self.model.insert(name, match, action, params)
            elif kind == _UPDATE.MODIFY:
                if not exists:
                    raise _Fail(code_pb2.NOT_FOUND, f"table {name} holds no entry for {match}")
                action, params = self._decode_action(t, te)
                self.model.modify(name, match, action, params)
            else:
                if not exists:
                    raise _Fail(code_pb2.NOT_FOUND, f"table {name} holds no entry for {match}")
                self.model.delete(name, match)
        except ModelError as exc:
            raise _Fail(code_pb2.INVALID_ARGUMENT, str(exc)) from None

    # -- multicast groups
    def _write_group(self, kind: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
        mgid = g.multicast_group_id
        if mgid == 0:
            raise _Fail(code_pb2.INVALID_ARGUMENT, "multicast group id 0 is reserved")
        exists = mgid in self.model.groups
        if kind == _UPDATE.INSERT and exists:
            raise _Fail(code_pb2.ALREADY_EXISTS, f"multicast group {mgid} already exists")
        if kind != _UPDATE.INSERT and not exists:
            raise _Fail(code_pb2.NOT_FOUND, f"multicast group {mgid} does not exist")
        if kind == _UPDATE.DELETE:
            self.model.delete_group(mgid)
            return
        reps = []
        for r in g.replicas:
            port = int.from_bytes(r.port, "big") if r.WhichOneof("port_kind") == "port" else r.egress_port
            if (port, r.instance) in reps:
                raise _Fail(code_pb2.INVALID_ARGUMENT, f"multicast group {mgid} repeats replica "
                                                       f"(port {port}, instance {r.instance})")
            reps.append((port, r.instance))
        try:
            self.model.set_group(mgid, reps)
        except ModelError as exc:
            raise _Fail(code_pb2.INVALID_ARGUMENT, str(exc)) from None

    # -- counters and registers
    def _write_counter(self, kind: int, c: p4runtime_pb2.CounterEntry) -> None:
        cnt = self._counters.get(c.counter_id)
        if cnt is None:
            raise _Fail(code_pb2.NOT_FOUND, f"unknown counter id {c.counter_id}")
        if kind != _UPDATE.MODIFY:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"counter {cnt['name']} can only be modified")
        if c.HasField("index") or c.data.packet_count or c.data.byte_count:
            raise _Fail(code_pb2.UNIMPLEMENTED, f"the software switch only resets counter {cnt['name']} as a whole "
                                                "(index unset, zero data)")
        self.model.counter_reset()

    def _register(self, register_id: int) -> dict[str, Any]:
        r = self._registers.get(register_id)
        if r is None:
            raise _Fail(code_pb2.NOT_FOUND, f"unknown register id {register_id}")
        return r

    def _write_register(self, kind: int, e: p4runtime_pb2.RegisterEntry) -> None:
        r = self._register(e.register_id)
        name = r["name"]
        if kind != _UPDATE.MODIFY:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"register {name} can only be modified")
        if e.data.WhichOneof("data") != "bitstring":
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"register {name} holds bit<{r['entry_bits']}> bitstrings")
        try:
            value = codec.decode(e.data.bitstring, r["entry_bits"])
        except ValueError as exc:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"register {name}: {exc}") from None
        mask = (1 << r["lane_bits"]) - 1
        lanes = [(value >> (i * r["lane_bits"])) & mask for i in range(r["lanes"])]
        if not e.HasField("index"):
            if value == 0:
                self.model.register_reset(name)
            else:
                for i in range(r["entries"]):
                    self.model.register_write(name, i, lanes)
            return
        if not 0 <= e.index.index < r["entries"]:
            raise _Fail(code_pb2.INVALID_ARGUMENT, f"register {name} index {e.index.index} outside "
                                                   f"0..{r['entries'] - 1}")
        self.model.register_write(name, e.index.index, lanes)

    # ================================================================ read
    def Read(self, request, context):
        resp = p4runtime_pb2.ReadResponse()
        try:
            self._check_device(request.device_id)
            with self.lock:
                self._check_pipeline()
                for ent in request.entities:
                    resp.entities.extend(self._read_one(ent))
        except _Fail as f:
            self._abort(context, f)
        yield resp

    def _read_one(self, ent: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        kind = ent.WhichOneof("entity")
        if kind == "table_entry":
            return self._read_tables(ent.table_entry)
        if kind == "packet_replication_engine_entry":
            pre = ent.packet_replication_engine_entry
            if pre.WhichOneof("type") != "multicast_group_entry":
                raise _Fail(code_pb2.UNIMPLEMENTED, f"{pre.WhichOneof('type')} is not supported by the software switch")
            want = pre.multicast_group_entry.multicast_group_id
            out = []
            for mgid in sorted(self.model.groups):
                if want in (0, mgid):
                    e = p4runtime_pb2.Entity()
                    g = e.packet_replication_engine_entry.multicast_group_entry
                    g.multicast_group_id = mgid
                    for port, rid in self.model.groups[mgid]:
                        g.replicas.add(egress_port=port, instance=rid)
                    out.append(e)
            return out
        if kind == "counter_entry":
            return self._read_counters(ent.counter_entry)
        if kind == "register_entry":
            return self._read_registers(ent.register_entry)
        raise _Fail(code_pb2.UNIMPLEMENTED, f"{kind} is not supported by the software switch")

    def _entry(self, t: dict[str, Any], match: dict[str, int], action: str, params: dict[str, int],
               default: bool = False) -> p4runtime_pb2.Entity:
        e = p4runtime_pb2.Entity()
        te = e.table_entry
        te.table_id = t["id"]
        if default:
            te.is_default_action = True
        for fid, k in enumerate(t["keys"], start=1):
            if k["name"] in match:
                te.match.add(field_id=fid).exact.value = codec.encode(int(match[k["name"]]), k["bits"])
        a = self._actions[self._action_ids[action]]
        te.action.action.action_id = a["id"]
        for pid, q in enumerate(a["params"], start=1):
            te.action.action.params.add(param_id=pid, value=codec.encode(int(params[q["name"]]), q["bits"]))
        if t["const"]:
            te.is_const = True
        return e

    def _read_tables(self, te: p4runtime_pb2.TableEntry) -> list[p4runtime_pb2.Entity]:
        tables = [self._table(te.table_id)] if te.table_id else list(self._tables.values())
        out = []
        for t in tables:
            if te.is_default_action:
                out.append(self._entry(t, {}, t["default_action"], dict(t.get("default_args", {})), default=True))
                continue
            want = self._decode_match(t, te, partial=True) if te.table_id else {}
            if t["const"]:
                rows = [(e["match"], e["action"], e.get("args", {})) for e in t.get("entries", [])]
            else:
                rows = [(e["match"], e["action"], e["params"]) for e in self.model.read(t["name"])]
            for match, action, params in rows:
                if all(match.get(k) == v for k, v in want.items()):
                    out.append(self._entry(t, match, action, params))
        return out

    def _read_counters(self, c: p4runtime_pb2.CounterEntry) -> list[p4runtime_pb2.Entity]:
        if c.counter_id and c.counter_id not in self._counters:
            raise _Fail(code_pb2.NOT_FOUND, f"unknown counter id {c.counter_id}")
        out = []
        for cid, cnt in sorted(self._counters.items()):
            if c.counter_id not in (0, cid):
                continue
            values = self.model.counter_read(cnt["name"])
            for i, stat in enumerate(cnt["indices"]):
                if c.HasField("index") and c.index.index != i:
                    continue
                e = p4runtime_pb2.Entity()
                ce = e.counter_entry
                ce.counter_id = cid
                ce.index.index = i
                ce.data.packet_count, ce.data.byte_count = values[stat]
                out.append(e)
        return out

    def _read_registers(self, r: p4runtime_pb2.RegisterEntry) -> list[p4runtime_pb2.Entity]:
        regs = [self._register(r.register_id)] if r.register_id else list(self._registers.values())
        out = []
        for reg in regs:
            arr = self.model.register_read(reg["name"])
            rows = range(reg["entries"])
            if r.HasField("index"):
                if not 0 <= r.index.index < reg["entries"]:
                    raise _Fail(code_pb2.INVALID_ARGUMENT, f"register {reg['name']} index {r.index.index} outside "
                                                           f"0..{reg['entries'] - 1}")
                rows = [r.index.index]
            for i in rows:
                lanes = [int(x) for x in (arr[i] if arr.ndim > 1 else [arr[i]])]
                value = sum(v << (j * reg["lane_bits"]) for j, v in enumerate(lanes))
                e = p4runtime_pb2.Entity()
                e.register_entry.register_id = reg["id"]
                e.register_entry.index.index = i
                e.register_entry.data.bitstring = codec.encode(value, reg["entry_bits"])
                out.append(e)
        return out

    # ================================================================ lifecycle
    def join_readers(self, timeout: float = 5.0) -> None:
        with self._arb_lock:
            readers = list(self._readers)
        for t in readers:
            t.join(timeout)


class P4RuntimeServer:
    """A gRPC server around one SwitchModel; a context manager that always stops it."""

    def __init__(self, model: SwitchModel, addr: str = "127.0.0.1:0", lock=None, device_id: int = 0,
                 pipeline_set: bool = False, max_workers: int = 16):
        self.servicer = P4RuntimeServicer(model, lock, device_id, pipeline_set)
        self._requested = addr
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._pool: futures.ThreadPoolExecutor | None = None
        self.port: int | None = None

    @property
    def lock(self):
        return self.servicer.lock

    @property
    def addr(self) -> str:
        host = self._requested.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    def start(self) -> "P4RuntimeServer":
        self._pool = futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="p4rt-server")
        server = grpc.server(self._pool, options=[("grpc.so_reuseport", 0)])  # a busy port is an error
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, server)
        try:
            port = server.add_insecure_port(self._requested)
        except RuntimeError:
            port = 0
        if not port:
            server.stop(None)
            self._pool.shutdown(wait=True)
            raise ServerError(f"P4Runtime server cannot listen on {self._requested} (address in use or invalid)")
        server.start()
        self._server, self.port = server, port
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop serving (in-flight RPCs are cancelled after ``grace`` seconds; None: at once)."""
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
            self.servicer.join_readers()
            self._pool.shutdown(wait=True)

    def wait(self) -> None:
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> "P4RuntimeServer":
        return self if self._server is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(model: SwitchModel, addr: str = "127.0.0.1:9559", lock=None, device_id: int = 0,
          pipeline_set: bool = False) -> P4RuntimeServer:
    """Start serving ``model``; the caller stops it (or uses it as a context manager).

    A data plane that processes frames in another thread passes the lock it
    holds around ``model.process`` so control-plane writes never interleave
    with a packet.
    """
    return P4RuntimeServer(model, addr, lock, device_id, pipeline_set).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4gen.switch.p4rt_server",
                                 description="P4Runtime server for the software data plane (no packet I/O).")
    ap.add_argument("--plan", required=True, help="build directory or plan.json")
    ap.add_argument("--addr", default="127.0.0.1:9559", help="HOST:PORT to listen on (default 127.0.0.1:9559)")
    ap.add_argument("--device-id", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        server = serve(SwitchModel(args.plan), args.addr, device_id=args.device_id)
    except P4genError as exc:
        print(f"p4gen: error: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"P4Runtime server for device {args.device_id} listening on {server.addr}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
