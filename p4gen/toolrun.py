"""Running an external compiler that p4gen does not trust: bounded in time, output and what is read back.

Whatever program sits on PATH under a compiler's name is run so that it cannot hang or exhaust p4gen:

* :func:`run` starts it in a process group of its own and ends the whole group (SIGKILL) when it has
  run :func:`timeout` seconds, and in any case once it has exited, so no child it left behind keeps
  running; its output is read as it comes and kept up to :data:`LOG_LIMIT` bytes (the rest is counted
  and dropped, with a note at the end), and decoded as UTF-8 with every bad byte replaced.
* :func:`read_output` reads a file the compiler wrote only when it is a regular file (not a symlink, a
  FIFO or a device) of at most :data:`OUTPUT_LIMIT` bytes.
* :func:`printable` takes terminal control sequences out of its text before p4gen prints any of it.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import subprocess
import threading
from pathlib import Path

from .errors import CompileError
from .filewrite import read_upto

LOG_LIMIT = 16 << 20          # bytes of a compiler's output kept in compile.log (below filewrite.MAX_OWN_BYTES)
OUTPUT_LIMIT = 32 << 20       # bytes of a file the compiler wrote that p4gen reads back
DEFAULT_TIMEOUT = 3600.0      # s: a large Tofino program takes minutes on a loaded machine
TIMEOUT_ENV = "P4GEN_COMPILE_TIMEOUT"
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def timeout() -> float:
    """Seconds a compile may take: ``$P4GEN_COMPILE_TIMEOUT`` (a number in (0, 86400]), else an hour."""
    text = os.environ.get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:
        raise CompileError(f"{TIMEOUT_ENV}={text!r} must be a number of seconds in (0, 86400]")
    return value


def printable(text: str) -> str:
    """``text`` without terminal control sequences or other control characters (tabs and newlines stay)."""
    return _CONTROL.sub("", text.replace("\t", " "))


class _Sink:
    """Reads a pipe to its end, keeping its first ``limit`` bytes."""

    def __init__(self, stream, limit: int):
        self.parts: list[bytes] = []
        self.kept = self.dropped = 0
        self._stream, self._limit = stream, limit
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            chunk = self._stream.read1(1 << 16)
            if not chunk:
                return
            room = self._limit - self.kept
            if room > 0:
                self.parts.append(chunk[:room])
                self.kept += min(room, len(chunk))
            self.dropped += max(0, len(chunk) - max(room, 0))


def _end_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(cmd: list[str], cwd: str | None = None, seconds: float | None = None) -> tuple[int | None, str]:
    """(exit status, or None when it ran out of time; its stdout and stderr as text) of ``cmd``."""
    seconds = timeout() if seconds is None else seconds
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        raise CompileError(f"{Path(cmd[0]).name} did not run: {exc.strerror or exc}") from None
    sink = _Sink(proc.stdout, LOG_LIMIT - 4096)       # room for the notes below
    try:
        rc: int | None = proc.wait(seconds)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        _end_group(proc.pid)              # the compiler (on a timeout) and anything it left running
        if proc.poll() is None:
            proc.wait()
        sink.thread.join(5.0)
        proc.stdout.close()
    text = b"".join(sink.parts).decode("utf-8", "replace")
    if sink.dropped:
        text += f"\n[p4gen: {Path(cmd[0]).name} wrote {sink.kept + sink.dropped} bytes; the {sink.dropped} after " \
                f"the first {sink.kept} were dropped]\n"
    if rc is None:
        text += f"\n[p4gen: {Path(cmd[0]).name} ran for {seconds:g} s and was ended with its process group]\n"
    return rc, text


def log_bytes(text: str) -> bytes:
    """compile.log's bytes: ``text`` as UTF-8, cut to LOG_LIMIT bytes with a note when longer (so the file
    stays one that a rebuild can read back to see that p4gen wrote it)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= LOG_LIMIT:
        return data
    return data[:LOG_LIMIT] + f"\n[p4gen: the log was cut to its first {LOG_LIMIT >> 20} MiB]\n".encode()


def read_output(path: Path, what: str, compiler: str) -> bytes:
    """The bytes of ``path``, a file ``compiler`` wrote, if it is a regular file of at most OUTPUT_LIMIT
    bytes; else CompileError (one line)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CompileError(f"{compiler}'s {what} is a symbolic link; p4gen reads only regular files a "
                               f"compiler writes") from None
        raise CompileError(f"{compiler}'s {what} cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CompileError(f"{compiler}'s {what} is not a regular file; p4gen reads only regular files a "
                               f"compiler writes")
        data = read_upto(fd, OUTPUT_LIMIT + 1)
    except OSError as exc:
        raise CompileError(f"{compiler}'s {what} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > OUTPUT_LIMIT:
        raise CompileError(f"{compiler}'s {what} is larger than {OUTPUT_LIMIT >> 20} MiB; p4gen reads back at "
                           f"most that much of a compiler's output")
    return data
