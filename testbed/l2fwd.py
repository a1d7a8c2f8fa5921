"""A leaf switch of the two-level topology: forwards frames by destination MAC.

    python -m p4gen.testbed.l2fwd --port 1=l1-eth1 --port 2=l1-eth2 --route 02:00:00:00:00:01=1 ...

The MAC table is static (given by the testbed, which knows every host);
frames to an unknown or broadcast MAC are flooded to every other port.  It
never parses the aggregation header: in the two-level topology only the
spine aggregates.  Prints ``ready`` on stdout once every port is bound;
SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import sys

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


class _Stop(Exception):
    pass


def _stop(signum, frame):
    raise _Stop()


def serve(ports: dict[int, str], routes: dict[bytes, int]) -> None:
    socks: dict[int, socket.socket] = {}
    for p, dev in ports.items():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.bind((dev, 0))
        s.setblocking(False)
        socks[p] = s
    by_fd = {s.fileno(): (p, s) for p, s in socks.items()}
    flood = {p: [socks[q] for q in socks if q != p] for p in socks}
    out = {mac: socks[p] for mac, p in routes.items()}
    poller = select.epoll()
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    print("ready", flush=True)
    try:
        while True:
            for fd, _ev in poller.poll(1.0):
                p, s = by_fd[fd]
                for _ in range(256):
                    try:
                        frame, addr = s.recvfrom(65536)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    dst = out.get(frame[:6])
                    targets = flood[p] if dst is None else ([dst] if dst is not s else [])
                    for t in targets:
                        try:
                            t.send(frame)
                        except (BlockingIOError, OSError):
                            pass        # egress queue full: the frame is lost, as on a real switch
    finally:
        poller.close()
        for s in socks.values():
            s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m p4gen.testbed.l2fwd")
    ap.add_argument("--port", action="append", default=[], metavar="N=IFACE", required=True)
    ap.add_argument("--route", action="append", default=[], metavar="MAC=PORT")
    a = ap.parse_args(argv)
    ports = {int(k): v for k, v in (x.split("=", 1) for x in a.port)}
    routes = {_mac(k): int(v) for k, v in (x.split("=", 1) for x in a.route)}
    signal.signal(signal.SIGTERM, _stop)
    try:
        serve(ports, routes)
    except (_Stop, KeyboardInterrupt):
        return 0
    except OSError as exc:
        print(f"l2fwd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
