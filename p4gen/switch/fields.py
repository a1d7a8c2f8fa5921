"""Where the switch model reads and writes each header field of a Plan's frames.

:class:`FrameFields` is what the per-packet path and the batch path both
need to know about the header layout, computed once: the struct units
(indices into the tuple ``FrameLayout.struct`` unpacks) and the packed
sub-fields the model reads and rewrites, the workers table's key fields, the
IPv4 checksum's place, and the plan's constants (message types, outcome
codes, slot bits).  :class:`FrameRecords` is the batch path's view of the
same frames: numpy structured records with one field per struct unit.

Both are plain read-only descriptions: they hold no switch state.
"""

from __future__ import annotations

import operator
import struct
from typing import Any, Sequence

import numpy as np

from ..wire import FrameLayout
from .state import ModelError


class FrameFields:
    """The header fields the model touches, for one layout and plan.

    Whole struct units are given by their index (``eth_dst``, ``ip_src``,
    ``tsi``, ...); packed sub-fields as ``(index, shift, mask)`` (``ihl``,
    ``msg``, ``flags``).  OmniReduce's fields (``flags``, ``next``,
    ``total_len``, ``udp_len``, ``data_bytes``, ``set_flags``) are None on
    other plans.  ``worker_key``: the layout's slot of each header field the
    workers table keys on, in the table's internal order (after the ingress
    port, see :attr:`SwitchState.worker_key_fields`); ``worker_key_get``:
    one function from the unpacked tuple to those fields' values when all of
    them are whole units, else None.
    """

    def __init__(self, layout: FrameLayout, params: Any, codes: Any, worker_key_fields: Sequence[str]):
        L = layout
        S = L.slot

        def idx(name: str) -> int:
            s = S(name)
            if s.shift is not None:
                raise ModelError(f"header field {name} is not a whole struct unit")
            return s.index

        def packed(name: str) -> tuple[int, int, int]:
            s = S(name)
            return s.index, s.shift or 0, s.mask

        self.eth_dst = idx("ethernet.dst_addr")
        self.eth_src = idx("ethernet.src_addr")
        self.etype = idx("ethernet.ether_type")
        self.proto = idx("ipv4.protocol")
        self.ip_src = idx("ipv4.src_addr")
        self.ip_dst = idx("ipv4.dst_addr")
        self.sport = idx("udp.src_port")
        self.dport = idx("udp.dst_port")
        self.udp_ck = idx("udp.checksum")
        self.ip_ck = idx("ipv4.hdr_checksum")
        self.tsi = idx("agg.tsi")
        self.pool = idx("agg.pool_index")
        self.exp = idx("agg.exponent")
        self.ihl = packed("ipv4.ihl")
        self.msg = packed("agg.msg_type")
        self.set_msg = L.setter("agg.msg_type")
        # OmniReduce: the data header follows agg only when agg.flags bit 0 is set; agg.next carries
        # the worker's next non-zero block offset; a header-only packet that returns values grows
        self.omni = L.omni
        self.flags = self.set_flags = self.next = self.total_len = self.udp_len = self.data_bytes = None
        if self.omni:
            self.flags = packed("agg.flags")
            self.set_flags = L.setter("agg.flags")
            self.next = idx("agg.next")
            self.total_len = idx("ipv4.total_len")
            self.udp_len = idx("udp.length")
            self.data_bytes = L.frame_len - L.values_offset
        # the workers key's header fields (the ingress port comes first and is no header field)
        self.worker_key = [S(f) for f in worker_key_fields]
        if len({s.index for s in self.worker_key}) != len(self.worker_key):
            raise ModelError("workers table must key on ingress_port once and on distinct header fields")
        sub = self.worker_key
        whole = bool(sub) and all(x.shift is None and not x.raw for x in sub)
        if whole and len(sub) > 1:
            self.worker_key_get = operator.itemgetter(*(x.index for x in sub))
        elif whole:
            idx0 = sub[0].index
            self.worker_key_get = lambda u: (u[idx0],)
        else:
            self.worker_key_get = None
        # the IPv4 header as 16-bit words, for its checksum
        self.ck_words = struct.Struct(f">{L.ipv4_len // 2}H")
        self.ck_off = L.ipv4_checksum_offset
        self.ip_off = L.ipv4_offset
        # the plan's constants
        self.slot_bits = params.slot_bits
        self.slot_mask = (1 << params.slot_bits) - 1
        self.msg_contrib = params.msg_contribution
        self.msg_result = params.msg_result
        self.flood_base = params.flood_group_base
        self.out_drop = codes.outcome("drop")
        self.out_unicast = codes.outcome("unicast")
        self.out_multicast = codes.outcome("multicast")


_NUMPY_UNIT = {"B": "u1", "H": ">u2", "I": ">u4", "Q": ">u8"}


class FrameRecords:
    """A frame layout's struct units as numpy: ``units`` holds each unit's (byte offset, numpy format);
    :meth:`dtype` is the structured dtype of a frame of a given length (field ``u{i}`` is unit i) and
    :meth:`column` one header field of every record of an array of them."""

    def __init__(self, layout: FrameLayout):
        self._layout = layout
        fmt = layout.struct.format.lstrip(">")
        codes = []
        k = 0
        while k < len(fmt):                     # struct codes, e.g. "6s6sHBBHHHBBHII..."
            j = k
            while fmt[j].isdigit():
                j += 1
            codes.append(fmt[k:j + 1])
            k = j + 1
        units, off = [], 0
        for code, size in zip(codes, layout.unit_sizes):
            units.append((off, _NUMPY_UNIT.get(code, f"V{size}")))
            off += size
        self.units: list[tuple[int, str]] = units
        self._dtypes: dict[int, np.dtype] = {}

    def dtype(self, length: int) -> np.dtype:
        """Structured dtype of one frame of ``length`` bytes: field ``u{i}`` is struct unit i."""
        dt = self._dtypes.get(length)
        if dt is None:
            dt = np.dtype({"names": [f"u{i}" for i in range(len(self.units))],
                           "formats": [f for _, f in self.units],
                           "offsets": [o for o, _ in self.units], "itemsize": length})
            self._dtypes[length] = dt
        return dt

    def column(self, rec, name: str) -> np.ndarray:
        """One header field of every frame of a record array (a view for whole units)."""
        s = self._layout.slot(name)
        u = rec[f"u{s.index}"]
        if s.shift is None:
            return u
        return (u >> s.shift) & s.mask

    def offset(self, index: int) -> int:
        """Byte offset of struct unit ``index`` in a frame."""
        return self.units[index][0]
