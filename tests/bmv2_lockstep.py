"""simple_switch in lockstep with SwitchModel, frame by frame (test support).

:class:`Lockstep` runs simple_switch for a plan inside a Netns of its own
and keeps a :class:`SwitchModel` of the same plan and config beside it.
Its :meth:`~Lockstep.process` has the model's signature: it sends one frame
into BMv2, waits until BMv2's ``stats`` counter has counted it (so the next
frame, on whatever port, enters after it), collects what BMv2 emits, and
checks that the outputs and the counter the frame landed in are the
model's.  It returns BMv2's outputs, so worker emulators can run on BMv2
itself.  :meth:`~Lockstep.configure` puts both back into a fresh state with
a new config (tables, multicast groups, registers and counters), so each
Hypothesis example starts clean on one running switch.

Frames shorter than an Ethernet header cannot be sent on a veth (the
kernel refuses them), so they never reach BMv2.
"""

from __future__ import annotations

import re
import secrets
import select
import time
from pathlib import Path

from bmv2_harness import (CONTROL, PACKET_OUTGOING, Bmv2, Netns, RuntimeCli, drain, keep_vlan_tags, model_registers,
                          read_counter, read_registers, recv_frame, register_mismatches, table_commands)
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel

SYNC_TIMEOUT = 2.0      # s for BMv2 to count a frame
OUTPUT_TIMEOUT = 1.0    # s for BMv2's outputs of a counted frame to arrive (they take about a millisecond)
QUIET = 0.1             # s without output before a state check


class Mismatch(AssertionError):
    """BMv2 and the model disagree."""


def _hex(frames: list[tuple[int, bytes]]) -> list[tuple[int, str]]:
    return [(p, b.hex()) for p, b in frames]


class Lockstep:
    """One simple_switch for ``plan``, on switch ports ``ports``; use as a context manager."""

    def __init__(self, plan: Plan, program: Path, workdir: Path, ports: list[int]):
        self.plan = plan
        self.ns = Netns(ports=ports)
        self.log = workdir / "simple_switch.log"
        self.sw = Bmv2(self.ns, program, self.log, device_id=secrets.randbelow(1000))
        self.cli: RuntimeCli | None = None
        self.socks: dict = {}
        self.model = SwitchModel(plan)
        self.stat_names = self.model.stat_names
        self.counters: dict[str, tuple[int, int]] = {}
        self._tables: set[str] = set()
        self._groups: dict[int, list[int]] = {}         # mgid -> BMv2 node handles
        self.frames = 0                                  # frames sent since the last configure
        self.total = self.runs = 0                       # frames sent and configures, in all

    def __enter__(self) -> Lockstep:
        try:
            self.ns.create()
            self.sw.start()
            self.cli = RuntimeCli(self.sw)
            self.socks = {k: self.ns.packet_socket(self.ns.host(k)) for k in self.ns.ports}
            for sock in self.socks.values():
                keep_vlan_tags(sock)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for s in self.socks.values():
            s.close()
        self.socks = {}
        if self.cli is not None:
            self.cli.close()
            self.cli = None
        self.sw.stop()
        self.ns.delete()

    # -- configuration ---------------------------------------------------------------------
    def _run(self, cmds: list[str]) -> str:
        out = self.cli.cli(cmds) if cmds else ""
        if "Error" in out or "Invalid" in out:
            raise RuntimeError(f"simple_switch_CLI rejected a command:\n{out[-3000:]}")
        return out

    def configure(self, cfg: dict) -> Lockstep:
        """Replace every entry and group with ``cfg``'s, zero the registers and counters; the model likewise."""
        undo = [f"table_clear {CONTROL.get(t, 'P4genIngress')}.{t}" for t in sorted(self._tables)]
        for mgid, handles in self._groups.items():
            for h in handles:
                undo += [f"mc_node_dissociate {mgid} {h}", f"mc_node_destroy {h}"]
            undo.append(f"mc_mgrp_destroy {mgid}")
        undo += [f"register_reset P4genIngress.{r.name}" for r in self.plan.registers]
        undo.append("counter_reset P4genIngress.stats")
        self._run(undo)
        self._tables, self._groups = {t for t, es in cfg["tables"].items() if es}, {}
        self._run(table_commands(self.plan, cfg))
        for mgid, reps in cfg["groups"].items():
            self._run([f"mc_mgrp_create {mgid}"])
            handles = []
            for port, rid in reps:
                out = self._run([f"mc_node_create {rid} {port}"])
                found = re.search(r"node was created with handle (\d+)", out)
                if found is None:
                    raise RuntimeError(f"mc_node_create {rid} {port} gave no handle: {out[-1000:]}")
                handles.append(int(found.group(1)))
            self._groups[int(mgid)] = handles
            self._run([f"mc_node_associate {mgid} {h}" for h in handles])
        self.model = SwitchModel(self.plan)
        self.model.load_config(cfg)
        time.sleep(QUIET)
        drain(self.socks)
        self.counters = read_counter(self.cli, self.stat_names)
        if self.counters != self.model.counter_read():
            raise RuntimeError(f"counter_reset left {self.counters}")
        self.frames = 0
        self.runs += 1
        return self

    # -- frames ------------------------------------------------------------------------------
    def _collect(self, n: int) -> list[tuple[int, bytes]]:
        """What the switch emitted: wait for ``n`` frames, then take whatever else is already there."""
        got: list[tuple[int, bytes]] = []
        fds = {s.fileno(): k for k, s in self.socks.items()}
        deadline = time.monotonic() + OUTPUT_TIMEOUT
        while True:
            wait = max(0.0, deadline - time.monotonic()) if len(got) < n else 0.0
            ready, _, _ = select.select(list(fds), [], [], wait)
            for fd in ready:
                k = fds[fd]
                while True:
                    try:
                        data, kind = recv_frame(self.socks[k])
                    except BlockingIOError:
                        break
                    if kind != PACKET_OUTGOING:
                        got.append((k, data))
            if not ready and (len(got) >= n or time.monotonic() >= deadline):
                return got

    def _sync(self) -> dict[str, tuple[int, int]]:
        """BMv2's counters once it has counted every frame sent."""
        deadline = time.monotonic() + SYNC_TIMEOUT
        while True:
            got = read_counter(self.cli, self.stat_names)
            if sum(p for p, _b in got.values()) >= self.frames or time.monotonic() > deadline:
                return got

    def process(self, frame: bytes, port: int) -> list[tuple[int, bytes]]:
        """Send ``frame`` into BMv2 on ``port``; BMv2's outputs, once checked against the model's."""
        try:
            self.socks[port].send(frame)
        except OSError as exc:
            raise RuntimeError(f"the kernel refused a {len(frame)} B frame on port {port} ({exc}): frames "
                               f"shorter than an Ethernet header cannot reach BMv2") from None
        self.frames += 1
        self.total += 1
        want = self.model.process(frame, port)
        counters = self._sync()
        got = self._collect(len(want))
        expect = self.model.counter_read()
        problems = []
        if sorted(got) != sorted(want):
            problems.append(f"  BMv2 : {_hex(sorted(got))}\n  model: {_hex(sorted(want))}")
        if counters != expect:
            diff = {k: (counters[k], v) for k, v in expect.items() if counters[k] != v}
            problems.append(f"  stats (packets, bytes) as (BMv2, model): {diff}")
        self.counters = counters
        if problems:
            raise Mismatch(f"frame {self.frames} in port {port}: {frame.hex()} (an output may be a late one of an "
                           f"earlier frame; log {self.log})\n" + "\n".join(problems))
        return got

    @property
    def stats(self) -> dict[str, int]:
        """BMv2's packets per stats index, as read when the last frame was counted."""
        return {k: p for k, (p, _b) in self.counters.items()}

    def check_state(self) -> int:
        """Nothing more came out, and BMv2's counters and registers are the model's; how many register
        entries were compared only up to 2**63 - 1."""
        time.sleep(QUIET)
        late = self._collect(0)
        problems = [f"BMv2 emitted {len(late)} frames the model did not: {_hex(late)[:4]}"] if late else []
        counters = read_counter(self.cli, self.stat_names)
        if counters != self.model.counter_read():
            problems.append(f"stats as (BMv2, model): {counters} {self.model.counter_read()}")
        regs, saturated = register_mismatches(read_registers(self.cli, self.plan),
                                              model_registers(self.model, self.plan))
        if problems + regs:
            raise Mismatch("\n".join(problems + regs))
        return saturated
