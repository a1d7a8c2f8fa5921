"""Worker emulator: one SwitchML (or OmniReduce) worker on a testbed host.

    mininet> h1 python -m p4gen.testbed.agent CONFIG.json

The protocol is :class:`p4gen.host.worker.Worker`, as
:class:`p4gen.host.batchworker.BatchWorker` (which takes a burst of results
as one matrix), or :class:`p4gen.host.omni_worker.OmniWorker`, as
:class:`p4gen.host.omni_batchworker.BatchOmniWorker` (likewise); this module
only owns the socket and the clock.  Frames go out through a kernel UDP socket (so iptables loss
and tc shaping in the host namespace apply to them): the worker's frame
minus its Ethernet/IPv4/UDP headers is the datagram, sent to the switch's
address.  A received datagram gets a fixed header prefix back before the
state machine parses it.  Datagrams move in batches, one ``recvmmsg`` and
one ``sendmmsg`` per burst (:class:`p4gen.netio.mmsg.DatagramBatches`); with
``"gather": s`` in the config, the agent waits s seconds once a burst has
begun to arrive, so that it wakes less often and handles more per wake-up.

Control, one JSON object per line: the agent prints ``{"event": "ready"}``
(with ``setup_cpu``, the CPU seconds it used to start, read its config and build its tensor),
waits for ``go`` on stdin, prints ``progress`` events (fractions listed in
the config) and finally ``done`` (time, packet counts) or ``error`` (one
line); ``done`` carries ``cpu``, the CPU seconds (every thread) the process used from ``go`` to the
last result.  The reduced tensor is written to ``config["out"]`` (.npy).  With
``"wait_go": false`` in the config (a worker started by hand at the
``mininet>`` prompt) it starts at once.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time

import numpy as np

from p4gen import protocols
from p4gen.wire import FrameLayout
from p4gen.host.packet import datagram_prefix, endpoint
from p4gen.netio.heap import retain_freed_memory
from p4gen.netio.mmsg import DatagramBatches
from p4gen.plan import Plan
from p4gen.host.batchworker import BatchWorker
from p4gen.host.worker import RttEstimator

from .errors import JobError, TestbedError
from .tensors import make_tensor, save_array


def _emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def make_worker(cfg: dict, layout: FrameLayout, tensor: np.ndarray):
    src = endpoint(cfg["mac"], cfg["ip"], cfg["udp_port"])
    dst = endpoint(cfg["switch_mac"], cfg["switch_ip"], cfg["switch_port"])
    # the timeouts follow the measured round trips (at least cfg["timeout"]): on a loaded machine a
    # result that is only late must not be sent for again
    common = dict(job=cfg["job"], window=cfg["window"], n_workers=cfg["n"], src=src, dst=dst,
                  timeout=cfg["timeout"], backoff=2.0, max_timeout=cfg["max_timeout"], rtt=RttEstimator())
    if protocols.protocol(cfg["protocol"]).sparse:
        from p4gen.host.omni_batchworker import BatchOmniWorker

        return BatchOmniWorker(layout, tensor, **common)
    mode = "float" if cfg["dtype"] == "float32" else "int"
    return BatchWorker(layout, tensor, mode=mode, **common)


def run(cfg: dict, wait_go=None) -> dict:
    """Run one worker to completion; return the ``done`` record.  Raises JobError on a stall."""
    plan = Plan.load(cfg["plan"])
    layout = FrameLayout(plan)
    tensor = make_tensor(cfg["rank"], cfg["size"], cfg["dtype"], cfg["seed"], cfg.get("density", 1.0),
                         layout.elements)
    w = make_worker(cfg, layout, tensor)
    hoff = layout.headers["agg"].offset
    prefix = datagram_prefix(layout, cfg["switch_port"])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    sock.bind((cfg["ip"], cfg["udp_port"]))
    sock.setblocking(False)
    dst = (cfg["switch_ip"], cfg["switch_port"])
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    stall = float(cfg["stall_timeout"])
    gather = float(cfg.get("gather", 0.0))
    marks = sorted(cfg.get("progress", []))
    send_errors = 0

    # every datagram of a burst in one recvmmsg, every reply of a burst in one sendmmsg
    io = DatagramBatches(sock, batch=256, max_size=max(4096, layout.frame_len - hoff),
                         prefix_room=max(64, len(prefix)))
    backlog: list[bytes] = []           # received, not yet handed to the worker (a progress mark came first)

    def send(frames) -> None:
        nonlocal send_errors
        if frames:
            _sent, failed = io.send([memoryview(f)[hoff:] for f in frames], dst)
            send_errors += failed         # a lost frame's timer will resend it

    # what set-up built (modules, plan, tensor, worker) is kept out of the collector's walks
    gc.collect()
    gc.freeze()
    if wait_go is not None:
        wait_go()
    t0 = time.monotonic()
    c0 = time.process_time()
    u0, s0 = os.times()[:2]
    wakeups = 0
    now = t0
    send(w.start(now))
    last = now
    accepted = 0
    rows = w.batchable and not marks

    def send_rows(out) -> None:
        """Frames as matrix rows (OmniReduce: with each row's length)."""
        nonlocal send_errors
        F, lens = out if isinstance(out, tuple) else (out, None)
        if len(F):
            _sent, failed = io.send_rows(F[:, hoff:], dst, None if lens is None else lens - hoff)
            send_errors += failed

    def receive_burst(now: float) -> int:
        """One burst through the worker as a matrix (mixed lengths: frame by frame); its size."""
        got = io.recv_rows(prefix)
        if isinstance(got, list):
            send([f for frame in got for f in w.receive(frame, now)])
        elif len(got):
            send_rows(w.receive_rows(got, now))
        return len(got)

    try:
        while not w.done:
            dl = w.next_deadline()
            wait = 0.05 if dl is None else min(0.05, max(0.0, dl - now))
            if backlog or poller.poll(wait * 1000.0):
                wakeups += 1
                if gather and not backlog:
                    time.sleep(gather)        # let the burst grow: fewer wake-ups, more results per wake-up
                now = time.monotonic()
                for _ in range(2):
                    if rows:
                        # a second look only when the first burst filled the batch
                        if receive_burst(now) < io.batch:
                            break
                        continue
                    got = backlog or io.recv(prefix)
                    backlog = []
                    if not got:
                        break
                    out: list = []
                    for k, frame in enumerate(got):
                        out += w.receive(frame, now)
                        if marks and w.complete.mean() >= marks[0]:
                            backlog = got[k + 1:]      # report progress before sending any further chunk
                            break
                    send(out)
                    if backlog:
                        break
            now = time.monotonic()
            if w.stats.accepted != accepted:
                accepted = w.stats.accepted
                last = now
                while marks and w.complete.mean() >= marks[0]:
                    _emit(event="progress", rank=cfg["rank"], frac=marks.pop(0))
                    if cfg.get("hold_after_progress"):
                        # the harness kills this worker on this event: stop here, so the
                        # kill lands mid-job however fast the rest of the job would be
                        while True:
                            time.sleep(3600)
            if rows:
                send_rows(w.tick_rows(now))
            else:
                send(w.tick(now))
            if now - last > stall:
                out = w.outstanding()
                slot, t = min(out.items(), key=lambda kv: kv[1]) if out else (-1, -1)
                unit, what = ("block", "blocks") if protocols.protocol(cfg["protocol"]).sparse else ("index", "chunks")
                if t < 0 and unit == "block":
                    unit, t = "round", "discovery"
                raise JobError(f"worker {cfg['rank']} ({cfg['host']}): no result for {stall:.1f} s "
                               f"(slot {slot}, {unit} {t}, {int(w.complete.sum())}/{w.chunks} {what} done, "
                               f"{w.stats.retransmitted} retransmissions); a peer worker or the switch is gone")
        elapsed = time.monotonic() - t0
        cpu = time.process_time() - c0
        u1, s1 = os.times()[:2]
    finally:
        sock.close()
    result = w.result()
    save_array(cfg["out"], result)
    st = w.stats
    return {"event": "done", "rank": cfg["rank"], "time": elapsed, "cpu": cpu, "cpu_user": u1 - u0,
            "cpu_sys": s1 - s0, "wakeups": wakeups, "sent": st.sent,
            "retransmitted": st.retransmitted, "accepted": st.accepted, "ignored": st.ignored,
            "received": st.accepted + st.ignored + st.malformed, "send_errors": send_errors,
            "bytes_sent": getattr(w, "bytes_sent", st.sent * (layout.frame_len - hoff))}


class _Stop(Exception):
    pass


def _stop(signum, frame):
    raise _Stop()


def read_config(args: list[str], prog: str) -> dict | None:
    """An agent's config (the JSON file its only argument names), or None after one line on stderr."""
    from p4gen.errors import P4genError
    from p4gen.fileread import load_json

    try:
        if len(args) != 1:
            raise TestbedError(f"usage: python -m {prog} CONFIG.json (the file the testbed writes for a worker)")
        cfg = load_json(args[0], "agent config", TestbedError)
        if not isinstance(cfg, dict) or not isinstance(cfg.get("rank"), int):
            raise TestbedError(f"agent config {args[0]!r} is not a worker's config (an object with a rank)")
    except P4genError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = read_config(sys.argv[1:] if argv is None else argv, "p4gen.testbed.agent")
    if cfg is None:
        return 1
    signal.signal(signal.SIGTERM, _stop)

    def wait_go() -> None:
        _emit(event="ready", rank=cfg["rank"], setup_cpu=time.process_time())
        if not cfg.get("wait_go", True):          # started by hand: no harness to say go
            return
        line = sys.stdin.readline()
        if line.strip() != "go":
            raise JobError(f"worker {cfg['rank']}: the harness closed the control pipe before 'go'")

    retain_freed_memory()               # a burst's arrays reuse heap pages instead of faulting fresh ones in
    try:
        _emit(**run(cfg, wait_go))
        return 0
    except (_Stop, KeyboardInterrupt):
        _emit(event="error", rank=cfg["rank"], message=f"worker {cfg['rank']} stopped by a signal")
        return 1
    except Exception as exc:          # reported to the harness as one line; the traceback goes to the log
        import traceback

        traceback.print_exc()
        _emit(event="error", rank=cfg["rank"], message=str(exc) or exc.__class__.__name__)
        return 1


if __name__ == "__main__":
    sys.exit(main())
