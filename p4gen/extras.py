"""Optional dependencies: which extra of pyproject.toml brings each, and the one line that says so.

A command that needs an optional module asks :func:`lacking` before it imports anything that
would fail, and raises (or prints) the line it returns::

    torch needs torch and scikit-learn (the torch extra: pip install -e '.[torch]' in the p4gen checkout)
"""

from __future__ import annotations

from importlib.util import find_spec

# import name -> (distribution, the extra that installs it)
PROVIDERS = {
    "mininet": ("mininet", "testbed"),
    "torch": ("torch", "torch"),
    "sklearn": ("scikit-learn", "torch"),
    "matplotlib": ("matplotlib", "bench"),
    "thrift": ("thrift", "bmv2"),
}


def install_hint(extra: str) -> str:
    return f"the {extra} extra: pip install -e '.[{extra}]' in the p4gen checkout"


def _importable(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):        # a parent package missing, or a module set to None
        return False


def lacking(what: str, *modules: str) -> str | None:
    """None when every one of ``modules`` can be imported; else one line: ``what`` needs the missing
    distributions, and the extra that brings them."""
    gone = [m for m in modules if not _importable(m)]
    if not gone:
        return None
    dists = [PROVIDERS[m][0] for m in gone]
    extras = list(dict.fromkeys(PROVIDERS[m][1] for m in gone))
    hint = "; ".join(install_hint(e) for e in extras)
    return f"{what} needs {' and '.join(dists)} ({hint})"
