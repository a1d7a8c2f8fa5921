"""A testbed network: Mininet with p4gen's switch, as a context manager.

    with Network(StarTopo(3, bw=100), switch=SoftSwitch, plan_dir=build_dir) as net:
        net.program(net.job_spec())
        net.mn.pingAll()

The network is ``Mininet(topo, switch=..., controller=None, link=ShapedLink)``
(a ``TCLink`` whose htb class has a fixed quantum, see :mod:`p4gen.testbed.mntopo`)
with every node in its own namespace (see :mod:`p4gen.testbed.nodes`),
static ARP between the hosts and towards the aggregating switch's address
(the data plane answers no ARP), and every link the MTU of the plan's
target (9000 bytes for ``soft`` builds, 1500 for ``bmv2``).  Inside the aggregating switch's node a
kernel bridge forwards ordinary traffic and only aggregation frames reach
the P4 process (:mod:`p4gen.testbed.l2`); the bridge, like the leaves of a
two-level topology, has every host's MAC pinned to its port.  ``topo`` is a Mininet ``DataTopo``
(:mod:`p4gen.testbed.mntopo`) or the topology data it is built from.

Mininet's ``fixLimits`` (machine-wide sysctls such as ``net.core.rmem_max``
raised when a first network starts) is skipped: the testbed changes no
machine-wide setting.  Leaving the ``with`` block, normally, by an
exception or by Ctrl-C, ends every process the network started by its own
handle, then stops Mininet, then ends anything still carrying the
network's mark and this process as owner; the work directory with the
logs is removed too unless the block failed, so a failure's pointer to a
log file stays valid.  The work directory and every process record this
process as the network's owner (:mod:`p4gen.testbed.procs`), so
``p4gen testbed cleanup`` leaves the network alone while it lives.
"""

from __future__ import annotations

import shutil
import time
from functools import partial
from pathlib import Path
from typing import Callable

from . import loss, procs
from .errors import ReadinessError, TestbedError
from .l2 import DEFAULT_MTU, link_mtu
from .program import JobSpec, WorkerSpec, program
from .topo import SWITCH_IP, SWITCH_MAC, Topology


def _silent(_line: str) -> None:
    pass


class Network:
    def __init__(self, topo, switch=None, plan_dir: str | Path | None = None, keep_logs: bool = False,
                 loss: float = 0.0, delay: str | None = None, note: Callable[[str], None] | None = None):
        """``note``: called with one line at each step a person waits on (the network's build, the switch's
        start, each job's workers): the CLI prints them as progress; by default they go nowhere."""
        self.note = note or _silent
        self.kept_logs: Path | None = None      # the work directory a failed network left, with its logs
        self.topo_arg = topo
        self.switch_cls = switch
        self.plan_dir = Path(plan_dir) if plan_dir else None
        self.keep_logs = keep_logs
        self.initial_loss = loss
        self.delay = delay
        self.id = procs.new_id()
        self.workdir: Path | None = None
        self.mn = None
        self.procs: list[procs.Proc] = []
        self.loss_method: str | None = None
        self.loss = 0.0
        self.mtu = DEFAULT_MTU

    @property
    def prefix(self) -> str:
        return self.id

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
        from mininet.net import Mininet

        from .mntopo import DataTopo, ShapedLink
        from .nodes import SoftSwitch, TestbedHost

        procs.require()
        loss.check_delay(self.delay)
        if self.plan_dir is None:
            raise TestbedError("the network needs a build directory (plan_dir=...)")
        link_opts = {"delay": self.delay} if self.delay else None
        mtopo = self.topo_arg if isinstance(self.topo_arg, DataTopo) else DataTopo(self.topo_arg, link_opts)
        self.topo: Topology = mtopo.data
        self.mtopo = mtopo
        self.workdir = procs.make_workdir(self.id, self.topo.name)
        for name in mtopo.nodes():
            mtopo.nodeInfo(name)["net_id"] = self.id
        Mininet.inited = True            # skip Mininet.init()'s fixLimits (machine-wide sysctls)
        switch = partial(self.switch_cls or SoftSwitch, plan=self.plan_dir, workdir=self.workdir)
        t0 = time.monotonic()
        kind = (self.switch_cls or SoftSwitch).label
        self.note(f"building network {self.id}: {len(self.topo.hosts)} hosts, {len(self.topo.links)} links, "
                  f"{kind} switch; logs in {self.workdir}")
        self.mn = Mininet(mtopo, switch=switch, host=TestbedHost, controller=None, link=ShapedLink,
                          autoStaticArp=True, build=False)
        self.mn.build()
        self.mtu = link_mtu(self.agg.plan)
        if self.mtu != DEFAULT_MTU:
            self._set_mtu(self.mtu)
        for h in self.topo.hosts:
            self.mn[h.name].setARP(SWITCH_IP, SWITCH_MAC)
        self.note(f"starting the {kind} switch {self.topo.aggregator.name}")
        self.mn.start()
        self._pin_leaves()
        if self.initial_loss:
            self.set_loss(self.initial_loss)
        self.note(f"network {self.id} up in {time.monotonic() - t0:.1f} s")

    def _set_mtu(self, mtu: int) -> None:
        """Every link end (hosts, leaves, the aggregating switch's front ports) to ``mtu``: the plan's
        target carries frames that large (the switch node's own interfaces follow, see p4gen.testbed.l2)."""
        for link in self.mn.links:
            for intf in (link.intf1, link.intf2):
                out = intf.node.cmd(f"ip link set {intf.name} mtu {mtu} 2>&1; echo rc=$?").strip()
                if not out.endswith("rc=0"):
                    raise TestbedError(f"{intf.node.name}: cannot set the MTU of {intf.name} to {mtu}: "
                                       f"{out.splitlines()[0]}")

    def _pin_leaves(self) -> None:
        t = self.topo
        agg = t.aggregator.name
        ports = t.ports(agg)
        self.mn[agg].pin({h.mac: ports[t.route(agg, h.name)] for h in t.hosts})
        for s in t.switches:
            if s.role == "aggregate":
                continue
            ports = t.ports(s.name)
            uplink = next(ln.a_intf for ln in t.links if ln.a == s.name and ln.b == agg)
            macs = {h.mac: ports[t.route(s.name, h.name)] for h in t.hosts}
            macs[SWITCH_MAC] = uplink
            self.mn[s.name].pin(macs)

    def teardown(self, failed: bool = False) -> None:
        try:
            for p in self.procs:
                try:
                    p.stop(grace=1.0)
                except OSError:
                    pass
        finally:
            try:
                if self.mn is not None:
                    self.mn.stop()
            finally:
                procs.end_own(self.id)
                if self.workdir is not None and not failed and not self.keep_logs:
                    shutil.rmtree(self.workdir, ignore_errors=True)
                elif self.workdir is not None and failed and self.workdir.is_dir():
                    self.kept_logs = self.workdir

    # -- nodes
    @property
    def agg(self):
        return self.mn[self.topo.aggregator.name]

    def host(self, name: str):
        return self.mn[name]

    # -- operations
    def program(self, *specs: JobSpec) -> None:
        """Program the aggregating switch with the jobs ``specs`` (it is restarted with them)."""
        program(self.agg, *specs)

    def wait_forwarding(self, timeout: float = 20.0) -> None:
        """Wait until every host reaches the next one (a ring over the hosts) through the switches.

        On a loaded machine a network that has just been built and programmed could lose its first
        frames; a prompt offered after this check starts on a network seen to forward.
        """
        hosts = self.topo.hosts
        deadline = time.monotonic() + timeout
        for a, b in zip(hosts, hosts[1:] + hosts[:1]):
            while " 1 received" not in self.mn[a.name].cmd(f"ping -c 1 -W 1 -q {b.ip}"):
                if time.monotonic() > deadline:
                    raise ReadinessError(f"{a.name} could not ping {b.name} ({b.ip}) through the switch in "
                                         f"{timeout:g} s; see {self.agg.log}")

    def job_spec(self, hosts: list[str] | None = None, job: int = 0, mgid: int = 1, slot_base: int = 0,
                 slot_count: int = 64, udp_port_base: int = 50000) -> JobSpec:
        """A job of ``hosts`` (default: every host; worker i is the i-th), on the aggregating switch's
        ports towards them."""
        t = self.topo
        sw = t.aggregator.name
        names = hosts or [h.name for h in t.hosts]
        members = [t.host(n) for n in names]
        workers = tuple(WorkerSpec(i, t.route(sw, h.name), h.mac, h.ip, udp_port_base + i)
                        for i, h in enumerate(members))
        every = tuple((h.mac, t.route(sw, h.name)) for h in t.hosts)
        return JobSpec(job, mgid, slot_base, slot_count, workers, every, tuple(t.ports(sw)))

    def spawn(self, host: str, argv: list[str], log_name: str, env: dict[str, str] | None = None,
              pipes: bool = False) -> procs.Proc:
        if self.workdir is None or self.mn is None:
            raise TestbedError("the network is not built")
        p = procs.spawn(self.mn[host], host, argv, self.workdir / log_name, self.id, env=env, pipes=pipes)
        self.procs.append(p)
        return p

    def set_loss(self, p: float) -> str:
        """Random loss ``p`` on every host link, both directions; returns the one line saying how."""
        if not 0 <= p < 1:
            raise TestbedError(f"loss={p} must be in [0, 1)")
        how = self.loss_method or loss.method()
        for h in self.topo.hosts:
            node = self.mn[h.name]
            ln = self.topo.host_link(h.name)
            params = {"bw": ln.mbit, "txo": False, "rxo": False, "delay": self.delay}
            loss.apply(how, node, node.intf(h.intf), p, params)
        self.loss_method, self.loss = how, p
        return loss.describe(how)

    def link_counters(self) -> dict[str, tuple[int, int, int, int, int]]:
        """Host -> (frames the host sent, frames it received, frames its link's far end received and sent,
        bytes the host sent)."""
        out = {}
        for h in self.topo.hosts:
            ln = self.topo.host_link(h.name)
            mine = self.mn[h.name].counters()[h.intf]
            far = self.mn[ln.b].counters()[ln.b_intf]
            out[h.name] = (mine[2], mine[0], far[0], far[2], mine[3])
        return out

    def path_counters(self) -> tuple[int, int, int]:
        """The aggregating switch node's (frames its front ports received, of them steered to the P4
        process, frames the P4 process sent); see :mod:`p4gen.testbed.l2`."""
        return self.agg.l2.counters()

    def host_counters(self) -> dict[str, tuple[int, int]]:
        """Host -> (packets, bytes) its interface sent."""
        out = {}
        for h in self.topo.hosts:
            c = self.mn[h.name].counters()[h.intf]
            out[h.name] = (c[2], c[3])
        return out

    def tcp_retransmissions(self) -> int:
        return sum(procs.snmp(self.mn[h.name].pid, "Tcp", "RetransSegs") for h in self.topo.hosts)
