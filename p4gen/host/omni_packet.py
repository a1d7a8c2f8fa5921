"""OmniReduce frames for a worker: fast packing of contributions, fast parsing of results.

Everything comes from the plan's header layout (:class:`p4gen.wire.FrameLayout`):
the ``agg`` header of an OmniReduce plan holds ``flags`` (bit 0: a data
header follows) and ``next`` (the sender's next non-zero block, 32 bits).

* A *data* contribution is a full frame: fixed headers with ``flags = 1``,
  then the data header.
* A *header-only* contribution ends after ``agg`` (``flags = 0``); its IPv4
  total length and UDP length say so, and its IPv4 checksum covers that.
* A result always carries the data header (``flags = 1``, ``msg_type`` =
  result), so it is parsed like a full frame.

:class:`OmniFrames` packs contributions from two prepared templates (data and
header-only) with the plan's compiled struct, so only ``tsi``,
``pool_index``, ``exponent`` and ``next`` are written per frame; its
:meth:`OmniFrames.reference` builds the same frame field by field through
the plan's header encoders (``tests/test_omni_worker.py`` checks they agree,
and that they agree with :func:`p4gen.host.packet.contribution_frame`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..wire import ETHERTYPE_IPV4, FIXED_HEADERS, IPPROTO_UDP, FrameLayout, MalformedPacket, PacketError, fix_ipv4_checksum
from .packet import Endpoint

NONE = 0xFFFFFFFF          # agg.next: no further non-zero block
FLAG_DATA = 1              # agg.flags bit 0


@dataclass(frozen=True)
class OmniResult:
    job: int
    tsi: int
    pool_index: int
    exponent: int
    next: int
    frame: bytes

    def values(self, layout: FrameLayout) -> np.ndarray:
        """The result's values as native unsigned wire integers."""
        return layout.values(self.frame)


def _check_omni(layout: FrameLayout) -> None:
    agg = {f.name for f in layout.headers["agg"].fields}
    missing = sorted({"flags", "next"} - agg)
    if missing:
        raise PacketError(f"the plan's agg header has no {missing[0]!r} field: not an omnireduce plan")


class OmniFrames:
    """Contribution frames of one worker (fixed addresses and job) and result parsing."""

    def __init__(self, layout: FrameLayout, src: Endpoint, dst: Endpoint, job: int):
        _check_omni(layout)
        self.layout = L = layout
        self.src, self.dst, self.job = src, dst, int(job)
        self.payload_bytes = L.frame_len - L.values_offset
        self._msg_contrib = L.params.msg_contribution
        self._msg_result = L.params.msg_result
        self._units = {flag: list(L.struct.unpack_from(self.reference(0, 0, 0, 0, flag == FLAG_DATA,
                                                                     b"\0" * self.payload_bytes)))
                       for flag in (0, FLAG_DATA)}
        self._set = [L.setter(f"agg.{n}") for n in ("tsi", "pool_index", "exponent", "next")]
        self._get = {n: self.layout.getter(n) for n in ("ethernet.ether_type", "ipv4.protocol", "agg.msg_type",
                                                   "agg.flags", "agg.job", "agg.tsi", "agg.pool_index",
                                                   "agg.exponent", "agg.next")}

    # -- contributions ------------------------------------------------------
    def reference(self, tsi: int, pool_index: int, exponent: int, nxt: int, data: bool,
                  payload: bytes | None = None) -> bytes:
        """The frame built field by field from the plan's header encoders (slow, obviously right)."""
        L = self.layout
        tail = bytes(payload) if data else b""
        if data and len(tail) != self.payload_bytes:
            raise PacketError(f"payload of {len(tail)} bytes; the plan's data header is {self.payload_bytes}")
        ip_len = L.fixed_len + len(tail) - L.ipv4_offset
        h = {
            "ethernet": {"dst_addr": self.dst.mac, "src_addr": self.src.mac, "ether_type": ETHERTYPE_IPV4},
            "ipv4": {"version": 4, "ihl": 5, "ttl": 64, "protocol": IPPROTO_UDP, "total_len": ip_len,
                     "src_addr": self.src.ip, "dst_addr": self.dst.ip},
            "udp": {"src_port": self.src.port, "dst_port": self.dst.port, "length": ip_len - L.ipv4_len},
            "agg": {"msg_type": self._msg_contrib, "flags": FLAG_DATA if data else 0, "job": self.job,
                    "exponent": exponent, "tsi": tsi, "pool_index": pool_index, "next": nxt},
        }
        head = bytearray(b"".join(L.headers[n].encode(h[n]) for n in FIXED_HEADERS))
        fix_ipv4_checksum(head, L.ipv4_offset, L.ipv4_len, L.ipv4_checksum_offset)
        return bytes(head) + tail

    def contribution(self, tsi: int, pool_index: int, exponent: int, nxt: int, payload: bytes | None) -> bytes:
        """A data contribution (``payload``: the data header's bytes) or, with ``payload=None``, a
        header-only one.  Same bytes as :meth:`reference`."""
        u = list(self._units[0 if payload is None else FLAG_DATA])
        s_tsi, s_pool, s_exp, s_next = self._set
        s_tsi(u, tsi)
        s_pool(u, pool_index)
        s_exp(u, exponent)
        s_next(u, nxt)
        head = self.layout.struct.pack(*u)
        return head if payload is None else head + payload

    # -- results ---------------------------------------------------------------
    def parse_result(self, frame) -> OmniResult:
        """A switch result -> OmniResult; a frame that is not one raises MalformedPacket."""
        L = self.layout
        if len(frame) < L.frame_len:
            raise MalformedPacket(f"result frame of {len(frame)} bytes is shorter than {L.frame_len} "
                                  f"(an OmniReduce result always carries the data header)")
        u = L.struct.unpack_from(frame)
        g = self._get
        if g["ethernet.ether_type"](u) != ETHERTYPE_IPV4 or g["ipv4.protocol"](u) != IPPROTO_UDP:
            raise MalformedPacket("not a UDP/IPv4 frame")
        if g["agg.msg_type"](u) != self._msg_result:
            raise MalformedPacket(f"agg msg_type={g['agg.msg_type'](u)} is not a result ({self._msg_result})")
        if not g["agg.flags"](u) & FLAG_DATA:
            raise MalformedPacket("an OmniReduce result without its data header (agg.flags bit 0 clear)")
        return OmniResult(g["agg.job"](u), g["agg.tsi"](u), g["agg.pool_index"](u), g["agg.exponent"](u),
                          g["agg.next"](u), bytes(frame))

    def parse_contribution(self, frame) -> tuple[dict[str, int], bytes | None]:
        """A worker's contribution -> (agg fields, payload bytes or None for header-only).  Used by tests
        and tools that watch the wire."""
        L = self.layout
        if len(frame) < L.fixed_len:
            raise MalformedPacket(f"contribution of {len(frame)} bytes is shorter than {L.fixed_len}")
        agg = L.headers["agg"].decode(frame)
        if agg["msg_type"] != self._msg_contrib:
            raise MalformedPacket(f"agg msg_type={agg['msg_type']} is not a contribution")
        if agg["flags"] & FLAG_DATA:
            if len(frame) < L.frame_len:
                raise MalformedPacket(f"data contribution of {len(frame)} bytes is shorter than {L.frame_len}")
            return agg, bytes(frame[L.values_offset:L.frame_len])
        return agg, None
