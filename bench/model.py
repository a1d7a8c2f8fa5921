"""Throughput of the switch model and of the software data plane.

    python bench/model.py [--quick] [--no-afpacket]

In-process (one core): SwitchModel.process frame by frame and
SwitchModel.process_batch (64, 256 and 1024 frames per call: the vectorised
batch path), for 64 and 256 elements per packet and 2..32 workers; every
worker sends every chunk once, so each chunk is n-1 absorbed packets and one
multicast of n results.  The data plane hands each round's frames to one
process_batch call, up to 512 per busy port (so 1024 is a round with two
busy ports).  A batch costs a fixed time (over a hundred numpy calls) plus
a time per frame, so larger batches run faster.  The last lines compare the
slowest worker count of each batch size, at 64 elements, with the goal of
200,000 packets/s (as a ratio).  Each in-process figure is the fastest of
three runs on a fresh model, since other work shares this machine.  Two
references are measured at the same time, since this machine's speed
varies with its load: a bare Python loop and a naive numpy slot update
(frombuffer + in-place add into a register row, 64 elements, no parsing or
decision).  The load
average (os.getloadavg) is printed before and after, since the figures
scale with the share of a core this process gets.

AF_PACKET (root only, in a private network namespace named p4gtest-bench-*,
removed on exit, exception or SIGTERM): raw frames between two veth ends with
nothing in between, then ``python -m p4gen.switch.dataplane`` between two veth pairs
with one sender process per worker, paced at each of ``--rates`` total frames/s
(0: as fast as the senders go; -1: the data plane is stopped while the senders
fill its socket buffers, then drains them with the CPU to itself).  Each run
prints one line
``data plane end to end: N contributions/s (M frames in, K out, loss L%)``:
N from the data plane's counters (first to last processed frame), loss = sent
frames the data plane never processed.  The load average and a bare-loop
reference are printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

GOAL_PPS = 200_000
REPEATS = 3               # each in-process figure is the fastest of this many runs (the machine is shared)
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def addrs(n):
    return [WorkerAddr(1 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(n)]


def frames_for(plan, n, chunks, slots):
    L = W.Layout(plan)
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
          f"(model packets in per second of one core, fastest of {REPEATS} runs: process = frame by frame, "
          f"batchN = process_batch of N)")
    slowest: dict[str, tuple[float, int]] = {}
    for epp in (64, 256):
        slots = 64
        plan = make_plan(make_spec(slots=slots, elements_per_packet=epp, variant="hardened"), load_target("bmv2"))
        for n in (2, 4, 8, 16, 32):
            total = 4096 if quick else 16384
            chunks = max(2, total // n)
            frames = frames_for(plan, n, chunks, slots)
            for mode in ("process", "batch64", "batch256", "batch1024"):
                best = None
                for _rep in range(REPEATS):          # a fresh model each time; the fastest counts
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
                    best = dt if best is None else min(best, dt)
                pps = len(frames) / best
                st = m.stats
                print(f"{epp:>8} {n:>7} {mode:>10} {pps:>12,.0f} {pps * epp:>14,.0f}  "
                      f"absorbed={st['absorbed']} multicast={st['multicast']}")
                if epp == 64 and (mode not in slowest or pps < slowest[mode][0]):
                    slowest[mode] = (pps, n)
    for mode, (pps, n) in slowest.items():
        print(f"64 elements, {mode}: slowest worker count n={n} at {pps:,.0f} packets/s = "
              f"{pps / GOAL_PPS:.2f}x the goal of {GOAL_PPS:,} packets/s per core")
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

WORKER_SEND = r"""
import socket, sys, time
ifname, path, flen, rate, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
data = open(path, "rb").read()
frames = [data[i:i + flen] for i in range(0, len(data), flen)]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
try:
    s.setsockopt(263, 23, 1)                # PACKET_IGNORE_OUTGOING: count only the results coming back
except OSError:
    pass
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 26)
s.bind((ifname, 3)); s.setblocking(False)
send, recv = s.send, s.recv
got = err = 0
def drain():
    global got
    try:
        while True:
            recv(65536); got += 1
    except BlockingIOError:
        pass
while time.time() < start:
    time.sleep(0.0005)
t0 = time.perf_counter(); n = len(frames); k = 0
while k < n:
    due = n if rate <= 0 else min(n, int((time.perf_counter() - t0) * rate) + 1)
    while k < due:
        try:
            send(frames[k])
        except BlockingIOError:
            time.sleep(0.0002); continue
        except OSError:
            err += 1
        k += 1
        if k % 64 == 0:
            drain()
    drain()
    if k < n:
        time.sleep(0.0005)
dt = time.perf_counter() - t0
if len(sys.argv) > 6:                       # tell the bench that every frame is out
    open(sys.argv[6], "w").close()
last = time.monotonic()
while time.monotonic() - last < 1.0:        # results until none came for 1 s
    before = got
    drain()
    if got > before:
        last = time.monotonic()
    time.sleep(0.01)
print(n, err, dt, got)
"""


def _sh(*a, check=True):
    return subprocess.run(a, check=check, capture_output=True, text=True)


def _worker_frames(plan, n_workers: int, chunks: int, slots: int) -> list[bytes]:
    """One blob per worker: its contribution for every chunk, in chunk order (fixed frame length)."""
    blobs = [[] for _ in range(n_workers)]
    for f, port in frames_for(plan, n_workers, chunks, slots):
        blobs[port - 1].append(f)
    return [b"".join(b) for b in blobs]


def _dp_run(ns: str, tmp: Path, size: int, blobs: list[bytes], rate: float) -> dict:
    """Start the data plane, let one sender process per worker send its frames at ``rate`` frames/s
    (0: as fast as it can), and return the rate and the counters.

    ``rate < 0``: the data plane is stopped (SIGSTOP) while the senders fill its socket buffers as fast
    as they can, then continued; the rate is then its own, with no sender competing for the CPU."""
    drain = rate < 0
    stats = tmp / "stats.json"
    stats.unlink(missing_ok=True)
    for w, blob in enumerate(blobs):
        (tmp / f"w{w}.bin").write_bytes(blob)
    dp = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp), "--config", str(tmp / "cfg.json"), "--stats", str(stats),
                           "--stats-interval", "0.02"] + [a for w in range(len(blobs))
                                                          for a in ("--port", f"{w + 1}=s{w}")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    senders = []
    try:
        for _ in range(200):
            if stats.exists() or dp.poll() is not None:
                break
            time.sleep(0.05)
        start = time.time() + 0.5
        marks = [tmp / f"sent{w}" for w in range(len(blobs))]
        for m in marks:
            m.unlink(missing_ok=True)
        if drain:
            dp.send_signal(signal.SIGSTOP)        # `ip netns exec` execs python: this is the data plane
        senders = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", WORKER_SEND, f"w{w}",
                                     str(tmp / f"w{w}.bin"), str(size), str(max(rate, 0.0)), str(start),
                                     str(marks[w])],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for w in range(len(blobs))]
        t_cont = None
        if drain:
            while not all(m.exists() for m in marks) and any(p.poll() is None for p in senders):
                time.sleep(0.01)
            t_cont = time.time()
            dp.send_signal(signal.SIGCONT)
        samples = []                     # (data plane's clock, contributions processed)
        s = None
        while True:
            time.sleep(0.02)
            try:
                s = json.loads(stats.read_text())
            except (OSError, ValueError):
                continue
            done = sum(s["stats"][k]["packets"] for k in s["stats"] if k != "agg_rx")
            samples.append((s["time"], done))
            if all(p.poll() is not None for p in senders) and len(samples) > 25 and samples[-25][1] == done:
                break
            if dp.poll() is not None:
                break
        outs = [p.communicate(timeout=30) for p in senders]
    finally:
        for p in senders:
            if p.poll() is None:
                p.kill()
        dp.send_signal(signal.SIGCONT)
        dp.terminate()
        try:
            dp.wait(10)
        except subprocess.TimeoutExpired:
            dp.kill()
            dp.wait()
    err = dp.stderr.read().decode(errors="replace").strip()
    if s is None:
        raise RuntimeError(f"the data plane wrote no counters: {err[-1000:]}")
    sent, send_s, back = 0, 0.0, 0
    for out, serr in outs:
        f = out.split()
        if len(f) != 4:
            raise RuntimeError(f"a sender failed: {serr.strip()[-500:]}")
        sent += int(f[0]) - int(f[1])
        send_s = max(send_s, float(f[2]))
        back += int(f[3])
    busy = [(t, d) for t, d in samples if d > 0]
    rate_out = 0.0
    if busy:
        first = busy[0]
        last = next(x for x in busy if x[1] == busy[-1][1])
        # the first sample already holds what arrived before it: count from the sample before
        prev = samples[samples.index(first) - 1] if samples.index(first) > 0 else (first[0], 0)
        rate_out = (last[1] - prev[1]) / max(last[0] - prev[0], 1e-9)
        if t_cont is not None:
            rate_out = last[1] / max(last[0] - t_cont, 1e-9)
    ports = s["ports"].values()
    st = {k: v["packets"] for k, v in s["stats"].items() if v["packets"]}
    return {"rate": rate_out, "sent": sent, "send_s": send_s, "back": back,
            "rx": sum(p["rx"] for p in ports), "tx": sum(p["tx"] for p in ports),
            "rx_dropped": sum(p.get("rx_dropped", 0) for p in ports), "stats": st,
            "processed": sum(v for k, v in st.items() if k != "agg_rx")}


def bench_afpacket(quick: bool, rates: list[float]) -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("AF_PACKET: skipped (needs root and iproute2 for a private network namespace)")
        return
    ns = f"p4gtest-bench-{uuid.uuid4().hex[:8]}"
    tmp = Path(tempfile.mkdtemp(prefix="p4gbench-"))

    def on_term(*_a):                    # so the finally below removes the namespace on SIGTERM too
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", check=False)
        for i in range(2):
            _sh("ip", "-n", ns, "link", "add", f"w{i}", "type", "veth", "peer", "name", f"s{i}")
            _sh("ip", "-n", ns, "link", "set", f"w{i}", "up")
            _sh("ip", "-n", ns, "link", "set", f"s{i}", "up")
        n = 20000 if quick else 100000
        slots = 1024
        plan = make_plan(make_spec(slots=slots, elements_per_packet=64, variant="hardened"), load_target("bmv2"))
        size = W.Layout(plan).frame_len
        loop_ns, _naive = calibrate()
        print(f"AF_PACKET; {load()}; reference (same run): bare Python loop {loop_ns:.0f} ns/iteration")
        out = _sh("ip", "netns", "exec", ns, sys.executable, "-c", RAW_SEND, "w0", "s0", str(n), str(size))
        sent, got, dt = out.stdout.split()
        print(f"AF_PACKET raw (no model), veth w0 -> s0, {size}-byte frames, Python send + recv in one process: "
              f"{int(got) / float(dt):,.0f} frames/s received ({got}/{sent})")
        # the data plane between two veth pairs: 2 workers, one sender process each, every chunk absorbed
        # then multicast; slots are reused only after `slots` chunks, so senders may drift that far apart
        (tmp / "plan.json").write_text(plan.to_json())
        (tmp / "cfg.json").write_text(json.dumps(job_config(plan, 1, addrs(2))))
        chunks = n // 2
        blobs = _worker_frames(plan, 2, chunks, slots)
        for rate in rates:
            # draining a stopped data plane: as many frames as its receive buffers surely hold
            r = _dp_run(ns, tmp, size, [b[:10000 * size] for b in blobs] if rate < 0 else blobs, rate / 2)
            loss = 100.0 * (r["sent"] - r["processed"]) / max(r["sent"], 1)
            offered = (f"paced at {rate:,.0f} frames/s" if rate > 0 else "senders as fast as they can")
            offered += f", {r['sent'] / max(r['send_s'], 1e-9):,.0f} frames/s offered"
            if rate < 0:
                offered = ("data plane stopped while the senders filled its buffers, then draining them alone; "
                           + offered)
            print(f"data plane end to end: {r['rate']:,.0f} contributions/s ({r['rx']} frames in, {r['tx']} out, "
                  f"loss {loss:.2f}%)  [2 sender processes, {size}-byte frames, {offered}; "
                  f"{r['sent']} sent, kernel rx drops at the data plane {r['rx_dropped']}, "
                  f"{r['back']} results read back by the senders (their own sockets may drop some); "
                  f"counters {r['stats']}]")
        loop_ns, _naive = calibrate()
        print(f"AF_PACKET done; {load()}; reference again: bare Python loop {loop_ns:.0f} ns/iteration")
    finally:
        signal.signal(signal.SIGTERM, old)
        _sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer packets")
    ap.add_argument("--no-afpacket", action="store_true")
    ap.add_argument("--no-inprocess", action="store_true")
    ap.add_argument("--rates", default="25000,40000,0,-1",
                    help="offered contributions/s for the data plane runs, comma-separated (0: unpaced; "
                         "-1: fill the buffers of a stopped data plane, then let it drain them alone)")
    args = ap.parse_args(argv)
    if not args.no_inprocess:
        bench_inprocess(args.quick)
    if not args.no_afpacket:
        bench_afpacket(args.quick, [float(x) for x in args.rates.split(",") if x.strip()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
