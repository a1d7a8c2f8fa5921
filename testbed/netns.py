"""System plumbing: network namespaces, veth pairs, tc shaping, iptables loss, processes.

Every name the testbed creates starts with :data:`PREFIX` (namespaces
``p4g<id>-<node>``); veth ends are created directly inside those
namespaces, so deleting the namespaces removes them and nothing is left in
the root namespace.  :func:`cleanup` removes whatever a crashed run left.
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

from .errors import CommandError, PrivilegeError

PREFIX = "p4g"
TOOLS = ("ip", "tc", "iptables", "ethtool")


def missing_requirements(tools: tuple[str, ...] = TOOLS) -> str | None:
    """A one-line reason why the testbed cannot run here, or None."""
    if os.geteuid() != 0:
        return "the testbed needs root (network namespaces, veth, tc)"
    gone = [t for t in tools if shutil.which(t) is None]
    if gone:
        return f"{', '.join(gone)} not on PATH (Debian packages: iproute2, iptables, ethtool)"
    return None


def require() -> None:
    why = missing_requirements()
    if why:
        raise PrivilegeError(why)


def sh(args: list[str], ns: str | None = None, check: bool = True, timeout: float = 20.0) -> str:
    """Run a command (inside namespace ``ns``); return stdout or raise CommandError with stderr."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandError(f"`{' '.join(cmd)}` did not finish in {timeout:.0f} s") from None
    except FileNotFoundError:
        raise CommandError(f"`{cmd[0]}` is not installed") from None
    if check and r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise CommandError(f"`{' '.join(cmd)}` failed with status {r.returncode}: {err}")
    return r.stdout


def _ours(name: str, prefix: str) -> bool:
    """A testbed name: ``prefix`` + 4 hex digits of the network's id + ``-`` (e.g. p4g1a2b-h1)."""
    return re.fullmatch(rf"{re.escape(prefix)}[0-9a-f]{{4}}-.+", name) is not None


def namespaces(prefix: str = PREFIX) -> list[str]:
    out = sh(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if _ours(n, prefix)]


def add_namespace(name: str) -> None:
    sh(["ip", "netns", "add", name])
    sh(["ip", "link", "set", "lo", "up"], ns=name)
    sh(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"], ns=name, check=False)
    sh(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"], ns=name, check=False)


def namespace_pids(name: str) -> list[int]:
    out = sh(["ip", "netns", "pids", name], check=False)
    return [int(x) for x in out.split() if x.isdigit()]


def delete_namespace(name: str, grace: float = 2.0) -> None:
    """Stop the processes left in ``name`` (TERM, then KILL) and delete it."""
    pids = namespace_pids(name)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        while pids and time.monotonic() < end:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        if not pids:
            break
    sh(["ip", "netns", "del", name], check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def root_links(prefix: str = PREFIX) -> list[str]:
    """Interfaces of the root namespace whose name starts with ``prefix`` (none should exist)."""
    out = sh(["ip", "-o", "link", "show"], check=False)
    names = []
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return [n for n in names if _ours(n, prefix)]


def veth(ns_a: str, a: str, ns_b: str, b: str) -> None:
    """A veth pair with end ``a`` in ``ns_a`` and ``b`` in ``ns_b``, both up, offloads off."""
    sh(["ip", "link", "add", a, "netns", ns_a, "type", "veth", "peer", "name", b, "netns", ns_b])
    for ns, dev in ((ns_a, a), (ns_b, b)):
        # A software switch forwards whole frames: a GSO super-frame or a frame with a
        # partial (offloaded) checksum would arrive broken on the far side.
        sh(["ethtool", "-K", dev, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"],
           ns=ns, check=False)
        sh(["ip", "link", "set", dev, "up"], ns=ns)


def shape(ns: str, dev: str, mbit: float, queue: int = 1000) -> None:
    """Limit the egress of ``dev`` to ``mbit`` Mbit/s with an htb class and a pfifo of ``queue`` frames."""
    rate = f"{int(round(mbit * 1000))}kbit"
    sh(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"], ns=ns)
    sh(["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate],
       ns=ns)
    sh(["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", str(queue)], ns=ns)


def set_loss(ns: str, dev: str, p: float) -> None:
    """Drop each frame in and out of ``dev`` with probability ``p`` (iptables statistic match)."""
    sh(["iptables", "-F"], ns=ns)
    if p <= 0:
        return
    prob = f"{p:.6f}"
    sh(["iptables", "-A", "OUTPUT", "-o", dev, "-m", "statistic", "--mode", "random", "--probability", prob,
        "-j", "DROP"], ns=ns)
    sh(["iptables", "-A", "INPUT", "-i", dev, "-m", "statistic", "--mode", "random", "--probability", prob,
        "-j", "DROP"], ns=ns)


def tx_packets(ns: str, dev: str) -> tuple[int, int]:
    """(packets, bytes) sent by ``dev``."""
    base = f"/sys/class/net/{dev}/statistics"
    out = sh(["cat", f"{base}/tx_packets", f"{base}/tx_bytes"], ns=ns)
    a, b = out.split()
    return int(a), int(b)


@dataclass
class Proc:
    """A process started in a namespace, with its log file; stopped by its own id."""

    name: str
    popen: subprocess.Popen
    log: Path
    extra: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
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
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def tail(self, lines: int = 3) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


def spawn(name: str, ns: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
          pipes: bool = False) -> Proc:
    """Start ``argv`` inside ``ns`` in its own session, stderr (and stdout unless ``pipes``) to ``log``."""
    cmd = ["ip", "netns", "exec", ns] + [str(a) for a in argv]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    logf = open(log, "wb")
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                             stdout=subprocess.PIPE if pipes else logf, stderr=logf, env=full_env,
                             start_new_session=True, text=pipes, bufsize=1 if pipes else -1)
    finally:
        logf.close()
    return Proc(name, p, log)


def cleanup(prefix: str = PREFIX) -> list[str]:
    """Remove every namespace (with its processes and veths) and root link named ``prefix*``."""
    removed = []
    for ns in namespaces(prefix):
        delete_namespace(ns)
        removed.append(f"netns {ns}")
    for dev in root_links(prefix):
        sh(["ip", "link", "del", dev], check=False)
        removed.append(f"link {dev}")
    return removed
