"""The workload options of ``p4gen plan`` and ``p4gen build --layout best``: one job's workers, links,
RTT and tensor, and the search's objective and value widths.

:func:`add_workload_args` declares them, :func:`check_workload_given` says which a search still needs,
:func:`workload_from_args` makes the
:class:`~p4gen.layout.cost.Workload` they describe (one line for what is missing),
:func:`parse_size` reads a tensor size and :func:`value_widths` the widths to search; every option's
default is None, so that :func:`given_workload` can tell which were given and :func:`opt` reads one with
its default.
"""

from __future__ import annotations

import argparse
import re

from ..errors import SpecError

WIDTHS = {"32": [32], "16": [16], "any": [16, 32]}


def parse_size(text: str) -> int:
    """'65536' elements, or '16MiB' / '0.5GiB' / '64KiB' of float32 (4 bytes an element), read exactly (no
    float: a number of any length gives its value or a one-line error, never an overflow)."""
    from fractions import Fraction

    from .cost import MAX_ELEMENTS

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(KiB|MiB|GiB)?\s*", text) if len(text) <= 100 else None
    if not m:
        raise SpecError(f"--size {text[:40]!r} must be a number of elements or a size such as 256MiB")
    value, unit = Fraction(m.group(1)), m.group(2)
    if not unit and value.denominator != 1:
        raise SpecError(f"--size {text!r}: a number of elements must be whole")
    n = int(value * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit] // 4) if unit else int(value)
    if not 1 <= n <= MAX_ELEMENTS:
        raise SpecError(f"--size {text!r} gives {n} elements; 1..{MAX_ELEMENTS} (2^48) can be planned")
    return n


# the workload options, their defaults and the types that check them; None: given or not
def _workload_options():
    from ..cliargs import int_in, number_in
    from .cost import ETHERNET_FRAMING_BYTES, MAX_FRAMING_BYTES, MAX_LINK_GBPS, MAX_PORTS_PER_PIPE, MAX_RTT_US

    return [
        ("--link-gbps", number_in(0, MAX_LINK_GBPS, "Gb/s", lo_open=True), None, "each worker's link rate, Gb/s"),
        ("--rtt-us", number_in(0, MAX_RTT_US, "microseconds"), None,
         "round trip between a worker and the switch for a small frame, microseconds"),
        ("--size", None, None, "tensor size: elements, or float32 bytes such as 256MiB"),
        ("--density", number_in(0, 1, "a fraction", lo_open=True), 1.0,
         "OmniReduce: fraction of non-zero blocks (default 1)"),
        ("--framing-bytes", int_in(0, MAX_FRAMING_BYTES, "bytes"), ETHERNET_FRAMING_BYTES,
         f"bytes on the wire per frame beyond it (default {ETHERNET_FRAMING_BYTES}: Ethernet preamble, FCS and gap)"),
        ("--ports-per-pipe", int_in(1, MAX_PORTS_PER_PIPE, "9-bit ports"), None,
         "worker ports of one pipe (default: the pipe's share of the target's rate at --link-gbps)"),
        ("--objective", None, "time", "time (default), slots or stages; with --jobs: makespan (default) or sum"),
        ("--slack", number_in(0, 1000, "percent"), 5.0,
         "objectives slots and stages: allowed predicted time over the fastest, percent (default 5)"),
        ("--value-widths", None, "32", "value widths to search: 32 (default), 16 or any"),
        ("--window-headroom", number_in(1, 1000, "a factor"), 2.0,
         "dense jobs: the window over the smallest that reaches the other bounds, where it fits (default 2; the "
         "time is the same, slower round trips then do not idle the link)"),
    ]


WORKLOAD_DESTS = ("link_gbps", "rtt_us", "size", "density", "framing_bytes", "ports_per_pipe", "objective", "slack",
                  "value_widths", "window_headroom", "fill_rtt")
SEARCH_NEEDS = ("--link-gbps", "--rtt-us", "--size")


def add_workload_args(p: argparse.ArgumentParser, required: bool, needed: str = "") -> None:
    """The workload options; ``needed`` is appended to the help of the three a search needs.  Every default
    is None (so that a command can tell which were given); :func:`opt` reads an option with its default."""
    for flag, typ, _default, text in _workload_options():
        p.add_argument(flag, type=typ, default=None, required=required and flag in SEARCH_NEEDS,
                       help=text + needed if flag in SEARCH_NEEDS else text)
    p.add_argument("--fill-rtt", action="store_true", default=None,
                   help="only layouts whose window fills the RTT (time not bound by the window); refused if none fits")


def opt(args: argparse.Namespace, dest: str):
    """The value of workload option ``dest``: as given, else its default."""
    v = getattr(args, dest, None)
    if v is not None:
        return v
    if dest == "fill_rtt":
        return False
    return next(d for f, _t, d, _h in _workload_options() if f[2:].replace("-", "_") == dest)


def given_workload(args: argparse.Namespace) -> list[str]:
    """The workload options given on the command line, as flags."""
    return [f"--{d.replace('_', '-')}" for d in WORKLOAD_DESTS if getattr(args, d, None) not in (None, False)]


def check_workload_given(args: argparse.Namespace, workers: int | None) -> None:
    """The options a search needs are given (checked before anything is loaded)."""
    missing = [f"--{n.replace('_', '-')}" for n in ("link_gbps", "rtt_us", "size") if getattr(args, n) is None]
    if workers is None:
        missing.insert(0, "--workers")
    if missing:
        raise SpecError(f"{' '.join(missing)} {'is' if len(missing) == 1 else 'are'} needed to plan a layout")


def workload_from_args(args: argparse.Namespace, workers: int | None):
    from .cost import Workload

    check_workload_given(args, workers)
    return Workload(workers, args.link_gbps, args.rtt_us, parse_size(args.size), opt(args, "density"),
                    opt(args, "framing_bytes"), ports_per_pipe=args.ports_per_pipe)


def value_widths(args: argparse.Namespace) -> list[int]:
    widths = opt(args, "value_widths")
    if widths not in WIDTHS:
        raise SpecError(f"--value-widths {widths!r} must be one of {', '.join(WIDTHS)}")
    return WIDTHS[widths]
