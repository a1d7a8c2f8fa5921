"""Soak: back-to-back all-reduces through the AF_PACKET data plane, with loss and a hostile stream beside them.

    python bench/soak.py --minutes 10 [--loss 0.02] [--fuzz-rate 300] [--workers 3] [--elements 6400]

Root only.  Everything runs in a private network namespace
(``p4gsoak-<hex>``, removed on exit, exception or SIGTERM) with one veth
pair per worker; no frame leaves it.  Inside it:

* ``python -m p4gen.switch.dataplane`` with a bmv2 SwitchML hardened plan
  (two jobs' worker tables: the real job 1 and job 2, whose workers only
  the hostile stream claims);
* a job runner: ``--workers`` emulated workers (:class:`p4gen.host.worker.Worker`,
  int mode, so every sum is checked exactly) all-reduce a fresh random
  tensor, job after job, until ``--minutes`` have passed.  Each job
  continues the slots' sequence (``tsi_base = next_tsi_base``), as a
  training job's successive buckets do.  Loss is random and independent:
  each frame a worker sends or receives is dropped with probability
  ``--loss`` (drawn in the runner, since netem is not available here);
* a hostile stream: ``--fuzz-rate`` frames/s of the kinds in
  ``tests/fuzz_frames.py`` (runts, truncated and non-contribution frames
  of registered workers, unknown jobs, unregistered addresses, spoofed
  ports and jobs, slots past the job, lying length fields, other
  protocols) on the workers' links.

It prints jobs completed, jobs that stalled, wrong sums (a result that is
not the exact sum: must be 0), the data plane's counters, and for the data
plane and the job runner the open file descriptors, threads and resident
memory sampled every 30 s: at the start (after a warm-up of a tenth of the
run, at most a minute) and at the end, with the data plane's RSS series.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SWITCH = ("02:00:00:00:00:fe", "10.0.0.254", 48864)
SAMPLE_EVERY = 30.0      # s between samples of fds, threads and RSS
FUZZ_KINDS = ["runt", "truncated", "bad_msg_type", "unknown_job", "unregistered", "wrong_port", "other_job",
              "bad_slot", "wrong_lengths", "not_aggregation"]


def _sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def proc_usage(pid: int) -> dict[str, int]:
    """Open fds, threads and RSS (KiB) of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    get = {ln.split(":")[0]: ln.split(":")[1].split() for ln in status if ":" in ln}
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": int(get["Threads"][0]),
            "rss_kib": int(get["VmRSS"][0])}


# ------------------------------------------------------------------ roles run inside the namespace
def run_jobs(args) -> int:
    """Back-to-back all-reduces until the deadline; one JSON line per job, a summary line at the end."""
    import numpy as np

    from p4gen import wire as W
    from p4gen.host import packet as P
    from p4gen.host.worker import Worker
    from p4gen.plan import Plan

    L = W.FrameLayout(Plan.load(args.plan))
    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    socks = []
    for i in range(args.workers):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((f"w{i}", 0))
        s.setblocking(False)
        socks.append(s)
    poll = select.poll()
    fd2i = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        poll.register(s.fileno(), select.POLLIN)
    switch = P.endpoint(*SWITCH)
    bases = [0] * args.workers
    deadline = time.monotonic() + args.minutes * 60
    jobs = wrong = stalled = 0

    def send(i, frames):
        for f in frames:
            if rng.random() >= args.loss:
                socks[i].send(f)

    while time.monotonic() < deadline:
        tensors = [nrng.integers(0, 1 << 28, size=args.elements, dtype=np.int64) for _ in range(args.workers)]
        expected = np.sum(tensors, axis=0)
        workers = [Worker(L, tensors[i], job=1, window=args.window, n_workers=args.workers,
                          src=P.endpoint(f"02:00:00:00:01:{i:02x}", f"10.0.1.{i + 1}", 41000 + i), dst=switch,
                          mode="int", tsi_base=bases[i], timeout=0.02, max_timeout=0.2)
                   for i in range(args.workers)]
        t0 = now = time.monotonic()
        for i, w in enumerate(workers):
            send(i, w.start(now))
        while not all(w.done for w in workers) and now - t0 < args.job_timeout:
            for fd, _ in poll.poll(10):
                i = fd2i[fd]
                while True:
                    try:
                        frame, addr = socks[i].recvfrom(65536)
                    except BlockingIOError:
                        break
                    if addr[2] == 4 or rng.random() < args.loss:      # our own frame, or lost on the way in
                        continue
                    send(i, workers[i].receive(frame, time.monotonic()))
            now = time.monotonic()
            for i, w in enumerate(workers):
                send(i, w.tick(now))
        ok = all(w.done for w in workers)
        bad = sum(1 for w in workers if w.done and not np.array_equal(w.result().astype(np.int64), expected))
        jobs += ok
        stalled += not ok
        wrong += bad
        if not ok:           # a stalled job leaves its slots mid-sequence: the next job starts on fresh ones
            bases = [b + (1 << 20) for b in bases]
        else:
            bases = [w.next_tsi_base for w in workers]
        print(json.dumps({"job": jobs + stalled, "ok": ok, "wrong": bad, "seconds": round(now - t0, 3),
                          "retransmitted": sum(w.stats.retransmitted for w in workers)}), flush=True)
    print(json.dumps({"summary": True, "jobs": jobs, "stalled": stalled, "wrong_sums": wrong}), flush=True)
    return 0


def run_fuzz(args) -> int:
    """Hostile frames at ``--fuzz-rate`` frames/s until SIGTERM; prints the counts per expected counter."""
    sys.path.insert(0, str(ROOT / "tests"))
    import fuzz_frames as F

    from p4gen import wire as W
    from p4gen.plan import Plan
    from p4gen.switch.model import WorkerAddr

    spec = json.loads(args.fuzz_spec)
    t = F.Target(W.FrameLayout(Plan.load(args.plan)), 1, [WorkerAddr(*w) for w in spec["workers"]], spec["slot_count"],
                 2, [WorkerAddr(*w) for w in spec["others"]])
    socks = {}
    for i in range(args.workers):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        s.bind((f"w{i}", 0))
        socks[i + 1] = s
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    rng = random.Random(args.seed + 1)
    counts: dict[str, int] = {}
    t0 = time.monotonic()
    sent = 0
    while not stop["now"]:
        kind = rng.choice(FUZZ_KINDS)
        frame, port, counters = F.junk(t, kind, random.Random(rng.randrange(1 << 32)))
        if port not in socks:
            continue
        try:
            socks[port].send(frame)
        except OSError:
            continue
        (counter,) = counters
        counts[counter] = counts.get(counter, 0) + 1
        sent += 1
        ahead = sent / args.fuzz_rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    print(json.dumps(counts), flush=True)
    return 0


# ------------------------------------------------------------------ the driver
class Namespace:
    def __init__(self, workers: int):
        self.name = f"p4gsoak-{secrets.token_hex(4)}"
        self.workers = workers

    def __enter__(self):
        _sh("ip", "netns", "add", self.name)
        try:
            ex = ("ip", "netns", "exec", self.name)
            _sh(*ex, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            _sh(*ex, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", check=False)
            _sh("ip", "-n", self.name, "link", "set", "lo", "up")
            for i in range(self.workers):
                _sh("ip", "-n", self.name, "link", "add", f"w{i}", "type", "veth", "peer", "name", f"s{i}")
                _sh("ip", "-n", self.name, "link", "set", f"w{i}", "up")
                _sh("ip", "-n", self.name, "link", "set", f"s{i}", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        _sh("ip", "netns", "del", self.name, check=False)

    def popen(self, argv, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *argv], **kw)


def _stop(p: subprocess.Popen, timeout: float = 10.0) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def drive(args) -> int:
    if os.geteuid() != 0:
        print("bench/soak.py: needs root (network namespaces, AF_PACKET)", file=sys.stderr)
        return 2
    from p4gen.build import build
    from p4gen.plan import Plan
    from p4gen.spec import make_spec
    from p4gen.switch.model import WorkerAddr, job_config
    from p4gen.target import load_target
    from p4gen.wire import ip, mac

    def on_term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    from p4gen.errors import P4genError
    from p4gen.filewrite import WORK, write_file

    work = Path(tempfile.mkdtemp(prefix="p4gsoak-"))
    out = work / "build"
    build(make_spec(slots=64, elements_per_packet=64, jobs=2, variant="hardened"), load_target("bmv2"), out,
          use_cache=False)
    n = args.workers
    real = [WorkerAddr(i + 1, mac(f"02:00:00:00:01:{i:02x}"), ip(f"10.0.1.{i + 1}"), 41000 + i) for i in range(n)]
    others = [WorkerAddr(i + 1, mac(f"02:00:00:00:02:{i:02x}"), ip(f"10.0.2.{i + 1}"), 42000 + i) for i in range(2)]
    plan = Plan.load(out)
    cfg = job_config(plan, 1, real, slot_count=32)
    other = job_config(plan, 2, others, slot_base=32, slot_count=32, mgid=2, rid_base=100)
    for t in ("workers", "result_dst"):
        cfg["tables"][t] += other["tables"][t]
    cfg["groups"].update(other["groups"])
    write_file(work / "cfg.json", json.dumps(cfg), WORK, "switch config", P4genError)
    stats = work / "stats.json"
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--plan", str(out), "--workers", str(n), "--seed", str(args.seed), "--minutes", str(args.minutes)]
    fuzz_spec = json.dumps({"slot_count": 32, "workers": [[w.port, w.mac, w.ip, w.udp_port] for w in real],
                            "others": [[w.port, w.mac, w.ip, w.udp_port] for w in others]})
    procs = []
    report: dict = {"minutes": args.minutes, "loss": args.loss, "fuzz_rate": args.fuzz_rate, "workers": n,
                    "elements": args.elements}
    try:
        with Namespace(n) as ns:
            dp = ns.popen([sys.executable, "-m", "p4gen.switch.dataplane", "--plan", str(out), "--config",
                           str(work / "cfg.json"), "--stats", str(stats), "--stats-interval", "1",
                           *[a for i in range(n) for a in ("--port", f"{i + 1}=s{i}")]],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            procs.append(dp)
            for _ in range(200):
                if stats.exists() or dp.poll() is not None:
                    break
                time.sleep(0.05)
            if not stats.exists():
                raise RuntimeError(f"data plane did not start: {dp.stderr.read() if dp.poll() is not None else ''}")
            fuzz = ns.popen(me + ["--role", "fuzz", *common, "--fuzz-rate", str(args.fuzz_rate),
                                  "--fuzz-spec", fuzz_spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
            procs.append(fuzz)
            jobs = ns.popen(me + ["--role", "jobs", *common, "--loss", str(args.loss), "--elements",
                                  str(args.elements), "--window", str(args.window), "--job-timeout",
                                  str(args.job_timeout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
            procs.append(jobs)
            first = jobs.stdout.readline()
            if not first:
                raise RuntimeError(f"job runner failed: {jobs.stderr.read()}")
            t0 = time.monotonic()
            warm = t0 + min(60.0, args.minutes * 6)          # the first tenth (at most a minute) warms up
            samples: list[dict] = []                           # every SAMPLE_EVERY s: both processes
            next_sample = t0
            lines = [first]
            for line in jobs.stdout:
                lines.append(line)
                now = time.monotonic()
                if now >= next_sample and dp.poll() is None and jobs.poll() is None:
                    samples.append({"t": round(now - t0), "dataplane": proc_usage(dp.pid),
                                    "jobs": proc_usage(jobs.pid)})
                    next_sample = now + SAMPLE_EVERY
            summary = json.loads(lines[-1])
            after = [s for s in samples if s["t"] >= warm - t0] or samples
            report["start"] = {"dataplane": after[0]["dataplane"], "jobs": after[0]["jobs"], "t": after[0]["t"]}
            report["end"] = {"dataplane": after[-1]["dataplane"], "jobs": after[-1]["jobs"], "t": after[-1]["t"]}
            report["dataplane_rss_kib"] = [(s["t"], s["dataplane"]["rss_kib"]) for s in samples]
            report["dataplane_peak"] = {k: max(s["dataplane"][k] for s in after) for k in after[0]["dataplane"]}
            _stop(fuzz)
            fz_out, fz_err = fuzz.communicate()
            jobs.wait()
            _stop(dp)
            report["fuzz_frames"] = json.loads(fz_out) if fz_out.strip() else {"error": fz_err[-500:]}
            final = json.loads(stats.read_text())
            report["switch"] = {k: v["packets"] for k, v in final["stats"].items()}
            report["dataplane_rx_dropped"] = sum(p["rx_dropped"] for p in final["ports"].values())
            times = [json.loads(ln)["seconds"] for ln in lines[:-1]]
            report.update(jobs_completed=summary["jobs"], jobs_stalled=summary["stalled"],
                          wrong_sums=summary["wrong_sums"],
                          job_seconds={"min": min(times), "median": sorted(times)[len(times) // 2],
                                       "max": max(times)} if times else None)
    except KeyboardInterrupt:
        print("bench/soak.py: interrupted", file=sys.stderr)
        return 130
    finally:
        for p in procs:
            _stop(p, 5)
    print_report(report)
    if args.json:
        from p4gen.errors import P4genError
        from p4gen.filewrite import JSON, write_file

        write_file(args.json, json.dumps(report), JSON, "report", P4genError)
    bad = report["wrong_sums"] or report["jobs_stalled"]
    return 1 if bad else 0


def print_report(r: dict) -> None:
    print(f"soak: {r['minutes']:g} min, {r['workers']} workers, {r['elements']} elements per all-reduce, "
          f"loss {r['loss']:g} per frame and direction, hostile stream {r['fuzz_rate']} frames/s")
    print(f"jobs completed {r['jobs_completed']}, stalled {r['jobs_stalled']}, wrong sums {r['wrong_sums']}; "
          f"seconds per job {r['job_seconds']}")
    print(f"hostile frames sent, by the counter each must land in: {r['fuzz_frames']}")
    print(f"switch counters: {r['switch']} (frames the kernel dropped at its sockets: {r['dataplane_rx_dropped']})")
    print(f"from {r['start']['t']} s (after the warm-up) to {r['end']['t']} s:")
    for who in ("dataplane", "jobs"):
        s, e = r["start"][who], r["end"][who]
        print(f"  {who:9}  fds {s['fds']} -> {e['fds']}, threads {s['threads']} -> {e['threads']}, "
              f"RSS {s['rss_kib']} -> {e['rss_kib']} KiB")
    print(f"dataplane peak after the warm-up: {r['dataplane_peak']}")
    print(f"dataplane RSS (s, KiB) every {SAMPLE_EVERY:g} s: {r['dataplane_rss_kib']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench/soak.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--loss", type=float, default=0.02)
    ap.add_argument("--fuzz-rate", type=int, default=300, help="hostile frames per second")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--elements", type=int, default=6400, help="elements per all-reduce (int32)")
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--job-timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--role", choices=("drive", "jobs", "fuzz"), default="drive", help=argparse.SUPPRESS)
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--fuzz-spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not 0 <= args.loss < 0.5 or args.minutes <= 0 or args.fuzz_rate < 1 or not 2 <= args.workers <= 8:
        ap.error("--loss in [0, 0.5), --minutes > 0, --fuzz-rate >= 1, --workers in 2..8")
    return {"drive": drive, "jobs": run_jobs, "fuzz": run_fuzz}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
