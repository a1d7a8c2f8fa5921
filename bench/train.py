"""Training step time through the switch against Gloo, on models whose steps are bound by the links (run as root).

    python bench/train.py [--workers 4,8] [--bw 25,50] [--target soft,bmv2] [--epochs 1] [--json out.json]

As root; on a shared machine, under ``flock /tmp/p4gen-bench.lock`` and in a network namespace of
its own (``unshare -n sh -c 'ip link set lo up && exec ...'``).

One row per configuration: build target (soft: 2048 values in 8 KiB frames on
9000-byte links; bmv2: BMv2's limits, 256 values a SwitchML frame and 128 an
OmniReduce block, on 1500-byte links; both run on the software switch,
``p4gen testbed``'s default without BMv2), workers and link rate, on a star
of Mininet hosts (``p4gen testbed train``'s runner, one ``torchrun`` per
host, one epoch per run).  Each row runs:

* the dense model (``wide``, 1.1 M parameters on the digits) with Gloo's ring
  all-reduce (its TCP crosses the switch node's kernel bridge), with the
  hook (SwitchML), and with the hook and per-bucket optimiser updates;
* the sparse model (``rec``, a click model with 1.1 M parameters, almost all
  in an embedding whose gradient is block-sparse) with Gloo, SwitchML and
  OmniReduce.

For each run: its mean step time over the steps after the first (the first
also pays for DDP's first iteration), and its link-rate bound per step: the
bytes the protocol must put on each host link per step, over the link rate
(Gloo: 2(n-1)/n of the gradient each way in full TCP segments; SwitchML and
OmniReduce: the frames rank 0 needed per step in its busier direction,
headers included, retransmissions not).  Then the ratios, each from this
one run: SwitchML / Gloo and per-bucket / after backward on the dense model,
OmniReduce / SwitchML on the sparse one (with the block density of rank 0's
gradient and the union's, the blocks some worker held); each switch run's
loss curve against Gloo's (``p4gen.torch.parity``); and where rank 0's step
went: the network thread's work (wall time not spent waiting for packets,
and its CPU time) as a share of the step.

The machine is shared and noisy: the load average is printed before and
after every row (the runs' own nine processes on two cores add to it; with
--settle S the bench waits S seconds before each row, so that the load
printed before it is what the rest of the machine does).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

DENSE, SPARSE = "wide", "rec"
RUNS = ((DENSE, "gloo", False), (DENSE, "switchml", False), (DENSE, "switchml", True),
        (SPARSE, "gloo", False), (SPARSE, "switchml", False), (SPARSE, "omnireduce", False))


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def _key(model: str, proto: str, per_bucket: bool) -> str:
    return f"{model} {proto}" + (" per-bucket" if per_bucket else "")


def run_row(target: str, workers: int, mbit: float, epochs: int, plans) -> dict:
    """Every run of one configuration: key -> rank 0's training record."""
    from p4gen.testbed.net import Network
    from p4gen.testbed.nodes import SoftSwitch
    from p4gen.testbed.plans import build_plan
    from p4gen.testbed.topo import star
    from p4gen.testbed.train import run_train

    out = {}
    for model, proto, per_bucket in RUNS:
        plan = build_plan("switchml" if proto == "gloo" else proto, workers, plans, target=target)
        with Network(star(workers, mbit), switch=SoftSwitch, plan_dir=plan) as net:
            out[_key(model, proto, per_bucket)] = run_train(net, protocol=proto, model=model, epochs=epochs,
                                                             per_bucket=per_bucket)
    return out


def report(target: str, workers: int, mbit: float, runs: dict, load: str) -> list[str]:
    """The row's lines: step times and bounds, the ratios, parity, where a step went."""
    from p4gen.torch.models import dataset
    from p4gen.torch.parity import compare
    from p4gen.testbed.train_stats import steady_step, step_bound

    def ms(key):
        return 1e3 * steady_step(runs[key])

    def bound(key):
        return 1e3 * step_bound(runs[key])[0]

    lines = [f"{target} target, {workers} workers, {mbit:g} Mbit/s ({load})"]
    for key, rec in runs.items():
        h = rec.get("hook") or {}
        extra = ""
        if h.get("block_density") is not None:
            extra = f", block density {h['block_density']:.3f}"
            if h.get("union_density") is not None:
                extra += f" (union {h['union_density']:.3f})"
        lines.append(f"  {key:<24} {len(rec['step_time']):3d} steps  step {ms(key):7.1f} ms  bound {bound(key):7.1f} ms "
                     f"({step_bound(rec)[1]})  {100 * bound(key) / ms(key):3.0f}% of bound{extra}")
    d, s = DENSE, SPARSE
    lines.append(f"  ratios: switchml / gloo, {d} {ms(f'{d} switchml') / ms(f'{d} gloo'):.2f} "
                 f"(bounds {bound(f'{d} switchml') / bound(f'{d} gloo'):.2f});  "
                 f"per-bucket / after backward, {d} {ms(f'{d} switchml per-bucket') / ms(f'{d} switchml'):.2f};  "
                 f"omnireduce / switchml, {s} {ms(f'{s} omnireduce') / ms(f'{s} switchml'):.2f} "
                 f"(bounds {bound(f'{s} omnireduce') / bound(f'{s} switchml'):.2f});  "
                 f"switchml / gloo, {s} {ms(f'{s} switchml') / ms(f'{s} gloo'):.2f}")
    after = runs[f"{d} switchml"]
    opt = 1e3 * sum(after["optimizer_time"][1:]) / max(1, len(after["optimizer_time"]) - 1)
    lines.append(f"  per-bucket updates can hide at most what the optimiser takes after backward: {opt:.1f} ms of a "
                 f"{ms(f'{d} switchml'):.0f} ms step ({100 * opt / ms(f'{d} switchml'):.1f}%); "
                 f"{runs[f'{d} switchml']['hook']['arrays'] / len(after['step_time']):.0f} buckets a step")
    for model in (d, s):
        test = len(dataset(model)[3])
        for key in (k for k in runs if k.startswith(model) and "gloo" not in k):
            lines.append("  " + compare(runs[key], runs[f"{model} gloo"], test).line(f"{key} against gloo"))
    for key in (k for k in runs if "gloo" not in k):
        rec = runs[key]
        h, steps = rec["hook"], len(rec["step_time"])
        step = sum(rec["step_time"]) / steps
        work, cpu, wait = (h["busy_s"] - h["wait_s"]) / steps, h["cpu_s"] / steps, h["wait_s"] / steps
        opt = (h["bucket_optimizer_s"] / steps) if rec["per_bucket"] else sum(rec["optimizer_time"]) / steps
        lines.append(f"  {key:<24} a step (mean of all {steps}) {1e3 * step:7.1f} ms: network thread waiting "
                     f"{1e3 * wait:7.1f}, working {1e3 * work:6.1f} ({100 * work / step:4.1f}% of the step; its CPU "
                     f"{1e3 * cpu:6.1f} ms, {100 * cpu / step:4.1f}%), optimiser {1e3 * opt:5.1f}; "
                     f"{h['arrays'] / steps:.0f} buckets, {h['packets'] / steps:.0f} packets "
                     f"({h['retransmitted'] / steps:.1f} resent) a step")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="4,8", help="worker counts, comma-separated (default 4,8)")
    ap.add_argument("--bw", default="25,50", help="link rates in Mbit/s, comma-separated (default 25,50)")
    ap.add_argument("--target", default="soft,bmv2", help="build targets, comma-separated (default soft,bmv2)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs per run (default 1)")
    ap.add_argument("--plans", default=None, help="a private directory for the builds (default: the testbed's)")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to wait before each row, so that the load printed before it is the machine's "
                         "own and not the last row's (default 0)")
    ap.add_argument("--json", help="write every run's record here")
    a = ap.parse_args(argv)
    from p4gen.extras import lacking
    from p4gen.testbed.procs import missing_requirements

    why = missing_requirements() or lacking("bench/train.py", "torch", "sklearn")
    if why:
        print(f"bench/train.py: {why}", file=sys.stderr)
        return 2
    targets = [t for t in a.target.split(",") if t]
    if not targets or any(t not in ("soft", "bmv2") for t in targets):
        ap.error(f"--target {a.target!r} must list soft and/or bmv2")
    try:
        workers = [int(x) for x in a.workers.split(",") if x]
        rates = [float(x) for x in a.bw.split(",") if x]
    except ValueError:
        ap.error("--workers and --bw take comma-separated numbers")
    if not workers or not rates or min(workers) < 2 or min(rates) <= 0:
        ap.error("--workers needs counts of at least 2 and --bw positive rates")
    print(f"{os.cpu_count()} cores; one epoch per run: {DENSE} (dense) and {SPARSE} (block-sparse); step = mean "
          "over the steps after the first; bound = the link-rate bound of the bytes a step needs", flush=True)
    results = {}
    for target in targets:
        for n in workers:
            for mbit in rates:
                time.sleep(a.settle)
                load = _load()
                runs = run_row(target, n, mbit, a.epochs, a.plans)
                for line in report(target, n, mbit, runs, f"{load} before, {_load()} after"):
                    print(line, flush=True)
                results[f"{target} {n} {mbit:g}"] = runs
    if a.json:
        from p4gen.errors import P4genError
        from p4gen.filewrite import JSON, write_file

        write_file(a.json, json.dumps(results), JSON, "results file", P4genError)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
