"""A build's output directory: p4gen's own files written all or nothing, no user file ever lost.

The rules, each checked by ``tests/test_output_safety.py``; the file operations themselves are
:mod:`p4gen.filewrite`'s (one directory descriptor, no symlink followed, exclusive temporaries,
renames):

* The path is resolved once (``.``, ``..``, trailing slashes and symlinks folded by
  ``os.path.realpath``); every later step works on that real directory, opened once.  A symlink to
  a directory is written through (the link stays a link); a dangling symlink, a path that is a
  file, and a path whose resolution is ``/`` are refused.
* p4gen writes only its own file names (:data:`OWN_NAMES`) and the marker (:data:`MARKER`), which
  lists the digest of every file the build wrote.  It never moves a file.  It replaces a file of
  its names only while the file still holds exactly what the marker lists (or with ``force``), and
  deletes only files that its own previous build wrote and that are unchanged.  A file of one of
  its names that is a directory or a symlink is refused, not replaced.
* A directory p4gen did not create (no marker) that is not empty is refused unless ``force`` is
  given; with ``force`` only p4gen's names are written.
* Staged commit (:class:`p4gen.filecommit.Commit`): every new file is first written beside its
  final name as a hidden temporary file; only when all of them are complete are they renamed into
  place, each file they replace kept as a hard link until every rename has succeeded.  A failure
  at any step restores every name and removes the temporaries and any directory this build
  created, so the destination is exactly as it was.  A kill at any step leaves the commit's journal,
  which readers refuse (:meth:`p4gen.plan.Plan.load`) and the next build completes or undoes first.
* Two builds into one directory take turns: each holds an ``flock`` on the directory from its
  checks to its last rename.
* :func:`write_outputs` with several directories (a multi-target build) is all or nothing: all are
  staged first, and a failure in any of them restores all of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from .errors import OutputError
from .filecommit import Commit, recover
from .filewrite import Directory

MARKER = ".p4gen-build.json"
PROGRAM = "program.p4"
OUTPUTS = (PROGRAM, "p4info.txt", "plan.json", "report.txt", "report.json")
COMPILE_OUTPUTS = ("compile.log", "program.json", "p4info.p4c.txtpb", "compiler-resources.json", "compiler-phv.json")
OWN_NAMES = frozenset(OUTPUTS + COMPILE_OUTPUTS)
LOCK_WAIT = 60.0          # s to wait for another build writing into the same directory
WHAT = "output directory"


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


def _own_previous(d: Directory) -> dict[str, str] | None:
    """The files (name -> digest) a p4gen marker in ``d`` lists, or None when there is none."""
    raw = d.read(MARKER, 1 << 20)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("generator") != "p4gen" or not isinstance(doc.get("files"), dict):
        return None
    return {n: g for n, g in doc["files"].items() if n in OWN_NAMES and isinstance(g, str)}


def _check_open(d: Directory, shown: str, force: bool, names) -> dict[str, str]:
    """Refuse, with one line, what p4gen cannot write into ``d`` safely; the previous build's files."""
    try:
        present = set(d.names())
    except OSError as exc:
        raise OutputError(f"output directory {shown!r} cannot be listed: {_why(exc)}") from None
    previous = _own_previous(d)
    if present and previous is None and not force:
        raise OutputError(f"output directory {shown!r} is not empty and was not created by p4gen; "
                          f"choose another --out or pass --force to write p4gen's files into it")
    for name in sorted(set(names) | {MARKER}):
        if name not in present:
            continue
        q = d.path / name
        st = d.entry(name)
        if st is None:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{str(q)!r} is a symlink; p4gen writes a file of that name and will not replace it")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"{str(q)!r} is not a regular file; p4gen writes a file of that name "
                              f"and will not replace it")
        if name == MARKER or force:
            continue
        digest = (previous or {}).get(name)
        data = d.read(name) if digest is not None else None
        if data is None or _sha(data) != digest:
            raise OutputError(f"{str(q)!r} is not as p4gen's last build wrote it (changed since, or not p4gen's); "
                              f"move it away, or pass --force to replace it")
    return previous or {}


def check(path: str | Path, force: bool, names=OUTPUTS) -> Path:
    """Refuse, with one line, an output p4gen cannot write safely; return its real path."""
    real = resolve(path)
    if not real.is_dir():
        return real
    with Directory(real, WHAT, OutputError, create=False, shown=str(path)) as d:
        d.lock(LOCK_WAIT, _busy(str(path)))            # a build committing meanwhile is seen whole
        recover(d)                                     # a build a kill interrupted: completed or undone
        _check_open(d, str(path), force, names)
    return real


def _busy(shown: str) -> str:
    return f"another p4gen build has been writing into {shown!r} for {LOCK_WAIT:g} s; try again when it has finished"


class _Stage:
    """One output directory being written: everything needed to finish or to undo."""

    def __init__(self, shown: str, real: Path, files: dict[str, bytes], force: bool):
        self.shown, self.real, self.files, self.force = shown, real, files, force
        self.d: Directory | None = None
        self.commit_: Commit | None = None

    def prepare(self) -> None:
        """Open (making missing directories), lock, check again, stage every file as a temporary."""
        self.d = Directory(self.real, WHAT, OutputError, shown=self.shown)
        self.d.lock(LOCK_WAIT, _busy(self.shown))
        recover(self.d)                                                      # now no other build interferes
        previous = _check_open(self.d, self.shown, self.force, self.files)
        stale = sorted(n for n, digest in previous.items() if n not in self.files and self._still_ours(n, digest))
        self.commit_ = Commit(self.d, self.files, remove=stale)
        self.commit_.prepare(self._order())

    def _still_ours(self, name: str, digest: str) -> bool:
        data = self.d.read(name)
        return data is not None and _sha(data) == digest

    def _order(self) -> list[str]:
        return sorted(n for n in self.files if n != MARKER) + ([MARKER] if MARKER in self.files else [])

    def commit(self) -> None:
        self.commit_.commit(self._order())

    def rollback(self) -> None:
        if self.d is None:
            return
        if self.commit_ is not None:
            self.commit_.rollback()
        else:
            self.d.remove_created()
        self.d.close()

    def finish(self) -> None:
        if self.commit_ is not None:
            self.commit_.finish()
        if self.d is not None:
            self.d.close()


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
