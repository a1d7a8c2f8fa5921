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

Each property then ends ``COUNTEREXAMPLE`` with a trace, or ``NOT PROVED``
with the invariant clause and the table path that failed and how far the
search went.  A property that holds for fewer n than were asked is ``NOT
COVERED``.

Every piece is bounded by work, not time (:mod:`p4gen.verify.budget`): an induction
query by Z3's resource count, a search by the transitions it evaluates.  So
a plan gets the same verdict on a loaded machine as on an idle one, and a
verdict that a budget cut short names the budget.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Callable

from p4gen.errors import PlanError

from . import plancheck
from .budget import Budget
from .pool import Pool, Task, prover
from .mutants import base_model, mutant_model, of_variant
from .report import COUNTEREXAMPLE, NOT_COVERED, NOT_PROVED, PROVED, MutantLine, PropertyLine, VerifyReport

SEARCH_DEPTH = 20       # events per trace: the counterexample search when a proof fails, and for mutants
MAX_SEARCH_N = 8        # counterexample searches run on concrete worker sets this small


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Run:
    """The state of one verify run while its tasks finish."""

    def __init__(self, model, lo: int, hi: int, props: list[str], budget: Budget):
        self.model, self.lo, self.hi, self.props, self.budget = model, lo, hi, props, budget
        self.pool: Pool | None = None
        self.search_started = False
        self.search_ns = [n for n in range(lo, min(hi, lo + 1) + 1) if n <= MAX_SEARCH_N]

    def search(self) -> list[Task]:
        # channel 1 + i: the search at the i-th smallest n, stopped once a smaller n has a trace
        return [Task(f"search/{n}", ("search", self.model, n, SEARCH_DEPTH, None, self.budget.search_steps, 1 + i),
                     f"counterexample search n={n}, {SEARCH_DEPTH} steps", urgent=True)
                for i, n in enumerate(self.search_ns)]

    def hook(self, t: Task, res: Any, dt: float) -> list[Task]:
        if t.key.startswith("unit/") and res.failed_clauses and self.pool is not None:
            self.pool.drop("unit/")      # the invariant is not inductive: no property is proved by it
        if t.key.startswith("search/") and res.counterexample is not None and self.pool is not None:
            # the trace at the smallest n is the one reported, so the searches at larger n need not finish
            # (a trace at a larger n never stops a smaller one: the verdict must not depend on which ends first)
            n = res.n
            for i, m in enumerate(self.search_ns):
                if m > n:
                    self.pool.stop(1 + i)
                    self.pool.drop(f"search/{m}")
        if t.key.startswith("unit/") and (res.failed_clauses or res.failed_props) and not self.search_started:
            self.search_started = True
            return self.search()
        return []


def run(plan, *, fifo: bool | None = None, mutants: bool = False, workers: list[int] | None = None,
        jobs: int | None = None, budget: float = 1.0, out: Callable[[str], Any] = print,
        progress: Callable[[int, int, str], Any] | None = None,
        program: Callable[[], Any] | None = None) -> VerifyReport:
    """Prove the plan's fixed-point and protocol properties; optionally refute the mutant catalogue.

    ``program``: called once the proofs are done, it returns the program check's result (an object with
    ``lines()`` and ``to_json()``, :class:`p4gen.verify.program.ProgramCheck`), reported before the verdict.

    ``budget``: every piece's work budget is this many times the default (see :class:`Budget`)."""
    t_start = time.perf_counter()
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget >= 1 or budget == float("inf"):
        raise PlanError(f"--budget {budget!r} must be a finite number >= 1 (it multiplies the default budgets)")
    budget_ = Budget(float(budget))
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
    out(f"  budget: {budget_.text()}")
    rep.budget = budget_.text()

    pr = prover(model, lo, hi, budget_.query_rlimit)       # built here, so forked workers inherit its table paths
    units = pr.units()
    state = _Run(model, lo, hi, list(model.properties), budget_)
    tasks = [Task("fixedpoint", ("fixedpoint", required, c.value_width, budget_.query_rlimit), "fixed point"),
             Task("words", ("words", c.words, budget_.query_rlimit), f"bitmap word split ({c.words} word(s))")]
    tasks += [Task(f"unit/{u.index}", ("unit", model, lo, hi, u.index, budget_.query_rlimit), f"{group} {u.where}")
              for u in units]
    muts = of_variant(c.variant) if mutants else []
    tasks += [Task(f"mutant/{m.name}", ("search", mutant_model(m, c.table, c.slots, c.codes, c.stats), m.n,
                                        SEARCH_DEPTH, None, budget_.search_steps, 0), f"mutant {m.name}") for m in muts]
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
        status = PROVED if r.proved else NOT_PROVED if r.unknown else COUNTEREXAMPLE
        rep.lines.append(PropertyLine("fixedpoint", name, status, fp_dt / len(fp),
                                      list(r.ns), f"w={c.value_width}" if r.proved else r.detail))
    words = results["words"][0]
    refuted = [op for op, ok in words.items() if ok is False]
    rep.lines.append(PropertyLine("lemma", "bitmap_word_split", PROVED if all(words.values()) else NOT_PROVED,
                                  results["words"][1], required,
                                  f"{c.words} word(s) of 32 bits, ops {', '.join(words)}" if all(words.values())
                                  else "fails for op " + ", ".join(refuted) if refuted else
                                  f"the solver's budget (rlimit {budget_.query_rlimit:,} per query) ran out for op "
                                  + ", ".join(op for op, ok in words.items() if ok is None)))
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
            ml = MutantLine(m.name, label, m.description, m.n, dt, found.counterexample, found.reach(),
                            m.deadlock)
            rep.mutants.append(ml)
            ml.print(out)
    if workers and (lo, hi) != (2, c.max_workers):
        out(f"  note: --workers narrowed the proof to n={lo}..{hi}; the plan admits n=2..{c.max_workers}")
    if program is not None:
        res = program()
        if res is not None:
            for line in res.lines():
                out(line)
            rep.program = res.to_json()
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
    budget = state.budget
    failed_clause = next(((r.failed_clauses[0], r.where, r.failed_clauses[0] in r.unknown)
                          for r in unit_res if r.failed_clauses), None)
    cti = {p: next(((r.where, p in r.unknown) for r in unit_res if p in r.failed_props), None) for p in props}
    proved = {p: not bad_ops and failed_clause is None and cti[p] is None for p in props}
    if all(proved.values()):
        return [PropertyLine(group, p, PROVED, times[p] + share, required) for p in props]

    # the counterexample search started when the first unit failed: the trace at the smallest n is reported
    searches = sorted((res for key, (res, _) in results.items() if key.startswith("search/")), key=lambda r: r.n)
    cex = next((r.counterexample for r in searches if r.counterexample is not None), None)
    reach = ", ".join(r.reach() for r in searches)
    lines = []
    for p in props:
        t = times[p] + share
        if proved[p]:
            lines.append(PropertyLine(group, p, PROVED, t, required))
        elif cex is not None and cex.prop == p:
            detail = f"{cex.steps} steps at n={cex.n}" + (", then a deadlock" if cex.deadlock else "")
            lines.append(PropertyLine(group, p, COUNTEREXAMPLE, t, [cex.n], detail, cex))
        else:
            if bad_ops:
                why = (f"the bitmap word split lemma fails for op {bad_ops[0]}" if words[bad_ops[0]] is False else
                       f"the bitmap word split lemma ran out of the solver's budget (rlimit "
                       f"{budget.query_rlimit:,} per query) for op {bad_ops[0]}")
            elif failed_clause is not None:
                why = (f"the solver's budget (rlimit {budget.query_rlimit:,} per query) ran out on invariant clause "
                       f"{failed_clause[0]} at {failed_clause[1]}" if failed_clause[2] else
                       f"invariant clause {failed_clause[0]} not inductive on {failed_clause[1]}")
            else:
                where, unknown = cti[p]
                why = (f"the solver's budget (rlimit {budget.query_rlimit:,} per query) ran out on {where}" if unknown
                       else f"property not implied by the invariant on {where}")
            if cex is not None:
                tail = f"not searched further (see the counterexample to {cex.prop})"
            elif searches:
                tail = f"no counterexample within {reach}"
            else:
                tail = "no counterexample search ran" + ("" if state.search_ns else f" (n={state.lo} is above "
                                                                                    f"{MAX_SEARCH_N})")
            lines.append(PropertyLine(group, p, NOT_PROVED, t, required, f"{why}; {tail}"))
    return lines
