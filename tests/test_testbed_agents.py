"""How the harness reads its workers' events (p4gen.testbed.harness._Agents), without a network."""

from __future__ import annotations

import pytest

from p4gen.testbed.errors import JobError
from p4gen.testbed.harness import _Agents


class _Proc:
    def __init__(self, name: str):
        self.name, self.log = name, f"/tmp/{name}.log"

    def tail(self, n: int) -> str:
        return "last line"


def _agents(*events) -> _Agents:
    a = _Agents(net=None)
    a.procs = {0: _Proc("h1"), 1: _Proc("h2")}
    for e in events:
        a.events.put(e)
    return a


def test_a_worker_that_is_done_may_exit_before_the_others_are_done():
    a = _agents((0, {"event": "done", "time": 1.0}), (0, {"event": "exit", "rc": 0}), (1, {"event": "done", "time": 2.0}))
    assert sorted(a.wait_all("done", 5.0, "done")) == [0, 1]


def test_a_worker_that_exits_before_it_is_done_fails_the_wait():
    a = _agents((0, {"event": "exit", "rc": 0}), (1, {"event": "done", "time": 2.0}))
    with pytest.raises(JobError, match=r"^worker 0 \(h1\) failed before it was done: exited with status 0 "
                                       r"\(last line\); see /tmp/h1\.log$"):
        a.wait_all("done", 5.0, "done")


def test_a_worker_that_is_ready_and_exits_fails_the_ready_wait():
    a = _agents((0, {"event": "ready"}), (0, {"event": "exit", "rc": 0}), (1, {"event": "ready"}))
    with pytest.raises(JobError, match=r"^worker 0 \(h1\) failed before it was ready: exited with status 0"):
        a.wait_all("ready", 5.0, "ready")
