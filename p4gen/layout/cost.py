"""The cost model: how long a layout takes to all-reduce a tensor on a target.

Every constant is the target profile's (``p4gen/target/*.toml``), the workload's, or
named here with its source; docs/layout.md states the model and its limits.

A job of ``n`` workers all-reduces ``N`` elements in chunks of ``E`` (one packet each),
``C = ceil(N / E)`` chunks per worker, with a window of ``W`` slots in flight per worker.
The switch returns a chunk's result once the last worker's packet has passed.  Chunks
complete at the rate ``r``, the smallest of these bounds:

* link: each worker's link carries one contribution up and one result down per chunk,
  ``frame + framing`` bytes each (headers are the per-packet overhead);
* window: ``W`` chunks per cycle, the cycle being the RTT plus both frames' serialization
  plus the extra passes' latency and recirculation serialization;
* recirculation: every extra pass in the home pipe crosses its recirculation port
  (``recirc_gbps``); with folded pipes the passes cross loopback ports at line rate and
  only harvest passes use a pipe's recirculation port;
* pipe: every pass through the home pipe's ingress counts against its share of the
  switch's aggregate rate;
* switch packet rate (software switches): every pass and every result copy is one packet.

``T = t_cycle + (C - 1) / r``: the first result after one cycle, then one per ``1/r``.
OmniReduce (sparse): a round per block that some worker holds plus a discovery round per
stream; uplinks carry full frames for a worker's own blocks and header-only frames for
the others (docs/layout.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import protocols
from ..errors import SpecError
from ..wire import pass_header, wire_headers
from ..target import TargetProfile

# IEEE 802.3: preamble and start delimiter (8 bytes), frame check sequence (4), inter-frame gap (12)
ETHERNET_FRAMING_BYTES = 24
# IEEE 802.3: the smallest frame is 64 bytes with its FCS, 60 without
MIN_FRAME_BYTES = 60
# the ranges a workload is checked against (far beyond any real one; they keep the arithmetic finite)
MAX_WORKERS = 256                 # p4gen.spec: the most workers of one job
MAX_LINK_GBPS = 100000.0          # 100 Tb/s
MAX_RTT_US = 1e9                  # 1000 s
MAX_ELEMENTS = 1 << 48
MAX_FRAMING_BYTES = 65535
MAX_PORTS_PER_PIPE = 512          # 9-bit ports


@dataclass(frozen=True)
class Workload:
    """One job: its workers, links, RTT and tensor."""

    workers: int
    link_gbps: float
    rtt_us: float
    elements: int                     # tensor size, in elements
    density: float = 1.0              # OmniReduce: fraction of a worker's blocks that are non-zero
    framing_bytes: int = ETHERNET_FRAMING_BYTES
    # a frame takes frame/rate to cross a physical link; a rate-shaped emulated link (htb) lets a
    # lone frame through at once and only holds the average rate
    serialization: bool = True
    ports_per_pipe: int | None = None     # worker ports of one pipe; None: the profile's share of its rate

    def __post_init__(self) -> None:
        """Every field checked by type and range (a bool is no number here), so a job document or a
        command line with anything else is one SpecError line, never a traceback later."""
        def real(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        def whole(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        pp = self.ports_per_pipe
        checks = [("workers", whole(self.workers) and 2 <= self.workers <= MAX_WORKERS, f"an integer in 2..{MAX_WORKERS}"),
                  ("link_gbps", real(self.link_gbps) and 0 < self.link_gbps <= MAX_LINK_GBPS,
                   f"a number in (0, {MAX_LINK_GBPS:g}]"),
                  ("rtt_us", real(self.rtt_us) and 0 <= self.rtt_us <= MAX_RTT_US, f"a number in [0, {MAX_RTT_US:g}]"),
                  ("size", whole(self.elements) and 1 <= self.elements <= MAX_ELEMENTS,
                   f"1..{MAX_ELEMENTS} elements (2^48)"),
                  ("density", real(self.density) and 0 < self.density <= 1, "a number in (0, 1]"),
                  ("framing_bytes", whole(self.framing_bytes) and 0 <= self.framing_bytes <= MAX_FRAMING_BYTES,
                   f"an integer in 0..{MAX_FRAMING_BYTES}"),
                  ("ports_per_pipe", pp is None or (whole(pp) and 1 <= pp <= MAX_PORTS_PER_PIPE),
                   f"an integer in 1..{MAX_PORTS_PER_PIPE}")]
        for name, ok, what in checks:
            if not ok:
                raise SpecError(f"{name}={getattr(self, name if name != 'size' else 'elements')!r} must be {what}")

    def to_dict(self) -> dict[str, Any]:
        return {"workers": self.workers, "link_gbps": self.link_gbps, "rtt_us": self.rtt_us,
                "elements": self.elements, "density": self.density, "framing_bytes": self.framing_bytes,
                "serialization": self.serialization, "ports_per_pipe": self.ports_per_pipe}


@dataclass(frozen=True)
class Geometry:
    """What the cost model needs of a layout: packet size, passes and where they run, window."""

    protocol: str
    elements: int          # per packet
    passes: int
    mode: str              # "resident" | "stream" (p4gen.pass_shape)
    pipes: int             # 1: recirculation in the home pipe; = passes: folded
    value_width: int
    slots: int             # the job's window (slots in flight per worker)
    harvest_lanes: int = 0  # SwitchML's own layouts: values a harvest pass reads back (0: p4gen's, a whole pass)
    label: str = ""


@dataclass
class Prediction:
    time_s: float
    chunks: int
    rounds: int                       # chunks (dense) or aggregation rounds (sparse)
    rate: float                       # rounds per second
    bound: str                        # the bound that sets ``rate``
    rates: dict[str, float]           # rounds per second allowed by each bound
    cycle_us: float
    frame_bytes: int                  # a full frame without framing
    wire_efficiency: float            # payload / wire bytes of a full frame
    passes_per_result: int            # pipeline passes of the packet that returns a result
    window_saturates_at: int          # the smallest window that reaches the other bounds
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"time_s": self.time_s, "chunks": self.chunks, "rounds": self.rounds, "rate": self.rate,
                "bound": self.bound, "rates": self.rates, "cycle_us": self.cycle_us, "frame_bytes": self.frame_bytes,
                "wire_efficiency": self.wire_efficiency, "passes_per_result": self.passes_per_result,
                "window_saturates_at": self.window_saturates_at}


def header_bytes(protocol: str) -> int:
    """Ethernet, IPv4, UDP and aggregation header bytes of p4gen's packet."""
    return sum(b for _, fields in wire_headers(protocol) for _, b in fields) // 8


def pass_header_bytes(mode: str) -> int:
    return sum(b for _, b in pass_header(mode)[1]) // 8


def ports_per_pipe(profile: TargetProfile, wl: Workload) -> int | None:
    """Worker ports one pipe offers at the workload's link rate (its share of the aggregate rate), or None."""
    if wl.ports_per_pipe is not None:
        return wl.ports_per_pipe
    if profile.aggregate_rate_gbps is None or profile.port_gbps is None:
        return None
    return int(profile.aggregate_rate_gbps / profile.pipes // wl.link_gbps)


def workload_problem(profile: TargetProfile, wl: Workload) -> str | None:
    """Why ``wl`` cannot run on ``profile`` whatever the layout, or None."""
    if profile.port_gbps is not None and wl.link_gbps > profile.port_gbps:
        return f"link_gbps={wl.link_gbps:g} exceeds {profile.name}'s fastest port ({profile.port_gbps:g} Gb/s)"
    ports = ports_per_pipe(profile, wl)
    if ports is not None and wl.workers > ports:
        return (f"workers={wl.workers} need {wl.workers} ports in one pipe (a job's registers live in one pipe); "
                f"{profile.name} has {ports} ports of {wl.link_gbps:g} Gb/s per pipe")
    return None


def _passes(geo: Geometry, hdr: int, rh: int) -> tuple[list[int], list[int]]:
    """Bytes of each extra pass of a contribution (consume) and of a result packet (harvest)."""
    vb = geo.value_width // 8
    per = geo.elements // geo.passes
    if geo.mode == "resident":
        return [hdr + rh + geo.elements * vb] * (geo.passes - 1), []
    consume = [hdr + rh + (geo.passes - k) * per * vb for k in range(1, geo.passes)]
    # a harvest pass reads one chunk back (SwitchML's own: one lane of every pair), so the packet grows
    step = geo.harvest_lanes or per
    return consume, [hdr + rh + k * step * vb for k in range(1, geo.elements // step)]


def predict(profile: TargetProfile, wl: Workload, geo: Geometry) -> Prediction:
    n, R = wl.workers, wl.link_gbps * 1e9
    hdr = header_bytes(geo.protocol)
    payload = geo.elements * geo.value_width // 8
    frame = max(MIN_FRAME_BYTES, hdr + payload)
    hdr_frame = max(MIN_FRAME_BYTES, hdr)
    wire = frame + wl.framing_bytes
    chunks = -(-wl.elements // geo.elements)
    rh = pass_header_bytes(geo.mode) if geo.passes > 1 or geo.harvest_lanes else 0
    consume, harvest = _passes(geo, hdr, rh)

    # per round: bits on the busiest link direction, and a round's count of rounds
    if protocols.protocol(geo.protocol).sparse:
        union = 1 - (1 - wl.density) ** n
        rounds = math.ceil(union * chunks - 1e-9) + min(geo.slots, chunks)
        own = wl.density * chunks
        up = own * wire + max(0.0, rounds - own) * (hdr_frame + wl.framing_bytes)
        down = rounds * wire
        link_bits_per_round = 8 * max(up, down) / rounds
    else:
        rounds = chunks
        link_bits_per_round = 8 * wire
    rates: dict[str, float] = {"link": R / link_bits_per_round}

    recirc = (profile.recirc_gbps or 0) * 1e9
    pass_ns = profile.pass_latency_ns or 0.0
    if geo.pipes == 1:
        # every extra pass crosses the recirculation port of the pipe the passes run in
        shared = n * sum(consume) + sum(harvest)
        if shared:
            rates["recirculation"] = recirc / (8 * shared) if recirc else 0.0
        critical_serial = sum(consume + harvest) * 8 / recirc if recirc else 0.0
    else:
        # folded: consume passes cross loopback ports at the worker's own line rate; harvest
        # passes (read-only, the result packet only) cross each pipe's recirculation port
        if harvest:
            rates["recirculation"] = recirc / (8 * max(harvest)) if recirc else 0.0
        critical_serial = (sum(consume) * 8 / R) + (sum(harvest) * 8 / recirc if recirc else 0.0)
    if profile.aggregate_rate_gbps and profile.port_gbps is not None:
        pipe_bits = profile.aggregate_rate_gbps * 1e9 / profile.pipes
        # the home pipe's ingress: every contribution, and with recirculation every extra pass
        home = n * frame + (n * sum(consume) + sum(harvest) if geo.pipes == 1 else 0)
        rates["pipe"] = pipe_bits / (8 * home)
    if profile.packet_rate_kpps:
        # every pass of every contribution, every harvest pass and every result copy
        rates["switch"] = profile.packet_rate_kpps * 1e3 / (n * geo.passes + len(harvest) + n)

    passes_per_result = geo.passes + len(harvest)
    serial = 2 * wire * 8 / R if wl.serialization else 0.0
    cycle = wl.rtt_us * 1e-6 + serial + (passes_per_result - 1) * pass_ns * 1e-9 + critical_serial
    others = min(rates.values())
    rates["window"] = geo.slots / cycle
    bound = min(rates, key=lambda k: (rates[k], k != "window"))
    rate = rates[bound]
    if rate <= 0:
        raise SpecError(f"{profile.name} has no rate for the {bound} bound of this layout")
    time_s = cycle + (rounds - 1) / rate
    saturate = max(1, math.ceil(others * cycle - 1e-9))
    return Prediction(time_s, chunks, rounds, rate, bound, rates, cycle * 1e6, frame, payload / wire,
                      passes_per_result, saturate)
