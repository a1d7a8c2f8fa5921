"""OmniReduce worker protocol (block-sparse all-reduce) as a pure state machine.

Same driving interface as :class:`p4gen.host.worker.Worker` (``start``,
``receive``, ``tick(now)``, ``next_deadline``, ``done``, ``result``), and the
same mechanisms: windowed slots, one outstanding round per slot, the copy
bit flipping every round, results accepted only for the outstanding
``tsi``/slot/copy, per-slot retransmission timers with backoff.  Only the
sequence of packets differs.

Blocks and streams
------------------
The tensor is cut into blocks of ``elements_per_packet`` values (the last one
padded with zeros); a block is *non-zero* for a worker when some
``|value| > threshold`` (threshold 0 by default: only exact-zero blocks are
skipped; with a larger threshold, blocks under it are dropped from the sum).
With ``S = min(window, blocks)`` slots, block ``b`` belongs to *stream*
``b mod S``, which runs on slot ``b mod S`` of the job.  Each stream is an
independent sequence of rounds on its slot.  ``copies[j]`` is the number of
rounds slot ``j`` ran before this all-reduce (all zeros unless given); round
``r`` of this one is the slot's round ``rho = copies[j] + r`` and uses copy
``rho mod 2``.

Encoding (all offsets are *global* block indices; a stream only ever names
its own blocks, so the switch's minimum stays inside the stream):

* ``agg.next``: the sender's next non-zero block of this stream after the
  round's block, ``0xFFFFFFFF`` when it has none;
* ``agg.tsi = tsi_base + 1 + j + window * rho`` for slot ``j``'s round
  ``rho`` (round 0 of a stream is its *discovery* round; which block a
  round is about is the previous result's ``next``).  It grows strictly
  along a slot's rounds (so the per-copy chunk register orders them), never
  collides between two rounds of one slot (so a result names its round), is
  at least 1 (the switch's registers start at 0, and a first packet must
  look new), and moves on by exactly ``2 * window`` from one use of a slot
  copy to the next, however many zero blocks the stream skips: the switch
  takes a newer tsi only that far ahead (``advance_window``, bound
  ``2 * slot_count``, with ``window <= slot_count``), so one frame with a
  corrupted, far-ahead tsi is dropped as stale instead of stranding the copy;
* ``agg.flags`` bit 0: the packet carries block ``b``'s values (data header
  follows) or not (header-only).

Rounds of one stream
--------------------
1. *Discovery*: every worker sends a header-only packet with ``next`` = its
   first non-zero block of the stream.  The result's ``next`` is the first
   block that any worker has.
2. *Block b* (the previous result's ``next``): every worker sends block
   ``b`` if it is non-zero for it, else a header-only packet; both carry the
   worker's next non-zero block after ``b``.  The switch sums the data
   (header-only packets add nothing) and returns the sum and the minimum
   ``next``.
3. The stream ends with a result whose ``next`` is ``0xFFFFFFFF``.

So a stream of ``u`` blocks that some worker holds takes ``u + 1`` rounds,
and a block that is zero for every worker never has a round: blocks between
two consecutive rounds' blocks are zero in the result.  A result's ``next``
must be a later block of the stream and never beyond this worker's own next
non-zero block (the minimum includes it); anything else is a switch fault
and raises :class:`OmniProtocolError` rather than silently skipping data.

Exponent (float tensors)
------------------------
One exponent per stream, agreed in the discovery round: the worker sends
``codec.exponent_field`` of its own stream blocks (the maximum over them);
the switch keeps the maximum over workers and returns it.  Every block of
the stream is then quantised with that exponent (``codec.quantize``), so the
error per element is below ``codec.error_bound(e_stream, n, w)``.  Later
rounds repeat the agreed exponent.  Integer tensors (``mode="int"``) send
raw wire integers; the result is their exact wrap-around sum.  With
``flag=True`` (a tensor that holds NaN or Inf) the worker sends no block and
the reserved exponent ``codec.EXPONENT_FLAG`` in its discovery rounds; every
worker's :attr:`flagged` is then set.

A later all-reduce on the same slots passes ``tsi_base=next_tsi_base`` (the
same base) and ``copies=next_copies`` (each slot's rounds so far): each slot
goes on with its next round, its tsi above every tsi it used and its copy
alternating from where it stopped.
"""

from __future__ import annotations

import bisect

import numpy as np

from . import codec
from .omni_packet import NONE, OmniFrames
from ..wire import FrameLayout, PacketError
from .packet import Endpoint
from .worker import Worker, WorkerError, SlotState


class OmniProtocolError(WorkerError):
    """The switch returned a next offset that would skip data or leave the stream."""


def tsi_fits(tsi_base: int, window: int, copies, blocks: int) -> bool:
    """Whether an all-reduce of ``blocks`` blocks on ``window`` slots that ran ``copies`` rounds so far keeps
    every tsi it sends within 32 bits (a stream has at most ``blocks + 1`` rounds: discovery and one per block)."""
    return 0 <= tsi_base and tsi_base + window * (max(copies) + blocks + 2) <= 0xFFFFFFFF


class OmniWorker(Worker):
    def __init__(self, layout: FrameLayout, tensor, *, job: int, window: int, n_workers: int,
                 src: Endpoint, dst: Endpoint, mode: str | None = None, tsi_base: int = 0,
                 timeout: float = 0.01, backoff: float = 2.0, max_timeout: float = 1.0,
                 threshold: float = 0.0, flag: bool = False, copies=None, rtt=None):
        x = np.asarray(tensor)
        if mode is None:
            mode = "int" if np.issubdtype(x.dtype, np.integer) else "float"
        super().__init__(layout, x, job=job, window=window, n_workers=n_workers, src=src, dst=dst, mode=mode,
                         tsi_base=tsi_base, timeout=timeout, backoff=backoff, max_timeout=max_timeout, flag=flag,
                         rtt=rtt)
        copies = [0] * self.window if copies is None else [int(c) for c in copies]
        if len(copies) != self.window or any(c < 0 for c in copies):
            raise WorkerError(f"copies must give the rounds each of the {self.window} slots ran so far (>= 0)")
        self._copy0 = copies
        if threshold < 0:
            raise WorkerError(f"threshold={threshold} must be >= 0")
        self.threshold = threshold
        self.frames = OmniFrames(layout, src, dst, job)
        nb = self.chunks
        if not tsi_fits(self.tsi_base, self.window, copies, nb):
            raise WorkerError(f"tsi_base={self.tsi_base} with {max(copies)} rounds done and {nb} blocks to go does "
                              f"not fit the 32-bit tsi (window {self.window})")
        self.streams = S = min(self.window, nb)
        if self.mode == "float":
            mag = np.abs(self._blocks)
        else:
            mag = np.abs(codec.from_wire(self._blocks, self.value_width))
        self.nonzero = mag.max(axis=1) > threshold          # the worker's block bitmap
        nz = np.flatnonzero(self.nonzero)
        self._mine = [nz[nz % S == j].tolist() for j in range(S)]   # per stream, ascending
        if self.mode == "float":
            e = np.where(self.nonzero, codec.exponent_of(self._blocks, axis=1), codec.EXPONENT_MIN)
            self._stream_exp = [codec.EXPONENT_MAX if flag else int(e[j::S].max()) for j in range(S)]
            self._scale = [0.0] * S          # set when the stream's exponent is agreed
            self._signed = np.dtype(f">i{self.value_width // 8}")
            self._lim = codec.limit(self.n, self.value_width)
        self._slots = [SlotState() for _ in range(S)]
        self._round = [0] * S
        self._block = [-1] * S               # block of the outstanding round (-1: discovery)
        self._exp = [0] * S                  # exponent field the stream's packets carry
        self.complete = np.zeros(nb, dtype=bool)
        self.bytes_sent = 0                  # UDP payload bytes (what a socket sends)
        self._hoff = layout.headers["agg"].offset
        self.stats.extra.update(data_frames=0, header_frames=0, rounds=0)
        self.rounds_per_stream = [0] * S

    # -- stream helpers -----------------------------------------------------
    def _my_next(self, j: int, after: int) -> int:
        """This worker's first non-zero block of stream j after block ``after`` (-1: from the start)."""
        mine = self._mine[j]
        i = bisect.bisect_right(mine, after)
        return mine[i] if i < len(mine) else NONE

    def _tsi(self, j: int) -> int:
        """tsi of slot ``j``'s outstanding round."""
        return self.tsi_base + 1 + j + self.window * (self._copy0[j] + self._round[j])

    def _pool(self, j: int, r: int) -> int:
        return (((r + self._copy0[j]) & 1) << self.slot_bits) | j

    @property
    def next_tsi_base(self) -> int:
        """``tsi_base`` of the next all-reduce on these slots: the same (``next_copies`` carries the rounds)."""
        return self.tsi_base

    @property
    def next_copies(self) -> list[int]:
        """``copies`` of the next all-reduce on these slots: each slot's rounds so far."""
        return [c + (self.rounds_per_stream[j] if j < self.streams else 0) for j, c in enumerate(self._copy0)]

    def pool_index(self, t: int) -> int:
        """Pool index of the outstanding round of slot ``t`` (streams, not SwitchML indices)."""
        return self._pool(t, self._round[t])

    def _payload(self, j: int, b: int) -> bytes:
        if self.mode == "float":
            q = np.rint(self._blocks[b] * self._scale[j])
            np.clip(q, -self._lim, self._lim, out=q)
            return q.astype(self._signed).tobytes()
        return self._blocks[b].astype(self.layout.value_dtype).tobytes()

    def _frame_for(self, j: int) -> bytes:
        b = self._block[j]
        data = b >= 0 and bool(self.nonzero[b])
        nxt = self._my_next(j, b)
        f = self.frames.contribution(self._tsi(j), self._pool(j, self._round[j]), self._exp[j], nxt,
                                     self._payload(j, b) if data else None)
        self.stats.extra["data_frames" if data else "header_frames"] += 1
        return f

    def _send_round(self, j: int, now: float) -> bytes:
        s = self._slots[j]
        s.t = self._round[j]
        s.frame = self._frame_for(j)
        s.timeout = self._rto()
        s.deadline = now + s.timeout
        s.sends = 1
        s.sent = now
        self.stats.sent += 1
        self.stats.extra["rounds"] += 1
        self.rounds_per_stream[j] += 1
        self.bytes_sent += len(s.frame) - self._hoff
        return s.frame

    # -- driving ------------------------------------------------------------
    def start(self, now: float = 0.0) -> list[bytes]:
        """The discovery round of every stream."""
        if self._started:
            raise WorkerError("worker already started")
        self._started = True
        if self.mode == "float":
            self._exp = [e + codec.EXPONENT_BIAS for e in self._stream_exp]
        return [self._send_round(j, now) for j in range(self.streams)]

    def tick(self, now: float) -> list[bytes]:
        out = super().tick(now)
        self.bytes_sent += sum(len(f) - self._hoff for f in out)
        return out

    def _parse(self, frame):
        try:
            return self.frames.parse_result(frame)
        except PacketError:
            self.stats.malformed += 1
            return None

    def receive(self, frame, now: float = 0.0) -> list[bytes]:
        """One frame from the switch; the frames to send in response."""
        got = self._result_slot(frame)
        if got is None:
            return []
        r, j = got
        s = self._slots[j]
        b = self._block[j]
        if s.t < 0 or r.tsi != self._tsi(j) or r.pool_index != self._pool(j, self._round[j]):
            self.stats.ignored += 1
            return []
        m = r.next
        mine = self._my_next(j, b)
        if m != NONE and (m % self.streams != j or m <= b or m >= self.chunks):
            raise OmniProtocolError(f"slot {j}: the switch's next block {m} after block {b} is not a later "
                                    f"block of stream {j} (streams={self.streams}, blocks={self.chunks})")
        if m > mine:
            raise OmniProtocolError(f"slot {j}: the switch's next block {'none' if m == NONE else m} is beyond "
                                    f"this worker's next non-zero block {mine}; that block would be skipped")
        self.stats.accepted += 1
        self._sample(s, now)
        S = self.streams
        if b < 0:
            if self.mode == "float":
                self.flagged |= r.exponent == codec.EXPONENT_FLAG
                e = codec.field_exponent(r.exponent)
                self._exp[j] = r.exponent
                self._scale[j] = codec.scale(e, self.n, self.value_width)
        else:
            if self.mode == "float":
                q = np.frombuffer(r.frame, self._signed, self.k, self.layout.values_offset)
                self._out[b] = q.astype(np.float64) / self._scale[j]
            else:
                self._out[b] = self.layout.values(r.frame).astype(np.uint64)
        # this round's block and every block before the next one: zero for everyone, already zero in _out
        start = j if b < 0 else b
        self.complete[start:(self.chunks if m == NONE else m):S] = True
        if m == NONE:
            s.t = -1
            s.frame = b""
            return []
        self._round[j] += 1
        self._block[j] = m
        return [self._send_round(j, now)]

    def outstanding(self) -> dict[int, int]:
        """slot -> block of its outstanding round (-1: discovery)."""
        return {j: self._block[j] for j, s in enumerate(self._slots) if s.t >= 0}

    def block_result(self, b: int) -> np.ndarray:
        return self._out[b]
