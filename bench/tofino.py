"""The planner's resource model held to the Tofino compiler: a sweep of configurations, each
planned by p4gen and compiled by the Tofino compiler (``bf-p4c`` or p4c's ``p4c-barefoot``).

Run: .venv/bin/python bench/tofino.py [--jobs N] [--only SUBSTRING] [--json FILE]

For every configuration it records what p4gen says (fits, with its predicted stages, stateful
ALUs, SRAM blocks and PHV bits, or the one-line "does not fit") and what the compiler says
(compiled, with what it allocated, or its first error).  A configuration p4gen refuses is still
compiled: its program is made with the target's limits lifted (the same architecture and
compiler target), so that a false "does not fit" shows as a program the compiler accepts.

It prints one line per configuration and then the counts the model is held to:

* agreement: p4gen accepts exactly what the compiler compiles (false fits, false refusals);
* predicted stages equal to allocated stages; the registers' SRAM blocks and the PHV bits within 10%.

``--json`` writes every row, with the spec (and pass shape) that was built: copied to
``tests/data/tofino_sweep.json``, it is what ``tests/test_tofino_alloc.py`` replays without the compiler.

Each compile is a process of its own (``p4gen build --compile`` as a user runs it, with a build
cache of this run's own); ``--jobs`` runs several at once.  Every figure is from this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from p4gen import tofino_compiler  # noqa: E402
from p4gen.errors import P4genError  # noqa: E402
from p4gen.filewrite import NEW, WORK, check_file, write_file  # noqa: E402
from p4gen.target import load_target  # noqa: E402

# name, target, build arguments (beyond --target); "plan:" entries build the layout `p4gen plan` picks
# for the workload given.  Elements per packet over one pass's give passes; --layout picks may fold
# passes over pipes.
CONFIGS: list[tuple[str, str, list[str]]] = []


def _add(target: str, name: str, *args: str) -> None:
    CONFIGS.append((f"{target}/{name}", target, list(args)))


for _t in ("tofino", "tofino2"):
    for _slots in ("64", "512", "4096", "max"):
        _add(_t, f"switchml-hardened-slots{_slots}", "--protocol", "switchml", "--variant", "hardened", "--slots", _slots)
    _add(_t, "switchml-hardened-slots-max+1", "--protocol", "switchml", "--variant", "hardened", "--slots", "max+1")
    _add(_t, "switchml-reference-slots512", "--protocol", "switchml", "--variant", "reference", "--slots", "512")
    _add(_t, "switchml-reference-slots-max", "--protocol", "switchml", "--variant", "reference", "--slots", "max")
    for _el in ("32", "128", "256"):
        _add(_t, f"switchml-hardened-elements{_el}", "--protocol", "switchml", "--slots", "512", "--elements", _el)
    _add(_t, "switchml-hardened-16bit", "--protocol", "switchml", "--slots", "512", "--value-width", "16")
    _add(_t, "switchml-hardened-workers128", "--protocol", "switchml", "--slots", "512", "--workers", "128")
    _add(_t, "switchml-hardened-workers256", "--protocol", "switchml", "--slots", "512", "--workers", "256")
    _add(_t, "switchml-hardened-jobs4", "--protocol", "switchml", "--slots", "512", "--jobs", "4")
    _add(_t, "omnireduce-slots512", "--protocol", "omnireduce", "--slots", "512")
    _add(_t, "omnireduce-slots-max", "--protocol", "omnireduce", "--slots", "max")
    _add(_t, "omnireduce-elements128", "--protocol", "omnireduce", "--slots", "512", "--elements", "128")
    if _t == "tofino2":   # either side of the PHV the compiler allocates (tofino2.toml phv_allocatable_bits)
        _add(_t, "switchml-hardened-elements88", "--protocol", "switchml", "--slots", "512", "--elements", "88")
        _add(_t, "omnireduce-elements88", "--protocol", "omnireduce", "--slots", "512", "--elements", "88")
    _add(_t, "omnireduce-workers256", "--protocol", "omnireduce", "--slots", "512", "--workers", "256")
    _add(_t, "plan:switchml-8w-100G", "--protocol", "switchml", "--layout", "best", "--workers", "8",
         "--link-gbps", "100", "--rtt-us", "10", "--size", "256MiB")
    _add(_t, "plan:omnireduce-8w-100G", "--protocol", "omnireduce", "--layout", "best", "--workers", "8",
         "--link-gbps", "100", "--rtt-us", "10", "--size", "256MiB", "--density", "0.25")


def _p4gen(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    res = subprocess.run([sys.executable, "-m", "p4gen.cli", *args], capture_output=True, text=True, env=env)
    return res.returncode, res.stdout, res.stderr.strip()


def _largest(target: str, args: list[str], env: dict[str, str], tmp: Path) -> int:
    """The largest slots p4gen accepts for this configuration (its report says)."""
    base = [a for a in args if a not in ("max", "max+1")]
    rc, _out, err = _p4gen(["build", "--target", target, *[a for a in base if a != "--slots"], "--slots", "64",
                            "--out", str(tmp / "largest"), "--force"], env)
    if rc != 0:
        raise SystemExit(f"bench/tofino.py: the 64-slot build of {target} {base} failed: {err}")
    return json.loads((tmp / "largest" / "report.json").read_text())["largest_slots"]


def _default_elements(target: str, args: list[str], env: dict[str, str], tmp: Path) -> str:
    """The elements per packet p4gen gives this target and protocol by default: a refused configuration
    is made on the lifted profile with these, not with the larger default its lifted stages would allow."""
    proto = args[args.index("--protocol") + 1] if "--protocol" in args else "switchml"
    rc, _out, err = _p4gen(["build", "--target", target, "--protocol", proto, "--slots", "64",
                            "--out", str(tmp / "default"), "--force"], env)
    if rc != 0:
        raise SystemExit(f"bench/tofino.py: the default {proto} build of {target} failed: {err}")
    return str(json.loads((tmp / "default" / "plan.json").read_text())["params"]["elements_per_packet"])


def _lifted(target: str, tmp: Path, alus: bool = False) -> Path:
    """A copy of the target's profile with its resource limits lifted (stages, SRAM and the rows it
    packs into, PHV and the compiler's PHV cap): a program p4gen refuses on the real limits is still
    made, for the compiler to judge.  The stateful ALUs per stage are
    lifted only with ``alus`` (a program that needs more of them in one stage than the chip has)."""
    prof = load_target(target).to_dict()
    name = f"{target}-lifted" + ("-alus" if alus else "")
    prof.update(name=name, description=f"{target} with its resource limits lifted",
                stages=min(256, 4 * prof["stages"]), sram_blocks_per_stage=1 << 14,
                register_sram_blocks_per_stage=1 << 14, phv_bits=1 << 18)
    for key in ("phv_allocatable_bits", "register_sram_rows", "register_sram_reach", "register_sram_group"):
        prof.pop(key, None)
    if alus:
        prof["alus_per_stage"] = 4 * prof["alus_per_stage"]
    return write_file(tmp / f"{name}.toml", "".join(f"{k} = {json.dumps(v)}\n" for k, v in prof.items()),
                      WORK, "target file", P4genError)


def run_one(name: str, target: str, args: list[str], env: dict[str, str], tmp: Path) -> dict:
    work = tmp / name.replace("/", "_").replace(":", "_")
    work.mkdir(parents=True)
    if "max" in args or "max+1" in args:
        i = args.index("--slots") + 1
        top = _largest(target, args, env, work)
        args = args[:i] + [str(top + (1 if args[i] == "max+1" else 0))] + args[i + 1:]
    row: dict = {"name": name, "target": target, "args": args}
    t0 = time.perf_counter()
    rc, _out, err = _p4gen(["build", "--target", target, *args, "--out", str(work / "plan")], env)
    if rc == 0:
        row["p4gen"] = "fits"
        row["predicted"] = json.loads((work / "plan" / "report.json").read_text())["totals"]
        build_args = ["build", "--target", target, *args]
    else:
        row["p4gen"] = "does not fit"
        row["p4gen_error"] = err
        if "--elements" not in args and "--layout" not in args:
            args = [*args, "--elements", _default_elements(target, args, env, work)]
        build_args = ["build", "--target-file", str(_lifted(target, tmp)), *args]
    rc, _out, err = _p4gen([*build_args, "--compile", "--out", str(work / "compiled")], env)
    if rc != 0 and row["p4gen"] == "does not fit" and "stateful ALUs per stage" in err:
        build_args = ["build", "--target-file", str(_lifted(target, tmp, alus=True)), *args]
        rc, _out, err = _p4gen([*build_args, "--compile", "--out", str(work / "compiled")], env)
    row["compile_s"] = round(time.perf_counter() - t0, 1)
    built = next((work / d / "plan.json" for d in ("plan", "compiled") if (work / d / "plan.json").exists()), None)
    if built is not None:    # what was built, for a replay without the compiler (tests/test_tofino_alloc.py)
        plan = json.loads(built.read_text())
        row["spec"] = plan["spec"]
        if "--layout" in args:
            prm = plan["params"]
            row["shape"] = {"passes": prm["passes"], "mode": prm["pass_mode"], "pipes": prm["pass_pipes"]}
    if rc == 0:
        row["compiler"] = "compiled"
        row["allocated"] = json.loads((work / "compiled" / "report.json").read_text())["allocated"]
    elif (work / "compiled" / "compile.log").exists():
        row["compiler"] = "refused"
        row["compiler_error"] = err
    else:
        row["compiler"] = "not run"
        row["compiler_error"] = err
    return row


def _within(pred: int, alloc: int, pct: float = 10.0) -> bool:
    return abs(pred - alloc) <= pct / 100.0 * max(alloc, 1)


def summarise(rows: list[dict]) -> list[str]:
    lines = []
    ran = [r for r in rows if r["compiler"] != "not run"]
    false_fit = [r for r in ran if r["p4gen"] == "fits" and r["compiler"] == "refused"]
    false_refusal = [r for r in ran if r["p4gen"] == "does not fit" and r["compiler"] == "compiled"]
    both = [r for r in ran if r["p4gen"] == "fits" and r["compiler"] == "compiled"]
    stage_eq = [r for r in both if r["predicted"]["stages_used"] == r["allocated"]["stages_used"]]
    sram_ok = [r for r in both if _within(r["predicted"]["sram_blocks_used"], r["allocated"]["register_sram_blocks"])]
    phv_ok = [r for r in both if _within(r["predicted"]["phv_bits_used"], r["allocated"]["phv_bits"])]
    lines.append(f"configurations {len(rows)}, compiled or refused by the compiler {len(ran)}, not run {len(rows) - len(ran)}")
    lines.append(f"agreement      {len(ran) - len(false_fit) - len(false_refusal)}/{len(ran)}: "
                 f"false fits {len(false_fit)}, false refusals {len(false_refusal)}")
    if both:
        lines.append(f"stages equal   {len(stage_eq)}/{len(both)} of those both accept; SRAM within 10% "
                     f"{len(sram_ok)}/{len(both)}; PHV bits within 10% {len(phv_ok)}/{len(both)}")
    return lines


def _line(r: dict) -> str:
    p4g = r["p4gen"]
    if r["p4gen"] == "fits":
        p = r["predicted"]
        p4g = f"fits: stages {p['stages_used']} SALUs {p['alus_used']} SRAM {p['sram_blocks_used']} PHV {p['phv_bits_used']}"
    if r["compiler"] == "compiled":
        a = r["allocated"]
        comp = (f"compiled: stages {a['stages_used']} SALUs {a['stateful_alus']} SRAM {a['register_sram_blocks']} "
                f"(all {a['sram_blocks']}) TCAM {a['tcam_blocks']} PHV {a['phv_bits']} hash {a['hash_bits']}")
    else:
        comp = f"{r['compiler']}: {r.get('compiler_error', '')}"
    return f"{r['name']:<46} {r['compile_s']:>7.1f}s  p4gen {p4g}  |  {comp}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1, help="compiles at once (default 1)")
    ap.add_argument("--only", default="", help="run only configurations whose name contains this")
    ap.add_argument("--json", type=Path, help="write every row as JSON to this new file")
    args = ap.parse_args()
    found = tofino_compiler.find()
    if found is None:
        print("bench/tofino.py: no Tofino compiler (bf-p4c or p4c-barefoot) on PATH", file=sys.stderr)
        return 2
    try:
        if args.json is not None:                     # a new file, checked before the compiles
            check_file(args.json, NEW, "results file", P4genError, hint="name a new file")
    except P4genError as exc:
        print(f"bench/tofino.py: {exc}", file=sys.stderr)
        return 2
    configs = [c for c in CONFIGS if args.only in c[0]]
    print(f"compiler: {found[1]} ({tofino_compiler.version(found[1])})")
    print(f"{len(configs)} configurations, {args.jobs} compile(s) at once; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="p4gen-bench-tofino-") as tmpname:
        tmp = Path(tmpname)
        env = dict(os.environ, P4GEN_CACHE_DIR=str(tmp / "cache"))
        rows: list[dict] = []
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_one, n, t, a, env, tmp) for n, t, a in configs]
            for fut in futures:
                row = fut.result()
                rows.append(row)
                print(_line(row), flush=True)
    for line in summarise(rows):
        print(line)
    if args.json is not None:
        try:
            write_file(args.json, json.dumps(rows, indent=1), NEW, "results file", P4genError, hint="name a new file")
        except P4genError as exc:
            print(f"bench/tofino.py: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
