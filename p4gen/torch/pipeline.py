"""The session's network thread: buckets pipelined through the switch, one burst of results at a time.

A :class:`Pipeline` holds the arrays submitted and not yet summed, oldest
first, each with its worker state machine: :class:`BatchWorker` (SwitchML)
or :class:`BatchOmniWorker` (OmniReduce) of :mod:`p4gen.host`.  Each array
continues the job's slots where the one before it leaves them (SwitchML:
``tsi_base = next_tsi_base``; OmniReduce: each slot's rounds so far), and
each slot passes from one array to the next as soon as the earlier one
frees it (``released``), not when the earlier array is done.  So one
bucket's packets are in flight while the next bucket's first packets are
built, and the link never waits for a bucket boundary.  Each slot still
sees the same sequence of indices and copies as with one array after the
other.

The work is done on bursts, never per element and never per frame in
Python: results come in with one ``recvmmsg``
(:class:`p4gen.netio.mmsg.DatagramBatches`) as the rows of a byte matrix,
each array's rows are checked, dequantised (the sums) and answered
(quantised next chunks, headers written as columns) by its worker's
``receive_rows``, and the answers go out with one ``sendmmsg``.  With
``gather`` > 0 the thread waits that long once a burst begins to arrive,
so that it wakes less often and handles more per wake-up (as the testbed's
worker emulators do).
"""

from __future__ import annotations

import concurrent.futures
import select
import time
from dataclasses import dataclass, field

import numpy as np

from ..host.batchworker import BatchWorker
from ..host.omni_batchworker import BatchOmniWorker
from ..host.omni_worker import tsi_fits as omni_tsi_fits
from ..host.packet import Endpoint, datagram_prefix
from ..host.worker import RttEstimator
from ..netio.mmsg import DatagramBatches
from ..wire import FrameLayout, ip as ip_int

_TSI_LIMIT = 1 << 32

_POLL_MAX = 0.05            # seconds: the longest the thread sleeps with something in flight


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
    packets: int = 0               # frames sent, retransmissions included
    retransmitted: int = 0
    flagged: int = 0
    busy_s: float = 0.0            # time the network thread had an array in flight
    wait_s: float = 0.0            # ... of which waiting for packets (the rest: codec, frames, syscalls)
    cpu_s: float = 0.0             # the network thread's CPU time while busy
    blocks: int = 0                # packet-sized blocks of the arrays sent
    nonzero_blocks: int = 0        # ... of which this worker held a non-zero value
    union_blocks: int = 0          # OmniReduce: ... of which some worker held a non-zero value
    wire_up: int = 0               # bytes of the frames the protocol needed up (headers included, no retransmission)
    wire_down: int = 0             # ... and of the results it accepted
    malformed: int = 0             # datagrams that cannot be results
    stray: int = 0                 # results for a slot with nothing outstanding (late duplicates)
    per_array: list = field(default_factory=list)    # per array: (elements, submitted, first sent, summed), monotonic s


@dataclass
class _Array:
    """One submitted array in flight: its worker and future."""

    worker: object
    fut: concurrent.futures.Future
    size: int
    submitted: float
    sent: int = 0
    first_sent: float | None = None
    recorded: np.ndarray | None = None     # slots whose rounds were taken into the session's copies


class LostSwitch(Exception):
    """No result for the stall timeout (the session turns it into its one-line error)."""

    def __init__(self, slot: int, index: int, done: int, chunks: int):
        super().__init__(slot, index, done, chunks)
        self.slot, self.index, self.done, self.chunks = slot, index, done, chunks


class UsedUp(Exception):
    """The job's 32-bit chunk indices would run out (the session says so in one line)."""


class Pipeline:
    """The arrays in flight on one worker's UDP socket, where the job's slots stand, and the loop."""

    def __init__(self, layout: FrameLayout, member, sock, *, sparse: bool, timeout: float, max_timeout: float,
                 rtt: RttEstimator, stats: SessionStats, position: tuple[int, list[int]]):
        m = self.member = member
        self.layout = L = layout
        self.sparse = sparse
        self.timeout, self.max_timeout, self.rtt, self.stats = timeout, max_timeout, rtt, stats
        self.tsi_base, self.copies = position[0], list(position[1])
        self.W = m.window
        self.src = Endpoint(m.mac, ip_int(m.ip), m.udp_port)
        self.dst = Endpoint(m.switch_mac, ip_int(m.switch_ip), m.switch_port)
        self.prefix = datagram_prefix(L, m.switch_port)
        self.hoff = L.headers["agg"].offset
        self.io = DatagramBatches(sock, batch=256, max_size=max(4096, L.frame_len - self.hoff),
                                  prefix_room=max(64, len(self.prefix)))
        self.to = (m.switch_ip, m.switch_port)
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.inflight: list[_Array] = []
        self.slot_mask = (1 << L.params.slot_bits) - 1
        self.k, self.frame_len, self.fixed_len = L.elements, L.frame_len, L.fixed_len
        sl = L.slot("agg.pool_index")           # where a result's pool index is: its unit, shift and mask
        self._pool = (sum(L.unit_sizes[:sl.index]), L.unit_sizes[sl.index], sl.shift, sl.mask)
        self.progress = 0                       # results accepted so far, all arrays

    @property
    def position(self) -> tuple[int, list[int]]:
        """(tsi_base, rounds per slot) where the job's slots stand after the arrays taken on so far."""
        return self.tsi_base, list(self.copies)

    # -- arrays in --------------------------------------------------------------------------------
    def worker(self, x: np.ndarray, ahead: int = 0):
        """The worker state machine of ``x``, continuing the job's slots from :attr:`position` (``ahead``:
        the OmniReduce rounds that arrays still in flight may yet run on a slot before this one starts
        there); :class:`UsedUp` when the job's 32-bit chunk indices would run out."""
        m = self.member
        flag = not bool(np.isfinite(x).all())
        if flag:
            x = np.zeros_like(x)
        kw = dict(job=m.job, window=m.window, n_workers=m.world_size, src=self.src, dst=self.dst,
                  tsi_base=self.tsi_base, timeout=self.timeout, backoff=2.0, max_timeout=self.max_timeout,
                  flag=flag, rtt=self.rtt)
        if self.sparse:
            # each slot's rounds number its tsi (tsi_base stays put): the rounds still to go must fit
            if not omni_tsi_fits(self.tsi_base, m.window, [max(self.copies) + ahead], -(-x.size // self.k)):
                raise UsedUp()
            return BatchOmniWorker(self.layout, x, mode="float", copies=self.copies, **kw)
        w = BatchWorker(self.layout, x, mode="float", **kw)
        if w.next_tsi_base >= _TSI_LIMIT:
            raise UsedUp()
        return w

    def add(self, x: np.ndarray, fut: concurrent.futures.Future, submitted: float, now: float) -> None:
        """Take ``x`` on: build its worker and start the slots no earlier array holds."""
        # an earlier OmniReduce array may run a round per block and one for discovery on a slot
        w = self.worker(x, sum(a.worker.chunks + 1 for a in self.inflight) if self.sparse else 0)
        self._count_blocks(x)
        if not self.sparse:
            self.tsi_base = w.next_tsi_base
        self.inflight.append(_Array(w, fut, x.size, submitted, recorded=np.zeros(self.W, dtype=bool)))
        self._hand_over(now)

    def _count_blocks(self, x: np.ndarray) -> None:
        k, st = self.k, self.stats
        full = x.size // k
        nz = int(np.count_nonzero(x[:full * k].reshape(full, k).any(axis=1)))
        if x.size > full * k:
            nz += bool(x[full * k:].any())
        st.blocks += -(-x.size // k)
        st.nonzero_blocks += nz

    # -- slots from one array to the next -------------------------------------------------------
    def _hand_over(self, now: float) -> None:
        """Start every slot that no earlier array holds any more on the first array that has not started
        it; record the rounds each OmniReduce slot ran as its array frees it."""
        free = np.ones(self.W, dtype=bool)
        for a in self.inflight:
            w = a.worker
            rel, begun = w.released(), w.started()
            if self.sparse:
                newly = rel & begun & ~a.recorded
                if newly.any():
                    nxt = w.next_copies
                    for j in np.flatnonzero(newly).tolist():
                        self.copies[j] = nxt[j]
                    a.recorded |= newly
                go = np.flatnonzero((free & ~begun)[:w.streams])
                if len(go):
                    self._send(a, *w.start_streams(go, [self.copies[j] for j in go.tolist()], now))
            else:
                go = np.flatnonzero(free & ~begun)
                if len(go):
                    self._send(a, w.start_slots(go, now))
            free &= rel

    # -- the wire ---------------------------------------------------------------------------------
    def _send(self, a: _Array, F: np.ndarray, lens: np.ndarray | None = None) -> None:
        if not len(F):
            return
        hoff = self.hoff
        self.io.send_rows(F[:, hoff:], self.to, None if lens is None else lens - hoff)
        if a.first_sent is None:
            a.first_sent = time.monotonic()
        a.sent += len(F)            # a frame the kernel refused is lost like any other: its timer resends it

    def _holders(self) -> np.ndarray:
        """Per slot, the index in ``inflight`` of the array whose packet is outstanding on it (-1: none; an
        array starts a slot only once every earlier one has freed it, so there is at most one)."""
        h = np.full(self.W, -1, dtype=np.int64)
        for i, a in enumerate(self.inflight):
            h[a.worker.busy()] = i
        return h

    def _receive(self, now: float) -> int:
        """One burst of datagrams, each array's results through its worker; how many datagrams came."""
        got = self.io.recv_rows(self.prefix)
        if isinstance(got, list):               # mixed lengths: only frames of a result's length can be one
            full = [f for f in got if len(f) == self.frame_len]
            self.stats.malformed += len(got) - len(full)
            n = len(got)
            got = np.frombuffer(b"".join(full), np.uint8).reshape(len(full), self.frame_len)
        else:
            n = len(got)
            if n and got.shape[1] != self.frame_len:
                self.stats.malformed += n
                return n
        if not len(got):
            return n
        owner = self._holders()[self._slots_of(got)]
        for i, a in enumerate(self.inflight):
            mine = owner == i
            if mine.any():
                w = a.worker
                before = w.stats.accepted
                out = w.receive_rows(got if mine.all() else got[mine], now)
                self.progress += w.stats.accepted - before
                self._send(a, *out) if self.sparse else self._send(a, out)
        self.stats.stray += int(np.count_nonzero(owner < 0))
        return n

    def _slots_of(self, M: np.ndarray) -> np.ndarray:
        """The slot each result row is for (the pool index's low bits)."""
        off, size, shift, mask = self._pool
        v = np.ascontiguousarray(M[:, off:off + size]).view(f">u{size}" if size > 1 else "u1").reshape(-1)
        v = v.astype(np.int64)
        if shift is not None:
            v = (v >> shift) & mask
        return v & self.slot_mask

    # -- arrays out --------------------------------------------------------------------------------
    def _finish(self, now: float) -> None:
        """Complete the futures of the arrays that are done (in any order)."""
        done = [a for a in self.inflight if a.worker.done]
        if not done:
            return
        self._hand_over(now)                    # record the last rounds of each done array's slots
        for a in done:
            self.inflight.remove(a)
            w = a.worker
            st = self.stats
            st.arrays += 1
            rs = w.stats.retransmitted
            st.packets += a.sent
            st.retransmitted += rs
            st.flagged += bool(w.flagged)
            st.wire_down += w.stats.accepted * self.frame_len
            if self.sparse:
                ex = w.stats.extra
                st.wire_up += ex["data_frames"] * self.frame_len + ex["header_frames"] * self.fixed_len
                st.union_blocks += ex["rounds"] - w.streams
            else:
                st.wire_up += w.stats.sent * self.frame_len
            st.per_array.append((a.size, a.submitted, a.first_sent, time.monotonic()))
            a.fut.set_result(Reduced(w.result().reshape(-1), bool(w.flagged), a.sent, rs))
        self._hand_over(now)

    def fail(self, exc: BaseException) -> None:
        for a in self.inflight:
            a.fut.set_exception(exc)
        self.inflight = []

    # -- the loop -------------------------------------------------------------------------------
    def step(self, gather: float) -> None:
        """Wait for results (at most until the earliest timer), handle them, resend what timed out."""
        st = self.stats
        now = time.monotonic()
        dls = [d for d in (a.worker.next_deadline() for a in self.inflight) if d is not None]
        wait = _POLL_MAX if not dls else min(_POLL_MAX, max(0.0, min(dls) - now))
        t = time.monotonic()
        ready = self.poller.poll(wait * 1000.0)
        if ready and gather:
            time.sleep(gather)        # let the burst grow: fewer wake-ups, more results per wake-up
        now = time.monotonic()
        st.wait_s += now - t
        if ready:
            for _ in range(64):                # until the socket is empty (a full batch means: look again)
                if self._receive(now) < self.io.batch:
                    break
            self._hand_over(now)
        for a in self.inflight:
            out = a.worker.tick_rows(now)
            self._send(a, *out) if self.sparse else self._send(a, out)
        self._finish(now)

    def lost(self) -> LostSwitch:
        a = self.inflight[0]
        w = a.worker
        out = w.outstanding()
        slot, t = min(out.items(), key=lambda kv: kv[1]) if out else (-1, -1)
        return LostSwitch(slot, t, int(w.complete.sum()), w.chunks)
