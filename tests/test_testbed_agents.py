"""The harness's bookkeeping without a network: its workers' events (p4gen.testbed.harness._Agents) and the
window it gives them."""

from __future__ import annotations

import pytest

from needs import modules

modules("the testbed", "mininet")

from p4gen.testbed.errors import JobError  # noqa: E402
from p4gen.testbed.harness import _Agents, window_and_timeout  # noqa: E402
from p4gen.testbed.nodes import BMv2Switch, SoftSwitch  # noqa: E402


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


def test_the_window_fits_what_the_switch_takes_in_flight():
    assert SoftSwitch.max_in_flight is None and BMv2Switch.max_in_flight == 24
    assert window_and_timeout(100, 1075, None, SoftSwitch, 3) == (64, 0.1)           # the links bound it
    assert window_and_timeout(100, 1075, None, BMv2Switch, 3) == (8, 0.1)            # 24 frames over 3 workers
    assert window_and_timeout(100, 1075, None, BMv2Switch, 32)[0] == 1
    assert window_and_timeout(100, 1075, 32, BMv2Switch, 3)[0] == 32                 # asked for: given
    w, rto = window_and_timeout(5, 1075, None, SoftSwitch, 8)
    assert w == 64 and rto == pytest.approx(3 * 64 * 1075 * 8 / 5e6)     # three windows on the link


def test_the_window_grows_with_the_tensor_to_a_sixteenth_of_its_chunks():
    assert window_and_timeout(25, 1075, None, SoftSwitch, 8, chunks=1024)[0] == 64   # 1 MiB: the smallest window
    assert window_and_timeout(25, 1075, None, SoftSwitch, 8, chunks=2048)[0] == 128
    w, rto = window_and_timeout(25, 1075, None, SoftSwitch, 8, chunks=4096)        # 4 MiB: 256 slots
    assert w == 256 and rto == pytest.approx(3 * 256 * 1075 * 8 / 25e6)
    assert window_and_timeout(25, 1075, None, SoftSwitch, 8, chunks=1 << 20)[0] == 256
    assert window_and_timeout(100, 1075, None, BMv2Switch, 3, chunks=4096)[0] == 8    # still what BMv2 takes in flight


def test_a_window_of_jumbo_frames_holds_as_many_bytes():
    # 8 KiB frames (the soft target's 2048 values): 8 to 32 slots where 1 KiB frames get 64 to 256
    assert window_and_timeout(25, 8243, None, SoftSwitch, 8, chunks=64)[0] == 8
    w, rto = window_and_timeout(25, 8243, None, SoftSwitch, 8, chunks=512)         # 4 MiB: 32 slots
    assert w == 32 and rto == pytest.approx(3 * 32 * 8243 * 8 / 25e6)
    assert window_and_timeout(25, 8243, None, SoftSwitch, 8, chunks=1 << 20)[0] == 32


def test_omnireduce_keeps_at_most_128_streams():
    from types import SimpleNamespace

    from p4gen.testbed.harness import window_sizing

    layout = SimpleNamespace(elements=128)
    assert window_sizing("switchml", 1 << 20, layout) == {"chunks": 8192, "per": 16, "most": None}
    q = window_sizing("omnireduce", 1 << 20, layout)
    assert q == {"chunks": 8192, "per": 16, "most": 128}
    assert window_and_timeout(25, 567, None, SoftSwitch, 8, **q)[0] == 128               # bmv2's 128-value blocks
    assert window_and_timeout(25, 8247, None, SoftSwitch, 8, **dict(q, chunks=512))[0] == 32   # soft's 2048: 32 of 8 KiB
