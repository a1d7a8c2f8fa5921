"""AF_PACKET sockets with mmap'd TPACKET_V3 receive and transmit rings, read and written with numpy.

Layouts and constants are those of the Linux UAPI header
``include/uapi/linux/if_packet.h`` (struct ``tpacket_req3``,
``tpacket_block_desc`` / ``tpacket_hdr_v1``, ``tpacket3_hdr``, the
``TP_STATUS_*`` bits) and the packet(7) / ``Documentation/networking/
packet_mmap.rst`` rules:

* **Receive ring (TPACKET_V3).** The ring is ``rx_blocks`` blocks of
  ``block_size`` bytes.  The kernel fills a block with variable-sized
  frames (each a ``tpacket3_hdr``, a ``sockaddr_ll`` and the frame,
  ``tp_next_offset`` bytes apart) and hands it over by setting
  ``TP_STATUS_USER`` in the block's status, when the block is full or when
  ``retire_ms`` passed since its first frame.  User space walks the blocks
  in order and gives each back by writing ``TP_STATUS_KERNEL``.  No system
  call per frame; a ``poll`` only when no block is ready.
* **Transmit ring (TPACKET_V3, Linux >= 4.11).** Fixed slots of
  ``frame_size`` bytes, each a ``tpacket3_hdr`` (``tp_next_offset`` must
  stay 0) followed, at offset ``TPACKET_ALIGN(sizeof(tpacket3_hdr))`` = 48,
  by the frame.  User space writes frames into the slots after the
  kernel's position, sets ``tp_len`` and ``TP_STATUS_SEND_REQUEST``, and
  one ``send()`` with no data hands every requested slot to the device in
  ring order.  The kernel returns a slot by setting
  ``TP_STATUS_AVAILABLE`` once its frame has left.  ``PACKET_LOSS`` is set,
  so a frame the device refuses is skipped instead of stopping the ring.

Both rings live in one ``mmap`` of the socket (receive ring first).  The
header fields of many frames are read or written at once through numpy
views of that mapping; a batch of frames of one length is one fancy-index
copy.  The orders of these accesses (frame data before the status word that
publishes it, status before data on the way in) are the program order of
this module; they are sufficient on x86-64, where stores are not reordered
with stores nor loads with loads.

**802.1Q tags.** The kernel takes a received frame's outer VLAN tag out of
the frame before any packet socket sees it (``skb_vlan_untag``, on every
device, offload or not) and reports it in the frame's ring header instead:
``TP_STATUS_VLAN_VALID`` in ``tp_status``, the tag in ``hv1.tp_vlan_tci``
and, with ``TP_STATUS_VLAN_TPID_VALID``, its TPID in ``hv1.tp_vlan_tpid``.
:meth:`RingSocket.take` puts the tag back where it was on the wire (after
the two MAC addresses), so a tagged frame reaches its reader exactly as it
was sent: for the switch model and the P4 program, a frame whose EtherType is
802.1Q, i.e. not an aggregation packet, forwarded on L2 with its tag.

Frames the kernel could not queue because every block of the receive ring
was still held by user space are counted by the kernel (``tp_drops`` of
``PACKET_STATISTICS``, with ``tp_freeze_q_cnt`` the times the queue froze);
:meth:`RingSocket.drops` reads and resets them.
"""

from __future__ import annotations

import math
import mmap
import os
import select
import socket
import struct
import threading
import time

import numpy as np

from ..errors import P4genError

# <linux/if_packet.h>
SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
PACKET_TX_RING = 13
PACKET_LOSS = 14
PACKET_IGNORE_OUTGOING = 23          # Linux >= 4.20
TPACKET_V3 = 2
PACKET_OUTGOING = 4                  # sll_pkttype of a frame this host sent
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1 << 0
TP_STATUS_AVAILABLE = 0
TP_STATUS_SEND_REQUEST = 1 << 0
TP_STATUS_SENDING = 1 << 1
TP_STATUS_WRONG_FORMAT = 1 << 2
TP_STATUS_VLAN_VALID = 1 << 4        # the kernel stripped a VLAN tag: it is in hv1.tp_vlan_tci
TP_STATUS_VLAN_TPID_VALID = 1 << 6   # ... and its TPID in hv1.tp_vlan_tpid
ETH_P_8021Q = 0x8100
TPACKET_ALIGNMENT = 16
ETH_P_ALL = 0x0003
SO_SNDBUFFORCE = 32

# struct tpacket_block_desc: version, offset_to_priv, then struct tpacket_hdr_v1
BLK_STATUS, BLK_NUM_PKTS, BLK_FIRST = 8, 12, 16
# struct tpacket3_hdr (48 bytes, already TPACKET_ALIGNed), then struct sockaddr_ll
H3_NEXT, H3_SNAPLEN, H3_LEN, H3_STATUS, H3_MAC = 0, 12, 16, 20, 24
H3_VLAN_TCI, H3_VLAN_TPID = 32, 36   # struct tpacket_hdr_variant1 hv1: u32 tp_rxhash, u32 tp_vlan_tci, u16 tp_vlan_tpid
H3_SIZE = 48
SLL_PKTTYPE = H3_SIZE + 10           # sockaddr_ll.sll_pkttype right after the header
TX_DATA = H3_SIZE                    # tp_hdrlen - sizeof(sockaddr_ll) = TPACKET3_HDRLEN - 20
PAGE = mmap.PAGESIZE


class RingUnavailable(P4genError):
    """The kernel refused a packet ring on this socket (too old, no memory, not AF_PACKET)."""


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class RingSocket:
    """One AF_PACKET socket bound to ``ifname`` with a TPACKET_V3 receive ring and transmit ring.

    ``recv(max_frames)`` returns the frames of the ready blocks (copied
    out; the blocks go back to the kernel at once), ``send(frames)``
    queues frames in the transmit ring and flushes them with one system
    call.  ``fileno()`` is pollable: readable when a block is ready,
    writable when a transmit slot is free.

    Frames this socket sends are not read back (``PACKET_IGNORE_OUTGOING``
    where the kernel has it, otherwise by ``sll_pkttype``).  ``rx_bytes``
    and ``tx_frames`` size the rings; ``frame_size`` bounds a transmitted
    frame (minus the 48-byte slot header) and ``block_size`` a received one.
    Raises :class:`RingUnavailable` when the kernel refuses the rings and
    ``OSError`` when the interface cannot be bound.
    """

    kind = "ring"

    def __init__(self, ifname: str, *, rx_bytes: int = 8 << 20, tx_frames: int = 4096, frame_size: int = 2048,
                 block_size: int = 1 << 15, retire_ms: int = 1, sndbuf: int = 1 << 23):
        if frame_size % TPACKET_ALIGNMENT or frame_size < 2 * H3_SIZE:
            raise RingUnavailable(f"frame_size={frame_size} must be a multiple of {TPACKET_ALIGNMENT} "
                                  f"and at least {2 * H3_SIZE}")
        self.ifname = ifname
        self.block_size = _align(max(block_size, 4 * frame_size), PAGE)      # jumbo frames: 4 a block at least
        self.rx_blocks = max(2, rx_bytes // self.block_size)
        self.frame_size = frame_size
        # a transmit block holds whole slots: a slot larger than a page (jumbo frames) gets a block of
        # the least common multiple of the two, so no block ends in a slot's worth of waste
        tx_block = _align(frame_size, PAGE) if frame_size <= PAGE else math.lcm(frame_size, PAGE)
        if tx_block > 16 * _align(frame_size, PAGE):
            tx_block = _align(frame_size, PAGE)
        per_block = tx_block // frame_size
        self.tx_frames = _align(max(tx_frames, per_block), per_block)
        self.max_tx = frame_size - TX_DATA
        self.ignore_outgoing = True
        self._mm = None
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        s = self.sock
        try:
            try:
                s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
                s.setsockopt(SOL_PACKET, PACKET_LOSS, 1)
                s.setsockopt(SOL_PACKET, PACKET_RX_RING,
                             struct.pack("7I", self.block_size, self.rx_blocks, self.block_size, self.rx_blocks,
                                         retire_ms, 0, 0))
                s.setsockopt(SOL_PACKET, PACKET_TX_RING,
                             struct.pack("7I", tx_block, self.tx_frames // per_block, frame_size, self.tx_frames,
                                         0, 0, 0))
                self.rx_len = self.block_size * self.rx_blocks
                self._mm = mmap.mmap(s.fileno(), self.rx_len + tx_block * (self.tx_frames // per_block),
                                     mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as exc:
                raise RingUnavailable(f"{ifname}: TPACKET_V3 rings refused: {exc.strerror or exc}") from None
            try:
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                self.ignore_outgoing = False
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, sndbuf)
            except OSError:
                pass
            # bound last: the socket hears nothing (protocol 0) until it names the interface and ETH_P_ALL
            s.bind((ifname, ETH_P_ALL))
            s.setblocking(False)
        except BaseException:
            self.close()
            raise
        mm = self._mm
        self._bytes = np.frombuffer(mm, np.uint8)
        self._u32 = np.frombuffer(mm, np.uint32)
        self._u16 = np.frombuffer(mm, np.uint16)
        self._mv32 = memoryview(mm).cast("I")
        self._mv16 = memoryview(mm).cast("H")
        self._blk = 0                                    # next receive block to look at
        self._held: list = []                            # blocks of the last take(), until release()
        tx = self._bytes[self.rx_len:self.rx_len + self.tx_frames * frame_size]
        self._tx8 = tx.reshape(self.tx_frames, frame_size)
        self._tx32 = tx.view(np.uint32).reshape(self.tx_frames, frame_size // 4)
        self._tx_head = 0                                # next transmit slot to fill
        self._tx_last = -1                               # last slot filled (to see whether it left)
        self.flusher: TxFlusher | None = None            # flushes in a thread of its own when set

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        for name in ("_bytes", "_u32", "_u16", "_tx8", "_tx32"):
            self.__dict__.pop(name, None)
        for name in ("_mv32", "_mv16"):
            mv = self.__dict__.pop(name, None)
            if mv is not None:
                mv.release()
        if self._mm is not None:
            try:
                self._mm.close()
            except (BufferError, ValueError):
                pass
            self._mm = None
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RingSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- receive ------------------------------------------------------------------
    def _ready_blocks(self, max_frames: int) -> list[tuple[int, int, int]]:
        """(block offset, first frame offset, frames) of the ready blocks from the current one, in order."""
        out, total = [], 0
        mv, bs, nb = self._mv32, self.block_size, self.rx_blocks
        b = self._blk
        while total < max_frames:
            base = b * bs
            if not mv[(base + BLK_STATUS) >> 2] & TP_STATUS_USER:
                break
            n = mv[(base + BLK_NUM_PKTS) >> 2]
            out.append((base, base + mv[(base + BLK_FIRST) >> 2], n))
            total += n
            b = (b + 1) % nb
            if b == self._blk:
                break
        return out

    def _release(self, blocks) -> None:
        mv = self._mv32
        for base, _first, _n in blocks:
            mv[(base + BLK_STATUS) >> 2] = TP_STATUS_KERNEL
        self._blk = (self._blk + len(blocks)) % self.rx_blocks

    def _runs(self, blocks) -> tuple[list[tuple[int, int, int, int]], int, dict[int, bytes]]:
        """The frames of ``blocks`` as runs (data offset, stride, count, length), the truncated count, and
        the 802.1Q tags the kernel stripped (run index -> the 4 tag bytes, for runs of one frame).

        Frames of one length lie a constant stride apart.  The headers of
        every frame of every block are read at once, on the guess that each
        block is such a run (stride: its first frame's ``tp_next_offset``);
        a block where the guess holds -- every ``tp_next_offset`` but the
        last is the stride, and the frames share their length and header
        size and are whole -- is one run.  Other blocks are walked frame by
        frame (one run per frame), and so is a block holding a frame whose
        VLAN tag the kernel stripped.  Frames cut short to fit a block, and
        without ``PACKET_IGNORE_OUTGOING`` the frames this socket sent, are
        left out."""
        mv = self._mv32
        firsts, ns, strides, ends = [], [], [], []
        for base, first, n in blocks:
            if n:
                firsts.append(first)
                ns.append(n)
                strides.append(mv[(first + H3_NEXT) >> 2])
                ends.append(base + self.block_size)
        if not ns:
            return [], 0, {}
        cnt = np.array(ns, dtype=np.int64)
        total = int(cnt.sum())
        starts = np.cumsum(cnt) - cnt
        blk = np.repeat(np.arange(len(ns)), cnt)
        offs = np.repeat(np.array(firsts, dtype=np.int64), cnt) + (np.arange(total) - starts[blk]) * np.repeat(
            np.array(strides, dtype=np.int64), cnt)
        good = offs + H3_SIZE <= np.repeat(np.array(ends, dtype=np.int64), cnt)
        offs = np.where(good, offs, 0)                       # a wrong guess must not read past the ring
        u32 = self._u32
        q = offs >> 2
        nxt, snap, ln = u32[q + (H3_NEXT >> 2)], u32[q + (H3_SNAPLEN >> 2)], u32[q + (H3_LEN >> 2)]
        mac = self._u16[(offs + H3_MAC) >> 1]
        tagged = (u32[q + (H3_STATUS >> 2)] & TP_STATUS_VLAN_VALID) != 0
        last = np.zeros(total, dtype=bool)
        last[starts + cnt - 1] = True
        good &= (last | (nxt == np.repeat(np.array(strides, dtype=np.uint32), cnt))) & (snap == ln) & ~tagged
        if not self.ignore_outgoing:
            good &= self._bytes[offs + SLL_PKTTYPE] != PACKET_OUTGOING
        # a block is one run when all its frames are good and share the first one's length and mac offset
        first_i = starts
        good &= (snap == snap[first_i][blk]) & (mac == mac[first_i][blk])
        ok = np.logical_and.reduceat(good, starts) if len(ns) > 1 else good.all(keepdims=True)
        runs: list[tuple[int, int, int, int]] = []
        tags: dict[int, bytes] = {}
        truncated = 0
        snap0, mac0 = snap[first_i].tolist(), mac[first_i].tolist()
        for i, fine in enumerate(ok.tolist()):
            if fine:
                runs.append((firsts[i] + mac0[i], strides[i], ns[i], snap0[i]))
                continue
            truncated += self._walk(firsts[i], ns[i], runs, tags)
        return runs, truncated, tags

    def _walk(self, o: int, n: int, runs: list, tags: dict[int, bytes]) -> int:
        """Append the ``n`` frames from offset ``o`` one by one to ``runs`` (and the stripped VLAN tag of
        each tagged one to ``tags``); return how many were truncated."""
        mv, mv16, u8 = self._mv32, self._mv16, self._bytes
        keep_out = not self.ignore_outgoing
        truncated = 0
        for _ in range(n):
            L, full = mv[(o + H3_SNAPLEN) >> 2], mv[(o + H3_LEN) >> 2]
            if L != full:
                truncated += 1
            elif not (keep_out and u8[o + SLL_PKTTYPE] == PACKET_OUTGOING):
                status = mv[(o + H3_STATUS) >> 2]
                if status & TP_STATUS_VLAN_VALID:
                    tpid = mv16[(o + H3_VLAN_TPID) >> 1] if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q
                    tags[len(runs)] = vlan_tag(tpid, mv16[(o + H3_VLAN_TCI) >> 1])
                runs.append((o + mv16[(o + H3_MAC) >> 1], 0, 1, L))
            o += mv[(o + H3_NEXT) >> 2]
        return truncated

    def take(self, max_frames: int = 1 << 30) -> tuple[list[np.ndarray], int, int]:
        """The ready frames as (n, length) uint8 views into the ring, in arrival order, the count of
        frames left out because they were longer than a ring block holds (the kernel cut them short),
        and 0 (receive errors: a ring has none); the views stay valid until :meth:`release`, which must
        be called after every take, whatever it returned.

        Whole blocks are taken, so up to one block more than ``max_frames``
        may be returned.  A frame whose VLAN tag the kernel stripped comes
        back with the tag where it was (a (1, length + 4) array of its own).
        Never blocks."""
        if self._held:
            raise RuntimeError("take() again before release()")
        blocks = self._ready_blocks(max_frames)
        if not blocks:
            return [], 0, 0
        self._held = blocks
        runs, truncated, tags = self._runs(blocks)
        mm = self._mm
        views = [np.ndarray((n, L), np.uint8, mm, start, (stride or L, 1)) for start, stride, n, L in runs]
        for i, tag in tags.items():
            views[i] = with_vlan_tag(views[i][0], tag)
        return views, truncated, 0

    def release(self) -> None:
        """Give the blocks of the last :meth:`take` back to the kernel (its views must no longer be read)."""
        if self._held:
            self._release(self._held)
            self._held = []

    def recv(self, max_frames: int = 1 << 30) -> tuple[list[bytes], int]:
        """(frames of the ready blocks as bytes, frames dropped as truncated); never blocks."""
        try:
            views, truncated, _err = self.take(max_frames)
            frames: list[bytes] = []
            for v in views:
                if len(v) == 1:
                    frames.append(v.tobytes())
                else:
                    L = v.shape[1]
                    blob = v.tobytes()
                    frames += [blob[i:i + L] for i in range(0, len(blob), L)]
        finally:
            self.release()
        return frames, truncated

    def discard(self, max_frames: int = 1 << 30) -> int:
        """Give the ready blocks back unread; return how many frames they held."""
        blocks = self._ready_blocks(max_frames)
        self._release(blocks)
        return sum(n for _b, _f, n in blocks)

    def drops(self) -> tuple[int, int]:
        """(frames dropped because the receive ring was full, times it froze) since the last call."""
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12)
        except OSError:
            return 0, 0
        _pk, drops, freezes = struct.unpack("3I", raw[:12].ljust(12, b"\0"))
        return drops, freezes

    # -- transmit -----------------------------------------------------------------
    def tx_free(self, want: int | None = None) -> int:
        """Free slots from the current one on, up to ``want`` (the kernel returns them in ring order)."""
        n = self.tx_frames
        want = n if want is None else min(want, n)
        st = self._tx32[:, H3_STATUS >> 2]
        h = self._tx_head
        # one read of the status words: the kernel rewrites them meanwhile (a flush in another thread)
        seg = np.array(st[h:h + want]) if h + want <= n else np.concatenate([st[h:], st[:h + want - n]])
        busy = np.flatnonzero(seg)
        return want if not len(busy) else int(busy[0])

    def pending(self) -> bool:
        """Whether frames queued by :meth:`send` are still waiting for the device."""
        return self._tx_last >= 0 and bool(self._tx32[self._tx_last, H3_STATUS >> 2] & TP_STATUS_SEND_REQUEST)

    def flush(self) -> None:
        """Hand the requested slots to the device (one system call); a full send buffer leaves them queued."""
        try:
            self.sock.send(b"")
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass                                         # e.g. ENOBUFS: the device queue dropped a frame

    def send(self, frames, wait: float = 0.05) -> tuple[int, int]:
        """Queue ``frames`` (bytes-likes, or the rows of a 2-D uint8 array) in order and flush them;
        return (queued, refused).

        A frame longer than a slot holds is refused.  When the ring is full,
        it is flushed and ``wait`` seconds at most are spent waiting for
        room; frames that still find none are refused."""
        queued = refused = 0
        n = len(frames)
        k = 0
        while k < n:
            free = self.tx_free(n - k)
            if free == 0:
                self._kick()
                if not self._wait_writable(wait):
                    refused += n - k
                    break
                continue
            part = frames[k:k + free]
            q, r = self._fill(part)
            queued += q
            refused += r
            k += len(part)
            self._kick()
        return queued, refused

    def _kick(self) -> None:
        if self.flusher is not None:
            self.flusher.kick()
        else:
            self.flush()

    def _fill(self, frames) -> tuple[int, int]:
        """Write frames into consecutive free slots (data, then lengths, then the status); (written, too long)."""
        if isinstance(frames, np.ndarray):
            m, L = frames.shape
            if L > self.max_tx:
                return 0, m
            for lo, hi, part in self._spans(m, frames):
                self._tx8[lo:hi, TX_DATA:TX_DATA + L] = part
                self._tx32[lo:hi, H3_LEN >> 2] = L
            return self._publish(m), 0
        lens = [len(f) for f in frames]
        too_long = 0
        if max(lens) > self.max_tx:
            keep = [f for f in frames if len(f) <= self.max_tx]
            too_long = len(frames) - len(keep)
            frames, lens = keep, [len(f) for f in keep]
            if not frames:
                return 0, too_long
        m = len(frames)
        L = lens[0]
        if lens.count(L) == m:
            rows = np.frombuffer(b"".join(frames), np.uint8).reshape(m, L)
            for lo, hi, part in self._spans(m, rows):
                self._tx8[lo:hi, TX_DATA:TX_DATA + L] = part
                self._tx32[lo:hi, H3_LEN >> 2] = L
        else:
            tx8, tx32, N = self._tx8, self._tx32, self.tx_frames
            for i, f in enumerate(frames):
                s_ = (self._tx_head + i) % N
                tx8[s_, TX_DATA:TX_DATA + len(f)] = np.frombuffer(f, np.uint8)
                tx32[s_, H3_LEN >> 2] = len(f)
        return self._publish(m), too_long

    def _spans(self, m: int, rows: np.ndarray):
        """(first slot, end slot, rows) of the ``m`` slots from the current one: one span, or two at the wrap."""
        h, n = self._tx_head, self.tx_frames
        if h + m <= n:
            return [(h, h + m, rows)]
        k = n - h
        return [(h, n, rows[:k]), (0, m - k, rows[k:])]

    def _publish(self, m: int) -> int:
        """Hand the ``m`` filled slots from the current one to the kernel (their status last); ``m``."""
        st = self._tx32[:, H3_STATUS >> 2]
        for lo, hi, _r in self._spans(m, st[:0]):
            st[lo:hi] = TP_STATUS_SEND_REQUEST
        self._tx_last = (self._tx_head + m - 1) % self.tx_frames
        self._tx_head = (self._tx_head + m) % self.tx_frames
        return m

    def _wait_writable(self, wait: float) -> bool:
        p = select.poll()
        p.register(self.sock.fileno(), select.POLLOUT)
        return bool(p.poll(int(wait * 1000)))



def vlan_tag(tpid: int, tci: int) -> bytes:
    """The 4 bytes of an 802.1Q tag as on the wire (TPID, then PCP/DEI/VID), both big-endian."""
    return struct.pack("!HH", tpid, tci)


def with_vlan_tag(frame, tag: bytes) -> np.ndarray:
    """``frame`` (bytes-like) with ``tag`` put back after its two MAC addresses, as a (1, length + 4) array."""
    f = np.frombuffer(frame, np.uint8) if not isinstance(frame, np.ndarray) else frame
    out = np.empty((1, len(f) + 4), np.uint8)
    out[0, :12] = f[:12]
    out[0, 12:16] = np.frombuffer(tag, np.uint8)
    out[0, 16:] = f[12:]
    return out


class TxFlusher:
    """A thread that hands the requested transmit slots of ``socks`` to their devices.

    On a veth pair the kernel does, inside the ``send()`` that flushes a
    ring, the work of transmitting each frame and of receiving it on the
    peer (about 1-2 us of system time per frame here).  With a flusher, that
    work runs in this thread, beside the caller, which only copies frames
    into the ring: ``send`` releases the GIL for the whole system call.
    ``RingSocket.send`` wakes the thread instead of flushing itself."""

    def __init__(self, socks):
        self.socks = [s for s in socks if isinstance(s, RingSocket)]
        # woken through an eventfd: a write is one system call and no Python lock changes hands
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._stopping = False
        self._idle = False
        for s in self.socks:
            s.flusher = self
        self._thread = threading.Thread(target=self._run, name="p4gen-tx-flush", daemon=True)
        self._thread.start()

    def kick(self) -> None:
        """Wake the thread if it waits (while it works it sees new requests itself: no system call)."""
        if self._idle:
            self._idle = False
            try:
                os.eventfd_write(self._efd, 1)
            except (BlockingIOError, OSError):
                pass                                     # the counter is full: a wake-up is pending anyway

    def _run(self) -> None:
        socks = self.socks
        p = select.poll()
        p.register(self._efd, select.POLLIN)
        while not self._stopping:
            # idle first, then one more look: a request published before the flag was seen is found by
            # the look, one published after it wakes the poll (the GIL orders the two threads' steps)
            self._idle = True
            if not any(s.pending() for s in socks) and p.poll(50):
                try:
                    os.eventfd_read(self._efd)
                except (BlockingIOError, OSError):
                    pass
            self._idle = False
            busy = True
            while busy and not self._stopping:
                busy = False
                for s in socks:
                    if s.pending():
                        s.flush()
                        busy = busy or s.pending()
                if busy:                                 # a full send buffer: let the device drain
                    time.sleep(0.0002)

    def close(self) -> None:
        """Stop the thread (after one last flush); the sockets flush for themselves again."""
        self._stopping = True
        self._idle = True
        self.kick()
        self._thread.join()
        os.close(self._efd)
        for s in self.socks:
            s.flusher = None
            if s.pending():
                s.flush()
