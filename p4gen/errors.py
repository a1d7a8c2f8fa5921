"""One exception hierarchy for every user-facing failure.

Every message is a single line that names what was asked, the limit it
breaks and, where one exists, the largest value that fits.  The CLI prints
``str(exc)`` and exits non-zero; library code never calls ``sys.exit``.

:data:`CATALOGUE` lists every user-facing error kind of the package, its message's form and its exit
status, as p4c's error catalogue does; the classes of the switch, host, controller and testbed sides are
defined beside the code that raises them and named here.
"""

from __future__ import annotations


class P4genError(ValueError):
    """Root of all p4gen errors (a ``ValueError``, as callers expect)."""


class SpecError(P4genError):
    """A spec field is missing, of the wrong type or out of its legal range."""


class TargetError(P4genError):
    """A target profile is unknown or malformed."""


class InfeasibleError(P4genError):
    """A valid spec does not fit the target's resources."""


class PlanError(P4genError):
    """A plan.json is unreadable, of another schema version, or inconsistent."""


class OutputError(P4genError):
    """An output directory cannot be written safely."""


class CompileError(P4genError):
    """An external P4 compiler rejected a generated program."""


# ---------------------------------------------------------------------------------------------- the catalogue

# The exit status of a command line (only the CLI exits; it takes these from here).
EXIT_ERROR = 1             # any error of the catalogue: one line ``PROG: error: MESSAGE`` on stderr
EXIT_USAGE = 2             # a command line argparse refuses; ``python -m p4gen.switch.dataplane`` or ``.udp``
                           # that cannot start (``MODULE: MESSAGE``)
EXIT_INTERRUPTED = 130     # Ctrl-C: ``PROG: interrupted``
EXIT_PROGRAM_NOT_CHECKED = 3   # ``p4gen verify`` / ``build --verify``: every proof holds, but program.p4 was not read
                               # through p4c (no p4test on PATH); one line ``program.p4  not checked: ...`` on stdout


class ErrorKind:
    """One kind of user-facing error: the exception that carries it (``module.name``), the form of its
    one-line message and the exit status ``p4gen`` ends with when it stops there.  (A plain class: a
    warm build loads this module and nothing heavier.)"""
    __slots__ = ("name", "module", "template", "status")

    def __init__(self, name: str, module: str, template: str, status: int = EXIT_ERROR):
        self.name, self.module, self.template, self.status = name, module, template, status

    def __repr__(self) -> str:
        return f"ErrorKind({self.module}.{self.name}, exit {self.status})"


# Every user-facing error kind, as p4c's error catalogue lists its errors.  Each message is one line made
# at the place that raises it; the template says its form.  tests/test_error_catalogue.py holds this list
# to the exception classes the package defines, and tests/data/bad_*.json to the messages themselves.
CATALOGUE: tuple[ErrorKind, ...] = (
    # the compiler
    ErrorKind("SpecError", "p4gen.errors", "{field}={value!r} must be {what is allowed}"),
    ErrorKind("TargetError", "p4gen.errors", "target profile {source}: {key}={value!r} must be {what is allowed}"
                                             " | unknown target {name!r}; known targets: {names}"),
    ErrorKind("InfeasibleError", "p4gen.errors", "{field}={value} needs {what}; {target} {has or allows} {limit}; "
                                                 "the largest {field} that fits {target} is {best} "
                                                 "(at {the other fields}, {variant} variant)"),
    ErrorKind("PlanError", "p4gen.errors", "{plan.json}: {what is wrong}; {how to mend it}"),
    ErrorKind("OutputError", "p4gen.errors", "{path}: {why p4gen will not write there}; {what was kept}"),
    ErrorKind("CompileError", "p4gen.errors", "{compiler} {failed or is missing}: {why}"),
    ErrorKind("CompileFailed", "p4gen.tofino_compiler", "{compiler} rejected {program}: {its first error}"),
    ErrorKind("JobFileError", "p4gen.jobfile", "{job file}: {key}: {what is wrong}"),
    # frames
    ErrorKind("PacketError", "p4gen.wire", "plan header {name!r} {what is wrong}"),
    ErrorKind("MalformedPacket", "p4gen.wire", "frame of {n} bytes is too short for {header} | {field} {is invalid}"),
    ErrorKind("ForeignPacket", "p4gen.wire", "{ether type, protocol or port} is not an aggregation packet"),
    # the host side
    ErrorKind("CodecError", "p4gen.host.codec", "{parameter}={value!r} must be {what is allowed}"),
    ErrorKind("WorkerError", "p4gen.host.worker", "{parameter}={value!r} must be {what is allowed}"),
    ErrorKind("OmniProtocolError", "p4gen.host.omni_worker",
              "slot {j}: the switch's next block {m} {skips data or leaves the stream}"),
    ErrorKind("TorchHookError", "p4gen.torch.session", "{argument} {what is wrong}"),
    ErrorKind("SwitchLostError", "p4gen.torch.session", "no result from the switch for {what} in {seconds} s"),
    ErrorKind("BatchIOUnavailable", "p4gen.netio.mmsg", "{what batched socket I/O needs and lacks}"),
    ErrorKind("RingUnavailable", "p4gen.netio.rings", "{interface}: TPACKET_V3 rings refused: {why}"),
    # the software switch
    ErrorKind("ModelError", "p4gen.switch.state", "{table, action, field or group} {name!r} {is unknown or invalid}"),
    ErrorKind("ConfigError", "p4gen.switch.config", "{config}: {key}: {what is wrong}"),
    ErrorKind("DataPlaneError", "p4gen.switch.dataplane", "--{option} {value!r} {what is wrong}"),
    ErrorKind("UdpSwitchError", "p4gen.switch.udp", "--listen {value!r} {what is wrong} | cannot listen on {addr}: {why}"),
    ErrorKind("ServerError", "p4gen.switch.p4rt_common", "P4Runtime server cannot listen on {addr} ({why})"),
    # the controller
    ErrorKind("ControllerError", "p4gen.controller.errors", "{what the switch refused}"),
    ErrorKind("SwitchUnreachableError", "p4gen.controller.errors", "switch at {addr} did not answer {what} within {seconds} s"),
    ErrorKind("ArbitrationError", "p4gen.controller.errors", "{election id or device id} {what is wrong}"),
    ErrorKind("PipelineError", "p4gen.controller.errors", "switch at {addr} runs another program than {build}: {difference}"),
    ErrorKind("SwitchError", "p4gen.controller.errors", "{RPC} failed: {code}: {message}"),
    ErrorKind("JobConflictError", "p4gen.controller.errors", "job {job} {clashes with or is absent from} the switch at {addr}"),
    ErrorKind("WriteError", "p4gen.controller.errors", "{n} of {m} updates failed: #{index} {code}: {message}"),
    # the testbed
    ErrorKind("TestbedError", "p4gen.testbed.errors", "--{option} {value!r} {what is wrong}"),
    ErrorKind("PrivilegeError", "p4gen.testbed.errors", "{what needs root or a capability}"),
    ErrorKind("CommandError", "p4gen.testbed.errors", "{command} failed: {its last line}"),
    ErrorKind("ReadinessError", "p4gen.testbed.errors", "{host} could not {reach what} in {seconds} s; see {log}"),
    ErrorKind("JobError", "p4gen.testbed.errors", "worker {rank} ({host}) {failed or was late}: {why}; see {log}"),
)


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The catalogue's entry for ``exc`` (its own class or the nearest listed base), or None."""
    names = {k.name: k for k in CATALOGUE}
    for cls in type(exc).__mro__:
        if cls.__name__ in names and cls.__module__ == names[cls.__name__].module:
            return names[cls.__name__]
    return None


def exit_status(exc: BaseException) -> int:
    """The exit status of a command line that stops on ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    kind = kind_of(exc)
    return kind.status if kind is not None else EXIT_ERROR
