"""Controller exceptions, and the one place where gRPC failures become them.

:func:`translate_rpc_error` is the only code that looks inside a
``grpc.RpcError``.  Every other module calls it, so the messages a user
sees for an unreachable switch, a rejected pipeline, a refused write or a
failed batch are made in one place and tested in one place.
"""

from __future__ import annotations

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from p4gen.errors import P4genError
from p4gen.jobfile import JobFileError
from p4gen.p4runtime.status import INDEX_SPACE, STATUS_DETAILS_KEY

__all__ = ["ArbitrationError", "ControllerError", "JobConflictError", "JobFileError", "PipelineError", "SwitchError",
           "SwitchUnreachableError", "WriteError", "code_name", "translate_rpc_error", "write_failures"]


class ControllerError(P4genError):
    """Root of the controller's errors."""


class SwitchUnreachableError(ControllerError):
    """The switch did not answer within the timeout."""


class ArbitrationError(ControllerError):
    """This controller is not the primary, or the switch refused its election id or device id."""


class PipelineError(ControllerError):
    """The switch has no pipeline, or one that does not match the plan."""


class SwitchError(ControllerError):
    """Any other RPC failure."""


class JobConflictError(ControllerError):
    """A job clashes with the jobs already on the switch (or is absent there)."""


class WriteError(ControllerError):
    """A Write batch failed; ``failures`` holds (index, code name, message) per failed update."""

    def __init__(self, message: str, failures: list[tuple[int, str, str]]):
        super().__init__(message)
        self.failures = failures


def code_name(code: int) -> str:
    """google.rpc.Code number -> its name ("ALREADY_EXISTS")."""
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return f"code {code}"


def write_failures(exc: grpc.RpcError) -> list[tuple[int, str, str]] | None:
    """The per-update p4.v1.Error list of a failed Write, or None if the status carries none."""
    status = None
    for key, value in exc.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            status = status_pb2.Status()
            status.ParseFromString(value)
            break
    if status is None or not status.details:
        return None
    out = []
    for position, anyval in enumerate(status.details):
        err = p4runtime_pb2.Error()
        if not anyval.Unpack(err):
            return None
        # p4gen's server lists only failed updates, each with its index in ``code``; others (BMv2's
        # PI) list one Error per update, in order
        index = err.code if err.space == INDEX_SPACE else position
        if err.canonical_code != code_pb2.OK:
            out.append((index, code_name(err.canonical_code), err.message))
    return out


def _failed_count(exc: grpc.RpcError) -> int | None:
    """K of a status message "K of N updates failed...", when the server says so."""
    details = exc.details() if hasattr(exc, "details") else ""
    head = (details or "").split(" of ", 1)[0]
    return int(head) if head.isdigit() else None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def translate_rpc_error(exc: grpc.RpcError, *, addr: str, rpc: str, timeout: float,
                        election_id: int | None = None, updates: int | None = None,
                        device_id: int | None = None) -> ControllerError:
    """Map a failed RPC to a ControllerError with a message a user can act on."""
    code = exc.code() if hasattr(exc, "code") else None
    details = _one_line(exc.details() if hasattr(exc, "details") else str(exc)) or "no details"
    where = f"switch at {addr}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        if rpc == "connect" or code == grpc.StatusCode.UNAVAILABLE:
            return SwitchUnreachableError(f"{where} did not answer within {timeout:g} s")
        return SwitchUnreachableError(f"{where} did not answer {rpc} within {timeout:g} s")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        eid = f" (election id {election_id})" if election_id is not None else ""
        return ArbitrationError(f"{where} refused {rpc}: this controller{eid} is not the primary: {details}")
    if code == grpc.StatusCode.UNKNOWN and rpc == "Write":
        failures = write_failures(exc)
        if failures is not None:
            total = f" of {updates}" if updates is not None else ""
            count = _failed_count(exc) or len(failures)
            listed = f" (the first {len(failures)} listed)" if count > len(failures) else ""
            lines = [f"{where} rejected {count}{total} updates of a write batch{listed}:"]
            lines += [f"  update {i}: {c}: {_one_line(m)}" for i, c, m in failures]
            return WriteError("\n".join(lines), failures)
    if rpc == "SetForwardingPipelineConfig" and "assign device" in details:
        # BMv2's P4Runtime server (PI) takes arbitration for any device id, then cannot assign one it does not run
        dev = f" {device_id}" if device_id is not None else ""
        return PipelineError(f"{where} has no device{dev} ({details}): pass the id the switch was started with "
                             f"(simple_switch_grpc --device-id) as --device-id")
    if rpc == "SetForwardingPipelineConfig" and code in (grpc.StatusCode.INVALID_ARGUMENT,
                                                         grpc.StatusCode.FAILED_PRECONDITION):
        return PipelineError(f"{where} rejected the pipeline: {details}")
    if rpc == "GetForwardingPipelineConfig" and code == grpc.StatusCode.FAILED_PRECONDITION:
        return PipelineError(f"{where} has no pipeline ({details}); run `p4gen ctl push BUILD_DIR` first")
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT) and rpc == "StreamChannel":
        return ArbitrationError(f"{where} refused arbitration: {details}")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return PipelineError(f"{where} refused {rpc}: {details}")
    name = code.name if code is not None else "error"
    return SwitchError(f"{where}: {rpc} failed: {name}: {details}")
