"""Where the testbed keeps its files: a directory only its user can enter.

The builds a switch runs (:mod:`.plans`) and the work directories of networks (logs, configs,
the job files of training runs) live under ``<tmp>/p4gen-<uid>/`` -- mode 0700, owned by the
user, checked on every use (:func:`p4gen.filewrite.private_dir`): a symlink planted there,
another user's directory or one open to group or others is refused with one line.  Nothing lives
under a fixed name in the shared temporary directory that another user could plant first, and
each work directory is a fresh ``mkdtemp`` inside.  Every file in them is written with
:data:`p4gen.filewrite.WORK` (never through a symlink, atomically).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from p4gen.filewrite import make_private_subdir, private_dir

from .errors import TestbedError


def root() -> Path:
    """The user's private testbed directory (made on first use)."""
    return private_dir(Path(tempfile.gettempdir()) / f"p4gen-{os.geteuid()}", "testbed directory", TestbedError)


def plans_dir(path: str | Path | None = None) -> Path:
    """The private directory of cached testbed builds: ``path`` (checked), or ``root()/plans``."""
    return private_dir(path if path is not None else root() / "plans", "testbed plan directory", TestbedError)


def new_workdir(prefix: str) -> Path:
    """A fresh work directory (``mkdtemp``) in the private root."""
    return make_private_subdir(root(), prefix)
