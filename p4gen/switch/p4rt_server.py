"""A P4Runtime server for the software data plane, over real gRPC.

It serves one :class:`p4gen.switch.model.SwitchModel` (one Plan, one device):

* ``StreamChannel``: arbitration (:mod:`.p4rt_streams`).  At most
  ``max_streams`` streams are open at once; the next is refused with
  RESOURCE_EXHAUSTED, and the gRPC pool keeps ``unary_workers`` threads
  that no stream can take, so idle or slow clients never stall the unary
  RPCs.
* ``SetForwardingPipelineConfig``: only the plan's program is accepted
  (the P4Info must match the plan's, by ID and shape, and a device config,
  if any, must be BMv2 JSON); committing it clears tables, groups, counters
  and registers.  ``Get...`` returns it.
* ``Write``: TableEntry (the plan's non-const tables), multicast groups,
  CounterEntry (reset to zero), RegisterEntry (one index or the whole
  array), each checked by :mod:`.p4rt_entities`.  Only the primary may
  write (PERMISSION_DENIED otherwise).  A failed batch is a gRPC UNKNOWN
  status whose details hold one ``p4.v1.Error`` per *failed* update (at
  most :data:`MAX_DETAILS`, messages cut to :data:`MAX_DETAIL_CHARS`), with
  ``space`` :data:`INDEX_SPACE` and ``code`` the update's index, so the
  trailer stays far below gRPC's metadata limit however large the batch.
* ``Read``: the same entities, with wildcards, answered in pieces: the
  model's state is copied under the lock one register array (or table) at a
  time, and the entities -- at most :data:`READ_PIECE` per ReadResponse --
  are built after the lock is released; the messages of a large register
  array are built in a helper process (:class:`ReadEncoder`: protobuf is pure
  Python here, and building 100,000 entities takes seconds of the
  interpreter lock the packet loop needs).  So a Read of any size leaves the
  packet path running.  A Read that selects more than
  :data:`MAX_READ_ENTITIES` entities is refused (RESOURCE_EXHAUSTED).

Read, Write and the pipeline RPCs run at most :data:`MAX_ACTIVE` at once; the
next waits for its turn at most until its deadline (and :data:`ADMIT_WAIT`
seconds), then gets RESOURCE_EXHAUSTED.  A request whose deadline has passed
when its turn comes is dropped with DEADLINE_EXCEEDED, doing nothing, and a
Read or Write stops between pieces or updates once its deadline passes or
its client has gone, so a backlog of expired requests costs nothing.  A Write
takes the lock for one update at a time (its atomicity is CONTINUE_ON_ERROR).

Enum values outside their proto enum, unknown IDs, values wider than their
field and indices outside their array are INVALID_ARGUMENT.  Everything
else the software switch lacks is UNIMPLEMENTED, never a silent success.

Every model access holds ``lock``, each for a bounded time.  A data plane that
runs the same model in its own thread passes its lock
(``serve(model, addr, lock=lock)``) and holds it around ``model.process``.  Standalone:
``python -m p4gen.switch.p4rt_server --plan DIR --addr 127.0.0.1:9559``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from ..emit.p4info import build_p4info
from ..errors import P4genError
from ..p4runtime.compare import p4info_diff
from ..p4runtime.status import STATUS_DETAILS_KEY
from .model import SwitchModel
from .p4rt_common import (API_VERSION, ATOMICITIES, GET, GET_TYPES, GRPC_CODE, INDEX_SPACE, SET, SET_ACTIONS, WRITE,
                          Fail, RpcStatus, ServerError, check_enum, parse_update, split_write)
from .p4rt_entities import EntityStore
from .p4rt_streams import Arbiter
from .turns import TurnLock

__all__ = ["P4RuntimeServer", "P4RuntimeServicer", "ServerError", "serve", "MAX_DETAILS", "INDEX_SPACE"]

MAX_DETAILS = 16           # failed updates listed in a Write's error details
MAX_DETAIL_CHARS = 200     # characters of each listed message
MAX_STREAMS = 8            # StreamChannels open at once
UNARY_WORKERS = 8          # pool threads beyond MAX_STREAMS, for the unary RPCs
MAX_ACTIVE = 4             # Read, Write and pipeline RPCs executing at once
ADMIT_WAIT = 2.0           # s a request waits for its turn at most (less if its deadline is nearer)
READ_PIECE = 1000          # entities per ReadResponse
MAX_READ_ENTITIES = 1 << 18   # entities one Read may select
STOP_WAIT = 5.0            # s the server waits for its calls, streams and helper to end when it stops
PR_SET_PDEATHSIG = 1       # <linux/prctl.h>


class Gate:
    """At most ``active`` requests execute at once; none whose deadline has passed."""

    def __init__(self, active: int = MAX_ACTIVE, wait: float = ADMIT_WAIT):
        self.active, self.wait = active, wait
        self._sem = threading.BoundedSemaphore(active)

    @staticmethod
    def expired(context) -> bool:
        left = context.time_remaining()
        return (left is not None and left <= 0) or not context.is_active()

    def check(self, context, what: str) -> None:
        """DEADLINE_EXCEEDED once ``context``'s deadline has passed or its client has gone."""
        if self.expired(context):
            raise Fail(code_pb2.DEADLINE_EXCEEDED, f"{what}: the deadline passed (or the client went away); "
                                                   f"the rest was not done")

    @contextlib.contextmanager
    def admit(self, context, what: str):
        if self.expired(context):
            raise Fail(code_pb2.DEADLINE_EXCEEDED, f"{what} dropped unexecuted: its deadline had passed")
        left = context.time_remaining()
        wait = self.wait if left is None else max(0.0, min(self.wait, left))
        if not self._sem.acquire(timeout=wait):
            if self.expired(context):
                raise Fail(code_pb2.DEADLINE_EXCEEDED, f"{what} dropped unexecuted: its deadline passed while it "
                                                       f"waited for its turn")
            raise Fail(code_pb2.RESOURCE_EXHAUSTED, f"{what}: this switch executes at most {self.active} requests "
                                                    f"at once and all were busy for {wait:.3g} s; retry")
        try:
            yield
        finally:
            self._sem.release()


def _device_config_ok(data: bytes) -> bool:
    """Empty (the software switch needs none) or BMv2 JSON (what p4gen build --compile writes)."""
    if not data:
        return True
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("pipelines"), list)


def _below_the_packet_path(parent: int | None = None) -> None:
    """The helper's CPU priority: the lowest (nice 19), so that on a busy machine building a large answer
    waits for the packet loop, not the other way round.  With ``parent`` (the server's pid), the helper
    also ends when the server's process does, however it ends (``PR_SET_PDEATHSIG``: a SIGKILLed server
    left its helper running)."""
    import os

    try:
        os.nice(19 - os.nice(0))
    except OSError:
        pass
    if parent is not None:
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:          # the server ended before the line above
            os._exit(0)


class ReadEncoder:
    """Runs :func:`p4gen.switch.p4rt_entities.register_responses` for large Reads in a helper process
    (started on first use, ``spawn``: a fork of a process that runs gRPC is unsafe, at a lower CPU
    priority), so that building the messages takes neither the lock nor the interpreter lock nor the CPU
    the packet loop needs.  Where the helper cannot start or dies, the work runs in this process."""

    def __init__(self) -> None:
        self._pool = None
        self._broken = False
        self._lock = threading.Lock()

    def _get(self):
        with self._lock:
            if self._pool is None and not self._broken:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                try:
                    self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                                     initializer=_below_the_packet_path, initargs=(os.getpid(),))
                except (OSError, ValueError):
                    self._broken = True
            return self._pool

    def start(self) -> None:
        """Start the helper now (a fresh interpreter importing numpy and protobuf takes a second of CPU),
        so that it is not paid for during the first large Read, beside the packet loop."""
        pool = self._get()
        if pool is not None:
            pool.submit(_below_the_packet_path)

    def __call__(self, fn, *args):
        from concurrent.futures.process import BrokenProcessPool

        pool = self._get()
        if pool is not None:
            try:
                return pool.submit(fn, *args).result()
            except (BrokenProcessPool, OSError, RuntimeError):
                with self._lock:
                    self._broken = True
        return fn(*args)

    def close(self, wait: float = STOP_WAIT) -> None:
        """Stop the helper: at once if it is idle, after ``wait`` seconds (killed) if it is not."""
        with self._lock:
            pool, self._pool, self._broken = self._pool, None, True
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + wait
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1.0)


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service of one SwitchModel (device ``device_id``)."""

    def __init__(self, model: SwitchModel, lock: threading.Lock | threading.RLock | None = None,
                 device_id: int = 0, pipeline_set: bool = False, max_streams: int = MAX_STREAMS,
                 arbitration_wait: float = 30.0):
        self.model = model
        self.plan = model.plan
        self.lock = lock if lock is not None else TurnLock()
        self.device_id = device_id
        self.p4info = build_p4info(self.plan)
        self.store = EntityStore(model)
        self.gate = Gate()
        self.encoder = ReadEncoder()
        self.arbiter = Arbiter(device_id, max_streams, arbitration_wait)
        self._config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self._saved: p4runtime_pb2.ForwardingPipelineConfig | None = None
        if pipeline_set:
            self._config = p4runtime_pb2.ForwardingPipelineConfig()
            self._config.p4info.CopyFrom(self.p4info)

    @staticmethod
    def _abort(context, fail: Fail) -> None:
        context.abort(GRPC_CODE[fail.code], fail.message)

    def _check_pipeline(self) -> None:
        if self._config is None:
            raise Fail(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config has been set")

    # ================================================================ arbitration
    def StreamChannel(self, request_iterator, context):
        return self.arbiter.stream_channel(request_iterator, context)

    # ================================================================ pipeline
    def SetForwardingPipelineConfig(self, request, context):
        try:
            with self.gate.admit(context, "SetForwardingPipelineConfig"):
                self._set_pipeline(request)
        except Fail as f:
            self._abort(context, f)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_pipeline(self, request) -> None:
        self.arbiter.check_writer(request.device_id, request.election_id, "SetForwardingPipelineConfig")
        act = request.action
        if act == SET.UNSPECIFIED:
            raise Fail(code_pb2.INVALID_ARGUMENT, "the pipeline config action is unspecified")
        check_enum(act, SET_ACTIONS, "pipeline config action", SET.Action)
        if act == SET.COMMIT:
            with self.lock:
                if self._saved is None:
                    raise Fail(code_pb2.FAILED_PRECONDITION, "COMMIT without a saved config (VERIFY_AND_SAVE)")
                self._commit(self._saved, clear=True)
                self._saved = None
            return
        diff = p4info_diff(self.p4info, request.config.p4info, strict=True, ref="the switch's program")
        if diff:
            raise Fail(code_pb2.INVALID_ARGUMENT, f"the P4Info does not match the program this switch runs "
                                                  f"({self.p4info.pkg_info.name}): {diff}")
        if not _device_config_ok(request.config.p4_device_config):
            raise Fail(code_pb2.INVALID_ARGUMENT, f"the device config ({len(request.config.p4_device_config)} "
                                                  f"bytes) is neither empty nor BMv2 JSON")
        with self.lock:
            if act == SET.VERIFY_AND_SAVE:
                self._saved = p4runtime_pb2.ForwardingPipelineConfig()
                self._saved.CopyFrom(request.config)
            elif act in (SET.VERIFY_AND_COMMIT, SET.RECONCILE_AND_COMMIT):
                self._commit(request.config, clear=act == SET.VERIFY_AND_COMMIT)

    def _commit(self, config, clear: bool) -> None:
        """Install ``config`` (lock held); a fresh commit starts from empty tables and zeroed state."""
        if clear:
            self.store.clear(self.lock)
        self._config = p4runtime_pb2.ForwardingPipelineConfig()
        self._config.CopyFrom(config)

    def GetForwardingPipelineConfig(self, request, context):
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        try:
            self.arbiter.check_device(request.device_id)
            rt = request.response_type
            check_enum(rt, GET_TYPES, "response type", GET.ResponseType)
            with self.lock:
                self._check_pipeline()
                cfg = self._config
                if rt in (GET.ALL, GET.P4INFO_AND_COOKIE):
                    resp.config.p4info.CopyFrom(cfg.p4info)
                if rt in (GET.ALL, GET.DEVICE_CONFIG_AND_COOKIE):
                    resp.config.p4_device_config = cfg.p4_device_config
                resp.config.cookie.CopyFrom(cfg.cookie)
        except Fail as f:
            self._abort(context, f)
        return resp

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ================================================================ write
    def Write(self, request, context):
        results: list[Fail | None] = []
        try:
            # the updates stay bytes until each is applied (split_write: what a large Write costs the collector)
            request, updates = split_write(request if isinstance(request, bytes) else request.SerializeToString())
            self.arbiter.check_writer(request.device_id, request.election_id, "Write")
            check_enum(request.atomicity, ATOMICITIES, "atomicity", WRITE.Atomicity)
            if request.atomicity != WRITE.CONTINUE_ON_ERROR:
                raise Fail(code_pb2.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported")
            if request.role:
                raise Fail(code_pb2.UNIMPLEMENTED, "roles are not supported; use the default role")
            with self.gate.admit(context, "Write"):
                with self.lock:
                    self._check_pipeline()
                # one update at a time (the lock serves waiting threads in turn: the packet path runs between
                # two updates); the batch path's arrays of a changed table are rebuilt once, at the end
                with self.model.state.deferred(self.lock):
                    for k, raw in enumerate(updates):
                        if k % 64 == 0:
                            self.gate.check(context, f"Write of {len(updates)} updates, after {k}")
                        try:
                            up = parse_update(raw)
                            with self.lock:
                                self.store.write(up)
                            results.append(None)
                        except Fail as f:
                            results.append(f)
        except Fail as f:
            self._abort(context, f)
        failed = [(i, r) for i, r in enumerate(results) if r is not None]
        if failed:
            context.abort_with_status(write_status(failed, len(results)))
        return p4runtime_pb2.WriteResponse()

    # ================================================================ read
    def Read(self, request, context):
        sent = 0
        try:
            self.arbiter.check_device(request.device_id)
            with self.gate.admit(context, "Read"):
                with self.lock:
                    self._check_pipeline()
                total = sum(self.store.read_count(ent) for ent in request.entities)   # every entity checked first
                if total > MAX_READ_ENTITIES:
                    raise Fail(code_pb2.RESOURCE_EXHAUSTED,
                               f"this Read selects {total} entities; a Read may select at most {MAX_READ_ENTITIES} "
                               f"(read the registers one by one, or by index)")
                for ent in request.entities:
                    for resp in self.store.read(ent, self.lock, READ_PIECE, self.encoder):
                        self.gate.check(context, f"Read of {total} entities, after {sent} responses")
                        sent += 1
                        yield resp
        except Fail as f:
            self._abort(context, f)
        if not sent:
            yield b""                                    # an empty ReadResponse

    def own_handlers(self) -> grpc.GenericRpcHandler:
        """Registered before the generated handlers, so these are the ones used: Read with its answers
        passed through as the bytes :meth:`Read` yields (already serialized, maybe by the helper
        process), Write with its request as bytes (:func:`.p4rt_common.split_write`), and StreamChannel with its requests passed in as bytes, which the stream parses
        itself (a message that is not a StreamMessageRequest ends that stream with INVALID_ARGUMENT;
        gRPC's own failure to parse one left the call behind, and the server then never stopped)."""
        return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", {
            "Read": grpc.unary_stream_rpc_method_handler(
                self.Read, request_deserializer=p4runtime_pb2.ReadRequest.FromString, response_serializer=bytes),
            "Write": grpc.unary_unary_rpc_method_handler(
                self.Write, request_deserializer=None,
                response_serializer=p4runtime_pb2.WriteResponse.SerializeToString),
            "StreamChannel": grpc.stream_stream_rpc_method_handler(
                self.StreamChannel, request_deserializer=None,
                response_serializer=p4runtime_pb2.StreamMessageResponse.SerializeToString)})

    # ================================================================ lifecycle
    def join_readers(self, timeout: float = 5.0) -> None:
        self.arbiter.join_readers(timeout)


def write_status(failed: list[tuple[int, Fail]], total: int) -> RpcStatus:
    """The UNKNOWN status of a failed Write: the first MAX_DETAILS failures, each with its index."""
    shown = failed[:MAX_DETAILS]
    more = f"; the first {len(shown)} are listed" if len(failed) > len(shown) else ""
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message=f"{len(failed)} of {total} updates failed{more}")
    for i, f in shown:
        msg = f.message if len(f.message) <= MAX_DETAIL_CHARS else f.message[:MAX_DETAIL_CHARS - 3] + "..."
        err = p4runtime_pb2.Error(canonical_code=f.code, message=msg, space=INDEX_SPACE, code=i)
        a = any_pb2.Any()
        a.Pack(err)
        status.details.append(a)
    return RpcStatus(grpc.StatusCode.UNKNOWN, status.message, ((STATUS_DETAILS_KEY, status.SerializeToString()),))


class P4RuntimeServer:
    """A gRPC server around one SwitchModel; a context manager that always stops it."""

    def __init__(self, model: SwitchModel, addr: str = "127.0.0.1:0", lock=None, device_id: int = 0,
                 pipeline_set: bool = False, max_streams: int = MAX_STREAMS, unary_workers: int = UNARY_WORKERS,
                 arbitration_wait: float = 30.0):
        self.servicer = P4RuntimeServicer(model, lock, device_id, pipeline_set, max_streams, arbitration_wait)
        self._requested = addr
        self._max_workers = max_streams + unary_workers
        self._server: grpc.Server | None = None
        self._pool: futures.ThreadPoolExecutor | None = None
        self._threads = f"p4rt-server-{id(self):x}"       # this server's pool threads' names begin so
        self.port: int | None = None

    @property
    def lock(self):
        return self.servicer.lock

    @property
    def addr(self) -> str:
        host = self._requested.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    def start(self) -> "P4RuntimeServer":
        self._pool = futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix=self._threads)
        server = grpc.server(self._pool, options=[("grpc.so_reuseport", 0)])  # a busy port is an error
        server.add_generic_rpc_handlers((self.servicer.own_handlers(),))
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

    def stop(self, grace: float | None = None) -> bool:
        """Stop serving (in-flight RPCs are cancelled after ``grace`` seconds; None: at once), waiting
        :data:`STOP_WAIT` seconds at most for each part: the calls, the streams' readers and the Read
        helper (killed if it is still busy).  True when every thread of the server has ended; False when
        one is stuck (in gRPC), which the process's own exit must then not wait for."""
        if self._server is None:
            return True
        ended = self._server.stop(grace).wait(STOP_WAIT + (grace or 0.0))
        self._server = None
        self.servicer.join_readers(STOP_WAIT)
        self.servicer.encoder.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        threads = [t for t in threading.enumerate() if t.name.startswith(self._threads)]
        deadline = time.monotonic() + STOP_WAIT
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return ended and not any(t.is_alive() for t in threads)

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
    with a packet.  The Read helper process is started at once (a server in a
    test that never reads a large array starts it on first use instead).
    """
    server = P4RuntimeServer(model, addr, lock, device_id, pipeline_set).start()
    server.servicer.encoder.start()
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4gen.switch.p4rt_server",
                                 description="P4Runtime server for the software data plane (no packet I/O).")
    ap.add_argument("--plan", required=True, help="build directory or plan.json")
    ap.add_argument("--addr", default="127.0.0.1:9559", help="HOST:PORT to listen on (default 127.0.0.1:9559)")
    ap.add_argument("--device-id", type=int, default=0, help="P4Runtime device id, 0..2^64-1 (default 0)")
    args = ap.parse_args(argv)
    if not 0 <= args.device_id < 1 << 64:
        ap.error(f"--device-id {args.device_id} is outside 0..{(1 << 64) - 1}")
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
        whole = server.stop()
    if not whole:
        exit_now(0)
    return 0


def exit_now(code: int) -> None:
    """End the process at once with ``code`` (a thread stuck in gRPC would hold up its normal exit)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
