"""The DDP communication hook: gradient buckets aggregated by the switch.

:func:`register` installs the hook on a ``DistributedDataParallel`` model.
For every gradient bucket, DDP calls the hook on its autograd thread; the
hook hands the bucket's flat buffer to this worker's :class:`Session`
and returns a ``torch.futures.Future`` at once, so backward goes on while
the network thread quantises the bucket (the block floating-point codec,
exponents negotiated in the packets), sends it through the switch and
dequantises the sum.  The future then completes with the buffer holding the
sum divided by the world size, as DDP's own all-reduce hook leaves it.

Flags.  A bucket that holds NaN or Inf on any worker comes back flagged on
every worker (the reserved exponent, see :mod:`p4gen.host.codec`).  Its
buffer is then filled with NaN, as a Gloo all-reduce of it would be, and
:meth:`Hook.step` skips the optimiser step of that iteration on every
worker; with ``optimizer=`` (per-bucket updates) the flagged bucket's
parameters are left as they are, on every worker.

Per-bucket updates (``optimizer=(torch.optim.SGD, {"lr": 0.1})``): each
bucket's parameters are stepped by the functional form of the optimiser
(``torch.distributed.optim``) as soon as that bucket's sum lands, in the
future's callback, while later buckets are still on the wire -- the
pattern of torch's ``optimizer_overlap_hooks``.  There is no step after
backward and no barrier per iteration; call ``model.zero_grad()`` as usual,
and not ``optimizer.step()``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..plan import Plan
from .session import Member, Session, TorchHookError, member_from_job


class Hook:
    """What :func:`register` installed: the session, the flags of this iteration, and counters."""

    def __init__(self, session: Session, world_size: int, functional_optim=None):
        self.session = session
        self.world_size = world_size
        self.functional_optim = functional_optim
        self._lock = threading.Lock()
        self._flagged: set[int] = set()
        self.skipped_steps = 0
        self.skipped_buckets = 0
        self.optimizer_s = 0.0          # per-bucket updates: time in the functional optimiser

    # -- flags -------------------------------------------------------------------
    @property
    def finite(self) -> bool:
        """No bucket of this iteration was flagged (NaN or Inf on some worker)."""
        with self._lock:
            return not self._flagged

    def flagged(self, bucket_index: int) -> bool:
        with self._lock:
            return bucket_index in self._flagged

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """``optimizer.step()`` unless a bucket of this iteration was flagged; True when it stepped."""
        with self._lock:
            ok = not self._flagged
            self._flagged.clear()
        if ok:
            optimizer.step()
        else:
            self.skipped_steps += 1
        return ok

    def end_iteration(self) -> None:
        """Forget this iteration's flags (``step`` does it; per-bucket training calls this instead)."""
        with self._lock:
            self._flagged.clear()

    def close(self) -> None:
        self.session.close()

    # -- the hook ------------------------------------------------------------------
    def allreduce(self, bucket: dist.GradBucket) -> torch.futures.Future:
        """What the hook does with one bucket: a future of its averaged sum (and the step, per bucket)."""
        if self.session.failed is not None:        # the switch is gone already: fail this step at once
            raise self.session.failed
        buf = bucket.buffer()
        out: torch.futures.Future = torch.futures.Future()
        index = bucket.index()
        done = self.session.submit(buf.detach().cpu().numpy())

        def land(f) -> None:
            try:
                r = f.result()
            except BaseException as exc:
                out.set_result(exc)                # raised by _finish, so DDP's error names it
                return
            if r.flagged:
                with self._lock:
                    self._flagged.add(index)
                buf.fill_(float("nan"))
            else:
                total = torch.from_numpy(r.total)
                buf.copy_(total.div_(self.world_size).to(buf.dtype))
            out.set_result(buf)
        done.add_done_callback(land)
        fut = out.then(_finish)
        if self.functional_optim is None:
            return fut
        return fut.then(lambda f: self._step_bucket(f, bucket, index))

    def _step_bucket(self, fut: torch.futures.Future, bucket: dist.GradBucket, index: int) -> torch.Tensor:
        buf = fut.value()                          # re-raises a failed all-reduce
        if self.flagged(index):
            with self._lock:
                self.skipped_buckets += 1
            return buf
        t0 = time.perf_counter()
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            self.functional_optim.step_param(p, g)
        self.optimizer_s += time.perf_counter() - t0
        return buf


def _finish(fut: torch.futures.Future) -> torch.Tensor:
    value = fut.value()
    if isinstance(value, BaseException):
        raise value
    return value


def switch_allreduce_hook(state, bucket):
    """The DDP communication hook; ``state`` is the :class:`Hook` (``register_comm_hook(hook, this)``)."""
    # not annotated: DDP checks a hook's annotations, and under postponed evaluation they are strings
    return state.allreduce(bucket)


def _functional(optimizer) -> Any:
    from torch.distributed.optim.utils import as_functional_optim

    try:
        cls, kwargs = optimizer
    except (TypeError, ValueError):
        raise TorchHookError("optimizer= takes (optimizer class, keyword arguments), "
                             "e.g. (torch.optim.SGD, {'lr': 0.1})") from None
    try:
        return as_functional_optim(cls, **dict(kwargs))
    except ValueError as exc:
        raise TorchHookError(f"optimizer {getattr(cls, '__name__', cls)} has no functional form in "
                             f"torch.distributed.optim ({exc})") from None


def register(model: torch.nn.parallel.DistributedDataParallel, *, switch: str, plan: Plan | str | Path,
             job: Any, protocol: str | None = None, window: int | None = None, optimizer=None,
             timeout: float = 0.01, max_timeout: float = 1.0, stall_timeout: float = 10.0, gather: float = 0.0,
             resume: Hook | None = None) -> Hook:
    """Aggregate ``model``'s gradients through the switch at ``switch`` (``IP`` or ``IP:PORT``).

    ``plan`` is the switch program's build directory (or its Plan), ``job``
    its controller job file (or a loaded ``Job``): rank r is the job's worker
    with id r, and binds that worker's address and UDP port.  The rank and
    world size come from the model's process group.  ``protocol`` defaults to
    the plan's.  ``optimizer=(cls, kwargs)`` turns on per-bucket updates.
    ``timeout``, ``max_timeout``, ``stall_timeout`` and ``gather`` are the
    session's (:class:`p4gen.torch.session.Session`): on a slow link, give a
    ``timeout`` that covers the time the window's packets take on it.

    The job's slots must be fresh (a new job, or ``p4gen ctl reset``): the
    switch drops chunk indices older than those it holds.  A second model
    on the same job in the same process passes ``resume=`` the first hook
    (closed or not), and goes on from where that one stopped.
    """
    from ..jobfile import Job, load_job

    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TorchHookError(f"register() needs a DistributedDataParallel model, got {type(model).__name__}")
    pl = plan if isinstance(plan, Plan) else Plan.load(plan)
    jb = job if isinstance(job, Job) else load_job(job, pl)
    group = model.process_group
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    member: Member = member_from_job(jb, pl, rank, world, switch, window)
    fopt = None if optimizer is None else _functional(optimizer)
    session = Session(pl, member, protocol=protocol, timeout=timeout, max_timeout=max_timeout,
                      stall_timeout=stall_timeout, gather=gather,
                      position=None if resume is None else resume.session.position)
    hook = Hook(session, world, fopt)
    model.register_comm_hook(hook, switch_allreduce_hook)
    return hook
