"""A small DDP training run on scikit-learn's digits, gradients through the switch or through Gloo.

    torchrun --nnodes N --node-rank I --master-addr A --master-port P -m p4gen.torch.train \\
        --protocol switchml|omnireduce|gloo --model mlp|embbag \\
        --plan BUILD_DIR --job JOB.toml --switch SWITCH_IP --epochs 2 --out run.json

The same script runs on Mininet hosts (``p4gen testbed train``) and on real
hosts beside a real switch; only the addresses differ.  The data ship inside
scikit-learn's wheel (1,797 8x8 digit images), so nothing is downloaded.
Every backend sees the same data in the same order (``DistributedSampler``
with a fixed seed), so their loss curves compare step for step.

Models:

* ``mlp``: 64 -> 64 -> 10 on the pixel intensities (dense gradients);
* ``embbag``: the non-zero pixels as tokens (pixel index x intensity, 1,024
  of them) summed by an ``EmbeddingBag`` into 64 features, then a linear
  layer.  A batch touches only the tokens it holds, so the embedding's
  gradient is block-sparse: the case OmniReduce is for.

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

PROTOCOLS = protocols.protocol_names() + ("gloo",)
MODELS = ("mlp", "embbag")
VOCAB = 64 * 16
DIM = 64
LR = {"mlp": 0.1, "embbag": 0.2}      # SGD with momentum 0.9; chosen on a single-process run of 3 epochs


def digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test) as float32 / int64 arrays: a fixed 80/20 split."""
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    x, y = (d.data[order] / 16.0).astype(np.float32), d.target[order].astype(np.int64)
    cut = int(0.8 * len(y))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def tokens(x: np.ndarray):
    """Non-zero pixels as tokens: (flat token ids, offsets) for ``EmbeddingBag``."""
    import torch

    q = np.rint(x * 16.0).astype(np.int64)         # intensities 0..16
    ids, offs = [], []
    for row in q:
        p = np.flatnonzero(row)
        offs.append(sum(len(i) for i in ids))
        ids.append(p * 16 + np.minimum(row[p], 16) - 1)
    return torch.from_numpy(np.concatenate(ids)), torch.tensor(offs, dtype=torch.int64)


def make_model(kind: str):
    import torch

    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    class Bag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(VOCAB, DIM, mode="sum")     # one row = one 64-value block
            torch.nn.init.normal_(self.bag.weight, 0.0, 0.05)              # a sum of ~35 rows stays O(1)
            self.out = torch.nn.Linear(DIM, 10)

        def forward(self, x):
            ids, offs = x
            return self.out(torch.relu(self.bag(ids, offs)))
    return Bag()


def _inputs(kind: str, x: np.ndarray):
    import torch

    return torch.from_numpy(x) if kind == "mlp" else tokens(x)


def evaluate(model, kind, x, y) -> tuple[float, float]:
    import torch

    with torch.no_grad():
        out = model(_inputs(kind, x))
        loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).item()
        acc = (out.argmax(1).numpy() == y).mean()
    return float(loss), float(acc)


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m p4gen.torch.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", choices=PROTOCOLS, required=True,
                    help="switchml or omnireduce (through the switch), or gloo (torch.distributed's own); required")
    ap.add_argument("--model", choices=MODELS, default="mlp",
                    help="mlp (default: dense gradients) or embbag (an EmbeddingBag: block-sparse gradients)")
    ap.add_argument("--plan", help="the switch program's build directory (not for gloo)")
    ap.add_argument("--job", help="the job file the switch was set up with (not for gloo)")
    ap.add_argument("--switch", help="the switch's IPv4 address[:UDP port] (not for gloo)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the digits (default 2)")
    ap.add_argument("--batch", type=int, default=16, help="samples per worker per step (default 16)")
    ap.add_argument("--lr", type=float, help="default: 0.1 for mlp, 0.2 for embbag")
    ap.add_argument("--seed", type=int, default=0, help="seed of the data split and the model (default 0)")
    ap.add_argument("--per-bucket", action="store_true", help="step each bucket as its sum lands (switch only)")
    ap.add_argument("--bucket-mb", type=float, help="DDP's bucket size in MiB (default DDP's 25; smaller "
                                                    "gives several buckets a step)")
    ap.add_argument("--stall-timeout", type=float, default=10.0,
                    help="seconds without a result from the switch before a bucket fails (default 10)")
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
    xtr, ytr, xte, yte = digits(a.seed)
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
                        stall_timeout=a.stall_timeout)
    opt = None if a.per_bucket else torch.optim.SGD(ddp.parameters(), **opt_args)
    sampler = DistributedSampler(range(len(ytr)), num_replicas=world, rank=rank, shuffle=True, seed=a.seed)
    rec = {"protocol": a.protocol, "model": a.model, "workers": world, "epochs": a.epochs, "batch": a.batch,
           "bucket_mb": a.bucket_mb,
           "lr": a.lr, "per_bucket": a.per_bucket, "step_loss": [], "epoch_loss": [], "test_acc": [],
           "step_time": [], "optimizer_time": []}
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        idx = np.fromiter(sampler, dtype=np.int64)
        for s in range(0, len(idx) - a.batch + 1, a.batch):
            b = idx[s:s + a.batch]
            t0 = time.perf_counter()
            ddp.zero_grad(set_to_none=False)
            loss = torch.nn.functional.cross_entropy(ddp(_inputs(a.model, xtr[b])), torch.from_numpy(ytr[b]))
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
        tl, _ = evaluate(net, a.model, xtr, ytr)
        _, acc = evaluate(net, a.model, xte, yte)
        rec["epoch_loss"].append(tl)
        rec["test_acc"].append(acc)
    if hook is not None:
        st = hook.session.stats
        rec["hook"] = {"arrays": st.arrays, "packets": st.packets, "retransmitted": st.retransmitted,
                       "flagged": st.flagged, "busy_s": st.busy_s, "wait_s": st.wait_s, "skipped_steps": hook.skipped_steps,
                       "skipped_buckets": hook.skipped_buckets, "bucket_optimizer_s": hook.optimizer_s,
                       "blocks": st.blocks,
                       "nonzero_blocks": st.nonzero_blocks,
                       "block_density": st.nonzero_blocks / st.blocks if st.blocks else None}
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
