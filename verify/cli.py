"""The ``p4gen verify OUTDIR`` subcommand (registered by ``p4gen.cli``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from p4gen.errors import EXIT_PROGRAM_NOT_CHECKED, P4genError, PlanError


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("verify", help="prove the plan's fixed-point and slot-reuse properties with Z3")
    p.add_argument("outdir", metavar="OUTDIR", help="a build directory holding plan.json")
    p.add_argument("--no-fifo", action="store_true",
                   help="drop the per-worker-link FIFO assumption (the reference variant then has a counterexample)")
    p.add_argument("--mutants", nargs="?", const="table", choices=("table", "generator", "all"), metavar="KIND",
                   help="also refute seeded mutants: 'table' (the default) the catalogue of decision-table and worker "
                        "mutants, 'generator' faults in the P4 forms the renderer prints (each must be refused by "
                        "the program check; needs p4test), 'all' both")
    p.add_argument("--plan-only", action="store_true",
                   help="prove the plan and bind the program to it, but do not check program.p4 through p4c's IR "
                        "(without this, a verify with no p4test on PATH exits with status 3)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="prove for n=N workers only (default: every n from 2 to max_workers, in one proof)")
    p.add_argument("--jobs", type=int, metavar="N", help="proofs run in N processes (default: the number of cores)")
    p.add_argument("--budget", type=_budget, default=1.0, metavar="F",
                   help="multiply every work budget by F >= 1: the solver's resource limit per proof query and the "
                        "transitions per counterexample search (default 1; budgets count work, not time, so a "
                        "verdict does not depend on the machine's load)")
    p.add_argument("--json", metavar="PATH", help="write the report here (default OUTDIR/verify.json; a file p4gen "
                                                   "wrote, or a new one)")
    p.set_defaults(func=handler)
    return p


def _budget(text: str) -> float:
    try:
        f = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= f < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 1 (it multiplies the default budgets)")
    return f


class _ProgressLine:
    """``done/total  label`` redrawn in place on a terminal; :meth:`clear` wipes it before other output."""

    def __init__(self, stream):
        self.stream = stream
        self.shown = False

    def __call__(self, done: int, total: int, label: str) -> None:
        self.stream.write(f"\r\x1b[Kverify {done}/{total}  {label[:100]}")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _progress_line(stream):
    """The progress line for ``stream``: redrawn in place on a terminal, else plain lines now and then
    (:class:`p4gen.progress.Every`)."""
    from p4gen.progress import Every

    return _ProgressLine(stream) if stream.isatty() else Every("verify", stream)


REPORT_HINT = "move it away or pass --json PATH"
NO_PROGRAM_CHECK = EXIT_PROGRAM_NOT_CHECKED    # the plan is proved, but program.p4 was not read (no p4test)


def program_step(plan, directory: Path, plan_only: bool, need: bool):
    """What checks program.p4 beside the proofs: a callable the runner calls once they are done (its
    ``missing`` attribute says p4test was not found).  p4test starts now, in a thread of its own."""
    from . import program

    if plan_only:
        def skipped():
            return program.NotChecked("--plan-only: the plan is proved and the program bound to it by rendering; "
                                      "p4c's reading of program.p4 is not checked")
        skipped.missing = False
        return skipped
    if not (directory / "program.p4").exists():
        def absent():
            return program.NotChecked("there is no program.p4 beside plan.json (a plan alone: nothing else to check)")
        absent.missing = False
        return absent
    exe = program.find()
    if exe is None:
        if need:
            raise PlanError("--mutants generator needs p4test on PATH: each mutant is read by p4c's front end")

        def missing():
            return program.NotChecked(program.MISSING, missing=True)
        missing.missing = True
        return missing
    job = program.Background(plan, directory, exe)

    def result():
        return job.result()
    result.missing = False
    return result


def _generator_mutants(plan, directory: Path, jobs: int | None, out) -> list:
    from .program import mutants

    out("generator mutants (faults in the P4 forms the renderer prints; each must be refused):")
    results = mutants.run(plan, directory, jobs=jobs)
    for r in results:
        out(r.line())
    return [r.to_json() for r in results]


def handler(args: argparse.Namespace) -> int:
    from p4gen.filewrite import JSON, check_file, write_file
    from p4gen.plan import Plan

    from . import artifacts, plancheck
    from .runner import run

    progress = _progress_line(sys.stderr)

    def out(line: str) -> None:
        if progress is not None:        # a result line must not land on the end of the progress line
            progress.clear()
        print(line, flush=True)
    try:
        outdir = Path(args.outdir)
        if not outdir.exists():
            raise PlanError(f"{str(outdir)!r} does not exist (run p4gen build first)")
        if args.jobs is not None and args.jobs < 1:
            raise PlanError(f"--jobs {args.jobs} must be at least 1")
        if args.json is not None and not args.json:
            raise PlanError("--json path '' is empty; name a file")
        plan = Plan.load(outdir)
        plancheck.check(plan)
        directory = outdir if outdir.is_dir() else outdir.parent
        digests = artifacts.bind(plan, directory)          # refuses a program.p4 / p4info.txt it did not prove
        path = Path(args.json) if args.json else directory / "verify.json"
        check_file(path, JSON, "verify report", PlanError, hint=REPORT_HINT)     # before the proofs run
        mutants = args.mutants or ""
        check_program = program_step(plan, directory, args.plan_only, mutants in ("generator", "all"))
        try:
            report = run(plan, fifo=False if args.no_fifo else None, mutants=mutants in ("table", "all"),
                         workers=[args.workers] if args.workers is not None else None, jobs=args.jobs,
                         budget=args.budget,
                         out=out, progress=progress, program=check_program)
            if mutants in ("generator", "all"):
                report.generator_mutants = _generator_mutants(plan, directory, args.jobs, out)
        finally:
            if progress is not None:
                progress.clear()
        report.artifacts = digests
        write_file(path, json.dumps(report.to_json()), JSON, "verify report", PlanError, hint=REPORT_HINT)
        print(f"report: {path}")
        refused = report.program is not None and report.program.get("verdict") == "REFUSED"
        if refused:
            print(f"p4gen: error: {report.program['differences'][0]}", file=sys.stderr)
        if not report.ok:
            return 1
        return NO_PROGRAM_CHECK if getattr(check_program, "missing", False) else 0
    except P4genError as exc:
        print(f"p4gen: error: {exc}", file=sys.stderr)
        return 1
