"""StreamChannel and arbitration of the P4Runtime server, bounded so idle clients cannot stall it.

A gRPC server runs every RPC on a thread of its pool, and a StreamChannel
holds its thread for as long as it stays open.  So the :class:`Arbiter`
admits at most ``max_streams`` open streams and refuses the next one at
once with RESOURCE_EXHAUSTED; the server's pool has ``max_streams`` threads
more than it needs for unary RPCs, so Capabilities, Write and Read always
find a thread.  A stream that has not arbitrated within
``arbitration_wait`` seconds is closed with DEADLINE_EXCEEDED, so idle
connections do not keep their place either.

The stream with the highest election id is the primary, and every stream
is told who is (P4Runtime 1.4, section 4).  Packet-out and other stream
messages are answered with a StreamError (UNIMPLEMENTED).
"""

from __future__ import annotations

import queue
import threading
import time

from google.protobuf.message import DecodeError
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .p4rt_common import GRPC_CODE, Fail, eid

_END = object()


class _Stream:
    def __init__(self) -> None:
        self.out: queue.Queue = queue.Queue(maxsize=64)
        self.election_id: int | None = None


class Arbiter:
    """Open streams, the primary, and the writer check of one device."""

    def __init__(self, device_id: int, max_streams: int = 8, arbitration_wait: float = 30.0):
        self.device_id = device_id
        self.max_streams = max_streams
        self.arbitration_wait = arbitration_wait
        self._lock = threading.Lock()
        self._open = 0
        self._streams: set[_Stream] = set()
        self._primary: _Stream | None = None
        self._readers: set[threading.Thread] = set()

    # -------------------------------------------------------------- the RPC
    def stream_channel(self, request_iterator, context):
        with self._lock:
            if self._open >= self.max_streams:
                full = True
            else:
                full = False
                self._open += 1
        if full:
            context.abort(GRPC_CODE[code_pb2.RESOURCE_EXHAUSTED],
                          f"this switch serves at most {self.max_streams} StreamChannels at once; all are open")
        st = _Stream()
        context.add_callback(lambda: _put(st, _END))
        reader = threading.Thread(target=self._read, args=(st, request_iterator), name="p4rt-stream-reader",
                                  daemon=True)
        with self._lock:
            self._readers.add(reader)
        reader.start()
        deadline = time.monotonic() + self.arbitration_wait
        try:
            while True:
                try:
                    item = st.out.get(timeout=1.0)
                except queue.Empty:
                    if not context.is_active():
                        return
                    if st.election_id is None and time.monotonic() > deadline:
                        context.abort(GRPC_CODE[code_pb2.DEADLINE_EXCEEDED],
                                      f"no arbitration within {self.arbitration_wait:g} s; the stream is closed")
                    continue
                if item is _END:
                    return
                if isinstance(item, Fail):
                    context.abort(GRPC_CODE[item.code], item.message)
                yield item
        finally:
            self._leave(st)
            with self._lock:
                self._open -= 1

    def _read(self, st: _Stream, request_iterator) -> None:
        try:
            for raw in request_iterator:
                try:
                    req = raw if isinstance(raw, p4runtime_pb2.StreamMessageRequest) else \
                        p4runtime_pb2.StreamMessageRequest.FromString(raw)
                except DecodeError:
                    _put(st, Fail(code_pb2.INVALID_ARGUMENT, f"a StreamChannel message of {len(raw)} bytes is not a "
                                                             f"StreamMessageRequest; the stream is closed"))
                    return
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    err = self._arbitrate(st, req.arbitration)
                    if err is not None:
                        _put(st, err)
                        return
                else:
                    resp = p4runtime_pb2.StreamMessageResponse()
                    resp.error.canonical_code = code_pb2.UNIMPLEMENTED
                    resp.error.message = f"stream message {kind!r} is not supported by the software switch"
                    if kind == "packet":
                        resp.error.packet_out.packet_out.CopyFrom(req.packet)
                    _put(st, resp)
        except Exception:  # noqa: BLE001 - the stream ended (cancelled, or the server stops)
            pass
        finally:
            _put(st, _END)
            with self._lock:
                self._readers.discard(threading.current_thread())

    # -------------------------------------------------------------- arbitration
    def _arbitrate(self, st: _Stream, arb: p4runtime_pb2.MasterArbitrationUpdate) -> Fail | None:
        if arb.device_id != self.device_id:
            return Fail(code_pb2.NOT_FOUND, f"device id {arb.device_id} is not served here (this is device "
                                            f"{self.device_id})")
        if arb.HasField("role") and (arb.role.name or arb.role.id):
            return Fail(code_pb2.UNIMPLEMENTED, "roles are not supported; use the default role")
        e = eid(arb.election_id)
        with self._lock:
            if any(o is not st and o.election_id == e for o in self._streams):
                return Fail(code_pb2.INVALID_ARGUMENT, f"election id {e} is in use by another controller")
            st.election_id = e
            self._streams.add(st)
            self._elect_locked(force=st)
        return None

    def _leave(self, st: _Stream) -> None:
        with self._lock:
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
                _put(s, resp)

    # -------------------------------------------------------------- checks for the unary RPCs
    def check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise Fail(code_pb2.NOT_FOUND, f"device id {device_id} is not served here (this is device "
                                           f"{self.device_id})")

    def check_writer(self, device_id: int, election_id, what: str) -> None:
        self.check_device(device_id)
        e = eid(election_id)
        with self._lock:
            primary = self._primary.election_id if self._primary is not None else None
        if primary is None or e != primary:
            who = f"the primary's is {primary}" if primary is not None else "no controller has arbitrated"
            raise Fail(code_pb2.PERMISSION_DENIED, f"{what} with election id {e} refused: {who}")

    def join_readers(self, timeout: float = 5.0) -> None:
        with self._lock:
            readers = list(self._readers)
        for t in readers:
            t.join(timeout)


def _put(st: _Stream, item) -> None:
    """Queue a message for a stream; a client that does not read loses the oldest (never blocks the server)."""
    while True:
        try:
            st.out.put_nowait(item)
            return
        except queue.Full:
            try:
                st.out.get_nowait()
            except queue.Empty:
                pass
