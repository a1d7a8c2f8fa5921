"""The layout cost model against the testbed: predicted and measured all-reduce times on bmv2 layouts.

    sudo .venv/bin/python bench/plan.py \\
        [--workers 4] [--bw 5] [--size 4MiB] [--elements 32,64,128,256] [--json bench-plan.json]

For each element count: a bmv2-target build (one pass; BMv2 has no stage limits), one
SwitchML all-reduce through the software switch on a Mininet star of TCLink (htb) links, and
the model's prediction for the same layout, window, link rate and RTT, at three windows:
the one ``p4gen plan`` picks (twice the smallest that reaches the other bounds, its
default ``--window-headroom``), that smallest window itself ("no headroom"), and 1, on a
smaller tensor, where the window bound rules.

Two inputs of the model are measured first, each by its own run, never by the runs it
predicts: the RTT, by a one-slot probe of 32-element packets (time per chunk: the
emulators, the kernel and the data plane included; ``ping`` is printed for comparison, it
crosses the switch twice and is halved; the probe runs again at the end, to show how far
the RTT drifted on the shared machine), and the packet rate of the software switch and
emulators together, by an all-reduce of 64-element packets on unshaped (1 Gbit/s) links
with a wide window (chunks per second x 2 packets per worker).  The prediction runs the
bmv2 profile with that packet rate.  The links are htb token buckets, not wires: a frame
carries no preamble, FCS or gap (htb counts the Ethernet frame: framing 0 bytes), and a
frame is not held for its serialization while the bucket has tokens; each direction has
its own bucket, so a contribution's and a result's serializations overlap the RTT instead
of adding to it (the model's serialization off).
Error = (measured - predicted) / predicted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from pathlib import Path


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--bw", type=float, default=5.0, help="Mbit/s per link")
    ap.add_argument("--size", default="4MiB")
    ap.add_argument("--small-size", default="512KiB", help="tensor of the window-1 runs")
    ap.add_argument("--elements", default="32,64,128,256")
    ap.add_argument("--json", default="bench-plan.json")
    ap.add_argument("--rate-chunks", type=int, default=3000, help="chunks of the packet-rate probe")
    ap.add_argument("--plans", default=None, help="a private directory for the builds (default: the testbed's)")
    return ap


if __name__ == "__main__":
    make_parser().parse_args()                 # --help and a bad flag are answered before the testbed is needed

from p4gen.testbed.procs import missing_requirements  # noqa: E402

if __name__ == "__main__" and missing_requirements():       # one line, before Mininet is imported
    sys.exit(f"{sys.argv[0]}: {missing_requirements()}")

from p4gen.build import build
from p4gen.errors import P4genError
from p4gen.filewrite import JSON, write_file
from p4gen.layout.cost import Geometry, Workload, predict
from p4gen.layout.workload_args import parse_size
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.testbed import harness
from p4gen.testbed.net import Network
from p4gen.testbed.nodes import SoftSwitch
from p4gen.testbed.topo import star

HEADROOM = 2.0          # p4gen plan's default --window-headroom
PROBE_CHUNKS = 400


def ping_rtt_us(net: Network) -> float:
    """Host-to-host ping through the switch, halved (it crosses the switch twice), in microseconds."""
    a, b = net.topo.hosts[0], net.topo.hosts[1]
    out = net.host(a.name).cmd(f"ping -q -c 40 -i 0.05 -W 2 {b.ip}")
    m = re.search(r"= [0-9.]+/([0-9.]+)/", out)
    if not m:
        raise RuntimeError(f"no ping summary in: {out.strip()[-200:]}")
    return float(m.group(1)) * 1e3 / 2


def probe_rtt(a, plan: Path) -> tuple[float, float]:
    """(ping, probe) RTT in microseconds: host-to-host ping halved, and a one-slot SwitchML probe's time per chunk."""
    with Network(star(a.workers, a.bw), switch=SoftSwitch, plan_dir=plan) as net:
        net.program(net.job_spec())
        ping = ping_rtt_us(net)
        res = harness.run_switchml(net, size=PROBE_CHUNKS * 32, window=1)
    return ping, res.time / PROBE_CHUNKS * 1e6


def plan_dir(elements: int, root: Path) -> Path:
    spec = make_spec(protocol="switchml", max_workers=32, slots=512, elements_per_packet=elements)
    return build(spec, load_target("bmv2"), root / f"bmv2-{elements}", use_cache=True, force=True).out_dir


def predicted(profile, wl: Workload, elements: int, window: int):
    return predict(profile, wl, Geometry("switchml", elements, 1, "resident", 1, 32, window))


def main(argv: list[str] | None = None) -> int:
    a = make_parser().parse_args(argv)
    size, small = parse_size(a.size), parse_size(a.small_size)
    counts = [int(x) for x in a.elements.split(",")]
    from p4gen.testbed.workspace import plans_dir

    root = plans_dir(a.plans)
    dirs = {e: plan_dir(e, root) for e in sorted(set(counts + [32, 64]))}
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; measuring the RTT and the packet rate",
          flush=True)
    ping, probe = probe_rtt(a, dirs[32])
    with Network(star(a.workers, 1000.0), switch=SoftSwitch, plan_dir=dirs[64]) as net:
        res = harness.run_switchml(net, size=a.rate_chunks * 64, window=64)
        kpps = a.rate_chunks / res.time * 2 * a.workers / 1e3
    profile = dataclasses.replace(load_target("bmv2"), packet_rate_kpps=kpps)
    print(f"{a.workers} workers, {a.bw:g} Mbit/s links: RTT {probe:.0f} us by a one-slot probe (ping: {ping:.0f} us); "
          f"software switch and emulators: {kpps:.1f} k packets/s (unshaped links, 64-element packets)", flush=True)
    print(" elements  window              tensor    predicted s  measured s  error   bound   exact")
    for regime, tensor in (("model", size), ("no headroom", size), ("window=1", small)):
        for e in counts:
            wl = Workload(a.workers, a.bw / 1e3, probe, tensor, framing_bytes=0, serialization=False)
            sat = predicted(profile, wl, e, 512).window_saturates_at
            window = {"model": math.ceil(HEADROOM * sat), "no headroom": sat, "window=1": 1}[regime]
            pred = predicted(profile, wl, e, window)
            with Network(star(a.workers, a.bw), switch=SoftSwitch, plan_dir=dirs[e]) as net:
                res = harness.run_switchml(net, size=tensor, window=window)
            err = (res.time - pred.time_s) / pred.time_s * 100
            row = {"elements": e, "regime": regime, "window": window, "elements_total": tensor,
                   "predicted_s": pred.time_s, "measured_s": res.time, "error_pct": err, "bound": pred.bound,
                   "exact": res.exact and res.correct, "retransmissions": res.retransmissions}
            rows.append(row)
            print(f" {e:>8}  {window:>3} {'(' + regime + ')':<15} {tensor:>8}  {pred.time_s:>11.3f}  {res.time:>10.3f}  "
                  f"{err:>+5.1f}%  {pred.bound:<6}  {'yes' if row['exact'] else 'NO'}", flush=True)
    _, probe_end = probe_rtt(a, dirs[32])
    for regime in ("model", "no headroom", "window=1"):
        errs = [abs(r["error_pct"]) for r in rows if r["regime"] == regime]
        print(f"{regime:>11}: largest |error| {max(errs):.1f}% over {len(errs)} layouts")
    print(f"RTT by the probe again at the end: {probe_end:.0f} us (start: {probe:.0f} us); "
          f"load average {os.getloadavg()[0]:.1f}")
    write_file(a.json, json.dumps({"workers": a.workers, "mbit": a.bw, "rtt_ping_us": ping, "rtt_probe_us": probe,
                                   "packet_rate_kpps": kpps, "runs": rows}), JSON, "results file", P4genError)
    return 0


if __name__ == "__main__":
    sys.exit(main())
