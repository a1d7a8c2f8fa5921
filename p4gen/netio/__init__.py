"""Batched packet I/O: one system call per batch of frames, not one per frame.

* :mod:`p4gen.netio.rings` -- AF_PACKET sockets with a TPACKET_V3 receive
  ring and a transmit ring mapped into the process (``PACKET_RX_RING`` /
  ``PACKET_TX_RING``); frames are read from and written to the rings
  through numpy views.
* :mod:`p4gen.netio.frames` -- one interface over a ring socket or, where
  rings are unavailable, a plain AF_PACKET socket read and written frame by
  frame (:func:`open_port` picks and says why).
* :mod:`p4gen.netio.mmsg` -- UDP datagrams in batches through
  ``recvmmsg``/``sendmmsg``, for hosts whose traffic must pass the kernel's
  IP stack (iptables, tc).
* :mod:`p4gen.netio.heap` -- keeps freed memory in the process, so that a
  packet loop's per-round arrays do not fault their pages in every round.

This package depends on nothing else in p4gen but :mod:`p4gen.errors`, so
both the switch runtime and the host side may use it.
"""
