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
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CompileError
from .filewrite import WORK, write_file

# The compiler's target and architecture for each of p4gen's TNA architectures.
TARGETS = {"tna": ("tofino", "tna"), "t2na": ("tofino2", "t2na")}
NAMES = ("bf-p4c", "p4c-barefoot")       # Intel's SDE driver; p4c's open back end
TIMEOUT_S = 3600                         # a large Tofino program takes minutes on a loaded machine
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
    try:
        res = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompileError(f"{exe} --version failed: {exc}") from None
    return version_label(Path(exe).name, res.stdout + res.stderr)


def version_label(name: str, text: str) -> str:
    """One line naming a compiler from what its ``--version`` printed: p4c-barefoot prints its own
    path, then "Version 9.13.4" (the back end's version, p4c 1.2.5.16's)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    ver = next((ln for ln in lines if ln.lower().startswith("version")), None)
    if ver is not None:
        return f"{name} {ver}"
    return lines[0] if lines else name


class CompileFailed(CompileError):
    """The compiler rejected the program; ``files`` holds what is kept of the attempt (its log)."""

    def __init__(self, message: str, files: dict[str, bytes]):
        super().__init__(message)
        self.files = files


_LOCATION = re.compile(r"^(?:\S*/)?program\.p4\(\d+\)")


_SUMMARY = re.compile(r"^\d+ errors?, \d+ warnings? generated")


def first_error(log: str) -> str:
    """The compiler's (or its assembler's) first error line, as short as it can be said on one line."""
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
    tmp = str(directory)
    out = Path(tmp) / "out"
    log_parts: list[str] = []        # run in the directory, named relative to it, so the log reads as the user's
    ok = _run([exe, "--target", target, "--arch", p4arch, "-g", "-o", "out", program_name], log_parts, tmp)
    if ok and name == "p4c-barefoot":
        bfas = _assembler(exe)
        for bfa in sorted(out.rglob("*.bfa")) if bfas else []:
            rel = bfa.relative_to(tmp)
            ok = _run([bfas, "--target", target, "-o", str(rel.parent), str(rel)], log_parts, tmp)
            if not ok:
                break
    log = "".join(log_parts)
    files = {"compile.log": log.encode()}
    if not ok:
        raise CompileFailed(f"{name} rejected {program_name}: {first_error(log)}", files)
    resources = sorted(out.rglob("logs/resources.json"))
    phv = sorted(out.rglob("logs/phv.json"))
    if not resources or not phv:
        raise CompileFailed(f"{name} compiled {program_name} but wrote no logs/resources.json and "
                            f"logs/phv.json (it needs -g)", files)
    files[RESOURCES] = resources[0].read_bytes()
    files[PHV] = phv[0].read_bytes()
    parse(files[RESOURCES], files[PHV])      # refuses logs of a form this module cannot read
    return files


def _run(cmd: list[str], log_parts: list[str], tmp: str) -> bool:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log_parts.append(f"{Path(cmd[0]).name} did not run: {exc}\n")
        return False
    text = (res.stdout + res.stderr).replace(tmp + "/", "")
    log_parts.append(f"$ {Path(cmd[0]).name} {' '.join(a.replace(tmp + '/', '') for a in cmd[1:])}\n{text}")
    if res.returncode != 0:
        log_parts.append(f"exit status {res.returncode}\n")
    return res.returncode == 0


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


def parse(resources: bytes, phv: bytes, compiler: str = "") -> Allocation:
    """The allocation a compile's ``resources.json`` and ``phv.json`` describe."""
    try:
        res = json.loads(resources)["resources"]
        containers = json.loads(phv)["containers"]
        mau = res["mau"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CompileError(f"the compiler's resource logs are not in the expected form ({exc})") from None
    stages = []
    reg_stage: dict[str, int] = {}
    for st in mau.get("mau_stages", []):
        n = st["stage_number"]
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
        key = f"{c['bit_width']}b" + ("" if kind == "normal" else f" {kind}")
        used = sum(sl["field_slice"]["slice_info"]["msb"] - sl["field_slice"]["slice_info"]["lsb"] + 1
                   for sl in c.get("slices", []) if "field_slice" in sl)
        if used:
            occupied[key] = occupied.get(key, 0) + 1
            bits += used
    # normal containers first, each kind by width: 8b, 16b, 32b
    order = sorted(occupied, key=lambda k: (" " in k, k.split(" ", 1)[1:], int(k.split("b", 1)[0])))
    return Allocation(compiler=compiler, stages=tuple(sorted(stages, key=lambda s: s.stage)),
                      stage_limit=mau.get("nStages", 0), phv_containers={k: occupied[k] for k in order}, phv_bits=bits,
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
