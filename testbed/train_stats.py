"""What a training run's record says about its steps: the mean step time, its link-rate bound, one line.

Read by ``p4gen testbed train`` (its printed lines and its plot) and by ``bench/train.py``.
"""

from __future__ import annotations

GLOO = "gloo"          # the baseline: torch.distributed's all-reduce on the same links


def steady_step(rec: dict) -> float:
    """Mean step time in seconds over the steps after the first: the first also pays for DDP's first
    iteration (its buckets rebuilt, Gloo's connections or the hook's session warming up)."""
    st = rec["step_time"]
    later = st[1:] or st
    return sum(later) / len(later)


def step_bound(rec: dict) -> tuple[float, str]:
    """The link-rate bound of one step of ``rec`` in seconds, and what it counts: for Gloo its ring's bytes
    for the model's gradient (:func:`p4gen.testbed.bounds.gloo_ring`); for the switch the frames its
    protocol needed per step (the busier direction of rank 0's link, retransmissions not counted)."""
    from . import bounds

    steps, mbit = len(rec["step_time"]), rec["mbit"]
    if rec["protocol"] == GLOO:
        b = bounds.gloo_ring(rec["workers"], rec["parameters"], mbit, 4, rec.get("mtu", bounds.MTU))
        return b.seconds, f"ring: {b.bytes_per_element * rec['parameters'] / 1e6:.2f} MB of frames each way"
    h = rec["hook"]
    wire = max(h["wire_up"], h["wire_down"]) / steps
    return wire * 8 / (mbit * 1e6), f"{wire / 1e6:.2f} MB of frames each way"


def summary_line(rec: dict) -> str:
    """One run in one line: steps, mean step time after the first and its link-rate bound, final loss
    and accuracy, and the block density of rank 0's gradient (and the union's, for OmniReduce)."""
    h = rec.get("hook") or {}
    dens = "" if h.get("block_density") is None else f"  block density {h['block_density']:.3f}"
    if h.get("union_density") is not None:
        dens += f" (union {h['union_density']:.3f})"
    return (f"{rec['protocol']:<10} {rec['model']:<6} n={rec['workers']} {rec['mbit']:g} Mbit/s  "
            f"{len(rec['step_time'])} steps  step {1e3 * steady_step(rec):.1f} ms "
            f"(bound {1e3 * step_bound(rec)[0]:.1f})  final loss {rec['epoch_loss'][-1]:.4f}  "
            f"test accuracy {rec['test_acc'][-1]:.4f}{dens}")
