"""Run under torchrun by tests/test_torch_ddp.py: one DDP scenario, each rank writes OUT/rank<R>.json.

    torchrun --standalone --nproc-per-node N tests/torch_driver.py CASE PLAN JOB SWITCH OUT
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import p4gen.torch


def model(seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def batch(rank: int, step: int):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)


def ddp(net):
    # small buckets, so that a step has several and per-bucket updates overlap; with
    # find_unused_parameters DDP keeps its initial buckets (a rebuild would merge them into one)
    return torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.004, find_unused_parameters=True)


def params(net) -> list:
    return [p.detach().numpy().tobytes().hex() for p in net.parameters()]




def run(case, plan, job, switch, out):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    rec = {"rank": rank}
    if case == "grads":
        net = model()
        d = ddp(net)
        hook = p4gen.torch.register(d, switch=switch, plan=plan, job=job)
        x, y = batch(rank, 0)
        local = model()
        torch.nn.functional.cross_entropy(local(x), y).backward()
        torch.nn.functional.cross_entropy(d(x), y).backward()
        rec["local"] = [p.grad.numpy().astype(float).tolist() for p in local.parameters()]
        rec["averaged"] = [p.grad.numpy().astype(float).tolist() for p in net.parameters()]
        rec["arrays"] = hook.session.stats.arrays
        hook.close()
    elif case in ("per_bucket", "nan"):
        steps, nan_step = (5, None) if case == "per_bucket" else (4, 2)
        prev = None
        for mode in ("after_backward", "per_bucket"):
            net = model()
            d = ddp(net)
            per = mode == "per_bucket"
            opt_args = {"lr": 0.1, "momentum": 0.9}
            hook = p4gen.torch.register(d, switch=switch, plan=plan, job=job,
                                        optimizer=(torch.optim.SGD, opt_args) if per else None, resume=prev)
            opt = None if per else torch.optim.SGD(net.parameters(), **opt_args)
            history = []
            for s in range(steps):
                net.zero_grad(set_to_none=False)
                x, y = batch(rank, s)
                loss = torch.nn.functional.cross_entropy(d(x), y)
                if s == nan_step and rank == 1:
                    loss = loss * float("nan")
                loss.backward()
                if per:
                    hook.end_iteration()
                else:
                    hook.step(opt)
                history.append(params(net))
            rec[mode] = {"params": history, "skipped_steps": hook.skipped_steps,
                         "skipped_buckets": hook.skipped_buckets, "arrays": hook.session.stats.arrays}
            hook.close()
            prev = hook
    elif case == "lost":
        d = ddp(model())
        hook = p4gen.torch.register(d, switch=switch, plan=plan, job=job, stall_timeout=1.0, max_timeout=0.1)
        x, y = batch(rank, 0)
        t0 = time.monotonic()
        try:
            torch.nn.functional.cross_entropy(d(x), y).backward()
            rec["error"] = None
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["seconds"] = time.monotonic() - t0
        hook.close()
    Path(out, f"rank{rank}.json").write_text(json.dumps(rec))
    if case != "lost":
        dist.destroy_process_group()


if __name__ == "__main__":
    run(*sys.argv[1:6])
