"""The link-rate bound of an all-reduce on the testbed: the bytes each host link must carry, headers
included, over the link rate.

An all-reduce cannot finish before every host link has carried, in each
direction, what the protocol must put on it.  The bound counts those bytes
as the shaper counts them (htb counts each frame from its Ethernet header
on), per element of the tensor:

* SwitchML: one full frame per chunk of ``k`` elements each way (the
  contribution up, the result down): ``frame_len / k`` bytes per element,
  e.g. 1075 B frames of 256 float32 values (1024 B of values and 51 B of
  Ethernet, IPv4, UDP and aggregation headers) give 4.199 B per element.
  The float protocol's first round, which only agrees on exponents, is not
  counted: it is a cost of the protocol, not of the tensor.
* OmniReduce: the same per element of the blocks that some worker holds
  (the union): every such block comes back as a full result on every link.
* Gloo ring all-reduce: ``2 (n - 1) / n`` times the tensor each way, in TCP
  segments of at most 1448 B (MTU 1500 less 20 B of IPv4, 20 B of TCP and
  12 B of timestamp options) carried in 1514 B frames, i.e. 4.182 B per
  element sent; on links of another MTU (jumbo frames: 9000), segments of
  MTU - 52 B in frames of MTU + 14 B.  The ACKs that share the links are
  not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4gen import protocols

MTU = 1500
ETHERNET_HEADER = 14
TCP_SEGMENT = MTU - 20 - 20 - 12            # IPv4, TCP, TCP timestamps (on by default in every namespace)
TCP_FRAME = MTU + ETHERNET_HEADER


@dataclass(frozen=True)
class Bound:
    seconds: float
    bytes_per_element: float     # wire bytes per tensor element on one link, one direction
    how: str                     # one line: what was counted


def aggregation(layout, size: int, mbit: float, protocol: str = protocols.DEFAULT.name,
                held_blocks: int | None = None) -> Bound:
    """SwitchML (or OmniReduce, ``held_blocks`` of the tensor's blocks held by some worker) on links of ``mbit``."""
    k = layout.elements
    frames = -(-size // k) if held_blocks is None else held_blocks
    values = k * layout.value_width // 8
    per_element = layout.frame_len / k
    what = "chunk" if held_blocks is None else "held block"
    how = (f"{protocol}: {frames} frames (one per {what} of {k} elements) of {layout.frame_len} B = {values} B of "
           f"values + {layout.frame_len - values} B of headers ({per_element:.3f} B per element), each way on every "
           f"host link at {mbit:g} Mbit/s")
    return Bound(frames * layout.frame_len * 8 / (mbit * 1e6), per_element, how)


def gloo_ring(n: int, size: int, mbit: float, itemsize: int = 4, mtu: int = MTU) -> Bound:
    """Gloo ring all-reduce of ``size`` elements by ``n`` hosts on links of ``mbit`` and ``mtu``."""
    segment, frame = mtu - (MTU - TCP_SEGMENT), mtu + ETHERNET_HEADER
    payload = 2 * (n - 1) / n * size * itemsize
    frames = -(-int(payload) // segment)
    per_element = frames * frame / size
    how = (f"gloo: 2(n-1)/n = {2 * (n - 1) / n:.3f} of the tensor ({payload / 1e6:.2f} MB) each way per host, in "
           f"{frames} TCP segments of {segment} B in {frame} B frames ({per_element:.3f} B per element; "
           f"ACKs not counted) at {mbit:g} Mbit/s")
    return Bound(frames * frame * 8 / (mbit * 1e6), per_element, how)
