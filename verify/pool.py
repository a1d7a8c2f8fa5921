"""The independent pieces of a ``p4gen verify`` run, and a pool that runs them.

A job is a picklable tuple; :func:`run` executes one in whatever process it
lands in.  Kinds:

* ``("fixedpoint", ns, w, rlimit)``: the fixed-point properties for the worker counts ``ns``;
* ``("words", words, rlimit)``: the bitmap word-split lemma for every bitmap op;
* ``("unit", model, lo, hi, i, rlimit)``: induction unit ``i`` of ``model`` for every n in ``lo..hi``;
* ``("search", model, n, depth, props, steps, channel)``: a counterexample search at n workers
  (at most ``steps`` transitions), which ends early once its stop channel (see
  :meth:`Pool.stop`) is set.

:class:`Pool` keeps at most ``jobs`` of them running (in worker processes
when ``jobs > 1``), starts the most urgent pending one whenever a slot frees
up, and reports progress.  Provers built in the parent before the pool
starts are inherited by forked workers, so a unit does not rebuild the
model's table paths.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import multiprocessing
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import fixedpoint
from .cardinality import word_split_lemmas
from .engine import QUERY_RLIMIT, Model, Prover
from .explore import search
from .workers import Workers

_FLAGS: Any = None
_PROVERS: dict[tuple, Prover] = {}
CHANNELS = 4            # stop flags: 0 stops everything, the others one group of tasks each


def _init(flags) -> None:
    global _FLAGS
    _FLAGS = flags


class _Stop:
    """``is_set()`` once the run or the task's channel is told to stop."""

    def __init__(self, channel: int):
        self.channel = channel

    def is_set(self) -> bool:
        return bool(_FLAGS is not None and (_FLAGS[0] or _FLAGS[self.channel]))


def model_key(model: Model) -> str:
    fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.init}
    return json.dumps([type(model).__name__, fields], sort_keys=True, default=str)


def prover(model: Model, lo: int, hi: int, rlimit: int = QUERY_RLIMIT) -> Prover:
    """The (cached) prover of ``model`` for every n in lo..hi, its units enumerated."""
    key = (model_key(model), lo, hi, rlimit)
    if key not in _PROVERS:
        p = Prover(model, Workers.between(lo, hi), rlimit)
        p.units()
        _PROVERS[key] = p
    return _PROVERS[key]


def run(job: tuple) -> tuple[Any, float]:
    """Execute one job; (result, seconds)."""
    t0 = time.perf_counter()
    kind = job[0]
    if kind == "fixedpoint":
        res: Any = fixedpoint.prove_all(job[1], job[2], job[3])
    elif kind == "words":
        res = word_split_lemmas(job[1], job[2])
    elif kind == "unit":
        _, model, lo, hi, i, rlimit = job
        p = prover(model, lo, hi, rlimit)
        res = p.check(p.units()[i])
    elif kind == "search":
        _, model, n, depth, props, steps, channel = job
        res = search(model, n, depth, props, stop=_Stop(channel), budget=steps)
    else:
        raise KeyError(f"job kind {kind!r}")
    return res, time.perf_counter() - t0


@dataclass
class Task:
    key: str
    job: tuple
    label: str
    urgent: bool = False


class Pool:
    """Runs :class:`Task` lists; ``progress(done, total, label)`` after every start and finish."""

    def __init__(self, jobs: int, progress: Callable[[int, int, str], Any] | None = None):
        self.jobs = max(1, jobs)
        self.progress = progress
        self.done = self.total = 0
        self._pending: list[Task] = []
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.flags = ctx.Array("b", CHANNELS, lock=False)
        self._ex = (cf.ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_init, initargs=(self.flags,))
                    if self.jobs > 1 else None)
        if self._ex is None:
            _init(self.flags)

    def _tick(self, label: str) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total, label)

    def run(self, tasks: list[Task], hook: Callable[[Task, Any, float], list[Task]] | None = None) -> dict[str, tuple]:
        """Run ``tasks`` (and what ``hook`` adds when a task finishes); {key: (result, seconds)}."""
        self._pending = pending = list(tasks)
        self.total += len(pending)
        results: dict[str, tuple] = {}
        inflight: dict[cf.Future, Task] = {}
        try:
            while pending or inflight:
                while pending and len(inflight) < self.jobs:
                    pending.sort(key=lambda t: not t.urgent)
                    t = pending.pop(0)
                    self._tick(t.label)
                    if self._ex is not None:
                        fut = self._ex.submit(run, t.job)
                    else:
                        fut = cf.Future()
                        fut.set_result(run(t.job))
                    inflight[fut] = t
                finished, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    t = inflight.pop(fut)
                    res, dt = fut.result()
                    results[t.key] = (res, dt)
                    self.done += 1
                    self._tick(t.label)
                    more = hook(t, res, dt) if hook else []
                    self.total += len(more)
                    pending.extend(more)
        except BaseException:
            self.stop(0)
            self.close()
            raise
        return results

    def stop(self, channel: int) -> None:
        """Tell the running tasks of ``channel`` (0: all) to end."""
        self.flags[channel] = 1

    def drop(self, prefix: str) -> None:
        """Forget the pending tasks whose key starts with ``prefix`` (running ones finish)."""
        keep = [t for t in self._pending if not t.key.startswith(prefix)]
        self.total -= len(self._pending) - len(keep)
        self._pending[:] = keep

    def close(self) -> None:
        if self._ex is not None:
            self._ex.shutdown(wait=True, cancel_futures=True)
            self._ex = None
