"""What Mininet does not do for the testbed: process handles, requirements, leftovers.

Every process a testbed network starts (Mininet's node shells, switches,
workers, baselines) carries the environment variable :data:`MARK` set to
the network's id (``p4g`` + 4 hex digits).  :func:`leftovers` finds them
by that mark and :func:`cleanup` ends exactly those: a crashed run is
cleaned up without touching anyone else's Mininet, ping or mnexec (which
``mn -c`` would kill).  Every node of a testbed network lives in its own
network namespace, which the kernel removes with the node's last process,
interfaces included; nothing is created in the root namespace.

Counters are read from ``/proc/<pid>/net/*`` of a process inside the node:
a Mininet node shares the root namespace's ``/sys``, so ``/sys/class/net``
inside a node shows the root namespace's interfaces, not the node's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import PrivilegeError

MARK = "P4GEN_TESTBED"
PREFIX = "p4g"
TOOLS = {"mnexec": "mininet", "ip": "iproute2", "tc": "iproute2", "ifconfig": "net-tools", "ethtool": "ethtool"}


def new_id() -> str:
    return f"{PREFIX}{os.urandom(2).hex()}"


def is_id(text: str) -> bool:
    return re.fullmatch(rf"{PREFIX}[0-9a-f]{{4}}", text) is not None


def missing_requirements() -> str | None:
    """A one-line reason why a testbed network cannot be built here, or None."""
    if os.geteuid() != 0:
        return "the testbed needs root (Mininet creates network namespaces)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "the mininet Python module is not installed (pip install 'p4gen[testbed]')"
    gone = [t for t in TOOLS if shutil.which(t) is None]
    if gone:
        pkgs = sorted({TOOLS[t] for t in gone})
        return f"{', '.join(gone)} not on PATH (Debian packages: {', '.join(pkgs)})"
    return None


def require() -> None:
    why = missing_requirements()
    if why:
        raise PrivilegeError(why)


def marked_env(net_id: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[MARK] = net_id
    if extra:
        env.update(extra)
    return env


@dataclass
class Proc:
    """A process started on a Mininet node, with its log file; ended by its own id."""

    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM to its process group (``mnexec -d`` made it a session leader), then SIGKILL."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait(grace)
        for f in (self.popen.stdin, self.popen.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    def kill(self) -> None:
        """SIGKILL now (fault injection)."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:           # not a group leader after all: the process itself
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def spawn(node, name: str, argv: list[str], log: Path, net_id: str, env: dict[str, str] | None = None,
          pipes: bool = False) -> Proc:
    """Start ``argv`` on Mininet ``node`` (``node.popen``: ``mnexec -da``, its own session), stderr (and
    stdout unless ``pipes``) to ``log``, marked with ``net_id``."""
    logf = open(log, "wb")
    try:
        p = node.popen([str(a) for a in argv], stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                       stdout=subprocess.PIPE if pipes else logf, stderr=logf, env=marked_env(net_id, env),
                       text=pipes, bufsize=1 if pipes else -1)
    finally:
        logf.close()
    return Proc(name, p, log)


# -- counters --------------------------------------------------------------------------------------
def dev_counters(pid: int) -> dict[str, tuple[int, int, int, int]]:
    """Interface -> (rx packets, rx bytes, tx packets, tx bytes) in the namespace of process ``pid``."""
    out = {}
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        c = rest.split()
        out[name.strip()] = (int(c[1]), int(c[0]), int(c[9]), int(c[8]))
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process ``pid`` used so far, every thread (``/proc/<pid>/stat``); None
    once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def snmp(pid: int, proto: str, field: str) -> int:
    lines = [ln.split() for ln in Path(f"/proc/{pid}/net/snmp").read_text().splitlines()
             if ln.startswith(f"{proto}:")]
    if len(lines) == 2 and field in lines[0]:
        return int(lines[1][lines[0].index(field)])
    return 0


def packet_socket_ifindexes(pid: int) -> set[int]:
    """Interface indexes with a bound packet socket in the namespace of process ``pid``."""
    bound = set()
    for line in Path(f"/proc/{pid}/net/packet").read_text().splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 5 and cols[4].isdigit():
            bound.add(int(cols[4]))
    return bound


def tcp_listening(pid: int, port: int) -> bool:
    """Something listens on TCP ``port`` in the namespace of process ``pid``."""
    want = f":{port:04X}"
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 3 and cols[1].endswith(want) and cols[3] == "0A":
                return True
    return False


# -- leftovers -------------------------------------------------------------------------------------
def _mark_of(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(MARK.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def leftovers(net_id: str | None = None) -> dict[int, str]:
    """pid -> network id of every live process that carries the testbed mark (of ``net_id`` only)."""
    me = os.getpid()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        mark = _mark_of(int(entry))
        if mark is not None and is_id(mark) and (net_id is None or mark == net_id) and _alive(int(entry)):
            found[int(entry)] = mark
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def end(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, each of ``pids`` (processes found by their mark)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        if not pids:
            return


def workdirs() -> list[Path]:
    """Work directories of testbed networks (``/tmp/p4g<id>-<topology>``)."""
    return sorted(p for p in Path("/tmp").glob(f"{PREFIX}*-*")
                  if p.is_dir() and is_id(p.name.split("-", 1)[0]))


def cleanup(net_id: str | None = None) -> list[str]:
    """End every marked process (of ``net_id`` only, if given; their namespaces and interfaces go with
    them) and remove the work directories; return what was removed."""
    removed = []
    left = leftovers(net_id)
    end(sorted(left))
    for pid, mark in sorted(left.items()):
        removed.append(f"process {pid} ({mark})")
    for d in workdirs():
        if net_id is None or d.name.startswith(f"{net_id}-"):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"dir {d}")
    return removed
