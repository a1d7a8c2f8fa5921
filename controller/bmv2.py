"""Register reset on BMv2 through its Thrift runtime CLI.

P4Runtime on BMv2 (the PI library behind ``simple_switch_grpc``) does not
implement RegisterEntry reads or writes (p4lang/PI issue #376), so the
aggregation registers of a BMv2 switch are zeroed with ``simple_switch_CLI``
(``register_reset <fully qualified name>``), which talks to the switch's
Thrift server (port 9090 unless ``--thrift-port`` was given to the switch).
The entries of one job's slots are zeroed one by one (``register_write NAME
INDEX 0``, about 5,000 a second here), the other jobs' left as they are.
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


def register_reset(names: list[str], thrift_port: int = 9090, timeout: float = 10.0, thrift_ip: str = "localhost") -> None:
    """Zero every register in ``names`` (fully qualified, as in BMv2's JSON)."""
    _run("".join(f"register_reset {n}\n" for n in names), thrift_port, thrift_ip, timeout)


def register_zero_rows(rows: list[tuple[str, range]], thrift_port: int = 9090, thrift_ip: str = "localhost") -> int:
    """Zero the entries ``rows`` (fully qualified register name, indices) and nothing else; how many."""
    script = "".join(f"register_write {n} {i} 0\n" for n, r in rows for i in r)
    count = sum(len(r) for _n, r in rows)
    _run(script, thrift_port, thrift_ip, 10.0 + count / 1000)
    return count


def _run(script: str, thrift_port: int, thrift_ip: str, timeout: float) -> None:
    """Feed ``script`` to the CLI; a command it refuses is one ControllerError line."""
    exe = thrift_cli()
    if exe is None:
        raise ControllerError(f"{CLI} is not on PATH; P4Runtime cannot write BMv2 registers (PI issue #376)")
    where = f"{CLI} --thrift-ip {thrift_ip} --thrift-port {thrift_port}"
    try:
        proc = subprocess.run(_argv(exe) + ["--thrift-ip", thrift_ip, "--thrift-port", str(thrift_port)], input=script,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ControllerError(f"{where} did not finish within {timeout:g} s") from None
    out = proc.stdout + proc.stderr
    if "No module named 'thrift'" in out:
        raise ControllerError(f"{CLI} needs the Python thrift package ({install_hint('bmv2')})")
    # every command's answer follows its prompt on one line: 'RuntimeCmd: RuntimeCmd: Error: Invalid register ...'
    lines = [ln.replace(PROMPT, "").strip() for ln in out.splitlines()]
    bad = [ln for ln in lines if ln.lower().startswith(("error", "invalid", "could not"))]
    if proc.returncode != 0 or bad:
        first = bad[0] if bad else ([ln for ln in lines if ln] or ["no output"])[-1]
        raise ControllerError(f"{where} failed to write registers: {first}")


PROMPT = "RuntimeCmd:"
