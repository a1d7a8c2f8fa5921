"""The wire format derived from ``plan.headers`` (the only copy of the layout).

Every header in the plan is a list of fields ``{name, bits}`` in network
byte order, most significant bit first; the ``data`` header repeats
``repeat`` (= passes) times and holds ``elements_per_pass`` values of
``value_width`` bits.  Headers marked ``internal`` (the recirculation pass
header) never appear on the wire and are skipped here.

:class:`FrameLayout` turns that list into byte offsets, a compiled
:class:`struct.Struct` for the fixed headers (the fast path of the model
and the data plane) and a big-endian numpy dtype for the payload.  Frames
that are truncated or malformed raise :class:`MalformedPacket`; frames that
are not aggregation packets at all raise :class:`ForeignPacket`.  Callers
count such frames and drop them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Mapping

from .. import protocols
from ..errors import P4genError

# numpy, imported by the first FrameLayout: the compiler reads only the header definitions below and so
# does not load it
np: Any = None


def _load_numpy() -> None:
    global np
    if np is None:
        import numpy
        np = numpy


ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
FIXED_HEADERS = ("ethernet", "ipv4", "udp", "agg")

# The headers a build defines (plan.headers: these, the protocol's own agg fields, the data header and,
# for several passes, the internal pass header), each a list of (field, bits) in wire order.
HEADERS: list[tuple[str, list[tuple[str, int]]]] = [
    ("ethernet", [("dst_addr", 48), ("src_addr", 48), ("ether_type", 16)]),
    ("ipv4", [("version", 4), ("ihl", 4), ("diffserv", 8), ("total_len", 16), ("identification", 16),
              ("flags", 3), ("frag_offset", 13), ("ttl", 8), ("protocol", 8), ("hdr_checksum", 16),
              ("src_addr", 32), ("dst_addr", 32)]),
    ("udp", [("src_port", 16), ("dst_port", 16), ("length", 16), ("checksum", 16)]),
    # msg_type: 0 = contribution (worker -> switch), 1 = result (switch -> worker)
    ("agg", [("msg_type", 4), ("flags", 4), ("job", 8), ("exponent", 8), ("tsi", 32), ("pool_index", 16)]),
]
# prepended to a packet that recirculates for its next pass (multi-pass layouts)
PASS_HEADER = ("recirc", [("index", 8), ("values_op", 8), ("outcome", 8), ("stat", 8), ("mgid", 16),
                          ("port", 16), ("vidx", 32)])
# a streamed layout's pass header also says whether the pass consumes (0) or harvests (1) a chunk
STREAM_PASS_HEADER = (PASS_HEADER[0], PASS_HEADER[1] + [("phase", 8)])
PHASE_CONSUME, PHASE_HARVEST = 0, 1


def wire_headers(protocol: str) -> list[tuple[str, list[tuple[str, int]]]]:
    """The header layout of ``protocol``: its agg header carries the protocol's own fields too."""
    extra = list(protocols.protocol(protocol).agg_fields)
    return [(n, f + extra if n == "agg" else f) for n, f in HEADERS]


def pass_header(mode: str) -> tuple[str, list[tuple[str, int]]]:
    """The internal header of a packet between passes (``mode``: resident or stream)."""
    return STREAM_PASS_HEADER if mode == "stream" else PASS_HEADER


class PacketError(P4genError):
    """A frame cannot be decoded as an aggregation packet."""


class MalformedPacket(PacketError):
    """An aggregation frame is truncated or has an invalid field."""


class ForeignPacket(PacketError):
    """A frame is not an aggregation packet (other ether type, protocol or port)."""


@dataclass(frozen=True)
class Field:
    header: str
    name: str
    bits: int
    bit_offset: int          # from the start of the header, MSB first


@dataclass(frozen=True)
class Header:
    name: str
    offset: int              # byte offset in the frame
    nbytes: int
    fields: tuple[Field, ...]

    def decode(self, buf, offset: int | None = None) -> dict[str, int]:
        o = self.offset if offset is None else offset
        if len(buf) < o + self.nbytes:
            raise MalformedPacket(f"frame of {len(buf)} bytes is too short for header {self.name!r} "
                                  f"(needs {o + self.nbytes})")
        v = int.from_bytes(buf[o:o + self.nbytes], "big")
        total = self.nbytes * 8
        return {f.name: (v >> (total - f.bit_offset - f.bits)) & ((1 << f.bits) - 1) for f in self.fields}

    def encode(self, values: Mapping[str, int]) -> bytes:
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise PacketError(f"header {self.name!r} has no field {sorted(unknown)[0]!r}")
        total = self.nbytes * 8
        v = 0
        for f in self.fields:
            x = int(values.get(f.name, 0))
            if not 0 <= x < (1 << f.bits):
                raise PacketError(f"{self.name}.{f.name}={x} does not fit in {f.bits} bits")
            v |= x << (total - f.bit_offset - f.bits)
        return v.to_bytes(self.nbytes, "big")


@dataclass(frozen=True)
class Slot:
    """Where a fixed-header field sits in the compiled struct's tuple."""

    index: int
    shift: int | None        # None: the field is the whole unit
    mask: int
    raw: bool                # unit is a bytes string (e.g. 48-bit MAC)


class FrameLayout:
    """Byte layout of aggregation frames, computed from a plan's headers."""

    def __init__(self, plan: Any):
        # ``plan`` is a p4gen.plan.Plan, not imported here: the Plan's checks read the header definitions
        # above, so p4gen.plan imports this module
        params = plan.params
        self.params = params
        self.headers: dict[str, Header] = {}
        offset = 0
        data_hdr = None
        for h in plan.headers:
            if h.internal:
                continue
            fields, bit = [], 0
            for f in h.fields:
                fields.append(Field(h.name, f.name, f.bits, bit))
                bit += f.bits
            if bit % 8:
                raise PacketError(f"plan header {h.name!r} is {bit} bits, not whole bytes")
            hdr = Header(h.name, offset, bit // 8, tuple(fields))
            self.headers[h.name] = hdr
            if h.name == "data":
                data_hdr = h
                offset += hdr.nbytes * h.repeat
            else:
                offset += hdr.nbytes
        missing = [n for n in FIXED_HEADERS + ("data",) if n not in self.headers]
        if missing:
            raise PacketError(f"plan headers lack {missing[0]!r}")
        widths = {f.bits for f in data_hdr.fields}
        if len(widths) != 1 or widths.pop() not in (8, 16, 32, 64):
            raise PacketError("plan data header must hold values of one width of 8, 16, 32 or 64 bits")
        self.value_width = data_hdr.fields[0].bits
        self.passes = data_hdr.repeat
        self.elements_per_pass = len(data_hdr.fields)
        self.elements = self.passes * self.elements_per_pass
        self.values_offset = self.headers["data"].offset
        self.frame_len = offset                          # eth .. last data header
        _load_numpy()
        self.value_dtype = np.dtype(f">u{self.value_width // 8}")
        self.native_dtype = np.dtype(f"u{self.value_width // 8}")
        self.udp_port_min = params.udp_port_min
        self.udp_port_max = params.udp_port_max
        # OmniReduce: the data header follows agg only when agg.flags bit 0 is set (else the packet
        # is header-only and carries just agg.next, the worker's next non-zero block offset)
        self.omni = protocols.protocol(plan.protocol).sparse
        agg_fields = {f.name for f in self.headers["agg"].fields}
        if self.omni and not {"flags", "next"} <= agg_fields:
            raise PacketError("an omnireduce plan's agg header must hold 'flags' and 'next'")
        self.data_bytes = self.frame_len - self.values_offset
        self._compile()

    # -- compiled struct over the fixed headers --------------------------
    def __setstate__(self, state: dict[str, Any]) -> None:
        _load_numpy()               # a layout unpickled in a fresh interpreter
        self.__dict__.update(state)

    def _compile(self) -> None:
        fmt, slots, sizes = [">"], {}, []
        pending: list[Field] = []
        acc = 0
        index = 0
        for name in FIXED_HEADERS:
            hdr = self.headers[name]
            if hdr.offset != sum(self.headers[n].nbytes for n in FIXED_HEADERS[:FIXED_HEADERS.index(name)]):
                raise PacketError(f"plan header {name!r} is not where the fixed headers expect it")
            for f in hdr.fields:
                pending.append(f)
                acc += f.bits
                if acc % 8:
                    continue
                code = {8: "B", 16: "H", 32: "I", 64: "Q"}.get(acc)
                raw = code is None
                fmt.append(f"{acc // 8}s" if raw else code)
                sizes.append(acc // 8)
                shift = acc
                for pf in pending:
                    shift -= pf.bits
                    whole = len(pending) == 1
                    slots[f"{pf.header}.{pf.name}"] = Slot(index, None if whole else shift, (1 << pf.bits) - 1, raw)
                index += 1
                pending, acc = [], 0
        if pending:
            raise PacketError("plan fixed headers do not end on a byte boundary")
        self.struct = struct.Struct("".join(fmt))
        self.fixed_len = self.struct.size
        self.slots = slots
        self.unit_sizes = sizes
        ipv4 = self.headers["ipv4"]
        self.ipv4_offset = ipv4.offset
        self.ipv4_len = ipv4.nbytes
        ck = next(f for f in ipv4.fields if f.name == "hdr_checksum")
        self.ipv4_checksum_offset = ipv4.offset + ck.bit_offset // 8

    def slot(self, name: str) -> Slot:
        try:
            return self.slots[name]
        except KeyError:
            raise PacketError(f"no header field {name!r} in the plan") from None

    def get(self, unpacked, name: str):
        s = self.slots[name]
        v = unpacked[s.index]
        if s.raw:
            v = int.from_bytes(v, "big")
            return v if s.shift is None else (v >> s.shift) & s.mask
        return v if s.shift is None else (v >> s.shift) & s.mask

    def getter(self, name: str):
        """f(unpacked_units) -> the value of one field, resolved once."""
        s = self.slot(name)
        i, sh, m, raw = s.index, s.shift, s.mask, s.raw

        def get(u):
            v = u[i]
            if raw:
                v = int.from_bytes(v, "big")
            return v if sh is None else (v >> sh) & m
        return get

    def setter(self, name: str):
        """f(list_of_units, value) that writes one field into an unpacked list."""
        s = self.slot(name)
        i, sh, m = s.index, s.shift, s.mask
        if s.raw:
            n = self.unit_sizes[i]
            if sh is None:
                def set_raw(vals, value):
                    vals[i] = value if isinstance(value, bytes) else int(value).to_bytes(n, "big")
                return set_raw

            def set_raw_sub(vals, value):
                v = int.from_bytes(vals[i], "big")
                v = (v & ~(m << sh)) | ((int(value) & m) << sh)
                vals[i] = v.to_bytes(n, "big")
            return set_raw_sub
        if sh is None:
            def set_whole(vals, value):
                vals[i] = value
            return set_whole
        clear = ~(m << sh)

        def set_sub(vals, value):
            vals[i] = (vals[i] & clear) | ((value & m) << sh)
        return set_sub

    # -- generic decode / encode ------------------------------------------
    def classify(self, frame, result: bool = False) -> None:
        """Raise ForeignPacket / MalformedPacket unless ``frame`` is an aggregation packet.

        A contribution is addressed to a UDP port of the aggregation range; a
        result (``result=True``) comes from one (the switch swaps the ports).
        """
        eth = self.headers["ethernet"]
        e = eth.decode(frame)
        if e["ether_type"] != ETHERTYPE_IPV4:
            raise ForeignPacket(f"ether type 0x{e['ether_type']:04x} is not IPv4")
        ip = self.headers["ipv4"].decode(frame)
        if ip["ihl"] != 5:
            raise ForeignPacket(f"IPv4 ihl={ip['ihl']} (options) is not an aggregation packet")
        if ip["protocol"] != IPPROTO_UDP:
            raise ForeignPacket(f"IP protocol {ip['protocol']} is not UDP")
        udp = self.headers["udp"].decode(frame)
        port = udp["src_port"] if result else udp["dst_port"]
        if not self.udp_port_min <= port <= self.udp_port_max:
            raise ForeignPacket(f"UDP port {port} is outside "
                                f"{self.udp_port_min}..{self.udp_port_max}")
        need = self.frame_len if self.has_data(frame) else self.fixed_len
        if len(frame) < need:
            raise MalformedPacket(f"aggregation frame of {len(frame)} bytes is shorter than {need}")

    def has_data(self, frame) -> bool:
        """Whether the data header follows agg (always for SwitchML; agg.flags bit 0 for OmniReduce)."""
        if not self.omni:
            return True
        agg = self.headers["agg"]
        if len(frame) < agg.offset + agg.nbytes:
            raise MalformedPacket(f"frame of {len(frame)} bytes is too short for header 'agg'")
        return bool(agg.decode(frame)["flags"] & 1)

    def decode(self, frame, result: bool = False) -> tuple[dict[str, dict[str, int]], np.ndarray | None]:
        """Aggregation frame -> ({header: {field: int}}, values as a native uint array).

        The values are None for an OmniReduce header-only packet.
        """
        self.classify(frame, result)
        hdrs = {n: self.headers[n].decode(frame) for n in FIXED_HEADERS}
        return hdrs, (self.values(frame) if self.has_data(frame) else None)

    def values(self, frame) -> np.ndarray:
        if len(frame) < self.frame_len:
            raise MalformedPacket(f"aggregation frame of {len(frame)} bytes is shorter than {self.frame_len}")
        return np.frombuffer(frame, self.value_dtype, self.elements, self.values_offset).astype(self.native_dtype)

    def encode(self, hdrs: Mapping[str, Mapping[str, int]], values, fix: bool = True) -> bytes:
        """({header: {field: int}}, values) -> frame.  ``fix`` fills lengths and checksums.

        ``values=None`` encodes an OmniReduce header-only packet (no data header).
        """
        if values is None:
            if not self.omni:
                raise PacketError("only an omnireduce plan has header-only packets; values are required")
            payload = b""
        else:
            v = np.asarray(values)
            if v.shape != (self.elements,) and v.size != self.elements:
                raise PacketError(f"{v.size} values given; the plan carries {self.elements} per packet")
            if np.issubdtype(v.dtype, np.signedinteger):
                v = v.astype(np.int64) & ((1 << self.value_width) - 1)
            payload = v.reshape(-1).astype(self.value_dtype).tobytes()
        h = {n: dict(hdrs.get(n, {})) for n in FIXED_HEADERS}
        if fix:
            ipl = self.fixed_len + len(payload) - self.ipv4_offset
            h["ipv4"].setdefault("version", 4)
            h["ipv4"].setdefault("ihl", 5)
            h["ipv4"].setdefault("ttl", 64)
            h["ipv4"].setdefault("protocol", IPPROTO_UDP)
            h["ipv4"]["total_len"] = ipl
            h["ipv4"]["hdr_checksum"] = 0
            h["udp"]["length"] = ipl - self.ipv4_len
            h["udp"]["checksum"] = 0
            h["ethernet"].setdefault("ether_type", ETHERTYPE_IPV4)
        head = bytearray(b"".join(self.headers[n].encode(h[n]) for n in FIXED_HEADERS))
        if fix:
            fix_ipv4_checksum(head, self.ipv4_offset, self.ipv4_len, self.ipv4_checksum_offset)
        return bytes(head) + payload


def ipv4_checksum(header: bytes) -> int:
    """Internet checksum of an IPv4 header whose checksum field is zero."""
    n = len(header) // 2
    s = sum(struct.unpack(f">{n}H", header[:2 * n]))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def fix_ipv4_checksum(buf: bytearray, offset: int, length: int, ck_offset: int) -> None:
    buf[ck_offset:ck_offset + 2] = b"\0\0"
    struct.pack_into(">H", buf, ck_offset, ipv4_checksum(bytes(buf[offset:offset + length])))


# -- addresses ---------------------------------------------------------------
def mac(value: str | int | bytes) -> int:
    """'02:00:00:00:00:01' / bytes / int -> 48-bit int."""
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")
    parts = value.split(":")
    if len(parts) != 6:
        raise PacketError(f"MAC address {value!r} must have 6 octets")
    return int("".join(f"{int(p, 16):02x}" for p in parts), 16)


def ip(value: str | int) -> int:
    """'10.0.0.1' / int -> 32-bit int."""
    if isinstance(value, int):
        return value
    parts = value.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        raise PacketError(f"IPv4 address {value!r} is not dotted quad")
    return int.from_bytes(bytes(int(p) for p in parts), "big")
