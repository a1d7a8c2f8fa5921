"""The user's files: input read bounded, as UTF-8, with one-line errors; files written beside the
user's replaced only while they are as p4gen wrote them.

Every spec, target profile, job file, plan, P4Info and control-plane config
is read through :func:`read_text`, so that ``/dev/zero``, a directory, a
huge file, bytes that are not UTF-8 or nesting deep enough to exhaust the
parser's recursion all give the caller's error class with one line instead
of a hang or a traceback.
"""

from __future__ import annotations

import os
import stat
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


def parse_json(text: str, shown: str, error: type[Exception]) -> Any:
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{shown} is not valid JSON: {exc}") from None
    except RecursionError:
        raise error(f"{shown} nests arrays or objects too deeply") from None


def load_json(path: str | Path, what: str, error: type[Exception]) -> Any:
    return parse_json(read_text(path, what, error), f"{what} {str(path)!r}", error)


# -- files p4gen writes beside the user's -------------------------------------------------------

STAMP = "p4gen-digest: "


def sha256_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stamped(body: str, comment: str = "#") -> str:
    """``body`` behind a first line that records its digest, so a later run can tell whether anyone
    changed the file since p4gen wrote it (:func:`check_replaceable`)."""
    return f"{comment} {STAMP}{sha256_text(body)}\n{body}"


def unchanged_since_written(text: str, comment: str = "#") -> bool:
    head, _, body = text.partition("\n")
    return head.startswith(f"{comment} {STAMP}") and head[len(comment) + 1 + len(STAMP):] == sha256_text(body)


def check_replaceable(path: str | Path, what: str, error: type[Exception], unchanged) -> None:
    """Refuse, with one line, to replace ``path`` unless it is absent, or a regular file that p4gen wrote
    and nobody changed since (``unchanged(text)``): a user's edits are never overwritten."""
    p = Path(path)
    shown = f"{what} {str(p)!r}"
    if p.is_symlink():
        raise error(f"{shown} is a symbolic link; p4gen does not write through it (choose another --out)")
    if not p.exists():
        return
    if not p.is_file():
        raise error(f"{shown} exists and is not a regular file (choose another --out)")
    try:
        text = read_text(p, what, error)
    except error:
        text = None
    if text is None or not unchanged(text):
        raise error(f"{shown} exists and is not as p4gen wrote it (edited since, or not p4gen's); "
                    "move it away or choose another --out")


def write_atomic(path: str | Path, text: str, what: str, error: type[Exception]) -> Path:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: a reader sees the
    old file or the new one, never half of one."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise error(f"cannot write {what} {str(p)!r}: {exc.strerror or exc}") from None
    return p
