"""What a testbed test must leave as it found: network namespaces, root interfaces, processes.

``snapshot()`` before, ``leaks(before)`` after: every network namespace that
some process holds (by inode), the named namespaces of ``ip netns``, the
interfaces of the root namespace, and the processes that carry the
testbed's mark.  An empty list means nothing was left behind.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from p4gen.testbed import procs


def _netns_inodes() -> set[str]:
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.add(os.readlink(f"/proc/{pid}/ns/net"))
            except OSError:
                pass
    return out


def _lines(*cmd: str) -> set[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    return {ln.split()[0] if cmd[1] == "netns" else ln.split(":")[1].strip().split("@")[0]
            for ln in r.stdout.splitlines() if ln.strip()}


@dataclass(frozen=True)
class Snapshot:
    namespaces: frozenset
    named: frozenset
    links: frozenset
    marked: frozenset


def snapshot() -> Snapshot:
    return Snapshot(frozenset(_netns_inodes()), frozenset(_lines("ip", "netns", "list")),
                    frozenset(_lines("ip", "-o", "link", "show")), frozenset(procs.leftovers()))


def leaks(before: Snapshot) -> list[str]:
    after = snapshot()
    out = [f"namespace {n}" for n in sorted(after.namespaces - before.namespaces)]
    out += [f"named namespace {n}" for n in sorted(after.named - before.named)]
    out += [f"root interface {n}" for n in sorted(after.links - before.links)]
    out += [f"process {p}" for p in sorted(after.marked - before.marked)]
    return out
