"""The first line .ci/test prints: which P4 toolchain it found and which tool families run or skip.

Run by .ci/test with the checkout's .venv Python after the toolchain's env.sh, with the toolchain folder
(or nothing) as its argument.  Each family is looked up as its tests look it up, so the line says what
the suite will do:

    .ci/test: toolchain /work/shared/p4toolchain; runs: p4c (p4c-bm2-ss, p4test), BMv2 (simple_switch_grpc),
    Tofino compiler (p4c-barefoot), Mininet testbed, torch, thrift; skips: none
"""

from __future__ import annotations

import os
import shutil
import sys

from p4gen import tofino_compiler
from p4gen.extras import PROVIDERS, lacking


def _which(*tools: str) -> tuple[list[str], list[str]]:
    have = [t for t in tools if shutil.which(t)]
    return have, [t for t in tools if t not in have]


def _extra(*modules: str) -> str | None:
    """Why the tests that import ``modules`` skip (short: the extra to install), or None."""
    if lacking("", *modules) is None:
        return None
    gone = [m for m in modules if lacking("", m)]
    extras = sorted({PROVIDERS[m][1] for m in gone})
    return f"{' and '.join(PROVIDERS[m][0] for m in gone)} not installed: the {' and '.join(extras)} extra"


def families() -> list[tuple[str, str, str | None]]:
    """(family, the tools found, None) or (family, "", why it skips), in the order the line gives them."""
    from p4gen.testbed.procs import missing_requirements

    out: list[tuple[str, str, str | None]] = []
    have, gone = _which("p4c-bm2-ss", "p4test")
    out.append(("p4c", ", ".join(have), None if have else "p4c-bm2-ss and p4test not on PATH"))
    have, gone = _which("simple_switch", "simple_switch_grpc")
    out.append(("BMv2", ", ".join(have), f"{' and '.join(gone)} not on PATH" if gone else None))
    found = tofino_compiler.find()
    out.append(("Tofino compiler", found[0] if found else "",
                None if found else f"{' and '.join(tofino_compiler.NAMES)} not on PATH"))
    out.append(("Mininet testbed", "", _extra("mininet") or missing_requirements()))
    out.append(("torch", "", _extra("torch", "sklearn")))
    out.append(("thrift", "", _extra("thrift")))
    out.append(("matplotlib", "", _extra("matplotlib")))
    return out


def line(toolchain: str) -> str:
    where = (f"toolchain {toolchain}" if toolchain else
             "no P4 toolchain (neither ../shared/p4toolchain nor P4GEN_P4TOOLCHAIN)")
    fams = families()
    runs = ", ".join(name + (f" ({tools})" if tools else "") for name, tools, why in fams if why is None) or "none"
    skips = "; ".join(f"{name} ({why})" for name, _tools, why in fams if why is not None) or "none"
    return f".ci/test: {where}; runs: {runs}; skips: {skips}"


if __name__ == "__main__":
    print(line(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TOOLCHAIN", "")), flush=True)
