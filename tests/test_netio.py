"""Batched packet I/O (p4gen.netio): ring sockets and per-frame sockets on veth pairs of a private namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vethns import sh, veth_namespace

from p4gen.netio.rings import RingSocket, RingUnavailable




@pytest.fixture()
def netns():
    """A namespace with the veth pair va <-> vb (and lo), removed afterwards."""
    with veth_namespace([("va", "vb")]) as ns:
        yield ns


def _run(ns: str, body: str) -> dict:
    """Run ``body`` (Python, defines ``out``) in the namespace; its ``out`` as JSON."""
    head = ("import json, time\nfrom p4gen.netio.rings import RingSocket\nfrom p4gen.netio.frames import open_port, "
            "SocketPort\n"
            "def frame(i, n):\n"
            "    return bytes.fromhex('020000000002020000000001') + b'\\x88\\xb5' + i.to_bytes(4, 'big') + "
            "bytes((i + k) % 256 for k in range(n - 18))\n"
            "def collect(port, want, timeout=5.0):\n"
            "    got, end = [], time.monotonic() + timeout\n"
            "    while len(got) < want and time.monotonic() < end:\n"
            "        f, _bad = port.recv(1 << 20)\n"
            "        got += f\n"
            "        time.sleep(0.002)\n"
            "    return got\n")
    r = sh("ip", "netns", "exec", ns, sys.executable, "-c", head + body + "\nprint(json.dumps(out))", check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_frames_cross_the_rings_exactly_in_order(netns):
    """Equal-length runs (one strided read per block) and mixed lengths (walked frame by frame) arrive
    byte for byte and in order; the sender never reads its own frames back."""
    out = _run(netns, """
a, b = RingSocket("va"), RingSocket("vb")
same = [frame(i, 307) for i in range(3000)]
mixed = [frame(i, 60 + (i * 37) % 1400) for i in range(500)]
q1 = a.send(same)
q2 = a.send(mixed)
got = collect(b, 3500)
time.sleep(0.05)
back, _ = a.recv()
out = {"q": [q1, q2], "n": len(got), "same": got[:3000] == same, "mixed": got[3000:] == mixed,
       "back": len(back), "drops": list(b.drops()), "kind": a.kind}
""")
    assert out == {"q": [[3000, 0], [500, 0]], "n": 3500, "same": True, "mixed": True, "back": 0,
                   "drops": [0, 0], "kind": "ring"}


def test_ring_and_per_frame_sockets_interoperate(netns):
    out = _run(netns, """
a = RingSocket("va")
b, why = open_port("vb", rings=False)
fr = [frame(i, 100 + i) for i in range(200)]
sent_a = a.send(fr)
got_b = collect(b, 200)
sent_b = b.send(fr)
got_a = collect(a, 200)
out = {"kind": b.kind, "why": why, "a": sent_a, "b": sent_b, "ab": got_b == fr, "ba": got_a == fr}
""")
    assert out == {"kind": "socket", "why": "rings turned off", "a": [200, 0], "b": [200, 0], "ab": True, "ba": True}


def test_a_full_receive_ring_counts_its_drops(netns):
    """Nobody reads the receiving ring: what does not fit is dropped by the kernel and counted as tp_drops,
    so frames received + drops = frames sent; the counters reset when read."""
    out = _run(netns, """
a = RingSocket("va")
b = RingSocket("vb", rx_bytes=1 << 16, block_size=1 << 12)       # 16 blocks of 4 KiB: ~130 frames
n = 2000
for k in range(0, n, 100):
    a.send([frame(i, 200) for i in range(k, k + 100)])
time.sleep(0.1)
drops, freezes = b.drops()
got = collect(b, n, timeout=0.5)
out = {"got": len(got), "drops": drops, "freezes": freezes, "again": list(b.drops()),
       "first": got[0] == frame(0, 200) if got else None}
""")
    assert out["got"] + out["drops"] == 2000 and 0 < out["got"] < 400, out
    assert out["freezes"] >= 1 and out["again"] == [0, 0] and out["first"] is True, out


def test_a_frame_longer_than_a_slot_is_refused_and_the_rest_still_leave(netns):
    out = _run(netns, """
a, b = RingSocket("va", frame_size=512), RingSocket("vb")
fr = [frame(0, 100), frame(1, 600), frame(2, 464), frame(3, 465)]
res = a.send(fr)
got = collect(b, 2, timeout=1.0)
out = {"res": res, "got": [len(f) for f in got], "max": a.max_tx}
""")
    assert out == {"res": [2, 2], "got": [100, 464], "max": 464}


def test_a_full_transmit_ring_waits_for_room(netns):
    """More frames than transmit slots in one call: the ring is flushed and refilled, nothing refused."""
    out = _run(netns, """
a, b = RingSocket("va", tx_frames=64), RingSocket("vb")
fr = [frame(i, 300) for i in range(1000)]
res = a.send(fr)
got = collect(b, 1000)
out = {"res": res, "slots": a.tx_frames, "ok": got == fr}
""")
    assert out == {"res": [1000, 0], "slots": 64, "ok": True}


def test_free_transmit_slots_come_from_one_read_of_the_kernels_status_words():
    """The kernel rewrites a slot's status while another thread flushes the ring: a slot still sending at
    one read may be free at the next.  tx_free must decide from one snapshot (reading twice once crashed the
    data plane with an IndexError when the two reads disagreed)."""
    from p4gen.netio.rings import TP_STATUS_SENDING

    reads = []

    class Words:                          # st[h:h + want]: each read shows the ring as the kernel left it then
        def __init__(self, n):
            self.n = n

        def __array__(self, dtype=None, copy=None):
            a = np.zeros(self.n, np.uint32)
            if not reads:
                a[1] = TP_STATUS_SENDING      # slot 1 is still leaving at the first read, gone by the second
            reads.append(1)
            return a

        def any(self):
            return bool(np.asarray(self).any())

    class Column:
        def __getitem__(self, sl):
            return Words(len(range(*sl.indices(64))))

    class Tx32:
        def __getitem__(self, key):
            return Column()

    sock = RingSocket.__new__(RingSocket)     # no socket: only the transmit-ring bookkeeping
    sock.tx_frames, sock._tx_head, sock._tx32 = 64, 0, Tx32()
    assert sock.tx_free(8) == 1 and len(reads) == 1


def test_rings_on_something_that_is_not_an_interface_fail_cleanly():
    if os.geteuid() != 0:
        pytest.skip("needs root for AF_PACKET sockets")
    with pytest.raises(OSError):
        RingSocket("p4gtest-none0")
    with pytest.raises(RingUnavailable, match="frame_size=100 must be a multiple of 16"):
        RingSocket("lo", frame_size=100)


def _udp_pair():
    import socket

    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    return a, b


def test_datagram_batches_arrive_exactly_with_the_prefix():
    from p4gen.netio.mmsg import DatagramBatches

    a, b = _udp_pair()
    with a, b:
        A, B = DatagramBatches(a, batch=64), DatagramBatches(b, batch=64, max_size=1200)
        dgs = [bytes([i % 251]) * (20 + (i * 13) % 1100) for i in range(500)] + [bytes(range(256)) * 4] * 300
        assert A.send(dgs, b.getsockname()) == (800, 0)
        got = []
        for _ in range(200):
            got += B.recv(prefix=b"\x02HDR")
            if len(got) == len(dgs):
                break
        assert got == [b"\x02HDR" + d for d in dgs]
        assert B.recv() == [] and B.truncated == 0


def test_datagram_batches_send_each_row_cut_to_its_length():
    from p4gen.netio.mmsg import DatagramBatches

    a, b = _udp_pair()
    with a, b:
        A, B = DatagramBatches(a, batch=4), DatagramBatches(b, batch=64)
        rows = np.arange(10 * 300, dtype=np.uint32).astype(np.uint8).reshape(10, 300)
        lens = np.array([300, 40, 40, 300, 1, 300, 40, 300, 300, 40])       # more rows than a batch
        assert A.send_rows(rows, b.getsockname(), lens) == (10, 0)
        got = []
        for _ in range(200):
            got += B.recv()
            if len(got) == len(rows):
                break
        assert got == [r[:n].tobytes() for r, n in zip(rows, lens.tolist())]


def test_datagram_batches_move_matrix_rows_and_fall_back_to_bytes_for_mixed_lengths():
    from p4gen.netio.mmsg import DatagramBatches

    a, b = _udp_pair()
    with a, b:
        A, B = DatagramBatches(a, batch=64), DatagramBatches(b, batch=256, max_size=1200)
        rows = np.arange(300 * 1100, dtype=np.uint32).astype(np.uint8).reshape(300, 1100)
        assert A.send_rows(rows, b.getsockname()) == (300, 0)
        got = []
        for _ in range(200):
            m = B.recv_rows(prefix=b"PFX")
            assert isinstance(m, np.ndarray)
            got += [r.tobytes() for r in m]
            if len(got) == len(rows):
                break
        assert got == [b"PFX" + r.tobytes() for r in rows]
        assert B.recv_rows().shape == (0, 0)
        assert A.send_rows(np.zeros((2, 3000), np.uint8), b.getsockname()) == (0, 2)   # wider than max_size
        assert A.send([b"ab", b"cde"], b.getsockname()) == (2, 0)
        mixed = []
        for _ in range(100):
            mixed += B.recv_rows(prefix=b"P")
            if len(mixed) == 2:
                break
        assert mixed == [b"Pab", b"Pcde"]


def test_datagram_batches_refuse_and_truncate_what_does_not_fit():
    import socket

    from p4gen.netio.mmsg import BatchIOUnavailable, DatagramBatches

    a, b = _udp_pair()
    with a, b:
        A, B = DatagramBatches(a, max_size=100), DatagramBatches(b, max_size=50)
        assert A.send([b"x" * 10, b"y" * 101, b"z" * 80], b.getsockname()) == (2, 1)
        got = []
        for _ in range(100):
            got += B.recv()
            if len(got) == 2:
                break
        assert got == [b"x" * 10, b"z" * 50] and B.truncated == 1
        with pytest.raises(ValueError, match="prefix of 80 bytes exceeds prefix_room=64"):
            B.recv(prefix=bytes(80))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
        with pytest.raises(BatchIOUnavailable, match="needs an AF_INET SOCK_DGRAM socket"):
            DatagramBatches(t)


ROUNDS = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "retain":
    from p4gen.netio.heap import retain_freed_memory
    assert retain_freed_memory()
def one_round():                  # a packet loop's round: several arrays of 1 MiB alive at once, then freed
    xs = [np.ones(1 << 18, np.uint32) for _ in range(6)]
    del xs
one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    one_round()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def test_retained_heap_keeps_a_rounds_arrays_from_faulting_pages_in_again():
    """With the default thresholds, the 6 MiB a round frees at the top of the heap go back to the kernel and
    the next round faults its ~1,500 pages in again; with retain_freed_memory it reuses them."""
    from p4gen.netio.heap import retain_freed_memory

    if not retain_freed_memory():
        pytest.skip("the C library has no mallopt (not glibc)")
    faults = {how: float(subprocess.run([sys.executable, "-c", ROUNDS, how], check=True, capture_output=True,
                                        text=True).stdout.split()[-1]) for how in ("default", "retain")}
    assert faults["retain"] < 20, faults
    assert faults["default"] > 1000, faults


def test_a_tag_the_kernel_strips_is_put_back_by_rings_and_by_sockets(netns):
    """A received frame's outer 802.1Q tag arrives out of band (ring header, PACKET_AUXDATA); both ports
    give the frame back exactly as it was on the wire: single-tagged, priority-tagged, QinQ, untagged."""
    out = _run(netns, """
a, b, c = RingSocket("va"), RingSocket("vb"), SocketPort("vb")
base = frame(1, 80)
def tag(f, tpid, tci):
    return f[:12] + tpid.to_bytes(2, "big") + tci.to_bytes(2, "big") + f[12:]
sent = [tag(base, 0x8100, 100), tag(base, 0x8100, 0), tag(tag(base, 0x8100, 0x2005), 0x88A8, 7), base,
        *[tag(frame(i, 200), 0x8100, 5) for i in range(40)]]
a.send(sent)
ring = collect(b, len(sent))
sock = collect(c, len(sent))
out = {"ring": ring == sent, "sock": sock == sent, "n": [len(ring), len(sock)]}
""")
    assert out == {"ring": True, "sock": True, "n": [44, 44]}
