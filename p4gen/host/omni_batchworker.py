"""An OmniReduce worker that handles a burst of results at once: same protocol, same bytes as
:class:`p4gen.host.omni_worker.OmniWorker`.

:class:`OmniWorker` parses, checks and answers each result with a dozen
Python-level steps and a bytes object of its own.  :class:`BatchOmniWorker`
keeps the state of every stream in arrays (outstanding round, block, copy,
exponent and scale, deadline, timeout, sends, and the outstanding frame of
each stream as a row of one byte matrix with its length) and takes a burst
as a byte matrix, one result per row:

* the fields of every row are read as columns, and the checks of
  :meth:`OmniWorker.receive` are array comparisons against each row's
  stream; of several rows that match one stream only the first counts, as
  when they are handled one by one (the second would find the stream moved
  on to its next round);
* this worker's next non-zero block after any block (and the first one of
  every stream) is a table computed once, so the checks of the switch's
  next offset and the ``next`` field of every new frame are look-ups;
* discovery results set their streams' exponents and scales; the values of
  every data result are dequantised into the output rows in one division;
* the next round of every stream that goes on is built as rows of a frame
  matrix: the header fields are written as columns into the header-only or
  the data template, the blocks of the rows that hold data are quantised
  with their streams' scales (``codec.quantize``'s formula) straight into
  the rows.  A header-only frame is the row's first ``fixed_len`` bytes:
  :meth:`receive_rows` returns the rows and every row's length.

A result whose next offset would skip data raises
:class:`~p4gen.host.omni_worker.OmniProtocolError` with the message the
per-frame worker gives (for the first such row of the burst).
:meth:`receive` (one frame), :meth:`start` and :meth:`tick` keep the
interface of :class:`OmniWorker` (frames as bytes); ``tests/test_omni_batchworker.py``
checks that both workers send identical frames, count identical stats and
produce identical results, with duplicates, stale results, other jobs'
frames, short frames and timeouts mixed in.  The batch path needs the
header fields it reads and writes to be whole units of the layout (true of
every plan p4gen builds); otherwise :attr:`batchable` is False and a caller
keeps using the per-frame methods.
"""

from __future__ import annotations

import numpy as np

from . import codec
from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP
from .batchrows import BatchRows
from .omni_packet import FLAG_DATA, NONE
from .omni_worker import OmniProtocolError, OmniWorker, tsi_fits
from .worker import WorkerError

_READ = ("ethernet.ether_type", "ipv4.protocol", "agg.msg_type", "agg.flags", "agg.job", "agg.tsi",
         "agg.pool_index", "agg.exponent", "agg.next")
_WRITE = ("agg.tsi", "agg.pool_index", "agg.exponent", "agg.next")


class BatchOmniWorker(BatchRows, OmniWorker):
    def __init__(self, layout, tensor, **kw):
        super().__init__(layout, tensor, **kw)
        L = self.layout
        S, nb = self.streams, self.chunks
        self._t = np.full(S, -1, dtype=np.int64)              # outstanding round per stream (-1: none)
        self._blk = np.full(S, -1, dtype=np.int64)            # its block (-1: discovery)
        self._rnd = np.zeros(S, dtype=np.int64)               # rounds begun per stream, less one
        self._expf = np.zeros(S, dtype=np.int64)              # exponent field the stream's frames carry
        self._sc = np.zeros(S)                                # the stream's agreed scale (float mode)
        self._lens = np.zeros(S, dtype=np.int64)              # the length of each stream's outstanding frame
        self._copies = np.array(self._copy0[:S], dtype=np.int64)
        self._due = float("inf")
        # this worker's next non-zero block of the same stream after block b, and the first of stream j:
        # blocks laid out as rows of S (block = row * S + stream), the nearest non-zero one at or below
        rows = -(-nb // S)
        idx = np.arange(rows * S, dtype=np.int64)
        nz = np.zeros(rows * S, dtype=bool)
        nz[:nb] = self.nonzero
        grid = np.where(nz, idx, NONE).reshape(rows, S)
        at_or_after = np.minimum.accumulate(grid[::-1], axis=0)[::-1]
        after = np.vstack([at_or_after[1:], np.full((1, S), NONE, dtype=np.int64)])
        self._after = after.reshape(-1)[:nb]
        self._first = at_or_after[0].copy()
        self._init_rows(S, _READ, whole=_WRITE)
        fr = self.frames
        self._tmpl = {flag: np.frombuffer(L.struct.pack(*fr._units[flag]), np.uint8) for flag in (0, FLAG_DATA)}
        self._msg_res = fr._msg_result
        self._scale_cache: dict[int, float] = {}
        self._vbytes = self.k * (self.value_width // 8)
        if self.mode == "float":
            self._native = self._signed.newbyteorder("=")
            self._lim_f = float(self._lim)

    # -- rows ---------------------------------------------------------------------------------
    def _tsis(self, js: np.ndarray) -> np.ndarray:
        """tsi of the outstanding rounds of streams ``js`` (``OmniWorker._tsi``: numbered by the slot's rounds)."""
        return self.tsi_base + 1 + js + self.window * (self._copies[js] + self._rnd[js])

    def _pools(self, js: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        return (((rounds + self._copies[js]) & 1) << self.slot_bits) | js

    def _mine_next(self, js: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """This worker's first non-zero block of stream ``js[i]`` after ``blocks[i]`` (-1: from the start)."""
        disc = blocks < 0
        return np.where(disc, self._first[js], self._after[np.where(disc, 0, blocks)])

    def _scale_of(self, field: int) -> float:
        s = self._scale_cache.get(field)
        if s is None:
            s = self._scale_cache[field] = codec.scale(codec.field_exponent(field), self.n, self.value_width)
        return s

    def _build(self, js: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The frames of the outstanding rounds of streams ``js`` (``OmniWorker._frame_for`` of each) as
        rows, and their lengths."""
        L = self.layout
        m = len(js)
        b = self._blk[js]
        data = b >= 0
        data[data] = self.nonzero[b[data]]
        F = np.empty((m, L.frame_len), dtype=np.uint8)     # a header-only row's bytes after fixed_len are not sent
        F[:, :L.fixed_len] = self._tmpl[FLAG_DATA]
        hdr = ~data
        if hdr.any():
            F[hdr, :L.fixed_len] = self._tmpl[0]
        self._put(F, "agg.tsi", self._tsis(js))
        self._put(F, "agg.pool_index", self._pools(js, self._rnd[js]))
        self._put(F, "agg.exponent", self._expf[js])
        self._put(F, "agg.next", self._mine_next(js, b))
        if data.any():
            w = np.flatnonzero(data)
            vals = F[:, L.values_offset:L.values_offset + self._vbytes]
            if self.mode == "float":
                q = self._blocks[b[w]] * self._sc[js[w]][:, None]
                np.rint(q, out=q)
                np.clip(q, -self._lim_f, self._lim_f, out=q)
                q = q.astype(self._signed).view(np.uint8)
            else:
                q = self._blocks[b[w]].astype(L.value_dtype).view(np.uint8)
            if len(w) == m:
                vals[:] = q
            else:
                vals[w] = q
        nd = int(np.count_nonzero(data))
        ex = self.stats.extra
        ex["data_frames"] += nd
        ex["header_frames"] += m - nd
        return F, np.where(data, L.frame_len, L.fixed_len)

    def _send_rows(self, js: np.ndarray, now: float, timeouts=None) -> tuple[np.ndarray, np.ndarray]:
        """Begin the next round of streams ``js`` (their round and block already set), a new packet each
        (its timeout reset to ``timeouts[i]``, by default the first timeout); their frames and lengths."""
        F, lens = self._build(js)
        self._t[js] = self._rnd[js]
        self._lens[js] = lens
        self._arm(js, F, now, timeouts)
        m = len(js)
        self.stats.extra["rounds"] += m
        np.add.at(self._rps, js, 1)
        self.bytes_sent += int(lens.sum()) - m * self._hoff
        return F, lens

    @property
    def rounds_per_stream(self) -> list[int]:
        return self._rps.tolist()

    @rounds_per_stream.setter
    def rounds_per_stream(self, value) -> None:
        self._rps = np.array(value, dtype=np.int64)

    # -- driving ------------------------------------------------------------------------------
    def start(self, now: float = 0.0) -> list[bytes]:
        """The discovery round of every stream."""
        if self._started:
            return super().start(now)             # raises WorkerError
        self._started = True
        self._begun[:] = True
        if self.mode == "float":
            self._expf[:] = np.array(self._stream_exp, dtype=np.int64) + codec.EXPONENT_BIAS
        F, lens = self._send_rows(np.arange(self.streams, dtype=np.int64), now)
        return _cut(F, lens)

    def start_streams(self, js, copies, now: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The discovery round of each stream of ``js`` (rows with their lengths, in that order), the other
        streams left to a later call; ``copies[i]``: the rounds slot ``js[i]`` ran before this all-reduce.
        A caller that all-reduces one tensor after another on the same slots starts each stream as soon
        as the tensor before it frees that slot (:meth:`released`), with the rounds that tensor left
        (``next_copies``); each slot's rounds and copies are the same as after a whole tensor."""
        js = np.asarray(js, dtype=np.int64)
        cs = np.asarray(copies, dtype=np.int64)
        if len(js) and (js.min() < 0 or js.max() >= self.streams):
            raise WorkerError(f"streams {js.tolist()} must be in 0..{self.streams - 1}")
        if self._begun[js].any():
            raise WorkerError(f"stream {int(js[self._begun[js]][0])} was started already")
        if len(cs) and not tsi_fits(self.tsi_base, self.window, cs.tolist(), self.chunks):
            raise WorkerError(f"tsi_base={self.tsi_base} with {int(cs.max())} rounds done and {self.chunks} blocks to "
                              f"go does not fit the 32-bit tsi (window {self.window})")
        self._started = True
        self._begun[js] = True
        self._copies[js] = cs
        for j, c in zip(js.tolist(), cs.tolist()):
            self._copy0[j] = c
        if self.mode == "float":
            self._expf[js] = np.array(self._stream_exp, dtype=np.int64)[js] + codec.EXPONENT_BIAS
        if not len(js):
            return self._frames[:0], self._lens[:0]
        return self._send_rows(js, now)

    def released(self) -> np.ndarray:
        """Per slot of the window: True once this all-reduce will send nothing more on it (its stream started
        and ended, or no stream of this tensor runs on it)."""
        out = np.ones(self.window, dtype=bool)
        out[:self.streams] = self._begun & (self._t < 0)
        return out

    def receive(self, frame, now: float = 0.0) -> list[bytes]:
        M = self._one_row(frame)
        return [] if M is None else _cut(*self.receive_rows(M, now))

    def receive_rows(self, M: np.ndarray, now: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Results as the rows of the uint8 matrix ``M`` (each at least the frame's length, in arrival
        order); the frames to send in response as rows, with their lengths, in that order."""
        st = self.stats
        L = self.layout
        empty = (np.zeros((0, L.frame_len), dtype=np.uint8), np.zeros(0, dtype=np.int64))
        f = self._burst(M)
        if f is None:
            return empty
        good = ((f["ethernet.ether_type"] == ETHERTYPE_IPV4) & (f["ipv4.protocol"] == IPPROTO_UDP)
                & (f["agg.msg_type"] == self._msg_res) & ((f["agg.flags"] & FLAG_DATA) != 0))
        pool = f["agg.pool_index"]
        j = pool & ((1 << self.slot_bits) - 1)
        ours = good & (f["agg.job"] == self.job) & (j < self.streams)
        jj = np.where(ours, j, 0)
        b_of = self._blk[jj]
        match = (ours & (self._t[jj] >= 0) & (f["agg.tsi"] == self._tsis(jj))
                 & (pool == self._pools(jj, self._rnd[jj])))
        rows = self._accepted(len(M), good, match, jj)
        if not len(rows):
            return empty
        js, b = jj[rows], b_of[rows]
        m_ = f["agg.next"][rows]
        mine = self._mine_next(js, b)
        S, nb = self.streams, self.chunks
        bad = ((m_ != NONE) & ((m_ % S != js) | (m_ <= b) | (m_ >= nb))) | (m_ > mine)
        if bad.any():
            self._protocol_error(js, b, m_, mine, int(np.flatnonzero(bad)[0]))
        st.accepted += len(rows)
        timeouts = self._next_timeouts(js, m_ != NONE, now)
        disc = b < 0
        if disc.any():
            dj = js[disc]
            if self.mode == "float":
                e = f["agg.exponent"][rows][disc]
                self.flagged |= bool((e == codec.EXPONENT_FLAG).any())
                self._expf[dj] = e
                self._sc[dj] = [self._scale_of(x) for x in e.tolist()]
        if not disc.all():
            self._store(M[rows[~disc]], js[~disc], b[~disc])
        for start, end in zip(np.where(disc, js, b).tolist(), np.where(m_ == NONE, nb, m_).tolist()):
            self.complete[start:end:S] = True     # this round's block and the zero blocks up to the next
        self._t[js] = -1
        self._open -= len(js)
        go = m_ != NONE
        if not go.all():
            js, m_ = js[go], m_[go]
            if not len(js):
                return empty
        self._rnd[js] += 1
        self._blk[js] = m_
        return self._send_rows(js, now, timeouts)

    def _store(self, R: np.ndarray, js: np.ndarray, bs: np.ndarray) -> None:
        """The values of data results ``R`` (streams ``js``, blocks ``bs``) into the output rows."""
        L = self.layout
        raw = np.ascontiguousarray(R[:, L.values_offset:L.values_offset + self._vbytes])
        if self.mode == "float":
            # to native byte order first: numpy divides big-endian integers by floats ~15x slower
            self._out[bs] = raw.view(self._signed).astype(self._native) / self._sc[js][:, None]
        else:
            self._out[bs] = raw.view(L.value_dtype).astype(np.uint64)

    def _protocol_error(self, js, b, m_, mine, i: int) -> None:
        j, bi, m, me = int(js[i]), int(b[i]), int(m_[i]), int(mine[i])
        if m != NONE and (m % self.streams != j or m <= bi or m >= self.chunks):
            raise OmniProtocolError(f"slot {j}: the switch's next block {m} after block {bi} is not a later "
                                    f"block of stream {j} (streams={self.streams}, blocks={self.chunks})")
        raise OmniProtocolError(f"slot {j}: the switch's next block {'none' if m == NONE else m} is beyond "
                                f"this worker's next non-zero block {me}; that block would be skipped")

    def tick(self, now: float) -> list[bytes]:
        return _cut(*self.tick_rows(now))

    def tick_rows(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Frames whose timer expired at ``now`` as rows with their lengths, in stream order (timeouts
        backed off)."""
        if now < self._due:
            return self._frames[:0], self._lens[:0]
        due = self._expired(now, self._t >= 0)
        self.bytes_sent += int(self._lens[due].sum()) - len(due) * self._hoff
        return self._frames[due], self._lens[due]

    def outstanding(self) -> dict[int, int]:
        """stream -> block of its outstanding round (-1: discovery)."""
        return {int(j): int(self._blk[j]) for j in np.flatnonzero(self._t >= 0)}

    def pool_index(self, t: int) -> int:
        return int(self._pools(np.array([t]), self._rnd[[t]])[0])

    @property
    def done(self) -> bool:
        return bool(self._started and self.complete.all() and self._open == 0)


def _cut(F: np.ndarray, lens: np.ndarray) -> list[bytes]:
    """Rows of ``F`` as frames of their lengths."""
    return [r[:n].tobytes() for r, n in zip(F, lens.tolist())]
