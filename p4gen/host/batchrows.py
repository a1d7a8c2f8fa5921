"""What both batch workers share (:class:`~p4gen.host.batchworker.BatchWorker` for SwitchML,
:class:`~p4gen.host.omni_batchworker.BatchOmniWorker` for OmniReduce): a burst of results as the rows of
a byte matrix, its header fields read and written as columns, and the timers of every slot (a SwitchML
slot or an OmniReduce stream) as arrays.

:class:`BatchRows` is mixed in before the per-frame worker whose protocol a batch worker keeps: it
reads ``layout``, ``rtt``, ``stats``, ``backoff`` and ``max_timeout`` of that worker and calls its
``_rto``.
"""

from __future__ import annotations

import numpy as np

_FMT = {1: "u1", 2: ">u2", 4: ">u4", 8: ">u8"}


class BatchRows:
    def _init_rows(self, slots: int, read: tuple[str, ...], whole: tuple[str, ...] = (), ok: bool = True) -> None:
        """Arrays for ``slots`` slots, and the columns of the header fields ``read``.  :attr:`batchable`
        is whether every one of them sits in whole units of the layout (and the fields in ``whole``
        fill their units), and ``ok``."""
        L = self.layout
        self._deadline = np.zeros(slots)
        self._timeout = np.zeros(slots)
        self._sends = np.zeros(slots, dtype=np.int64)
        self._sent_at = np.zeros(slots)
        self._frames = np.zeros((slots, L.frame_len), dtype=np.uint8)
        self._open = 0                                     # slots with an outstanding packet
        self._complete_n = 0
        self._begun = np.zeros(slots, dtype=bool)          # slots started (start, or one by one)
        offs = [sum(L.unit_sizes[:i]) for i in range(len(L.unit_sizes))]

        def col(name):
            sl = L.slot(name)
            size = L.unit_sizes[sl.index]
            if sl.raw or size not in _FMT:
                return None
            return offs[sl.index], size, np.dtype(_FMT[size]), sl.shift, sl.mask

        self._cols = {n: col(n) for n in read}
        filled = all(self._cols[n] is not None and self._cols[n][3] is None for n in whole)
        self.batchable = ok and filled and all(c is not None for c in self._cols.values())
        if self.batchable:
            # the header as one record per row: each unit that holds a field, big-endian at its offset
            units = {}
            for c in self._cols.values():
                units[c[0]] = c[2]
            self._rec = np.dtype({"names": [f"u{o}" for o in units], "formats": list(units.values()),
                                  "offsets": list(units), "itemsize": L.fixed_len})

    # -- slots, padded to the window --------------------------------------------------------------
    def started(self) -> np.ndarray:
        """Per slot of the window: True once this all-reduce has started it (all at once, or one by one)."""
        out = np.zeros(self.window, dtype=bool)
        out[:len(self._begun)] = self._begun
        return out

    def busy(self) -> np.ndarray:
        """Per slot of the window: True while a packet of this all-reduce is outstanding on it."""
        out = np.zeros(self.window, dtype=bool)
        out[:len(self._t)] = self._t >= 0
        return out

    # -- columns ------------------------------------------------------------------------------
    def _fields(self, M: np.ndarray) -> dict[str, np.ndarray]:
        """Every field the checks read, as int64 columns of the rows of ``M``."""
        H = np.ascontiguousarray(M[:, :self.layout.fixed_len]).view(self._rec).reshape(-1)
        out = {}
        for name, (off, _size, _dt, shift, mask) in self._cols.items():
            v = H[f"u{off}"].astype(np.int64)
            out[name] = v if shift is None else (v >> shift) & mask
        return out

    def _burst(self, M: np.ndarray) -> dict[str, np.ndarray] | None:
        """The fields of a burst's rows (:meth:`_fields`), or None when it has no row or its rows are shorter
        than a frame (counted as malformed)."""
        if not len(M):
            return None
        if M.shape[1] < self.layout.frame_len:
            self.stats.malformed += len(M)
            return None
        return self._fields(M)

    def _put(self, F: np.ndarray, name: str, values: np.ndarray) -> None:
        """Write ``values`` into field ``name`` (a whole unit) of every row of ``F``."""
        off, size, dt, _shift, _mask = self._cols[name]
        F[:, off:off + size] = values.astype(dt).reshape(-1, 1).view(np.uint8)

    def _one_row(self, frame) -> np.ndarray | None:
        """One received frame as a matrix of one row (None, counted as malformed, when it is short)."""
        L = self.layout
        if len(frame) < L.frame_len:
            self.stats.malformed += 1
            return None
        return np.frombuffer(frame, np.uint8, L.frame_len).reshape(1, -1)

    def _accepted(self, n: int, good: np.ndarray, match: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """The rows of a burst of ``n`` that count: those that ``match`` their slot ``jj``, the first of
        several for one slot (handled one by one, the later ones would find it moved on).  The rows that
        are not ``good`` are counted malformed, the good ones that do not count ignored."""
        ngood = int(np.count_nonzero(good))
        self.stats.malformed += n - ngood
        rows = np.flatnonzero(match)
        if len(rows) > 1:
            _u, first = np.unique(jj[rows], return_index=True)
            if len(first) < len(rows):
                rows = rows[np.sort(first)]
        self.stats.ignored += ngood - len(rows)
        return rows

    # -- timers -------------------------------------------------------------------------------
    def _next_timeouts(self, js: np.ndarray, more: np.ndarray, now: float) -> np.ndarray | None:
        """With an RTT estimate: each result's sample (of a packet sent once), then the timeout of its
        slot's next packet where ``more``, in order; else None (the first timeout)."""
        if self.rtt is None:
            return None
        timeouts = []
        for s_, sent, again in zip(self._sends[js].tolist(), self._sent_at[js].tolist(), more.tolist()):
            if s_ == 1:
                self.rtt.update(now - sent)
            if again:
                timeouts.append(self._rto())
        return np.array(timeouts)

    def _arm(self, js: np.ndarray, F: np.ndarray, now: float, timeouts: np.ndarray | None) -> None:
        """Slots ``js`` sent the new packets ``F`` at ``now``: their timers from ``timeouts`` (None: the
        first timeout)."""
        self._frames[js] = F
        self._timeout[js] = self._rto() if timeouts is None else timeouts
        dl = now + self._timeout[js]
        self._deadline[js] = dl
        self._sends[js] = 1
        self._sent_at[js] = now
        self.stats.sent += len(js)
        self._open += len(js)
        self._due = min(self._due, float(dl.min()))

    def _expired(self, now: float, live: np.ndarray) -> np.ndarray:
        """The slots among ``live`` whose timer expired at ``now``, in slot order, their timeouts backed off
        and counted as retransmitted."""
        due = np.flatnonzero(live & (now >= self._deadline))
        if len(due):
            self._timeout[due] = np.minimum(self._timeout[due] * self.backoff, self.max_timeout)
            self._deadline[due] = now + self._timeout[due]
            self._sends[due] += 1
            self.stats.retransmitted += len(due)
        self._due = float(self._deadline[live].min()) if live.any() else float("inf")
        return due

    def next_deadline(self) -> float | None:
        return None if self._due == float("inf") else self._due
