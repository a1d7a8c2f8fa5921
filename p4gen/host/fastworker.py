"""A faster :class:`p4gen.host.worker.Worker`: same protocol, same bytes.

The reference worker builds each frame through ``FrameLayout.encode`` (header
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

import math
import struct
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
        self._native = self._signed.newbyteorder("=")
        self._lim = codec.limit(self.n, w)
        self._scales: dict[int, float] = {}
        self._msg_result = L.params.msg_result
        self._tail = L.frame_len - L.values_offset - self.k * (w // 8)
        self._tail_bytes = bytes(self._tail)
        self._zero_payload = bytes(self.k * (w // 8))
        self._qbuf = np.empty(self.k, dtype=np.float64)
        self._due = math.inf               # no deadline is earlier than this
        # the header fields a frame changes (tsi, pool_index, exponent), when each is a whole unit: written
        # into a copy of the template's header bytes at its offset; else through the unpacked units
        self._hdr = bytearray(template[:L.fixed_len])
        self._pack = None
        offs = [sum(L.unit_sizes[:i]) for i in range(len(L.unit_sizes))]
        fmt = {1: ">B", 2: ">H", 4: ">I", 8: ">Q"}
        slots = [L.slot(n) for n in ("agg.tsi", "agg.pool_index", "agg.exponent")]
        if all(sl.shift is None and not sl.raw and L.unit_sizes[sl.index] in fmt for sl in slots):
            self._pack = [(struct.Struct(fmt[L.unit_sizes[sl.index]]).pack_into, offs[sl.index]) for sl in slots]
        # a result's fields (msg_type, job, tsi, pool_index, exponent, ether_type) straight from their units
        names = ("ethernet.ether_type", "agg.msg_type", "agg.job", "agg.tsi", "agg.pool_index", "agg.exponent")
        rs = [L.slot(n) for n in names]
        self._res_units = None
        if all(not sl.raw and L.unit_sizes[sl.index] in fmt for sl in rs):
            self._res_units = [(offs[sl.index], fmt[L.unit_sizes[sl.index]][1:], sl.shift, sl.mask) for sl in rs]
            order = sorted(range(len(rs)), key=lambda i: self._res_units[i][0])
            # one struct over the units in offset order, with pad bytes between them
            parts, pos = [">"], 0
            for i in order:
                o, c = self._res_units[i][0], self._res_units[i][1]
                if o < pos:                   # two fields of one unit: read the unit once
                    continue
                parts.append(f"{o - pos}x{c}" if o > pos else c)
                pos = o + struct.calcsize(">" + c)
            self._res_struct = struct.Struct("".join(parts))
            uniq = sorted({self._res_units[i][0] for i in range(len(rs))})
            pick = ", ".join(f"v[{uniq.index(o)}]" if sh is None else f"(v[{uniq.index(o)}] >> {sh}) & {m}"
                             for o, _c, sh, m in self._res_units)
            self._res_pick = eval(f"lambda v: ({pick},)")       # noqa: S307 -- built from the plan's layout

    # -- timers: the earliest deadline is kept as a lower bound, so that a tick with nothing due and the
    # wait before the next one cost no walk over the window's slots
    def _send(self, j: int, t: int, now: float, reset: bool) -> bytes:
        f = super()._send(j, t, now, reset)
        d = self._slots[j].deadline
        if d < self._due:
            self._due = d
        return f

    def tick(self, now: float) -> list[bytes]:
        if now < self._due:
            return []
        out = super().tick(now)
        self._due = min((s.deadline for s in self._slots if s.t >= 0), default=math.inf)
        return out

    def next_deadline(self) -> float | None:
        """A lower bound of the earliest deadline (None when no packet is outstanding since the last
        tick): a packet whose result came is forgotten only at the next tick that finds something due."""
        return None if self._due == math.inf else self._due

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
                # codec.quantize's clip(rint(x * scale), -L, L), in one buffer
                q = self._qbuf
                np.multiply(self._blocks[d], self._scale(int(self._emax[d])), out=q)
                np.rint(q, out=q)
                np.minimum(q, self._lim, out=q)
                np.maximum(q, -self._lim, out=q)
                payload = q.astype(self._signed).tobytes()
            else:
                payload = self._zero_payload
            exp = int(self._exp_field[t]) if t < self.chunks else 0
        else:
            if 0 <= d < self.chunks:
                payload = self._blocks[d].astype(self.layout.value_dtype).tobytes()
            else:
                payload = self._zero_payload
            exp = 0
        tsi, pool = (self.tsi_base + t) & 0xFFFFFFFF, self.pool_index(t)
        if self._pack is not None:
            h = self._hdr
            (p_tsi, o_tsi), (p_pool, o_pool), (p_exp, o_exp) = self._pack
            p_tsi(h, o_tsi, tsi)
            p_pool(h, o_pool, pool)
            p_exp(h, o_exp, exp)
            return bytes(h) + payload + self._tail_bytes
        u = list(self._units)
        self._set_tsi(u, tsi)
        self._set_pool(u, pool)
        self._set_exp(u, exp)
        return self.layout.struct.pack(*u) + payload + self._tail_bytes

    # -- results --------------------------------------------------------------
    def _fields(self, frame):
        """(ether_type, msg_type, job, tsi, pool_index, exponent) of a frame of at least the fixed length."""
        if self._res_units is None:
            u = self.layout.struct.unpack_from(frame)
            g = self._get
            return tuple(g[n](u) for n in ("ethernet.ether_type", "agg.msg_type", "agg.job", "agg.tsi",
                                           "agg.pool_index", "agg.exponent"))
        return self._res_pick(self._res_struct.unpack_from(frame))

    def _parse(self, frame):
        L = self.layout
        if len(frame) < L.frame_len:
            self.stats.malformed += 1
            return None
        et, mt, job, tsi, pool, exp = self._fields(frame)
        if et != ETHERTYPE_IPV4 or mt != self._msg_result:
            self.stats.malformed += 1
            return None
        return _Res(job, tsi, pool, exp, frame)

    def receive(self, frame, now: float = 0.0) -> list[bytes]:
        """:meth:`Worker.receive`, its parse and checks inline (the same outcome, stats and frames)."""
        st = self.stats
        if len(frame) < self.layout.frame_len:
            st.malformed += 1
            return []
        et, mt, job, tsi, pool, exp = self._fields(frame)
        if et != ETHERTYPE_IPV4 or mt != self._msg_result:
            st.malformed += 1
            return []
        j = pool & ((1 << self.slot_bits) - 1)
        if job != self.job or j >= len(self._slots):
            st.ignored += 1
            return []
        s = self._slots[j]
        t = s.t
        if t < 0 or tsi != ((self.tsi_base + t) & 0xFFFFFFFF) or pool != self.pool_index(t):
            st.ignored += 1
            return []
        return self._answer(s, j, t, _Res(job, tsi, pool, exp, frame), now)

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
            # codec.dequantize's q_sum / scale, straight into the output row
            np.divide(np.frombuffer(r.frame, self._signed, self.k, L.values_offset).astype(self._native),
                      self._scale(int(self._emax[d])), out=self._out[d])
            self.complete[d] = True

