"""Throughput of the switch model and of the software data plane.

    python bench/model.py [--quick] [--no-afpacket]

In-process (one core): SwitchModel.process frame by frame and
SwitchModel.process_batch (64 and 256 frames per call: the vectorised batch
path), for 64 and 256 elements per packet and 2..32 workers; every worker sends every chunk once, so each chunk
is n-1 absorbed packets and one multicast of n results.  Two references are
measured at the same time, since this machine's speed varies with its load:
a bare Python loop and a naive numpy slot update (frombuffer + in-place add
into a register row, 64 elements, no parsing or decision).  The load
average (os.getloadavg) is printed before and after, since the figures
scale with the share of a core this process gets.

AF_PACKET (root only, in a private network namespace): raw frames between
two veth ends with nothing in between, and contributions forwarded by
``python -m p4gen.dataplane`` (rate from its counters).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from p4gen import packet as P
from p4gen.model import SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def addrs(n):
    return [WorkerAddr(1 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(n)]


def frames_for(plan, n, chunks, slots):
    L = P.Layout(plan)
    ws = addrs(n)
    vals = np.arange(L.elements)
    out = []
    for c in range(chunks):
        pool = (((c // slots) & 1) << 15) | (c % slots)
        for a in ws:
            out.append((P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SWITCH, job=1, tsi=c,
                                             pool_index=pool, exponent=127, values=vals), a.port))
    return out


def calibrate() -> tuple[float, float]:
    t = time.perf_counter()
    x = 0
    for i in range(300_000):
        x += i
    loop_ns = (time.perf_counter() - t) / 300_000 * 1e9
    regs = np.zeros((1024, 64), dtype=np.uint32)
    frame = bytes(51) + np.arange(64, dtype=">u4").tobytes()
    n = 50_000
    t = time.perf_counter()
    for i in range(n):
        row = regs[i & 1023]
        np.add(row, np.frombuffer(frame, ">u4", 64, 51), out=row, casting="unsafe")
    naive = n / (time.perf_counter() - t)
    return loop_ns, naive


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"


def bench_inprocess(quick: bool) -> None:
    print(f"in-process model, one core; {load()}")
    loop_ns, naive = calibrate()
    print(f"reference (same run): bare Python loop {loop_ns:.0f} ns/iteration; naive numpy slot update "
          f"(frombuffer + add, 64 x 32-bit, no parsing or decision) {naive:,.0f} updates/s")
    print(f"{'elements':>8} {'workers':>7} {'mode':>10} {'packets/s':>12} {'elements/s':>14}  outcome "
          f"(model packets in per second of one core: process = frame by frame, batchN = process_batch of N)")
    for epp in (64, 256):
        slots = 64
        plan = make_plan(make_spec(slots=slots, elements_per_packet=epp, variant="hardened"), load_target("bmv2"))
        for n in (2, 4, 8, 16, 32):
            total = 2000 if quick else 8000
            chunks = max(2, total // n)
            frames = frames_for(plan, n, chunks, slots)
            for mode in ("process", "batch64", "batch256"):
                m = SwitchModel(plan)
                m.load_config(job_config(plan, 1, addrs(n)))
                t = time.perf_counter()
                if mode == "process":
                    for f, p in frames:
                        m.process(f, p)
                else:
                    b = int(mode[5:])
                    for k in range(0, len(frames), b):
                        m.process_batch(frames[k:k + b])
                dt = time.perf_counter() - t
                pps = len(frames) / dt
                st = m.stats
                print(f"{epp:>8} {n:>7} {mode:>10} {pps:>12,.0f} {pps * epp:>14,.0f}  "
                      f"absorbed={st['absorbed']} multicast={st['multicast']}")
    loop_ns, naive = calibrate()
    print(f"reference again: bare Python loop {loop_ns:.0f} ns/iteration; naive numpy slot update "
          f"{naive:,.0f} updates/s; {load()}")


# -- AF_PACKET -----------------------------------------------------------------------
RAW_SEND = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((sys.argv[1], 0))
r = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); r.bind((sys.argv[2], 0))
r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24); r.settimeout(0.5)
frame = bytes.fromhex("02000000000202000000000188b5") + bytes(int(sys.argv[4]) - 14)
n = int(sys.argv[3]); got = 0
t = time.perf_counter()
for i in range(n):
    s.send(frame)
    if i % 32 == 31:
        while True:
            try:
                r.setblocking(False); d, a = r.recvfrom(65536)
            except BlockingIOError:
                break
            if a[2] != 4: got += 1
r.setblocking(True)
try:
    while got < n:
        d, a = r.recvfrom(65536)
        if a[2] != 4: got += 1
except OSError:
    pass
print(n, got, time.perf_counter() - t)
"""

AGG_SEND = r"""
import socket, sys, time, json
frames = json.load(open(sys.argv[1]))
socks = {}
for ifname in set(f[1] for f in frames):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((ifname, 0)); socks[ifname] = s
t = time.perf_counter()
for hexframe, ifname in frames:
    socks[ifname].send(bytes.fromhex(hexframe))
print(time.perf_counter() - t)
"""


def _sh(*a, check=True):
    return subprocess.run(a, check=check, capture_output=True, text=True)


def bench_afpacket(quick: bool) -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("AF_PACKET: skipped (needs root and iproute2 for a private network namespace)")
        return
    ns = f"p4gbench-{uuid.uuid4().hex[:8]}"
    tmp = Path(tempfile.mkdtemp(prefix="p4gbench-"))
    dp = None
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", check=False)
        for i in range(2):
            _sh("ip", "-n", ns, "link", "add", f"w{i}", "type", "veth", "peer", "name", f"s{i}")
            _sh("ip", "-n", ns, "link", "set", f"w{i}", "up")
            _sh("ip", "-n", ns, "link", "set", f"s{i}", "up")
        n = 20000 if quick else 100000
        plan = make_plan(make_spec(slots=64, elements_per_packet=64, variant="hardened"), load_target("bmv2"))
        size = P.Layout(plan).frame_len
        out = _sh("ip", "netns", "exec", ns, sys.executable, "-c", RAW_SEND, "w0", "s0", str(n), str(size))
        sent, got, dt = out.stdout.split()
        print(f"{load()}")
        print(f"AF_PACKET raw (no model), veth w0 -> s0, {size}-byte frames, Python send + recv in one process: "
              f"{int(got) / float(dt):,.0f} frames/s received ({got}/{sent})")
        # the data plane between two veth pairs: 2 workers, every chunk absorbed then multicast
        (tmp / "plan.json").write_text(plan.to_json())
        ws = addrs(2)
        (tmp / "cfg.json").write_text(json.dumps(job_config(plan, 1, ws)))
        frames = frames_for(plan, 2, n // 4, 64)
        (tmp / "frames.json").write_text(json.dumps([(f.hex(), f"w{p - 1}") for f, p in frames]))
        stats = tmp / "stats.json"
        dp = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "p4gen.dataplane",
                               "--plan", str(tmp), "--config", str(tmp / "cfg.json"), "--stats", str(stats),
                               "--stats-interval", "0.05", "--port", "1=s0", "--port", "2=s1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(200):
            if stats.exists():
                break
            time.sleep(0.05)
        sender = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", AGG_SEND,
                                   str(tmp / "frames.json")], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        samples = []                     # (data plane's clock, contributions processed)
        while True:
            time.sleep(0.05)
            s = json.loads(stats.read_text())
            done = s["stats"]["absorbed"]["packets"] + s["stats"]["multicast"]["packets"]
            samples.append((s["time"], done))
            if sender.poll() is not None and len(samples) > 20 and samples[-20][1] == done:
                break
        busy = [(t, d) for t, d in samples if d > 0]
        if not busy:
            print(f"sender exit {sender.returncode}: {sender.stderr.read().strip()[-500:]}")
            dp.terminate()
            print(f"AF_PACKET data plane: no contribution was processed; counters {s}; data plane said: "
                  f"{dp.communicate(timeout=10)[1].decode(errors='replace').strip()[-2000:]}")
            return
        first = busy[0]
        last = next(x for x in busy if x[1] == busy[-1][1])
        rate = (last[1] - first[1]) / max(last[0] - first[0], 1e-9)
        print(f"AF_PACKET data plane (python -m p4gen.dataplane), 2 workers on two veth pairs, {size}-byte "
              f"contributions sent by a second process: {rate:,.0f} contributions/s processed "
              f"({last[1]} of {len(frames)} arrived; "
              f"{s['ports']['1']['tx'] + s['ports']['2']['tx']} results sent)")
    finally:
        if dp is not None:
            dp.terminate()
            try:
                dp.wait(10)
            except subprocess.TimeoutExpired:
                dp.kill()
        _sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer packets")
    ap.add_argument("--no-afpacket", action="store_true")
    args = ap.parse_args(argv)
    bench_inprocess(args.quick)
    if not args.no_afpacket:
        bench_afpacket(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
