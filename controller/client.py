"""One P4Runtime connection: bounded connect, arbitration, and the RPCs.

:class:`SwitchConnection` is a context manager; leaving it ends the
arbitration stream, joins the thread that reads it and closes the
channel.  Every failed RPC goes through
:func:`.errors.translate_rpc_error`.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterable

import grpc
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from .errors import ArbitrationError, SwitchUnreachableError, translate_rpc_error

DEFAULT_TIMEOUT = 5.0


class SwitchConnection:
    """A controller's session with one P4Runtime device."""

    def __init__(self, addr: str, device_id: int = 0, election_id: int = 1, timeout: float = DEFAULT_TIMEOUT):
        if election_id < 1 or election_id >> 128:
            raise ArbitrationError(f"election id {election_id} must be in 1..2^128-1")
        self.addr = addr
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.is_primary = False
        self.primary_election_id: int | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._stream = None
        self._reader: threading.Thread | None = None
        self._arbitrated = threading.Event()
        self._stream_error: grpc.RpcError | None = None

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> "SwitchConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self, require_primary: bool = True) -> "SwitchConnection":
        """Connect within the timeout and arbitrate; by default insist on being the primary."""
        self._channel = grpc.insecure_channel(self.addr)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            raise SwitchUnreachableError(f"switch at {self.addr} did not answer within {self.timeout:g} s") from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        self._stream = self._stub.StreamChannel(self._outgoing())
        self._reader = threading.Thread(target=self._read_stream, name=f"p4rt-stream-{self.addr}", daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        arb = req.arbitration
        arb.device_id = self.device_id
        arb.election_id.high = self.election_id >> 64
        arb.election_id.low = self.election_id & ((1 << 64) - 1)
        self._requests.put(req)
        if not self._arbitrated.wait(self.timeout):
            raise SwitchUnreachableError(f"switch at {self.addr} did not answer arbitration within {self.timeout:g} s")
        if self._stream_error is not None:
            raise self._translate(self._stream_error, "StreamChannel")
        if require_primary and not self.is_primary:
            raise ArbitrationError(
                f"switch at {self.addr} has a primary controller with election id {self.primary_election_id}; "
                f"this controller's election id {self.election_id} is lower (pass a higher --election-id)")
        return self

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._reader is not None:
            self._reader.join(self.timeout)
            self._reader = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self._stream = None

    def _outgoing(self):
        while True:
            item = self._requests.get()
            if item is None:
                return
            yield item

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                if msg.WhichOneof("update") == "arbitration":
                    a = msg.arbitration
                    self.primary_election_id = (a.election_id.high << 64) | a.election_id.low
                    self.is_primary = a.status.code == code_pb2.OK
                    self._arbitrated.set()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self._stream_error = exc
        finally:
            self.is_primary = False
            self._arbitrated.set()

    # ------------------------------------------------------------ RPCs
    def _translate(self, exc: grpc.RpcError, rpc: str, updates: int | None = None):
        return translate_rpc_error(exc, addr=self.addr, rpc=rpc, timeout=self.timeout,
                                   election_id=self.election_id, updates=updates, device_id=self.device_id)

    def _eid(self, msg) -> None:
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        self._eid(req)
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        try:
            self._stub.SetForwardingPipelineConfig(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._translate(exc, "SetForwardingPipelineConfig") from None

    def get_p4info(self) -> p4info_pb2.P4Info:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.response_type = p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        try:
            resp = self._stub.GetForwardingPipelineConfig(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._translate(exc, "GetForwardingPipelineConfig") from None
        return resp.config.p4info

    def write(self, updates: Iterable[p4runtime_pb2.Update] | p4runtime_pb2.WriteRequest) -> None:
        """Write ``updates``: Update messages, or a WriteRequest whose updates were built in place (copying
        thousands of pure-Python protobuf messages costs more than the switch's work on them)."""
        if isinstance(updates, p4runtime_pb2.WriteRequest):
            req = updates
        else:
            req = p4runtime_pb2.WriteRequest()
            req.updates.extend(updates)
        req.device_id = self.device_id
        self._eid(req)
        if not req.updates:
            return
        try:
            self._stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._translate(exc, "Write", len(req.updates)) from None

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.device_id
        req.entities.extend(entities)
        out = []
        try:
            for resp in self._stub.Read(req, timeout=self.timeout):
                out.extend(resp.entities)
        except grpc.RpcError as exc:
            raise self._translate(exc, "Read") from None
        return out


def connect(addr: str, device_id: int = 0, election_id: int = 1, timeout: float = DEFAULT_TIMEOUT,
            require_primary: bool = True) -> SwitchConnection:
    """An open connection (use it in a ``with`` block); closed again if opening fails."""
    conn = SwitchConnection(addr, device_id, election_id, timeout)
    try:
        return conn.open(require_primary)
    except BaseException:
        conn.close()
        raise
