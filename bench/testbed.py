"""SwitchML vs Gloo ring all-reduce on bandwidth-limited emulated links, and OmniReduce vs dense SwitchML.

    .venv/bin/python bench/testbed.py [--workers 2,4,8] [--size 4MiB] [--bw 25] [--target soft|bmv2] [--png out.png]
    .venv/bin/python bench/testbed.py --workers 8 --big '' --before REV     # CPU per MiB of REV and of this checkout
    .venv/bin/python bench/testbed.py --sweep [--sweep-workers 2,4,8,16] [--sweep-sizes 1MiB,4MiB,16MiB]
    .venv/bin/python bench/testbed.py --workers '' --big '' --omnireduce --omni-size 8MiB --omni-bw 10
    .venv/bin/python bench/testbed.py --workers '' --big '' --bmv2 [--bmv2-window 8]   # BMv2 against SoftSwitch

As root; on a shared machine, under ``flock /tmp/p4gen-bench.lock`` and in a network namespace of
its own (``unshare -n sh -c 'ip link set lo up && exec ...'``).

For each worker count: SwitchML time through the software data plane and
Gloo (torch.distributed, ring all-reduce) time on the same star topology,
hosts, links and tensor, one after the other on one Mininet network; their
ratio, against the ideal ratio of their link-rate bounds; each protocol's
time as a fraction of its link-rate bound.  Gloo's frames cross the switch
node in its kernel bridge, SwitchML's go through the P4 switch
(``p4gen.testbed.l2``); each row says which path its frames took, as the
run counted them.  The bound
(``p4gen.testbed.bounds``, printed with the table) is the wire bytes per
element, payload and headers, over the link rate: SwitchML sends and
receives one frame per chunk (--target soft, the default: 8243 B for 2048
values on 9000-byte links; bmv2: 1075 B for 256 on 1500-byte ones), Gloo
2(n-1)/n of the tensor each way in full TCP segments of the links' MTU
(8948 B in 9014 B frames; 1448 B in 1514 B).  The table
also gives SwitchML's goodput (tensor bits over time) as a fraction of the
link rate.  Beside each SwitchML run, OmniReduce on the same star and
tensor size at --omni-density (each worker's blocks non-zero with that
probability; 0 skips it).  Every run's CPU seconds from the workers' go to
the last result -- the switch process and all worker processes -- are
printed with their sum per MiB aggregated (workers x tensor bytes).
--before REV runs SwitchML and OmniReduce with git revision REV's p4gen and
with this checkout's (both on bmv2 builds, and this checkout's also on
--target builds), taking turns, and prints the CPU figures per MiB and
their ratios; --sweep runs 2, 4, 8, 16 workers x 1, 4, 16 MiB (see
``bench/testbed_runs.py``).  Then the 4-worker 16 MiB exact-sum
row.  With --omnireduce: for 4 and 8 workers and block
densities 1.0 .. 0.01 (each worker's blocks non-zero independently with that
probability), OmniReduce and dense SwitchML all-reduce the *same* tensors on
the same star links, one after the other; the table gives both times, the
speed-up, bytes each worker sent, the fraction of blocks some worker holds
(``union``) and the ideal speed-up.  Ideal: every downlink carries one
full-size result per block in SwitchML, and in OmniReduce one per held block
plus one per stream for the discovery round, so the ideal speed-up is
``blocks / (union * blocks + streams)``; uplinks carry less (header-only
frames for blocks the worker lacks).  With --bmv2: the testbed's BMv2 runs (3
workers on 100 Mbit/s, --bmv2-size elements: SwitchML, with 5% loss,
OmniReduce at density 0.3, a killed worker timed to its error) on BMv2 and
on the software switch, each on a fresh network, each switch at the window
the testbed gives it (64 slots on the software switch; on BMv2 the 24 frames
it takes in flight over the 3 workers, 8), or both at --bmv2-window.  Every
network is Mininet (``p4gen.testbed.net``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import time

from testbed_runs import SWEEP_SIZES, SWEEP_WORKERS

DENSITIES = (1.0, 0.5, 0.1, 0.05, 0.01)


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,4,8")
    ap.add_argument("--size", default="4MiB")
    ap.add_argument("--bw", type=float, default=25.0, help="Mbit/s per link")
    ap.add_argument("--omni-density", type=float, default=0.1,
                    help="block density of the OmniReduce run beside each SwitchML run (0 to skip it)")
    ap.add_argument("--big", default="16MiB", help="the 4-worker exact-sum row ('' to skip)")
    ap.add_argument("--big-bw", type=float, default=20.0)
    ap.add_argument("--omnireduce", action="store_true", help="run the OmniReduce density sweep")
    ap.add_argument("--omni-workers", default="4,8")
    ap.add_argument("--omni-size", default="8MiB")
    ap.add_argument("--omni-bw", type=float, default=10.0, help="Mbit/s per link for the sweep")
    ap.add_argument("--densities", default=",".join(map(str, DENSITIES)))
    ap.add_argument("--bmv2", action="store_true",
                    help="the testbed's BMv2 runs (3 workers: exact, 5%% loss, OmniReduce, killed worker) on BMv2 "
                         "and on the software switch")
    ap.add_argument("--bmv2-size", default="65536",
                    help="elements of every --bmv2 run (at 16384 a window of 64 holds the whole tensor, and the "
                         "killed worker has sent everything before it is killed)")
    ap.add_argument("--bmv2-window", type=int, default=None,
                    help="window of the --bmv2 runs on both switches (default: each switch's own)")
    ap.add_argument("--before", metavar="REV",
                    help="CPU per MiB of SwitchML and OmniReduce at --workers, --size, --bw for git revision REV "
                         "and this checkout, taking turns in one run")
    ap.add_argument("--sweep", action="store_true",
                    help="SwitchML, OmniReduce (--omni-density) and Gloo at --sweep-workers x --sweep-sizes")
    ap.add_argument("--sweep-workers", default=",".join(map(str, SWEEP_WORKERS)))
    ap.add_argument("--sweep-sizes", default=",".join(SWEEP_SIZES))
    ap.add_argument("--child", help=argparse.SUPPRESS)        # one --before configuration, in a child process
    ap.add_argument("--json", default="bench-testbed.json")
    ap.add_argument("--png", default="bench-testbed.png",
                    help="the picture: time against workers and tensor size beside each protocol's link-rate bound "
                         "(bench/testbed_plot.py; default bench-testbed.png)")
    ap.add_argument("--plans", default=None, help="a private directory for the builds (default: the testbed's)")
    ap.add_argument("--target", choices=("soft", "bmv2"), default="soft",
                    help="the builds the software switch runs: soft (its own limits: 2048 values in 8 KiB frames on "
                         "9000-byte links) or bmv2 (BMv2's: 256 values, 128 for OmniReduce, on 1500-byte links); "
                         "the --bmv2 comparison always runs bmv2 builds")
    return ap


if __name__ == "__main__" and sys.argv[1:2] != ["--child"]:
    make_parser().parse_args()                 # --help and a bad flag are answered before the testbed is needed

from p4gen.testbed.procs import missing_requirements  # noqa: E402

if __name__ == "__main__" and missing_requirements():       # one line, before Mininet is imported
    sys.exit(f"{sys.argv[0]}: {missing_requirements()}")
if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    # one --before configuration: testbed_runs imports the measured revision's p4gen only as it runs, so
    # a revision without the names imported below (FrameLayout, before the typed Plan IR) can be measured
    from testbed_runs import child_main

    sys.exit(child_main(sys.argv[2]))

from p4gen.errors import P4genError
from p4gen.filewrite import JSON, write_file
from p4gen.plan import Plan
from p4gen.testbed import harness
from p4gen.testbed.cli import header, parse_size, row
from p4gen.testbed.errors import JobError
from p4gen.testbed.net import Network
from p4gen.testbed.nodes import BMv2Switch, SoftSwitch
from p4gen.testbed.plans import build_plan
from p4gen.testbed.topo import star
from p4gen.wire import FrameLayout
from testbed_plot import write_png
from testbed_runs import RUN_HEAD, before_after, child_main, name, run_line
from testbed_runs import sweep as sweep_sizes


def main(argv: list[str] | None = None) -> int:
    a = make_parser().parse_args(argv)
    if a.child:
        return child_main(a.child)
    size = parse_size(a.size)
    workers = [int(x) for x in a.workers.split(",") if x]
    if a.before:
        return before_after(a, workers, size)
    if a.sweep:
        return sweep_sizes(a, parse_size)
    plan = build_plan("switchml", 32, a.plans, target=a.target)
    oplan = build_plan("omnireduce", 32, a.plans, target=a.target) if a.omni_density else None
    rows, summary, cpu_rows = [], [], []
    print("load average at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    print(f"builds: {a.target} target, {FrameLayout(Plan.load(plan)).elements} values a SwitchML frame of "
          f"{FrameLayout(Plan.load(plan)).frame_len} B", flush=True)
    if workers:
        print(RUN_HEAD)
    for n in workers:
        with Network(star(n, a.bw), switch=SoftSwitch, plan_dir=plan) as net:
            sml = harness.run_switchml(net, size=size)
            print(run_line(sml.to_dict()), flush=True)
            gl = harness.run_gloo(net, size=size)
            print(run_line(gl.to_dict()), flush=True)
        rows += [sml, gl]
        cpu_rows += [sml, gl]
        if a.omni_density:
            with Network(star(n, a.bw), switch=SoftSwitch, plan_dir=oplan) as net:
                om = harness.run_switchml(net, size=size, protocol="omnireduce", density=a.omni_density)
            print(run_line(om.to_dict()), flush=True)
            rows.append(om)
            cpu_rows.append(om)
        summary.append({"workers": n, "mbit": a.bw, "size": size, "switchml_s": sml.time, "gloo_s": gl.time,
                        "ratio": gl.time / sml.time, "ideal_ratio": gl.bound_time / sml.bound_time,
                        "switchml_bound_s": sml.bound_time, "gloo_bound_s": gl.bound_time,
                        "switchml_pct_of_bound": sml.pct_of_bound, "gloo_pct_of_bound": gl.pct_of_bound,
                        "switchml_goodput_pct_of_link": 100 * sml.goodput_mbit / a.bw,
                        "switchml_bound_how": sml.bound_how, "gloo_bound_how": gl.bound_how,
                        "switchml_retransmissions": sml.retransmissions, "exact": sml.exact and sml.correct,
                        "gloo_correct": gl.correct})
    if a.big:
        print(header())
        with Network(star(4, a.big_bw), switch=SoftSwitch, plan_dir=plan) as net:
            big = harness.run_switchml(net, size=parse_size(a.big))
            print(row(big), flush=True)
        rows.append(big)
    omni = []
    if a.omnireduce:
        omni, orows = sweep(a)
        rows += orows
    versus = []
    if a.bmv2:
        versus, vrows = bmv2_versus_soft(a)
        rows += vrows
    if summary:
        print()
        print(f"{a.size} float32 on {a.bw:g} Mbit/s links, SwitchML through the software switch, Gloo on the same "
              f"hosts and links; link-rate bound = wire bytes per element (payload + headers) x elements / link rate:")
        for how in dict.fromkeys(h for s in summary for h in (s["switchml_bound_how"], s["gloo_bound_how"])):
            print(f"  {how}")
        print(SUMMARY_HEAD)
    for s in summary:
        print(summary_line(s))
    if cpu_rows:
        print()
        print("CPU seconds from the workers' go to the last result: the switch process (every thread) and all worker "
              "processes (each its own, from go to its done); CPU-s/MiB = their sum / (workers x tensor MiB).  "
              "Paths through the switch node, counted by each run:")
        for r in cpu_rows:
            print(f"  {r.workers:>2} {name(r.to_dict()):<16}  {r.path}")
    if omni:
        print()
        print(OMNI_HEAD)
        for o in omni:
            print(omni_line(o))
    if versus:
        print()
        print(VERSUS_HEAD)
        for v in versus:
            print(versus_line(v))
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    write_file(a.json, json.dumps({"runs": [r.to_dict() for r in rows], "summary": summary, "omnireduce": omni,
                                   "bmv2_vs_soft": versus}), JSON, "results file", P4genError)
    extra = ()
    if omni:
        extra = (lambda ax: plot_sweep_times(ax, omni, a), lambda ax: plot_sweep_speedup(ax, omni))
    write_png(a.png, [r.to_dict() for r in cpu_rows], a.bw, a.json, extra)
    return 0


SUMMARY_HEAD = (" n  switchml s  gloo s  gloo/switchml  ideal  SwitchML %bound  Gloo %bound  "
                "SwitchML goodput %link  retx  exact")


def summary_line(s: dict) -> str:
    return (f"{s['workers']:>2}  {s['switchml_s']:>10.2f}  {s['gloo_s']:>6.2f}  {s['ratio']:>13.2f}  "
            f"{s['ideal_ratio']:>5.2f}  {s['switchml_pct_of_bound']:>15.1f}  {s['gloo_pct_of_bound']:>11.1f}  "
            f"{s['switchml_goodput_pct_of_link']:>22.1f}  {s['switchml_retransmissions']:>4}  "
            f"{'yes' if s['exact'] and s['gloo_correct'] else 'NO'}")


OMNI_HEAD = (" n  density  union  switchml s  omni s  speed-up  ideal  1/density  "
             "MB/worker sml  MB/worker omni  retx  exact")


def omni_line(o: dict) -> str:
    return (f"{o['workers']:>2}  {o['density']:>7g}  {o['union']:>5.3f}  {o['switchml_s']:>10.2f}  {o['omni_s']:>6.2f}  "
            f"{o['speedup']:>8.1f}  {o['ideal_speedup']:>5.1f}  {1 / o['density']:>9.0f}  "
            f"{o['switchml_bytes_per_worker'] / 1e6:>13.2f}  {o['bytes_per_worker'] / 1e6:>14.3f}  "
            f"{o['retransmissions']:>4}  {'yes' if o['exact'] else 'NO'}")


def sweep(a) -> tuple[list[dict], list]:
    """OmniReduce vs dense SwitchML on the same tensors and links, per worker count and density."""
    size = parse_size(a.omni_size)
    densities = [float(x) for x in a.densities.split(",")]
    splan = build_plan("switchml", 32, a.plans, target=a.target)
    oplan = build_plan("omnireduce", 32, a.plans, target=a.target)
    out, rows = [], []
    for n in [int(x) for x in a.omni_workers.split(",")]:
        for d in densities:
            # one network per protocol (the switch runs one program); same topology, links and tensors
            with Network(star(n, a.omni_bw), switch=SoftSwitch, plan_dir=splan) as net:
                sml = harness.run_switchml(net, size=size, density=d)
            print(row(sml), flush=True)
            with Network(star(n, a.omni_bw), switch=SoftSwitch, plan_dir=oplan) as net:
                om = harness.run_switchml(net, size=size, density=d, protocol="omnireduce")
            print(row(om), flush=True)
            rows += [sml, om]
            k = FrameLayout(Plan.load(oplan)).elements
            blocks = -(-size // k)
            streams = min(om.window, blocks)
            o = {"workers": n, "density": d, "union": om.union_density, "switchml_s": sml.time, "omni_s": om.time,
                 "speedup": sml.time / om.time,
                 "ideal_speedup": blocks / (round(om.union_density * blocks) + streams),
                 "bytes_per_worker": om.bytes_per_worker, "switchml_bytes_per_worker": sml.bytes_per_worker,
                 "retransmissions": om.retransmissions, "exact": om.exact and om.correct and sml.correct,
                 "omni_pct_of_bound": om.pct_of_bound, "switchml_pct_of_bound": sml.pct_of_bound}
            print(omni_line(o), flush=True)
            out.append(o)
    return out, rows


VERSUS_RUNS = (("SwitchML", "switchml", {}), ("SwitchML, 5% loss", "switchml", {"loss": 0.05, "seed": 1}),
               ("OmniReduce d=0.3", "omnireduce", {"density": 0.3}), ("killed worker", "switchml", {"fault": "kill-worker"}))
VERSUS_HEAD = ("run                 soft s   bmv2 s   bmv2/soft  window (soft, bmv2)  retx (soft, bmv2)  "
               "exact (soft, bmv2)")


def versus_line(v: dict) -> str:
    ex = ", ".join("-" if e is None else ("yes" if e else "NO") for e in (v["soft_exact"], v["bmv2_exact"]))
    rx = ", ".join("-" if x is None else str(x) for x in (v["soft_retx"], v["bmv2_retx"]))
    wn = ", ".join("-" if x is None else str(x) for x in (v["soft_window"], v["bmv2_window"]))
    return (f"{v['run']:<18}  {v['soft_s']:>6.2f}  {v['bmv2_s']:>7.2f}  {v['bmv2_s'] / v['soft_s']:>10.1f}  "
            f"{wn:>19}  {rx:>17}  {ex}")


def _timed(net, size: int, protocol: str, opts: dict, window: int | None):
    """(seconds, RunResult or None): a killed worker is timed from the workers' start to its clear error
    (stall timeout 2 s)."""
    opts = dict(opts)
    loss = opts.pop("loss", 0.0)
    net.set_loss(loss)
    try:
        if opts.get("fault") == "kill-worker":
            t0 = time.monotonic()
            try:
                harness.run_switchml(net, size=size, protocol=protocol, stall_timeout=2.0, window=window, **opts)
            except JobError as exc:
                if "was killed mid-job" not in str(exc):
                    raise SystemExit(f"the killed-worker run: {exc}") from None
                return time.monotonic() - t0, None
            raise SystemExit("the killed-worker run finished: no fault was injected")
        r = harness.run_switchml(net, size=size, protocol=protocol, window=window, **opts)
        return r.time, r
    finally:
        net.set_loss(0.0)


def bmv2_versus_soft(a) -> tuple[list[dict], list]:
    """The same 3-worker runs on BMv2 and on the software switch, each on a fresh 100 Mbit/s star."""
    why = BMv2Switch.missing()
    if why:
        raise SystemExit(f"--bmv2: {why}")
    size = parse_size(a.bmv2_size)
    out, rows = [], []
    for name, protocol, opts in VERSUS_RUNS:
        v = {"run": name, "size": size}
        for kind, cls in (("soft", SoftSwitch), ("bmv2", BMv2Switch)):
            plan = build_plan(protocol, 32, a.plans, compile_p4=cls is BMv2Switch)
            with Network(star(3, 100), switch=cls, plan_dir=plan) as net:
                t, r = _timed(net, size, protocol, opts, a.bmv2_window)
            v[f"{kind}_s"], v[f"{kind}_exact"] = t, (None if r is None else r.exact and r.correct)
            v[f"{kind}_retx"] = None if r is None else r.retransmissions
            v[f"{kind}_window"] = None if r is None else r.window
            if r is not None:
                print(row(r), flush=True)
                rows.append(r)
        print(versus_line(v), flush=True)
        out.append(v)
    return out, rows


def plot_sweep_times(ax, omni: list[dict], a) -> None:
    for n in sorted({o["workers"] for o in omni}):
        pts = sorted((o for o in omni if o["workers"] == n), key=lambda o: o["density"])
        ds = [o["density"] for o in pts]
        ax.loglog(ds, [o["omni_s"] for o in pts], "o-", label=f"OmniReduce, {n} workers")
        ax.loglog(ds, [o["switchml_s"] for o in pts], "s--", label=f"dense SwitchML, {n} workers")
    ax.set_xlabel("block density per worker")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title(f"{a.omni_size} float32, {a.omni_bw:g} Mbit/s links")
    ax.legend(fontsize=7)


def plot_sweep_speedup(ax, omni: list[dict]) -> None:
    for n in sorted({o["workers"] for o in omni}):
        pts = sorted((o for o in omni if o["workers"] == n), key=lambda o: o["density"])
        ds = [o["density"] for o in pts]
        (line,) = ax.loglog(ds, [o["speedup"] for o in pts], "o-", label=f"measured, {n} workers")
        ax.loglog(ds, [o["ideal_speedup"] for o in pts], ":", marker="o", markerfacecolor="none",
                  color=line.get_color(), label=f"ideal (held blocks), {n} workers")
    ds = sorted({o["density"] for o in omni})
    ax.loglog(ds, [1 / d for d in ds], "k--", label="1/density")
    ax.set_xlabel("block density per worker")
    ax.set_ylabel("speed-up over dense SwitchML")
    ax.legend(fontsize=7)

if __name__ == "__main__":
    sys.exit(main())
