"""Progress lines for the steps a person waits on, as the command-line tools print them.

One plain line a step on stderr, flushed, so it shows on a pipe and in a log as it happens (the
results stay on stdout).  Library code takes a ``note`` (or ``progress``) callable and calls it with
one line; only the CLI modules make one of these and pass it in.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


def steps(name: str, stream: TextIO | None = None) -> Callable[[str], None]:
    """``NAME +T s: line``, T the seconds since this was made."""
    out = stream or sys.stderr
    t0 = time.monotonic()

    def note(line: str) -> None:
        out.write(f"{name} +{time.monotonic() - t0:.1f} s: {line}\n")
        out.flush()
    return note


class Every:
    """``NAME done/total  label`` lines for a long run of many small steps: one once the run has lasted
    :attr:`every` seconds, then at most one per :attr:`every` seconds, so a short run prints none."""

    every = 5.0

    def __init__(self, name: str, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.stream = stream or sys.stderr
        self.clock = clock
        self.last = clock()

    def __call__(self, done: int, total: int, label: str) -> None:
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.stream.write(f"{self.name} {done}/{total}  {label[:100]}\n")
            self.stream.flush()

    def clear(self) -> None:
        """Nothing to wipe: the lines stay (the terminal's redrawn line needs this)."""
