"""Mininet topologies built from the topology data of :mod:`p4gen.testbed.topo`.

    StarTopo(3, bw=100)                # h1..h3 around s1
    TwoLevelTopo(2, 2, bw=100)         # leaves l1, l2 (two hosts each) under the spine s1

Hosts get the addresses of the data (``10.0.0.i/24``, ``02:00:00:00:00:i``);
links carry their rate (``bw`` in Mbit/s) and checksum offload off on both
ends (``txo=False, rxo=False``: a switch that forwards whole frames from a
packet socket would pass on frames whose checksum was never filled in).
The leaves of a two-level topology are :class:`~p4gen.testbed.nodes.Leaf`
bridges; the aggregating switch is the class given to ``Mininet(switch=...)``.
"""

from __future__ import annotations

from mininet.link import TCIntf, TCLink
from mininet.topo import Topo

from .topo import Topology, star, two_level


class ShapedIntf(TCIntf):
    """TCIntf whose htb class has a fixed quantum: above about 16 Mbit/s the default one (rate / r2q)
    exceeds 200000 bytes and tc prints a warning for every link end.  One class per interface, so the
    quantum changes nothing else."""

    def bwCmds(self, *args, **kwargs):                 # noqa: N802 (Mininet's name)
        cmds, parent = super().bwCmds(*args, **kwargs)
        return [c + " quantum 60000" if " htb rate " in c else c for c in cmds], parent


class ShapedLink(TCLink):
    """TCLink with :class:`ShapedIntf` on both ends."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", ShapedIntf)
        kwargs.setdefault("cls2", ShapedIntf)
        super().__init__(*args, **kwargs)


class DataTopo(Topo):
    """A Mininet ``Topo`` of a :class:`~p4gen.testbed.topo.Topology`; ``self.data`` keeps the data."""

    def build(self, data: Topology, link_opts: dict | None = None):
        from .nodes import Leaf

        self.data = data
        extra = dict(link_opts or {})
        for h in data.hosts:
            self.addHost(h.name, ip=f"{h.ip}/24", mac=h.mac)
        for s in data.switches:
            if s.role == "aggregate":
                self.addSwitch(s.name)
            else:
                self.addSwitch(s.name, cls=Leaf)
        for ln in data.links:
            self.addLink(ln.a, ln.b, port1=ln.a_port, port2=ln.b_port, intfName1=ln.a_intf, intfName2=ln.b_intf,
                         bw=ln.mbit, txo=False, rxo=False, **extra)


class StarTopo(DataTopo):
    """``n`` hosts around one aggregating switch ``s1`` (host i on port i)."""

    def build(self, n: int, bw: float = 100.0, link_opts: dict | None = None):
        super().build(star(n, bw), link_opts)


class TwoLevelTopo(DataTopo):
    """``racks`` leaves of ``per_rack`` hosts under the aggregating spine ``s1``."""

    def build(self, racks: int, per_rack: int, bw: float = 100.0, uplink_bw: float | None = None,
              link_opts: dict | None = None):
        super().build(two_level(racks, per_rack, bw, uplink_bw), link_opts)
