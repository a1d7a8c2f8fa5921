"""Integers and addresses <-> P4Runtime bytestrings.

Values are written in the canonical form of P4Runtime 1.4 (big-endian,
no leading zero bytes, at least one byte) and read in any width that
holds the value.
"""

from __future__ import annotations

import ipaddress
import re

_MAC = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}")    # fullmatch: "$" would let a final newline in


def encode(value: int, bits: int) -> bytes:
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{value} does not fit in {bits} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes, bits: int) -> int:
    """Bytes -> int; raises ValueError if the value does not fit in ``bits``."""
    value = int.from_bytes(data, "big")
    if value >> bits:
        raise ValueError(f"0x{data.hex()} does not fit in {bits} bits")
    return value


def parse_mac(text: str) -> int:
    """'02:00:00:00:00:01' -> int; ValueError unless six colon-separated hex octets."""
    if not isinstance(text, str) or not _MAC.fullmatch(text):
        raise ValueError(text)
    return int(text.replace(":", ""), 16)


def parse_ipv4(text: str) -> int:
    if not isinstance(text, str) or not text.isascii() or text != text.strip():
        raise ValueError(text)
    try:
        return int(ipaddress.IPv4Address(text))
    except ipaddress.AddressValueError:
        raise ValueError(text) from None


def format_mac(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def format_ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))
