"""BMv2 simple_switch in a private network namespace, driven frame by frame (test support).

:class:`Netns` makes a namespace (p4gtest-bm-*) with veth pairs, :class:`Bmv2`
runs simple_switch on their switch ends (Thrift runtime CLI for table entries,
multicast groups, counters and registers; :class:`RuntimeCli` keeps one CLI
session open for many quick reads), and :func:`collect` gathers what comes
out on the host ends after one frame went in.  :class:`SwitchLog`
reads the switch's log as it grows and parses, per frame, which entry of
which table it took.  Callers hold the machine-wide net lock.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import select
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

from p4gen import wire as W
from p4gen.plan import Plan

TOOLS = ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


QUIET = 0.25            # s without a frame after a send: the step is over
FIRST_WAIT = 0.4        # s to wait for the first frame of a step
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4

_libc = ctypes.CDLL(None, use_errno=True)


def _sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, **kw)


class Netns:
    """A namespace with veth pairs <prefix><k>s (switch side) / <prefix><k>h (host side), one per switch port k.

    The ports are 1..n, or ``ports`` where given.
    """

    def __init__(self, n: int = 0, ports: list[int] | None = None):
        tag = secrets.token_hex(3)
        self.name = f"p4gtest-bm-{tag}"
        self.prefix = f"p4gt{tag}"
        self.ports = sorted(ports) if ports is not None else list(range(1, n + 1))
        self.n = len(self.ports)
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
        for k in self.ports:
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
        for k in self.ns.ports:
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


class RuntimeCli:
    """One simple_switch_CLI session held open: each :meth:`cli` call costs a Thrift round trip, not a start."""

    PROMPT = b"RuntimeCmd: "

    def __init__(self, sw: Bmv2, timeout: float = 10.0):
        self.timeout = timeout
        self.proc = subprocess.Popen(["ip", "netns", "exec", sw.ns.name, "simple_switch_CLI", "--thrift-port",
                                      str(sw.thrift)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.buf = b""
        self._replies(1)

    def _replies(self, k: int) -> list[bytes]:
        deadline = time.monotonic() + self.timeout
        while self.buf.count(self.PROMPT) < k:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            data = os.read(self.proc.stdout.fileno(), 1 << 16) if r else b""
            if not data:
                raise RuntimeError(f"simple_switch_CLI gave {self.buf.count(self.PROMPT)} of {k} answers "
                                   f"within {self.timeout} s (exit {self.proc.poll()}): {self.buf[-1500:]!r}")
            self.buf += data
        parts = self.buf.split(self.PROMPT)
        self.buf = self.PROMPT.join(parts[k:])
        return parts[:k]

    def cli(self, commands: list[str]) -> str:
        """The output of ``commands``, run in this session (the same text as :meth:`Bmv2.cli`)."""
        self.proc.stdin.write(("\n".join(commands) + "\n").encode())
        self.proc.stdin.flush()
        return b"".join(self._replies(len(commands))).decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def build_program(plan: Plan, out: Path) -> Path:
    """Emit ``plan``'s v1model program into ``out``, compile it with p4c-bm2-ss; the BMv2 JSON's path."""
    from p4gen.build import compile_program, render_all

    out.mkdir(parents=True, exist_ok=True)
    files = render_all(plan)
    files.update(compile_program("v1model", files["program.p4"]))
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out / "program.json"


def _fmt(v) -> str:
    return str(int(v, 0) if isinstance(v, str) else int(v))


CONTROL = {"result_dst": "P4genEgress"}       # the control block of each table outside P4genIngress


def table_commands(plan: Plan, cfg: dict, extra: list[tuple[str, dict, str, dict]] = ()) -> list[str]:
    """simple_switch_CLI ``table_add`` commands for the table entries of a control-plane config."""
    tables = {t.name: t for t in plan.tables}
    acts = {a.name: a.params for a in plan.actions}
    cmds = []
    entries = [(t, e["match"], e["action"], e["params"]) for t, es in cfg["tables"].items() for e in es] + list(extra)
    for table, match, action, params in entries:
        c = CONTROL.get(table, "P4genIngress")
        keys = [_fmt(W.mac(match[k.name]) if isinstance(match[k.name], str) and ":" in match[k.name]
                     else match[k.name]) for k in tables[table].keys]
        vals = [_fmt(params[q.name]) for q in acts[action]]
        cmds.append(f"table_add {c}.{table} {c}.{action} {' '.join(keys)} => {' '.join(vals)}")
    return cmds


def cli_commands(plan: Plan, cfg: dict, extra: list[tuple[str, dict, str, dict]]) -> tuple[list[str], list[str]]:
    """simple_switch_CLI commands for a control-plane config: (tables + group/node creation, associations)."""
    cmds, assoc = table_commands(plan, cfg, extra), []
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


def is_agg(frame: bytes, layout: W.FrameLayout) -> bool:
    """IPv4 UDP to or from the aggregation port range (everything else on the wire is noise)."""
    if len(frame) < 14 + 20 + 4 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    ihl = (frame[14] & 0xF) * 4
    if len(frame) < 14 + ihl + 4:
        return False
    sport, dport = int.from_bytes(frame[14 + ihl:16 + ihl], "big"), int.from_bytes(frame[16 + ihl:18 + ihl], "big")
    lo, hi = layout.udp_port_min, layout.udp_port_max
    return lo <= sport <= hi or lo <= dport <= hi


def collect(socks: dict[int, socket.socket], layout: W.FrameLayout, l2_ok: set[bytes]) -> list[tuple[int, bytes]]:
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


SOL_PACKET, PACKET_AUXDATA = 263, 8
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 1 << 4, 1 << 6
_AUXDATA = struct.Struct("=IIIHHHH")      # struct tpacket_auxdata


def keep_vlan_tags(s: socket.socket) -> None:
    """Make :func:`recv_frame` on ``s`` see VLAN tags: the kernel strips them on receive and reports
    them beside the frame (PACKET_AUXDATA), whatever the NIC's offloads."""
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)


def recv_frame(s: socket.socket) -> tuple[bytes, int]:
    """(frame as it was on the wire, packet type) from a socket set up by :func:`keep_vlan_tags`."""
    data, anc, _flags, addr = s.recvmsg(65535, socket.CMSG_SPACE(_AUXDATA.size))
    for level, kind, raw in anc:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(raw) >= _AUXDATA.size:
            status, _len, _snap, _mac, _net, tci, tpid = _AUXDATA.unpack_from(raw)
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data, addr[2]


def drain(socks: dict[int, socket.socket]) -> None:
    for s in socks.values():
        while True:
            try:
                s.recv(65535)
            except BlockingIOError:
                break




def read_registers(sw: Bmv2, plan: Plan) -> dict[str, list[int]]:
    """Every register of the plan, entry by entry, as BMv2 holds it (lane i at bits i*lane_bits and up)."""
    regs = plan.registers
    out = sw.cli([f"register_read P4genIngress.{r.name}" for r in regs])
    found = {name: [int(v) for v in vals.split(",") if v.strip()]
             for name, vals in re.findall(r"P4genIngress\.(\w+)=\s*([0-9, ]*)", out)}
    for r in regs:
        if len(found.get(r.name, [])) != r.entries:
            raise RuntimeError(f"register_read of {r.name} gave {len(found.get(r.name, []))} of "
                               f"{r.entries} entries: {out[-1500:]}")
    return {r.name: found[r.name] for r in regs}


I64_MAX = 2 ** 63 - 1


def register_mismatches(bm_regs: dict[str, list[int]], m_regs: dict[str, list[int]]) -> tuple[list[str], int]:
    """(one line per register whose entries differ, entries compared only up to 2**63 - 1).

    The Thrift runtime reads a register entry as a signed 64-bit integer: values from 2**63 - 1 up come
    back as 2**63 - 1, so such entries are compared only that far.
    """
    lines, saturated = [], 0
    for reg, vals in m_regs.items():
        saturated += sum(1 for a, b in zip(bm_regs[reg], vals) if a == I64_MAX and b >= I64_MAX)
        bad = [i for i, (a, b) in enumerate(zip(bm_regs[reg], vals)) if a != b and not (a == I64_MAX <= b)]
        if bad:
            lines.append(f"register {reg}: {len(bad)} entries differ, first {bad[0]}: "
                         f"BMv2 {bm_regs[reg][bad[0]]}, model {vals[bad[0]]}")
    return lines, saturated


def model_registers(model, plan: Plan) -> dict[str, list[int]]:
    """The model's registers in BMv2's packing (lane i at bits i*lane_bits and up)."""
    res = {}
    for r in plan.registers:
        a = model.register_read(r.name)
        if a.ndim == 1:
            res[r.name] = [int(x) for x in a]
        else:
            res[r.name] = [sum(int(v) << (i * r.lane_bits) for i, v in enumerate(row)) for row in a]
    return res


_APPLY = re.compile(r"Applying table '(?:\w+\.)?(dt_\w+)'")
_LOOKUP = re.compile(r"Looking up key:\n((?:\* [^\n]*\n)*)")
_KEY = re.compile(r"^\* (?:meta\.)?(\w+)\s*: ([0-9a-fA-F]+)\s*$", re.M)
_ACTION = re.compile(r"Action entry is (?:\w+\.)?(\w+) - ([0-9a-fA-F,]*)")


class SwitchLog:
    """simple_switch's log, read as it grows: the dt_* entries each frame took.

    ``--log-file PATH`` writes ``PATH.txt`` and rotates it to ``PATH.1.txt`` at 5 MB.
    """

    def __init__(self, path: Path):
        self.path = Path(str(path) + ".txt")
        self.rotated = Path(str(path) + ".1.txt")
        self.offset = 0

    @staticmethod
    def _read(path: Path, offset: int) -> bytes:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return fh.read()
        except FileNotFoundError:
            return b""

    def new_text(self) -> str:
        size = self.path.stat().st_size if self.path.exists() else 0
        data = b""
        if size < self.offset:                 # rotated since the last read: finish the old file first
            data = self._read(self.rotated, self.offset)
            self.offset = 0
        new = self._read(self.path, self.offset)
        self.offset += len(new)
        return (data + new).decode("utf-8", "replace")

    def skip(self) -> None:
        self.new_text()

    def entries(self, text: str) -> list[tuple[str, tuple[tuple[str, int], ...], str, tuple[int, ...]]]:
        """(table, ((key, code), ...), action, args) of every dt_* table applied in ``text``, in order."""
        out = []
        marks = list(_APPLY.finditer(text))
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            chunk = text[m.end():end]
            act = _ACTION.search(chunk)
            if act is None:
                raise RuntimeError(f"no action logged for table {m.group(1)}: {chunk[:500]!r}")
            look = _LOOKUP.search(chunk, 0, act.start())
            keys = tuple((k, int(v, 16)) for k, v in _KEY.findall(look.group(1))) if look else ()
            args = tuple(int(a, 16) for a in act.group(2).split(",") if a.strip())
            out.append((m.group(1), keys, act.group(1), args))
        return out
