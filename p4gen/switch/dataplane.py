"""Software data plane: the switch model behind AF_PACKET raw sockets.

    python -m p4gen.switch.dataplane --plan DIR --port 1=veth1 --port 2=veth2 \\
        [--config control.json] [--stats stats.json] [--stats-interval 1] \\
        [--p4runtime HOST:PORT]

Every ``--port N=IFNAME`` binds a raw socket on ``IFNAME`` that acts as
switch port ``N``.  Frames received there go through
:meth:`p4gen.switch.model.SwitchModel.process`; the frames it returns are sent on
the sockets of their egress ports.  The control-plane state (workers,
multicast groups, l2 entries, result_dst) comes from a JSON file in the
format of :meth:`SwitchModel.load_config`; ``SIGHUP`` reloads the file
into a fresh model state.  With ``--p4runtime HOST:PORT`` a P4Runtime
server (:func:`p4gen.switch.p4rt_server.serve`) programs the same model instead:
the forwarding loop and the server share one lock (held around every
``process_batch`` and counter read), and ``SIGHUP`` reloads are refused,
because a fresh model would no longer be the one the server writes.

Counters: the ``stats`` counter of the plan plus per-port rx/tx frames and
``rx_dropped`` (frames the kernel dropped because the port's receive buffer
was full), and ``rx_errors``/``tx_errors``, are written as JSON to
``--stats`` (atomically, every ``--stats-interval`` seconds and at exit).  ``SIGTERM``/``SIGINT`` stop the loop, close the
sockets, write the final counters and exit 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import P4genError
from .model import SwitchModel
from ..plan import Plan

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6          # struct tpacket_stats {tp_packets, tp_drops}, reset by every read
PACKET_IGNORE_OUTGOING = 23    # Linux >= 4.20: the socket is not handed the frames leaving its interface
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
MAX_FRAME = 1 << 16
BURST = 512               # frames read per socket per round; one process_batch per round (vectorised)
ROUNDS = 32               # rounds per poll_once, so counters and reloads are serviced under load
RCVBUF = 1 << 25          # room for ~0.5 s of frames while this process is not scheduled
SNDBUF = 1 << 23
SEND_WAIT = 0.05          # s to wait for room in a full send buffer before a frame counts as a tx error


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


def _set_buffer(s: socket.socket, force: int, plain: int, size: int) -> None:
    """Set a socket buffer to ``size`` bytes, past net.core.*mem_max when allowed (root: the FORCE option)."""
    try:
        s.setsockopt(socket.SOL_SOCKET, force, size)
    except OSError:
        try:
            s.setsockopt(socket.SOL_SOCKET, plain, size)
        except OSError:
            pass


class DataPlane:
    """Raw sockets on named interfaces, one per switch port, driving one SwitchModel.

    The loop polls only when the previous round found every socket empty;
    otherwise each round reads up to ``BURST`` frames from every socket
    without blocking (so no port starves another), runs the frames of all
    ports through one ``process_batch`` call and sends the results.  Frames
    leaving an interface are not read back: ``PACKET_IGNORE_OUTGOING`` where
    the kernel has it, otherwise the packet type of each frame is checked.
    Frames the kernel dropped because a socket's receive buffer was full are
    read from ``PACKET_STATISTICS`` and reported as ``rx_dropped``.
    """

    def __init__(self, model: SwitchModel, ports: dict[int, str], lock=None):
        if not ports:
            raise DataPlaneError("at least one --port is needed")
        self.model = model
        # held around every model access, so a control plane in another thread (the P4Runtime
        # server) never interleaves with a packet
        self.lock = lock if lock is not None else threading.RLock()
        self.ports = dict(ports)
        self.socks: dict[int, socket.socket] = {}
        self.by_fd: dict[int, int] = {}
        self.rx = {p: 0 for p in ports}
        self.tx = {p: 0 for p in ports}
        self.rx_dropped = {p: 0 for p in ports}
        self.rx_errors = 0
        self.tx_errors = 0
        self.running = False
        self.ignore_outgoing = True
        try:
            for port, ifname in self.ports.items():
                # protocol 0: the socket hears nothing until bind names the interface and ETH_P_ALL,
                # so no frame of another interface is queued in between
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                self.socks[port] = s
                try:
                    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                except OSError:
                    self.ignore_outgoing = False
                _set_buffer(s, SO_RCVBUFFORCE, socket.SO_RCVBUF, RCVBUF)
                _set_buffer(s, SO_SNDBUFFORCE, socket.SO_SNDBUF, SNDBUF)
                s.bind((ifname, ETH_P_ALL))
                s.setblocking(False)
                self.by_fd[s.fileno()] = port
        except OSError as exc:
            self.close()
            raise DataPlaneError(f"cannot open a raw socket on {ifname!r}: {exc.strerror or exc}") from None
        self._poll = select.poll()
        for fd in self.by_fd:
            self._poll.register(fd, select.POLLIN)

    def close(self) -> None:
        for s in self.socks.values():
            try:
                s.close()
            except OSError:
                pass
        self.socks.clear()

    @staticmethod
    def _drain_stats(s: socket.socket) -> int:
        """Frames the kernel dropped on this socket since the last call (its receive buffer was full)."""
        try:
            raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        except OSError:
            return 0
        return int.from_bytes(raw[4:8], sys.byteorder)

    def _read(self, port: int, s: socket.socket, burst: list) -> None:
        """Append up to BURST queued frames of one socket to ``burst`` as (frame, port); never blocks."""
        n0 = len(burst)
        append = burst.append
        try:
            if self.ignore_outgoing:
                recv = s.recv
                for _ in range(BURST):
                    append((recv(MAX_FRAME), port))
            else:
                recvfrom = s.recvfrom
                for _ in range(BURST):
                    frame, addr = recvfrom(MAX_FRAME)
                    if addr[2] != PACKET_OUTGOING:   # our own transmissions, seen by the tap
                        append((frame, port))
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self.rx_errors += 1
        self.rx[port] += len(burst) - n0

    def _send_all(self, port: int, frames: list) -> None:
        """Send frames on one port's socket in order; a full send buffer is waited for (briefly)."""
        s = self.socks.get(port)
        if s is None:                       # egress port not attached: the frame leaves nowhere
            self.tx_errors += len(frames)
            return
        send = s.send
        sent = 0
        it = iter(frames)
        pending = None
        while True:
            try:
                if pending is not None:
                    send(pending)
                    sent += 1
                    pending = None
                for f in it:
                    pending = f
                    send(f)
                    sent += 1
                pending = None
                break
            except BlockingIOError:
                if not self._wait_writable(s):
                    self.tx_errors += 1
                    pending = None
            except InterruptedError:
                pass
            except OSError:
                self.tx_errors += 1
                pending = None
        self.tx[port] += sent

    @staticmethod
    def _wait_writable(s: socket.socket) -> bool:
        p = select.poll()
        p.register(s.fileno(), select.POLLOUT)
        return bool(p.poll(int(SEND_WAIT * 1000)))

    def poll_once(self, timeout: float = 0.2) -> int:
        """Wait up to ``timeout`` s, then forward every queued frame (in bursts); return the count.

        Frames read in one round go through ``SwitchModel.process_batch`` in
        arrival order per port, which gives the same results as one by one.
        """
        if not self._poll.poll(int(timeout * 1000)):
            return 0
        handled = 0
        socks = list(self.socks.items())
        for _ in range(ROUNDS):
            burst: list = []
            for port, s in socks:
                self._read(port, s, burst)
            if not burst:
                break
            handled += len(burst)
            with self.lock:
                results = self.model.process_batch(burst)
            out: dict[int, list] = {}
            for outs in results:
                for eport, frame in outs:
                    q = out.get(eport)
                    if q is None:
                        out[eport] = [frame]
                    else:
                        q.append(frame)
            for eport, frames in out.items():
                self._send_all(eport, frames)
        return handled

    def counters(self) -> dict[str, Any]:
        with self.lock:
            stats = self.model.counter_read()
        for p, s in self.socks.items():
            self.rx_dropped[p] += self._drain_stats(s)
        return {"time": time.time(),
                "stats": {k: {"packets": p, "bytes": b} for k, (p, b) in stats.items()},
                "ports": {str(p): {"interface": self.ports[p], "rx": self.rx[p], "tx": self.tx[p],
                                  "rx_dropped": self.rx_dropped[p]}
                          for p in self.ports},
                "rx_errors": self.rx_errors, "tx_errors": self.tx_errors}

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


def write_json_atomic(path: str | Path, data: dict[str, Any]) -> None:
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, p)


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
    ap.add_argument("--plan", required=True, help="build directory holding plan.json (or the file)")
    ap.add_argument("--port", action="append", default=[], metavar="N=IFNAME", help="switch port N is IFNAME")
    ap.add_argument("--config", help="control-plane JSON (tables, groups)")
    ap.add_argument("--stats", help="write counters as JSON here")
    ap.add_argument("--stats-interval", type=float, default=1.0)
    ap.add_argument("--p4runtime", metavar="HOST:PORT",
                    help="serve P4Runtime for this switch on HOST:PORT (the control plane then comes from it)")
    args = ap.parse_args(argv)
    server = None
    lock = threading.RLock()
    try:
        ports = dict(parse_port(p) for p in args.port)
        addr = parse_addr(args.p4runtime) if args.p4runtime else None
        model = _build_model(args.plan, args.config)
        dp = DataPlane(model, ports, lock=lock)
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
    # collector and a higher threshold, collections stay rare and cheap
    gc.collect()
    gc.freeze()
    gc.set_threshold(20000, 20, 20)
    signal.signal(signal.SIGTERM, dp.stop)
    signal.signal(signal.SIGINT, dp.stop)
    signal.signal(signal.SIGHUP, on_hup)
    print(f"p4gen.switch.dataplane: forwarding on {', '.join(f'{p}={i}' for p, i in sorted(ports.items()))}",
          file=sys.stderr, flush=True)
    try:
        dp.run(args.stats, args.stats_interval, reload)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
