"""Reading the files a user gives p4gen: bounded, as UTF-8, with one-line errors.

Every spec, target profile, job file, plan, P4Info and control-plane config
is read through :func:`read_text`, so that ``/dev/zero``, a directory, a
huge file, bytes that are not UTF-8 or nesting deep enough to exhaust the
parser's recursion all give the caller's error class with one line instead
of a hang or a traceback.  Files are written by :mod:`p4gen.filewrite`.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

TYPE_CHECKING = False        # (typing.TYPE_CHECKING without importing typing on a warm build)
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 16 << 20          # 16 MiB: far above any real plan (a 32768-slot plan.json is < 1 MiB)


def _read_bytes(path: str | Path, what: str, error: type[Exception], limit: int) -> bytes:
    p = Path(path)
    shown = f"{what} {str(p)!r}"
    if not str(path):
        raise error(f"{what} path '' is empty; name a file")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise error(f"{shown} does not exist") from None
    except OSError as exc:
        raise error(f"{shown} cannot be read: {exc.strerror or exc.__class__.__name__}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{shown} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{shown} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"{shown} cannot be read: {exc.strerror or exc.__class__.__name__}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{shown} is larger than {limit >> 20} MiB")
    return data


def digest(path: str | Path, limit: int = MAX_BYTES) -> str | None:
    """SHA-256 of a regular file of at most ``limit`` bytes; None for anything else (never blocks)."""
    import hashlib

    try:
        return hashlib.sha256(_read_bytes(path, "file", ValueError, limit)).hexdigest()
    except ValueError:
        return None


def read_text(path: str | Path, what: str, error: type[Exception], limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes."""
    p = Path(path)
    shown = f"{what} {str(p)!r}"
    data = _read_bytes(path, what, error, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{shown} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def load_toml(path: str | Path, what: str, error: type[Exception]) -> dict[str, Any]:
    text = read_text(path, what, error)
    return parse_toml(text, f"{what} {str(path)!r}", error)


def parse_toml(text: str, shown: str, error: type[Exception]) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{shown} is not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{shown} nests arrays or tables too deeply") from None
    except ValueError:                    # an integer of more digits than Python converts (4300)
        raise error(f"{shown} holds a number of more than {sys.get_int_max_str_digits()} digits") from None


def parse_json(text: str, shown: str, error: type[Exception]) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{shown} is not valid JSON: {exc}") from None
    except RecursionError:
        raise error(f"{shown} nests arrays or objects too deeply") from None
    except ValueError:                    # an integer of more digits than Python converts (4300)
        raise error(f"{shown} holds a number of more than {sys.get_int_max_str_digits()} digits") from None


def load_json(path: str | Path, what: str, error: type[Exception]) -> Any:
    return parse_json(read_text(path, what, error), f"{what} {str(path)!r}", error)
