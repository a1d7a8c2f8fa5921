"""Hostile frames for the switch, each with the counter it must land in.

:func:`junk` makes one frame of a named kind from a seed; :data:`KINDS`
maps each kind to the ``stats`` counter index a switch must count it under
(a set where the protocol allows several outcomes, e.g. a replay).  The
Hypothesis strategies draw kinds and seeds; ``bench/soak.py`` uses
:func:`junk` with its own random stream; :func:`sequence` mixes them with
valid contributions.  Frames of the kinds that do not
come from a registered worker's address (or that are malformed) must never
change a sum on any variant.  Frames made with scapy cover what p4gen's
own encoder cannot: other protocols, IP options, VLAN tags, wrong length
fields.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import WorkerAddr

# kind -> the counters it may land in
KINDS: dict[str, frozenset[str]] = {
    "runt": frozenset({"drop_malformed"}),                 # shorter than an Ethernet header
    "truncated": frozenset({"drop_malformed"}),            # a registered worker's contribution, cut short
    "bad_msg_type": frozenset({"drop_malformed"}),         # a registered worker's frame that is not a contribution
    "unknown_job": frozenset({"drop_unknown"}),            # a job number no job has
    "unregistered": frozenset({"drop_unknown"}),           # an address no worker has
    "wrong_port": frozenset({"drop_unknown"}),             # a registered worker's address on another port
    "other_job": frozenset({"drop_unknown"}),              # another job's worker claiming this job (and back)
    "bad_slot": frozenset({"drop_bad_slot"}),              # a registered worker, slot past its job's range
    "wrong_lengths": frozenset({"drop_unknown"}),          # IP/UDP length fields that lie, unregistered source
    "not_aggregation": frozenset({"l2_flood"}),            # ARP, IPv6, VLAN, TCP, other UDP port, IP options
    "replay": frozenset({"drop_stale", "drop_duplicate", "unicast"}),   # an earlier frame of a worker, again
}
# kinds whose frames carry a registered worker's source: only the hardened variants are safe against replays
FROM_REGISTERED = frozenset({"truncated", "bad_msg_type", "bad_slot", "replay"})
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


@dataclass
class Target:
    """What the generator needs to know of the switch it attacks."""
    layout: W.FrameLayout
    job: int
    workers: list[WorkerAddr]                 # the job's registered workers
    slot_count: int
    other_job: int | None = None
    other_workers: list[WorkerAddr] = field(default_factory=list)
    seen: list[tuple[bytes, int]] = field(default_factory=list)     # frames the switch has processed, for replay

    @property
    def jobs(self) -> set[int]:
        return {self.job} | ({self.other_job} if self.other_job is not None else set())


def _values(t: Target, rng: random.Random) -> np.ndarray:
    L = t.layout
    return np.array([rng.randrange(1 << L.value_width) for _ in range(L.elements)], dtype=np.int64)


def contribution(t: Target, rng: random.Random, w: WorkerAddr | None = None, *, job: int | None = None,
                 slot: int | None = None, copy: int | None = None, tsi: int | None = None,
                 msg_type: int | None = None, src: P.Endpoint | None = None) -> bytes:
    """A well-formed contribution (random fields unless given) from ``w`` (or from ``src``)."""
    L = t.layout
    w = w or rng.choice(t.workers)
    slot_bits = int(L.params.slot_bits)
    slot = rng.randrange(t.slot_count) if slot is None else slot
    copy = rng.randrange(2) if copy is None else copy
    kw = {}
    values = _values(t, rng)
    if L.omni:
        kw["next"] = rng.randrange(1 << 32)
        if rng.random() < 0.3:
            values = None
    return P.contribution_frame(L, src or P.Endpoint(w.mac, w.ip, w.udp_port), SWITCH,
                                job=t.job if job is None else job,
                                tsi=rng.randrange(1 << 32) if tsi is None else tsi,
                                pool_index=slot | (copy << slot_bits), exponent=rng.randrange(256),
                                values=values, msg_type=msg_type, **kw)


def _stranger(t: Target, rng: random.Random) -> P.Endpoint:
    taken = {(w.ip, w.udp_port) for w in t.workers + t.other_workers}
    while True:
        ep = P.Endpoint(0x020000000000 | rng.randrange(1 << 40), rng.randrange(1 << 32), rng.randrange(1, 1 << 16))
        if (ep.ip, ep.port) not in taken:
            return ep


def _ports(t: Target) -> list[int]:
    return sorted({w.port for w in t.workers + t.other_workers})


def _scapy_other(t: Target, rng: random.Random) -> bytes:
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    dst = "02:00:00:%02x:%02x:%02x" % (rng.randrange(256), rng.randrange(256), rng.randrange(256))
    eth = Ether(dst=dst, src="02:00:00:00:99:01")
    payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    agg_port = rng.randrange(t.layout.udp_port_min, t.layout.udp_port_max + 1)
    choice = rng.randrange(6)
    if choice == 0:
        pkt = eth / ARP(pdst="10.0.0.%d" % rng.randrange(256))
    elif choice == 1:
        pkt = eth / IPv6() / UDP(dport=agg_port) / payload
    elif choice == 2:        # (not to an aggregation port: AF_PACKET hands the data plane frames untagged)
        pkt = eth / Dot1Q(vlan=rng.randrange(1, 4095)) / IP() / UDP(dport=53) / payload
    elif choice == 3:
        pkt = eth / IP() / TCP(dport=agg_port) / payload
    elif choice == 4:
        pkt = eth / IP() / UDP(dport=rng.choice([53, 4789, t.layout.udp_port_max + 1])) / payload
    else:
        pkt = eth / IP(options=b"\x01\x01\x01\x00") / UDP(dport=agg_port) / payload    # ihl 6
    return bytes(pkt)


def _scapy_lengths(t: Target, rng: random.Random) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    pkt = Ether(contribution(t, rng, src=_stranger(t, rng)))
    pkt[IP].len = rng.choice([0, 20, 28, 65535, rng.randrange(1 << 16)])
    pkt[UDP].len = rng.choice([0, 8, 65535, rng.randrange(1 << 16)])
    del pkt[IP].chksum
    return bytes(pkt)


def junk(t: Target, kind: str, rng: random.Random) -> tuple[bytes, int, frozenset[str]]:
    """(frame, ingress port, the counters it may land in) of one frame of ``kind``."""
    frame, port, kind = _junk(t, kind, rng)
    return frame, port, KINDS[kind]


def _junk(t: Target, kind: str, rng: random.Random) -> tuple[bytes, int, str]:
    L = t.layout
    w = rng.choice(t.workers)
    if kind == "runt":
        return bytes(rng.randrange(256) for _ in range(rng.randrange(14))), w.port, kind
    if kind == "truncated":
        full = contribution(t, rng, w)
        return full[:rng.randrange(14, len(full) if not L.omni else min(len(full), L.frame_len))], w.port, kind
    if kind == "bad_msg_type":
        return contribution(t, rng, w, msg_type=rng.choice([m for m in range(16)
                                                            if m != L.params.msg_contribution])), w.port, kind
    if kind == "unknown_job":
        return contribution(t, rng, w, job=rng.choice([j for j in range(256) if j not in t.jobs])), w.port, kind
    if kind == "unregistered":
        return contribution(t, rng, src=_stranger(t, rng)), w.port, kind
    if kind == "wrong_port":
        port = rng.choice([p for p in _ports(t) + [max(_ports(t)) + 1] if p != w.port])
        return contribution(t, rng, w), port, kind
    if kind == "other_job":
        if t.other_workers and rng.random() < 0.5:
            o = rng.choice(t.other_workers)
            return contribution(t, rng, o, job=t.job), o.port, kind
        job = t.other_job if t.other_job is not None else (t.job + 1) % 256
        return contribution(t, rng, w, job=job), w.port, kind
    if kind == "bad_slot":
        slot_bits = int(L.params.slot_bits)
        return contribution(t, rng, w, slot=rng.randrange(t.slot_count, 1 << slot_bits)), w.port, kind
    if kind == "wrong_lengths":
        return _scapy_lengths(t, rng), w.port, kind
    if kind == "not_aggregation":
        return _scapy_other(t, rng), rng.choice(_ports(t)), kind
    if kind == "replay":
        if not t.seen:                    # nothing to replay yet: a stranger's frame instead
            return _junk(t, "unregistered", rng)
        return (*rng.choice(t.seen), kind)
    raise KeyError(kind)


def kinds_for(variant: str) -> list[str]:
    """Kinds that must not change a sum on ``variant``: replays only where the chunk index is kept."""
    return [k for k in KINDS if variant != "reference" or k != "replay"]


def sequence(t: Target, items, valid_seed: int) -> list[tuple[bytes, int, str | None]]:
    """(frame, ingress port, kind) in sending order: each hostile item of :func:`junk_strategy` (copies
    times, kind named) and, before each, up to three valid contributions on slots 0 and 1 (kind None)."""
    rng = random.Random(valid_seed)
    frames = []
    for kind, seed, copies in items:
        for _ in range(rng.randrange(4)):
            w = rng.choice(t.workers)
            f = contribution(t, rng, w, slot=rng.randrange(2), tsi=rng.randrange(4) * 2 + rng.randrange(2))
            frames.append((f, w.port, None))
            t.seen.append((f, w.port))
        frame, port, _counters = junk(t, kind, random.Random(seed))
        frames += [(frame, port, kind)] * copies
    return frames


def junk_strategy(kinds: list[str]):
    """(kind, seed, copies): copies > 1 is a flood of the same frame."""
    return st.tuples(st.sampled_from(kinds), st.integers(0, 2 ** 32 - 1),
                     st.sampled_from([1, 1, 1, 1, 2, 50]))


def items(kinds: list[str], max_size: int = 40):
    """1 to ``max_size`` hostile items of :func:`junk_strategy`."""
    return st.lists(junk_strategy(kinds), min_size=1, max_size=max_size)


def sequence_strategy(kinds: list[str]):
    """(items, valid_seed) for :func:`sequence`."""
    return st.tuples(items(kinds), st.integers(0, 2 ** 16))


# (workers, chunks, window, seed) of a real job beside the hostile frames
JOB_SHAPE = st.tuples(st.integers(2, 4), st.integers(1, 8), st.integers(1, 3), st.integers(0, 2 ** 16))


def on_the_wire(kinds: list[str]) -> list[str]:
    """``kinds`` without runts: a NIC (a veth too) refuses to send a frame shorter than an Ethernet header."""
    return [k for k in kinds if k != "runt"]
