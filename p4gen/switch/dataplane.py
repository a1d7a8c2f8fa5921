"""Software data plane: the switch model behind AF_PACKET ports with mmap'd packet rings.

    python -m p4gen.switch.dataplane --plan DIR --port 1=veth1 --port 2=veth2 \\
        [--config control.json] [--stats stats.json] [--stats-interval 1] \\
        [--p4runtime HOST:PORT] [--ring-mb 8] [--round-interval S] [--no-rings]

Every ``--port N=IFNAME`` opens an AF_PACKET socket on ``IFNAME`` that
acts as switch port ``N``, with a TPACKET_V3 receive ring and a transmit
ring (:mod:`p4gen.netio.rings`): a round takes the ready frames of every
port from its ring, runs them through one
:meth:`p4gen.switch.model.SwitchModel.process_batch` call, writes each
port's results into its transmit ring and flushes it with one ``send``.
With ``--round-interval S`` a round that finds frames waiting begins no
sooner than S seconds after the previous round began: under load, each
round then takes the frames of S seconds from every port, and the fixed
cost of a round (the rings' headers, one model call, one flush per port)
is paid that much less often; frames wait at most S for it.  Where the kernel refuses rings (or with ``--no-rings``) a port falls back to
one system call per frame, and the process says so once on stderr.  The
control-plane state (workers, multicast groups, l2 entries, result_dst)
comes from a JSON file in the format of :meth:`SwitchModel.load_config`;
``SIGHUP`` reloads the file into a fresh model state.  With ``--p4runtime
HOST:PORT`` a P4Runtime server (:func:`p4gen.switch.p4rt_server.serve`)
programs the same model instead: the forwarding loop and the server share
one lock (held around every ``process_batch`` and counter read), and
``SIGHUP`` reloads are refused, because a fresh model would no longer be
the one the server writes.

Counters: the ``stats`` counter of the plan plus, per port, rx/tx frames,
``io`` (``ring`` or ``socket``), ``rx_dropped`` (frames the kernel dropped
because the port's receive ring or buffer was full: ``tp_drops``) and
``rx_freezes`` (times a full receive ring stopped taking frames:
``tp_freeze_q_cnt``), ``rx_oversized`` (frames longer than the largest frame
of the plan's target, :func:`mtu_frame`, and two VLAN tags, on rings or
sockets: counted and dropped, never given to the model), and ``rx_errors``/``tx_errors``, are written as JSON
to ``--stats`` (atomically, every ``--stats-interval`` seconds and at
exit).  ``SIGTERM``/``SIGINT`` stop the loop, close the sockets, write the
final counters and exit 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import P4genError
from ..netio.frames import open_port
from ..netio.heap import retain_freed_memory
from ..netio.rings import TxFlusher
from .model import SwitchModel
from .turns import TurnLock
from ..plan import Plan
from ..wire import FrameLayout

BURST = 1024              # frames taken per port per round; one model call per round (vectorised)
ROUNDS = 32               # rounds per poll_once, so counters and reloads are serviced under load
RING_MB = 8               # receive ring per port: ~20k 64-element frames, ~0.1 s at full rate
TX_FRAMES = 2048          # transmit ring slots per port (2 KiB each)
TX_RING_BYTES = TX_FRAMES * 2048    # a port's transmit ring, whatever its slot size
ETHERNET_HEADER = 14
VLAN_TAGS = 8             # two 802.1Q tags: a tagged frame may be this much longer than an MTU frame


class DataPlaneError(P4genError):
    """A port or option of the software data plane is invalid or cannot be opened."""


def parse_port(spec: str) -> tuple[int, str]:
    num, sep, ifname = spec.partition("=")
    if not sep or not num.isdigit() or not ifname:
        raise DataPlaneError(f"--port {spec!r} must look like N=IFNAME")
    port = int(num)
    if not 0 <= port < 512:
        raise DataPlaneError(f"--port {spec!r}: port number must be in 0..511")
    return port, ifname


class DataPlane:
    """One AF_PACKET port (ring or per-frame socket) per switch port, driving one SwitchModel.

    The loop polls only when the previous round found every port empty;
    otherwise each round takes up to ``BURST`` frames from every port (so no
    port starves another), runs the frames of all ports through one
    ``process_batch`` call and sends the results, one batch per port.
    ``rings=False`` opens per-frame sockets; ``io_note`` says which ports
    fell back to them and why (None when every port has rings).
    """

    def __init__(self, model: SwitchModel, ports: dict[int, str], lock=None, *, rings: bool = True,
                 ring_mb: int = RING_MB, round_interval: float = 0.0, max_frame: int | None = None):
        if not ports:
            raise DataPlaneError("at least one --port is needed")
        self.model = model
        # held around every model access, so a control plane in another thread (the P4Runtime
        # server) never interleaves with a packet
        self.lock = lock if lock is not None else TurnLock()
        self.ports = dict(ports)
        self.io: dict[int, Any] = {}
        self.rx = {p: 0 for p in ports}
        self.tx = {p: 0 for p in ports}
        self.rx_dropped = {p: 0 for p in ports}
        self.rx_freezes = {p: 0 for p in ports}
        self.rx_oversized = {p: 0 for p in ports}        # frames longer than max_frame: counted, dropped
        self.rx_errors = 0
        self.tx_errors = 0
        self.running = False
        # a busy round begins no sooner than this after the previous one began (0: at once)
        self.round_interval = float(round_interval)
        self._round_began = -1.0
        self.rounds = 0
        refused: dict[str, str] = {}
        # ring slots hold the largest frame the plan's target carries (its MTU and an Ethernet header):
        # 2 KiB for a 1500-byte MTU, 9 KiB for jumbo frames; a transmit ring keeps its size in bytes
        if max_frame is None:
            max_frame = mtu_frame(model.plan)
        self.max_frame = max_frame + VLAN_TAGS           # longer frames are counted and dropped
        slot = frame_slot(max_frame)
        try:
            for port, ifname in self.ports.items():
                io, why = open_port(ifname, rings=rings, rx_bytes=ring_mb << 20,
                                    tx_frames=max(64, TX_RING_BYTES // slot), frame_size=slot)
                self.io[port] = io
                if why is not None:
                    refused[ifname] = why
        except OSError as exc:
            self.close()
            raise DataPlaneError(f"cannot open a raw socket on {ifname!r}: {exc.strerror or exc}") from None
        self.io_note = None
        if refused:
            reasons = sorted(set(refused.values()))
            self.io_note = (f"packet rings unavailable on {', '.join(sorted(refused))} ({'; '.join(reasons)}): "
                            "those ports read and send one frame per system call")
        # the kernel's transmit work (on veth, the peer's receive too) runs in a thread beside the model
        rings = [io for io in self.io.values() if io.kind == "ring"]
        self.flusher = TxFlusher(rings) if rings else None
        self.by_fd = {io.fileno(): p for p, io in self.io.items()}
        self._poll = select.poll()
        for fd in self.by_fd:
            self._poll.register(fd, select.POLLIN)

    def close(self) -> None:
        if getattr(self, "flusher", None) is not None:
            self.flusher.close()
            self.flusher = None
        for io in self.io.values():
            io.close()
        self.io.clear()

    def _send(self, port: int, frames: list) -> None:
        io = self.io.get(port)
        if io is None:                      # egress port not attached: the frame leaves nowhere
            self.tx_errors += len(frames)
            return
        sent, refused = io.send(frames)
        self.tx[port] += sent
        self.tx_errors += refused

    def poll_once(self, timeout: float = 0.2) -> int:
        """Wait up to ``timeout`` s, then forward every queued frame (in rounds); return the count.

        Frames read in one round go through the model in arrival order per
        port, which gives the same results as one by one.
        """
        ios = list(self.io.items())
        for _p, io in ios:                  # frames a full send buffer left queued in a transmit ring
            if io.pending():
                if self.flusher is not None:
                    self.flusher.kick()
                else:
                    io.flush()
                timeout = min(timeout, 0.001)
        if not self._poll.poll(int(timeout * 1000)):
            return 0
        if self.round_interval:
            # frames are waiting: if the last round began less than an interval ago, let more come, so
            # that one round (its fixed cost: a few hundred numpy calls) takes the burst of every port
            wait = self._round_began + self.round_interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._round_began = time.monotonic()
        handled = 0
        for _ in range(ROUNDS):
            n = self._round(ios)
            handled += n
            # paced: one round per interval, unless a port had more waiting than a round takes
            if not n or (self.round_interval and n < BURST):
                break
        return handled

    def _round(self, ios) -> int:
        """One round: the ready frames of every port (up to ``BURST`` each) through the model, the
        results out, one batch per egress port.  Frames of one length go to the model as one byte
        matrix copied straight out of the receive rings (``SwitchModel.process_matrix``), any other
        mix as a list of frames (``process_batch``)."""
        taken: list[tuple[int, list, int]] = []          # (port, its views, frames)
        try:
            for port, io in ios:
                vs, over, bad = io.take(BURST)
                if bad:
                    self.rx_errors += bad
                if vs and max(v.shape[1] for v in vs) > self.max_frame:
                    over += sum(len(v) for v in vs if v.shape[1] > self.max_frame)
                    vs = [v for v in vs if v.shape[1] <= self.max_frame]
                if over:
                    self.rx_oversized[port] += over
                if vs:
                    k = sum(len(v) for v in vs)
                    self.rx[port] += k
                    taken.append((port, vs, k))
            if not taken:
                return 0
            self.rounds += 1
            views = [v for _p, vs, _k in taken for v in vs]
            L0 = views[0].shape[1]
            total = sum(k for _p, _v, k in taken)
            if all(v.shape[1] == L0 for v in views):
                A8 = np.concatenate(views) if len(views) > 1 else np.array(views[0])
                ports = np.repeat(np.array([p for p, _v, _k in taken], dtype=np.int64), [k for _p, _v, k in taken])
                groups = None
            else:
                groups = self._by_length(taken)
        finally:
            for _p, io in ios:
                io.release()
        with self.lock:
            if groups is None:
                outs = self.model.process_matrix(A8, ports)
            else:
                outs = self.model.process_groups(groups, total)
        for eport, frames in outs:
            self._send(eport, frames)
        return total

    @staticmethod
    def _by_length(taken) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The frames of a round (port by port, each port's in arrival order) as one byte matrix per length,
        with their ports and their positions in the round (``SwitchModel.process_groups``)."""
        parts: dict[int, list] = {}
        pos = 0
        for port, vs, _k in taken:
            for v in vs:
                parts.setdefault(v.shape[1], []).append((v, port, pos))
                pos += len(v)
        out = []
        for _L, ps in parts.items():
            A8 = np.concatenate([v for v, _p, _o in ps]) if len(ps) > 1 else np.array(ps[0][0])
            ports = np.concatenate([np.full(len(v), p, dtype=np.int64) for v, p, _o in ps])
            at = np.concatenate([np.arange(o, o + len(v), dtype=np.int64) for v, _p, o in ps])
            out.append((A8, ports, at))
        return out

    def counters(self) -> dict[str, Any]:
        with self.lock:
            stats = self.model.counter_read()
        for p, io in self.io.items():
            drops, freezes = io.drops()
            self.rx_dropped[p] += drops
            self.rx_freezes[p] += freezes
        return {"time": time.time(),
                "stats": {k: {"packets": p, "bytes": b} for k, (p, b) in stats.items()},
                "ports": {str(p): {"interface": self.ports[p], "rx": self.rx[p], "tx": self.tx[p],
                                  "io": self.io[p].kind if p in self.io else "closed",
                                  "rx_dropped": self.rx_dropped[p], "rx_freezes": self.rx_freezes[p],
                                  "rx_oversized": self.rx_oversized[p]}
                          for p in self.ports},
                "rx_errors": self.rx_errors, "tx_errors": self.tx_errors, "rounds": self.rounds}

    def run(self, stats_path: str | Path | None = None, stats_interval: float = 1.0,
            reload: Any = None) -> None:
        """Forward until :meth:`stop` (e.g. from a signal handler)."""
        self.running = True
        next_dump = 0.0
        try:
            while self.running:
                self.poll_once(0.2)
                if reload is not None:
                    reload()
                now = time.monotonic()
                if stats_path and now >= next_dump:
                    write_json_atomic(stats_path, self.counters())
                    next_dump = now + stats_interval
        finally:
            if stats_path:
                write_json_atomic(stats_path, self.counters())
            self.close()

    def stop(self, *_args) -> None:
        self.running = False


def mtu_frame(plan: Plan) -> int:
    """The largest frame on a link of ``plan``'s target: its MTU and an Ethernet header (at least a
    1500-byte MTU's, for ordinary traffic), and at least the plan's own frame."""
    return max(1500 + ETHERNET_HEADER, plan.target.mtu_bytes + ETHERNET_HEADER, FrameLayout(plan).frame_len)


def frame_slot(max_frame: int) -> int:
    """A ring slot for frames up to ``max_frame`` bytes: its 48-byte header and the frame, 2048 bytes for
    ordinary frames, else rounded up to a whole KiB."""
    need = max_frame + 48
    return 2048 if need <= 2048 else -(-need // 1024) * 1024


def write_json_atomic(path: str | Path, data: dict[str, Any]) -> None:
    """The counters file, replaced atomically (never through a symlink, never over a file p4gen did not write)."""
    from ..filewrite import JSON, write_file

    write_file(path, json.dumps(data), JSON, "stats file", DataPlaneError, hint="choose another --stats")


def parse_addr(spec: str) -> str:
    """HOST:PORT for the P4Runtime server (checked here, so a typo is a one-line error)."""
    host, sep, port = spec.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise DataPlaneError(f"--p4runtime {spec!r} must look like HOST:PORT")
    return spec


def _build_model(plan_dir: str, config: str | None) -> SwitchModel:
    model = SwitchModel(Plan.load(plan_dir))
    if config:
        model.load_config(config)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4gen.switch.dataplane",
                                 description="Software data plane: the Plan's switch model on raw sockets.")
    ap.add_argument("--plan", required=True, help="build directory holding plan.json (or the file); required")
    ap.add_argument("--port", action="append", default=[], metavar="N=IFNAME",
                    help="switch port N is IFNAME; once per port (default: none)")
    ap.add_argument("--config", help="control-plane JSON (tables, groups; docs/switch.md), read again on SIGHUP "
                                     "(default: none; the tables stay empty unless --p4runtime fills them)")
    ap.add_argument("--stats", help="write counters as JSON here (default: not written)")
    ap.add_argument("--stats-interval", type=float, default=1.0,
                    help="seconds between two writes of --stats (default 1)")
    ap.add_argument("--p4runtime", metavar="HOST:PORT",
                    help="serve P4Runtime for this switch on HOST:PORT (the control plane then comes from it)")
    ap.add_argument("--ring-mb", type=int, default=RING_MB,
                    help=f"receive ring per port in MiB (default {RING_MB})")
    ap.add_argument("--round-interval", type=float, default=0.0, metavar="SECONDS",
                    help="when frames wait, begin a round no sooner than this after the previous one began, so "
                         "that each round takes more frames (default 0: at once)")
    ap.add_argument("--no-rings", action="store_true",
                    help="read and send one frame per system call instead of through packet rings")
    args = ap.parse_args(argv)
    server = None
    lock = TurnLock()
    try:
        ports = dict(parse_port(p) for p in args.port)
        addr = parse_addr(args.p4runtime) if args.p4runtime else None
        model = _build_model(args.plan, args.config)
        if not 1 <= args.ring_mb <= 1024:
            raise DataPlaneError(f"--ring-mb {args.ring_mb} must be in 1..1024")
        if not 0 <= args.round_interval <= 1:
            raise DataPlaneError(f"--round-interval {args.round_interval} must be in 0..1 seconds")
        dp = DataPlane(model, ports, lock=lock, rings=not args.no_rings, ring_mb=args.ring_mb,
                       round_interval=args.round_interval)
    except P4genError as exc:
        print(f"p4gen.switch.dataplane: {exc}", file=sys.stderr)
        return 2
    if addr is not None:
        from . import p4rt_server            # grpc and p4runtime only when asked for

        try:
            server = p4rt_server.serve(model, addr, lock=lock)
        except P4genError as exc:
            dp.close()
            print(f"p4gen.switch.dataplane: {exc}", file=sys.stderr)
            return 2
        print(f"p4gen.switch.dataplane: P4Runtime server listening on {server.addr}", file=sys.stderr, flush=True)
    hup = {"pending": False}

    def on_hup(*_a):
        hup["pending"] = True

    def reload() -> bool:
        if not hup["pending"]:
            return False
        hup["pending"] = False
        if server is not None:
            print("p4gen.switch.dataplane: SIGHUP ignored: the P4Runtime server owns the control plane",
                  file=sys.stderr, flush=True)
            return False
        try:
            fresh = _build_model(args.plan, args.config)
        except P4genError as exc:
            print(f"p4gen.switch.dataplane: reload failed, keeping the old state: {exc}", file=sys.stderr)
            return False
        dp.model = fresh
        return True

    # the loop allocates tuples and lists per frame: with the start-up objects frozen out of the
    # collector and a higher threshold, collections stay rare and cheap; a round's arrays reuse heap
    # pages instead of faulting fresh ones in
    retain_freed_memory()
    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 20, 20)
    signal.signal(signal.SIGTERM, dp.stop)
    signal.signal(signal.SIGINT, dp.stop)
    signal.signal(signal.SIGHUP, on_hup)
    if dp.io_note:
        print(f"p4gen.switch.dataplane: {dp.io_note}", file=sys.stderr, flush=True)
    if args.config is None and server is None:
        print("p4gen.switch.dataplane: no --config and no --p4runtime: the tables are empty and every frame is "
              "dropped", file=sys.stderr, flush=True)
    print(f"p4gen.switch.dataplane: forwarding on {', '.join(f'{p}={i}' for p, i in sorted(ports.items()))}",
          file=sys.stderr, flush=True)
    try:
        dp.run(args.stats, args.stats_interval, reload)
    finally:
        whole = server is None or server.stop()
    if not whole:
        p4rt_server.exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
