"""``p4gen verify``: prove a plan's fixed-point and protocol properties for every n it admits, and report.

The plan is checked first (:mod:`p4gen.verify.plancheck`).  Then, in one
:class:`~p4gen.verify.pool.Pool`:

* the fixed-point proofs and the bitmap word-split lemma;
* one induction unit per (event, table path) of the plan's protocol model,
  on the symbolic worker set ``n = lo..hi`` (``2..max_workers`` unless
  ``--workers`` narrows it), so one proof covers every n;
* as soon as a unit fails, the search for a counterexample (bounded model
  checking at the two smallest n), ahead of the units still queued;
* with ``mutants``, every catalogue mutant of the plan's variant, applied to
  the plan's own table.

When the induction fails and no trace turned up, the search goes deeper;
each property then ends ``COUNTEREXAMPLE`` with a trace, or ``NOT PROVED``
with the invariant clause and the table path that failed.  A property that
holds for fewer n than were asked is ``NOT COVERED``.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Callable

from p4gen.errors import PlanError

from . import plancheck
from .pool import Pool, Task, prover
from .mutants import base_model, mutant_model, of_variant
from .report import COUNTEREXAMPLE, NOT_COVERED, NOT_PROVED, PROVED, MutantLine, PropertyLine, VerifyReport

BMC_DEPTH = 12          # the counterexample search alongside the proofs, and for mutants
DEEP_DEPTH = 20         # when the induction failed and that search found nothing
SEARCH_BUDGET = 60.0    # seconds per counterexample search (each n)
MAX_SEARCH_N = 8        # counterexample searches run on concrete worker sets this small


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Run:
    """The state of one verify run while its tasks finish."""

    def __init__(self, model, lo: int, hi: int, props: list[str]):
        self.model, self.lo, self.hi, self.props = model, lo, hi, props
        self.pool: Pool | None = None
        self.failed_unit = False
        self.search_started = False
        self.search_ns = [n for n in range(lo, min(hi, lo + 1) + 1) if n <= MAX_SEARCH_N]

    def search(self, depth: int, tag: str, start: int = 0) -> list[Task]:
        ch = 1 if tag == "1" else 2
        return [Task(f"search/{tag}/{n}", ("search", self.model, n, depth, None, SEARCH_BUDGET, start, ch),
                     f"counterexample search n={n}, {depth} steps", urgent=True) for n in self.search_ns]

    def hook(self, t: Task, res: Any, dt: float) -> list[Task]:
        if t.key.startswith("unit/") and res.failed_clauses and self.pool is not None:
            self.pool.drop("unit/")      # the invariant is not inductive: no property is proved by it
        if t.key.startswith("search/") and res.counterexample is not None and self.pool is not None:
            # one trace is what a user acts on: the other sizes of this search need not finish
            tag = t.key.split("/")[1]
            self.pool.stop(1 if tag == "1" else 2)
            self.pool.drop(f"search/{tag}/")
        if t.key.startswith("unit/") and (res.failed_clauses or res.failed_props) and not self.search_started:
            self.search_started = True
            return self.search(BMC_DEPTH, "1")
        return []


def run(plan, *, fifo: bool | None = None, mutants: bool = False, workers: list[int] | None = None,
        jobs: int | None = None, out: Callable[[str], Any] = print,
        progress: Callable[[int, int, str], Any] | None = None) -> VerifyReport:
    """Prove the plan's fixed-point and protocol properties; optionally refute the mutant catalogue."""
    t_start = time.perf_counter()
    c = plancheck.check(plan)
    if workers:
        bad = [n for n in workers if not 2 <= n <= c.max_workers]
        if bad:
            raise PlanError(f"--workers {bad[0]} must be in 2..{c.max_workers} (the plan's max_workers)")
        lo, hi = min(workers), max(workers)
        if sorted(set(workers)) != list(range(lo, hi + 1)):
            raise PlanError("--workers must name one worker count or a contiguous range")
    else:
        lo, hi = 2, c.max_workers
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise PlanError(f"--jobs {jobs} must be at least 1")
    model = base_model(c.variant, c.table, c.slots, c.codes, c.stats)
    if fifo is not None and hasattr(model, "fifo"):
        model = replace(model, fifo=fifo)
    fifo_used = getattr(model, "fifo", False)
    group = model.group
    label = c.variant.label
    required = list(range(lo, hi + 1))
    rep = VerifyReport(variant=label, fifo=fifo_used, assumptions=model.assumptions(fifo_used, label),
                       required=required, jobs=jobs)
    out(f"p4gen verify: {c.protocol} {c.table.variant or label} variant, value_width={c.value_width}, "
        f"max_workers={c.max_workers}, slots={c.slots}, n={lo}..{hi} in one proof, {jobs} job(s)")
    for a in rep.assumptions:
        out(f"  assume: {a}")

    pr = prover(model, lo, hi)       # built here, so forked workers inherit its table paths
    units = pr.units()
    state = _Run(model, lo, hi, list(model.properties))
    tasks = [Task("fixedpoint", ("fixedpoint", required, c.value_width), "fixed point"),
             Task("words", ("words", c.words), f"bitmap word split ({c.words} word(s))")]
    tasks += [Task(f"unit/{u.index}", ("unit", model, lo, hi, u.index), f"{group} {u.where}") for u in units]
    muts = of_variant(c.variant) if mutants else []
    tasks += [Task(f"mutant/{m.name}", ("search", mutant_model(m, c.table, c.slots, c.codes, c.stats), m.n, BMC_DEPTH, None, None, 0, 3),
                   f"mutant {m.name}") for m in muts]
    pool = Pool(jobs, progress)
    state.pool = pool
    try:
        results = pool.run(tasks, state.hook)
        unit_res = [results[f"unit/{u.index}"][0] for u in units if f"unit/{u.index}" in results]
        lines = _protocol_lines(group, state, unit_res, results, results["words"][0], pool)
    finally:
        pool.close()

    fp, fp_dt = results["fixedpoint"]
    for name, r in fp.items():
        rep.lines.append(PropertyLine("fixedpoint", name, PROVED if r.proved else COUNTEREXAMPLE, fp_dt / len(fp),
                                      list(r.ns), f"w={c.value_width}" if r.proved else r.detail))
    words = results["words"][0]
    rep.lines.append(PropertyLine("lemma", "bitmap_word_split", PROVED if all(words.values()) else NOT_PROVED,
                                  results["words"][1], required,
                                  f"{c.words} word(s) of 32 bits, ops {', '.join(words)}" if all(words.values())
                                  else "fails for op " + ", ".join(op for op, ok in words.items() if not ok)))
    rep.lines += lines
    for line in rep.lines:
        if line.status == PROVED and line.ns != required:
            missing = sorted(set(required) - set(line.ns))
            line.status, line.detail = NOT_COVERED, f"not proved for n={missing[0]}..{missing[-1]}"
    for line in rep.lines:
        line.print(out)
    if mutants:
        out(f"mutants of the {label} table (each must be refuted by a concrete trace):")
        for m in muts:
            found, dt = results[f"mutant/{m.name}"]
            ml = MutantLine(m.name, label, m.description, m.n, dt, found.counterexample, found.searched)
            rep.mutants.append(ml)
            ml.print(out)
    if workers and (lo, hi) != (2, c.max_workers):
        out(f"  note: --workers narrowed the proof to n={lo}..{hi}; the plan admits n=2..{c.max_workers}")
    rep.seconds = time.perf_counter() - t_start
    out(f"{'verified' if rep.ok else 'FAILED'} in {rep.seconds:.1f}s")
    return rep


def _protocol_lines(group: str, state: _Run, unit_res: list, results: dict, words: dict, pool: Pool) -> list[PropertyLine]:
    props = state.props
    required = list(range(state.lo, state.hi + 1))
    times = {p: 0.0 for p in props}
    inv_time = 0.0
    for r in unit_res:
        for name, dt in r.times.items():
            if name in times:
                times[name] += dt
            else:
                inv_time += dt
    share = inv_time / len(props)
    bad_ops = [op for op, ok in words.items() if not ok]
    failed_clause = next(((r.failed_clauses[0], r.where) for r in unit_res if r.failed_clauses), None)
    cti = {p: next((r.where for r in unit_res if p in r.failed_props), None) for p in props}
    proved = {p: not bad_ops and failed_clause is None and cti[p] is None for p in props}
    if all(proved.values()):
        return [PropertyLine(group, p, PROVED, times[p] + share, required) for p in props]

    # counterexamples: the search started when the first unit failed; deeper when it found none
    found: dict[str, Any] = {}
    searched: dict[int, int] = {}

    def collect(res_map: dict) -> None:
        for key, (res, _) in res_map.items():
            if not key.startswith("search/"):
                continue
            cex = res.counterexample
            if cex is not None and (cex.prop not in found or cex.steps < found[cex.prop].steps):
                found[cex.prop] = cex
            if cex is None:
                searched[res.n] = max(searched.get(res.n, 0), res.searched)
    collect(results)
    if not found and state.search_ns:
        collect(pool.run(state.search(DEEP_DEPTH, "2", start=BMC_DEPTH), state.hook))
    where = " ".join(f"{d} steps at n={n}," for n, d in sorted(searched.items())).rstrip(",")
    lines = []
    for p in props:
        t = times[p] + share
        if proved[p]:
            lines.append(PropertyLine(group, p, PROVED, t, required))
        elif p in found:
            cex = found[p]
            lines.append(PropertyLine(group, p, COUNTEREXAMPLE, t, [cex.n], f"{cex.steps} steps at n={cex.n}", cex))
        else:
            if bad_ops:
                why = f"the bitmap word split lemma fails for op {bad_ops[0]}"
            elif failed_clause is not None:
                why = f"invariant clause {failed_clause[0]} not inductive on {failed_clause[1]}"
            else:
                why = f"property not implied by the invariant on {cti[p]}"
            if found:
                tail = f"not searched further (see the counterexample to {sorted(found)[0]})"
            elif where:
                tail = f"no counterexample within {where}"
            else:
                tail = "no counterexample search ran" + ("" if state.search_ns else f" (n={state.lo} is above "
                                                                                    f"{MAX_SEARCH_N})")
            lines.append(PropertyLine(group, p, NOT_PROVED, t, required, f"{why}; {tail}"))
    return lines
