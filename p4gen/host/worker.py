"""SwitchML worker protocol as a pure state machine (no sockets, no clock).

A :class:`Worker` turns one tensor into contribution frames and result
frames back into the reduced tensor.  The caller owns the network and the
time: :meth:`Worker.start` gives the first frames, :meth:`Worker.receive`
takes one frame from the switch and gives the frames to send next, and
:meth:`Worker.tick` gives the frames whose retransmission timer expired.

Protocol (SwitchML, NSDI'21):

* the tensor is split into chunks of ``elements_per_packet`` values (the
  last one padded with zeros);
* the worker has a window of ``window`` slots; protocol index ``t`` is
  global index ``g = tsi_base + t``, which uses slot ``g mod window`` and
  copy ``(g // window) % 2``; the packet carries ``tsi = g`` and
  ``pool_index = copy << slot_bits | slot``.  A later all-reduce on the same
  slots continues with ``tsi_base = next_tsi_base`` (see
  :attr:`Worker.next_tsi_base`): every slot then sees its indices ``window``
  apart and its copies alternate, as within one tensor;
* every index ``0 .. indices-1`` goes out, so each slot copy's tsi moves on
  by exactly two windows (``2 * window``) from one use to the next: the
  hardened switch takes a newer tsi only that far ahead of the copy's
  (``advance_window``, see ``p4gen.ops``), which keeps one corrupted frame
  with a huge tsi from stranding the copy;
* at most one index per slot is outstanding.  A result is accepted only
  when its ``tsi``, slot and copy are those of the outstanding index (stale
  or duplicate results are ignored); then the next index of that slot goes
  out, on the flipped copy;
* every outstanding index has a timer; on expiry the same frame is sent
  again and the timeout doubles (``backoff``) up to ``max_timeout``.  Any
  accepted result on the slot resets the slot's timeout: to ``timeout``,
  or, given an :class:`RttEstimator` (``rtt=``), to the timeout it estimates
  from the round trips measured so far, so that a queue on a slow link does
  not fire timers for packets that are only delayed.

Exponent negotiation (float tensors).  The switch keeps the maximum of the
exponents it sees per slot copy and writes it into the result.  Index ``t``
carries, in ``agg.exponent``, the biased exponent of data chunk ``t`` and,
as values, data chunk ``t - window`` quantised with the exponent agreed in
the result of index ``t - window``.  The first ``window`` indices are a
bootstrap round with zero values; the last ``window`` indices carry only
values.  So every chunk is quantised with the maximum exponent over all
workers (``p4gen.host.codec``), at the cost of ``window`` extra packets per
tensor.  Integer tensors (``mode="int"``) skip this: index ``t`` carries
chunk ``t`` as raw wire integers and the result is their wrap-around sum.

Flag (float tensors).  ``flag=True`` sends the reserved exponent field
``codec.EXPONENT_FLAG`` (0xFF) with every chunk and zero values: the tensor
held NaN or Inf.  The switch's maximum carries the flag to every worker's
results, so every worker of the all-reduce sees :attr:`Worker.flagged`
without another exchange.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import codec
from ..errors import P4genError
from ..wire import FrameLayout, PacketError
from .packet import Endpoint, contribution_frame, parse_result


class WorkerError(P4genError):
    """A worker parameter is out of range or the tensor cannot be sent."""


@dataclass
class SlotState:
    """A worker's state of one slot of its window: the outstanding packet, when it was sent, its deadline."""
    t: int = -1                 # outstanding protocol index (-1: none)
    frame: bytes = b""
    deadline: float = 0.0
    timeout: float = 0.0
    sends: int = 0
    sent: float = 0.0           # when the outstanding packet was first sent


@dataclass
class RttEstimator:
    """Round-trip time and retransmission timeout, as TCP estimates them (RFC 6298).

    ``update`` takes one sample: the time from a packet's first send to its
    result, only for packets sent once (Karn's rule: the result of a
    retransmitted packet cannot be matched to one send).  A round trip here
    includes waiting for the slowest worker of the job.  One estimator may
    serve a worker's successive all-reduces on the same slots.
    """

    srtt: float | None = None
    rttvar: float = 0.0
    samples: int = 0

    def update(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.samples += 1

    def rto(self, floor: float, cap: float) -> float:
        if self.srtt is None:
            return floor
        return min(cap, max(floor, self.srtt + 4 * self.rttvar))


@dataclass
class WorkerStats:
    sent: int = 0
    retransmitted: int = 0
    accepted: int = 0
    ignored: int = 0            # results for another index / job, duplicates
    malformed: int = 0
    extra: dict = field(default_factory=dict)


class Worker:
    def __init__(self, layout: FrameLayout, tensor, *, job: int, window: int, n_workers: int,
                 src: Endpoint, dst: Endpoint, mode: str = "float", tsi_base: int = 0,
                 timeout: float = 0.01, backoff: float = 2.0, max_timeout: float = 1.0, flag: bool = False,
                 rtt: RttEstimator | None = None):
        if mode not in ("float", "int"):
            raise WorkerError(f"mode={mode!r} must be 'float' or 'int'")
        if flag and mode != "float":
            raise WorkerError("flag=True needs mode='float' (the flag travels in the exponent field)")
        p = layout.params
        self.layout = layout
        self.mode = mode
        self.job = int(job)
        self.k = layout.elements
        self.value_width = layout.value_width
        self.slot_bits = p.slot_bits
        if not 1 <= window <= (1 << self.slot_bits):
            raise WorkerError(f"window={window} must be in 1..{1 << self.slot_bits}")
        if n_workers < 1:
            raise WorkerError(f"n_workers={n_workers} must be at least 1")
        if timeout <= 0 or backoff < 1 or max_timeout < timeout:
            raise WorkerError("timeout must be > 0, backoff >= 1 and max_timeout >= timeout")
        self.window = int(window)
        self.n = int(n_workers)
        self.src, self.dst = src, dst
        self.tsi_base = int(tsi_base)
        self.timeout0, self.backoff, self.max_timeout = float(timeout), float(backoff), float(max_timeout)
        self.rtt = rtt
        x = np.asarray(tensor)
        if x.size == 0:
            raise WorkerError("cannot all-reduce an empty tensor")
        self.shape = x.shape
        self.size = x.size
        self.chunks = -(-self.size // self.k)
        padded = np.zeros(self.chunks * self.k, dtype=np.float64 if mode == "float" else np.int64)
        self.flag = bool(flag)
        if mode == "float":
            if not flag:
                codec.check_tensor(x)       # NaN / Inf raise CodecError
                padded[:self.size] = x.reshape(-1).astype(np.float32)
            self._blocks = padded.reshape(self.chunks, self.k)
            if flag:
                self._exp_field = np.full(self.chunks, codec.EXPONENT_FLAG, dtype=np.int64)
            else:
                self._exp_field = codec.exponent_field(self._blocks, axis=1)
            self._emax = np.full(self.chunks, codec.EXPONENT_MIN, dtype=np.int64)
            self.lag = self.window
            self._out = np.zeros((self.chunks, self.k), dtype=np.float64)
        else:
            if not np.issubdtype(x.dtype, np.integer):
                raise WorkerError(f"mode='int' needs an integer tensor, got {x.dtype}")
            padded[:self.size] = x.reshape(-1).astype(np.int64) & ((1 << self.value_width) - 1)
            self._blocks = padded.reshape(self.chunks, self.k)
            self.lag = 0
            self._out = np.zeros((self.chunks, self.k), dtype=np.uint64)
        self.indices = self.chunks + self.lag       # protocol indices 0 .. indices-1
        self._slots = [SlotState() for _ in range(self.window)]    # by slot number
        self.flagged = False                # a result carried codec.EXPONENT_FLAG
        self._got = np.zeros(self.indices, dtype=bool)
        self.complete = np.zeros(self.chunks, dtype=bool)   # chunk d's reduced values are in the output
        self.stats = WorkerStats()
        self._started = False

    # -- protocol indices -------------------------------------------------
    def pool_index(self, t: int) -> int:
        g = self.tsi_base + t
        return (((g // self.window) & 1) << self.slot_bits) | (g % self.window)

    @property
    def next_tsi_base(self) -> int:
        """``tsi_base`` of the next all-reduce on these slots, so that each slot continues its sequence."""
        return self.tsi_base + self.indices

    def _frame(self, t: int) -> bytes:
        d = t - self.lag
        if self.mode == "float":
            if 0 <= d < self.chunks:
                q = codec.quantize(self._blocks[d], int(self._emax[d]), self.n, self.value_width)
                values = codec.to_wire(q, self.value_width)
            else:
                values = np.zeros(self.k, dtype=np.int64)
            exp = int(self._exp_field[t]) if t < self.chunks else 0
        else:
            values = self._blocks[d] if 0 <= d < self.chunks else np.zeros(self.k, dtype=np.int64)
            exp = 0
        return contribution_frame(self.layout, self.src, self.dst, job=self.job,
                                  tsi=(self.tsi_base + t) & 0xFFFFFFFF, pool_index=self.pool_index(t),
                                  exponent=exp, values=values)

    def _send(self, j: int, t: int, now: float, reset: bool) -> bytes:
        s = self._slots[j]
        s.t = t
        s.frame = self._frame(t)
        if reset or s.timeout == 0:
            s.timeout = self._rto()
        s.deadline = now + s.timeout
        s.sends = 1
        s.sent = now
        self.stats.sent += 1
        return s.frame

    def _rto(self) -> float:
        """The first timeout of a new packet: ``timeout``, or with ``rtt`` the estimated one (within
        ``timeout .. max_timeout``)."""
        return self.timeout0 if self.rtt is None else self.rtt.rto(self.timeout0, self.max_timeout)

    def _sample(self, s: SlotState, now: float) -> None:
        if self.rtt is not None and s.sends == 1:
            self.rtt.update(now - s.sent)

    def _next_on_slot(self, j: int, after: int) -> int:
        t = after + self.window
        return t if t < self.indices else -1

    # -- driving ------------------------------------------------------------
    def start(self, now: float = 0.0) -> list[bytes]:
        """The first frame of every slot of the window."""
        if self._started:
            raise WorkerError("worker already started")
        self._started = True
        out = []
        for t0 in range(min(self.window, self.indices)):
            out.append(self._send((self.tsi_base + t0) % self.window, t0, now, True))
        return out

    def _parse(self, frame):
        """The result carried by ``frame``, or None (counted as malformed)."""
        try:
            return parse_result(self.layout, frame)
        except PacketError:
            self.stats.malformed += 1
            return None

    def _result_slot(self, frame):
        """(result, slot index) of a frame from the switch for this job and one of its slots, or None
        (malformed frames counted as such, other jobs' and slots' as ignored)."""
        r = self._parse(frame)
        if r is None:
            return None
        j = r.pool_index & ((1 << self.slot_bits) - 1)
        if r.job != self.job or j >= len(self._slots):
            self.stats.ignored += 1
            return None
        return r, j

    def receive(self, frame, now: float = 0.0) -> list[bytes]:
        """One frame from the switch; the frames to send in response."""
        got = self._result_slot(frame)
        if got is None:
            return []
        r, j = got
        s = self._slots[j]
        t = s.t
        if t < 0 or r.tsi != ((self.tsi_base + t) & 0xFFFFFFFF) or r.pool_index != self.pool_index(t):
            self.stats.ignored += 1
            return []
        return self._answer(s, j, t, r, now)

    def _answer(self, s: SlotState, j: int, t: int, r, now: float) -> list[bytes]:
        """Result ``r`` of index ``t`` matched slot ``j``: take it, and send the slot's next index (none: the
        slot is done)."""
        self._accept(t, r)
        self.stats.accepted += 1
        self._sample(s, now)
        nxt = self._next_on_slot(j, t)
        if nxt < 0:
            s.t = -1
            s.frame = b""
            return []
        return [self._send(j, nxt, now, True)]

    def _accept(self, t: int, r) -> None:
        self._got[t] = True
        d = t - self.lag
        if self.mode == "float":
            if t < self.chunks:
                self.flagged |= r.exponent == codec.EXPONENT_FLAG
                self._emax[t] = codec.field_exponent(r.exponent)
            if 0 <= d < self.chunks:
                q_sum = codec.from_wire(r.values, self.value_width)
                self._out[d] = codec.dequantize(q_sum, int(self._emax[d]), self.n, self.value_width)
                self.complete[d] = True
        elif 0 <= d < self.chunks:
            self._out[d] = np.asarray(r.values, dtype=np.uint64)
            self.complete[d] = True

    def tick(self, now: float) -> list[bytes]:
        """Frames whose timer expired at ``now`` (sent again, timeouts backed off)."""
        out = []
        for s in self._slots:
            if s.t >= 0 and now >= s.deadline:
                s.timeout = min(s.timeout * self.backoff, self.max_timeout)
                s.deadline = now + s.timeout
                s.sends += 1
                self.stats.retransmitted += 1
                out.append(s.frame)
        return out

    def next_deadline(self) -> float | None:
        ds = [s.deadline for s in self._slots if s.t >= 0]
        return min(ds) if ds else None

    def outstanding(self) -> dict[int, int]:
        """slot -> outstanding protocol index."""
        return {j: s.t for j, s in enumerate(self._slots) if s.t >= 0}

    @property
    def done(self) -> bool:
        return bool(self._started and self.complete.all() and all(s.t < 0 for s in self._slots))

    def result(self) -> np.ndarray:
        """The reduced tensor (float32 for float mode, wire integers for int mode)."""
        if not self.complete.all():
            raise WorkerError(f"{int((~self.complete).sum())} of {self.chunks} chunks are not reduced yet")
        flat = self._out.reshape(-1)[:self.size]
        if self.mode == "float":
            return flat.astype(np.float32).reshape(self.shape)
        return flat.reshape(self.shape)

    def chunk_result(self, d: int) -> np.ndarray:
        """Reduced values of chunk ``d`` (only meaningful once ``complete[d]``)."""
        return self._out[d]
