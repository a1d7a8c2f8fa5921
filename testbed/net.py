"""Build a running network from a :class:`~p4gen.testbed.topo.Topology`.

    with Network(star(3, mbit=100), switch=SoftSwitch, plan_dir=plan) as net:
        net.program(spec)
        ...

Hosts and switches are network namespaces ``p4g<id>-<node>``; links are
veth pairs created inside them, shaped with htb in both directions
(TCLink-style).  Leaving the ``with`` block (normally, by an exception or
by Ctrl-C) stops every process the network started and deletes its
namespaces; the work directory with the logs is removed too unless the
block failed, so a failure's pointer to a log file stays valid.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from . import netns
from .errors import TestbedError
from .nodes import AggSwitch, L2Forwarder, Node, SoftSwitch
from .program import JobSpec, program
from .topo import SWITCH_IP, SWITCH_MAC, Topology


class Network:
    def __init__(self, topo: Topology, switch: type[AggSwitch] = SoftSwitch, plan_dir: str | Path | None = None,
                 keep_logs: bool = False):
        self.topo = topo
        self.switch_cls = switch
        self.plan_dir = Path(plan_dir) if plan_dir else None
        self.keep_logs = keep_logs
        self.prefix = f"{netns.PREFIX}{os.urandom(2).hex()}"
        self.workdir: Path | None = None
        self.nodes: dict[str, Node] = {}
        self.procs: list[netns.Proc] = []
        self._made: list[str] = []

    # -- names
    def ns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def agg(self) -> AggSwitch:
        node = self.nodes[self.topo.aggregator.name]
        assert isinstance(node, AggSwitch)
        return node

    # -- lifecycle
    def __enter__(self) -> "Network":
        try:
            self.build()
        except BaseException:
            self.teardown(failed=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.teardown(failed=exc_type is not None)

    def build(self) -> None:
        netns.require()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-", dir="/tmp"))
        t = self.topo
        for name in [h.name for h in t.hosts] + [s.name for s in t.switches]:
            netns.add_namespace(self.ns(name))
            self._made.append(self.ns(name))
        for ln in t.links:
            netns.veth(self.ns(ln.a), ln.a_intf, self.ns(ln.b), ln.b_intf)
            netns.shape(self.ns(ln.a), ln.a_intf, ln.mbit)
            netns.shape(self.ns(ln.b), ln.b_intf, ln.mbit)
        for h in t.hosts:
            ns = self.ns(h.name)
            netns.sh(["ip", "link", "set", h.intf, "address", h.mac], ns=ns)
            netns.sh(["ip", "addr", "add", f"{h.ip}/24", "dev", h.intf], ns=ns)
            # The data plane answers no ARP: every neighbour is static.
            netns.sh(["ip", "neigh", "replace", SWITCH_IP, "lladdr", SWITCH_MAC, "dev", h.intf, "nud", "permanent"],
                     ns=ns)
            for o in t.hosts:
                if o is not h:
                    netns.sh(["ip", "neigh", "replace", o.ip, "lladdr", o.mac, "dev", h.intf, "nud", "permanent"],
                             ns=ns)
        for s in t.switches:
            ports = t.ports(s.name)
            if s.role == "aggregate":
                node: Node = self.switch_cls(s.name, self.ns(s.name), ports, self.workdir, plan_dir=self.plan_dir)
            else:
                routes = {h.mac: t.route(s.name, h.name) for h in t.hosts}
                node = L2Forwarder(s.name, self.ns(s.name), ports, self.workdir, routes=routes)
                node.start()
            self.nodes[s.name] = node

    def teardown(self, failed: bool = False) -> None:
        for p in self.procs:
            try:
                p.stop(grace=1.0)
            except OSError:
                pass
        for node in self.nodes.values():
            try:
                node.stop()
            except OSError:
                pass
        for ns in self._made:
            netns.delete_namespace(ns)
        self._made.clear()
        if self.workdir is not None and not failed and not self.keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- operations
    def program(self, spec: JobSpec) -> None:
        """Program the aggregating switch with ``spec`` and make sure it runs."""
        program(self.agg, spec)
        if not self.agg.alive():
            self.agg.start()

    def job_spec(self, udp_port_base: int = 50000, job: int = 0, mgid: int = 1, slot_count: int = 64) -> JobSpec:
        """Every host is worker i-1 (host hi), on the aggregating switch's port towards it."""
        from .program import WorkerSpec

        t = self.topo
        sw = t.aggregator.name
        workers = tuple(WorkerSpec(i, t.route(sw, h.name), h.mac, h.ip, udp_port_base + i)
                        for i, h in enumerate(t.hosts))
        hosts = tuple((h.mac, t.route(sw, h.name)) for h in t.hosts)
        return JobSpec(job, mgid, 0, slot_count, workers, hosts, tuple(t.ports(sw)))

    def spawn(self, host: str, argv: list[str], log_name: str, env: dict[str, str] | None = None,
              pipes: bool = False) -> netns.Proc:
        if self.workdir is None:
            raise TestbedError("the network is not built")
        p = netns.spawn(host, self.ns(host), argv, self.workdir / log_name, env=env, pipes=pipes)
        self.procs.append(p)
        return p

    def set_loss(self, p: float) -> None:
        """Random loss ``p`` on every host link, in both directions (iptables in the host namespaces)."""
        if not 0 <= p < 1:
            raise TestbedError(f"loss={p} must be in [0, 1)")
        for h in self.topo.hosts:
            netns.set_loss(self.ns(h.name), h.intf, p)

    def host_counters(self) -> dict[str, tuple[int, int]]:
        return {h.name: netns.tx_packets(self.ns(h.name), h.intf) for h in self.topo.hosts}

    def tcp_retransmissions(self) -> int:
        total = 0
        for h in self.topo.hosts:
            out = netns.sh(["cat", "/proc/net/snmp"], ns=self.ns(h.name), check=False).splitlines()
            tcp = [ln.split() for ln in out if ln.startswith("Tcp:")]
            if len(tcp) == 2 and "RetransSegs" in tcp[0]:
                total += int(tcp[1][tcp[0].index("RetransSegs")])
        return total
