"""Forwarding while a P4Runtime Read or Write runs: frames through the software data plane, timed, during it.

    python read_gap.py BUILD_DIR JOB_TOML ADDR [--write N]     (inside the test's network namespace)

The data plane serves P4Runtime on ADDR and forwards between ports 1 (``s0``) and 2 (``s1``).  This
script pushes the build, sets up the job, writes a few registers, then starts a sender on ``w0``
(one L2 frame per millisecond, each carrying its sequence number and send time, flooded by the
switch to port 2) and a receiver that taps the frames as they enter the switch (``s0``) and leave it
(``w1``), and, once frames flow, reads every register of the
plan with one Read (this process, which decodes the answer as a controller would, runs at the lowest
CPU priority: a controller is not on the switch's cores).  It prints, as JSON: the entities read and
whether the written values came back, the Read's start and end, and for every frame received the kernel's timestamps (SO_TIMESTAMPNS,
the wall clock) of it entering and leaving the switch.  With ``--write N`` it sends one Write of N register
updates instead of the Read (and reads the registers back afterwards, outside the timed part).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import select
import socket
import struct
import sys
import time

DST, SRC, ETHERTYPE = bytes.fromhex("020000000099"), bytes.fromhex("020000000100"), b"\x88\xb5"


SO_TIMESTAMPNS = 35                  # <asm-generic/socket.h>; SCM_TIMESTAMPNS has the same number
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def sender(stop, period: float = 0.001) -> None:
    """A frame per ``period``; the veth hands it to the switch's port inside send(), so its stamp (taken
    just before) is when the switch could first have it."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)          # the traffic at the machine's normal priority
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind(("w0", 0))
    seq = 0
    nxt = time.monotonic()
    while not stop.is_set():
        s.send(DST + SRC + ETHERTYPE + struct.pack("!Qd", seq, time.time()) + bytes(30))
        seq += 1
        # a sender the machine kept waiting goes on from now rather than sending the missed frames back to
        # back: a burst would queue in any switch, Read or not
        nxt = max(nxt + period, time.monotonic())
        time.sleep(max(0.0, nxt - time.monotonic()))


def _tap(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B5))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    # room for a minute of frames: the kernel stamps each one on arrival, so a receiver that a loaded
    # machine keeps waiting loses none of them and none of their times
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    s.bind((ifname, 0))
    s.setblocking(False)
    return s


def _stamped(s: socket.socket):
    """(sequence number, the kernel's time of the frame at this interface) of every frame queued on ``s``."""
    out = []
    while True:
        try:
            f, anc, _flags, _addr = s.recvmsg(2048, 64)
        except BlockingIOError:
            return out
        if f[:6] != DST or f[12:14] != ETHERTYPE:
            continue
        t = next((struct.unpack("qq", d[:16]) for lv, k, d in anc if lv == socket.SOL_SOCKET and k == SO_TIMESTAMPNS),
                 None)
        out.append((struct.unpack_from("!Q", f, 14)[0], t[0] + t[1] * 1e-9 if t else time.time()))


def receiver(stop, out) -> None:
    """Every frame with the kernel's time of it entering the switch (a tap on its port ``s0``) and of it
    leaving the switch (on ``w1``): SO_TIMESTAMPNS, however late this process gets to read them."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)
    into, outof = _tap("s0"), _tap("w1")
    seen_in, got = {}, []
    while not stop.is_set():
        select.select([into, outof], [], [], 0.2)
        seen_in.update(_stamped(into))
        got += _stamped(outof)
    seen_in.update(_stamped(into))
    out.put([(seq, seen_in[seq], t) for seq, t in got if seq in seen_in])


def register_updates(regs, n: int, value_of) -> tuple[list, dict]:
    """``n`` MODIFY updates spread over the register arrays ``regs`` (value ``value_of(k)`` for the k-th),
    and what each (register id, index) then holds."""
    from p4.v1 import p4runtime_pb2

    from p4gen.controller.entities import update

    ups, want = [], {}
    k = 0
    while len(ups) < n:
        for r in regs:
            if len(ups) == n:
                break
            index = (k // len(regs)) % r.entries
            value = value_of(k) & ((1 << r.lane_bits) - 1)
            e = p4runtime_pb2.Entity()
            e.register_entry.register_id = r.id
            e.register_entry.index.index = index
            e.register_entry.data.bitstring = value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")
            ups.append(update(p4runtime_pb2.Update.MODIFY, e))
            want[(r.id, index)] = value
            k += 1
    return ups, want


def l2_updates(e, n: int, entries: int) -> tuple[list, list, dict]:
    """``entries`` l2_forward INSERTs, then ``n`` MODIFYs cycling over them (the port alternating), and what
    each MAC then forwards to."""
    from p4.v1 import p4runtime_pb2

    from p4gen.controller.entities import update

    inserts = [update(p4runtime_pb2.Update.INSERT, e.table_entry("l2_forward", {"dst_addr": 0x020000200000 + i},
                                                                  "l2_unicast", {"port": 1})) for i in range(entries)]
    mods, want = [], {}
    for k in range(n):
        i, port = k % entries, 1 + (k // entries) % 2
        mods.append(update(p4runtime_pb2.Update.MODIFY, e.table_entry("l2_forward", {"dst_addr": 0x020000200000 + i},
                                                                       "l2_unicast", {"port": port})))
        want[0x020000200000 + i] = port
    return inserts, mods, want


def main(build_dir: str, job_file: str, addr: str, writes: int = 0, kind: str = "registers") -> dict:
    from p4.v1 import p4runtime_pb2

    from p4gen.controller.client import connect
    from p4gen.controller.entities import update
    from p4gen.jobfile import load_job
    from p4gen.controller.job_control import Controller
    from p4gen.controller.pipeline import load_build

    # this process decodes 100,000 entities as a controller would, but a controller is not on the switch's
    # cores: at the lowest priority (its gRPC threads too, made from here on), its work does not count as
    # the switch's; the sender and the receiver it starts go back to the normal priority
    os.nice(19 - os.nice(0))
    build = load_build(build_dir)
    regs = build.plan.registers
    marks = {(regs[k].id, 7 + k): (1 << regs[k].lane_bits) - 1 - k for k in (0, 5, len(regs) - 1)}
    with connect(addr, timeout=60) as conn:
        ctl = Controller(build, conn)
        ctl.push()
        ctl.setup(load_job(job_file, build.plan))
        ups = []
        for (rid, index), value in marks.items():
            e = p4runtime_pb2.Entity()
            e.register_entry.register_id = rid
            e.register_entry.index.index = index
            e.register_entry.data.bitstring = value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")
            ups.append(update(p4runtime_pb2.Update.MODIFY, e))
        conn.write(ups)
    stop, results = mp.Event(), mp.Queue()
    procs = [mp.Process(target=sender, args=(stop,)), mp.Process(target=receiver, args=(stop, results))]
    for p in procs[::-1]:
        p.start()
    time.sleep(1.5)                                   # frames flowing before the Read
    wild = p4runtime_pb2.Entity()
    wild.register_entry.register_id = 0
    if writes and kind == "l2":
        from p4gen.controller.entities import PlanEntities

        inserts, ups, want = l2_updates(PlanEntities(build.plan), writes, 1000)
        with connect(addr, timeout=600, election_id=2) as conn:
            conn.write(inserts)
            t0 = time.time()
            conn.write(ups)
            t1 = time.time()
            t = p4runtime_pb2.Entity()
            t.table_entry.table_id = build.plan.table("l2_forward").id
            held = {int.from_bytes(x.table_entry.match[0].exact.value, "big"):
                   int.from_bytes(x.table_entry.action.action.params[0].value, "big") for x in conn.read([t])}
        ents = []
        marks = {}
        ok = all(held.get(m) == p for m, p in want.items())
    elif writes:
        # scalar registers only: a value register's entry holds lanes, written whole by the ops
        ups, want = register_updates([r for r in regs if r.lanes == 1], writes, lambda k: 3 * k + 1)
        with connect(addr, timeout=600, election_id=2) as conn:
            t0 = time.time()
            conn.write(ups)
            t1 = time.time()
            ents = conn.read([wild])
        marks = want
    else:
        with connect(addr, timeout=600, election_id=2) as conn:
            t0 = time.time()
            ents = conn.read([wild])
            t1 = time.time()
    time.sleep(1.0)
    stop.set()
    got = results.get(timeout=30)
    for p in procs:
        p.join(10)
    back = {(e.register_entry.register_id, e.register_entry.index.index): int.from_bytes(e.register_entry.data.bitstring,
                                                                                        "big") for e in ents}
    if writes and kind == "l2":
        return {"entities": 0, "distinct": 0, "marks": ok, "zeros": 0, "read": [t0, t1], "frames": got}
    return {"entities": len(ents), "distinct": len(back), "marks": all(back.get(k) == v for k, v in marks.items()),
            "zeros": sum(1 for k, v in back.items() if v == 0 and k not in marks),
            "read": [t0, t1], "frames": got}


if __name__ == "__main__":
    n = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--write" else 0
    print(json.dumps(main(*sys.argv[1:4], writes=n, kind=sys.argv[6] if len(sys.argv) > 6 else "registers")))
