"""A DDP training run, gradients through the switch or through Gloo.

    torchrun --nnodes N --node-rank I --master-addr A --master-port P -m p4gen.torch.train \\
        --protocol switchml|omnireduce|gloo --model mlp|embbag|wide|rec \\
        --plan BUILD_DIR --job JOB.toml --switch SWITCH_IP --epochs 2 --out run.json

The same script runs on Mininet hosts (``p4gen testbed train``) and on real
hosts beside a real switch; only the addresses differ.  The models and their
data (scikit-learn's digits, or a generated click log: nothing is
downloaded) are in :mod:`p4gen.torch.models`.  Every backend sees the same
data in the same order (``DistributedSampler`` with a fixed seed), so their
loss curves compare step for step.

Rank 0 writes the run's record (loss per step, train loss and test
accuracy per epoch, step times, the hook's counters and, for the switch,
the measured gradient block density) as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta

import numpy as np

from p4gen import protocols

from .models import LR, MODELS, dataset, evaluate, inputs, make_model

PROTOCOLS = protocols.protocol_names() + ("gloo",)
PROGRESS_EVERY = 5.0          # seconds between rank 0's progress lines (and one after the first step)


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m p4gen.torch.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", choices=PROTOCOLS, required=True,
                    help="switchml or omnireduce (through the switch), or gloo (torch.distributed's own); required")
    ap.add_argument("--model", choices=MODELS, default="mlp",
                    help="mlp (default) or wide (1.1 M parameters): dense gradients on the digits; embbag (an "
                         "EmbeddingBag on the digits) or rec (a click model, 1.1 M parameters): block-sparse gradients")
    ap.add_argument("--plan", help="the switch program's build directory (not for gloo)")
    ap.add_argument("--job", help="the job file the switch was set up with (not for gloo)")
    ap.add_argument("--switch", help="the switch's IPv4 address[:UDP port] (not for gloo)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the model's data (default 2)")
    ap.add_argument("--batch", type=int, default=16, help="samples per worker per step (default 16)")
    ap.add_argument("--lr", type=float, help="default: " + ", ".join(f"{v:g} for {k}" for k, v in LR.items()))
    ap.add_argument("--seed", type=int, default=0, help="seed of the data split and the model (default 0)")
    ap.add_argument("--per-bucket", action="store_true", help="step each bucket as its sum lands (switch only)")
    ap.add_argument("--bucket-mb", type=float, help="DDP's bucket size in MiB (default DDP's 25; smaller "
                                                    "gives several buckets a step)")
    ap.add_argument("--stall-timeout", type=float, default=10.0,
                    help="seconds without a result from the switch before a bucket fails (default 10)")
    ap.add_argument("--timeout", type=float, default=0.01,
                    help="a packet's first retransmission timeout in seconds, until round trips are measured, "
                         "and the least one after (default 0.01; cover a window's time on the link)")
    ap.add_argument("--max-timeout", type=float, default=1.0, help="the largest retransmission timeout (default 1)")
    ap.add_argument("--gather", type=float, default=0.0,
                    help="seconds the network thread waits once results begin to arrive, to take them in "
                         "larger bursts (default 0)")
    ap.add_argument("--out", help="write the run record (rank 0) here (default: not written)")
    a = ap.parse_args(argv)
    if a.protocol != "gloo" and not (a.plan and a.job and a.switch):
        ap.error(f"--protocol {a.protocol} needs --plan, --job and --switch")
    if a.per_bucket and a.protocol == "gloo":
        ap.error("--per-bucket is for the switch protocols")
    a.lr = LR[a.model] if a.lr is None else a.lr
    if a.epochs < 1 or a.batch < 1 or not a.lr > 0 or (a.bucket_mb is not None and not a.bucket_mb > 0):
        ap.error("--epochs and --batch must be >= 1, --lr and --bucket-mb > 0")
    return a


def train(a) -> dict:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DistributedSampler

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    xtr, ytr, xte, yte = dataset(a.model, a.seed)
    torch.manual_seed(a.seed)
    net = make_model(a.model)
    if a.bucket_mb is None:
        ddp = torch.nn.parallel.DistributedDataParallel(net)
    else:   # DDP would merge small buckets when it rebuilds them after the first step; it does not
        # rebuild with find_unused_parameters
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=a.bucket_mb, find_unused_parameters=True)
    hook = None
    opt_args = {"lr": a.lr, "momentum": 0.9}
    if a.protocol != "gloo":
        from .hook import register

        hook = register(ddp, switch=a.switch, plan=a.plan, job=a.job, protocol=a.protocol,
                        optimizer=(torch.optim.SGD, opt_args) if a.per_bucket else None,
                        timeout=a.timeout, max_timeout=a.max_timeout, stall_timeout=a.stall_timeout,
                        gather=a.gather)
    opt = None if a.per_bucket else torch.optim.SGD(ddp.parameters(), **opt_args)
    sampler = DistributedSampler(range(len(ytr)), num_replicas=world, rank=rank, shuffle=True, seed=a.seed)
    rec = {"protocol": a.protocol, "model": a.model, "workers": world, "epochs": a.epochs, "batch": a.batch,
           "parameters": sum(p.numel() for p in net.parameters()),
           "bucket_mb": a.bucket_mb,
           "lr": a.lr, "per_bucket": a.per_bucket, "step_loss": [], "epoch_loss": [], "test_acc": [],
           "step_time": [], "optimizer_time": []}
    said = time.monotonic()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        idx = np.fromiter(sampler, dtype=np.int64)
        steps = len(idx) // a.batch
        for s in range(0, len(idx) - a.batch + 1, a.batch):
            b = idx[s:s + a.batch]
            t0 = time.perf_counter()
            ddp.zero_grad(set_to_none=False)
            loss = torch.nn.functional.cross_entropy(ddp(inputs(a.model, xtr[b])), torch.from_numpy(ytr[b]))
            loss.backward()
            t1 = time.perf_counter()
            if opt is not None:
                hook.step(opt) if hook is not None else opt.step()
            elif hook is not None:
                hook.end_iteration()
            t2 = time.perf_counter()
            rec["step_time"].append(t2 - t0)
            rec["optimizer_time"].append(t2 - t1)
            rec["step_loss"].append(float(loss.detach()))
            if rank == 0 and (time.monotonic() - said > PROGRESS_EVERY or len(rec["step_time"]) == 1):
                said = time.monotonic()
                print(f"p4gen.torch.train: progress: epoch {epoch + 1}/{a.epochs}, step {s // a.batch + 1}/{steps}, "
                      f"loss {rec['step_loss'][-1]:.4f}, this step {rec['step_time'][-1]:.2f} s", flush=True)
        tl, _ = evaluate(net, a.model, xtr, ytr)
        _, acc = evaluate(net, a.model, xte, yte)
        rec["epoch_loss"].append(tl)
        rec["test_acc"].append(acc)
    if hook is not None:
        st = hook.session.stats
        rec["hook"] = {k: getattr(st, k) for k in ("arrays", "packets", "retransmitted", "flagged", "busy_s",
                                                   "wait_s", "cpu_s", "blocks", "nonzero_blocks", "union_blocks",
                                                   "wire_up", "wire_down", "malformed", "stray", "per_array")}
        rec["hook"].update(skipped_steps=hook.skipped_steps, skipped_buckets=hook.skipped_buckets,
                           bucket_optimizer_s=hook.optimizer_s,
                           block_density=st.nonzero_blocks / st.blocks if st.blocks else None,
                           union_density=st.union_blocks / st.blocks if hook.session.sparse and st.blocks else None)
        hook.close()
    rec["params_digest"] = _digest(net)
    dist.destroy_process_group()
    return rec


def _digest(net) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in net.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    from ..extras import lacking

    why = lacking("p4gen.torch.train", "torch", "sklearn")
    if why:
        print(f"p4gen.torch.train: rank {os.environ.get('RANK', '?')}: {why}", file=sys.stderr)
        return 1
    try:
        rec = train(a)
    except Exception as exc:            # one line for the launcher; the traceback goes to stderr's log
        import traceback

        traceback.print_exc()
        print(f"p4gen.torch.train: rank {os.environ.get('RANK', '?')}: {exc}", file=sys.stderr)
        return 1
    if a.out and int(os.environ.get("RANK", "0")) == 0:
        from ..errors import P4genError
        from ..filewrite import JSON, write_file

        try:
            write_file(a.out, json.dumps(rec), JSON, "run record", P4genError, hint="move it away or choose another --out")
        except P4genError as exc:
            print(f"p4gen.torch.train: rank 0: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
