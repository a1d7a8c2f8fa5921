"""One worker's all-reduce service: tensors in, sums out, through the switch over UDP.

:class:`Session` owns a UDP socket and one network thread.  :meth:`submit`
queues a flat float32 array and returns a :class:`concurrent.futures.Future`
at once; the thread all-reduces the queued arrays one after another with
the worker state machines of :mod:`p4gen.host` (``FastWorker`` for SwitchML,
``OmniWorker`` for OmniReduce), each continuing the slots where the last one
stopped (``next_tsi_base``, ``next_copies``), so every worker of the job
must submit the same sequence of array sizes -- as DDP's buckets are.

Each packet is the worker's frame from the ``agg`` header on, as a UDP
datagram to the switch's address (the testbed agents' wire form); results
come back the same way.  An array holding NaN or Inf is sent flagged
(``flag=True``: the reserved exponent, no values), and a result whose
exponent carries the flag completes with ``flagged`` set on every worker.

The switch remembers, per slot copy, the newest chunk it has seen, and (in
the hardened variant) drops older ones.  So a session starts at chunk index
0 only on slots that were reset (``p4gen ctl reset``, a fresh switch or
job); a second session on the same job in one process starts at the first's
:attr:`position`.

When no result arrives for ``stall_timeout`` seconds, the current array and
every later one fail with :class:`SwitchLostError`; a session never blocks
its caller.
"""

from __future__ import annotations

import concurrent.futures
import queue
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import protocols
from ..errors import P4genError
from ..host.fastworker import FastWorker
from ..host.omni_worker import OmniWorker, tsi_fits as omni_tsi_fits
from ..host.packet import Endpoint, datagram_prefix
from ..host.worker import RttEstimator
from ..plan import Plan
from ..wire import FrameLayout, ip as ip_int

PROTOCOLS = protocols.protocol_names()
_TSI_LIMIT = 1 << 32


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


@dataclass
class Reduced:
    """An all-reduced array: the sum over the workers, and whether any worker flagged it."""

    total: np.ndarray
    flagged: bool
    packets: int
    retransmitted: int


@dataclass
class SessionStats:
    arrays: int = 0
    packets: int = 0
    retransmitted: int = 0
    flagged: int = 0
    busy_s: float = 0.0            # time the network thread spent all-reducing
    wait_s: float = 0.0            # ... of which waiting for packets (the rest: codec, frames, syscalls)
    blocks: int = 0                # packet-sized blocks of the arrays sent
    nonzero_blocks: int = 0        # ... of which this worker held a non-zero value


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
                 timeout: float = 0.01, max_timeout: float = 0.2, stall_timeout: float = 10.0,
                 position: tuple[int, list[int]] | None = None):
        self.plan = plan if isinstance(plan, Plan) else Plan.load(plan)
        self.protocol = protocol or self.plan.protocol
        if self.protocol not in PROTOCOLS:
            raise TorchHookError(f"protocol={self.protocol!r} must be one of {', '.join(PROTOCOLS)}")
        if self.protocol != self.plan.protocol:
            raise TorchHookError(f"protocol={self.protocol!r}, but the switch's plan is built for "
                                 f"{self.plan.protocol}")
        if not (0 < timeout <= max_timeout and stall_timeout > max_timeout):
            raise TorchHookError("timeouts must satisfy 0 < timeout <= max_timeout < stall_timeout")
        self.sparse = protocols.protocol(self.protocol).sparse
        self.member = m = member
        self.layout = FrameLayout(self.plan)
        self.timeout, self.max_timeout, self.stall_timeout = timeout, max_timeout, stall_timeout
        self._src = Endpoint(m.mac, ip_int(m.ip), m.udp_port)
        self._dst = Endpoint(m.switch_mac, ip_int(m.switch_ip), m.switch_port)
        self._prefix = datagram_prefix(self.layout, m.switch_port)
        self._hoff = self.layout.headers["agg"].offset
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
        self._tsi_base, self._copies = position if position is not None else (0, [0] * m.window)
        if len(self._copies) != m.window:
            raise TorchHookError(f"position has {len(self._copies)} slot copies; the session has {m.window} slots")
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
        """Where the job's slots stand after the arrays done so far: a later session starts there."""
        return self._tsi_base, list(self._copies)

    # -- caller side -------------------------------------------------------------
    def submit(self, array: np.ndarray) -> concurrent.futures.Future:
        """All-reduce a flat float32 array; the future gives a :class:`Reduced`."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        if self._closed:
            fut.set_exception(TorchHookError("the session is closed"))
        elif self._failed is not None:
            fut.set_exception(self._failed)
        else:
            self._queue.put((np.ascontiguousarray(array, dtype=np.float32).reshape(-1), fut))
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
        while True:
            item = self._queue.get()
            if item is None:
                return
            x, fut = item
            if self._failed is not None:
                fut.set_exception(self._failed)
                continue
            t0 = time.perf_counter()
            try:
                fut.set_result(self._allreduce(x))
            except SwitchLostError as exc:
                self._failed = exc
                fut.set_exception(exc)
            except Exception as exc:           # a bug or a bad array: that future fails, not the process
                fut.set_exception(exc)
            self.stats.busy_s += time.perf_counter() - t0

    def _worker(self, x: np.ndarray):
        m = self.member
        flag = not bool(np.isfinite(x).all())
        if flag:
            x = np.zeros_like(x)
        kw = dict(job=m.job, window=m.window, n_workers=m.world_size, src=self._src, dst=self._dst,
                  tsi_base=self._tsi_base, timeout=self.timeout, backoff=2.0, max_timeout=self.max_timeout,
                  flag=flag, rtt=self.rtt)
        used_up = TorchHookError(f"rank {m.rank}: the job has used up its 2^32 chunk indices; start a new job")
        if self.sparse:
            # a slot's rounds number its tsi (next_tsi_base stays put): the rounds still to go must fit
            if not omni_tsi_fits(self._tsi_base, m.window, self._copies, -(-x.size // self.layout.elements)):
                raise used_up
            return OmniWorker(self.layout, x, mode="float", copies=self._copies, **kw)
        w = FastWorker(self.layout, x, mode="float", **kw)
        if w.next_tsi_base >= _TSI_LIMIT:
            raise used_up
        return w

    def _count_blocks(self, x: np.ndarray) -> None:
        k = self.layout.elements
        nb = -(-x.size // k)
        pad = np.zeros(nb * k, dtype=np.float32)
        pad[:x.size] = x
        self.stats.blocks += nb
        self.stats.nonzero_blocks += int(np.count_nonzero((pad.reshape(nb, k) != 0).any(axis=1)))

    def _allreduce(self, x: np.ndarray) -> Reduced:
        self._count_blocks(x)
        w = self._worker(x)
        sock, dst, hoff, prefix = self.sock, (self.member.switch_ip, self.member.switch_port), self._hoff, self._prefix
        sent = 0

        def send(frames) -> None:
            nonlocal sent
            for f in frames:
                try:
                    sock.sendto(memoryview(f)[hoff:], dst)
                    sent += 1
                except OSError:
                    pass                        # lost like any frame; the slot's timer resends it
        now = time.monotonic()
        send(w.start(now))
        last, accepted = now, 0
        fd = sock.fileno()
        while not w.done:
            dl = w.next_deadline()
            wait = 0.05 if dl is None else min(0.05, max(0.0, dl - now))
            t = time.monotonic()
            ready, _, _ = select.select([fd], [], [], wait)
            now = time.monotonic()
            self.stats.wait_s += now - t
            if ready:
                for _ in range(1024):
                    try:
                        data = sock.recv(65535)
                    except (BlockingIOError, InterruptedError):
                        break
                    send(w.receive(prefix + data, now))
            if w.stats.accepted != accepted:
                accepted, last = w.stats.accepted, now
            send(w.tick(now))
            if now - last > self.stall_timeout:
                out = w.outstanding()
                slot, t = min(out.items(), key=lambda kv: kv[1]) if out else (-1, -1)
                m = self.member
                raise SwitchLostError(
                    f"rank {m.rank}: no result from the switch at {m.switch_ip}:{m.switch_port} for "
                    f"{self.stall_timeout:g} s (array {self.stats.arrays}, slot {slot}, index {t}, "
                    f"{int(w.complete.sum())}/{w.chunks} chunks done); the switch or a peer worker is gone")
        total = w.result().reshape(-1)
        self._tsi_base = w.next_tsi_base
        if self.sparse:
            self._copies = w.next_copies
        st = self.stats
        st.arrays += 1
        st.packets += sent
        st.retransmitted += w.stats.retransmitted
        st.flagged += bool(w.flagged)
        return Reduced(total, bool(w.flagged), sent, w.stats.retransmitted)
