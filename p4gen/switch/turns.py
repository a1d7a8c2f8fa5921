"""The lock the packet loop and the control plane share: each thread gets it in the order it asked.

A plain lock does not hand itself over: a thread that releases it and asks again at once (a Write applying
one update after another) takes it back before the thread that waited (the packet loop) has woken, for as
long as its run lasts -- 20,000 register updates kept a data plane from forwarding for seconds.  A
:class:`TurnLock` gives itself to the longest-waiting thread on release, so between two updates of a
Write the packet loop gets its turn.
"""

from __future__ import annotations

import collections
import threading

_HANDED = object()          # the owner while the lock passes to the thread of the first gate in the queue


class TurnLock:
    """A reentrant lock served first come, first served (``with lock:``, ``acquire``/``release``)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._owner: object = None
        self._depth = 0
        self._queue: collections.deque = collections.deque()      # a locked gate per waiting thread

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return True
            if self._owner is None and not self._queue:
                self._owner, self._depth = me, 1
                return True
            if not blocking:
                return False
            gate = threading.Lock()
            gate.acquire()
            self._queue.append(gate)
        got = gate.acquire(timeout=timeout) if timeout >= 0 else gate.acquire()
        with self._mutex:
            if not got and gate in self._queue:            # gave up before its turn came
                self._queue.remove(gate)
                return False
            self._owner, self._depth = me, 1               # its turn (perhaps just as it gave up)
            return True

    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release a TurnLock this thread does not hold")
            self._depth -= 1
            if self._depth:
                return
            if self._queue:
                self._owner = _HANDED
                self._queue.popleft().release()
            else:
                self._owner = None

    def __enter__(self) -> "TurnLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
