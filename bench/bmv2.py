"""Throughput of the generated program on BMv2 simple_switch, for comparison with bench/model.py.

    sudo python bench/bmv2.py [--chunks N] [--rate R] [--slots 512] [--elements 64]

Builds (``p4gen build --target bmv2 --slots 512 --elements 64 --workers 2
--compile``, hardened) and runs simple_switch in a private network namespace
(p4gtest-bm-*, removed on exit, exception or SIGTERM) with two veth pairs
(switch ports 1 and 2), loads one 2-worker job through simple_switch_CLI, then
two sender processes (one per worker, AF_PACKET on the host-side veth ends)
each send ``--chunks`` contributions (chunk k: tsi k, slot k % slots, copy
(k // slots) % 2), paced at ``--rate`` total frames/s or unpaced (0).  The
main process counts the results coming back.  Prints

``BMv2 simple_switch: N contributions/s (M processed of S sent, loss L%, R results)``

N = contributions the switch processed (its stats counter) / time from the
first send to the last result seen; loss = sent frames the switch never
counted.  Compare with the "data plane end to end" line of bench/model.py.
Needs root, simple_switch, simple_switch_CLI and p4c-bm2-ss.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from afpacket import bmv2_commands

from p4gen import wire as W
from p4gen.errors import P4genError
from p4gen.filewrite import open_work_log
from p4gen.host import packet as P
from p4gen.switch.model import WorkerAddr, job_config
from p4gen.plan import Plan

SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
JOB = 1
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
_libc = ctypes.CDLL(None, use_errno=True)


def sh(*cmd, check=True, **kw):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True, **kw)


def enter(ns: str) -> None:
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)


def psock(dev: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((dev, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    return s


def sender(ns: str, dev: str, frames: list[bytes], rate: float, start: float, q) -> None:
    enter(ns)
    s = psock(dev)
    while time.time() < start:
        time.sleep(0.001)
    sent = 0
    t0 = time.perf_counter()
    for i, f in enumerate(frames):
        if rate > 0:
            due = t0 + i / rate
            while time.perf_counter() < due:
                pass
        try:
            s.send(f)
            sent += 1
        except (BlockingIOError, OSError):
            pass
    q.put(sent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=4000, help="contributions per worker (default 4000)")
    ap.add_argument("--rate", type=float, default=0, help="total frames/s over both senders; 0: unpaced")
    ap.add_argument("--slots", type=int, default=512)
    ap.add_argument("--elements", type=int, default=64)
    ap.add_argument("--quiet", type=float, default=2.0, help="s without a result that ends the run")
    a = ap.parse_args()
    missing = [t for t in ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        print(f"bench/bmv2.py needs root and {', '.join(missing) or 'BMv2'} on PATH", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="p4gen-bmv2-bench-"))
    out = tmp / "build"
    r = sh(sys.executable, "-m", "p4gen.cli", "build", "--target", "bmv2", "--slots", str(a.slots), "--elements", str(a.elements),
           "--workers", "2", "--variant", "hardened", "--compile", "--out", str(out), check=False)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        return 1
    plan = Plan.load(out / "plan.json")
    L = W.FrameLayout(plan)
    slot_bits = int(plan.params.slot_bits)

    tag = secrets.token_hex(3)
    ns, pre = f"p4gtest-bm-{tag}", f"p4gt{tag}"
    proc = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sh("ip", "netns", "add", ns)
        ex = lambda *c, **kw: sh("ip", "netns", "exec", ns, *c, **kw)  # noqa: E731
        ex("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        ex("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
        ex("ip", "link", "set", "lo", "up")
        for k in (1, 2):
            ex("ip", "link", "add", f"{pre}{k}s", "type", "veth", "peer", "name", f"{pre}{k}h")
            for d in (f"{pre}{k}s", f"{pre}{k}h"):
                ex("ip", "link", "set", d, "mtu", "9000")
                ex("ip", "link", "set", d, "up")
                ex("ethtool", "-K", d, "rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                   check=False)
        thrift = 9090 + secrets.randbelow(20000)
        log = open_work_log(tmp / "simple_switch.out", P4genError)
        proc = subprocess.Popen(["ip", "netns", "exec", ns, "simple_switch", "-i", f"1@{pre}1s", "-i", f"2@{pre}2s",
                                 "--thrift-port", str(thrift), "--device-id", "7", str(out / "program.json")],
                                stdout=log, stderr=subprocess.STDOUT)
        probe = f"import socket; socket.create_connection(('127.0.0.1', {thrift}), 0.5).close()"
        deadline = time.monotonic() + 15
        while ex("python3", "-c", probe, check=False).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                print(f"simple_switch did not start; see {tmp / 'simple_switch.out'}", file=sys.stderr)
                return 1
            time.sleep(0.1)

        def cli(cmds):
            return ex("simple_switch_CLI", "--thrift-port", str(thrift), input="\n".join(cmds) + "\n").stdout

        ws = [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in (1, 2)]
        cfg = job_config(plan, JOB, ws, mgid=1, rid_base=1)
        cli(bmv2_commands(plan, cfg))

        rng = np.random.default_rng(1)
        frames = []
        for w in ws:
            src = P.Endpoint(w.mac, w.ip, w.udp_port)
            vals = rng.integers(0, 1 << 20, size=L.elements, dtype=np.uint64)
            frames.append([P.contribution_frame(L, src, SWITCH, job=JOB, tsi=k,
                                                pool_index=((k // a.slots) % 2) << slot_bits | (k % a.slots),
                                                exponent=0, values=vals) for k in range(a.chunks)])

        # receivers in this process, inside the namespace
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        enter(ns)
        rx = [psock(f"{pre}{k}h") for k in (1, 2)]
        _libc.setns(own, CLONE_NEWNET)
        os.close(own)
        time.sleep(0.2)
        q = mp.Queue()
        start = time.time() + 0.5
        ps = [mp.Process(target=sender, args=(ns, f"{pre}{k + 1}h", frames[k], a.rate / 2, start, q))
              for k in range(2)]
        for p in ps:
            p.start()
        results, last = 0, None
        while True:
            r_, _, _ = select.select(rx, [], [], a.quiet)
            if not r_:
                if all(not p.is_alive() for p in ps) and time.time() > start:
                    break
                continue
            for s in r_:
                data, addr = s.recvfrom(65535)
                if addr[2] == PACKET_OUTGOING or len(data) < L.fixed_len:
                    continue
                if data[12:14] == b"\x08\x00" and L.udp_port_min <= int.from_bytes(data[34:36], "big") <= L.udp_port_max:
                    results += 1
                    last = time.time()
        sent = sum(q.get() for _ in ps)
        for p in ps:
            p.join()
        out_txt = cli([f"counter_read P4genIngress.stats {i}" for i in range(len(plan.stats))])
        counts = {int(i): int(pk) for i, _b, pk in re.findall(r"stats\[(\d+)\]=\s*\((\d+) bytes, (\d+) packets\)",
                                                              out_txt)}
        names = list(plan.stats)
        per = {names[i]: c for i, c in counts.items() if c}
        processed = sum(c for n, c in per.items() if not n.startswith("l2_"))
        if last is None:
            print(f"BMv2 simple_switch: no results came back ({per}); see {tmp / 'simple_switch.out'}")
            return 1
        secs = last - start
        loss = 100.0 * (1 - processed / max(sent, 1))
        offered = "unpaced" if a.rate <= 0 else f"paced at {a.rate:,.0f} frames/s"
        print(f"BMv2 simple_switch: {processed / secs:,.0f} contributions/s ({processed} processed of {sent} sent, "
              f"loss {loss:.2f}%, {results} results, {len(frames[0][0])}-byte frames, 2 sender processes, "
              f"{offered}, {secs:.2f} s)  stats {per}")
        return 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        sh("ip", "netns", "delete", ns, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
