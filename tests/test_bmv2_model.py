"""Differential test: BMv2 simple_switch and SwitchModel on the same frames.

For each program (SwitchML hardened and reference, OmniReduce) the test
compiles the BMv2 JSON, runs simple_switch inside a private network
namespace (p4gtest-bm-*) with three veth pairs (switch ports 1..3), loads the
same job entries into the switch (through simple_switch_CLI) and into
:class:`p4gen.switch.model.SwitchModel`, sends a scripted sequence of frames one at a
time through the host ends of the veth pairs, and compares, per step, the set
of (egress port, frame bytes) seen on the wire with the model's output; at the
end the stats counter.  Runs only where BMv2 and p4c-bm2-ss are installed and
we are root (namespaces, AF_PACKET); skips elsewhere.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import select
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.plan import Plan

TOOLS = ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss")
_missing = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = [
    pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not on PATH (BMv2 differential test)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and AF_PACKET sockets"),
]

JOB = 3
MGID = 5
RID_BASE = 10
SLOT_BASE = 4
SLOT_COUNT = 8
QUIET = 0.25            # s without a frame after a send: the step is over
FIRST_WAIT = 0.4        # s to wait for the first frame of a step
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
L2_MAC = 0x02AA00000003
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4

_libc = ctypes.CDLL(None, use_errno=True)


def _sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, **kw)


class Netns:
    """A namespace with veth pairs <prefix><k>s (switch side) / <prefix><k>h (host side), k = 1..n."""

    def __init__(self, n: int):
        tag = secrets.token_hex(3)
        self.name = f"p4gtest-bm-{tag}"
        self.prefix = f"p4gt{tag}"
        self.n = n
        self.created = False

    def ex(self, *cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        return _sh("ip", "netns", "exec", self.name, *cmd, check=check, **kw)

    def sw(self, k: int) -> str:
        return f"{self.prefix}{k}s"

    def host(self, k: int) -> str:
        return f"{self.prefix}{k}h"

    def create(self) -> None:
        _sh("ip", "netns", "add", self.name)
        self.created = True
        for key in ("all", "default"):
            self.ex("sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
        self.ex("ip", "link", "set", "lo", "up")
        for k in range(1, self.n + 1):
            self.ex("ip", "link", "add", self.sw(k), "type", "veth", "peer", "name", self.host(k))
            for dev in (self.sw(k), self.host(k)):
                self.ex("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1", check=False)
                self.ex("ip", "link", "set", dev, "mtu", "9000")
                self.ex("ip", "link", "set", dev, "up")
                self.ex("ethtool", "-K", dev, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                        check=False)

    def delete(self) -> None:
        if self.created:
            _sh("ip", "netns", "delete", self.name, check=False)
            self.created = False

    def packet_socket(self, dev: str) -> socket.socket:
        """An AF_PACKET socket bound to ``dev`` inside the namespace (setns on this thread, then back)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
        try:
            if _libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {self.name} failed")
            try:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.bind((dev, 0))
                s.setblocking(False)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            finally:
                if _libc.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back to the test's namespace failed")
        finally:
            os.close(own)
            os.close(target)
        return s


class Bmv2:
    """simple_switch inside a Netns, ports 1..n on the switch-side veth ends."""

    def __init__(self, ns: Netns, program: Path, log: Path, device_id: int):
        self.ns, self.program, self.log, self.device_id = ns, program, log, device_id
        self.thrift = 9090 + secrets.randbelow(20000)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 15.0) -> None:
        cmd = ["ip", "netns", "exec", self.ns.name, "simple_switch"]
        for k in range(1, self.ns.n + 1):
            cmd += ["-i", f"{k}@{self.ns.sw(k)}"]
        cmd += ["--thrift-port", str(self.thrift), "--device-id", str(self.device_id), "--log-file", str(self.log),
                "--log-flush", str(self.program)]
        self.out = open(str(self.log) + ".stdout", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        probe = (f"import socket; s = socket.create_connection(('127.0.0.1', {self.thrift}), 0.5); s.close()")
        while True:
            r = self.ns.ex("python3", "-c", probe, check=False)
            if r.returncode == 0:
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"simple_switch did not answer on thrift port {self.thrift} within {timeout} s "
                                   f"(exit {self.proc.poll()}); see {self.log} and {self.log}.stdout")
            time.sleep(0.1)

    def cli(self, commands: list[str]) -> str:
        r = self.ns.ex("simple_switch_CLI", "--thrift-port", str(self.thrift), input="\n".join(commands) + "\n",
                       check=False, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"simple_switch_CLI failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        return r.stdout

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "out", None):
            self.out.close()


def _fmt(v) -> str:
    return str(int(v, 0) if isinstance(v, str) else int(v))


def cli_commands(plan: Plan, cfg: dict, extra: list[tuple[str, dict, str, dict]]) -> tuple[list[str], list[str]]:
    """simple_switch_CLI commands for a control-plane config: (tables + group/node creation, associations)."""
    data = plan.data
    tables = {t["name"]: t for t in data["tables"]}
    acts = {a["name"]: a["params"] for a in data["actions"]}
    ctl = {"result_dst": "P4genEgress"}
    cmds, assoc = [], []
    entries = [(t, e["match"], e["action"], e["params"]) for t, es in cfg["tables"].items() for e in es] + extra
    for table, match, action, params in entries:
        c = ctl.get(table, "P4genIngress")
        keys = [_fmt(W.mac(match[k["name"]]) if isinstance(match[k["name"]], str) and ":" in match[k["name"]]
                     else match[k["name"]]) for k in tables[table]["keys"]]
        vals = [_fmt(params[q["name"]]) for q in acts[action]]
        cmds.append(f"table_add {c}.{table} {c}.{action} {' '.join(keys)} => {' '.join(vals)}")
    handle = 0
    for mgid, reps in cfg["groups"].items():
        cmds.append(f"mc_mgrp_create {mgid}")
        for port, rid in reps:
            cmds.append(f"mc_node_create {rid} {port}")
            assoc.append(f"mc_node_associate {mgid} {handle}")
            handle += 1
    return cmds, assoc


def read_counter(sw: Bmv2, names: list[str]) -> dict[str, tuple[int, int]]:
    out = sw.cli([f"counter_read P4genIngress.stats {i}" for i in range(len(names))])
    found = re.findall(r"stats\[(\d+)\]=\s*\((\d+) bytes, (\d+) packets\)", out)
    if len(found) != len(names):
        raise RuntimeError(f"could not parse counter_read output: {out[-1500:]}")
    return {names[int(i)]: (int(p), int(b)) for i, b, p in found}


def is_agg(frame: bytes, layout: W.Layout) -> bool:
    """IPv4 UDP to or from the aggregation port range (everything else on the wire is noise)."""
    if len(frame) < 14 + 20 + 4 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    ihl = (frame[14] & 0xF) * 4
    if len(frame) < 14 + ihl + 4:
        return False
    sport, dport = int.from_bytes(frame[14 + ihl:16 + ihl], "big"), int.from_bytes(frame[16 + ihl:18 + ihl], "big")
    lo, hi = layout.udp_port_min, layout.udp_port_max
    return lo <= sport <= hi or lo <= dport <= hi


def collect(socks: dict[int, socket.socket], layout: W.Layout, l2_ok: set[bytes]) -> list[tuple[int, bytes]]:
    got = []
    fds = {s.fileno(): k for k, s in socks.items()}
    deadline = time.monotonic() + FIRST_WAIT
    quiet_until = None
    while True:
        now = time.monotonic()
        end = quiet_until if quiet_until is not None else deadline
        if now >= end:
            return got
        r, _, _ = select.select(list(fds), [], [], end - now)
        for fd in r:
            k = fds[fd]
            while True:
                try:
                    data, addr = socks[k].recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                if is_agg(data, layout) or data in l2_ok:
                    got.append((k, data))
                    quiet_until = time.monotonic() + QUIET
        if quiet_until is None and not r:
            return got


def drain(socks: dict[int, socket.socket]) -> None:
    for s in socks.values():
        while True:
            try:
                s.recv(65535)
            except BlockingIOError:
                break


# -- scripted frames ----------------------------------------------------------------------
def scenario(plan: Plan, addrs: list[WorkerAddr]) -> list[tuple[str, int, bytes]]:
    """(label, ingress port, frame) in sending order."""
    L = W.Layout(plan)
    omni = L.omni
    rng = np.random.default_rng(7)
    width = L.value_width
    srcs = [P.Endpoint(a.mac, a.ip, a.udp_port) for a in addrs]
    slot_bits = int(plan.data["params"]["slot_bits"]) if "slot_bits" in plan.data["params"] else \
        max(1, (int(plan.data["params"]["slots"]) - 1).bit_length())

    def vals():
        return rng.integers(0, 1 << width, size=L.elements, dtype=np.uint64)

    def f(w, tsi, slot, copy=0, exp=0, data=True, nxt=None, src=None):
        kw = {"next": (0xFFFFFFFF if nxt is None else nxt)} if omni else {}
        return P.contribution_frame(L, srcs[w] if src is None else src, SWITCH, job=JOB, tsi=tsi,
                                    pool_index=(copy << slot_bits) | slot, exponent=exp,
                                    values=vals() if data else None, **kw)

    port = [a.port for a in addrs]
    s = []
    s.append(("w0 first slot0", port[0], f(0, 0, 0, exp=3, nxt=2)))
    s.append(("w1 mid slot0", port[1], f(1, 0, 0, exp=7, nxt=1)))
    dup = f(1, 0, 0, exp=7, nxt=1)
    s.append(("w1 again slot0 (new values)", port[1], dup))
    s.append(("w1 duplicate slot0", port[1], dup))
    s.append(("w2 last slot0 (multicast)", port[2], f(2, 0, 0, exp=5, nxt=4)))
    s.append(("w0 retransmit to complete slot0 (unicast)", port[0], f(0, 0, 0, exp=3, nxt=2)))
    s.append(("w0 first slot1", port[0], f(0, 1, 1, exp=1)))
    s.append(("w1 slot1 copy1 tsi 9", port[1], f(1, 9, 1, copy=1, exp=2)))
    s.append(("w2 stale tsi 1 to slot1 copy0", port[2], f(2, 1, 1)))
    s.append(("w0 next chunk tsi 16 slot0 copy0", port[0], f(0, 16, 0, exp=4)))
    s.append(("w1 stale tsi 0 slot0 copy0", port[1], f(1, 0, 0, exp=7)))
    s.append(("unknown worker (src port)", port[0], f(0, 2, 2, src=P.Endpoint(addrs[0].mac, addrs[0].ip, 41999))))
    s.append(("unknown worker (wrong ingress port)", port[1], f(0, 2, 2)))
    s.append(("out-of-range slot", port[0], f(0, 2, SLOT_COUNT + 1)))
    s.append(("truncated frame", port[2], f(2, 2, 2)[:L.fixed_len + 3]))
    s.append(("truncated headers", port[2], f(2, 2, 2)[:L.fixed_len - 2]))
    if omni:
        s.append(("w0 header-only slot3", port[0], f(0, 3, 3, data=False, nxt=9)))
        s.append(("w1 data slot3", port[1], f(1, 3, 3, nxt=5)))
        s.append(("w2 last header-only slot3 (grows)", port[2], f(2, 3, 3, data=False, nxt=6)))
        s.append(("w0 header-only slot4", port[0], f(0, 4, 4, data=False, nxt=7)))
        s.append(("w1 header-only slot4", port[1], f(1, 4, 4, data=False, nxt=8)))
        s.append(("w2 last header-only slot4 (all header-only)", port[2], f(2, 4, 4, data=False, nxt=12)))
        s.append(("w1 retransmit header-only slot4", port[1], f(1, 4, 4, data=False, nxt=8)))
    else:
        s.append(("w1 slot2", port[1], f(1, 2, 2, exp=9)))
        s.append(("w0 slot2", port[0], f(0, 2, 2, exp=2)))
        s.append(("w2 last slot2 (multicast)", port[2], f(2, 2, 2, exp=1)))
    # plain L2 traffic (not an aggregation port): l2_forward unicast
    l2 = L.encode({"ethernet": {"dst_addr": L2_MAC, "src_addr": addrs[0].mac},
                   "ipv4": {"src_addr": addrs[0].ip, "dst_addr": 0x0A0000FD},
                   "udp": {"src_port": 1234, "dst_port": 80}}, np.zeros(L.elements, dtype=np.uint64)) \
        if not omni else L.encode({"ethernet": {"dst_addr": L2_MAC, "src_addr": addrs[0].mac},
                                   "ipv4": {"src_addr": addrs[0].ip, "dst_addr": 0x0A0000FD},
                                   "udp": {"src_port": 1234, "dst_port": 80}, "agg": {"flags": 1}},
                                  np.zeros(L.elements, dtype=np.uint64))
    s.append(("L2 unicast (l2_forward)", port[0], l2))
    return s


def _hex(b: bytes) -> str:
    return b.hex()


VARIANTS = {
    "hardened": ["--variant", "hardened"],
    "reference": ["--variant", "reference"],
    "omnireduce": ["--protocol", "omnireduce"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_bmv2_matches_model(variant, tmp_path):
    out = tmp_path / "build"
    r = _sh(sys.executable, "-m", "p4gen.cli", "build", "--target", "bmv2", "--slots", "16", "--elements", "8", "--workers", "4",
            *VARIANTS[variant], "--compile", "--no-cache", "--out", str(out), check=False)
    assert r.returncode == 0, f"p4gen build failed: {r.stdout}\n{r.stderr}"
    program = out / "program.json"
    assert program.exists(), f"no {program}; see {out / 'compile.log'}"
    plan = Plan.load(out / "plan.json")
    layout = W.Layout(plan)

    addrs = [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in (1, 2, 3)]
    cfg = job_config(plan, JOB, addrs, slot_base=SLOT_BASE, slot_count=SLOT_COUNT, mgid=MGID, rid_base=RID_BASE)
    l2_extra = [("l2_forward", {"dst_addr": L2_MAC}, "l2_unicast", {"port": 3})]
    model = SwitchModel(plan)
    model.load_config(cfg)
    for t, m, a, p in l2_extra:
        model.insert(t, m, a, p)

    ns = Netns(3)
    log = tmp_path / "simple_switch.log"
    sw = Bmv2(ns, program, log, device_id=secrets.randbelow(1000))
    socks: dict[int, socket.socket] = {}
    try:
        ns.create()
        sw.start()
        cmds, assoc = cli_commands(plan, cfg, l2_extra)
        txt = sw.cli(cmds)
        handles = [int(h) for h in re.findall(r"node was created with handle (\d+)", txt)]
        assert handles == list(range(len(assoc))), f"unexpected multicast node handles {handles}:\n{txt[-2000:]}"
        txt2 = sw.cli(assoc)
        for c, t in ((cmds, txt), (assoc, txt2)):
            assert "Error" not in t and "Invalid" not in t, f"simple_switch_CLI rejected a command:\n{t[-3000:]}"
        socks = {k: ns.packet_socket(ns.host(k)) for k in (1, 2, 3)}
        time.sleep(0.2)
        drain(socks)
        l2_ok: set[bytes] = set()
        mismatches = []
        steps = scenario(plan, addrs)
        emitted = 0
        for label, port, frame in steps:
            if not is_agg(frame, layout):
                l2_ok.add(frame)
            want = sorted(model.process(frame, port))
            socks[port].send(frame)
            got = sorted(collect(socks, layout, l2_ok))
            emitted += len(got)
            if got != want:
                mismatches.append((label, port, frame, got, want))
        bm = read_counter(sw, model.stat_names)
        mc = model.counter_read()
        cdiff = {n: (bm[n], mc[n]) for n in model.stat_names if bm[n] != mc[n]}
        if mismatches or cdiff:
            lines = [f"{variant}: BMv2 and the model disagree (log: {log})"]
            for label, port, frame, got, want in mismatches:
                lines.append(f"step {label!r}: in port {port}, frame {_hex(frame)}")
                lines.append(f"  BMv2 : {[(p, _hex(b)) for p, b in got]}")
                lines.append(f"  model: {[(p, _hex(b)) for p, b in want]}")
            if cdiff:
                lines.append(f"stats (packets, bytes) as (BMv2, model): {cdiff}")
            pytest.fail("\n".join(lines))
        # not vacuous: results (multicast to all three ports, unicast) and the L2 frame came out
        assert emitted >= 8, f"only {emitted} frames came out of BMv2; see {log}"
        assert mc["multicast"][0] >= 2 and mc["unicast"][0] >= 1
    finally:
        for s in socks.values():
            s.close()
        sw.stop()
        ns.delete()
