"""The Tofino compiler: running it on a generated TNA program and reading what it allocated.

p4gen's resource model (``p4gen/planner/``) predicts stages, stateful ALUs, SRAM blocks and PHV
bits.  The compiler that places the program on the chip is p4c's Tofino back end (``p4c-barefoot``
with its assembler ``bfas``, open source in p4c since 1.2.5 under ``backends/tofino``) or Intel's
SDE compiler (``bf-p4c``).  Run with ``-g`` it writes, for each pipeline, ``logs/resources.json``
(what each MAU stage holds: SRAM and TCAM blocks, meter ALUs, which serve as stateful ALUs, hash
bits, and the P4 objects using each of them) and ``logs/phv.json`` (every PHV container and the
field slices it holds).  Their schemas are p4c's ``backends/tofino/compiler_interfaces/schemas/
{resources,phv}_schema.py``.

This module finds that compiler, runs it, and turns its logs into an :class:`Allocation`, the
allocated side of ``report.txt``'s "predicted / allocated" table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CompileError
from .filewrite import WORK, write_file
from .toolrun import TIMEOUT_ENV, log_bytes, printable, read_output, run, timeout

# The compiler's target and architecture for each of p4gen's TNA architectures.
TARGETS = {"tna": ("tofino", "tna"), "t2na": ("tofino2", "t2na")}
NAMES = ("bf-p4c", "p4c-barefoot")       # Intel's SDE driver; p4c's open back end
TIMEOUT_NOTE = f"{TIMEOUT_ENV} sets how long a compile may take; it was ended with every process it started"
RESOURCES = "compiler-resources.json"    # the compiler's own logs, kept in the build directory
PHV = "compiler-phv.json"


def find() -> tuple[str, str] | None:
    """(name, path) of the Tofino compiler on PATH, or None."""
    for name in NAMES:
        exe = shutil.which(name)
        if exe:
            return name, exe
    return None


def version(exe: str) -> str:
    rc, text = run([exe, "--version"], seconds=120)
    if rc is None:
        raise CompileError(f"{exe} --version did not answer within 120 s")
    return version_label(Path(exe).name, text)


def version_label(name: str, text: str) -> str:
    """One line naming a compiler from what its ``--version`` printed: p4c-barefoot prints its own
    path, then "Version 9.13.4" (the back end's version, p4c 1.2.5.16's)."""
    lines = [ln.strip()[:200] for ln in printable(text).splitlines() if ln.strip()]
    ver = next((ln for ln in lines if ln.lower().startswith("version")), None)
    if ver is not None:
        return f"{name} {ver}"
    return lines[0] if lines else name


class CompileFailed(CompileError):
    """The compiler rejected the program; ``files`` holds what is kept of the attempt (its log)."""

    def __init__(self, message: str, files: dict[str, bytes]):
        super().__init__(message)
        self.files = files

    def __reduce__(self):                   # back from a build's worker process as itself (several targets)
        return _compile_failed, (str(self), self.files, getattr(self, "key", None))


def _compile_failed(message: str, files: dict[str, bytes], key: str | None) -> CompileFailed:
    exc = CompileFailed(message, files)
    if key is not None:
        exc.key = key
    return exc


_LOCATION = re.compile(r"^(?:\S*/)?program\.p4\(\d+\)")


_SUMMARY = re.compile(r"^\d+ errors?, \d+ warnings? generated")


def first_error(log: str) -> str:
    """The compiler's (or its assembler's) first error line, as short as it can be said on one line (at most
    300 characters, without terminal control sequences)."""
    line = _first_error(printable(log))
    return line if len(line) <= 300 else line[:297] + "..."


def _first_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not _SUMMARY.match(ln.strip())]
    for i, ln in enumerate(lines):
        low = ln.lower()
        if low.startswith("error_code"):
            continue          # the PHV allocator's notes inside a warning
        if "error" in low and not low.startswith("compilation error") and "warning" not in low.split("error")[0]:
            # bf-p4c writes "program.p4(123): [--Werror=...] error: message" and sometimes the message on
            # the next line after a bare location
            if re.fullmatch(r".*error:?\s*", ln) and i + 1 < len(lines):
                return f"{ln} {lines[i + 1]}"
            return ln
    return lines[-1] if lines else "no output"


def _assembler(compiler_exe: str) -> str | None:
    """``bfas`` beside the compiler or on PATH (the SDE driver runs its own)."""
    beside = Path(compiler_exe).resolve().parent / "bfas"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("bfas")


def compile_tna(arch: str, program: bytes, program_name: str = "program.p4") -> dict[str, bytes]:
    """Compile ``program`` for ``arch`` (tna or t2na).  Returns the files to keep in the build
    directory: the log and the compiler's resource logs (:func:`parse` reads them).  Raises
    :class:`CompileFailed`, with the log, when the compiler refuses the program."""
    with tempfile.TemporaryDirectory(prefix="p4gen-tofino-") as tmp:
        write_file(Path(tmp) / program_name, program, WORK, "compiler input", CompileError)
        return compile_tree(arch, Path(tmp), program_name)


def compile_tree(arch: str, directory: Path, program_name: str) -> dict[str, bytes]:
    """Compile ``directory/program_name`` (its includes beside it) for ``arch``, writing the compiler's
    output under ``directory/out``; what it returns and raises is :func:`compile_tna`'s.  The log names
    files relative to ``directory``."""
    found = find()
    if found is None:
        raise CompileError(f"the Tofino compiler ({' or '.join(NAMES)}) is not on PATH")
    name, exe = found
    target, p4arch = TARGETS[arch]
    deadline = time.monotonic() + timeout()           # one bound for the compiler and its assembler runs
    tmp = str(directory)
    out = Path(tmp) / "out"
    log_parts: list[str] = []        # run in the directory, named relative to it, so the log reads as the user's
    ok = _run([exe, "--target", target, "--arch", p4arch, "-g", "-o", "out", program_name], log_parts, tmp, deadline)
    if ok and name == "p4c-barefoot":
        bfas = _assembler(exe)
        for bfa in sorted(out.rglob("*.bfa")) if bfas else []:
            rel = bfa.relative_to(tmp)
            ok = _run([bfas, "--target", target, "-o", str(rel.parent), str(rel)], log_parts, tmp, deadline)
            if not ok:
                break
    log = "".join(log_parts)
    files = {"compile.log": log_bytes(log)}
    if ok is None:
        raise CompileFailed(f"{name} did not finish {program_name} within {timeout():g} s ({TIMEOUT_NOTE})", files)
    if not ok:
        raise CompileFailed(f"{name} rejected {program_name}: {first_error(log)}", files)
    resources = sorted(out.rglob("logs/resources.json"))
    phv = sorted(out.rglob("logs/phv.json"))
    if not resources or not phv:
        raise CompileFailed(f"{name} compiled {program_name} but wrote no logs/resources.json and "
                            f"logs/phv.json (it needs -g)", files)
    files[RESOURCES] = read_output(resources[0], "logs/resources.json", name)
    files[PHV] = read_output(phv[0], "logs/phv.json", name)
    parse(files[RESOURCES], files[PHV])      # refuses logs of a form this module cannot read
    return files


def _run(cmd: list[str], log_parts: list[str], tmp: str, deadline: float) -> bool | None:
    """Run one step of the compile; whether it succeeded (None: the compile ran out of time)."""
    rc, text = run(cmd, cwd=tmp, seconds=max(0.0, deadline - time.monotonic()))
    text = text.replace(tmp + "/", "")
    log_parts.append(f"$ {Path(cmd[0]).name} {' '.join(a.replace(tmp + '/', '') for a in cmd[1:])}\n{text}")
    if rc is None:
        return None
    if rc != 0:
        log_parts.append(f"exit status {rc}\n")
    return rc == 0


# -- the allocation ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageUse:
    stage: int
    stateful_alus: int
    sram_blocks: int                 # every SRAM block the stage uses (match tables, action data, registers)
    tcam_blocks: int
    hash_bits: int
    registers: tuple[str, ...]
    register_sram_blocks: int = 0    # the blocks that hold registers


@dataclass(frozen=True)
class Allocation:
    compiler: str
    stages: tuple[StageUse, ...]            # the stages holding anything, in order
    stage_limit: int
    phv_containers: dict[str, int]           # "32b" -> containers occupied (normal, then tagalong/mocha/dark)
    phv_bits: int                            # bits occupied in all containers
    register_stage: dict[str, int] = field(default_factory=dict)

    @property
    def stages_used(self) -> int:
        """Stages the pipeline needs: the last stage holding anything, plus one."""
        return max((s.stage for s in self.stages), default=-1) + 1

    def total(self, what: str) -> int:
        return sum(getattr(s, what) for s in self.stages)

    def to_dict(self) -> dict[str, Any]:
        return {"compiler": self.compiler, "stages_used": self.stages_used, "stages_limit": self.stage_limit,
                "stateful_alus": self.total("stateful_alus"), "sram_blocks": self.total("sram_blocks"),
                "register_sram_blocks": self.total("register_sram_blocks"),
                "tcam_blocks": self.total("tcam_blocks"), "hash_bits": self.total("hash_bits"),
                "phv_bits": self.phv_bits, "phv_containers": dict(self.phv_containers),
                "register_stage": dict(self.register_stage),
                "stages": [{"stage": s.stage, "stateful_alus": s.stateful_alus, "sram_blocks": s.sram_blocks,
                            "register_sram_blocks": s.register_sram_blocks,
                            "tcam_blocks": s.tcam_blocks, "hash_bits": s.hash_bits,
                            "registers": list(s.registers)} for s in self.stages]}


def _p4name(used_by: str) -> str:
    """``P4genIngress.values3`` -> ``values3`` (the plan's register names are unqualified)."""
    return used_by.strip(".").split(".")[-1]


def _usages(items: list[dict]) -> list[dict]:
    return [u for it in items for u in it.get("usages", [])]


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a compiler log holds")


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{v!r} where an integer belongs")
    return v


def parse(resources: bytes, phv: bytes, compiler: str = "") -> Allocation:
    """The allocation a compile's ``resources.json`` and ``phv.json`` describe; CompileError (one line) for
    logs of any other form (another shape, NaN, numbers that are not integers)."""
    try:
        res = json.loads(resources, parse_constant=_no_constant)["resources"]
        containers = json.loads(phv, parse_constant=_no_constant)["containers"]
        return _allocation(res["mau"], containers, compiler)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        why = printable(str(exc) or exc.__class__.__name__).replace("\n", " ")[:200]
        raise CompileError(f"the compiler's resource logs are not in the expected form ({why})") from None


def _allocation(mau: dict, containers: list, compiler: str) -> Allocation:
    stages = []
    reg_stage: dict[str, int] = {}
    for st in mau.get("mau_stages", []):
        n = _int(st["stage_number"])
        srams = st.get("rams", {}).get("srams", [])
        tcams = st.get("tcams", {}).get("tcams", [])
        salus = st.get("meter_alus", {}).get("meters", [])
        stateful = [u for u in _usages(salus) if "stateful" in u.get("used_for", "")]
        reg_srams = [m for m in srams if any("stateful" in u.get("used_for", "") for u in m.get("usages", []))]
        regs = tuple(sorted({_p4name(u["used_by"]) for u in stateful + _usages(reg_srams)}))
        hash_bits = len(st.get("hash_bits", {}).get("bits", []))
        n_salus = sum(1 for m in salus if any("stateful" in u.get("used_for", "") for u in m.get("usages", [])))
        tables = st.get("logical_tables", {}).get("ids", st.get("logical_tables", {}).get("tables", []))
        if srams or tcams or salus or hash_bits or tables:
            stages.append(StageUse(n, n_salus, len(srams), len(tcams), hash_bits, regs, len(reg_srams)))
        for r in regs:
            reg_stage.setdefault(r, n)
    occupied: dict[str, int] = {}
    bits = 0
    for c in containers:
        kind = c.get("container_type", "normal")
        if not isinstance(kind, str) or not kind.isidentifier():
            raise ValueError(f"container_type {kind!r}")
        key = f"{_int(c['bit_width'])}b" + ("" if kind == "normal" else f" {kind}")
        used = sum(_int(sl["field_slice"]["slice_info"]["msb"]) - _int(sl["field_slice"]["slice_info"]["lsb"]) + 1
                   for sl in c.get("slices", []) if "field_slice" in sl)
        if used:
            occupied[key] = occupied.get(key, 0) + 1
            bits += used
    # normal containers first, each kind by width: 8b, 16b, 32b
    order = sorted(occupied, key=lambda k: (" " in k, k.split(" ", 1)[1:], int(k.split("b", 1)[0])))
    return Allocation(compiler=compiler, stages=tuple(sorted(stages, key=lambda s: s.stage)),
                      stage_limit=_int(mau.get("nStages", 0)), phv_containers={k: occupied[k] for k in order}, phv_bits=bits,
                      register_stage=reg_stage)


# -- predicted beside allocated ---------------------------------------------------------------------

def _cell(v: int | None) -> str:
    return "-" if v is None else str(v)


def comparison_lines(report: dict[str, Any], alloc: Allocation) -> list[str]:
    """``report.txt``'s lines that put p4gen's prediction (``report``: the report's dict) beside what
    the compiler allocated.  "-" is a figure p4gen's model does not predict."""
    tot = report["totals"]
    predicted_stage = {r: st["stage"] for st in report["stages"] for r in st["registers"]}
    rows = [("stages", tot["stages_used"], alloc.stages_used),
            ("stateful ALUs", tot["alus_used"], alloc.total("stateful_alus")),
            ("SRAM registers", tot["sram_blocks_used"], alloc.total("register_sram_blocks")),
            ("SRAM all", None, alloc.total("sram_blocks")),
            ("TCAM blocks", None, alloc.total("tcam_blocks")),
            ("PHV bits", tot["phv_bits_used"], alloc.phv_bits),
            ("hash bits", None, alloc.total("hash_bits"))]
    lines = ["", f"  compiled by  {alloc.compiler}; its log is compile.log, its resource logs {RESOURCES} "
                 f"and {PHV}",
             f"  {'':<14}{'predicted':>10}{'allocated':>10}"]
    lines += [f"  {name:<14}{_cell(p):>10}{_cell(a):>10}" for name, p, a in rows]
    lines.append("  PHV containers " + ", ".join(f"{k} {v}" for k, v in alloc.phv_containers.items()))
    lines.append("  registers    by predicted stage: each with the stage it was allocated")
    for stage in sorted(set(predicted_stage.values())):
        regs = [r for r in predicted_stage if predicted_stage[r] == stage]
        cells = ", ".join(f"{r} {_cell(alloc.register_stage.get(r))}" for r in regs)
        lines.append(f"  {stage:>5}        {cells}")
    return lines
