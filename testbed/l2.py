"""The aggregating switch node's two pipelines: a kernel bridge for ordinary traffic, the P4 switch for
aggregation.

A real aggregating switch forwards ordinary traffic in its L2 pipeline at
line rate while the P4 program adds gradients; a testbed whose every frame
had to pass a Python data plane would make any baseline that shares the
links (Gloo's TCP ring, the rendezvous, ping) wait on that process.  So
inside the switch node's namespace, on each front port ``s1-ethN`` (the end
of the port's shaped Mininet link):

* ``s1-ethN`` is a port of the kernel bridge ``s1-br`` (a Linux bridge,
  as Mininet's ``LinuxBridge`` builds; STP off, hosts' MACs pinned to their
  ports), which forwards every frame that is not aggregation traffic;
* a ``tc`` ingress filter (``u32``: IPv4, UDP, destination port in the
  plan's ``udp_port_min .. udp_port_max``) redirects aggregation frames,
  before the bridge sees them, to the veth ``s1-stN``, whose peer
  ``s1-p4N`` is switch port N of the P4 process (software data plane or
  BMv2), so the P4 process never sees ordinary frames;
* what the P4 process sends on ``s1-p4N`` arrives on ``s1-stN`` and is
  redirected to the egress of ``s1-ethN``, through the link's shaping, so
  both pipelines share the port's one link;
* the veths take the MTU of the plan's target, as the links do (the bridge
  takes its ports').

Which path each protocol took is counted, not assumed: :meth:`KernelL2.
counters` gives the frames the front ports received, those steered to the
P4 process and those the P4 process sent.
"""

from __future__ import annotations

from .errors import TestbedError

ETHERTYPE_IPV4 = 0x0800
IPPROTO_UDP = 17
DEFAULT_MTU = 1500


def link_mtu(plan) -> int:
    """The MTU of the links of a network built for ``plan``: its target's (``mtu_bytes``)."""
    return plan.target.mtu_bytes


def port_masks(lo: int, hi: int) -> list[tuple[int, int]]:
    """(value, mask) pairs whose matches are exactly the ports ``lo .. hi`` (u32 matches a value under a
    mask, not a range): the range cut into aligned power-of-two blocks."""
    if not 0 <= lo <= hi <= 0xFFFF:
        raise TestbedError(f"UDP port range {lo}..{hi} is not within 0..65535")
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << 16
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, 0xFFFF & ~(size - 1)))
        lo += size
    return out


class KernelL2:
    """The kernel bridge and the steering of aggregation frames in ``node``'s namespace (see the module)."""

    def __init__(self, node):
        self.node = node
        self.bridge = f"{node.name}-br"
        self.front: dict[int, str] = {}

    def pipe_intf(self, port: int) -> str:
        """The interface of switch port ``port`` that the P4 process uses."""
        return f"{self.node.name}-p4{port}"

    def steer_intf(self, port: int) -> str:
        return f"{self.node.name}-st{port}"

    def _run(self, cmd: str) -> None:
        out = self.node.cmd(f"{cmd} 2>&1; echo rc=$?").strip()
        if not out.endswith("rc=0"):
            first = out.rsplit("rc=", 1)[0].strip().splitlines()
            raise TestbedError(f"{self.node.name}: {cmd!r} failed: {first[0] if first else out}")

    def build(self, front: dict[int, str], plan) -> None:
        """Bridge ``front`` (port -> interface) and steer aggregation frames (``plan``'s UDP ports) to the
        P4 process's interfaces."""
        self.front = dict(front)
        lo, hi = plan.params.udp_port_min, plan.params.udp_port_max
        mtu = link_mtu(plan)
        br = self.bridge
        self._run(f"ip link add {br} type bridge stp_state 0 forward_delay 0")
        self._run(f"ip link set {br} up")
        for port, dev in sorted(self.front.items()):
            pipe, steer = self.pipe_intf(port), self.steer_intf(port)
            self._run(f"ip link set {dev} master {br}")
            self._run(f"ip link add {pipe} type veth peer name {steer}")
            for d in (pipe, steer):
                # frames from a packet socket carry their own checksums; none may be left to offload
                self._run(f"ethtool -K {d} tx off rx off")
                if mtu != DEFAULT_MTU:
                    self._run(f"ip link set {d} mtu {mtu}")
                self._run(f"ip link set {d} up")
            self._run(f"tc qdisc add dev {dev} handle ffff: ingress")
            for value, mask in port_masks(lo, hi):
                self._run(f"tc filter add dev {dev} parent ffff: protocol ip prio 1 u32 "
                          f"match ip protocol {IPPROTO_UDP} 0xff match ip dport {value} {mask:#06x} "
                          f"action mirred egress redirect dev {steer}")
            self._run(f"tc qdisc add dev {steer} handle ffff: ingress")
            self._run(f"tc filter add dev {steer} parent ffff: protocol all prio 1 u32 match u32 0 0 "
                      f"action mirred egress redirect dev {dev}")

    def pin(self, macs: dict[str, str]) -> None:
        """Static bridge entries (MAC -> front interface): frames to a known host are never flooded."""
        for mac, dev in macs.items():
            self._run(f"bridge fdb replace {mac} dev {dev} master static")

    def counters(self) -> tuple[int, int, int]:
        """(frames the front ports received, of them steered to the P4 process, frames the P4 process
        sent), summed over the ports."""
        c = self.node.counters()
        front = sum(c[d][0] for d in self.front.values() if d in c)
        to_p4 = sum(c[self.pipe_intf(p)][0] for p in self.front if self.pipe_intf(p) in c)
        from_p4 = sum(c[self.pipe_intf(p)][2] for p in self.front if self.pipe_intf(p) in c)
        return front, to_p4, from_p4

    def describe(self) -> str:
        return (f"ordinary frames: kernel bridge {self.bridge}; aggregation frames (IPv4 UDP to the plan's ports): "
                f"tc u32 on each front port to the P4 process's {self.pipe_intf(0)[:-1]}N")
