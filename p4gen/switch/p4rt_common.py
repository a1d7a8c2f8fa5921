"""What the P4Runtime server's modules share: the failure type, status codes, enum checks."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from ..p4runtime.status import INDEX_SPACE
from ..errors import P4genError

# INDEX_SPACE: the p4.v1.Error.space of the entries a failed Write's details list; ``code`` is then the
# index of the failed update in the batch (only failed updates are listed, so the details stay small)
__all__ = ["API_VERSION", "INDEX_SPACE", "Fail", "RpcStatus", "ServerError", "check_enum", "eid"]

API_VERSION = "1.4.1"
UPDATE = p4runtime_pb2.Update
SET = p4runtime_pb2.SetForwardingPipelineConfigRequest
GET = p4runtime_pb2.GetForwardingPipelineConfigRequest
WRITE = p4runtime_pb2.WriteRequest
UPDATE_TYPES = (UPDATE.INSERT, UPDATE.MODIFY, UPDATE.DELETE)
SET_ACTIONS = (SET.VERIFY, SET.VERIFY_AND_SAVE, SET.VERIFY_AND_COMMIT, SET.COMMIT, SET.RECONCILE_AND_COMMIT)
GET_TYPES = (GET.ALL, GET.COOKIE_ONLY, GET.P4INFO_AND_COOKIE, GET.DEVICE_CONFIG_AND_COOKIE)
ATOMICITIES = (WRITE.CONTINUE_ON_ERROR, WRITE.ROLLBACK_ON_ERROR, WRITE.DATAPLANE_ATOMIC)
GRPC_CODE = {c.value[0]: c for c in grpc.StatusCode}


class ServerError(P4genError):
    """The server cannot start (address in use, bad plan)."""


class Fail(Exception):
    """One request or update fails with a google.rpc code and a message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RpcStatus(grpc.Status):
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple


def eid(msg) -> int:
    """The 128-bit election id of a p4.v1.Uint128."""
    return (msg.high << 64) | msg.low


def check_enum(value: int, allowed: tuple, what: str, names) -> None:
    """INVALID_ARGUMENT unless ``value`` is one of ``allowed`` (a proto enum's values)."""
    if value not in allowed:
        known = ", ".join(names.Name(v) for v in allowed)
        raise Fail(code_pb2.INVALID_ARGUMENT, f"{what} {value} is not one of {known}")


WRITE_UPDATES = WRITE.DESCRIPTOR.fields_by_name["updates"].number


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("a varint runs past the message")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def split_write(raw: bytes) -> tuple[p4runtime_pb2.WriteRequest, list[bytes]]:
    """A serialized WriteRequest as (the request without its updates, each update's bytes), read from the
    wire format without building the updates: one Update is parsed at a time while it is applied, so a
    Write of 20,000 updates never holds the hundreds of thousands of objects (pure-Python protobuf, with
    reference cycles) whose garbage collections stopped every thread of the switch for 100 ms and more.
    INVALID_ARGUMENT when ``raw`` is not a WriteRequest."""
    rest, updates = bytearray(), []
    i = 0
    try:
        while i < len(raw):
            start = i
            tag, i = _varint(raw, i)
            kind = tag & 7
            if kind == 0:
                _v, i = _varint(raw, i)
            elif kind == 1:
                i += 8
            elif kind == 5:
                i += 4
            elif kind == 2:
                n, i = _varint(raw, i)
                if tag >> 3 == WRITE_UPDATES:
                    if i + n > len(raw):
                        raise ValueError("an update runs past the message")
                    updates.append(raw[i:i + n])
                    i += n
                    continue
                i += n
            else:
                raise ValueError(f"wire type {kind} has no place in a WriteRequest")
            if i > len(raw):
                raise ValueError("a field runs past the message")
            rest += raw[start:i]
        head = p4runtime_pb2.WriteRequest.FromString(bytes(rest))
    except (ValueError, DecodeError) as exc:
        raise Fail(code_pb2.INVALID_ARGUMENT, f"the WriteRequest ({len(raw)} bytes) is not valid protobuf: {exc}") \
            from None
    return head, updates


def parse_update(raw: bytes) -> p4runtime_pb2.Update:
    """One update of :func:`split_write`; INVALID_ARGUMENT when it is not an Update."""
    try:
        return p4runtime_pb2.Update.FromString(raw)
    except DecodeError as exc:
        raise Fail(code_pb2.INVALID_ARGUMENT, f"the update ({len(raw)} bytes) is not valid protobuf: {exc}") from None
