"""Worker-side frames: contributions a worker sends and the results it parses.

The byte layout comes from :class:`p4gen.wire.FrameLayout` (derived from the
plan's headers); this module only fills in and reads the fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..wire import FrameLayout, MalformedPacket, PacketError, ip, mac


# -- worker frames -------------------------------------------------------------
@dataclass(frozen=True)
class Endpoint:
    mac: int
    ip: int
    port: int


def endpoint(mac_addr, ip_addr, port: int) -> Endpoint:
    return Endpoint(mac(mac_addr), ip(ip_addr), int(port))


def contribution_frame(layout: FrameLayout, src: Endpoint, dst: Endpoint, *, job: int, tsi: int,
                       pool_index: int, exponent: int, values: Iterable[int] | np.ndarray | None,
                       msg_type: int | None = None, next: int | None = None) -> bytes:
    """A worker's contribution (msg_type 0): values are wire integers (signed values wrap).

    OmniReduce plans: ``next`` is the worker's next non-zero block offset
    (required), and ``values=None`` makes a header-only packet (agg.flags 0);
    with values, agg.flags is 1 and the data header follows.
    """
    mt = layout.params.msg_contribution if msg_type is None else msg_type
    agg = {"msg_type": mt, "job": job, "exponent": exponent, "tsi": tsi, "pool_index": pool_index}
    if layout.omni:
        if next is None:
            raise PacketError("an omnireduce contribution needs next= (the next non-zero block offset)")
        agg["next"] = next
        agg["flags"] = 0 if values is None else 1
    elif next is not None:
        raise PacketError("next= exists only in omnireduce plans")
    hdrs = {
        "ethernet": {"dst_addr": dst.mac, "src_addr": src.mac},
        "ipv4": {"src_addr": src.ip, "dst_addr": dst.ip},
        "udp": {"src_port": src.port, "dst_port": dst.port},
        "agg": agg,
    }
    return layout.encode(hdrs, None if values is None else np.asarray(values))


@dataclass(frozen=True)
class Result:
    job: int
    tsi: int
    pool_index: int
    exponent: int
    values: np.ndarray | None    # native unsigned wire values (wrap-around sums); None: header-only (OmniReduce)
    headers: dict[str, dict[str, int]]

    @property
    def next(self) -> int | None:
        """OmniReduce: the next non-zero block offset (None in SwitchML plans)."""
        return self.headers["agg"].get("next")


def parse_result(layout: FrameLayout, frame) -> Result:
    """A switch result (msg_type 1) -> Result; anything else raises a PacketError."""
    hdrs, values = layout.decode(frame, result=True)
    agg = hdrs["agg"]
    if agg["msg_type"] != layout.params.msg_result:
        raise MalformedPacket(f"agg msg_type={agg['msg_type']} is not a result "
                              f"({layout.params.msg_result})")
    return Result(agg["job"], agg["tsi"], agg["pool_index"], agg["exponent"], values, hdrs)


def parse_contribution(layout: FrameLayout, frame) -> Result:
    """A contribution (msg_type 0) -> Result-shaped record (used by tests and tools)."""
    hdrs, values = layout.decode(frame)
    agg = hdrs["agg"]
    if agg["msg_type"] != layout.params.msg_contribution:
        raise MalformedPacket(f"agg msg_type={agg['msg_type']} is not a contribution")
    return Result(agg["job"], agg["tsi"], agg["pool_index"], agg["exponent"], values, hdrs)


def datagram_prefix(layout: FrameLayout, switch_port: int) -> bytes:
    """Ethernet/IPv4/UDP headers that turn a UDP datagram from the switch back into a frame to parse.

    A worker on a kernel UDP socket sends its frame from the ``agg`` header
    on and receives results the same way; the state machines parse frames,
    so a received datagram gets this prefix first.
    """
    h = layout.headers
    eth = h["ethernet"].encode({"ether_type": 0x0800})
    ip4 = h["ipv4"].encode({"version": 4, "ihl": 5, "ttl": 64, "protocol": 17})
    udp = h["udp"].encode({"src_port": switch_port})
    return eth + ip4 + udp
