"""``p4gen plan``: the best pipeline layout of a workload on a target, and ``build --layout``.

Only this module and :mod:`p4gen.cli` print.  Z3 is imported inside the search, when a
placement is certified, never at start-up.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import protocols
from ..errors import SpecError
from ..progress import steps
from .workload_args import (add_workload_args, check_workload_given, given_workload, opt, value_widths,
                            workload_from_args)

__all__ = ["add_workload_args", "build_layout", "handler", "register", "run_search"]



def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help="find the best pipeline layout of a workload on a target, with its predicted time")
    tgt = p.add_mutually_exclusive_group()
    tgt.add_argument("--target", default="tofino", help="built-in target profile (default tofino)")
    tgt.add_argument("--target-file", help="a target profile of your own (TOML)")
    p.add_argument("--workers", type=int, help="workers of the job (required unless --jobs)")
    names = protocols.protocol_names()
    p.add_argument("--protocol", default=protocols.DEFAULT.name,
                   help=f"{' or '.join(names)} (default {protocols.DEFAULT.name})")
    p.add_argument("--variant", default=None,
                   help=f"the protocol's variant: {' or '.join(protocols.variant_names())} "
                        f"(default: the one that assumes nothing of the network)")
    add_workload_args(p, required=False, needed=" (required unless --jobs)")
    p.add_argument("--jobs", metavar="FILE", help="several jobs on one switch (TOML); see docs/layout.md")
    p.add_argument("--out", help="layout file to write (default p4gen-out/<target>-layout.json; with --jobs a directory)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-certify", action="store_true", help="skip the Z3 certificate of the best stage placement")
    p.set_defaults(func=handler)
    return p


def _profile(args: argparse.Namespace):
    from ..target import load_target, load_target_file

    return load_target_file(args.target_file) if args.target_file is not None else load_target(args.target)


def run_search(args: argparse.Namespace, profile, workers: int | None, certify: bool = True):
    from .search import search

    wl = workload_from_args(args, workers)
    return search(profile, wl, protocol=args.protocol, variant=args.variant, widths=value_widths(args),
                  objective=opt(args, "objective"), slack=opt(args, "slack") / 100, certify=certify,
                  fill_rtt=opt(args, "fill_rtt"), headroom=opt(args, "window_headroom"), progress=steps("plan"))


def handler(args: argparse.Namespace) -> int:
    """``p4gen plan``; an error propagates to the CLI's one exit (:func:`p4gen.cliexit.run_command`)."""
    if not args.jobs:
        check_workload_given(args, args.workers)
    profile = _profile(args)
    if args.jobs:
        from .job_split_cli import plan_jobs_cli

        return plan_jobs_cli(args, profile)
    from ..filewrite import JSON, check_file
    from .layoutfile import OUT_HINT, layout_document, write_layout

    out = Path(args.out) if args.out is not None else Path("p4gen-out") / f"{profile.name}-layout.json"
    check_file(args.out if args.out is not None else out, JSON, "layout file", SpecError, hint=OUT_HINT)
    res = run_search(args, profile, args.workers, certify=not args.no_certify)
    from .report import render_text, result_dict

    doc = layout_document(profile.name, res.best.spec, res.best.shape, objective=res.objective,
                          workload=res.workload.to_dict(), predicted=res.best.prediction.to_dict())
    write_layout(args.out if args.out is not None else out, doc)
    if args.json:
        print(json.dumps({**result_dict(res), "layout_file": str(out)}, indent=2, sort_keys=True))
    else:
        print(render_text(res))
        print(f"layout written to {out}; build it with: p4gen build --layout {out}")
    return 0


def build_layout(args: argparse.Namespace):
    """(spec, profile, shape) for ``p4gen build --layout best|FILE``."""
    from ..target import load_target, load_target_file

    searched = ("spec", "slots", "elements", "value_width", "jobs")
    if args.layout == "best":
        fixed = [n for n in searched if getattr(args, n, None) is not None]
        if fixed:
            raise SpecError(f"--layout best chooses the spec; drop --{fixed[0].replace('_', '-')}")
        profile = (load_target_file(args.target_file) if args.target_file is not None
                   else load_target("tofino" if args.target is None else args.target))
        args.protocol = args.protocol or protocols.DEFAULT.name
        args.variant = args.variant or protocols.without_fifo(args.protocol).name
        res = run_search(args, profile, args.workers, certify=False)
        return res.best.spec, profile, res.best.shape
    fixed = [n for n in searched + ("protocol", "variant", "workers") if getattr(args, n, None) is not None]
    if fixed:
        raise SpecError(f"--layout {args.layout} fixes the spec; drop --{fixed[0].replace('_', '-')}")
    workload = given_workload(args)
    if workload:
        raise SpecError(f"--layout {args.layout} was planned for its own workload; drop {workload[0]} (or plan "
                        f"again with p4gen plan, or build --layout best)")
    from .layoutfile import read_layout

    target, spec, shape = read_layout(args.layout)
    if args.target_file is not None:
        profile = load_target_file(args.target_file)
    else:
        if args.target is not None and args.target != target:
            raise SpecError(f"layout file {args.layout!r} was planned for {target}, not --target {args.target}")
        profile = load_target(target)
    if profile.name != target:
        raise SpecError(f"layout file {args.layout!r} was planned for {target}, not {profile.name}")
    return spec, profile, shape
