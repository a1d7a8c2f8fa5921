"""Writing a build's files into the user's output directory without ever losing a user file.

The rules, each checked by ``tests/test_output_safety.py``:

* The path is resolved once (``.``, ``..``, trailing slashes and symlinks
  folded by ``os.path.realpath``); every later step works on that real
  directory.  A symlink to a directory is written through (the link stays a
  link); a dangling symlink, a path that is a file, and a path whose
  resolution is ``/`` are refused.
* p4gen writes only its own file names (:data:`OWN_NAMES`) and the marker.
  It never moves a file, and deletes only files that its own previous build
  in the same directory wrote and that still hold exactly what it wrote
  (their digests are in the marker).  A file of one of its names that is a
  directory or a symlink is refused, not replaced.
* A directory p4gen did not create (no marker) that is not empty is refused
  unless ``force`` is given; with ``force`` only p4gen's names are written.
* Staged commit: every new file is first written beside its final name as
  a hidden temporary file.  Only when all of them are complete are they
  renamed into place; each file they replace is kept as a hard link until
  every rename has succeeded.  A failure at any step restores every name to
  the file it held before and removes the temporaries and any directory
  this build created, so the destination is exactly as it was.
* Two builds into one directory take turns: each holds an ``flock`` on the
  directory from its checks to its last rename.
* :func:`write_outputs` with several directories (a multi-target build) is
  all or nothing: all are staged first, and a failure in any of them
  restores all of them.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import time
from pathlib import Path

from .errors import OutputError

MARKER = ".p4gen-build.json"
PROGRAM = "program.p4"
OUTPUTS = (PROGRAM, "p4info.txt", "plan.json", "report.txt", "report.json")
COMPILE_OUTPUTS = ("compile.log", "program.json", "p4info.p4c.txtpb", "compiler-resources.json", "compiler-metrics.json")
OWN_NAMES = frozenset(OUTPUTS + COMPILE_OUTPUTS)
LOCK_WAIT = 60.0          # s to wait for another build writing into the same directory


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _why(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def resolve(path: str | Path) -> Path:
    """The real directory ``path`` names (resolved once), or OutputError."""
    text = str(path)
    if not text:
        raise OutputError("output path '' is empty; name a directory")
    if "\0" in text:
        raise OutputError(f"output path {text!r} contains a NUL byte")
    p = Path(text)
    real = Path(os.path.realpath(p))
    if p.is_symlink() and not real.exists():
        raise OutputError(f"output {text!r} is a symlink to {str(real)!r}, which does not exist; "
                          f"p4gen does not create a symlink's target")
    if real.exists() and not real.is_dir():
        raise OutputError(f"output {text!r} exists and is not a directory")
    if real.parent == real:
        raise OutputError(f"output {text!r} is the root directory; name a directory below it")
    return real


def _own_previous(real: Path) -> dict[str, str] | None:
    """The files (name -> digest) a p4gen marker in ``real`` lists, or None when there is none."""
    m = real / MARKER
    if m.is_symlink() or not m.is_file():
        return None
    try:
        doc = json.loads(m.read_bytes()[: 1 << 20].decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("generator") != "p4gen" or not isinstance(doc.get("files"), dict):
        return None
    return {n: d for n, d in doc["files"].items() if n in OWN_NAMES and isinstance(d, str)}


def check(path: str | Path, force: bool, names=OUTPUTS) -> Path:
    """Refuse, with one line, an output p4gen cannot write safely; return its real path."""
    real = resolve(path)
    if not real.is_dir():
        return real
    shown = str(path)
    try:
        present = {e.name for e in os.scandir(real)}
    except OSError as exc:
        raise OutputError(f"output directory {shown!r} cannot be listed: {_why(exc)}") from None
    if present and _own_previous(real) is None and not force:
        raise OutputError(f"output directory {shown!r} is not empty and was not created by p4gen; "
                          f"choose another --out or pass --force to write p4gen's files into it")
    for name in sorted(set(names) | {MARKER}):
        if name not in present:
            continue
        q = real / name
        if q.is_symlink():
            raise OutputError(f"{str(q)!r} is a symlink; p4gen writes a file of that name and will not replace it")
        if not q.is_file():
            raise OutputError(f"{str(q)!r} is not a regular file; p4gen writes a file of that name "
                              f"and will not replace it")
    return real


class _Stage:
    """One output directory being written: everything needed to finish or to undo."""

    def __init__(self, shown: str, real: Path, files: dict[str, bytes], force: bool):
        self.shown, self.real, self.files, self.force = shown, real, files, force
        self.created: list[Path] = []            # directories this build made, outermost first
        self.lock_fd: int | None = None
        self.temps: dict[str, Path] = {}         # name -> staged new content
        self.backups: dict[str, Path] = {}       # name -> link to the previous file
        self.replaced: list[str] = []            # names renamed into place so far
        self.removed: list[str] = []             # stale own files unlinked so far
        self.stale: list[str] = []               # own files of the previous build to remove

    # -- preparation: nothing the user can see changes yet, except new directories
    def prepare(self) -> None:
        self._make_dirs()
        self._lock()
        check(self.real, self.force, self.files)          # again, now that no other build can interfere
        previous = _own_previous(self.real) or {}
        self.stale = sorted(n for n, digest in previous.items()
                            if n not in self.files and self._still_ours(n, digest))
        for name, data in self.files.items():
            self.temps[name] = self._write_temp(name, data)

    def _make_dirs(self) -> None:
        missing = []
        d = self.real
        while not d.exists():
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            try:
                os.mkdir(d)
                self.created.append(d)
            except FileExistsError:
                if not d.is_dir():
                    raise OutputError(f"output {self.shown!r}: {str(d)!r} exists and is not a directory") from None
            except OSError as exc:
                raise OutputError(f"cannot create output directory {str(d)!r}: {_why(exc)}") from None

    def _lock(self) -> None:
        try:
            self.lock_fd = os.open(self.real, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise OutputError(f"cannot open output directory {self.shown!r}: {_why(exc)}") from None
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OutputError(f"another p4gen build has been writing into {self.shown!r} for "
                                      f"{LOCK_WAIT:g} s; try again when it has finished") from None
                time.sleep(0.05)

    def _still_ours(self, name: str, digest: str) -> bool:
        q = self.real / name
        try:
            return not q.is_symlink() and q.is_file() and _sha(q.read_bytes()) == digest
        except OSError:
            return False

    def _hidden(self, name: str, what: str) -> Path:
        return self.real / f".{name}.p4gen-{what}-{os.urandom(6).hex()}"

    def _write_temp(self, name: str, data: bytes) -> Path:
        tmp = self._hidden(name, "new")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise OutputError(f"cannot write into output directory {self.shown!r}: {_why(exc)}") from None
        self.temps[name] = tmp            # recorded at once, so an error below still removes it
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise OutputError(f"cannot write {name} into {self.shown!r}: {_why(exc)}") from None
        return tmp

    # -- commit: renames only; each step is undone by rollback()
    def commit(self) -> None:
        order = sorted(n for n in self.files if n != MARKER) + ([MARKER] if MARKER in self.files else [])
        for name in order + self.stale:
            q = self.real / name
            if os.path.lexists(q):
                self.backups[name] = self._backup(q, name)
        try:
            for name in order:
                os.replace(self.temps[name], self.real / name)
                self.replaced.append(name)
            for name in self.stale:
                os.unlink(self.real / name)
                self.removed.append(name)
        except OSError as exc:
            raise OutputError(f"cannot write {name} into {self.shown!r}: {_why(exc)}") from None

    def _backup(self, q: Path, name: str) -> Path:
        b = self._hidden(name, "old")
        try:
            os.link(q, b)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.EOPNOTSUPP):
                raise OutputError(f"cannot write into output directory {self.shown!r}: {_why(exc)}") from None
            raise OutputError(f"output directory {self.shown!r} is on a file system without hard links; "
                              f"p4gen cannot replace its files safely there") from None
        return b

    def rollback(self) -> None:
        for name in reversed(self.removed):
            _quiet(os.link, self.backups[name], self.real / name)
        for name in reversed(self.replaced):
            if name in self.backups:
                _quiet(os.replace, self.backups.pop(name), self.real / name)
            else:
                _quiet(os.unlink, self.real / name)
        self.replaced.clear()
        self.removed.clear()
        self.finish()
        for d in reversed(self.created):
            _quiet(os.rmdir, d)            # only if still empty: a user file put there meanwhile stays
        self.created.clear()

    def finish(self) -> None:
        """Remove temporaries and backups, release the lock."""
        for p in list(self.temps.values()) + list(self.backups.values()):
            _quiet(os.unlink, p)
        self.temps.clear()
        self.backups.clear()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def _quiet(fn, *args) -> None:
    try:
        fn(*args)
    except OSError:
        pass


def marker(key: str, version: str, files: dict[str, bytes]) -> bytes:
    return json.dumps({"generator": "p4gen", "version": version, "key": key,
                       "files": {n: _sha(d) for n, d in sorted(files.items())}}, indent=1, sort_keys=True).encode()


def write_outputs(outputs: list[tuple[str | Path, dict[str, bytes]]], force: bool) -> list[Path]:
    """Write each (directory, files) pair, all or nothing; the real directories written.

    ``files`` must include the marker (see :func:`marker`).  Names outside
    :data:`OWN_NAMES` and the marker are refused.
    """
    stages = []
    for path, files in outputs:
        bad = sorted(n for n in files if n not in OWN_NAMES and n != MARKER)
        if bad:
            raise OutputError(f"p4gen does not write a file named {bad[0]!r}")
        stages.append(_Stage(str(path), resolve(path), files, force))
    try:
        for st in stages:
            st.prepare()
        for st in stages:
            st.commit()
    except BaseException:
        for st in reversed(stages):
            st.rollback()
        raise
    for st in stages:
        st.finish()
    return [st.real for st in stages]
