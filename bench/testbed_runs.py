"""bench/testbed.py's run table, its --before comparison and its --sweep (see bench/testbed.py).

A run row: protocol, the path its frames took through the switch node (counted
by the run: P4 switch or kernel bridge), time, % of its link-rate bound, the
CPU seconds of the switch process and of all worker processes from the
workers' go to the last result, and their sum per MiB aggregated (workers x
tensor bytes).

``--before REV``: REV is exported from git (``bench/revision.py``) and
child processes of this script run the same configurations, one with
REV's p4gen on ``PYTHONPATH`` (its switch and emulators inherit it) and
bmv2 builds (the only ones a revision before the soft target has), one
with this checkout's and bmv2 builds, and one with this checkout's and
``--target`` builds (when that is not bmv2); they take turns,
configuration by configuration, and the ratios of their CPU per MiB are
printed.  REV must report CPU (the revision that added it, or later).

``--sweep``: 2, 4, 8, 16 workers x 1, 4, 16 MiB: SwitchML and Gloo on one
network per configuration, OmniReduce at --omni-density on another, one
row each, then a table and a PNG of time against workers and size beside the link-rate bounds
(bench/testbed_plot.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from testbed_plot import write_png

BENCH = Path(__file__).resolve().parent

RUN_HEAD = (" n  protocol          path            MiB  time s  %bound  switch CPU-s  workers CPU-s  CPU-s/MiB  "
            "retx  exact")


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def name(r: dict) -> str:
    return r["protocol"] if r["protocol"] != "omnireduce" else f"omnireduce d={r['density']:g}"


def path_of(r: dict) -> str:
    """Which of the switch node's paths the run's frames took (from the run's counters)."""
    p4, l2 = r.get("p4_frames", 0), r.get("l2_frames", 0)
    if p4 and not l2:
        return f"P4 ({r['switch']})"
    if l2 and not p4:
        return "kernel bridge"
    return f"both" if p4 and l2 else "-"


def run_line(r: dict) -> str:
    mib = r["size"] * 4 / 2**20
    exact = r["correct"] and (r["exact"] or r["protocol"] == "gloo")
    return (f"{r['workers']:>2}  {name(r):<16}  {path_of(r):<14}  {mib:>3g}  {r['time']:>6.2f}  "
            f"{r['pct_of_bound']:>6.1f}  {_f(r.get('switch_cpu'), '.3f'):>12}  {_f(r.get('workers_cpu'), '.3f'):>13}  "
            f"{_f(r.get('cpu_per_mib'), '.4f'):>9}  {r['retransmissions']:>4}  {'yes' if exact else 'NO'}")


# -- one configuration, in this process or a child ------------------------------------------------

def measure(n: int, mbit: float, size: int, protocols: list[str], density: float, plans: str,
            target: str = "bmv2") -> list[dict]:
    """Run ``protocols`` (switchml, gloo: one network; omnireduce: another) on a star of ``n`` hosts, with
    builds for ``target`` (bmv2: BMv2's limits, 1500-byte links; soft: the software data plane's, jumbo
    frames; a revision that predates the soft target knows only bmv2 builds)."""
    from p4gen.testbed import harness
    from p4gen.testbed.net import Network
    from p4gen.testbed.nodes import SoftSwitch
    from p4gen.testbed.plans import build_plan
    from p4gen.testbed.topo import star
    from p4gen.plan import Plan
    try:
        from p4gen.wire import FrameLayout
    except ImportError:                     # a --before revision from before the typed Plan IR
        from p4gen.wire import Layout as FrameLayout

    def plan(protocol: str):
        if target == "bmv2":
            return build_plan(protocol, 32, plans)
        return build_plan(protocol, 32, plans, target=target)

    def record(r, plan_dir) -> dict:
        fb = FrameLayout(Plan.load(plan_dir)).frame_len if r.protocol != "gloo" else 0
        return dict(r.to_dict(), target=target, frame_bytes=fb)

    out = []
    dense = [p for p in protocols if p in ("switchml", "gloo")]
    if dense:
        pd = plan("switchml")
        with Network(star(n, mbit), switch=SoftSwitch, plan_dir=pd) as net:
            for p in dense:
                r = harness.run_gloo(net, size=size) if p == "gloo" else harness.run_switchml(net, size=size)
                out.append(record(r, pd))
    if "omnireduce" in protocols:
        pd = plan("omnireduce")
        with Network(star(n, mbit), switch=SoftSwitch, plan_dir=pd) as net:
            r = harness.run_switchml(net, size=size, protocol="omnireduce", density=density)
            out.append(record(r, pd))
    return out


def child_main(spec: str) -> int:
    """``--child JSON``: measure one configuration, print where p4gen came from and the run records."""
    import p4gen

    q = json.loads(spec)
    runs = measure(q["n"], q["mbit"], q["size"], q["protocols"], q["density"], q["plans"], q.get("target", "bmv2"))
    print(json.dumps({"p4gen": str(Path(p4gen.__file__).parent), "runs": runs}), flush=True)
    return 0


class _Side:
    """One side of --before: a p4gen tree (None: this checkout) and a plans cache of its own."""

    def __init__(self, label: str, tree: Path | None, plans: Path, target: str = "bmv2"):
        self.label, self.tree, self.plans, self.target = label, tree, plans, target
        self.where = None

    def run(self, **q) -> list[dict]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
        q["plans"], q["target"] = str(self.plans), self.target
        # a build cache of the side's own: one side's builds are never another revision's cache hits
        env["P4GEN_CACHE_DIR"] = str(self.plans / "cache")
        # the child runs in the side's own directory: the switch and the emulators start as ``python -m``,
        # which puts the working directory first on sys.path, so from a checkout's root they would import
        # that checkout's p4gen whatever PYTHONPATH says
        self.plans.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([sys.executable, str(BENCH / "testbed.py"), "--child", json.dumps(q)], env=env,
                           capture_output=True, text=True, cwd=self.plans)
        if p.returncode != 0:
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"--before: the {self.label} side failed: {tail}")
        got = json.loads(p.stdout.strip().splitlines()[-1])
        self.where = got["p4gen"]
        if self.tree is not None and not self.where.startswith(str(self.tree)):
            raise SystemExit(f"--before: the {self.label} side imported p4gen from {self.where}, not {self.tree}")
        for r in got["runs"]:
            if r.get("cpu_per_mib") is None:
                raise SystemExit(f"--before: the {self.label} side's runs report no CPU time (its revision "
                                 f"predates the CPU measurement)")
        return got["runs"]


def before_after(a, workers: list[int], size: int) -> int:
    from revision import describe, export

    protocols = ["switchml"] + (["omnireduce"] if a.omni_density else [])
    names = ["before", "after"] + ([f"after-{a.target}"] if a.target != "bmv2" else [])
    rows: dict[str, list[dict]] = {k: [] for k in names}
    with tempfile.TemporaryDirectory(prefix="p4gen-before-") as tmp:
        sides = {"before": _Side("before", export(a.before, Path(tmp) / "tree"), Path(tmp) / "plans-before"),
                 "after": _Side("after", None, Path(tmp) / "plans-after")}
        if a.target != "bmv2":
            sides[names[2]] = _Side(names[2], None, Path(tmp) / f"plans-{a.target}", a.target)
        print(f"before = {describe(a.before)}; after = this checkout, HEAD {describe('HEAD')}"
              + (" (with uncommitted changes)" if _dirty() else ""))
        print(f"before and after: bmv2 builds (BMv2's limits, 1500-byte links)"
              + (f"; {names[2]}: this checkout with {a.target} builds" if len(names) > 2 else ""))
        print(f"{a.size} float32 on {a.bw:g} Mbit/s links; OmniReduce at block density {a.omni_density:g}; the "
              f"sides take turns, each configuration on fresh networks; load average "
              "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
        print("side         " + RUN_HEAD)
        for i, n in enumerate(workers):
            for side in (names if i % 2 == 0 else names[::-1]):
                got = sides[side].run(n=n, mbit=a.bw, size=size, protocols=protocols, density=a.omni_density)
                rows[side] += got
                for r in got:
                    print(f"{side:<11}  {run_line(r)}", flush=True)
        print("p4gen: " + ", ".join(f"{k} from {sides[k].where}" for k in names))
    print()
    print("CPU-s per MiB aggregated (switch process + all worker processes, from go to the last result), "
          "before and after, the same configuration in the same run:")
    print(" n  protocol          side         frame B  CPU-s/MiB  before/side  %bound")
    key = lambda r: (r["workers"], r["protocol"])          # noqa: E731
    by = {k: {key(r): r for r in rows[k]} for k in names}
    ok = True
    for b in rows["before"]:
        for k in names:
            c = by[k][key(b)]
            ok &= c["correct"]
            ratio = "" if k == "before" else f"{b['cpu_per_mib'] / c['cpu_per_mib']:>10.2f}x"
            print(f"{b['workers']:>2}  {name(b):<16}  {k:<11}  {c.get('frame_bytes', 0):>7}  "
                  f"{c['cpu_per_mib']:>9.4f}  {ratio:>11}  {c['pct_of_bound']:>6.1f}")
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    _write_json(a.json, {"before": a.before, "runs": rows})
    return 0 if ok else 1


def _dirty() -> bool:
    p = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=BENCH, capture_output=True,
                       text=True)
    return bool(p.stdout.strip())


def _write_json(path: str, doc: dict) -> None:
    """The results, as p4gen writes files (imported here: a --before child runs another revision's p4gen)."""
    from p4gen.errors import P4genError
    from p4gen.filewrite import JSON, write_file

    write_file(path, json.dumps(doc), JSON, "results file", P4genError)


# -- the scaling sweep ------------------------------------------------------------------------------

SWEEP_WORKERS = (2, 4, 8, 16)
SWEEP_SIZES = ("1MiB", "4MiB", "16MiB")


def sweep(a, parse_size) -> int:
    workers = [int(x) for x in a.sweep_workers.split(",") if x]
    sizes = [s for s in a.sweep_sizes.split(",") if s]
    protocols = ["switchml", "gloo"] + (["omnireduce"] if a.omni_density else [])
    print(f"scaling: {', '.join(map(str, workers))} workers x {', '.join(sizes)} float32 on {a.bw:g} Mbit/s links; "
          f"OmniReduce at block density {a.omni_density:g} (each worker's blocks non-zero with that probability); "
          "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    print(RUN_HEAD)
    rows = []
    for size in sizes:
        for n in workers:
            for r in measure(n, a.bw, parse_size(size), protocols, a.omni_density, a.plans, a.target):
                rows.append(r)
                print(run_line(r), flush=True)
    print()
    print(SWEEP_HEAD)
    for size in sizes:
        for n in workers:
            print(sweep_line(n, size, [r for r in rows if r["workers"] == n and r["size"] == parse_size(size)]))
    bounds = dict.fromkeys(r["bound_how"] for r in rows)
    print("link-rate bounds (wire bytes per element x elements / link rate), one line per protocol and size:")
    for how in bounds:
        print(f"  {how}")
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    _write_json(a.json, {"sweep": rows})
    write_png(a.png, rows, a.bw, a.json)
    return 0 if all(r["correct"] for r in rows) else 1


SWEEP_HEAD = (" n    MiB  switchml s  %bound  CPU-s/MiB   omni s  %bound  CPU-s/MiB   gloo s  %bound  "
              "CPU-s/MiB  gloo/switchml")


def sweep_line(n: int, size: str, rs: list[dict]) -> str:
    by = {r["protocol"]: r for r in rs}
    cells = []
    for p in ("switchml", "omnireduce", "gloo"):
        r = by.get(p)
        cells.append("       -       -          -" if r is None else
                     f"{r['time']:>8.2f}  {r['pct_of_bound']:>6.1f}  {_f(r.get('cpu_per_mib'), '.4f'):>9}")
    ratio = (f"{by['gloo']['time'] / by['switchml']['time']:>13.2f}" if "gloo" in by and "switchml" in by
             else f"{'-':>13}")
    return f"{n:>2}  {size:>5}  " + "   ".join(cells) + f"  {ratio}"
