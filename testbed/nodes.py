"""p4gen's switches as Mininet nodes (the P4Switch pattern of the p4lang tutorials).

    net = Mininet(StarTopo(3), switch=partial(SoftSwitch, plan=build_dir), controller=None, link=TCLink)

* :class:`SoftSwitch` runs ``python -m p4gen.switch.dataplane`` (the software
  data plane) on the switch's interfaces, programmed by a JSON config file.
* :class:`BMv2Switch` runs ``simple_switch_grpc`` with the program that
  ``p4gen build --compile`` compiled with ``p4c-bm2-ss``, and is programmed
  over P4Runtime by ``p4gen.controller``.
* Either switch node forwards ordinary traffic (TCP, ARP, ping, Gloo's
  rendezvous and ring) in a kernel bridge of its own namespace, beside the
  P4 pipeline, as a real switch's L2 pipeline does at line rate; only
  aggregation frames reach the P4 process (:mod:`p4gen.testbed.l2`).
* :class:`TestbedHost` is a Mininet host whose processes carry the
  network's mark (so ``p4gen testbed cleanup`` finds exactly them).
* :class:`Leaf` is the leaf of the two-level topology: Mininet's
  ``LinuxBridge`` (a kernel learning bridge; bridge-utils), with the
  hosts' and the spine's MACs pinned to their ports.

Every node lives in its own network namespace: Mininet passes
``inNamespace=False`` to switches, and these classes force it, so that no
interface, bridge or listening port appears in the root namespace.
``start()`` launches the process and waits, with a timeout, until it has a
packet socket bound on every port (BMv2: and its gRPC port open); every
failure names the log file.  ``stop()`` ends the process by its PID.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from mininet.node import Host, Switch
from mininet.nodelib import LinuxBridge

from p4gen.filewrite import WORK, write_file
from p4gen.plan import Plan

from . import procs, workspace
from .errors import ReadinessError, TestbedError
from .l2 import KernelL2


class _Marked:
    """Mixin: the node's shell and everything it runs carry the network's mark (see procs.MARK)."""

    net_id = "p4g0000"

    def _popen(self, cmd, **opts):
        env = opts.get("env") or {}
        opts["env"] = procs.marked_env(self.net_id, {k: v for k, v in env.items() if k != procs.MARK})
        return super()._popen(cmd, **opts)

    def _own_namespace(self) -> None:
        # IPv6 would put router solicitations and MLD reports on every link; the loopback is down in a
        # new namespace (Mininet brings it up on hosts only), and BMv2's gRPC server listens on it
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        self.cmd("ip link set lo up")

    def counters(self) -> dict[str, tuple[int, int, int, int]]:
        """Interface -> (rx packets, rx bytes, tx packets, tx bytes) in this node's namespace."""
        return procs.dev_counters(self.pid)


class TestbedHost(_Marked, Host):
    """A Mininet host whose processes carry the network's mark; IPv6 off."""

    __test__ = False          # not a pytest test class despite the name

    def __init__(self, name, net_id: str | None = None, **opts):
        if net_id:
            self.net_id = net_id
        super().__init__(name, **opts)
        self._own_namespace()


class Leaf(_Marked, LinuxBridge):
    """Leaf switch of the two-level topology: a kernel learning bridge in its own namespace."""

    kind = "leaf"

    @classmethod
    def setup(cls):
        # LinuxBridge.setup also warns when bridge-nf-call-*tables is 1; that routes bridged frames
        # through the iptables of the bridge's namespace, and a leaf's namespace has no rules
        from mininet.moduledeps import pathCheck

        pathCheck("brctl", moduleName="bridge-utils")

    def __init__(self, name, net_id: str | None = None, **opts):
        self.controlIntf = None
        if net_id:
            self.net_id = net_id
        opts["inNamespace"] = True
        super().__init__(name, **opts)
        self._own_namespace()

    def pin(self, macs: dict[str, str]) -> None:
        """Static forwarding entries (MAC -> port interface): frames to a MAC the bridge has not yet
        learned are then not flooded to the rack."""
        for mac, dev in macs.items():
            out = self.cmd(f"bridge fdb replace {mac} dev {dev} master static 2>&1; echo rc=$?").strip()
            if not out.endswith("rc=0"):
                raise TestbedError(f"leaf {self.name}: could not pin {mac} to {dev}: {out.splitlines()[0]}")


class P4Switch(_Marked, Switch):
    """A switch process on this node's interfaces, programmed from the plan in ``plan``."""

    kind = "switch"
    label = "switch"            # the --switch name in result tables
    ready_timeout = 10.0
    p4runtime: str | None = None
    max_in_flight: int | None = None   # frames of all workers in flight at once that the switch takes
                                       # without loss or late results (None: the links bound the window)

    def __init__(self, name, plan: str | Path | None = None, workdir: str | Path | None = None,
                 net_id: str | None = None, **opts):
        if plan is None:
            raise TestbedError(f"switch {name} needs a build directory (plan=...)")
        self.plan_dir = Path(plan)
        self.plan = Plan.load(self.plan_dir)
        self.workdir = Path(workdir) if workdir else workspace.new_workdir(f"p4gen-{name}-")
        if net_id:
            self.net_id = net_id
        self.log = self.workdir / f"p4gen-{name}.log"
        self.proc: procs.Proc | None = None
        self.starts = 0
        self.controlIntf = None
        opts["inNamespace"] = True
        super().__init__(name, **opts)
        self._own_namespace()
        self.l2 = KernelL2(self)

    # -- to be provided by subclasses
    def argv(self) -> list[str]:
        raise NotImplementedError

    @classmethod
    def missing(cls) -> str | None:
        """Why this switch cannot run here (one line), or None."""
        return None

    # -- Mininet's interface
    @property
    def front_ports(self) -> dict[int, str]:
        """Switch port number -> the interface of its link (the node's Mininet interfaces)."""
        return {p: i.name for p, i in sorted(self.intfs.items()) if p > 0}

    @property
    def port_map(self) -> dict[int, str]:
        """Switch port number -> the interface the P4 pipeline's process runs that port on."""
        return {p: self.l2.pipe_intf(p) for p in self.front_ports}

    def start(self, controllers=()) -> None:
        if self.alive():
            raise TestbedError(f"{self.kind} {self.name} is already running (pid {self.proc.pid})")
        if self.starts == 0:
            self.l2.build(self.front_ports, self.plan)
        self.starts += 1
        if self.starts > 1 and self.log.exists():       # keep the previous run's log next to the new one
            self.log.rename(self.log.with_suffix(f".{self.starts - 1}.log"))
        self.proc = procs.spawn(self, self.name, self.argv(), self.log, self.net_id)
        self.wait_ready()

    def stop(self, deleteIntfs=True) -> None:          # noqa: N803 (Mininet's name)
        if self.proc is not None:
            self.proc.stop()
        super().stop(deleteIntfs)

    # -- readiness
    def _ifindexes(self) -> dict[str, int]:
        out = {}
        for line in self.cmd("ip -o link show").splitlines():
            num, _, rest = line.partition(":")
            if num.strip().isdigit():
                out[rest.split(":")[0].strip().split("@")[0]] = int(num)
        return out

    def _failed(self, what: str) -> ReadinessError:
        rc = None if self.proc is None else self.proc.popen.poll()
        if rc is not None:
            return ReadinessError(f"{self.kind} {self.name} exited with status {rc} before {what}; see {self.log}"
                                  + (f" ({self.proc.tail(1)})" if self.proc.tail(1) else ""))
        return ReadinessError(f"{self.kind} {self.name} did not {what} in {self.ready_timeout:g} s; see {self.log}")

    def wait_ready(self) -> None:
        """Wait until the process has a packet socket bound on every port."""
        deadline = time.monotonic() + self.ready_timeout
        idx = self._ifindexes()
        want = {d: idx.get(d) for d in self.port_map.values()}
        while True:
            if not self.alive():
                raise self._failed("opening its interfaces")
            try:
                bound = procs.packet_socket_ifindexes(self.proc.pid)
            except OSError:
                bound = set()
            missing = sorted(d for d, i in want.items() if i not in bound)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise self._failed(f"open its interfaces ({', '.join(missing)})")
            time.sleep(0.05)

    # -- operations
    def pin(self, macs: dict[str, str]) -> None:
        """Static entries in the kernel bridge's table (MAC -> front port interface)."""
        self.l2.pin(macs)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def restart(self) -> None:
        if self.proc is not None:
            self.proc.stop()
        self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()


class SoftSwitch(P4Switch):
    """The software data plane (``python -m p4gen.switch.dataplane``), programmed by a JSON config file."""

    kind = "switch"
    label = "soft"
    module = "p4gen.switch.dataplane"
    # a busy data plane begins a round no more often than the time 8 frames take on the slowest link
    # (2.8 ms at 25 Mbit/s for 1 KiB frames, 0.7 ms at 100 Mbit/s), at most 10 ms (8 KiB frames at 25
    # Mbit/s: 21 ms): each round then takes a burst from every port instead of a frame or two
    round_frames = 8
    round_max = 0.010

    def __init__(self, name, **opts):
        super().__init__(name, **opts)
        self.config_path = self.workdir / f"{name}-config.json"
        self.config: dict | None = None

    @classmethod
    def missing(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec(cls.module) is None:
            return f"{cls.module} (the software data plane) is not installed"
        return None

    def round_interval(self) -> float:
        """The data plane's ``--round-interval``: the time ``round_frames`` frames of the plan take on the
        slowest link, at most ``round_max`` (0 when no link has a rate)."""
        rates = [i.params.get("bw") for p, i in self.intfs.items() if p > 0]
        rates = [r for r in rates if r]
        if not rates:
            return 0.0
        from p4gen.wire import FrameLayout

        frame_bits = FrameLayout(self.plan).frame_len * 8
        return min(self.round_max, self.round_frames * frame_bits / (min(rates) * 1e6))

    def argv(self) -> list[str]:
        a = [sys.executable, "-m", self.module, "--plan", str(self.plan_dir)]
        for p, dev in self.port_map.items():
            a += ["--port", f"{p}={dev}"]
        interval = self.round_interval()
        if interval:
            a += ["--round-interval", f"{interval:.6f}"]
        if self.config is not None:
            a += ["--config", str(self.config_path)]
        return a

    def load_config(self, cfg: dict) -> None:
        """Write the control-plane config and (re)start the data plane with it."""
        self.config = cfg
        write_file(self.config_path, json.dumps(cfg, indent=1), WORK, "switch config", TestbedError)
        self.restart()


class BMv2Switch(P4Switch):
    """``simple_switch_grpc`` running the build's ``program.json`` (``p4gen build --compile``)."""

    kind = "bmv2"
    label = "bmv2"
    # simple_switch runs the 256-element program at about 1,000 frames/s on a 2-core machine.  With
    # 3 workers on 100 Mbit/s links (bench/testbed.py --bmv2): windows of 32 and 64 lost frames
    # before the ingress pipeline (the ports received 1,828 frames, the program's stats counter saw
    # 1,283), 16 brought results back after the 100 ms timeout, 8 measured no retransmission.
    max_in_flight = 24
    grpc_port = 9559
    thrift_port = 9090
    cpu_port = 510

    def __init__(self, name, **opts):
        super().__init__(name, **opts)
        self.p4runtime = f"127.0.0.1:{self.grpc_port}"
        self.jobs: tuple = ()
        if not (self.plan_dir / "program.json").is_file():
            raise TestbedError(f"bmv2 {name}: {self.plan_dir} has no program.json; build it with "
                               f"p4gen build --target bmv2 --compile")

    @classmethod
    def missing(cls) -> str | None:
        gone = [b for b in ("p4c-bm2-ss", "simple_switch_grpc") if shutil.which(b) is None]
        if gone:
            return f"BMv2 is not installed ({' and '.join(gone)} not on PATH)"
        return None

    def argv(self) -> list[str]:
        a = ["simple_switch_grpc", "--device-id", "0", "--thrift-port", str(self.thrift_port), "--no-p4"]
        for p, dev in self.port_map.items():
            a += ["-i", f"{p}@{dev}"]
        a += ["--", "--grpc-server-addr", self.p4runtime, "--cpu-port", str(self.cpu_port)]
        return a

    def start(self, controllers=()) -> None:
        super().start(controllers)
        self._wait_grpc()
        if self.jobs:
            self.program_p4runtime(*self.jobs)

    def _wait_grpc(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while not procs.tcp_listening(self.proc.pid, self.grpc_port):
            if not self.alive():
                raise self._failed(f"opening port {self.grpc_port}")
            if time.monotonic() > deadline:
                raise self._failed(f"open port {self.grpc_port}")
            time.sleep(0.05)

    def load_jobs(self, *specs) -> None:
        """(Re)start simple_switch_grpc and set the jobs ``specs`` up on it over P4Runtime.

        A pipeline pushed again onto a running simple_switch_grpc leaves the previous multicast
        groups in BMv2's replication engine while PI forgets them; the controller then inserts the
        groups again and every result goes out once more per earlier programming.  A fresh process
        starts with none, and with its registers cleared, as the software data plane does.
        """
        self.jobs = specs
        self.restart()

    def program_p4runtime(self, *specs) -> None:
        """Push the pipeline and set ``specs`` up with ``p4gen.controller``, inside this node's namespace."""
        self.jobs = specs
        path = self.workdir / f"{self.name}-jobs.json"
        write_file(path, json.dumps([json.loads(s.to_json()) for s in specs]), WORK, "job list", TestbedError)
        log = self.workdir / f"controller-{self.name}.log"
        p = procs.spawn(self, f"controller-{self.name}", [sys.executable, "-m", "p4gen.testbed.program",
                                                          str(self.plan_dir), str(path), self.p4runtime],
                        log, self.net_id)
        try:
            rc = p.popen.wait(60)
        except Exception:
            p.stop()
            raise
        if rc != 0:
            raise TestbedError(f"bmv2 {self.name}: the controller could not set the job up over P4Runtime at "
                               f"{self.p4runtime} ({p.tail(1)}); see {log} and {self.log}")


def pick_switch(kind: str):
    """The switch class for ``--switch soft|bmv2|auto`` (auto: BMv2 when installed)."""
    if kind == "soft":
        return SoftSwitch
    if kind == "bmv2":
        why = BMv2Switch.missing()
        if why:
            raise TestbedError(f"--switch bmv2: {why}")
        return BMv2Switch
    if kind == "auto":
        return BMv2Switch if BMv2Switch.missing() is None else SoftSwitch
    raise TestbedError(f"--switch {kind!r} must be soft, bmv2 or auto")
