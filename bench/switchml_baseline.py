"""p4lang/p4app-switchML's hand-written Tofino program, compiled, beside p4gen's programs for the same chip.

Run: .venv/bin/python bench/switchml_baseline.py PATH [--workers 8 --link-gbps 100 --rtt-us 10 --size 256MiB]

PATH is a checkout of p4app-switchML that the user has (its ``dev_root/p4``, or that folder itself); nothing
of it is part of this repository.  Its P4 is copied to a temporary folder, where the one pragma the open
Tofino compiler (p4c-barefoot 9.13.4) fails PHV allocation on is removed (``@pa_container_size`` for
``hdr.ib_bth.psn``, a field of the RDMA header), and compiled with the same compiler and assembler as
``p4gen build --compile`` (``p4gen.tofino_compiler``).  p4gen's default tofino build (``--slots 512``) and
the layout ``p4gen plan`` picks for the workload given are built with ``--compile``.

It prints one row per program: values a pass holds, bytes of values a packet carries, stages, stateful
ALUs, the SRAM blocks the registers take and PHV bits, every figure as the compiler allocated it (p4gen's
prediction beside it where p4gen makes one).  SwitchML's values per pass are its value registers (each a
pair of 32-bit lanes) times two; its 1 KiB packets take four passes folded over four pipes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from p4gen import tofino_compiler  # noqa: E402
from p4gen.errors import P4genError  # noqa: E402
from p4gen.filewrite import NEW, check_file, write_file  # noqa: E402

PRAGMA = re.compile(r'^\s*@pa_container_size\("ingress",\s*"hdr\.ib_bth\.psn",\s*32\)\s*$', re.M)
MAIN = "switchml.p4"


def switchml_sources(path: Path) -> Path:
    """The folder holding SwitchML's ``switchml.p4`` under ``path`` (a checkout or ``dev_root/p4``)."""
    for cand in (path, path / "dev_root" / "p4"):
        if (cand / MAIN).is_file():
            return cand
    raise P4genError(f"{path} holds no {MAIN} (neither it nor its dev_root/p4); give a p4app-switchML checkout")


def commit_of(path: Path) -> str:
    try:
        res = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=30)
    except OSError:
        return "unknown commit"
    return res.stdout.strip() or "unknown commit"


def switchml_values(src: Path) -> int:
    """Values one pass of SwitchML's program holds: its value registers (``Processor`` instances, each a pair
    of 32-bit lanes) times two."""
    return 2 * len(re.findall(r"^\s*Processor\(\)\s+value\d+\s*;", (src / MAIN).read_text(), re.M))


def compile_switchml(src: Path, tmp: Path) -> tuple[dict, int, float]:
    """(allocation, values per pass, seconds) of SwitchML's program compiled from a copy without the pragma."""
    work = tmp / "switchml"
    shutil.copytree(src, work)
    headers = work / "headers.p4"
    text = headers.read_text()
    stripped, n = PRAGMA.subn("", text)
    if n != 1:
        raise P4genError(f"{headers.relative_to(tmp)}: expected one @pa_container_size pragma for hdr.ib_bth.psn, "
                         f"found {n}")
    headers.write_text(stripped)
    t0 = time.monotonic()
    try:
        files = tofino_compiler.compile_tree("tna", work, MAIN)
    except tofino_compiler.CompileFailed as exc:
        log = exc.files.get("compile.log", b"")
        (tmp / "switchml.log").write_bytes(log)
        raise P4genError(f"{exc} (after {time.monotonic() - t0:.0f} s); the compiler's errors:\n"
                         + "\n".join(error_block(log.decode(errors="replace")))) from None
    (tmp / "switchml.log").write_bytes(files["compile.log"])
    secs = time.monotonic() - t0
    alloc = tofino_compiler.parse(files[tofino_compiler.RESOURCES], files[tofino_compiler.PHV])
    return alloc.to_dict(), switchml_values(work), secs


def error_block(log: str, context: int = 12) -> list[str]:
    """The compiler's error lines, each with the lines that follow it (where it names what broke)."""
    lines = log.splitlines()
    keep: list[str] = []
    for i, ln in enumerate(lines):
        if "error" in ln.lower() and "warning" not in ln.lower():
            keep += [x for x in lines[i:i + context] if x not in keep[-context:]]
    return keep[:80]


def build_p4gen(name: str, args: list[str], tmp: Path, env: dict) -> dict:
    out = tmp / name
    cmd = [sys.executable, "-m", "p4gen.cli", "build", "--target", "tofino", "--compile", "--out", str(out), *args]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    secs = time.monotonic() - t0
    if res.returncode != 0:
        raise P4genError(f"p4gen build {' '.join(args)} failed: {(res.stderr or res.stdout).strip().splitlines()[-1]}")
    rep = json.loads((out / "report.json").read_text())
    return {"report": rep, "seconds": secs}


def plan_layout(workload: list[str], tmp: Path, env: dict) -> Path:
    out = tmp / "layout.json"
    cmd = [sys.executable, "-m", "p4gen.cli", "plan", "--target", "tofino", *workload, "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0 or not out.is_file():
        raise P4genError(f"p4gen plan failed: {(res.stderr or res.stdout).strip().splitlines()[-1]}")
    return out


def p4gen_row(label: str, built: dict) -> list[str]:
    rep, alloc = built["report"], built["report"]["allocated"]
    tot = rep["totals"]
    per_pass = rep["elements_per_pass"]
    packet = rep["elements_per_packet"] * rep["value_width"] // 8
    return [label, str(per_pass), f"{packet} B ({rep['passes']} pass{'es' if rep['passes'] > 1 else ''})",
            f"{tot['stages_used']} / {alloc['stages_used']}", f"{tot['alus_used']} / {alloc['stateful_alus']}",
            f"{tot['sram_blocks_used']} / {alloc['register_sram_blocks']}",
            f"{tot['phv_bits_used']} / {alloc['phv_bits']}"]


def table(rows: list[list[str]]) -> list[str]:
    head = ["program", "values/pass", "bytes of values a packet", "stages", "stateful ALUs", "SRAM blocks (registers)",
            "PHV bits"]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths))  # noqa: E731
    return [fmt(head)] + [fmt(r) for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("switchml", type=Path, help="a p4app-switchML checkout (or its dev_root/p4)")
    ap.add_argument("--workers", default="8")
    ap.add_argument("--link-gbps", default="100")
    ap.add_argument("--rtt-us", default="10")
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--log", type=Path, help="write SwitchML's compile log to this new file")
    args = ap.parse_args()
    if tofino_compiler.find() is None:
        print("bench/switchml_baseline.py: no Tofino compiler (bf-p4c or p4c-barefoot) on PATH", file=sys.stderr)
        return 2
    workload = ["--workers", args.workers, "--link-gbps", args.link_gbps, "--rtt-us", args.rtt_us,
                "--size", args.size]
    try:
        if args.log is not None:
            check_file(args.log, NEW, "log file", P4genError, hint="name a new file")
        src = switchml_sources(args.switchml)
        exe = tofino_compiler.find()[1]
        print(f"compiler: {exe} ({tofino_compiler.version(exe)}); SwitchML {src} at {commit_of(src)}")
        print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")
        with tempfile.TemporaryDirectory(prefix="p4gen-bench-switchml-") as tmpname:
            tmp = Path(tmpname)
            env = dict(os.environ, P4GEN_CACHE_DIR=str(tmp / "cache"))
            sml, refused = None, None
            try:
                sml, per_pass, secs = compile_switchml(src, tmp)
                print(f"SwitchML compiled in {secs:.1f} s (the @pa_container_size pragma for hdr.ib_bth.psn removed)")
            except P4genError as exc:
                refused = str(exc)
                print(f"SwitchML: {refused}")
            finally:
                if args.log is not None and (tmp / "switchml.log").is_file():
                    write_file(args.log, (tmp / "switchml.log").read_bytes(), NEW, "log file", P4genError)
            default = build_p4gen("default", ["--slots", "512"], tmp, env)
            layout = plan_layout(workload, tmp, env)
            best = build_p4gen("best", ["--layout", str(layout)], tmp, env)
    except (P4genError, tofino_compiler.CompileFailed) as exc:
        print(f"bench/switchml_baseline.py: {exc}", file=sys.stderr)
        return 1
    per_pass = switchml_values(src)
    label = f"SwitchML (hand-written{', refused' if sml is None else ''})"
    cells = (["-"] * 4 if sml is None else
             [f"- / {sml['stages_used']}", f"- / {sml['stateful_alus']}", f"- / {sml['register_sram_blocks']}",
              f"- / {sml['phv_bits']}"])
    rows = [[label, str(per_pass), f"{per_pass * 4} B (1 pass) or {per_pass * 16} B (4 passes)", *cells],
            p4gen_row(f"p4gen best ({' '.join(workload)})", best),
            p4gen_row("p4gen default (--slots 512)", default)]
    print("figures: p4gen's prediction / the compiler's allocation ('-': no prediction)")
    for line in table(rows):
        print(line)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
