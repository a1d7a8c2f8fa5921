"""Topologies as data: which hosts, switches and links exist, with their addresses.

Nothing here touches the system.  :mod:`p4gen.testbed.net` builds a running
network from a :class:`Topology`; the switch node class is chosen there.

Addressing.  Every host sits in one IPv4 subnet ``10.0.0.0/24`` (host i is
``10.0.0.i``, MAC ``02:00:00:00:00:i``).  The aggregating switch answers to
``10.0.0.254`` / ``02:00:00:00:00:fe``: workers address their contributions
there (a static neighbour entry on each host, since the data plane answers
no ARP).  Switch port numbers start at 1, in link order.

Two-level topology.  Racks of hosts hang off leaf switches, the leaves off
one spine.  Only the spine aggregates: a leaf forwards frames by destination
MAC (an L2 learning-free forwarder with a static table) and never looks at
the aggregation header, so every contribution reaches the spine unchanged
and every result the spine multicasts (one replica per worker, on the port
of the worker's rack) is delivered by the leaf to that worker.  The uplink
of a leaf is as fast as all its host links together (non-blocking) unless
``uplink_mbit`` says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TestbedError

SWITCH_IP = "10.0.0.254"
SWITCH_MAC = "02:00:00:00:00:fe"


@dataclass(frozen=True)
class Host:
    name: str             # "h1"
    ip: str
    mac: str

    @property
    def intf(self) -> str:
        return f"{self.name}-eth0"


@dataclass(frozen=True)
class Switch:
    name: str             # "s1"
    role: str             # "aggregate" (runs the plan) or "forward" (L2 only)


@dataclass(frozen=True)
class Link:
    """A bidirectional link; each end is shaped to ``mbit`` in its egress direction."""

    a: str                # node name
    b: str
    a_intf: str
    b_intf: str
    mbit: float
    a_port: int = 0       # switch port number of end a (0: a host end)
    b_port: int = 0


@dataclass
class Topology:
    name: str
    hosts: list[Host] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    @property
    def aggregator(self) -> Switch:
        return next(s for s in self.switches if s.role == "aggregate")

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def ports(self, switch: str) -> dict[int, str]:
        """Switch port number -> interface name."""
        out = {}
        for ln in self.links:
            if ln.a == switch:
                out[ln.a_port] = ln.a_intf
            if ln.b == switch:
                out[ln.b_port] = ln.b_intf
        return dict(sorted(out.items()))

    def host_link(self, host: str) -> Link:
        return next(ln for ln in self.links if ln.a == host)

    def route(self, switch: str, host: str) -> int:
        """The port of ``switch`` that leads towards ``host``."""
        ln = self.host_link(host)
        if ln.b == switch:
            return ln.b_port
        for up in self.links:                       # the host's leaf -> this switch (the spine)
            if up.a == ln.b and up.b == switch:
                return up.b_port
        for up in self.links:                       # this switch is another leaf: its uplink
            if up.a == switch and up.a_port and up.b_port:
                return up.a_port
        raise KeyError(f"no route from {switch} to {host}")


def _check(name: str, value, lo, hi=None) -> None:
    if value < lo or (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise TestbedError(f"{name}={value} must be {rng}")


def _host(i: int) -> Host:
    return Host(f"h{i}", f"10.0.0.{i}", f"02:00:00:00:00:{i:02x}")


def star(n: int, mbit: float = 100.0) -> Topology:
    """``n`` hosts around one aggregating switch ``s1`` (host i on port i)."""
    _check("workers", n, 1, 250)
    _check("bw (Mbit/s)", mbit, 0.1)
    topo = Topology(f"star{n}", switches=[Switch("s1", "aggregate")])
    for i in range(1, n + 1):
        h = _host(i)
        topo.hosts.append(h)
        topo.links.append(Link(h.name, "s1", h.intf, f"s1-eth{i}", mbit, 0, i))
    return topo


def two_level(racks: int, per_rack: int, mbit: float = 100.0, uplink_mbit: float | None = None) -> Topology:
    """``racks`` leaves (``l1``..) of ``per_rack`` hosts each under one spine ``s1``.

    Host ports of leaf r are 1..per_rack; its uplink is port per_rack + 1 and
    lands on spine port r.
    """
    _check("racks", racks, 1, 32)
    _check("hosts per rack", per_rack, 1, 64)
    _check("bw (Mbit/s)", mbit, 0.1)
    if racks * per_rack > 250:
        raise TestbedError(f"racks x per_rack = {racks * per_rack} hosts; at most 250 fit the /24")
    up = uplink_mbit if uplink_mbit is not None else mbit * per_rack
    topo = Topology(f"two-level{racks}x{per_rack}", switches=[Switch("s1", "aggregate")])
    i = 0
    for r in range(1, racks + 1):
        leaf = f"l{r}"
        topo.switches.append(Switch(leaf, "forward"))
        for k in range(1, per_rack + 1):
            i += 1
            h = _host(i)
            topo.hosts.append(h)
            topo.links.append(Link(h.name, leaf, h.intf, f"{leaf}-eth{k}", mbit, 0, k))
        topo.links.append(Link(leaf, "s1", f"{leaf}-eth{per_rack + 1}", f"s1-eth{r}", up, per_rack + 1, r))
    return topo


def two_level_for(n: int, mbit: float = 100.0) -> Topology:
    """A two-level topology of ``n`` hosts in two racks of ``n // 2``."""
    _check("workers", n, 2, 250)
    if n % 2:
        raise TestbedError(f"workers={n}: the two-level topology needs an even number of hosts (2 racks)")
    return two_level(2, n // 2, mbit)
