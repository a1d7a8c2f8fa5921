"""Register reset on BMv2 through its Thrift runtime CLI.

P4Runtime on BMv2 (the PI library behind ``simple_switch_grpc``) does not
implement RegisterEntry reads or writes (p4lang/PI issue #376), so the
aggregation registers of a BMv2 switch are zeroed with ``simple_switch_CLI``
(``register_reset <fully qualified name>``), which talks to the switch's
Thrift server (port 9090 unless ``--thrift-port`` was given to the switch).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from p4gen.extras import install_hint, lacking

from .errors import ControllerError

CLI = "simple_switch_CLI"


def thrift_cli() -> str | None:
    return shutil.which(CLI)


def _argv(exe: str) -> list[str]:
    """How to run the CLI: BMv2's is a Python script, run here with this interpreter when it has thrift
    (the python3 on PATH may be another one, without it)."""
    try:
        with open(exe, "rb") as f:
            first = f.read(128).split(b"\n")[0]
    except OSError:
        return [exe]
    if first.startswith(b"#!") and b"python" in first and lacking(CLI, "thrift") is None:
        return [sys.executable, exe]
    return [exe]


def register_reset(names: list[str], thrift_port: int = 9090, timeout: float = 10.0) -> None:
    """Zero every register in ``names`` (fully qualified, as in BMv2's JSON)."""
    exe = thrift_cli()
    if exe is None:
        raise ControllerError(f"{CLI} is not on PATH; P4Runtime cannot reset BMv2 registers (PI issue #376)")
    script = "".join(f"register_reset {n}\n" for n in names)
    try:
        proc = subprocess.run(_argv(exe) + ["--thrift-port", str(thrift_port)], input=script, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ControllerError(f"{CLI} --thrift-port {thrift_port} did not finish within {timeout:g} s") from None
    out = proc.stdout + proc.stderr
    if "No module named 'thrift'" in out:
        raise ControllerError(f"{CLI} needs the Python thrift package ({install_hint('bmv2')})")
    bad = [ln.strip() for ln in out.splitlines() if ln.strip().lower().startswith(("error", "invalid", "could not"))]
    if proc.returncode != 0 or bad:
        first = bad[0] if bad else (out.strip().splitlines() or ["no output"])[-1]
        raise ControllerError(f"{CLI} --thrift-port {thrift_port} failed to reset registers: {first}")
