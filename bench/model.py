"""Throughput of the switch model and of the software data plane.

    python bench/model.py [--quick] [--no-afpacket]
    python bench/model.py --before REV [--quick]   (the in-process figures of git revision REV and of
                                                    this checkout, in one run: bench/revision.py)

In-process (one core): SwitchModel.process frame by frame and
SwitchModel.process_batch (64, 256 and 1024 frames per call: the vectorised
batch path), for 64 and 256 elements per packet and 2..32 workers; every
worker sends every chunk once, so each chunk is n-1 absorbed packets and one
multicast of n results.  The data plane hands each round's frames to one
process_batch call, up to 512 per busy port (so 1024 is a round with two
busy ports).  A batch costs a fixed time (over a hundred numpy calls) plus
a time per frame, so larger batches run faster.  The last lines compare the
slowest worker count of each batch size, at 64 elements, printed beside the
goal of 200,000 packets/s (no ratio is taken against a fixed figure).  Each in-process figure is the fastest of
three runs on a fresh model, since other work shares this machine.  Two
references are measured at the same time, since this machine's speed
varies with its load: a bare Python loop and a naive numpy slot update
(frombuffer + in-place add into a register row, 64 elements, no parsing or
decision).  The load
average (os.getloadavg) is printed before and after, since the figures
scale with the share of a core this process gets.  Like the data plane,
the bench keeps freed memory in its heap (p4gen.netio.heap), so that the
in-process and end-to-end figures pay the same for their arrays.

AF_PACKET (root only, in a private network namespace named p4gtest-bench-*,
removed on exit, exception or SIGTERM): raw frames between two veth ends with
nothing in between, then ``python -m p4gen.switch.dataplane`` between two veth pairs
with one sender process per worker, paced at each of ``--rates`` total frames/s
(0: as fast as the senders go; -1: the data plane is stopped while the senders
fill its socket buffers, then drains them with the CPU to itself).  Each run
prints one line
``data plane end to end: N contributions/s (M frames in, K out, loss L%)``:
N = contributions the data plane processed over the time from the first
frame sent (draining: from the moment the data plane is continued) to the
last result back at the senders; loss = sent frames the data plane never
processed.  The load average and a bare-loop
reference are printed before and after.  Where simple_switch is on PATH,
it runs the same program (compiled from the same plan by p4c-bm2-ss) on
the same veths and frames, beside the software switch: unpaced senders
overrun it, so both also run closed loops (each sender keeps at most
``--bmv2-windows`` frames without their result back) and the ratio takes
each switch's best run that processed every frame.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import afpacket as afp
from p4gen import wire as W
from p4gen.errors import P4genError
from p4gen.filewrite import WORK, write_file
from p4gen.host import packet as P
from p4gen.netio.heap import retain_freed_memory
from p4gen.switch.dataplane import BURST
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

GOAL_PPS = 200_000
DOCS_PER_FRAME_LIVE = 60_619  # docs/benchmarks.md: contributions/s of the per-frame data plane, an earlier run
DRAIN_FRAMES = 50_000     # frames per worker for the drain run (they must fit the stopped data plane's buffers)
RING_MB_BENCH = 32        # receive ring per data plane port in the bench: room for the drain run
REPEATS = 3               # each in-process figure is the fastest of this many runs (the machine is shared)
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def addrs(n):
    return [WorkerAddr(1 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(n)]


def frames_for(plan, n, chunks, slots):
    L = W.FrameLayout(plan)
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


def _rate(plan, n: int, frames, mode: str, repeats: int = REPEATS, clock=time.perf_counter):
    """(frames per second, the model of the last run) of ``mode`` on ``frames``: the fastest of ``repeats``
    runs by ``clock``, each on a fresh model.  process: frame by frame; batchN: process_batch of N frames;
    matrixN: process_matrix of N frames, each batch's byte matrix built beforehand (the data plane copies
    it out of its receive rings)."""
    best = None
    if mode.startswith("matrix"):
        b = int(mode[6:])
        size = len(frames[0][0])
        A = np.frombuffer(b"".join(f for f, _p in frames), np.uint8).reshape(-1, size)
        P_ = np.array([p for _f, p in frames], dtype=np.int64)
    for _rep in range(repeats):
        m = SwitchModel(plan)
        m.load_config(job_config(plan, 1, addrs(n)))
        if mode.startswith("matrix"):
            mats = [(A[k:k + b].copy(), P_[k:k + b]) for k in range(0, len(A), b)]
            t = clock()
            for a, p in mats:
                m.process_matrix(a, p)
        else:
            t = clock()
            if mode == "process":
                for f, p in frames:
                    m.process(f, p)
            else:
                b = int(mode[5:])
                for k in range(0, len(frames), b):
                    m.process_batch(frames[k:k + b])
        dt = clock() - t
        best = dt if best is None else min(best, dt)
    return len(frames) / best, m


def bench_inprocess(quick: bool) -> None:
    print(f"in-process model, one core; {load()}")
    loop_ns, naive = calibrate()
    print(f"reference (same run): bare Python loop {loop_ns:.0f} ns/iteration; naive numpy slot update "
          f"(frombuffer + add, 64 x 32-bit, no parsing or decision) {naive:,.0f} updates/s")
    print(f"{'elements':>8} {'workers':>7} {'mode':>10} {'packets/s':>12} {'elements/s':>14}  outcome "
          f"(model packets in per second of one core, fastest of {REPEATS} runs: process = frame by frame, "
          f"batchN = process_batch of N, matrixN = process_matrix of N, the data plane's path)")
    slowest: dict[str, tuple[float, int]] = {}
    for epp in (64, 256):
        slots = 64
        plan = make_plan(make_spec(slots=slots, elements_per_packet=epp, variant="hardened"), load_target("bmv2"))
        for n in (2, 4, 8, 16, 32):
            total = 4096 if quick else 16384
            chunks = max(2, total // n)
            frames = frames_for(plan, n, chunks, slots)
            for mode in ("process", "batch64", "batch256", "batch1024", "matrix1024", "matrix2048"):
                pps, m = _rate(plan, n, frames, mode)
                st = m.stats
                print(f"{epp:>8} {n:>7} {mode:>10} {pps:>12,.0f} {pps * epp:>14,.0f}  "
                      f"absorbed={st['absorbed']} multicast={st['multicast']}")
                if epp == 64 and (mode not in slowest or pps < slowest[mode][0]):
                    slowest[mode] = (pps, n)
    for mode, (pps, n) in slowest.items():
        print(f"64 elements, {mode}: slowest worker count n={n} at {pps:,.0f} packets/s "
              f"(the goal is {GOAL_PPS:,} packets/s per core)")
    loop_ns, naive = calibrate()
    print(f"reference again: bare Python loop {loop_ns:.0f} ns/iteration; naive numpy slot update "
          f"{naive:,.0f} updates/s; {load()}")


# -- AF_PACKET -----------------------------------------------------------------------
def _worker_frames(plan, n_workers: int, chunks: int, slots: int) -> list[bytes]:
    """One blob per worker: its contribution for every chunk, in chunk order (fixed frame length)."""
    blobs = [[] for _ in range(n_workers)]
    for f, port in frames_for(plan, n_workers, chunks, slots):
        blobs[port - 1].append(f)
    return [b"".join(b) for b in blobs]




def _build(quick: bool, slots: int):
    """The hardened 64-element bmv2 program: compiled with p4c-bm2-ss when BMv2 is on PATH."""
    from p4gen.build import build

    spec = make_spec(slots=slots, elements_per_packet=64, variant="hardened")
    out = Path(tempfile.mkdtemp(prefix="p4gbench-build-"))
    res = build(spec, load_target("bmv2"), out / "b", use_cache=False, compile_p4=afp.bmv2_available() is None)
    return res, out


def bench_afpacket(quick: bool, rates: list[float], ios: list[str], bmv2_chunks: int,
                   bmv2_windows: list[int]) -> None:
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("AF_PACKET: skipped (needs root and iproute2 for a private network namespace)")
        return
    n = 20000 if quick else 100000
    slots = 1024
    res, build_dir = _build(quick, slots)
    plan = res.plan
    tmp = Path(tempfile.mkdtemp(prefix="p4gbench-"))
    try:
        with afp.Netns(2) as ns:
            size = W.FrameLayout(plan).frame_len
            loop_ns, _naive = calibrate()
            print(f"AF_PACKET; {load()}; reference (same run): bare Python loop {loop_ns:.0f} ns/iteration")
            out = ns.ex(sys.executable, "-c", afp.RAW_SEND, "w0", "s0", str(n), str(size))
            sent, got, dt = out.stdout.split()
            print(f"AF_PACKET raw (no model), veth w0 -> s0, {size}-byte frames, Python send + recv in one "
                  f"process, one system call per frame: {int(got) / float(dt):,.0f} frames/s received "
                  f"({got}/{sent})")
            # the switch between two veth pairs: 2 workers, one sender process each, every chunk absorbed
            # then multicast; slots are reused only after `slots` chunks, so senders may drift that far apart
            write_file(tmp / "plan.json", plan.to_json(), WORK, "plan", P4genError)
            cfg = job_config(plan, 1, addrs(2))
            write_file(tmp / "cfg.json", json.dumps(cfg), WORK, "switch config", P4genError)
            chunks = n // 2
            blobs = _worker_frames(plan, 2, chunks, slots)
            same = frames_for(plan, 2, chunks, slots)
            round_ = 2 * BURST                       # a data-plane round with both ports busy
            batch_rate = _rate(plan, 2, same, "batch1024")[0]
            matrix_rate = _rate(plan, 2, same, f"matrix{round_}")[0]
            print(f"in-process reference on the same frames (same run, fastest of {REPEATS}): process_batch of "
                  f"1024 {batch_rate:,.0f} contributions/s; process_matrix of {round_} (the data plane's path and "
                  f"round) {matrix_rate:,.0f}/s; {load()}")
            figures: dict[tuple[str, float], dict] = {}
            for io in ios:
                for rate in rates:
                    # draining a stopped data plane: as many frames as its receive rings / buffers surely hold
                    r = afp.dp_run(ns, tmp, size, [b[:DRAIN_FRAMES * size] for b in blobs] if rate < 0 else blobs,
                                   rate / 2, io, RING_MB_BENCH)
                    figures[(io, rate)] = r
                    loss = 100.0 * (r["sent"] - r["processed"]) / max(r["sent"], 1)
                    offered = (f"paced at {rate:,.0f} frames/s" if rate > 0 else "senders as fast as they can")
                    offered += f", {r['sent'] / max(r['send_s'], 1e-9):,.0f} frames/s offered"
                    if rate < 0:
                        offered = ("data plane stopped while the senders filled its buffers, then draining them "
                                   "alone; " + offered)
                    print(f"data plane end to end [{io}]: {r['rate']:,.0f} contributions/s ({r['rx']} frames in, "
                          f"{r['tx']} out, loss {loss:.2f}%)  [{'data plane continued' if rate < 0 else 'first frame sent'}"
                          f" to last result back at the senders; by the data plane's counter samples "
                          f"{r['counter_rate']:,.0f}/s; 2 sender processes ({'/'.join(sorted(r['io']))}), "
                          f"data plane ports {'/'.join(r['dp_io'])}, {size}-byte frames, {offered}; {r['sent']} sent, "
                          f"kernel rx drops at the data plane {r['rx_dropped']}, {r['back']} results read back by "
                          f"the senders; counters {r['stats']}]" + (f"  NOTE: {r['note']}" if r["note"] else ""))
            _summary(figures, batch_rate, matrix_rate)
            why = afp.bmv2_available()
            if why is not None:
                print(f"BMv2: skipped ({why}; put BMv2 on PATH, e.g. `. ../shared/p4toolchain/env.sh`)")
            else:
                _bmv2(ns, tmp, res, plan, cfg, size, slots, bmv2_chunks, bmv2_windows, figures)
            loop_ns, _naive = calibrate()
            print(f"AF_PACKET done; {load()}; reference again: bare Python loop {loop_ns:.0f} ns/iteration")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(build_dir, ignore_errors=True)


def _summary(figures: dict, batch_rate: float, matrix_rate: float) -> None:
    for io in sorted({io for io, _r in figures}):
        drain = figures.get((io, -1.0))
        if drain:
            print(f"[{io}] drain rate / in-process rate (same run): {drain['rate']:,.0f} / {matrix_rate:,.0f} "
                  f"(process_matrix, the data plane's path) = {drain['rate'] / matrix_rate:.0%}; "
                  f"/ {batch_rate:,.0f} (process_batch of 1024) = {drain['rate'] / batch_rate:.0%} (goal 80%)")
        live = figures.get((io, 0.0))
        if live:
            print(f"[{io}] rate with the senders running: {live['rate']:,.0f} contributions/s (docs/benchmarks.md "
                  f"gives {DOCS_PER_FRAME_LIVE:,}/s for the per-frame data plane, from an earlier run on another "
                  f"load: printed beside, not compared)")
    if ("rings", 0.0) in figures and ("sockets", 0.0) in figures:
        a, b = figures[("rings", 0.0)]["rate"], figures[("sockets", 0.0)]["rate"]
        print(f"rings / per-frame sockets with the senders running (same run): {a:,.0f} / {b:,.0f} = {a / b:.2f}x")


def _bmv2(ns, tmp, res, plan, cfg, size, slots, chunks, windows, figures) -> None:
    """simple_switch on the same program (compiled from the same plan), frames and senders, beside the software
    switch.  Unpaced senders overrun simple_switch (its ports drop most frames), so both switches also run a
    closed loop: each sender keeps at most ``window`` frames without their result back, and a switch runs
    at its own pace.  Each switch's best figure goes into the ratio."""
    print(f"BMv2: {afp.bmv2_build()}")
    blobs = _worker_frames(plan, 2, chunks, slots)
    best_b = best_s = 0.0
    for window in windows:
        r = afp.bmv2_run(ns, tmp, res.out_dir / "program.json", plan, cfg, size, blobs, 0.0, window)
        loss = 100.0 * (r["sent"] - r["processed"]) / max(r["sent"], 1)
        print(f"BMv2 simple_switch end to end, closed loop of {window} frames per sender: {r['clock_rate']:,.0f} "
              f"contributions/s, first frame sent to last result back ({r['processed']} processed of "
              f"{r['sent']} sent of {2 * chunks}, loss {loss:.2f}%, {r['back']} results back"
              f"{', a sender stalled (results stopped)' if r['stalled'] else ''}; counters {r['stats']})")
        if not r["stalled"] and r["processed"] == 2 * chunks:
            best_b = max(best_b, r["clock_rate"])
        sw = afp.dp_run(ns, tmp, size, blobs, 0.0, "rings", RING_MB_BENCH, window)
        print(f"software switch, same frames, senders and timing, closed loop of {window}: {sw['clock_rate']:,.0f} "
              f"contributions/s ({sw['processed']} processed of {sw['sent']} sent)")
        if not sw["stalled"] and sw["processed"] == 2 * chunks:
            best_s = max(best_s, sw["clock_rate"])
    sw = afp.dp_run(ns, tmp, size, blobs, 0.0, "rings", RING_MB_BENCH)
    print(f"software switch, same frames, senders and timing, unpaced: {sw['clock_rate']:,.0f} contributions/s "
          f"({sw['processed']} processed of {sw['sent']} sent)")
    if sw["processed"] == 2 * chunks:
        best_s = max(best_s, sw["clock_rate"])
    if best_b > 0:
        print(f"software switch / BMv2 end to end, side by side (best of each, every frame processed): "
              f"{best_s:,.0f} / {best_b:,.0f} = {best_s / best_b:.1f}x (goal 20x)")
    else:
        print("software switch / BMv2: no BMv2 run processed every frame; no ratio")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer packets")
    ap.add_argument("--no-afpacket", action="store_true")
    ap.add_argument("--no-inprocess", action="store_true")
    ap.add_argument("--rates", default="40000,0,-1",
                    help="offered contributions/s for the data plane runs, comma-separated (0: unpaced; "
                         "-1: fill the buffers of a stopped data plane, then let it drain them alone)")
    ap.add_argument("--io", default="rings,sockets",
                    help="data plane and sender I/O to run: rings (packet rings), sockets (one call per frame)")
    ap.add_argument("--bmv2-chunks", type=int, default=10000, help="contributions per worker sent to BMv2")
    ap.add_argument("--bmv2-windows", default="16,64,256",
                    help="closed-loop windows (frames per sender without a result back) for BMv2 beside the "
                         "software switch, comma-separated")
    ap.add_argument("--before", metavar="REV", help="compare the in-process figures with git revision REV, "
                    "in turns in this run (nothing else runs)")
    args = ap.parse_args(argv)
    if args.before:
        from revision import compare

        return compare(args.before, args.quick)
    # the data plane keeps freed memory in its heap (p4gen.netio.heap); so do the in-process figures
    print(f"allocator: freed memory kept in the process, as the data plane does: "
          f"{'yes' if retain_freed_memory() else 'no (no glibc mallopt)'}")
    if not args.no_inprocess:
        bench_inprocess(args.quick)
    if not args.no_afpacket:
        bench_afpacket(args.quick, [float(x) for x in args.rates.split(",") if x.strip()],
                       [x for x in args.io.split(",") if x], args.bmv2_chunks,
                       [int(x) for x in args.bmv2_windows.split(",") if x.strip()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
