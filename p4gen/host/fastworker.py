"""A faster :class:`p4gen.host.worker.Worker`: same protocol, same bytes.

The reference worker builds each frame through ``Layout.encode`` (header
dicts) and ``codec.quantize`` (argument checks), about 0.4 ms per frame,
and parses each result through ``parse_result`` (about 75 us).  On a
2-core machine that, not the links, would bound the testbed and training.  This subclass
keeps the state machine of the base class and changes only the per-packet
work:

* ``_frame``: the fixed headers are packed from a template with the
  plan's compiled struct (only tsi, pool_index and exponent change); the
  quantised values use the same formula as ``codec.quantize`` with
  ``codec.scale`` / ``codec.limit`` cached per exponent;
* ``receive``: one ``struct.unpack_from`` of the fixed headers instead of a
  dict decode; the slot/tsi/copy checks are those of the base class;
* ``_accept`` (float mode): ``codec.dequantize``'s formula with the cached
  scale.

``tests/test_testbed_unit.py`` checks that both produce identical frames
and identical results.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import codec
from ..wire import ETHERTYPE_IPV4
from .packet import contribution_frame
from .worker import Worker


@dataclass
class _Res:
    job: int
    tsi: int
    pool_index: int
    exponent: int
    frame: bytes
    values: np.ndarray | None = None


class FastWorker(Worker):
    def __init__(self, layout, tensor, **kw):
        super().__init__(layout, tensor, **kw)
        L = layout
        template = contribution_frame(L, self.src, self.dst, job=self.job, tsi=0, pool_index=0, exponent=0,
                                      values=np.zeros(self.k, dtype=np.int64))
        self._units = list(L.struct.unpack_from(template))
        self._set_tsi = L.setter("agg.tsi")
        self._set_pool = L.setter("agg.pool_index")
        self._set_exp = L.setter("agg.exponent")
        self._get = {n: self.layout.getter(n) for n in ("agg.msg_type", "agg.job", "agg.tsi", "agg.pool_index",
                                                   "agg.exponent", "ethernet.ether_type")}
        w = self.value_width
        self._signed = np.dtype(">i4" if w == 32 else ">i2")
        self._lim = codec.limit(self.n, w)
        self._scales: dict[int, float] = {}
        self._msg_result = int(L.params["msg_result"])
        self._tail = L.frame_len - L.values_offset - self.k * (w // 8)

    def _scale(self, e: int) -> float:
        s = self._scales.get(e)
        if s is None:
            s = self._scales[e] = codec.scale(e, self.n, self.value_width)
        return s

    # -- frames ---------------------------------------------------------------
    def _frame(self, t: int) -> bytes:
        d = t - self.lag
        if self.mode == "float":
            if 0 <= d < self.chunks:
                q = np.rint(self._blocks[d] * self._scale(int(self._emax[d])))
                np.clip(q, -self._lim, self._lim, out=q)
                payload = q.astype(self._signed).tobytes()
            else:
                payload = bytes(self.k * (self.value_width // 8))
            exp = int(self._exp_field[t]) if t < self.chunks else 0
        else:
            if 0 <= d < self.chunks:
                payload = self._blocks[d].astype(self.layout.value_dtype).tobytes()
            else:
                payload = bytes(self.k * (self.value_width // 8))
            exp = 0
        u = list(self._units)
        self._set_tsi(u, (self.tsi_base + t) & 0xFFFFFFFF)
        self._set_pool(u, self.pool_index(t))
        self._set_exp(u, exp)
        return self.layout.struct.pack(*u) + payload + bytes(self._tail)

    # -- results --------------------------------------------------------------
    def _parse(self, frame):
        L = self.layout
        if len(frame) < L.frame_len:
            self.stats.malformed += 1
            return None
        u = L.struct.unpack_from(frame)
        g = self._get
        if g["ethernet.ether_type"](u) != ETHERTYPE_IPV4 or g["agg.msg_type"](u) != self._msg_result:
            self.stats.malformed += 1
            return None
        return _Res(g["agg.job"](u), g["agg.tsi"](u), g["agg.pool_index"](u), g["agg.exponent"](u), frame)

    def _accept(self, t: int, r) -> None:
        L = self.layout
        if self.mode != "float":
            r.values = L.values(r.frame)
            return super()._accept(t, r)
        self._got[t] = True
        d = t - self.lag
        if t < self.chunks:
            self.flagged |= r.exponent == codec.EXPONENT_FLAG
            self._emax[t] = r.exponent - codec.EXPONENT_BIAS
        if 0 <= d < self.chunks:
            q = np.frombuffer(r.frame, self._signed, self.k, L.values_offset)
            self._out[d] = q.astype(np.float64) / self._scale(int(self._emax[d]))
            self.complete[d] = True
