"""The workload options of ``p4gen plan`` and ``p4gen build --layout best``: one job's workers, links,
RTT and tensor, and the search's objective and value widths.

:func:`add_workload_args` declares them, :func:`check_workload_given` says which a search still needs,
:func:`workload_from_args` makes the
:class:`~p4gen.layout.cost.Workload` they describe (one line for what is missing),
:func:`parse_size` reads a tensor size and :func:`value_widths` the widths to search.
"""

from __future__ import annotations

import argparse
import re

from ..errors import SpecError

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


def value_widths(args: argparse.Namespace) -> list[int]:
    if args.value_widths not in WIDTHS:
        raise SpecError(f"--value-widths {args.value_widths!r} must be one of {', '.join(WIDTHS)}")
    return WIDTHS[args.value_widths]
