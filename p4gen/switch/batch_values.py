"""The value registers of a batch: every value operation of the batch applied at once.

The ops' effect on a register row is summarised per op code, as
:mod:`.kernels` reads it off ``p4gen.ops.values_op`` (whether the op
touches the register, whether the row restarts, whether the packet adds its
values, whether the packet carries the register on); a row's value after
each op is a segment sum.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..wire import FrameLayout
from .kernels import Kernels
from .state import SwitchState


class Admitted(NamedTuple):
    """The admitted packets of one length group of a batch (the batch path's admission, per group)."""

    length: int              # the group's frame length
    frames: np.ndarray       # the group's frames as a byte matrix (one row per frame)
    records: np.ndarray      # the same as header records (FrameRecords.dtype(length))
    rows: np.ndarray         # the admitted packets' rows in ``frames``
    batch_index: np.ndarray  # their positions in the batch
    slot: np.ndarray
    copy: np.ndarray
    params: np.ndarray       # their workers entries' parameters (WorkerLookup.lookup)
    sub: np.ndarray          # their records
    data: Any                # OmniReduce: whether each carries a data header (else None)


class BatchValues:
    """The value registers (``state.values``) under a batch's value ops, all at once.

    Interface: :meth:`apply` (the vectorised path: op codes per packet) and
    :meth:`apply_deferred` (the frame-by-frame decisions' deferred ops).
    """

    def __init__(self, layout: FrameLayout, state: SwitchState, kernels: Kernels):
        self._layout = layout
        self._vals = state.values
        self._passes = state.passes
        self._pass_bits = state.pass_bits
        self._kernels = kernels
        self._omni = layout.omni

    def apply_deferred(self, deferred) -> list:
        """Apply the deferred value ops in order; return each packet's carried payload bytes (or None).
        ``deferred[k]``: (batch index, frame, port, unpacked headers, outcome, exponent out, mgid,
        (op name, first register row) or None, data flag, next out)."""
        L = self._layout
        P_, E = self._passes, L.elements_per_pass
        vals = self._vals
        todo = [(k, d[7]) for k, d in enumerate(deferred) if d[7] is not None]
        carried: list = [None] * len(deferred)
        if not todo:
            return carried
        K = self._kernels
        codes = np.array([K.vcode[v[0]] for _, v in todo], dtype=np.int8)
        bases = np.array([v[1] for _, v in todo], dtype=np.int64)
        off, vlen = L.values_offset, L.data_bytes
        zero = bytes(vlen)
        blob = b"".join([deferred[k][1][off:off + vlen] if deferred[k][8] else zero for k, _ in todo])
        pkt = np.frombuffer(blob, L.value_dtype).reshape(len(todo) * P_, E).astype(np.uint64)
        rows = (bases[:, None] + np.arange(P_)).reshape(-1)
        code = np.repeat(codes, P_)
        contrib = np.where(K.v_adds[code][:, None], pkt, np.uint64(0))
        reset = K.v_reset[code]
        order = np.argsort(rows, kind="stable")
        r = rows[order]
        c = contrib[order]
        rs = reset[order]
        m = len(r)
        first = np.ones(m, dtype=bool)
        first[1:] = r[1:] != r[:-1]
        idx = np.arange(m)
        anchor = np.maximum.accumulate(np.where(rs | first, idx, 0))
        csum = np.zeros((m + 1, E), dtype=np.uint64)
        np.cumsum(c, axis=0, out=csum[1:])
        after = csum[1:] - csum[anchor]
        keep = ~rs[anchor]                              # no reset since the row's first op: start from the register
        if keep.any():
            after[keep] += vals[r[keep]].astype(np.uint64)
        last = np.ones(m, dtype=bool)
        last[:-1] = r[1:] != r[:-1]
        vals[r[last]] = after[last].astype(vals.dtype)
        out = np.empty_like(after)
        out[order] = after
        out_be = out.astype(vals.dtype).astype(L.value_dtype).reshape(len(todo), P_ * E)
        for j, (k, v) in enumerate(todo):
            if K.v_carry[codes[j]] or (K.v_touch[codes[j]] and not deferred[k][8]):
                # the packet carries the register; an op that touches it (a write) without data carries zeros
                carried[k] = out_be[j].tobytes()
        return carried

    def apply(self, sc, VO, data, adm: list[Admitted], order, emits):
        """Apply the batch's value ops (codes as in ``Kernels.vcode``) in packet order, all at once.

        Returns the values each emitting packet carries on (native dtype,
        (m, passes * elements); rows of other packets are left zero) and
        which packets carry values.  One op per (packet, pass), sorted by
        register row (stably, so packet order holds within a row).  A row's
        value after op k is the sum of the adding ops since the row's last
        reset (write / clear), plus the register's old contents when the batch
        has no reset before k; it is needed only after each row's last op
        (the register) and after the ops of emitting packets that carry
        values.  So every adding op is scattered (``np.add.at``) into the
        first needed position of its run, and runs with several needed
        positions take a running sum over them.  Unsigned sums wrap modulo
        2^width like the register does, so the result is exact.
        """
        L = self._layout
        P_, E = self._passes, L.elements_per_pass
        m = len(VO)
        K = self._kernels
        has_carry = K.v_carry[VO]
        touched = K.v_touch[VO]
        if self._omni:
            has_carry |= touched & ~data          # e.g. a write without data carries the zeros it wrote
        if touched.all():
            todo = None                           # every packet has a value op
        else:
            todo = touched.nonzero()[0]
            if not len(todo):
                return None, has_carry
        vals = self._vals
        dt = vals.dtype
        rows = (sc if todo is None else sc[todo]).astype(np.int64, copy=False) << self._pass_bits
        if P_ > 1:
            rows = (rows[:, None] + np.arange(P_)).reshape(-1)
        order2 = np.argsort(rows, kind="stable")
        r = rows[order2]
        pk = order2 // P_ if P_ > 1 else order2                  # packet of each sorted op
        if todo is not None:
            pk = todo[pk]
        cs = VO[pk]
        reset = K.v_reset[cs]
        adds = K.v_adds[cs]
        if self._omni:
            adds &= data[pk]                      # a header-only packet resets without adding
        n2 = len(r)
        newrow = np.empty(n2, dtype=bool)
        newrow[0] = True
        newrow[1:] = r[1:] != r[:-1]
        last = np.empty(n2, dtype=bool)
        last[-1] = True
        last[:-1] = newrow[1:]
        want = (emits & has_carry)[pk]
        need = (last | want).nonzero()[0]
        start = np.maximum.accumulate(np.where(reset | newrow, np.arange(n2), 0))[need]
        # each adding op goes to the first needed position at or after it in its run; the adds of a run
        # that a later reset ends before any needed position are never seen and are left out
        after = np.zeros((len(need), E), dtype=dt)
        pa = adds.nonzero()[0]
        if len(pa):
            j = np.searchsorted(need, pa)
            live = start[j] <= pa
            if not live.all():
                pa, j = pa[live], j[live]
        if len(pa):                               # (every add may have been left out just above)
            V = self._op_values(pk[pa], order2[pa] % P_ if P_ > 1 else None, adm, order)   # in j's order
            step = (j[1:] != j[:-1]).nonzero()[0] + 1
            run = len(pa) // (len(step) + 1)
            if run * (len(step) + 1) == len(pa) and not (step % run).any():
                # every target gets a run of the same length (e.g. whole rounds of n packets): sum them
                if run <= 4:                      # short runs: add strided slices (a reduction over a short
                    acc = V[::run].astype(dt)     # middle axis is slow in numpy)
                    for k in range(1, run):
                        acc += V[k::run]
                    after[j[::run]] = acc
                else:
                    after[j[::run]] = V.reshape(len(step) + 1, run, -1).sum(axis=1, dtype=dt)
            elif len(pa) >= 6 * (len(step) + 1):    # long runs of one target: a segmented sum is cheaper
                seg = np.concatenate([[0], step])
                after[j[seg]] = np.add.reduceat(V, seg, axis=0, dtype=dt)
            else:
                # runs of a few lengths (e.g. a round that ends inside a chunk): the k-th add of every run
                # at once, for k up to the longest run
                seg = np.concatenate([[0], step])
                lens = np.diff(np.append(seg, len(pa)))
                V = V.astype(dt, copy=False)
                tg = j[seg]
                after[tg] = V[seg]
                for k in range(1, int(lens.max())):
                    sel = (lens > k).nonzero()[0]
                    after[tg[sel]] += V[seg[sel] + k]
            more = start[1:] == start[:-1]        # a run with several needed positions: sum up to each
            if more.any():
                k = np.arange(len(need))
                first = np.maximum.accumulate(np.where(np.concatenate([[True], ~more]), k, 0))
                c = np.zeros((len(need) + 1, E), dtype=dt)
                np.cumsum(after, axis=0, dtype=dt, out=c[1:])
                after = c[1:] - c[first]
        keep = ~reset[start]                      # no reset since the row's first op: add the register
        if keep.any():
            after[keep] += vals[r[need[keep]]]
        carried = np.zeros((m, P_ * E), dtype=dt)
        w = want[need]
        if w.any():
            q = need[w]
            if P_ > 1:
                carried.reshape(m, P_, E)[pk[q], order2[q] % P_] = after[w]
            else:
                carried[pk[q]] = after[w]
        fin = last[need]
        vals[r[need[fin]]] = after[fin]
        return carried, has_carry

    def _op_values(self, pk, passes, adm: list[Admitted], order) -> np.ndarray:
        """The values (wire dtype, (len(pk), elements per pass)) of packets ``pk`` (admitted order) in
        pass ``passes`` (None: one pass); every such packet carries data."""
        L = self._layout
        P_, E = self._passes, L.elements_per_pass
        off, vlen = L.values_offset, L.data_bytes
        if order is None:
            a = adm[0]
            src = a.frames[:, off:off + vlen].view(L.value_dtype)
            brow = a.rows[pk]
        else:
            parts = []
            for a in adm:
                if a.length >= L.frame_len:
                    parts.append(a.frames[a.rows, off:off + vlen].view(L.value_dtype))
                else:
                    parts.append(np.zeros((len(a.rows), L.elements), L.value_dtype))
            src = np.concatenate(parts)[order]
            brow = pk
        if passes is None:
            return src[brow]
        return src.reshape(len(src), P_, E)[brow, passes]
