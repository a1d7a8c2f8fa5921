"""SwitchML vs Gloo ring all-reduce on bandwidth-limited emulated links (and OmniReduce when it runs).

    sudo /tmp/venv/bin/python bench/testbed.py [--workers 2,4,8] [--size 4MiB] [--bw 5] [--png out.png]

For each worker count: SwitchML time through the software data plane and
Gloo (torch.distributed, ring all-reduce) time on the same star topology,
links and tensor; their ratio against the ideal 2(n-1)/n; SwitchML goodput
as a fraction of the link-rate bound (size / link rate).  Then the 4-worker
16 MiB exact-sum row.  With --omnireduce (needs a data plane that runs the
omnireduce plan), OmniReduce at block densities 1.0 .. 0.01 against dense
SwitchML for 4 and 8 workers.  Link rates are kept low because the Python
data plane and emulators share two CPU cores: the point is to measure the
protocols, not the interpreter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from p4gen.testbed import harness
from p4gen.testbed.cli import _plan_for, header, parse_size, row
from p4gen.testbed.net import Network
from p4gen.testbed.nodes import SoftSwitch
from p4gen.testbed.topo import star

DENSITIES = (1.0, 0.5, 0.1, 0.05, 0.01)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,4,8")
    ap.add_argument("--size", default="4MiB")
    ap.add_argument("--bw", type=float, default=5.0, help="Mbit/s per link")
    ap.add_argument("--big", default="16MiB", help="the 4-worker exact-sum row ('' to skip)")
    ap.add_argument("--big-bw", type=float, default=20.0)
    ap.add_argument("--omnireduce", action="store_true")
    ap.add_argument("--json", default="bench-testbed.json")
    ap.add_argument("--png", default="bench-testbed.png")
    ap.add_argument("--plans", default="/tmp/p4g-plans")
    a = ap.parse_args(argv)
    size = parse_size(a.size)
    plan = _plan_for("switchml", 32, Path(a.plans))
    rows, summary = [], []
    print(header())
    for n in [int(x) for x in a.workers.split(",")]:
        with Network(star(n, a.bw), switch=SoftSwitch, plan_dir=plan) as net:
            sml = harness.run_switchml(net, size=size)
            print(row(sml), flush=True)
            gl = harness.run_gloo(net, size=size)
            print(row(gl), flush=True)
        rows += [sml, gl]
        summary.append({"workers": n, "switchml_s": sml.time, "gloo_s": gl.time, "ratio": gl.time / sml.time,
                        "ideal_ratio": 2 * (n - 1) / n, "switchml_pct_of_bound": sml.pct_of_bound,
                        "gloo_pct_of_bound": gl.pct_of_bound, "exact": sml.exact})
    if a.big:
        with Network(star(4, a.big_bw), switch=SoftSwitch, plan_dir=plan) as net:
            big = harness.run_switchml(net, size=parse_size(a.big))
            print(row(big), flush=True)
        rows.append(big)
    omni = []
    if a.omnireduce:
        oplan = _plan_for("omnireduce", 32, Path(a.plans))
        for n in (4, 8):
            with Network(star(n, a.bw), switch=SoftSwitch, plan_dir=oplan) as net:
                dense = [r for r in rows if r.protocol == "switchml" and r.workers == n and r.size == size]
                for d in DENSITIES:
                    r = harness.run_switchml(net, size=size, density=d, protocol="omnireduce")
                    print(row(r), flush=True)
                    rows.append(r)
                    if dense:
                        omni.append({"workers": n, "density": d, "omni_s": r.time, "speedup": dense[0].time / r.time,
                                     "bytes_per_worker": r.bytes_per_worker, "ideal_speedup": 1 / d})
    print()
    print(" n  switchml s  gloo s  ratio  ideal  SwitchML %bound")
    for s in summary:
        print(f"{s['workers']:>2}  {s['switchml_s']:>10.2f}  {s['gloo_s']:>6.2f}  {s['ratio']:>5.2f}  "
              f"{s['ideal_ratio']:>5.2f}  {s['switchml_pct_of_bound']:>14.1f}")
    for o in omni:
        print(f"omnireduce n={o['workers']} density={o['density']}: {o['omni_s']:.2f} s, {o['speedup']:.1f}x dense "
              f"(ideal {o['ideal_speedup']:.0f}x), {o['bytes_per_worker'] / 1e6:.2f} MB sent per worker")
    Path(a.json).write_text(json.dumps({"runs": [r.to_dict() for r in rows], "summary": summary, "omnireduce": omni},
                                       indent=2) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed; no plot (results in {a.json})")
        return 0
    fig, ax = plt.subplots(1, 2 if omni else 1, figsize=(10 if omni else 5, 4), squeeze=False)
    ns = [s["workers"] for s in summary]
    ax[0][0].plot(ns, [s["switchml_s"] for s in summary], "o-", label="SwitchML (soft switch)")
    ax[0][0].plot(ns, [s["gloo_s"] for s in summary], "s-", label="Gloo ring")
    ax[0][0].plot(ns, [size * 32 / (a.bw * 1e6)] * len(ns), "k--", label="SwitchML bound")
    ax[0][0].set_xlabel("workers")
    ax[0][0].set_ylabel("all-reduce time (s)")
    ax[0][0].set_title(f"{a.size} float32, {a.bw:g} Mbit/s links")
    ax[0][0].legend()
    if omni:
        for n in (4, 8):
            pts = [o for o in omni if o["workers"] == n]
            ax[0][1].loglog([o["density"] for o in pts], [o["speedup"] for o in pts], "o-", label=f"{n} workers")
        ax[0][1].loglog(DENSITIES, [1 / d for d in DENSITIES], "k--", label="ideal 1/density")
        ax[0][1].set_xlabel("block density")
        ax[0][1].set_ylabel("speed-up over dense SwitchML")
        ax[0][1].legend()
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)
    print(f"wrote {a.png} and {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
