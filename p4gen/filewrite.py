"""The one way p4gen writes a file a user can see: never through a planted name, never over a user's file.

Build outputs (:mod:`p4gen.builddir`), verify reports, layout and job files, testbed configs, plans
and results, and benchmark records are all written here, so the same rules hold for each of them:

* A directory is opened once, component by component without following a symlink after the path
  was resolved (``realpath``), and every later step -- look, read, create, rename, remove -- names
  a file relative to that descriptor (``dir_fd``).  A component swapped for a symlink meanwhile
  cannot redirect a write.
* A name is written only where nothing is, or where a regular file is that p4gen wrote and nobody
  changed since: each kind of file carries its own proof (:class:`Kind`).  A symlink, a FIFO, a
  device, a directory or anyone else's file is refused with one line, so nothing is ever written
  through a symlink or into the other names of a hard link.
* New content goes into a temporary file created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``,
  a random name) and is renamed over the name: a reader sees the old file or the new one, and the
  other hard links of a replaced file keep their contents.
* Only files p4gen wrote are ever removed: this process's temporaries, the names a
  :class:`p4gen.filecommit.Commit` put in place, and the temporaries a killed p4gen left beside a
  name it writes again (when their content carries its kind's proof, :meth:`Directory.sweep`); a failed
  or interrupted commit puts every name back as it was, or completes (:mod:`p4gen.filecommit`).
* :func:`private_dir` makes, or checks, a directory that only its owner can enter (mode 0700): the
  testbed keeps its plans and work directories in one, never under a fixed name others can plant.

This module imports only the standard library's core (a warm ``p4gen build`` uses it).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
from pathlib import Path

MAX_OWN_BYTES = 64 << 20          # the largest file p4gen reads back to see whether it is its own
STAMP = "p4gen-digest: "
JSON_DIGEST = "p4gen_digest"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_KEY = b"p4gen-digest"


def read_upto(fd: int, n: int) -> bytes:
    """At most ``n`` bytes from the open file ``fd`` (fewer at its end)."""
    chunks, left = [], n
    while left > 0:
        b = os.read(fd, min(left, 1 << 20))
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def temp_prefix(name: str) -> str:
    """How the hidden temporaries p4gen writes beside ``name`` begin (then 12 hex digits)."""
    return f".{name}.p4gen-"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _why(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


# -- kinds: how p4gen knows a file it wrote ---------------------------------------------------------

class Kind:
    """A kind of file p4gen writes: :meth:`seal` adds the proof that p4gen wrote it, :meth:`owns` checks
    the proof on what is there now.  This base kind carries no proof: a file of it is only ever created,
    never replaced."""

    private = False               # True: the file lives in a private directory (:data:`WORK`)

    def seal(self, data: bytes) -> bytes:
        return data

    def owns(self, data: bytes) -> bool:
        return False


class LineStamp(Kind):
    """Text whose first line is ``<comment> p4gen-digest: <SHA-256 of the rest>`` (TOML, P4)."""

    def __init__(self, comment: str = "#"):
        self.head = f"{comment} {STAMP}".encode()

    def seal(self, data: bytes) -> bytes:
        return self.head + sha256_hex(data).encode() + b"\n" + data

    def owns(self, data: bytes) -> bool:
        head, _, body = data.partition(b"\n")
        return head.startswith(self.head) and head[len(self.head):] == sha256_hex(body).encode()


class JsonStamp(Kind):
    """A JSON object holding ``p4gen_digest``: the SHA-256 of the rest, as written (indent 2, sorted keys).
    :meth:`seal` takes the JSON text of an object."""

    @staticmethod
    def _body(doc: dict) -> bytes:
        import json

        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    def seal(self, data: bytes) -> bytes:
        import json

        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise TypeError("JsonStamp seals a JSON object")
        doc.pop(JSON_DIGEST, None)
        return self._body({**doc, JSON_DIGEST: sha256_hex(self._body(doc))})

    def owns(self, data: bytes) -> bool:
        import json

        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return False
        if not isinstance(doc, dict) or not isinstance(doc.get(JSON_DIGEST), str):
            return False
        digest = doc.pop(JSON_DIGEST)
        return digest == sha256_hex(self._body(doc))


class PngStamp(Kind):
    """A PNG image with a ``tEXt`` chunk ``p4gen-digest`` (before ``IEND``): the SHA-256 of the image
    without that chunk."""

    @staticmethod
    def _chunks(data: bytes):
        import struct

        i = len(_PNG_MAGIC)
        while i + 12 <= len(data):
            (n,) = struct.unpack(">I", data[i:i + 4])
            yield i, data[i + 4:i + 8], data[i + 8:i + 8 + n], i + 12 + n
            i += 12 + n

    def seal(self, data: bytes) -> bytes:
        import struct
        import zlib

        end = next(s for s, typ, _d, _e in self._chunks(data) if typ == b"IEND")
        body = _PNG_KEY + b"\0" + sha256_hex(data).encode()
        chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
        return data[:end] + chunk + data[end:]

    def owns(self, data: bytes) -> bool:
        if not data.startswith(_PNG_MAGIC):
            return False
        for start, typ, body, end in self._chunks(data):
            if typ == b"tEXt" and body.startswith(_PNG_KEY + b"\0"):
                return body[len(_PNG_KEY) + 1:] == sha256_hex(data[:start] + data[end:]).encode()
        return False


class _Work(Kind):
    """A file in a private directory (:func:`private_dir`): only its owner can have put anything there,
    so any regular file of the name is p4gen's own; still never written through a symlink."""

    private = True

    def owns(self, data: bytes) -> bool:
        return True


NEW = Kind()
TOML = LineStamp("#")
JSON = JsonStamp()
PNG = PngStamp()
WORK = _Work()


# -- a directory opened once ------------------------------------------------------------------------

class Directory:
    """A directory opened once; every name below is a plain name resolved against its descriptor.

    ``path`` is resolved once (``realpath``: the symlinks a user put in the path they name are
    followed, as a shell would); the result is then opened from ``/`` component by component
    without following any symlink, so a component replaced meanwhile fails instead of redirecting.
    With ``create``, missing directories are made (``mode``), and :meth:`remove_created` takes them
    away again while they are empty.  Raises ``error`` with one line."""

    def __init__(self, path: str | Path, what: str, error: type[Exception], *, create: bool = True,
                 mode: int = 0o777, shown: str | None = None):
        text = os.fspath(path)
        self.what, self.error = what, error
        self.shown = text if shown is None else shown
        if not text:
            raise error(f"{what} path '' is empty; name a directory")
        if "\0" in text:
            raise error(f"{what} path {text!r} contains a NUL byte")
        self.path = Path(os.path.realpath(text))
        self.fd: int | None = None
        self._created: list[tuple[int, str]] = []       # (parent fd, name) of directories made here
        parts = self.path.parts[1:]
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, part in enumerate(parts):
                fd = self._step(fd, i, create, mode)
        except BaseException:
            os.close(fd)
            self._drop_parents()
            raise
        self.fd = fd

    def _step(self, fd: int, i: int, create: bool, mode: int) -> int:
        part, here = self.path.parts[i + 1], Path(*self.path.parts[:i + 2])
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            nxt = os.open(part, flags, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise self.error(f"{self.what} {self.shown!r} does not exist") from None
            try:
                os.mkdir(part, mode, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise self.error(f"cannot create {self.what} {str(here)!r}: {_why(exc)}") from None
            else:
                self._created.append((os.dup(fd), part))
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                raise self.error(f"cannot open {self.what} {str(here)!r}: {_why(exc)}") from None
        except NotADirectoryError:
            raise self.error(f"cannot create {self.what} {self.shown!r}: {str(here)!r} is not a directory") \
                from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self.error(f"{self.what} {self.shown!r} changed while p4gen opened it "
                                 f"({str(here)!r} became a symlink)") from None
            raise self.error(f"cannot open {self.what} {self.shown!r}: {_why(exc)}") from None
        os.close(fd)
        return nxt

    # -- names in the directory
    @staticmethod
    def _plain(name: str) -> str:
        if not name or "/" in name or "\0" in name or name in (".", ".."):
            raise ValueError(f"{name!r} is not a plain file name")
        return name

    def entry(self, name: str) -> os.stat_result | None:
        """What ``name`` is (not following a symlink), or None when nothing is there."""
        try:
            return os.stat(self._plain(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def read(self, name: str, limit: int = MAX_OWN_BYTES) -> bytes | None:
        """The bytes of the regular file ``name`` (at most ``limit``), or None for anything else."""
        try:
            fd = os.open(self._plain(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = read_upto(fd, limit + 1)
            return data if len(data) <= limit else None
        except OSError:
            return None
        finally:
            os.close(fd)

    def stage(self, name: str, data: bytes, mode: int = 0o644) -> str:
        """A new hidden file beside ``name`` holding ``data`` (created exclusively); its name."""
        self._plain(name)
        for _ in range(100):
            tmp = f"{temp_prefix(name)}{os.urandom(6).hex()}"
            if self.create(tmp, data, mode, taken_ok=True):
                return tmp                                # else someone else's file of that name: left alone
        raise self.error(f"cannot write into {self.what} {self.shown!r}: no free temporary name")

    def create(self, name: str, data: bytes, mode: int = 0o644, *, taken_ok: bool = False) -> bool:
        """Create ``name`` holding ``data``, exclusively (never over anything, never through a symlink).
        False when the name is taken and ``taken_ok``; otherwise a taken name is one-line ``error``."""
        try:
            fd = os.open(self._plain(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         mode, dir_fd=self.fd)
        except FileExistsError:
            if taken_ok:
                return False
            raise self.error(f"cannot write into {self.what} {self.shown!r}: {name} is in the way") from None
        except OSError as exc:
            raise self.error(f"cannot write into {self.what} {self.shown!r}: {_why(exc)}") from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            os.close(fd)
            self.unlink(name)                         # created above, by this process
            raise self.error(f"cannot write {name} into {self.what} {self.shown!r}: {_why(exc)}") from None
        os.close(fd)
        return True

    def sweep(self, name: str, owns) -> list[str]:
        """Remove the temporaries of ``name`` a killed p4gen left behind (``.NAME.p4gen-`` and 12 hex
        digits): those that are regular files whose content ``owns`` (a kind's proof that p4gen wrote it);
        the names removed.  A file of such a name that p4gen cannot prove its own stays."""
        gone = []
        prefix = temp_prefix(name)
        for entry in self.names():
            tail = entry[len(prefix):]
            if entry.startswith(prefix) and len(tail) == 12 and all(c in "0123456789abcdef" for c in tail):
                data = self.read(entry)
                if data is not None and owns(data):
                    self.unlink(entry)
                    gone.append(entry)
        return gone

    def rename(self, src: str, dst: str) -> None:
        """``src`` takes the name ``dst`` (one rename: a symlink at ``dst`` is replaced, never followed)."""
        os.replace(self._plain(src), self._plain(dst), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def link(self, src: str, dst: str) -> None:
        os.link(self._plain(src), self._plain(dst), src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        """Remove ``name`` (the caller created it); a failure is ignored."""
        try:
            os.unlink(self._plain(name), dir_fd=self.fd)
        except OSError:
            pass

    def owner_only(self) -> bool:
        """Whether this directory belongs to this process's user and nobody else may enter it."""
        st = os.fstat(self.fd)
        return st.st_uid == os.geteuid() and not st.st_mode & 0o077

    # -- taking turns
    def lock(self, wait: float, busy: str) -> None:
        """Hold an ``flock`` on the directory (another p4gen writing into it waits); ``busy`` is the
        error's line when it is still held after ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise self.error(busy) from None
                time.sleep(0.02)

    # -- the end
    def remove_created(self) -> None:
        """Remove the directories this object made, innermost first, where they are still empty."""
        for pfd, name in reversed(self._created):
            try:
                os.rmdir(name, dir_fd=pfd)
            except OSError:
                pass
        self._drop_parents()

    def _drop_parents(self) -> None:
        for pfd, _name in self._created:
            os.close(pfd)
        self._created = []

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)             # releases the flock too
            self.fd = None
        self._drop_parents()

    def __enter__(self) -> "Directory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_replaceable(d: Directory, name: str, kind: Kind, shown: str, error: type[Exception],
                      hint: str = "move it away or choose another name") -> None:
    """Refuse, with one line, to replace ``name`` in ``d`` unless nothing is there or a regular file p4gen
    wrote (``kind``) and nobody changed since."""
    st = d.entry(name)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{shown} is a symbolic link; p4gen does not write through it ({hint})")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{shown} exists and is not a regular file ({hint})")
    if kind.private and d.owner_only():
        return
    data = d.read(name)
    if data is None or not kind.owns(data):
        raise error(f"{shown} exists and is not as p4gen wrote it (edited since, or not p4gen's); {hint}")


LOCK_WAIT = 60.0


def write_file(path: str | Path, data: bytes | str, kind: Kind, what: str, error: type[Exception], *,
               hint: str = "move it away or choose another name", mode: int = 0o644) -> Path:
    """Write ``data`` (sealed by ``kind``) to ``path``: created or atomically replaced, never through a
    symlink, never over a file p4gen did not write; the path written.  One-line ``error`` on failure."""
    text = os.fspath(path)
    shown = f"{what} {text!r}"
    if not text:
        raise error(f"{what} path '' is empty; name a file")
    p = Path(text)
    if text.endswith("/") or p.name in ("", ".", ".."):
        raise error(f"{shown} names a directory; name a file")
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    sealed = kind.seal(raw)
    d = Directory(p.parent, f"directory of {what}", error)
    try:
        if kind.private and not d.owner_only():
            raise error(f"{shown}: its directory is not private to this user; p4gen writes work files only "
                        f"into a directory it made (mode 0700)")
        d.lock(LOCK_WAIT, f"another p4gen has been writing {shown} for {LOCK_WAIT:g} s")
        check_replaceable(d, p.name, kind, shown, error, hint)
        d.sweep(p.name, kind.owns)                   # what a killed p4gen left of this name (we hold the lock)
        tmp = d.stage(p.name, sealed, mode)
        try:
            d.rename(tmp, p.name)
        except OSError as exc:
            d.unlink(tmp)
            raise error(f"cannot write {shown}: {_why(exc)}") from None
    except BaseException:
        d.remove_created()
        raise
    finally:
        d.close()
    return d.path / p.name


def check_dir(path: str | Path, error: type[Exception]) -> None:
    """Refuse, with one line, an output directory that is empty text, ``/``, or an existing non-directory."""
    text = os.fspath(path)
    if not text:
        raise error("output path '' is empty; name a directory")
    real = Path(os.path.realpath(text))
    if real.parent == real:
        raise error(f"output {text!r} is the root directory; name a directory below it")
    if real.exists() and not real.is_dir():
        raise error(f"output {text!r} exists and is not a directory")


def check_file(path: str | Path, kind: Kind, what: str, error: type[Exception], *,
               hint: str = "move it away or choose another name") -> None:
    """Refuse now, with the line :func:`write_file` would give later, a ``path`` it could not write
    (before minutes of work whose result it would then refuse to write).  Creates nothing."""
    text = os.fspath(path)
    if not text:
        raise error(f"{what} path '' is empty; name a file")
    p = Path(text)
    if text.endswith("/") or p.name in ("", ".", ".."):
        raise error(f"{what} {text!r} names a directory; name a file")
    parent = Path(os.path.realpath(p.parent))
    if not parent.is_dir():
        return                                    # no directory yet (or none can be made: said when writing)
    with Directory(parent, f"directory of {what}", error, create=False) as d:
        check_replaceable(d, p.name, kind, f"{what} {text!r}", error, hint)


def open_work_log(path: str | Path, error: type[Exception]):
    """A log file in a private directory, opened to be written from its start by a process p4gen starts
    (``O_TRUNC``, never through a symlink); a binary file object."""
    p = Path(path)
    with Directory(p.parent, "work directory", error, create=False) as d:
        if not d.owner_only():
            raise error(f"log {str(p)!r}: its directory is not private to this user")
        try:
            fd = os.open(Directory._plain(p.name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644, dir_fd=d.fd)
        except OSError as exc:
            raise error(f"cannot open log {str(p)!r}: {_why(exc)}") from None
    return os.fdopen(fd, "wb")


def private_dir(path: str | Path, what: str, error: type[Exception]) -> Path:
    """``path`` as a directory only this user can enter: made with mode 0700 when absent; refused, with
    one line, when it is a symlink, not a directory, another user's, or open to group or others."""
    p = Path(os.path.abspath(os.fspath(path)))
    try:
        os.mkdir(p, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise error(f"cannot create {what} {str(p)!r}: {_why(exc)}") from None
    try:
        st = os.lstat(p)
    except OSError as exc:
        raise error(f"cannot use {what} {str(p)!r}: {_why(exc)}") from None
    if stat.S_ISLNK(st.st_mode):
        raise error(f"{what} {str(p)!r} is a symbolic link; p4gen keeps its files only in a private directory "
                    f"it can trust (remove it, or choose another)")
    if not stat.S_ISDIR(st.st_mode):
        raise error(f"{what} {str(p)!r} exists and is not a directory")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise error(f"{what} {str(p)!r} is not private to this user (owner uid {st.st_uid}, mode "
                    f"{stat.S_IMODE(st.st_mode):04o}); p4gen keeps its files only in a directory of its user with "
                    f"mode 0700 (remove it, or choose another)")
    return p


def make_private_subdir(parent: Path, prefix: str) -> Path:
    """A fresh directory in the private ``parent`` (``mkdtemp``: mode 0700, a name nobody had)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
