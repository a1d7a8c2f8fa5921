"""Convergence parity: how close a run through the switch must stay to the same run through Gloo.

The tolerance comes from the codec's error bound (``p4gen.host.codec``):

* Through the switch, each element of a bucket's sum is off by less than
  ``n**2 * 2**e / (2**31 - 1)``, where ``2**e`` is below twice the largest
  magnitude ``M`` in its chunk (OmniReduce: in its stream).  The averaged
  gradient is therefore off by less than ``eps_q = 2n / (2**31 - 1)``
  times ``M``: 3.7e-9 at n = 4.
* Gloo's float32 ring sum adds ``n - 1`` times, each off by up to half an
  ulp, ``2**-24`` of the partial sum: ``eps_g = n (n - 1) 2**-24`` times ``M``
  at worst (7.2e-7 at n = 4).
* So per step the two runs' gradients differ by less than
  ``eps = eps_q + eps_g`` times the largest gradient magnitude.  The switch
  is the closer of the two to the exact average.

SGD turns a per-step gradient difference into a parameter difference that
adds up over the steps and can grow.  That growth is not bounded here.
Instead the tolerance allows ``GROWTH = 1000`` times ``eps`` per step, over
all the steps of the run: relative loss difference at every step at most
``GROWTH * eps * steps``, capped at 1%, and final test accuracy within one
test sample plus that same fraction.  A run that stays within it behaves,
to this margin, like a float32 Gloo run that sums in another order.
"""

from __future__ import annotations

from dataclasses import dataclass

GROWTH = 1000.0
CAP = 0.01


def step_bound(n: int, value_width: int = 32) -> float:
    """``eps``: the per-step difference of the averaged gradients, relative to the largest magnitude."""
    eps_q = 2.0 * n / (2 ** (value_width - 1) - 1)
    eps_g = n * (n - 1) * 2.0 ** -24
    return eps_q + eps_g


@dataclass(frozen=True)
class Parity:
    ok: bool
    loss_tolerance: float          # relative, at every step
    max_loss_difference: float     # measured, relative
    accuracy_tolerance: float
    accuracy_difference: float     # measured, absolute (fraction of the test set)
    steps: int

    def line(self, name: str) -> str:
        verdict = "within" if self.ok else "OUTSIDE"
        return (f"{name}: {verdict} the tolerance: loss differs by at most {self.max_loss_difference:.2e} "
                f"(tolerance {self.loss_tolerance:.2e}) over {self.steps} steps; final accuracy by "
                f"{self.accuracy_difference:.4f} (tolerance {self.accuracy_tolerance:.4f})")


def compare(run: dict, baseline: dict, test_samples: int, value_width: int = 32) -> Parity:
    """``run`` against ``baseline`` (records of ``p4gen.torch.train``: same model, data, seed and workers)."""
    a, b = run["step_loss"], baseline["step_loss"]
    if len(a) != len(b) or run["workers"] != baseline["workers"] or run["model"] != baseline["model"]:
        raise ValueError("the runs differ in steps, workers or model; they cannot be compared")
    steps = len(a)
    tol = min(CAP, GROWTH * step_bound(run["workers"], value_width) * steps)
    worst = max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=0.0)
    acc_tol = 1.0 / test_samples + tol
    acc_diff = abs(run["test_acc"][-1] - baseline["test_acc"][-1])
    return Parity(worst <= tol and acc_diff <= acc_tol, tol, worst, acc_tol, acc_diff, steps)
