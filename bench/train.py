"""Training step time through the switch against Gloo, on the same Mininet links (run as root).

    python bench/train.py [--workers 4] [--bw 50] [--epochs 1] [--json out.json]

One process per Mininet host (``p4gen testbed train``'s runner), the digits,
the software switch.  Each comparison is two runs on the same topology,
links, data and seed, and is printed as a ratio of their mean step times
(a step: zero_grad, forward, backward with the hook's all-reduce, the
optimiser):

1. the hook (SwitchML) against Gloo's all-reduce, on the dense MLP and on
   the EmbeddingBag model;
2. per-bucket updates against a step after backward (SwitchML, the
   EmbeddingBag model in buckets of --bucket-mb MiB, so a step has several);
3. OmniReduce against SwitchML on the EmbeddingBag model, whose gradient is
   block-sparse (the measured block density is printed);
4. where a SwitchML step's time goes, per step on rank 0: waiting for
   packets (the network and the peers), the rest of the network thread's
   work (quantise, frames, dequantise, sockets), the optimiser, and
   forward/backward (the step minus the optimiser and minus what backward
   waited for).  Quantise and dequantise alone are timed on the same
   buckets in this process, with the codec's own functions.

The machine is shared and noisy: read the ratios, from this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def _mean_ms(xs) -> float:
    return 1e3 * float(np.mean(xs))


def _codec_ms(size: int, n: int, elements: int, reps: int = 5) -> tuple[float, float]:
    """Quantise and dequantise of one ``size``-element bucket (fastest of ``reps``), in ms."""
    from p4gen.host import codec

    x = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    k = elements
    nb = -(-size // k)
    blocks = np.zeros(nb * k, np.float64)
    blocks[:size] = x
    blocks = blocks.reshape(nb, k)
    e = codec.exponent_of(blocks, axis=1)
    q_best = d_best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        q = [codec.to_wire(codec.quantize(blocks[i], int(e[i]), n)) for i in range(nb)]
        t1 = time.perf_counter()
        [codec.dequantize(codec.from_wire(q[i]) * n, int(e[i]), n) for i in range(nb)]
        t2 = time.perf_counter()
        q_best, d_best = min(q_best, t1 - t0), min(d_best, t2 - t1)
    return 1e3 * q_best, 1e3 * d_best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--bw", type=float, default=50.0, help="link rate, Mbit/s")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=0.05)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/train.py needs root (Mininet)", file=sys.stderr)
        return 2
    from p4gen.extras import lacking
    from p4gen.testbed.procs import missing_requirements

    why = missing_requirements() or lacking("bench/train.py", "torch", "sklearn")
    if why:
        print(f"bench/train.py: {why}", file=sys.stderr)
        return 2
    from p4gen.testbed.net import Network
    from p4gen.testbed.nodes import SoftSwitch
    from p4gen.testbed.plans import build_plan
    from p4gen.testbed.topo import star
    from p4gen.testbed.train import run_train

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {a.workers} workers, "
          f"{a.bw:g} Mbit/s star links, software switch, {a.epochs} epoch(s) of the digits per run", flush=True)
    runs: dict[str, dict] = {}

    def run(key, proto, model, **kw):
        plan = build_plan("switchml" if proto == "gloo" else proto, a.workers)
        with Network(star(a.workers, a.bw), switch=SoftSwitch, plan_dir=plan) as net:
            rec = run_train(net, protocol=proto, model=model, epochs=a.epochs, **kw)
        rec["elements"] = json.loads((plan / "plan.json").read_text())["params"]["elements_per_packet"]
        runs[key] = rec
        h = rec.get("hook") or {}
        print(f"  {key:<28} {len(rec['step_time'])} steps, mean step {_mean_ms(rec['step_time']):7.1f} ms"
              + (f", block density {h['block_density']:.3f}" if h.get("block_density") is not None else ""),
              flush=True)
        return rec

    run("gloo mlp", "gloo", "mlp")
    run("switchml mlp", "switchml", "mlp")
    run("gloo embbag", "gloo", "embbag")
    run("switchml embbag", "switchml", "embbag")
    run("omnireduce embbag", "omnireduce", "embbag")
    run("switchml embbag buckets", "switchml", "embbag", bucket_mb=a.bucket_mb)
    run("switchml embbag per-bucket", "switchml", "embbag", bucket_mb=a.bucket_mb, per_bucket=True)

    def ratio(x, y) -> float:
        return float(np.mean(runs[x]["step_time"]) / np.mean(runs[y]["step_time"]))

    print("\nstep time ratios (mean step time, this run):")
    print(f"  switchml / gloo, mlp                 {ratio('switchml mlp', 'gloo mlp'):.2f}")
    print(f"  switchml / gloo, embbag              {ratio('switchml embbag', 'gloo embbag'):.2f}")
    print(f"  per-bucket / after backward          {ratio('switchml embbag per-bucket', 'switchml embbag buckets'):.2f}"
          f"  ({runs['switchml embbag buckets']['hook']['arrays'] // len(runs['switchml embbag buckets']['step_time'])}"
          f" buckets a step)")
    print(f"  omnireduce / switchml, embbag        {ratio('omnireduce embbag', 'switchml embbag'):.2f}"
          f"  (block density {runs['omnireduce embbag']['hook']['block_density']:.3f}, "
          f"packets a step {runs['omnireduce embbag']['hook']['packets'] / len(runs['omnireduce embbag']['step_time']):.0f}"
          f" against {runs['switchml embbag']['hook']['packets'] / len(runs['switchml embbag']['step_time']):.0f})")

    from p4gen.torch.train import VOCAB, DIM

    print("\nwhere a SwitchML step goes (rank 0, ms per step):")
    for key, size in (("switchml mlp", 64 * 64 + 64 + 64 * 10 + 10), ("switchml embbag", VOCAB * DIM + DIM * 10 + 10)):
        rec = runs[key]
        steps = len(rec["step_time"])
        h = rec["hook"]
        step = _mean_ms(rec["step_time"])
        wait = 1e3 * h["wait_s"] / steps
        work = 1e3 * (h["busy_s"] - h["wait_s"]) / steps
        opt = _mean_ms(rec["optimizer_time"])
        q, d = _codec_ms(size, a.workers, rec["elements"])
        rest = step - opt - wait - work
        print(f"  {key:<18} step {step:6.1f} = network wait {wait:6.1f} + network thread work {work:5.1f} "
              f"(of which quantise {q:.1f}, dequantise {d:.1f}) + optimiser {opt:4.1f} + forward/backward and the "
              f"rest {rest:5.1f}")
    if a.json:
        from p4gen.errors import P4genError
        from p4gen.filewrite import JSON, write_file

        write_file(a.json, json.dumps(runs), JSON, "results file", P4genError)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
