"""One frame-batch interface over an AF_PACKET ring socket or, where rings are refused, a plain socket.

:func:`open_port` returns a port with ``recv(max_frames)``,
``send(frames)``, ``pending()`` / ``flush()``, ``drops()``, ``fileno()``
and ``close()``:

* :class:`p4gen.netio.rings.RingSocket` when the kernel grants TPACKET_V3
  rings (``kind == "ring"``): no system call per frame;
* :class:`SocketPort` otherwise (``kind == "socket"``): the same calls
  (``take``/``release`` too),
  one ``recv``/``send`` system call per frame, and the reason the rings
  were refused is returned with it so that the caller can say so once.
"""

from __future__ import annotations

import select
import socket
import struct

import numpy as np

from .rings import (ETH_P_8021Q, ETH_P_ALL, PACKET_IGNORE_OUTGOING, PACKET_OUTGOING, PACKET_STATISTICS, SOL_PACKET,
                    TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID, RingSocket, RingUnavailable, vlan_tag)

MAX_FRAME = 1 << 16
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
PACKET_AUXDATA = 8                   # <linux/if_packet.h>: a struct tpacket_auxdata with every frame
AUXDATA = struct.Struct("=IIIHHHH")  # tp_status, tp_len, tp_snaplen, tp_mac, tp_net, tp_vlan_tci, tp_vlan_tpid


def _set_buffer(s: socket.socket, force: int, plain: int, size: int) -> None:
    """Set a socket buffer to ``size`` bytes, past net.core.*mem_max when allowed (root: the FORCE option)."""
    try:
        s.setsockopt(socket.SOL_SOCKET, force, size)
    except OSError:
        try:
            s.setsockopt(socket.SOL_SOCKET, plain, size)
        except OSError:
            pass


class SocketPort:
    """A raw AF_PACKET socket on ``ifname`` read and written one frame per system call.

    Frames leaving the interface are not read back: ``PACKET_IGNORE_OUTGOING``
    where the kernel has it, otherwise the packet type of each frame is
    checked.  ``rcvbuf`` is room for frames while the process is not
    scheduled; frames the kernel dropped because it was full are read by
    :meth:`drops`.  The VLAN tag the kernel strips from a received frame
    comes with it as ``PACKET_AUXDATA`` and is put back where it was, as
    :class:`~p4gen.netio.rings.RingSocket` does."""

    kind = "socket"

    def __init__(self, ifname: str, *, rcvbuf: int = 1 << 25, sndbuf: int = 1 << 23):
        self.ifname = ifname
        self.ignore_outgoing = True
        self.truncated = 0               # frames longer than MAX_FRAME, left out
        # protocol 0: the socket hears nothing until bind names the interface and ETH_P_ALL,
        # so no frame of another interface is queued in between
        self.sock = s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            try:
                s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                self.ignore_outgoing = False
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            _set_buffer(s, SO_RCVBUFFORCE, socket.SO_RCVBUF, rcvbuf)
            _set_buffer(s, SO_SNDBUFFORCE, socket.SO_SNDBUF, sndbuf)
            s.bind((ifname, ETH_P_ALL))
            s.setblocking(False)
        except BaseException:
            s.close()
            raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def recv(self, max_frames: int) -> tuple[list[bytes], int]:
        """(up to ``max_frames`` queued frames, receive errors); never blocks.  A frame longer than
        :data:`MAX_FRAME` is left out and counted in :attr:`truncated`."""
        out: list[bytes] = []
        append = out.append
        recvmsg, room = self.sock.recvmsg, socket.CMSG_SPACE(AUXDATA.size)
        keep_out = not self.ignore_outgoing
        try:
            for _ in range(max_frames):
                frame, anc, flags, addr = recvmsg(MAX_FRAME, room)
                if keep_out and addr[2] == PACKET_OUTGOING:     # our own transmissions, seen by the tap
                    continue
                if flags & socket.MSG_TRUNC:                    # longer than any frame a port carries
                    self.truncated += 1
                    continue
                for level, kind, data in anc:
                    if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= AUXDATA.size:
                        status, _ln, _snap, _mac, _net, tci, tpid = AUXDATA.unpack_from(data)
                        if status & TP_STATUS_VLAN_VALID:
                            tag = vlan_tag(tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q, tci)
                            frame = frame[:12] + tag + frame[12:]
                append(frame)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return out, 1
        return out, 0

    def take(self, max_frames: int) -> tuple[list[np.ndarray], int, int]:
        """As :meth:`p4gen.netio.rings.RingSocket.take`: the queued frames as (1, length) arrays, the frames
        left out as longer than :data:`MAX_FRAME`, and the receive errors."""
        before = self.truncated
        frames, err = self.recv(max_frames)
        return [np.frombuffer(f, np.uint8).reshape(1, -1) for f in frames], self.truncated - before, err

    def release(self) -> None:
        pass

    def discard(self, max_frames: int = 1 << 30) -> int:
        """Read and drop up to ``max_frames`` queued frames; return how many."""
        return len(self.recv(max_frames)[0])

    def send(self, frames, wait: float = 0.05) -> tuple[int, int]:
        """Send frames (bytes-likes, or the rows of a 2-D uint8 array) in order; (sent, refused).  A full send buffer is waited for ``wait`` s per frame."""
        send = self.sock.send
        sent = refused = 0
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
                if not self._wait_writable(wait):
                    refused += 1
                    pending = None
            except InterruptedError:
                pass
            except OSError:
                refused += 1
                pending = None
        return sent, refused

    def _wait_writable(self, wait: float) -> bool:
        p = select.poll()
        p.register(self.sock.fileno(), select.POLLOUT)
        return bool(p.poll(int(wait * 1000)))

    def pending(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def drops(self) -> tuple[int, int]:
        """(frames dropped because the receive buffer was full, 0) since the last call."""
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        except OSError:
            return 0, 0
        return struct.unpack("2I", raw[:8])[1], 0


def open_port(ifname: str, *, rings: bool = True, rx_bytes: int = 8 << 20, tx_frames: int = 2048,
              frame_size: int = 2048) -> tuple[RingSocket | SocketPort, str | None]:
    """(a port on ``ifname``, why it is not a ring socket or None).

    ``rings=False`` asks for the per-frame socket.  ``OSError`` when the
    interface cannot be opened at all."""
    if not rings:
        return SocketPort(ifname), "rings turned off"
    try:
        return RingSocket(ifname, rx_bytes=rx_bytes, tx_frames=tx_frames, frame_size=frame_size), None
    except RingUnavailable as exc:
        return SocketPort(ifname), str(exc)
