"""How every command line of p4gen ends: the one place where an exception becomes a line and an exit status.

It imports nothing heavy (a warm ``p4gen build`` runs through it without argparse).
"""

from __future__ import annotations

import sys

from .errors import EXIT_ERROR, EXIT_INTERRUPTED, P4genError, exit_status

TYPE_CHECKING = False        # (typing.TYPE_CHECKING without importing typing on a warm build)
if TYPE_CHECKING:
    from typing import Callable


def run_command(prog: str, command: Callable[[], int | None], os_errors: bool = False) -> int:
    """Run a command line's body: its exit status, or, when it stops on an error of the catalogue
    (:data:`p4gen.errors.CATALOGUE`), on Ctrl-C or (``os_errors``) on an OSError, one line on stderr and
    the catalogue's exit status.  The one place where an exception becomes an exit status."""
    try:
        return int(command() or 0)
    except P4genError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        if not os_errors:
            raise
        print(f"{prog}: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_ERROR
