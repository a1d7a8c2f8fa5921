"""The workers table as arrays: one look-up for a whole batch of frames."""

from __future__ import annotations

import numpy as np

from ..wire import FrameLayout
from .fields import FrameFields, FrameRecords
from .state import SwitchState

_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


class WorkerLookup:
    """The ``workers`` table of a :class:`.SwitchState` as sorted arrays, for the batch path.

    Interface: :meth:`lookup` (the entries of a batch of frames) and
    :attr:`usable` (False while two entries' key hashes collide, or while a
    run of many changes goes on: then batches cannot be looked up this way).
    The arrays are rebuilt on every change of the table, or once after a run
    of changes (:meth:`.SwitchState.subscribe`, :meth:`.SwitchState.deferred`),
    so the control plane's write pays for it and no batch does.
    """

    def __init__(self, layout: FrameLayout, fields: FrameFields, records: FrameRecords, state: SwitchState):
        self._entries = state.workers
        self._key_sub = fields.worker_key
        self._nkey = 1 + len(fields.worker_key)
        self._vw = self._vx = None
        self.usable = True
        # workers keys of whole bytes that leave at least one byte for the ingress port: exact look-ups
        # of (the key's byte columns in a frame, bytes of the port, each field's size)
        self._kx = None
        kb: list[int] | None = []
        for s_ in fields.worker_key:
            if s_.shift is not None or s_.raw:
                kb = None
                break
            o_ = records.offset(s_.index)
            kb.extend(range(o_, o_ + layout.unit_sizes[s_.index]))
        if kb is not None and len(kb) <= 7:
            self._kx = (np.array(kb, dtype=np.int64), 8 - len(kb), [layout.unit_sizes[s_.index] for s_ in self._key_sub])
        self._state = state
        self._build()
        state.subscribe("workers", self)

    def _build(self) -> None:
        self._vw, self._vx, self.usable = self._compute(list(self._entries.items()))

    # -- as a subscriber of the table (SwitchState.subscribe)
    def changed(self, deferred: bool) -> None:
        """The table changed: rebuild now, or (one change of many) stop using the arrays until
        :meth:`refresh` (batches then look each frame up in the table's dict)."""
        if deferred:
            self.usable = False
            self._vw = self._vx = None
        else:
            self._build()

    def refresh(self, lock) -> None:
        """Rebuild after many changes: the table copied under ``lock``, the arrays built outside it,
        installed under it unless the table changed meanwhile (its next change rebuilds them)."""
        with lock:
            items, version = list(self._entries.items()), self._state.version["workers"]
        built = self._compute(items)
        with lock:
            if self._state.version["workers"] == version:
                self._vw, self._vx, self.usable = built

    def _compute(self, items: list) -> tuple:
        """(hashed arrays, exact arrays, usable) of the workers table's ``items``: its keys as sorted hashes
        with per-entry parameter columns, and as sorted exact keys where they fit 8 bytes."""
        keys = [k for k, _v in items]
        params = [v for _k, v in items]
        if not keys:
            return None, None, True
        kcols = np.array(keys, dtype=np.uint64).reshape(len(keys), self._nkey)
        h = np.zeros(len(keys), dtype=np.uint64)
        for c in range(kcols.shape[1]):
            h = h * _HASH_MUL + kcols[:, c]
        srt = np.argsort(h, kind="stable")
        hs = h[srt]
        if len(hs) > 1 and np.any(hs[1:] == hs[:-1]):      # a hash collision between entries: no vector lookup
            return False, None, False
        known0 = np.array([p is not None for p in params], dtype=bool)
        pv0 = np.array([p if p is not None else (0,) * 7 for p in params], dtype=np.int64).reshape(len(keys), 7)
        # an eighth column: the mask when the word is 0 (what a one-word bitmap step reads), else 0
        pv0 = np.concatenate([pv0, np.where(pv0[:, 1] == 0, pv0[:, 2], 0)[:, None]], axis=1)
        known, pv = known0[srt], pv0[srt]
        # exact keys: the ingress port's bytes then the key fields' bytes as on the wire, one uint64
        vx = None
        kx = self._kx
        if kx is not None:
            _kb, kport, sizes = kx
            try:
                ex = np.array([int.from_bytes(k[0].to_bytes(kport, "big")
                                              + b"".join(v.to_bytes(z, "big") for v, z in zip(k[1:], sizes)), "big")
                               for k in keys], dtype=np.uint64)
            except OverflowError:             # a port (or field) wider than its bytes: hashed look-ups only
                ex = None
            if ex is not None:
                s2 = np.argsort(ex, kind="stable")
                vx = (ex[s2], known0[s2], pv0[s2])
        return (hs, kcols[srt], known, pv), vx, True

    def _key_col(self, sub, s) -> np.ndarray:
        u = sub[f"u{s.index}"]
        if s.shift is not None:
            u = (u >> s.shift) & s.mask
        return u.astype(np.uint64)

    def lookup(self, A8, rows, sub, port_col):
        """Workers table look-up of frames ``rows`` of a length group (``A8``: its byte matrix, ``sub``: the
        records of those rows, ``port_col``: their ingress ports): whether each hits a set_worker entry,
        and its parameters (worker_id, word, mask, n, slot_base, slot_count, mgid, and the mask when the
        word is 0)."""
        vx = self._vx
        if vx is not None:
            kb, kport, _sizes = self._kx
            if not (port_col >> (8 * kport)).any():          # every port fits its bytes (none negative)
                K = np.empty((len(rows), 8), np.uint8)
                K[:, kport:] = A8[:, kb] if len(rows) == len(A8) else A8[rows[:, None], kb]
                if kport == 1:
                    K[:, 0] = port_col
                else:
                    K[:, :kport] = (port_col[:, None] >> (8 * np.arange(kport - 1, -1, -1))) & 0xFF
                key = K.view(">u8").reshape(-1).astype(np.uint64)
                ks, kn, kpv = vx
                ent = np.searchsorted(ks, key)
                np.minimum(ent, len(ks) - 1, out=ent)
                return (ks[ent] == key) & kn[ent], kpv[ent]
        cols = [port_col.astype(np.uint64)] + [self._key_col(sub, s_) for s_ in self._key_sub]
        ent, known = self._hashed(cols)
        return known, (self._vw[3][ent] if self._vw else np.zeros((len(rows), 8), dtype=np.int64))

    def _hashed(self, cols):
        """Workers table lookup for a batch by key hash: entry index and whether it is a set_worker hit."""
        vw = self._vw
        m = len(cols[0])
        if vw is None:
            return np.zeros(m, dtype=np.int64), np.zeros(m, dtype=bool)
        hs, kcols, known, pv = vw
        # the packet key in the table's internal order: ingress port, then the header fields
        h = np.zeros(m, dtype=np.uint64)
        for c in cols:
            h = h * _HASH_MUL + c
        ent = np.searchsorted(hs, h)
        np.minimum(ent, len(hs) - 1, out=ent)
        hit = hs[ent] == h
        for c, col in enumerate(cols):
            hit &= kcols[ent, c] == col
        return ent, hit & known[ent]
