"""The software switch behind one UDP socket: no root, no interfaces.

    python -m p4gen.switch.udp --plan DIR (--config CFG.json | --p4runtime HOST:PORT) [--listen 127.0.0.1:48864]

Workers send their aggregation packets as UDP datagrams (the frame from the
``agg`` header on, as :mod:`p4gen.testbed.agent` and :mod:`p4gen.torch` do)
to the listening address.  Each datagram becomes a frame carrying the
sender's IPv4 address and UDP port, entering on the switch port that the
``workers`` table gives that (address, port); the model processes it; every
frame the model emits goes back as a datagram to the IPv4 destination and
UDP destination port in its own headers.  So the workers table, the slot
ranges, ``result_dst`` and the multicast groups apply exactly as on the
AF_PACKET data plane.  A datagram from an address no worker has enters on
port 0, which no worker is on, and is counted as ``drop_unknown``.

This is how the switch runs on one machine without root (several workers
on 127.0.0.1 with their own UDP ports), e.g. for ``p4gen.torch`` under
``torchrun --standalone``.  It has no Ethernet, so it carries no L2
traffic.
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import sys
import threading

from ..errors import P4genError
from ..plan import Plan
from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP, fix_ipv4_checksum
from .model import SwitchModel
from .turns import TurnLock

DEFAULT_PORT = 0xBEE0
_BATCH = 256


class UdpSwitchError(P4genError):
    """The UDP front end cannot start (bad address, socket error)."""


def _ip_text(value: int) -> str:
    return socket.inet_ntoa(value.to_bytes(4, "big"))


def parse_listen(spec: str) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UdpSwitchError(f"--listen {spec!r} must look like HOST:PORT")
    return host, int(port)


class UdpSwitch:
    """Serve ``model`` on a UDP socket bound to ``addr``; ``lock`` guards the model (shared with P4Runtime)."""

    def __init__(self, model: SwitchModel, addr: tuple[str, int] = ("127.0.0.1", DEFAULT_PORT), lock=None):
        self.model = model
        self.lock = lock if lock is not None else TurnLock()
        L = model.layout
        self._hoff = L.headers["agg"].offset
        self._eth, self._ip4, self._udp = (L.headers[n] for n in ("ethernet", "ipv4", "udp"))
        try:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            self.sock.bind(addr)
        except OSError as exc:
            raise UdpSwitchError(f"cannot listen on {addr[0]}:{addr[1]}: {exc.strerror or exc}") from None
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()
        self._dst_ip = int.from_bytes(socket.inet_aton(self.address[0]), "big")
        self._agg_port = L.udp_port_min       # the frame's UDP port: an aggregation port, whatever the socket's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.datagrams_in = 0
        self.datagrams_out = 0
        self.send_errors = 0

    # -- frames ----------------------------------------------------------------
    def _ingress(self, ip: int, port: int) -> int:
        return self.model.worker_ports().get((ip, port), 0)

    def frame(self, data: bytes, src: tuple[str, int]) -> tuple[bytes, int]:
        """The frame a datagram from ``src`` stands for, and its ingress port."""
        ip = int.from_bytes(socket.inet_aton(src[0]), "big")
        total = self._ip4.nbytes + self._udp.nbytes + len(data)
        head = bytearray(self._eth.encode({"ether_type": ETHERTYPE_IPV4})
                         + self._ip4.encode({"version": 4, "ihl": 5, "ttl": 64, "protocol": IPPROTO_UDP,
                                             "total_len": total, "src_addr": ip, "dst_addr": self._dst_ip})
                         + self._udp.encode({"src_port": src[1], "dst_port": self._agg_port,
                                             "length": total - self._ip4.nbytes}))
        L = self.model.layout
        fix_ipv4_checksum(head, L.ipv4_offset, L.ipv4_len, L.ipv4_checksum_offset)
        return bytes(head) + data, self._ingress(ip, src[1])

    def _send(self, frame: bytes) -> None:
        ip = self._ip4.decode(frame)["dst_addr"]
        port = self._udp.decode(frame)["dst_port"]
        try:
            self.sock.sendto(memoryview(frame)[self._hoff:], (_ip_text(ip), port))
            self.datagrams_out += 1
        except OSError:
            self.send_errors += 1          # lost like a frame on a full link; the worker retransmits

    def poll(self, timeout: float = 0.05) -> int:
        """Serve what arrives within ``timeout`` seconds (one batch); the number of datagrams handled."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return 0
        batch = []
        for _ in range(_BATCH):
            try:
                data, src = self.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                break
            batch.append(self.frame(data, src))
        self.datagrams_in += len(batch)
        with self.lock:
            outs = self.model.process_batch(batch)
        for out in outs:
            for _port, f in out:
                self._send(f)
        return len(batch)

    # -- running -----------------------------------------------------------------
    def serve_forever(self) -> None:
        while not self._stop.is_set():
            self.poll()

    def start(self) -> "UdpSwitch":
        """Serve on a background thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self.serve_forever, name="p4gen-udp-switch", daemon=True)
        self._thread.start()
        return self

    def stop(self, *_args) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.sock.close()

    def __enter__(self) -> "UdpSwitch":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4gen.switch.udp",
                                 description="Software switch on a UDP socket (no root, no interfaces).")
    ap.add_argument("--plan", required=True, help="build directory holding plan.json (or the file); required")
    ap.add_argument("--listen", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST:PORT",
                    help=f"the UDP address workers send to (default 127.0.0.1:{DEFAULT_PORT})")
    ap.add_argument("--config", help="control-plane JSON (tables, groups; docs/switch.md); this or --p4runtime")
    ap.add_argument("--p4runtime", metavar="HOST:PORT",
                    help="serve P4Runtime on HOST:PORT for the control plane (p4gen ctl); this or --config")
    args = ap.parse_args(argv)
    if not args.config and not args.p4runtime:
        ap.error("give --config CFG.json or --p4runtime HOST:PORT: without either the switch has no workers "
                 "table and drops every datagram")
    lock = TurnLock()
    server = None
    try:
        model = SwitchModel(Plan.load(args.plan))
        if args.config:
            model.load_config(args.config)
        sw = UdpSwitch(model, parse_listen(args.listen), lock=lock)
        if args.p4runtime:
            from .dataplane import parse_addr
            from .p4rt_server import serve            # grpc only when asked for

            server = serve(model, parse_addr(args.p4runtime), lock=lock)
    except P4genError as exc:
        print(f"p4gen.switch.udp: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, sw.stop)
    signal.signal(signal.SIGINT, sw.stop)
    print(f"p4gen.switch.udp: listening on {sw.address[0]}:{sw.address[1]}", file=sys.stderr, flush=True)
    try:
        sw.serve_forever()
    finally:
        sw.sock.close()
        whole = server is None or server.stop()
    if not whole:
        from .p4rt_server import exit_now

        exit_now(0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
