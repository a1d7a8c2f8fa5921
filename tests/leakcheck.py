"""What a testbed test must leave as it found: network namespaces, root interfaces, processes.

``snapshot()`` before, ``leaks(before)`` after: the interfaces of the root
namespace, the processes that descend from the test process, and the
network namespaces (by inode) that those processes hold.  The test process
is made a child subreaper, so a process whose parent died is reparented to
it rather than to init and still counts.  Namespaces and processes of
other people's runs on the same machine are not counted: only a process of
ours can hold a namespace of ours open.  An empty list means nothing was
left behind.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _ours() -> dict[int, str]:
    """pid -> network namespace inode of every live process that descends from this one."""
    parent: dict[int, int] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:
                continue
            fields = stat.rsplit(") ", 1)[1].split()
            if fields[0] != "Z":
                parent[int(pid)] = int(fields[1])
    me = os.getpid()

    def descends(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            seen.add(pid)
            pid = parent.get(pid, 0)
            if pid == me:
                return True
        return False

    out = {}
    for pid in parent:
        if descends(pid):
            try:
                out[pid] = os.readlink(f"/proc/{pid}/ns/net")
            except OSError:
                pass
    return out


def _lines(*cmd: str) -> set[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    return {ln.split(":")[1].strip().split("@")[0] for ln in r.stdout.splitlines() if ln.strip()}


@dataclass(frozen=True)
class Snapshot:
    namespaces: frozenset
    links: frozenset
    processes: frozenset


def snapshot() -> Snapshot:
    ours = _ours()
    return Snapshot(frozenset(ours.values()), frozenset(_lines("ip", "-o", "link", "show")), frozenset(ours))


def leaks(before: Snapshot) -> list[str]:
    after = snapshot()
    out = [f"namespace {n}" for n in sorted(after.namespaces - before.namespaces)]
    out += [f"root interface {n}" for n in sorted(after.links - before.links)]
    out += [f"process {p}" for p in sorted(after.processes - before.processes)]
    return out
