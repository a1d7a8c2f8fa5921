"""What Mininet does not do for the testbed: process handles, requirements, leftovers.

Every process a testbed network starts (Mininet's node shells, switches,
workers, baselines) carries the environment variable :data:`MARK` set to
the network's id (``p4g`` + 4 hex digits) and :data:`OWNER` set to the
process that built the network (its pid, its start time and its pid
namespace); the network's work directory holds the same record in
``owner``.  :func:`cleanup` ends only what belongs to a network whose
owner is dead (no process with that pid and start time): a crashed run is
cleaned up, a live one on the same machine is left alone and reported,
and nobody else's Mininet, ping or mnexec is touched (which ``mn -c``
would kill).  Every node of a testbed network lives in its own network
namespace, which the kernel removes with the node's last process,
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
from dataclasses import dataclass, field
from pathlib import Path

from p4gen.extras import lacking
from p4gen.filewrite import WORK, open_work_log, write_file

from .errors import PrivilegeError, TestbedError

MARK = "P4GEN_TESTBED"
OWNER = "P4GEN_TESTBED_OWNER"      # "<pid>:<start time in clock ticks since boot>:<pid namespace inode>"
OWNER_FILE = "owner"               # the same record in the network's work directory
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
    why = lacking("the testbed", "mininet")
    if why:
        return why
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
    """This process's environment plus ``extra``, marked with ``net_id`` and with this process as owner."""
    env = dict(os.environ)
    if extra:
        env.update(extra)
    env[MARK] = net_id
    env[OWNER] = owner_record()
    return env


def make_workdir(net_id: str, name: str) -> Path:
    """A fresh work directory ``<net_id>-<name>-*`` in the user's private testbed directory
    (:mod:`.workspace`), holding this process's owner record."""
    from . import workspace

    d = workspace.new_workdir(f"{net_id}-{name}-")
    write_file(d / OWNER_FILE, owner_record() + "\n", WORK, "testbed owner record", TestbedError)
    return d


# -- owners ----------------------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> int | None:
    f = _stat(pid)
    return int(f[19]) if f and len(f) > 19 and f[19].isdigit() else None    # field 22 of proc(5)


def _pid_ns(pid: int | str = "self") -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid").partition("[")[2].rstrip("]")
    except OSError:
        return "?"


def owner_record(pid: int | None = None) -> str:
    """The owner record of process ``pid`` (default: this one): pid, start time, pid namespace."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}:{_pid_ns()}"


@dataclass(frozen=True)
class Owner:
    """What an owner record says about the process that built a network."""

    record: str | None

    @property
    def pid(self) -> int | None:
        head = (self.record or "").split(":")[0]
        return int(head) if head.isdigit() else None

    def state(self) -> str:
        """``running``, ``dead``, or why it cannot be told (``unrecorded``, ``foreign``)."""
        parts = (self.record or "").split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            return "unrecorded"
        if parts[2] != _pid_ns():
            return "foreign"            # its pid means another process in this pid namespace
        pid, start = int(parts[0]), int(parts[1])
        f = _stat(pid)
        if f is None or f[0] in "ZX" or _start_time(pid) != start:
            return "dead"               # gone, or the pid now belongs to a later process
        return "running"

    def why_kept(self) -> str:
        state = self.state()
        if state == "running":
            return f"its owner, pid {self.pid} ({_cmdline(self.pid)}), is running"
        if state == "foreign":
            return f"its owner, pid {self.pid}, ran in another pid namespace; end it from there"
        return "no owner is recorded (a p4gen from before owners were recorded); end it by hand if it is yours"


def _cmdline(pid: int | None) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    return text if len(text) <= 60 else text[:57] + "..."


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
    logf = open_work_log(log, TestbedError)
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
def _env_of(pid: int) -> dict[bytes, bytes]:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split(b"=", 1) for item in env.split(b"\0") if b"=" in item)


def leftovers(net_id: str | None = None, owner: str | None = None) -> dict[int, str]:
    """pid -> network id of every live process that carries the testbed mark (of ``net_id`` only, and
    with the owner record ``owner`` only, if given)."""
    return {pid: m for pid, (m, o) in _marked(net_id).items() if owner is None or o == owner}


def _marked(net_id: str | None) -> dict[int, tuple[str, str | None]]:
    """pid -> (network id, owner record or None) of every live marked process (of ``net_id`` only)."""
    me = os.getpid()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        env = _env_of(int(entry))
        mark = env.get(MARK.encode(), b"").decode(errors="replace")
        if is_id(mark) and (net_id is None or mark == net_id) and _alive(int(entry)):
            rec = env.get(OWNER.encode())
            found[int(entry)] = (mark, None if rec is None else rec.decode(errors="replace"))
    return found


def _alive(pid: int) -> bool:
    f = _stat(pid)
    return f is not None and f[0] not in "ZX"


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


def end_own(net_id: str) -> None:
    """End what is still marked with ``net_id`` and owned by this process (a network's own teardown)."""
    end(sorted(leftovers(net_id, owner=owner_record())))


def workdirs() -> list[Path]:
    """Work directories of testbed networks: ``p4g<id>-<topology>-*`` in the user's private testbed
    directory (:mod:`.workspace`), and those an earlier p4gen left in /tmp (this user's, not symlinks)."""
    from . import workspace

    found = []
    for base in (workspace.root(), Path("/tmp")):
        for p in base.glob(f"{PREFIX}*-*"):
            try:
                st = p.lstat()
            except OSError:
                continue
            if p.is_dir() and not p.is_symlink() and st.st_uid == os.geteuid() and is_id(p.name.split("-", 1)[0]):
                found.append(p)
    return sorted(found)


def _dir_owner(d: Path) -> str | None:
    try:
        return (d / OWNER_FILE).read_text().strip() or None
    except OSError:
        return None


@dataclass
class CleanupReport:
    removed: list[str] = field(default_factory=list)     # "process 1234 (p4g1a2b)", "dir /tmp/p4g1a2b-star3-x"
    kept: list[str] = field(default_factory=list)        # one line per network left alone, saying why


def cleanup(net_id: str | None = None) -> CleanupReport:
    """End the marked processes (their namespaces and interfaces go with them) and remove the work
    directories of every network (of ``net_id`` only, if given) whose owner is dead; leave the others
    alone and say why."""
    report = CleanupReport()
    groups: dict[tuple[str, str | None], tuple[list[int], list[Path]]] = {}
    for pid, (mark, rec) in sorted(_marked(net_id).items()):
        groups.setdefault((mark, rec), ([], []))[0].append(pid)
    for d in workdirs():
        if net_id is None or d.name.startswith(f"{net_id}-"):
            groups.setdefault((d.name.split("-", 1)[0], _dir_owner(d)), ([], []))[1].append(d)
    for (mark, rec), (pids, dirs) in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        owner = Owner(rec)
        if owner.state() != "dead":
            what = [f"{len(pids)} process{'es' if len(pids) != 1 else ''}"] if pids else []
            what += [str(d) for d in dirs]
            report.kept.append(f"network {mark} ({', '.join(what)}): {owner.why_kept()}")
            continue
        end(pids)
        report.removed += [f"process {pid} ({mark})" for pid in pids]
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
            report.removed.append(f"dir {d}")
    return report
