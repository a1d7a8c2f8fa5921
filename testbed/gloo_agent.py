"""Baseline worker: torch.distributed all_reduce with the Gloo backend on a testbed host.

    GLOO_SOCKET_IFNAME=h1-eth0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 RANK=0 WORLD_SIZE=4 \\
        mininet> h1 python -m p4gen.testbed.gloo_agent CONFIG.json

GLOO_SOCKET_IFNAME is required inside a namespace: without it Gloo resolves
the machine's hostname to an address outside the namespace and hangs.
Same control lines as :mod:`p4gen.testbed.agent`: ``ready`` after the
rendezvous and a warm-up all-reduce, ``go`` on stdin, then ``done`` with
the time of the timed all-reduce and the CPU seconds the process used in it (or ``error``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

from .tensors import make_tensor, save_array


def _emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from .agent import read_config

    cfg = read_config(sys.argv[1:] if argv is None else argv, "p4gen.testbed.gloo_agent")
    if cfg is None:
        return 1
    rank = cfg["rank"]
    try:
        if not os.environ.get("GLOO_SOCKET_IFNAME"):
            raise RuntimeError("GLOO_SOCKET_IFNAME is not set; Gloo would pick an interface outside the namespace")
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                                timeout=timedelta(seconds=cfg.get("timeout", 300)))
        x = torch.from_numpy(make_tensor(rank, cfg["size"], cfg["dtype"], cfg["seed"]))
        warm = torch.ones(1024)
        dist.all_reduce(warm)
        _emit(event="ready", rank=rank, setup_cpu=time.process_time())
        if sys.stdin.readline().strip() != "go":
            raise RuntimeError("the harness closed the control pipe before 'go'")
        t0, c0 = time.monotonic(), time.process_time()
        dist.all_reduce(x)
        elapsed, cpu = time.monotonic() - t0, time.process_time() - c0
        save_array(cfg["out"], x.numpy())
        dist.destroy_process_group()
        _emit(event="done", rank=rank, time=elapsed, cpu=cpu)
        return 0
    except Exception as exc:          # one line to the harness; the traceback goes to the log
        import traceback

        traceback.print_exc()
        _emit(event="error", rank=rank, message=f"gloo worker {rank}: {exc}".splitlines()[0])
        return 1


if __name__ == "__main__":
    sys.exit(main())
