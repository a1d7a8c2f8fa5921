"""``p4gen plan``: the best pipeline layout of a workload on a target, and ``build --layout``.

Only this module and :mod:`p4gen.cli` print.  Z3 is imported inside the search, when a
placement is certified, never at start-up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ..errors import P4genError, SpecError

WIDTHS = {"32": [32], "16": [16], "any": [16, 32]}


def parse_size(text: str) -> int:
    """'65536' elements, or '16MiB' / '0.5GiB' / '64KiB' of float32 (4 bytes an element)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(KiB|MiB|GiB)?\s*", text)
    if not m:
        raise SpecError(f"--size {text!r} must be a number of elements or a size such as 256MiB")
    value, unit = float(m.group(1)), m.group(2)
    if not unit and value != int(value):
        raise SpecError(f"--size {text!r}: a number of elements must be whole")
    n = int(value * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit] // 4) if unit else int(value)
    if n < 1:
        raise SpecError(f"--size {text!r} gives {n} elements; at least 1 is needed")
    return n


def add_workload_args(p: argparse.ArgumentParser, required: bool, needed: str = "") -> None:
    """The workload options; ``needed`` is appended to the help of the three a search needs."""
    p.add_argument("--link-gbps", type=float, required=required, help=f"each worker's link rate, Gb/s{needed}")
    p.add_argument("--rtt-us", type=float, required=required,
                   help=f"round trip between a worker and the switch for a small frame, microseconds{needed}")
    p.add_argument("--size", required=required,
                   help=f"tensor size: elements, or float32 bytes such as 256MiB{needed}")
    p.add_argument("--density", type=float, default=1.0, help="OmniReduce: fraction of non-zero blocks (default 1)")
    p.add_argument("--framing-bytes", type=int, default=None,
                   help="bytes on the wire per frame beyond it (default 24: Ethernet preamble, FCS and gap)")
    p.add_argument("--ports-per-pipe", type=int, default=None,
                   help="worker ports of one pipe (default: the pipe's share of the target's rate at --link-gbps)")
    p.add_argument("--objective", default="time",
                   help="time (default), slots or stages; with --jobs: makespan (default) or sum")
    p.add_argument("--slack", type=float, default=5.0,
                   help="objectives slots and stages: allowed predicted time over the fastest, percent (default 5)")
    p.add_argument("--value-widths", default="32", help="value widths to search: 32 (default), 16 or any")
    p.add_argument("--window-headroom", type=float, default=2.0,
                   help="dense jobs: the window over the smallest that reaches the other bounds, where it fits "
                        "(default 2; the time is the same, slower round trips then do not idle the link)")
    p.add_argument("--fill-rtt", action="store_true",
                   help="only layouts whose window fills the RTT (time not bound by the window); refused if none fits")


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("plan", help="find the best pipeline layout of a workload on a target, with its predicted time")
    tgt = p.add_mutually_exclusive_group()
    tgt.add_argument("--target", default="tofino", help="built-in target profile (default tofino)")
    tgt.add_argument("--target-file", help="a target profile of your own (TOML)")
    p.add_argument("--workers", type=int, help="workers of the job (required unless --jobs)")
    p.add_argument("--protocol", default="switchml", help="switchml (default) or omnireduce")
    p.add_argument("--variant", default="hardened", help="hardened (default) or reference")
    add_workload_args(p, required=False, needed=" (required unless --jobs)")
    p.add_argument("--jobs", metavar="FILE", help="several jobs on one switch (TOML); see docs/layout.md")
    p.add_argument("--out", help="layout file to write (default p4gen-out/<target>-layout.json; with --jobs a directory)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-certify", action="store_true", help="skip the Z3 certificate of the best stage placement")
    p.set_defaults(func=handler)
    return p


def _profile(args: argparse.Namespace):
    from ..target import load_target, load_target_file

    return load_target_file(args.target_file) if args.target_file else load_target(args.target)


def check_workload_given(args: argparse.Namespace, workers: int | None) -> None:
    """The options a search needs are given (checked before anything is loaded)."""
    missing = [f"--{n.replace('_', '-')}" for n in ("link_gbps", "rtt_us", "size") if getattr(args, n) is None]
    if workers is None:
        missing.insert(0, "--workers")
    if missing:
        raise SpecError(f"{' '.join(missing)} {'is' if len(missing) == 1 else 'are'} needed to plan a layout")


def workload_from_args(args: argparse.Namespace, workers: int | None):
    from .cost import ETHERNET_FRAMING_BYTES, Workload

    check_workload_given(args, workers)
    framing = ETHERNET_FRAMING_BYTES if args.framing_bytes is None else args.framing_bytes
    return Workload(workers, args.link_gbps, args.rtt_us, parse_size(args.size), args.density, framing,
                    ports_per_pipe=args.ports_per_pipe)


def _widths(args: argparse.Namespace) -> list[int]:
    if args.value_widths not in WIDTHS:
        raise SpecError(f"--value-widths {args.value_widths!r} must be one of {', '.join(WIDTHS)}")
    return WIDTHS[args.value_widths]


def run_search(args: argparse.Namespace, profile, workers: int | None, certify: bool = True):
    from .search import search

    if not 0 <= args.slack <= 1000:
        raise SpecError(f"--slack {args.slack:g} must be a percentage in 0..1000")
    wl = workload_from_args(args, workers)
    return search(profile, wl, protocol=args.protocol, variant=args.variant, widths=_widths(args),
                  objective=args.objective, slack=args.slack / 100, certify=certify, fill_rtt=args.fill_rtt,
                  headroom=args.window_headroom)


def handler(args: argparse.Namespace) -> int:
    try:
        if not args.jobs:
            check_workload_given(args, args.workers)
        profile = _profile(args)
        if args.jobs:
            from .jobs_cli import plan_jobs_cli

            return plan_jobs_cli(args, profile)
        res = run_search(args, profile, args.workers, certify=not args.no_certify)
        from .layoutfile import layout_document, write_layout
        from .report import render_text, result_dict

        doc = layout_document(profile.name, res.best.spec, res.best.shape, objective=res.objective,
                              workload=res.workload.to_dict(), predicted=res.best.prediction.to_dict())
        out = Path(args.out) if args.out else Path("p4gen-out") / f"{profile.name}-layout.json"
        write_layout(out, doc)
        if args.json:
            print(json.dumps({**result_dict(res), "layout_file": str(out)}, indent=2, sort_keys=True))
        else:
            print(render_text(res))
            print(f"layout written to {out}; build it with: p4gen build --layout {out}")
        return 0
    except P4genError as exc:
        print(f"p4gen: error: {exc}", file=sys.stderr)
        return 1


def build_layout(args: argparse.Namespace):
    """(spec, profile, shape) for ``p4gen build --layout best|FILE``."""
    from ..target import load_target, load_target_file

    searched = ("spec", "slots", "elements", "value_width", "jobs")
    if args.layout == "best":
        fixed = [n for n in searched if getattr(args, n, None) is not None]
        if fixed:
            raise SpecError(f"--layout best chooses the spec; drop --{fixed[0].replace('_', '-')}")
        profile = load_target_file(args.target_file) if args.target_file else load_target(args.target or "tofino")
        args.protocol, args.variant = args.protocol or "switchml", args.variant or "hardened"
        res = run_search(args, profile, args.workers, certify=False)
        return res.best.spec, profile, res.best.shape
    fixed = [n for n in searched + ("protocol", "variant", "workers") if getattr(args, n, None) is not None]
    if fixed:
        raise SpecError(f"--layout {args.layout} fixes the spec; drop --{fixed[0].replace('_', '-')}")
    from .layoutfile import read_layout

    target, spec, shape = read_layout(args.layout)
    if args.target_file:
        profile = load_target_file(args.target_file)
    else:
        if args.target and args.target != target:
            raise SpecError(f"layout file {args.layout!r} was planned for {target}, not --target {args.target}")
        profile = load_target(target)
    if profile.name != target:
        raise SpecError(f"layout file {args.layout!r} was planned for {target}, not {profile.name}")
    return spec, profile, shape
