"""UDP datagrams in batches: ``recvmmsg``/``sendmmsg`` (Linux >= 3.0 / 2.6.33) through ctypes on libc.

Python's socket module has no call that moves many datagrams at once, and
packet rings bypass the IP stack (iptables, the host's own UDP socket).  A
host whose traffic must pass that stack -- a worker emulator whose loss is
injected with iptables, say -- moves its datagrams with these two system
calls instead: one call per batch, not per datagram.

:class:`DatagramBatches` wraps a bound, non-blocking UDP socket.  Received
datagrams land in a preallocated buffer behind an optional fixed prefix (so
that the caller gets, say, "Ethernet/IPv4/UDP headers + payload" without a
concatenation per datagram); datagrams to send are copied into another
buffer whose rows the ``iovec`` entries point at.  Struct layouts are those
of ``<sys/socket.h>`` / ``<bits/uio.h>`` (``struct mmsghdr``, ``struct
msghdr``, ``struct iovec``) on LP64 Linux.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import socket

import numpy as np

from ..errors import P4genError

MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_Iovec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


class _SockaddrIn(ctypes.Structure):
    _fields_ = [("sin_family", ctypes.c_ushort), ("sin_port", ctypes.c_uint16),
                ("sin_addr", ctypes.c_uint8 * 4), ("sin_zero", ctypes.c_uint8 * 8)]


class BatchIOUnavailable(P4genError):
    """libc has no recvmmsg/sendmmsg here."""


def _libc():
    lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    try:
        rm, sm = lib.recvmmsg, lib.sendmmsg
    except AttributeError:
        raise BatchIOUnavailable("libc has no recvmmsg/sendmmsg") from None
    rm.argtypes = [ctypes.c_int, ctypes.POINTER(_Mmsghdr), ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    sm.argtypes = [ctypes.c_int, ctypes.POINTER(_Mmsghdr), ctypes.c_uint, ctypes.c_int]
    rm.restype = sm.restype = ctypes.c_int
    return rm, sm


class DatagramBatches:
    """Batched receive and send on the UDP socket ``sock`` (IPv4, bound, made non-blocking here).

    ``recv(prefix=b"")`` returns every queued datagram (up to ``batch``), each
    as ``prefix + payload``; ``send(datagrams, dst)`` sends them in order to
    ``dst`` = (ip, port) and returns (sent, failed).  A datagram larger than
    ``max_size`` is truncated on receive (and counted in ``truncated``) and
    refused on send."""

    def __init__(self, sock: socket.socket, *, batch: int = 256, max_size: int = 2048, prefix_room: int = 64):
        if sock.family != socket.AF_INET or sock.type != socket.SOCK_DGRAM:
            raise BatchIOUnavailable("DatagramBatches needs an AF_INET SOCK_DGRAM socket")
        self._recvmmsg, self._sendmmsg = _libc()
        self.sock = sock
        sock.setblocking(False)
        self.fd = sock.fileno()
        self.batch = batch
        self.max_size = max_size
        self.room = prefix_room
        self.truncated = 0
        stride = prefix_room + max_size
        self._rbuf = np.zeros((batch, stride), dtype=np.uint8)
        self._sbuf = np.zeros((batch, max_size), dtype=np.uint8)
        self._riov = (_Iovec * batch)()
        self._siov = (_Iovec * batch)()
        self._rmsg = (_Mmsghdr * batch)()
        self._smsg = (_Mmsghdr * batch)()
        self._dst = _SockaddrIn()
        self._dst_key = None
        rbase, sbase = self._rbuf.ctypes.data, self._sbuf.ctypes.data
        for i in range(batch):
            self._riov[i].iov_base = rbase + i * stride + prefix_room
            self._riov[i].iov_len = max_size
            self._rmsg[i].msg_hdr.msg_iov = ctypes.pointer(self._riov[i])
            self._rmsg[i].msg_hdr.msg_iovlen = 1
            self._siov[i].iov_base = sbase + i * max_size
            self._smsg[i].msg_hdr.msg_iov = ctypes.pointer(self._siov[i])
            self._smsg[i].msg_hdr.msg_iovlen = 1
            self._smsg[i].msg_hdr.msg_name = ctypes.addressof(self._dst)
            self._smsg[i].msg_hdr.msg_namelen = ctypes.sizeof(_SockaddrIn)
        # msg_len of every mmsghdr as one numpy view (received lengths in one read)
        self._rlen = np.frombuffer(self._rmsg, np.uint32)[_Mmsghdr.msg_len.offset // 4::ctypes.sizeof(_Mmsghdr) // 4]
        self._rflags = np.frombuffer(self._rmsg, np.int32)[_Msghdr.msg_flags.offset // 4::ctypes.sizeof(_Mmsghdr) // 4]
        self._siov_len = np.frombuffer(self._siov, np.uint64)[1::2]

    def fileno(self) -> int:
        return self.fd

    def _recv(self, prefix: bytes) -> int:
        """recvmmsg into the buffer rows, ``prefix`` written before each; how many datagrams came."""
        p = len(prefix)
        if p > self.room:
            raise ValueError(f"prefix of {p} bytes exceeds prefix_room={self.room}")
        n = self._recvmmsg(self.fd, self._rmsg, self.batch, MSG_DONTWAIT, None)
        if n <= 0:
            e = ctypes.get_errno()
            if n == 0 or e in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                return 0
            raise OSError(e, f"recvmmsg: {errno.errorcode.get(e, e)}")
        if p:
            self._rbuf[:n, self.room - p:self.room] = np.frombuffer(prefix, np.uint8)
        self.truncated += int(np.count_nonzero(self._rflags[:n] & MSG_TRUNC))
        return n

    def recv(self, prefix: bytes = b"") -> list[bytes]:
        """Every queued datagram (up to ``batch``) as ``prefix + payload``; [] when none; never blocks."""
        n = self._recv(prefix)
        if not n:
            return []
        lens = self._rlen[:n].tolist()
        buf = self._rbuf
        start = self.room - len(prefix)
        rows = buf[:n].tobytes()
        stride = buf.shape[1]
        return [rows[i * stride + start:i * stride + self.room + ln] for i, ln in enumerate(lens)]

    def recv_rows(self, prefix: bytes = b""):
        """Every queued datagram (up to ``batch``) as ``prefix + payload``: when they are all of one length,
        as the rows of a uint8 matrix (a view of the receive buffer, valid until the next receive), else
        as a list of bytes as :meth:`recv` gives; an empty matrix when none; never blocks."""
        n = self._recv(prefix)
        lens = self._rlen[:n]
        if n and (lens != lens[0]).any():
            start, buf = self.room - len(prefix), self._rbuf
            return [buf[i, start:self.room + ln].tobytes() for i, ln in enumerate(lens.tolist())]
        ln = int(lens[0]) if n else 0
        return self._rbuf[:n, self.room - len(prefix):self.room + ln]

    def send(self, datagrams: list, dst: tuple[str, int]) -> tuple[int, int]:
        """Send ``datagrams`` (bytes-like) to ``dst`` in order, ``batch`` per call; (sent, failed).

        A datagram the kernel refuses (full buffer, unreachable, too long)
        is counted as failed and the rest still go out."""
        self._dest(dst)
        sent = failed = 0
        for k in range(0, len(datagrams), self.batch):
            part = datagrams[k:k + self.batch]
            lens = [len(d) for d in part]
            keep = [i for i, ln in enumerate(lens) if ln <= self.max_size]
            if len(keep) != len(part):
                failed += len(part) - len(keep)
                part = [part[i] for i in keep]
                lens = [lens[i] for i in keep]
            m = len(part)
            if not m:
                continue
            L = lens[0]
            if lens.count(L) == m:
                self._sbuf[:m, :L] = np.frombuffer(b"".join(part), np.uint8).reshape(m, L)
            else:
                for i, d in enumerate(part):
                    self._sbuf[i, :len(d)] = np.frombuffer(d, np.uint8)
            self._siov_len[:m] = lens
            s_, f_ = self._sendmmsg_rows(m)
            sent, failed = sent + s_, failed + f_
        return sent, failed

    def send_rows(self, rows: np.ndarray, dst: tuple[str, int], lens: np.ndarray | None = None) -> tuple[int, int]:
        """Send the rows of the uint8 matrix ``rows`` (one datagram each: the whole row, or its first
        ``lens[i]`` bytes) to ``dst`` in order; (sent, failed) as :meth:`send`."""
        m, L = rows.shape
        if not m:
            return 0, 0
        if L > self.max_size:
            return 0, m
        self._dest(dst)
        sent = failed = 0
        for k in range(0, m, self.batch):
            part = rows[k:k + self.batch]
            self._sbuf[:len(part), :L] = part
            self._siov_len[:len(part)] = L if lens is None else lens[k:k + self.batch]
            s_, f_ = self._sendmmsg_rows(len(part))
            sent, failed = sent + s_, failed + f_
        return sent, failed

    def _dest(self, dst: tuple[str, int]) -> None:
        if dst != self._dst_key:
            self._dst.sin_family = socket.AF_INET
            self._dst.sin_port = socket.htons(dst[1])
            self._dst.sin_addr[:] = socket.inet_aton(dst[0])
            self._dst_key = dst

    def _sendmmsg_rows(self, m: int) -> tuple[int, int]:
        """sendmmsg the first ``m`` rows of the send buffer (their lengths set); (sent, failed)."""
        sent = failed = done = 0
        while done < m:
            r = self._sendmmsg(self.fd, ctypes.byref(self._smsg[done]), m - done, MSG_DONTWAIT)
            if r > 0:
                done += r
                sent += r
                continue
            if ctypes.get_errno() == errno.EINTR:
                continue
            # the datagram at ``done`` failed (EAGAIN: the send buffer is full): lose it, go on
            failed += 1
            done += 1
        return sent, failed
