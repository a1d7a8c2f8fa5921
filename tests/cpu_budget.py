"""The fast tier's CPU budget, enforced: a test not marked slow that takes more than a few CPU-seconds fails.

Loaded by ``conftest.py``.  Each test's CPU time is its setup and call phases: this process's user and
system time (every thread) plus that of the child processes it waited for.  CPU time, unlike wall time,
hardly moves with the machine's load, so the check holds on a busy machine too.

* ``P4GEN_FAST_CPU_LIMIT`` (CPU-seconds, default :data:`DEFAULT_LIMIT`) is the most a test not marked
  ``slow`` may take; ``0`` turns the check off (e.g. under a profiler or coverage).
* A test that needs more is made cheaper or marked ``@pytest.mark.slow`` (the fast tier is
  ``-m "not slow"``; ``.ci/test`` with no arguments still runs it).
* ``P4GEN_CPU_LOG=FILE`` writes every test's CPU-seconds and wall seconds to FILE, one ``cpu wall nodeid``
  line a test, slow ones too, costliest first.
* The run ends with one line: the CPU-seconds the tests not marked slow took in all, and the costliest.
"""

from __future__ import annotations

import os
import resource
import time

import pytest

DEFAULT_LIMIT = 3.0
_CPU = pytest.StashKey[float]()
_WALL = pytest.StashKey[float]()


def limit() -> float:
    raw = os.environ.get("P4GEN_FAST_CPU_LIMIT", "")
    try:
        return float(raw) if raw else DEFAULT_LIMIT
    except ValueError:
        raise pytest.UsageError(f"P4GEN_FAST_CPU_LIMIT={raw!r} must be a number of CPU-seconds (0: no limit)")


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuBudget:
    def __init__(self, config: pytest.Config):
        self.limit = limit()
        self.fast: dict[str, float] = {}
        self.every: dict[str, tuple[float, float]] = {}
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        return (yield from _wrap(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from _wrap(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        if call.when != "call":
            return rep
        cpu = item.stash.get(_CPU, 0.0)
        self.every[item.nodeid] = (cpu, item.stash.get(_WALL, 0.0))
        if item.get_closest_marker("slow") is not None:
            return rep
        self.fast[item.nodeid] = cpu
        if self.limit > 0 and cpu > self.limit and rep.passed:
            rep.outcome = "failed"
            rep.longrepr = (f"{item.nodeid} took {cpu:.1f} CPU-seconds (setup and call), more than the "
                            f"{self.limit:g} a test of the fast tier may take: make it cheaper or mark it "
                            f"@pytest.mark.slow (P4GEN_FAST_CPU_LIMIT sets the limit)")
        return rep

    def pytest_terminal_summary(self, terminalreporter):
        log = os.environ.get("P4GEN_CPU_LOG")
        if log:
            with open(log, "w") as f:
                f.writelines(f"{cpu:.2f} {wall:.2f} {nodeid}\n"
                             for nodeid, (cpu, wall) in sorted(self.every.items(), key=lambda kv: -kv[1][0]))
        if not self.fast:
            return
        top = sorted(self.fast.items(), key=lambda kv: -kv[1])[:3]
        costliest = ", ".join(f"{nodeid} {cpu:.1f}" for nodeid, cpu in top)
        terminalreporter.write_line(
            f"fast-tier CPU: {sum(self.fast.values()):.1f} CPU-seconds in {len(self.fast)} tests not marked slow "
            f"(limit {self.limit:g} each; costliest: {costliest})")


def _wrap(item):
    start, t0 = cpu_seconds(), time.perf_counter()
    try:
        return (yield)
    finally:
        item.stash[_CPU] = item.stash.get(_CPU, 0.0) + cpu_seconds() - start
        item.stash[_WALL] = item.stash.get(_WALL, 0.0) + time.perf_counter() - t0
