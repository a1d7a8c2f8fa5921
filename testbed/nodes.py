"""Switch node classes: what runs on a switch's namespace and how to tell it is ready.

A node is built by :class:`p4gen.testbed.net.Network` with its name, its
namespace, its ports (number -> interface) and a work directory; the class
is passed in (``switch=SoftSwitch`` or ``switch=BMv2Switch``).  Every wait
has a timeout and every failure names the node's log file.

* :class:`SoftSwitch` runs ``python -m p4gen.switch.dataplane`` (the software data
  plane) on the interfaces, programmed through a JSON config file.
* :class:`BMv2Switch` runs ``simple_switch_grpc`` with the program compiled
  by ``p4c-bm2-ss``, programmed over P4Runtime by ``p4gen.controller``.
* :class:`L2Forwarder` is the leaf of the two-level topology
  (``python -m p4gen.testbed.l2fwd``): it forwards by destination MAC only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from p4gen.plan import Plan

from . import netns
from .errors import ReadinessError, TestbedError


def _bound_ifindexes(ns: str) -> tuple[set[int], dict[str, int]]:
    """(ifindexes with a packet socket bound, interface name -> ifindex) inside ``ns``."""
    out = netns.sh(["sh", "-c", "cat /proc/net/packet; echo ==; "
                    "for d in /sys/class/net/*; do echo \"$(basename $d) $(cat $d/ifindex)\"; done"], ns=ns,
                   check=False)
    sock_part, _, idx_part = out.partition("==")
    bound = set()
    for line in sock_part.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 5 and cols[4].isdigit():
            bound.add(int(cols[4]))
    names = {}
    for line in idx_part.splitlines():
        cols = line.split()
        if len(cols) == 2 and cols[1].isdigit():
            names[cols[0]] = int(cols[1])
    return bound, names


class Node:
    """A switch process in namespace ``ns`` bound to ``ports``."""

    kind = "node"
    ready_timeout = 10.0

    def __init__(self, name: str, ns: str, ports: dict[int, str], workdir: Path, plan_dir: Path | None = None,
                 routes: dict[str, int] | None = None):
        self.name = name
        self.ns = ns
        self.ports = dict(ports)
        self.workdir = Path(workdir)
        self.plan_dir = Path(plan_dir) if plan_dir else None
        self.routes = dict(routes or {})
        self.log = self.workdir / f"p4gen-{name}.log"
        self.proc: netns.Proc | None = None
        self.starts = 0

    # -- to be provided by subclasses
    def argv(self) -> list[str]:
        raise NotImplementedError

    # -- lifecycle
    def start(self) -> None:
        if self.proc is not None and self.proc.alive():
            raise TestbedError(f"{self.kind} {self.name} is already running (pid {self.proc.pid})")
        self.starts += 1
        if self.starts > 1 and self.log.exists():       # keep the previous run's log next to the new one
            self.log.rename(self.log.with_suffix(f".{self.starts - 1}.log"))
        self.proc = netns.spawn(self.name, self.ns, self.argv(), self.log)
        self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until the process has a packet socket bound on every port."""
        deadline = time.monotonic() + self.ready_timeout
        want = set(self.ports.values())
        while True:
            if self.proc is None or not self.proc.alive():
                rc = None if self.proc is None else self.proc.popen.returncode
                raise ReadinessError(f"{self.kind} {self.name} exited with status {rc} before opening its "
                                     f"interfaces; see {self.log}" + (f" ({self.proc.tail(1)})" if self.proc else ""))
            bound, idx = _bound_ifindexes(self.ns)
            missing = sorted(d for d in want if idx.get(d) not in bound)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ReadinessError(f"{self.kind} {self.name} did not open its interfaces "
                                     f"({', '.join(missing)}) in {self.ready_timeout:.0f} s; see {self.log}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def restart(self) -> None:
        self.stop()
        self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()


class L2Forwarder(Node):
    """Leaf switch: static MAC table, flood otherwise, no aggregation."""

    kind = "leaf"

    def argv(self) -> list[str]:
        a = [sys.executable, "-m", "p4gen.testbed.l2fwd"]
        for p, dev in self.ports.items():
            a += ["--port", f"{p}={dev}"]
        for m, p in self.routes.items():
            a += ["--route", f"{m}={p}"]
        return a


class AggSwitch(Node):
    """An aggregating switch running the plan in ``plan_dir``."""

    p4runtime: str | None = None

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        if self.plan_dir is None:
            raise TestbedError(f"switch {self.name} needs a plan directory")
        self.plan = Plan.load(self.plan_dir)

    @classmethod
    def missing(cls) -> str | None:
        """Why this switch cannot run here (one line), or None."""
        return None


class SoftSwitch(AggSwitch):
    """The software data plane (``python -m p4gen.switch.dataplane``), programmed by a JSON config file."""

    kind = "switch"
    module = "p4gen.switch.dataplane"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.config_path = self.workdir / f"{self.name}-config.json"
        self.config: dict | None = None

    @classmethod
    def missing(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec(cls.module) is None:
            return f"{cls.module} (the software data plane) is not installed"
        return None

    def argv(self) -> list[str]:
        a = [sys.executable, "-m", self.module, "--plan", str(self.plan_dir)]
        for p, dev in self.ports.items():
            a += ["--port", f"{p}={dev}"]
        if self.config is not None:
            a += ["--config", str(self.config_path)]
        return a

    def load_config(self, cfg: dict) -> None:
        """Write the control-plane config and (re)start the data plane with it."""
        self.config = cfg
        self.config_path.write_text(json.dumps(cfg, indent=1))
        if self.alive():
            self.restart()


class BMv2Switch(AggSwitch):
    """``simple_switch_grpc`` running the plan's program compiled by ``p4c-bm2-ss``."""

    kind = "bmv2"
    grpc_port = 9559
    thrift_port = 9090

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.p4runtime = f"127.0.0.1:{self.grpc_port}"
        self.job: object | None = None

    @classmethod
    def missing(cls) -> str | None:
        gone = [b for b in ("p4c-bm2-ss", "simple_switch_grpc") if shutil.which(b) is None]
        if gone:
            return f"BMv2 is not installed ({' and '.join(gone)} not on PATH)"
        return None

    def compile(self) -> Path:
        """program.json next to plan.json (compiled once per build directory)."""
        out = self.plan_dir / "program.json"
        if out.exists():
            return out
        src = self.plan_dir / "program.p4"
        log = self.workdir / f"p4c-{self.name}.log"
        with open(log, "wb") as f:
            r = subprocess.run(["p4c-bm2-ss", "--std", "p4-16", "--p4runtime-files",
                                str(self.plan_dir / "p4info.p4c.txtpb"), "-o", str(out), str(src)],
                               stdout=f, stderr=subprocess.STDOUT, timeout=300)
        if r.returncode != 0:
            raise TestbedError(f"p4c-bm2-ss could not compile {src} (status {r.returncode}); see {log}")
        return out

    def argv(self) -> list[str]:
        a = ["simple_switch_grpc", "--device-id", "0", "--log-file", str(self.log.with_suffix(".bmv2")),
             "--thrift-port", str(self.thrift_port), "--no-p4"]
        for p, dev in self.ports.items():
            a += ["-i", f"{p}@{dev}"]
        a += ["--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}", "--cpu-port", "510"]
        return a

    def start(self) -> None:
        self.compile()
        super().start()
        self._wait_grpc()
        if self.job is not None:
            self.program_p4runtime(self.job)

    def _wait_grpc(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            out = netns.sh(["ss", "-ltnH", f"sport = :{self.grpc_port}"], ns=self.ns, check=False)
            if out.strip():
                return
            if not self.alive() or time.monotonic() > deadline:
                raise ReadinessError(f"bmv2 {self.name} did not open port {self.grpc_port} in "
                                     f"{self.ready_timeout:.0f} s; see {self.log}")
            time.sleep(0.1)

    def program_p4runtime(self, spec) -> None:
        self.job = spec
        path = self.workdir / f"{self.name}-job.json"
        path.write_text(spec.to_json())
        try:
            netns.sh([sys.executable, "-m", "p4gen.testbed.program", str(self.plan_dir), str(path),
                      self.p4runtime], ns=self.ns, timeout=60)
        except TestbedError as exc:
            raise TestbedError(f"bmv2 {self.name}: the controller could not set the job up over P4Runtime "
                               f"at {self.p4runtime} ({exc}); see {self.log}") from None


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
