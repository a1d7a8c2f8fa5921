"""One worker's all-reduce service: tensors in, sums out, through the switch over UDP.

:class:`Session` owns a UDP socket and one network thread.  :meth:`submit`
queues a flat float32 array and returns a :class:`concurrent.futures.Future`
at once; the thread all-reduces the queued arrays with the batch worker
state machines of :mod:`p4gen.host` (``BatchWorker`` for SwitchML,
``BatchOmniWorker`` for OmniReduce), each continuing the slots where the one
before it leaves them (``next_tsi_base``, ``next_copies``), so every worker
of the job must submit the same sequence of array sizes -- as DDP's buckets
are.  The arrays are pipelined: each slot passes to the next array as soon
as the one before it frees that slot, and results are handled a burst at a
time (:mod:`p4gen.torch.pipeline`).

Each packet is the worker's frame from the ``agg`` header on, as a UDP
datagram to the switch's address (the testbed agents' wire form); results
come back the same way.  An array holding NaN or Inf is sent flagged
(``flag=True``: the reserved exponent, no values), and a result whose
exponent carries the flag completes with ``flagged`` set on every worker.

Timers.  A packet's first timeout is ``timeout`` until the round trips of
this session have been measured, then the estimate from them (RFC 6298,
never below ``timeout``), doubling on each retransmission up to
``max_timeout``.  A window of packets queued on a slow link takes the
window's size over the link rate to drain: ``timeout`` should cover that,
or the first window is sent again while it still waits in the queue.

The switch remembers, per slot copy, the newest chunk it has seen, and (in
the hardened variant) drops older ones.  So a session starts at chunk index
0 only on slots that were reset (``p4gen ctl reset``, a fresh switch or
job); a second session on the same job in one process starts at the first's
:attr:`position`.

When no result arrives for ``stall_timeout`` seconds, the arrays in flight
and every later one fail with :class:`SwitchLostError`; a session never
blocks its caller.
"""

from __future__ import annotations

import concurrent.futures
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import protocols
from ..errors import P4genError
from ..host.worker import RttEstimator
from ..plan import Plan
from ..wire import FrameLayout
from .pipeline import LostSwitch, Pipeline, Reduced, SessionStats, UsedUp

__all__ = ["Member", "Reduced", "Session", "SessionStats", "SwitchLostError", "TorchHookError", "member_from_job"]

PROTOCOLS = protocols.protocol_names()


class TorchHookError(P4genError):
    """A p4gen.torch argument is wrong (one line)."""


class SwitchLostError(TorchHookError, RuntimeError):
    """No result from the switch within the stall timeout."""


@dataclass(frozen=True)
class Member:
    """This worker's place in the job: its switch-facing addresses and the switch's."""

    rank: int
    world_size: int
    job: int
    window: int                    # slots of the job this session uses
    ip: str
    udp_port: int
    switch_ip: str
    switch_port: int
    mac: int = 0
    switch_mac: int = 0


def member_from_job(job, plan: Plan, rank: int, world_size: int, switch: str, window: int | None = None) -> Member:
    """The :class:`Member` for ``rank`` of a controller job file (``p4gen.jobfile.Job``)."""
    ws = {w.id: w for w in job.workers}
    if world_size != len(job.workers):
        raise TorchHookError(f"the process group has {world_size} ranks; job {job.job} "
                             f"({job.source}) has {len(job.workers)} workers")
    if rank not in ws:
        raise TorchHookError(f"rank {rank} is not a worker id of job {job.job} ({job.source})")
    w = ws[rank]
    host, _, port = switch.partition(":")
    lo = plan.params.udp_port_min
    try:
        sport = int(port) if port else lo
        socket.inet_aton(host)
    except (ValueError, OSError):
        raise TorchHookError(f"switch={switch!r} must be an IPv4 address, optionally with :PORT") from None
    win = job.slot_count if window is None else int(window)
    if not 1 <= win <= job.slot_count:
        raise TorchHookError(f"window={win} must be in 1..{job.slot_count} (the slots of job {job.job})")
    return Member(rank, world_size, job.job, win, socket.inet_ntoa(w.ip.to_bytes(4, "big")), w.udp_port,
                  host, sport, w.mac, job.switch_mac or 0)


class Session:
    def __init__(self, plan: Plan | str | Path, member: Member, *, protocol: str | None = None,
                 timeout: float = 0.01, max_timeout: float = 1.0, stall_timeout: float = 10.0,
                 gather: float = 0.0, position: tuple[int, list[int]] | None = None):
        self.plan = plan if isinstance(plan, Plan) else Plan.load(plan)
        self.protocol = protocol or self.plan.protocol
        if self.protocol not in PROTOCOLS:
            raise TorchHookError(f"protocol={self.protocol!r} must be one of {', '.join(PROTOCOLS)}")
        if self.protocol != self.plan.protocol:
            raise TorchHookError(f"protocol={self.protocol!r}, but the switch's plan is built for "
                                 f"{self.plan.protocol}")
        if not (0 < timeout <= max_timeout and stall_timeout > max_timeout):
            raise TorchHookError("timeouts must satisfy 0 < timeout <= max_timeout < stall_timeout")
        if not 0 <= gather < stall_timeout:
            raise TorchHookError(f"gather={gather!r} must be in [0, stall_timeout)")
        self.sparse = protocols.protocol(self.protocol).sparse
        self.member = m = member
        self.layout = FrameLayout(self.plan)
        self.timeout, self.max_timeout, self.stall_timeout = timeout, max_timeout, stall_timeout
        self.gather = gather
        try:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            self.sock.bind((m.ip, m.udp_port))
        except OSError as exc:
            raise TorchHookError(f"rank {m.rank}: cannot bind {m.ip}:{m.udp_port}: {exc.strerror or exc}") from None
        self.sock.setblocking(False)
        self.stats = SessionStats()
        self.rtt = RttEstimator()           # the job's round trips, carried from bucket to bucket
        position = position if position is not None else (0, [0] * m.window)
        if len(position[1]) != m.window:
            self.sock.close()
            raise TorchHookError(f"position has {len(position[1])} slot copies; the session has {m.window} slots")
        try:
            self.pipeline = Pipeline(self.layout, m, self.sock, sparse=self.sparse, timeout=timeout,
                                     max_timeout=max_timeout, rtt=self.rtt, stats=self.stats, position=position)
        except BaseException:
            self.sock.close()
            raise
        self._queue: queue.Queue = queue.Queue()
        self._failed: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"p4gen-allreduce-{m.rank}", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> BaseException | None:
        """The error that ended the session (every later array fails with it), or None."""
        return self._failed

    @property
    def position(self) -> tuple[int, list[int]]:
        """Where the job's slots stand after the arrays taken on so far (read it with none in flight): a
        later session starts there."""
        return self.pipeline.position

    # -- caller side -------------------------------------------------------------
    def submit(self, array: np.ndarray) -> concurrent.futures.Future:
        """All-reduce a flat float32 array; the future gives a :class:`Reduced`."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            fut.set_exception(TorchHookError("the session is closed"))
        elif self._failed is not None:
            fut.set_exception(self._failed)
        else:
            self._queue.put((np.ascontiguousarray(array, dtype=np.float32).reshape(-1), fut, time.monotonic()))
        return fut

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=self.stall_timeout + 1.0)
            self.sock.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- network thread ----------------------------------------------------------
    def _run(self) -> None:
        pipe = self.pipeline
        closing = False
        last, progress = time.monotonic(), 0
        while True:
            while True:                        # take the arrays submitted; block only with none in flight
                try:
                    item = self._queue.get(block=not pipe.inflight and not closing)
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    continue
                x, fut, submitted = item
                if self._failed is not None:
                    fut.set_exception(self._failed)
                    continue
                t0, c0 = time.perf_counter(), time.thread_time()
                if not pipe.inflight:
                    last = time.monotonic()
                try:
                    pipe.add(x, fut, submitted, time.monotonic())
                except UsedUp:
                    fut.set_exception(TorchHookError(f"rank {self.member.rank}: the job has used up its 2^32 chunk "
                                                     "indices; start a new job"))
                except Exception as exc:      # a bug or a bad array: that future fails, not the process
                    fut.set_exception(exc)
                self.stats.busy_s += time.perf_counter() - t0
                self.stats.cpu_s += time.thread_time() - c0
            if not pipe.inflight:
                if closing:
                    return
                continue
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                pipe.step(self.gather)
                now = time.monotonic()
                if pipe.progress != progress:
                    progress, last = pipe.progress, now
                elif pipe.inflight and now - last > self.stall_timeout:
                    raise self._lost(pipe.lost())
            except Exception as exc:          # the switch is gone, or a fault: every array in flight fails
                self._failed = exc
                pipe.fail(exc)
            self.stats.busy_s += time.perf_counter() - t0
            self.stats.cpu_s += time.thread_time() - c0

    def _lost(self, lost: LostSwitch) -> SwitchLostError:
        m = self.member
        return SwitchLostError(
            f"rank {m.rank}: no result from the switch at {m.switch_ip}:{m.switch_port} for "
            f"{self.stall_timeout:g} s (array {self.stats.arrays}, slot {lost.slot}, index {lost.index}, "
            f"{lost.done}/{lost.chunks} chunks done); the switch or a peer worker is gone")
