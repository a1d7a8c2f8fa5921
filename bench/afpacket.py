"""The end-to-end part of bench/model.py: switches under test between veth pairs in a private namespace.

``Netns`` makes the namespace (``p4gtest-bench-*``) with one veth pair
``w<i>`` (worker end) / ``s<i>`` (switch end) per worker, and removes it on
exit, exception or SIGTERM.  One sender process per worker sends that
worker's frames (all built beforehand, so a sender costs only its I/O) on
``w<i>``, paced or unpaced, and counts the results that come back:

* ``io="rings"``: the senders write batches of up to 256 frames into a
  TPACKET_V3 transmit ring and flush each with one ``send``; results are
  counted from the receive ring's block headers
  (:class:`p4gen.netio.rings.RingSocket`);
* ``io="sockets"``: one ``send``/``recv`` system call per frame
  (:class:`p4gen.netio.frames.SocketPort`), as the data plane's fallback.

:func:`dp_run` runs ``python -m p4gen.switch.dataplane`` (with
``--no-rings`` for ``io="sockets"``) and takes its rate from its own
counters; :func:`bmv2_run` runs ``simple_switch`` on the same namespace,
program and frames and takes its rate from its counters and the senders'
clocks (first frame sent to last result back).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from p4gen.errors import P4genError
from p4gen.filewrite import WORK, open_work_log, write_file

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


SENDER = r"""
import json, os, select, sys, time
import numpy as np
from p4gen.errors import P4genError
from p4gen.filewrite import WORK, write_file
from p4gen.netio.frames import open_port
ifname, path, flen, rate, go, mark, io, window = sys.argv[1:9]
flen, rate, window = int(flen), float(rate), int(window)
frames = np.fromfile(path, np.uint8).reshape(-1, flen)      # the rows of one matrix: no bytes object per frame
port, why = open_port(ifname, rings=io == "rings", rx_bytes=32 << 20, tx_frames=4096)
poll = select.poll()
poll.register(port.fileno(), select.POLLIN)
got = 0
last_back = None
def drain():
    global got, last_back
    k = port.discard(1 << 20)
    if k:
        got += k
        last_back = time.time()
write_file(mark + ".ready", b"", WORK, "mark", P4genError)      # set up: wait for every sender, then start together
while not os.path.exists(go):
    time.sleep(0.0005)
t0 = time.perf_counter(); first = time.time(); n = len(frames); k = err = 0
stalled = False
progress = time.monotonic()
while k < n:
    due = n if rate <= 0 else min(n, int((time.perf_counter() - t0) * rate) + 1)
    if window > 0:                       # closed loop: at most `window` frames without their result back
        due = min(due, got + window)
    while k < due:
        q, r = port.send(frames[k:min(due, k + 256)])
        k += q + r
        err += r
        drain()
        progress = time.monotonic()
    if k < n:
        if window > 0 and k >= got + window:
            poll.poll(1)                 # the window is full: wait for results
            before = got
            drain()
            if got > before:
                progress = time.monotonic()
            elif time.monotonic() - progress > 2.0:
                stalled = True           # results stopped coming (frames lost): the window never reopens
                break
        else:
            time.sleep(0.0005)
deadline = time.monotonic() + 10
while port.pending() and time.monotonic() < deadline:     # frames a full send buffer left in the ring
    port.flush()
    drain()
    time.sleep(0.0002)
dt = time.perf_counter() - t0
write_file(mark, b"", WORK, "mark", P4genError)                 # tell the bench that every frame is out
quiet = time.monotonic()
while time.monotonic() - quiet < 1.0:    # results until none came for 1 s (a block is ready: the poll returns)
    before = got
    poll.poll(10)
    drain()
    if got > before:
        quiet = time.monotonic()
print(json.dumps({"sent": k - err, "err": err, "send_s": dt, "back": got, "first": first, "last_back": last_back,
                  "io": port.kind, "why": why, "stalled": stalled}))
"""


def sh(*a, check=True, **kw):
    return subprocess.run(a, check=check, capture_output=True, text=True, **kw)


class Netns:
    """A network namespace with ``pairs`` veth pairs w<i> / s<i>, up, IPv6 off; removed on exit."""

    def __init__(self, pairs: int):
        self.name = f"p4gtest-bench-{uuid.uuid4().hex[:8]}"
        self.pairs = pairs
        self._old = None

    def __enter__(self) -> "Netns":
        def on_term(*_a):                # so __exit__ removes the namespace on SIGTERM too
            raise KeyboardInterrupt

        self._old = signal.signal(signal.SIGTERM, on_term)
        try:
            sh("ip", "netns", "add", self.name)
            for k in ("all", "default"):
                self.ex("sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1", check=False)
            self.ex("ip", "link", "set", "lo", "up")
            for i in range(self.pairs):
                sh("ip", "-n", self.name, "link", "add", f"w{i}", "type", "veth", "peer", "name", f"s{i}")
                sh("ip", "-n", self.name, "link", "set", f"w{i}", "up")
                sh("ip", "-n", self.name, "link", "set", f"s{i}", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def ex(self, *cmd, **kw):
        return sh("ip", "netns", "exec", self.name, *cmd, **kw)

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.name, *cmd], **kw)

    def __exit__(self, *_exc) -> None:
        sh("ip", "netns", "del", self.name, check=False)
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
            self._old = None


def start_senders(ns: Netns, tmp: Path, blobs: list[bytes], size: int, rate: float, io: str, window: int = 0):
    """One sender process per worker blob at ``rate`` frames/s each (0: unpaced), all starting together
    once every one has its socket open (so that no sender runs ahead of another by a slot pool).
    ``window`` > 0: each sender keeps at most that many frames without a result back (a closed loop)."""
    go = tmp / "go"
    go.unlink(missing_ok=True)
    marks = [tmp / f"sent{w}" for w in range(len(blobs))]
    for w, (m, blob) in enumerate(zip(marks, blobs)):
        m.unlink(missing_ok=True)
        Path(f"{m}.ready").unlink(missing_ok=True)
        write_file(tmp / f"w{w}.bin", blob, WORK, "sender frames", P4genError)
    procs = [ns.popen([sys.executable, "-c", SENDER, f"w{w}", str(tmp / f"w{w}.bin"), str(size), str(max(rate, 0.0)),
                       str(go), str(marks[w]), io, str(window)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(len(blobs))]
    deadline = time.monotonic() + 60
    while not all(Path(f"{m}.ready").exists() for m in marks):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            raise RuntimeError("a sender did not start: " + " ".join(p.stderr.read()[-300:] for p in procs
                                                                     if p.poll() is not None))
        time.sleep(0.01)
    go.touch()
    return procs, marks


def sender_totals(outs) -> dict:
    tot = {"sent": 0, "err": 0, "send_s": 0.0, "back": 0, "first": None, "last_back": None, "io": set(),
           "stalled": 0}
    for out, err in outs:
        try:
            r = json.loads(out)
        except ValueError:
            raise RuntimeError(f"a sender failed: {err.strip()[-500:]}") from None
        tot["sent"] += r["sent"]
        tot["err"] += r["err"]
        tot["back"] += r["back"]
        tot["stalled"] += bool(r["stalled"])
        tot["send_s"] = max(tot["send_s"], r["send_s"])
        tot["io"].add(r["io"])
        tot["first"] = r["first"] if tot["first"] is None else min(tot["first"], r["first"])
        if r["last_back"] is not None:
            tot["last_back"] = r["last_back"] if tot["last_back"] is None else max(tot["last_back"], r["last_back"])
    return tot


def dp_run(ns: Netns, tmp: Path, size: int, blobs: list[bytes], rate: float, io: str, ring_mb: int,
           window: int = 0) -> dict:
    """Start the data plane, let one sender process per worker send its frames at ``rate`` frames/s
    (0: as fast as it can), and return the rate and the counters.

    ``rate < 0``: the data plane is stopped (SIGSTOP) while the senders fill its receive rings (or socket
    buffers) as fast as they can, then continued; the rate is then its own, with no sender competing for
    the CPU."""
    drain = rate < 0
    stats = tmp / "stats.json"
    stats.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "p4gen.switch.dataplane", "--plan", str(tmp), "--config", str(tmp / "cfg.json"),
            "--stats", str(stats), "--stats-interval", "0.02", "--ring-mb", str(ring_mb)]
    argv += ["--no-rings"] if io == "sockets" else []
    argv += [a for w in range(len(blobs)) for a in ("--port", f"{w + 1}=s{w}")]
    dp = ns.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    senders = []
    try:
        for _ in range(200):
            if stats.exists() or dp.poll() is not None:
                break
            time.sleep(0.05)
        if drain:
            dp.send_signal(signal.SIGSTOP)        # `ip netns exec` execs python: this is the data plane
        senders, marks = start_senders(ns, tmp, blobs, size, rate, io, window)
        t_cont = None
        if drain:
            while not all(m.exists() for m in marks) and any(p.poll() is None for p in senders):
                time.sleep(0.01)
            t_cont = time.time()
            dp.send_signal(signal.SIGCONT)
        samples = []                     # (data plane's clock, contributions processed)
        s = None
        total = sum(len(b) for b in blobs) // size
        moved = time.monotonic()
        while True:
            time.sleep(0.02)
            try:
                s = json.loads(stats.read_text())
            except (OSError, ValueError):
                continue
            done = sum(s["stats"][k]["packets"] for k in s["stats"] if k != "agg_rx")
            samples.append((s["time"], done))
            if done >= total:
                break
            if len(samples) == 1 or done != samples[-2][1]:
                moved = time.monotonic()
            # every sender done and no progress for 2 s (a loaded machine may stall the data plane for a while)
            if all(p.poll() is not None for p in senders) and time.monotonic() - moved > 2.0:
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
    if dp.returncode != 0:
        raise RuntimeError(f"the data plane exited with {dp.returncode}: {err[-1500:]}")
    if s is None:
        raise RuntimeError(f"the data plane wrote no counters: {err[-1000:]}")
    tot = sender_totals(outs)
    ports = s["ports"].values()
    st = {k: v["packets"] for k, v in s["stats"].items() if v["packets"]}
    processed = sum(v for k, v in st.items() if k != "agg_rx")
    # from the first frame sent (draining: from the moment the data plane continued) to the last result back,
    # on the senders' clocks; and the same from the data plane's counter samples (coarser: a busy data plane
    # writes its counters every few rounds)
    start = t_cont if t_cont is not None else tot["first"]
    rate = processed / max(tot["last_back"] - start, 1e-9) if tot["last_back"] is not None and start else 0.0
    counted = 0.0
    busy = [(t, d) for t, d in samples if d > 0]
    if busy and start:
        last = next(x for x in busy if x[1] == busy[-1][1])
        counted = last[1] / max(last[0] - start, 1e-9)
    return {"rate": rate, "counter_rate": counted, "clock_rate": _clock_rate(processed, tot), "stats": st,
            "processed": processed, "rx": sum(p["rx"] for p in ports), "tx": sum(p["tx"] for p in ports),
            "rx_dropped": sum(p.get("rx_dropped", 0) for p in ports), "tx_errors": s.get("tx_errors", 0),
            "dp_io": sorted({p.get("io", "socket") for p in ports}), "note": _io_note(err), **tot}


def _clock_rate(processed: int, tot: dict) -> float:
    """Contributions per second from the first frame sent to the last result back (senders' clocks)."""
    if tot["first"] is None or tot["last_back"] is None:
        return 0.0
    return processed / max(tot["last_back"] - tot["first"], 1e-9)


def _io_note(stderr: str) -> str | None:
    return next((ln for ln in stderr.splitlines() if "packet rings unavailable" in ln), None)


# -- BMv2 ------------------------------------------------------------------------------------
def bmv2_available() -> str | None:
    """None when simple_switch, simple_switch_CLI and p4c-bm2-ss are on PATH, else what is missing."""
    missing = [t for t in ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss") if shutil.which(t) is None]
    return ", ".join(missing) + " not on PATH" if missing else None


def bmv2_build() -> str:
    """Which simple_switch this is: its path, version and whether its logging macros are compiled out."""
    exe = shutil.which("simple_switch")
    ver = sh(exe, "--version", check=False).stdout.strip() or "unknown version"
    # a build configured with --disable-logging-macros has no per-packet log calls; its help then has
    # no effect on logging, so the build's own config is the evidence: bm_config.h / the env's notes
    info = []
    root = Path(exe).resolve().parent.parent
    for cfg in (root / "include" / "bm" / "config.h", root / "include" / "bm" / "bm_sim" / "config.h"):
        if cfg.exists():
            txt = cfg.read_text(errors="replace")
            on = re.search(r"^#define\s+(BM_)?LOG_(DEBUG|TRACE)_ON\b", txt, re.M)
            info.append("logging macros on (debug build)" if on else
                        f"logging macros off: {cfg} leaves LOG_DEBUG_ON and LOG_TRACE_ON undefined, "
                        "as --disable-logging-macros does")
            break
    return f"{exe} ({ver}{'; ' + info[0] if info else ''})"


def bmv2_run(ns: Netns, tmp: Path, program_json: Path, plan, cfg: dict, size: int, blobs: list[bytes],
             rate: float, window: int = 0) -> dict:
    """simple_switch on s0..s<n-1> with ``cfg`` loaded through simple_switch_CLI, the same senders."""
    import secrets

    thrift = 9090 + secrets.randbelow(20000)
    log = open_work_log(tmp / "simple_switch.out", P4genError)
    ifs = [a for w in range(len(blobs)) for a in ("-i", f"{w + 1}@s{w}")]
    proc = ns.popen(["simple_switch", *ifs, "--thrift-port", str(thrift), "--device-id", "7", str(program_json)],
                    stdout=log, stderr=subprocess.STDOUT)
    senders = []
    try:
        probe = f"import socket; socket.create_connection(('127.0.0.1', {thrift}), 0.5).close()"
        deadline = time.monotonic() + 15
        while ns.ex(sys.executable, "-c", probe, check=False).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"simple_switch did not start; see {tmp / 'simple_switch.out'}")
            time.sleep(0.1)

        def cli(cmds):
            return ns.ex("simple_switch_CLI", "--thrift-port", str(thrift), input="\n".join(cmds) + "\n").stdout

        cli(bmv2_commands(plan, cfg))
        senders, marks = start_senders(ns, tmp, blobs, size, rate, "rings", window)
        outs = [p.communicate(timeout=600) for p in senders]
        counts = bmv2_counters(cli, plan)
    finally:
        for p in senders:
            if p.poll() is None:
                p.kill()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    tot = sender_totals(outs)
    processed = sum(c for n, c in counts.items() if not n.startswith("l2_") and n != "agg_rx")
    return {"clock_rate": _clock_rate(processed, tot), "processed": processed, "stats": counts, **tot}


def bmv2_commands(plan, cfg: dict) -> list[str]:
    """simple_switch_CLI commands for a job_config: table entries and the multicast group."""
    tables = {t.name: t for t in plan.tables}
    acts = {x.name: x.params for x in plan.actions}
    cmds = []
    for t, es in cfg["tables"].items():
        c = "P4genEgress" if t == "result_dst" else "P4genIngress"
        for e in es:
            keys = " ".join(str(int(e["match"][k.name])) for k in tables[t].keys)
            vals = " ".join(str(int(e["params"][q.name])) for q in acts[e["action"]])
            cmds.append(f"table_add {c}.{t} {c}.{e['action']} {keys} => {vals}")
    for mgid, reps in cfg["groups"].items():
        cmds.append(f"mc_mgrp_create {mgid}")
        base = len([c for c in cmds if c.startswith("mc_node_create")])
        cmds += [f"mc_node_create {rid} {port}" for port, rid in reps]
        cmds += [f"mc_node_associate {mgid} {base + h}" for h in range(len(reps))]
    return cmds


def bmv2_counters(cli, plan) -> dict[str, int]:
    names = list(plan.stats)
    out = cli([f"counter_read P4genIngress.stats {i}" for i in range(len(names))])
    counts = {int(i): int(pk) for i, _b, pk in re.findall(r"stats\[(\d+)\]=\s*\((\d+) bytes, (\d+) packets\)", out)}
    return {names[i]: c for i, c in counts.items() if c}


def loadavg() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} cores"
