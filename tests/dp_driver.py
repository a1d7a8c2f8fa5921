"""Worker emulator over raw sockets, run inside a test network namespace.

    python dp_driver.py PLAN_JSON MODE IFNAME:MAC:IP:UDPPORT ...

Each interface hosts one worker; all-reduces a fixed tensor through the
switch and prints {"results": [...], "stats": [...]} as JSON.
"""

import json
import select
import socket
import sys
import time

import numpy as np

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.plan import Plan
from p4gen.host.worker import Worker

SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def tensor(i, mode, size=300):
    if mode == "int":
        return np.arange(size, dtype=np.int64) * (i + 1)
    return (np.sin(np.arange(size) + i) * (i + 1)).astype(np.float32)


def main(argv):
    plan = Plan.load(argv[1])
    mode = argv[2]
    L = W.FrameLayout(plan)
    specs = [a.split(",") for a in argv[3:]]
    n = len(specs)
    socks, workers = [], []
    for i, (ifname, mac, ip, port) in enumerate(specs):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((ifname, 0))
        s.setblocking(False)
        socks.append(s)
        workers.append(Worker(L, tensor(i, mode), job=1, window=4, n_workers=n,
                              src=P.endpoint(mac, ip, int(port)), dst=SWITCH, mode=mode,
                              timeout=0.05, max_timeout=0.5))
    poll = select.poll()
    fd2i = {s.fileno(): i for i, s in enumerate(socks)}
    for s in socks:
        poll.register(s.fileno(), select.POLLIN)
    now = time.monotonic()
    for s, w in zip(socks, workers):
        for f in w.start(now):
            s.send(f)
    deadline = now + 30
    while not all(w.done for w in workers) and time.monotonic() < deadline:
        for fd, _ in poll.poll(20):
            i = fd2i[fd]
            while True:
                try:
                    frame, addr = socks[i].recvfrom(65536)
                except BlockingIOError:
                    break
                if addr[2] == 4:
                    continue
                for f in workers[i].receive(frame, time.monotonic()):
                    socks[i].send(f)
        now = time.monotonic()
        for s, w in zip(socks, workers):
            for f in w.tick(now):
                s.send(f)
    out = {"done": [w.done for w in workers],
           "results": [w.result().tolist() if w.done else None for w in workers],
           "expected": np.sum([tensor(i, mode).astype(np.float64) for i in range(n)], axis=0).tolist(),
           "retransmitted": [w.stats.retransmitted for w in workers]}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
