"""A SwitchML worker that handles a burst of results at once: same protocol, same bytes as
:class:`p4gen.host.worker.Worker`.

An emulator on a kernel UDP socket receives results in bursts (one
``recvmmsg``); :class:`FastWorker` still parses, checks, dequantises and
answers each one with a dozen numpy calls and a bytes object of its own,
about 40 us of CPU per result here, which made the worker emulators most of
the testbed's CPU.  :class:`BatchWorker` keeps the slot state in arrays
(outstanding index, deadline, timeout, sends and the outstanding frame of
each slot, as rows of one byte matrix) and takes a burst as a byte matrix,
one frame per row:

* the fields of every row are read as columns (big-endian units at their
  offsets), and the checks of :meth:`Worker.receive` are array comparisons
  against each row's slot; of several rows that match one slot only the
  first counts, as when they are handled one by one (the second would find
  the slot moved on);
* the exponents and the dequantised values of every accepted result go into
  the output rows in one division by the rows' scales
  (``codec.dequantize``'s formula);
* the next index of every accepted slot is quantised with the rows' scales
  (``codec.quantize``'s formula) straight into a matrix of frames whose
  header fields are written as columns; those rows are the slots' new
  outstanding frames and what :meth:`receive_rows` returns, in the order
  the results came in.

:meth:`receive` (one frame) and :meth:`tick` keep the interface of
:class:`Worker` (frames as bytes); ``tests/test_testbed_unit.py`` checks
that both workers send identical frames and produce identical results,
with duplicates, stale results and timeouts mixed in.  The batch path needs
the header fields it changes to be whole units of the layout (true of every
plan p4gen builds); otherwise :meth:`BatchWorker.batchable` is False and a
caller keeps using the per-frame methods.
"""

from __future__ import annotations

import numpy as np

from . import codec
from ..wire import ETHERTYPE_IPV4
from .batchrows import BatchRows
from .fastworker import FastWorker
from .worker import WorkerError

_READ = ("ethernet.ether_type", "agg.msg_type", "agg.job", "agg.tsi", "agg.pool_index", "agg.exponent")


class BatchWorker(BatchRows, FastWorker):
    def __init__(self, layout, tensor, **kw):
        super().__init__(layout, tensor, **kw)
        L = self.layout
        W = self.window
        self._t = np.full(W, -1, dtype=np.int64)          # outstanding index per slot (-1: none)
        self._tsi = np.zeros(W, dtype=np.int64)           # its tsi and pool_index, as a result must carry them
        self._pool = np.zeros(W, dtype=np.int64)
        self._template = np.frombuffer(bytes(self._hdr) + bytes(L.frame_len - L.fixed_len), np.uint8)
        self._init_rows(W, _READ, ok=self._pack is not None)
        # codec.scale(e, n, w) of every exponent e (index e - EXPONENT_MIN): one lookup per row
        self._scale_of = codec.scale(np.arange(codec.EXPONENT_MIN, codec.EXPONENT_MAX + 1), self.n, self.value_width)
        self._lim_f = float(self._lim)

    # -- slot state as arrays -----------------------------------------------------------------
    def pool_indices(self, t: np.ndarray) -> np.ndarray:
        g = self.tsi_base + t
        return (((g // self.window) & 1) << self.slot_bits) | (g % self.window)

    def _scale_rows(self, e: np.ndarray) -> np.ndarray:
        return self._scale_of[e - codec.EXPONENT_MIN]

    def _build(self, ts: np.ndarray, tsi: np.ndarray, pool: np.ndarray) -> np.ndarray:
        """The frames of protocol indices ``ts`` (with their tsi and pool_index) as rows
        (``FastWorker._frame`` of each)."""
        m = len(ts)
        L = self.layout
        F = np.empty((m, L.frame_len), dtype=np.uint8)
        F[:] = self._template
        d = ts - self.lag
        lo, hi = int(d.min()), int(d.max())
        every = lo >= 0 and hi < self.chunks            # the steady state: every row carries a data chunk
        has = None if every else (d >= 0) & (d < self.chunks)
        vals = F[:, L.values_offset:L.values_offset + self.k * (self.value_width // 8)]
        if self.mode == "float":
            if int(ts.max()) < self.chunks:
                exp = self._exp_field[ts]
            else:
                exp = np.where(ts < self.chunks, self._exp_field[np.minimum(ts, self.chunks - 1)], 0)
            dd = d if every else d[has]
            if len(dd):
                q = self._blocks[dd] * self._scale_rows(self._emax[dd])[:, None]
                np.rint(q, out=q)
                np.clip(q, -self._lim_f, self._lim_f, out=q)
                q = q.astype(self._signed).view(np.uint8)
                if every:
                    vals[:] = q
                else:
                    vals[has] = q
        else:
            exp = np.zeros(m, dtype=np.int64)
            dd = d if every else d[has]
            if len(dd):
                q = self._blocks[dd].astype(L.value_dtype).view(np.uint8)
                if every:
                    vals[:] = q
                else:
                    vals[has] = q
        if not every:
            vals[~has] = 0
        self._put(F, "agg.tsi", tsi)
        self._put(F, "agg.pool_index", pool)
        self._put(F, "agg.exponent", exp)
        return F

    def _send_rows(self, js: np.ndarray, ts: np.ndarray, tsi: np.ndarray, pool: np.ndarray, now: float,
                   timeouts=None) -> np.ndarray:
        """Send index ``ts[i]`` (tsi ``tsi[i]``, pool_index ``pool[i]``) on slot ``js[i]``, a new packet
        (its timeout reset to ``timeouts[i]``, by default the first timeout); their frames."""
        F = self._build(ts, tsi, pool)
        self._t[js] = ts
        self._tsi[js] = tsi
        self._pool[js] = pool
        self._arm(js, F, now, timeouts)
        return F

    # -- driving ------------------------------------------------------------------------------
    def start(self, now: float = 0.0) -> list[bytes]:
        if self._started:
            return super().start(now)             # raises WorkerError
        self._started = True
        self._begun[:] = True
        ts = np.arange(min(self.window, self.indices), dtype=np.int64)
        F = self._send_rows((self.tsi_base + ts) % self.window, ts, (self.tsi_base + ts) & 0xFFFFFFFF,
                            self.pool_indices(ts), now)
        return [r.tobytes() for r in F]

    def start_slots(self, js, now: float = 0.0) -> np.ndarray:
        """The first frame of each slot of ``js`` (rows, in that order; none for a slot this all-reduce
        does not use), the other slots left to a later call.  A caller that all-reduces one tensor after
        another on the same slots (``tsi_base = next_tsi_base``) starts each slot of the next tensor as
        soon as the tensor before it frees that slot (:meth:`released`), instead of after its last
        result: each slot's sequence of indices and copies is the same either way."""
        js = np.asarray(js, dtype=np.int64)
        if self._begun[js].any():
            raise WorkerError(f"slot {int(js[self._begun[js]][0])} was started already")
        self._started = True
        self._begun[js] = True
        ts = (js - self.tsi_base) % self.window
        used = ts < self.indices
        js, ts = js[used], ts[used]
        if not len(js):
            return self._frames[:0]
        return self._send_rows(js, ts, (self.tsi_base + ts) & 0xFFFFFFFF, self.pool_indices(ts), now)

    def released(self) -> np.ndarray:
        """Per slot of the window: True once this all-reduce will send nothing more on it (started and its
        last index done, or never used)."""
        unused = (np.arange(self.window) - self.tsi_base) % self.window >= self.indices
        return unused | (self._begun & (self._t < 0))

    def receive(self, frame, now: float = 0.0) -> list[bytes]:
        M = self._one_row(frame)
        return [] if M is None else [r.tobytes() for r in self.receive_rows(M, now)]

    def receive_rows(self, M: np.ndarray, now: float = 0.0) -> np.ndarray:
        """Results as the rows of the uint8 matrix ``M`` (each at least the frame's fixed length, in
        arrival order); the frames to send in response as rows, in that order."""
        st = self.stats
        L = self.layout
        empty = np.zeros((0, L.frame_len), dtype=np.uint8)
        f = self._burst(M)
        if f is None:
            return empty
        good = (f["ethernet.ether_type"] == ETHERTYPE_IPV4) & (f["agg.msg_type"] == self._msg_result)
        pool = f["agg.pool_index"]
        j = pool & ((1 << self.slot_bits) - 1)
        ours = good & (f["agg.job"] == self.job) & (j < self.window)
        jj = np.where(ours, j, 0)
        match = ours & (self._t[jj] >= 0) & (f["agg.tsi"] == self._tsi[jj]) & (pool == self._pool[jj])
        rows = self._accepted(len(M), good, match, jj)
        if not len(rows):
            return empty
        js = jj[rows]
        ts = self._t[js]
        self._accept_rows(M[rows], ts, f["agg.exponent"][rows])
        st.accepted += len(rows)
        nxt = ts + self.window
        more = nxt < self.indices
        timeouts = self._next_timeouts(js, more, now)
        self._t[js] = -1
        self._open -= len(js)
        if not more.all():
            js, nxt = js[more], nxt[more]
            if not len(js):
                return empty
        # the next index of a slot: a window on, on the other copy
        return self._send_rows(js, nxt, (self._tsi[js] + self.window) & 0xFFFFFFFF,
                               self._pool[js] ^ (1 << self.slot_bits), now, timeouts)

    def _accept_rows(self, R: np.ndarray, ts: np.ndarray, exps: np.ndarray) -> None:
        L = self.layout
        self._got[ts] = True
        d = ts - self.lag
        if self.mode == "float":
            early = ts < self.chunks
            if early.any():
                self.flagged |= bool((exps[early] == codec.EXPONENT_FLAG).any())
                self._emax[ts[early]] = exps[early] - codec.EXPONENT_BIAS
        has = (d >= 0) & (d < self.chunks)
        if not has.any():
            return
        dd = d[has]
        voff, nb = L.values_offset, self.k * (self.value_width // 8)
        raw = np.ascontiguousarray(R[has, voff:voff + nb])
        if self.mode == "float":
            # to native byte order first: numpy divides big-endian integers by floats ~15x slower
            vals = raw.view(self._signed).astype(self._native)
            self._out[dd] = vals / self._scale_rows(self._emax[dd])[:, None]
        else:
            self._out[dd] = raw.view(L.value_dtype).astype(np.uint64)
        newly = int((~self.complete[dd]).sum())
        self.complete[dd] = True
        self._complete_n += newly

    def tick(self, now: float) -> list[bytes]:
        return [r.tobytes() for r in self.tick_rows(now)]

    def tick_rows(self, now: float) -> np.ndarray:
        """Frames whose timer expired at ``now`` as rows, in slot order (timeouts backed off)."""
        if now < self._due:
            return self._frames[:0]
        return self._frames[self._expired(now, self._t >= 0)]

    def outstanding(self) -> dict[int, int]:
        return {int(j): int(self._t[j]) for j in np.flatnonzero(self._t >= 0)}

    @property
    def done(self) -> bool:
        return bool(self._started and self._complete_n == self.chunks and self._open == 0)
