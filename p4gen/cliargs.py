"""Argument types for the command lines: a bad value is one argparse line (exit 2), never a hang later.

``--timeout nan`` used to wait forever and ``--device-id -1`` to end in a
traceback; these types refuse such values while the arguments are parsed,
before anything is built, connected or started.
"""

from __future__ import annotations

import argparse
import math
import re

MAX_SECONDS = 86400.0
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def int_in(lo: int, hi: int, what: str):
    """An integer in lo..hi (``what`` says why, in the message)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo}..{hi} ({what})")
        return value
    return parse


def seconds(limit: float = MAX_SECONDS):
    """A duration: a finite number of seconds in (0, limit]."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds in (0, {limit:g}]")
        return value
    return parse


def number_in(lo: float, hi: float, what: str, lo_open: bool = False, hi_open: bool = False):
    """A finite number in the interval lo..hi (open or closed at either end)."""
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        ok = math.isfinite(value) and (lo < value if lo_open else lo <= value) and \
            (value < hi if hi_open else value <= hi)
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} must be a number in {left}{lo:g}, {hi:g}{right} ({what})")
        return value
    return parse


def address(text: str) -> str:
    """HOST:PORT (checked before gRPC sees it, so a typo is one line and no gRPC logging)."""
    host, sep, port = text.rpartition(":")
    if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} must look like HOST:PORT (port 1..65535)")
    return text
