"""Run p4c's front and mid end (``p4test``) on a program and read the IR it dumps.

``p4test --toJSON`` writes the IR after p4c's midend: the program as p4c understands it, with names
resolved, types inferred, constants folded, headers and structs flattened and every statement of an
``apply`` block moved into a table.  The program check reads that, not the P4 text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from p4gen.build import TOFINO_DEFINE
from p4gen.errors import PlanError

from .ir import IR

P4TEST = "p4test"


def find() -> str | None:
    return shutil.which(P4TEST)


def argv(exe: str, arch: str) -> list[str]:
    """The p4test command line for a program of ``arch`` (the TNA includes and target for TNA / T2NA)."""
    cmd = [exe, "--std", "p4-16"]
    if arch in TOFINO_DEFINE:
        cmd.append(TOFINO_DEFINE[arch])
        inc = os.environ.get("P4GEN_TNA_INCLUDE")
        if inc:
            cmd += ["-I", inc]
    return cmd


def read_ir(program: str | Path, arch: str, exe: str | None = None) -> IR:
    """p4c's IR of ``program`` (a file), after the midend.  Raises PlanError without p4test, or when
    p4test refuses the program (with its first error line)."""
    exe = exe or find()
    if exe is None:
        raise PlanError(f"{P4TEST} is not on PATH: program.p4 cannot be read through p4c")
    program = Path(program)
    with tempfile.TemporaryDirectory(prefix="p4gen-ir-") as tmp:
        out = Path(tmp) / "ir.json"
        cmd = argv(exe, arch) + ["--toJSON", str(out), str(program)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PlanError(f"{P4TEST} did not run on {program.name}: {exc}") from None
        if res.returncode != 0 or not out.exists():
            lines = [ln for ln in (res.stderr + res.stdout).splitlines() if "error" in ln.lower()] or \
                (res.stderr + res.stdout).splitlines() or [f"exit status {res.returncode}"]
            raise PlanError(f"{P4TEST} refused {program.name}: {lines[0].strip()[:200]}")
        with open(out, encoding="utf-8") as f:
            return IR(json.load(f))
