"""Slots a finished job leaves behind can be used again: `ctl setup` zeroes exactly the new job's slots.

A job's last rounds leave chunk indices, bitmaps, counts and sums in its slots; a new job on them
starts at tsi 0, and before, every one of its contributions was dropped as stale until a switch-wide
`ctl reset` (which no switch running another job can take).  Here a second p4gen.torch session on the
slots of a finished job completes every chunk, `ctl reset --job N` zeroes one job's slots while
another job's stay as they were, and the slot ranges p4gen.slotrows gives are checked against what a
job really touches in the model.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from p4gen.controller import Controller, connect, load_build, load_job
from p4gen.controller.cli import main as ctl_main
from p4gen.host import codec
from p4gen.switch.model import SwitchModel
from p4gen.switch.p4rt_server import P4RuntimeServer
from p4gen.switch.udp import UdpSwitch
from p4gen.torch.session import Session, member_from_job

from loopback import build_plan, write_job

N = 3


@pytest.fixture(scope="module", params=["switchml", "omnireduce"])
def build_dir(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"reuse-{request.param}") / "build"
    build_plan(d, request.param)
    return d


class Switch:
    """The software switch on 127.0.0.1: a UDP front end and a P4Runtime server sharing one model."""

    def __init__(self, plan):
        self.model = SwitchModel(plan)
        self.lock = threading.RLock()
        self.p4rt = P4RuntimeServer(self.model, lock=self.lock)
        self.udp = UdpSwitch(self.model, ("127.0.0.1", 0), lock=self.lock)

    def __enter__(self):
        self.p4rt.start()
        self.udp.__enter__()
        return self

    def __exit__(self, *exc):
        self.udp.__exit__(*exc)
        self.p4rt.stop()


def _allreduce(plan, job, sw, seed: int) -> tuple[list, list]:
    """One all-reduce of 40 chunks per worker by fresh p4gen.torch sessions: (arrays, results)."""
    addr = f"{sw.udp.address[0]}:{sw.udp.address[1]}"
    rng = np.random.default_rng(seed)
    arrays = [(rng.standard_normal(64 * 40) * 3).astype(np.float32) for _ in range(N)]
    sessions = [Session(plan, member_from_job(job, plan, r, N, addr), stall_timeout=3.0, max_timeout=0.1)
                for r in range(N)]
    out = [None] * N

    def rank(r):
        out[r] = sessions[r].submit(arrays[r]).result(timeout=60)
    try:
        ts = [threading.Thread(target=rank, args=(r,)) for r in range(N)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        for s in sessions:
            s.close()
    return arrays, out


def _exact(arrays, got) -> bool:
    exact = np.sum([a.astype(np.float64) for a in arrays], axis=0)
    bound = codec.error_bound(int(max(codec.exponent_of(a) for a in arrays)), N, 32) + np.abs(exact) * 2.0 ** -23
    return all(r is not None and not r.flagged and np.all(np.abs(r.total - exact) <= bound) for r in got)


def test_a_second_job_on_a_finished_jobs_slots_completes_every_chunk(build_dir, tmp_path):
    b = load_build(build_dir)
    first = load_job(write_job(tmp_path / "first.toml", N), b.plan)
    second = load_job(write_job(tmp_path / "second.toml", N), b.plan)           # the same slots, new workers
    with Switch(b.plan) as sw, connect(sw.p4rt.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(first)
        arrays, got = _allreduce(b.plan, first, sw, seed=1)
        assert _exact(arrays, got)
        assert np.any(sw.model.register_read("chunk"))            # the finished job's state is in the slots
        ctl.teardown(first.job)
        stale = sw.model.stats["drop_stale"]
        change = ctl.setup(second)                                # no switch-wide reset in between
        arrays, got = _allreduce(b.plan, second, sw, seed=2)
        assert _exact(arrays, got)                                # every chunk of the second job completed
        assert sw.model.stats["drop_stale"] == stale
        assert change.reset.startswith("its ") and "register entries zeroed with P4Runtime" in change.reset


def test_ctl_reset_job_zeroes_one_jobs_slots_while_another_job_runs(build_dir, tmp_path, capsys):
    from p4gen.slotrows import job_rows

    b = load_build(build_dir)
    slots = b.plan.params.slots
    one = load_job(write_job(tmp_path / "one.toml", N, slot_count=16), b.plan)
    text = (tmp_path / "one.toml").read_text().replace("job = 1\nmgid = 1\nslot_base = 0", "job = 2\nmgid = 2\n"
                                                       f"slot_base = {slots - 16}")
    (tmp_path / "two.toml").write_text(text.replace('ip = "127.0.0.1"', 'ip = "127.0.0.2"'))
    two = load_job(tmp_path / "two.toml", b.plan)
    with Switch(b.plan) as sw, connect(sw.p4rt.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(one)
        ctl.setup(two)
        for name in sw.model.register_names():                   # state in every entry of both jobs
            reg = b.plan.register(name)
            for _r, rows in [x for x in job_rows(b.plan, 0, slots) if x[0].name == name]:
                for i in rows:
                    sw.model.register_write(name, i, [1] * reg.lanes)
        before = {n: sw.model.register_read(n).copy() for n in sw.model.register_names()}
        assert ctl_main(["ctl", "reset", str(build_dir), "--job", "2", "--addr", sw.p4rt.addr,
                         "--election-id", "5"]) == 0
        rows2 = {r.name: rows for r, rows in job_rows(b.plan, two.slot_base, two.slot_count)}
        n = sum(len(r) for r in rows2.values())
        assert capsys.readouterr().out == (f"job 2: zeroed the {n} register entries of slots {slots - 16}..{slots - 1} "
                                           f"with P4Runtime RegisterEntry writes on switch at {sw.p4rt.addr}; the "
                                           f"other jobs' are as they were\n")
        for name, old in before.items():
            now = sw.model.register_read(name)
            inside = np.zeros(len(now), dtype=bool)
            inside[rows2[name].start:rows2[name].stop] = True
            assert not np.any(now[inside]) and np.array_equal(now[~inside], old[~inside]), name
        assert ctl_main(["ctl", "reset", str(build_dir), "--job", "7", "--addr", sw.p4rt.addr,
                         "--election-id", "5"]) == 1
    assert capsys.readouterr().err.startswith("p4gen: error: job 7 is not set up on the switch at ")


@pytest.mark.parametrize("variant", ["hardened", "reference"])
def test_the_entries_a_job_touches_are_exactly_its_slot_rows(variant):
    """A job on slots 5..8 of a 16-slot plan, driven through the model by workers over a lossy network:
    every register entry outside slotrows' ranges stays zero, and inside them some are written."""
    from aggnet import Net, small_plan
    from p4gen.slotrows import job_rows

    plan = small_plan(variant, elements=4, slots=16)
    net = Net(plan, n=3, chunks=30, window=4, seed=3, fifo=variant == "reference", slot_base=5)
    rng = np.random.default_rng(3)
    for _ in range(400):                                           # loss, duplicates, reordering, timeouts
        w, act = int(rng.integers(3)), int(rng.integers(6))
        up, down = net.queue("up", w), net.queue("down", w)
        if act <= 1 and up:
            net.deliver_up(w, int(rng.integers(len(up))))
        elif act == 2 and down:
            net.deliver_down(w, int(rng.integers(len(down))))
        elif act == 3 and up:
            net.drop("up", w, int(rng.integers(len(up))))
        elif act == 4 and down:
            net.duplicate("down", w, int(rng.integers(len(down))), 0)
        else:
            net.tick(0.02)
    net.drain()
    touched = set()
    for reg, rows in job_rows(plan, 5, 4):
        a = net.model.register_read(reg.name)
        outside = np.ones(len(a), dtype=bool)
        outside[rows.start:rows.stop] = False
        assert not np.any(a[outside]), reg.name
        if np.any(a[rows.start:rows.stop]):
            touched.add(reg.role)
    assert {"bitmap", "values"} | ({"chunk", "counter"} if variant == "hardened" else set()) <= touched
    # (the reference counter counts modulo n: a completed round leaves it at 0)
