"""Several files written into one directory all or nothing -- even when the process is killed.

A :class:`Commit` (a build's outputs, ``plan --jobs``' job files) first writes a journal into the
directory, :data:`JOURNAL`: the name of every temporary and backup it will make there and the SHA-256
of every file it writes.  Then it writes the new files as those temporaries, links each file it
replaces to its backup name, renames the temporaries into place (a build's marker last), removes the
names it retires, drops the backups and, last, the journal.  So whatever step a kill interrupts, the
journal names everything the commit left:

* While the journal is there, readers refuse the directory with one line (:func:`interrupted`): a
  build there is half written, or still being written.
* The next commit into the directory first finishes or undoes the interrupted one (:func:`recover`):
  when every new file was written whole (as a temporary or already in place) it completes the
  renames, otherwise -- no rename has happened yet -- it removes the temporaries.  Either way the
  backups and the journal go, and the directory holds one whole set of files.

A journal cut short by a kill holds nothing that was acted on (it is written before anything else)
and is removed.  Files are checked by the caller (under :meth:`p4gen.filewrite.Directory.lock`).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from .filewrite import LOCK_WAIT, Directory, Kind, check_dir, check_replaceable, sha256_hex, temp_prefix

JOURNAL = ".p4gen-commit.json"


def _why(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def interrupted(directory: str | Path) -> str | None:
    """One line saying that ``directory`` holds a commit that was not finished (its journal is there),
    or None."""
    p = Path(directory)
    if not os.path.lexists(p / JOURNAL):
        return None
    return (f"{str(p)!r} holds files p4gen was writing when it stopped (killed, or still writing): run the "
            f"same p4gen command into it again, which completes them first (p4gen build --out {p})")


class Commit:
    """Several files written into one directory all or nothing (a build's outputs, ``plan --jobs``'s).

    :meth:`prepare` writes the journal and every new file as a hidden temporary (nothing visible
    changes but new directories); :meth:`commit` renames them into place, keeping each file it
    replaces as a hard link until every rename has succeeded, and removes the names in ``remove``
    (files the caller knows are p4gen's own and unchanged); :meth:`rollback` restores every name to
    what it held and removes the temporaries and any directory this commit made; :meth:`finish`
    drops the backups and the journal."""

    def __init__(self, d: Directory, files: dict[str, bytes], remove: list[str] = ()):
        self.d, self.files, self.remove = d, dict(files), list(remove)
        token = os.urandom(6).hex()
        self.temps: dict[str, str] = {}
        self.backup_name = {n: f"{temp_prefix(n)}old-{token}" for n in list(self.files) + self.remove}
        self.temp_name = {n: f"{temp_prefix(n)}{token}" for n in self.files}
        self.backups: dict[str, str] = {}
        self.replaced: list[str] = []
        self.removed: list[str] = []
        self.journaled = False

    def prepare(self, order: list[str] | None = None) -> None:
        d = self.d
        order = list(order if order is not None else self.files)
        journal = {"generator": "p4gen", "order": order,
                   "files": {n: {"temp": self.temp_name[n], "backup": self.backup_name[n],
                                 "sha256": sha256_hex(self.files[n])} for n in order},
                   "remove": {n: {"backup": self.backup_name[n], "sha256": _digest(d, n)} for n in self.remove}}
        d.create(JOURNAL, json.dumps(journal, sort_keys=True).encode())
        self.journaled = True
        for name in order:
            d.create(self.temp_name[name], self.files[name])
            self.temps[name] = self.temp_name[name]

    def commit(self, order: list[str] | None = None) -> None:
        d = self.d
        order = list(order if order is not None else self.files)
        for name in order + self.remove:
            if d.entry(name) is not None:
                self.backups[name] = self._backup(name)
        name = ""
        try:
            for name in order:
                d.rename(self.temps[name], name)
                del self.temps[name]
                self.replaced.append(name)
            for name in self.remove:
                os.unlink(name, dir_fd=d.fd)
                self.removed.append(name)
        except OSError as exc:
            raise d.error(f"cannot write {name} into {d.what} {d.shown!r}: {_why(exc)}") from None

    def _backup(self, name: str) -> str:
        d = self.d
        b = self.backup_name[name]
        try:
            d.link(name, b)
            return b
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.EOPNOTSUPP):
                raise d.error(f"cannot write into {d.what} {d.shown!r}: {_why(exc)}") from None
            raise d.error(f"{d.what} {d.shown!r} is on a file system without hard links; p4gen cannot "
                          f"replace its files safely there") from None

    def rollback(self) -> None:
        d = self.d
        for name in reversed(self.removed):
            try:
                d.link(self.backups[name], name)
            except OSError:
                pass
        for name in reversed(self.replaced):
            if name in self.backups:
                try:
                    d.rename(self.backups.pop(name), name)
                except OSError:
                    pass
            else:
                d.unlink(name)                       # this commit put it there
        self.replaced.clear()
        self.removed.clear()
        self.finish()
        d.remove_created()

    def finish(self) -> None:
        for tmp in list(self.temps.values()) + list(self.backups.values()):
            self.d.unlink(tmp)                       # made by this commit
        self.temps.clear()
        self.backups.clear()
        if self.journaled:
            self.d.unlink(JOURNAL)                   # last: until now the journal names what is left
            self.journaled = False


def _digest(d: Directory, name: str) -> str | None:
    data = d.read(name)
    return None if data is None else sha256_hex(data)


def recover(d: Directory) -> str | None:
    """Finish or undo the commit whose journal ``d`` holds (the caller holds ``d``'s lock): "completed",
    "undone", or None when there was none."""
    raw = d.read(JOURNAL, 1 << 20)
    if raw is None:
        if d.entry(JOURNAL) is not None:
            raise d.error(f"{str(d.path / JOURNAL)!r} is not a regular file; p4gen writes a file of that name")
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
        files, remove, order = doc["files"], doc["remove"], doc["order"]
        if sorted(order) != sorted(files):
            raise ValueError("order")
        names = {n: (str(f["temp"]), str(f["backup"]), str(f["sha256"])) for n, f in files.items()}
        retired = {n: (str(f["backup"]), f["sha256"]) for n, f in remove.items()}
        for n, parts in list(names.items()) + [(n, (b,)) for n, (b, _s) in retired.items()]:
            for own in parts[:2]:
                if not own.startswith(temp_prefix(n)):
                    raise ValueError(own)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError):
        d.unlink(JOURNAL)                            # cut short by a kill: written before anything it names
        return "undone"
    whole = all(_digest(d, tmp) == sha or _digest(d, n) == sha for n, (tmp, _b, sha) in names.items())
    for n in order:
        tmp, _b, sha = names[n]
        if whole and _digest(d, tmp) == sha:
            d.rename(tmp, n)
        else:
            d.unlink(tmp)
    if whole:
        for n, (_b, sha) in retired.items():
            if sha is not None and _digest(d, n) == sha:
                d.unlink(n)
    for backup in [b for _t, b, _s in names.values()] + [b for b, _s in retired.values()]:
        d.unlink(backup)
    d.unlink(JOURNAL)
    return "completed" if whole else "undone"


def write_files(directory: str | Path, files: dict[str, tuple[bytes | str, Kind, str]], error: type[Exception], *,
                hint: str = "move it away or choose another name") -> Path:
    """Write several files into ``directory`` all or nothing: ``files`` maps a name to (data, kind, what the
    file is).  Every name is checked before any is written; a failure leaves the directory as it was.
    The real directory written."""
    text = os.fspath(directory)
    check_dir(text, error)
    sealed = {}
    for name, (data, kind, _what) in files.items():
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        sealed[name] = kind.seal(raw)
    d = Directory(text, "output directory", error)
    commit = None
    try:
        d.lock(LOCK_WAIT, f"another p4gen has been writing into {text!r} for {LOCK_WAIT:g} s")
        recover(d)
        for name, (_data, kind, what) in files.items():
            check_replaceable(d, name, kind, f"{what} {str(Path(text) / name)!r}", error, hint)
        commit = Commit(d, sealed)
        commit.prepare()
        commit.commit()
    except BaseException:
        if commit is not None:
            commit.rollback()
        else:
            d.remove_created()
        raise
    else:
        commit.finish()
    finally:
        d.close()
    return d.path
