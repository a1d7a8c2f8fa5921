"""A switch model, n workers and a network that can lose, duplicate, delay and reorder.

Shared by the stateful Hypothesis suites and the scripted scenarios.  The
network has one queue per direction per worker.  In FIFO mode a queue only
ever delivers its head, and a duplicate sits right behind its original (so a
copy can never overtake a later packet of the same link); otherwise any
queued packet may be delivered next and duplicates land anywhere.
"""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target
from p4gen.host.worker import Worker

SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
JOB = 3


@functools.lru_cache(maxsize=None)
def small_plan(variant: str, elements: int = 4, slots: int = 4, max_workers: int = 4):
    return make_plan(make_spec(slots=slots, elements_per_packet=elements, variant=variant,
                               max_workers=max_workers), load_target("bmv2"))


class ResultMismatch(AssertionError):
    pass


class Net:
    """Everything one run needs; every check raises ResultMismatch / AssertionError."""

    def __init__(self, plan, n: int, chunks: int, window: int, seed: int, fifo: bool, decision=None,
                 slot_base: int = 0):
        self.plan = plan
        self.layout = W.FrameLayout(plan)
        self.fifo = fifo
        self.model = SwitchModel(plan, decision=decision)
        self.addrs = [WorkerAddr(10 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(n)]
        self.config = job_config(plan, JOB, self.addrs, slot_base=slot_base, slot_count=window, mgid=7, rid_base=100)
        self.model.load_config(self.config)
        self.port_of = {a.port: i for i, a in enumerate(self.addrs)}
        k = self.layout.elements
        rng = np.random.default_rng(seed)
        width = self.layout.value_width
        self.inputs = [rng.integers(1, 1 << (width - 2), size=chunks * k, dtype=np.int64) for _ in range(n)]
        total = np.zeros(chunks * k, dtype=np.int64)
        for x in self.inputs:
            total = (total + x) & ((1 << width) - 1)
        self.expected = total.reshape(chunks, k).astype(np.uint64)
        self.workers = [Worker(self.layout, x, job=JOB, window=window, n_workers=n,
                               src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SWITCH, mode="int",
                               timeout=0.01, backoff=2.0, max_timeout=0.08)
                        for x, a in zip(self.inputs, self.addrs)]
        self.up: list[list[bytes]] = [list(w.start(0.0)) for w in self.workers]
        self.down: list[list[bytes]] = [[] for _ in self.workers]
        self.now = 0.0
        self.results_seen = 0

    # -- network actions ---------------------------------------------------
    def queue(self, direction: str, w: int) -> list[bytes]:
        return (self.up if direction == "up" else self.down)[w]

    def deliver_up(self, w: int, idx: int = 0) -> None:
        frame = self.up[w].pop(0 if self.fifo else idx)
        for port, out in self.model.process(frame, self.addrs[w].port):
            self.check_switch_result(out)
            self.down[self.port_of[port]].append(out)

    def deliver_down(self, w: int, idx: int = 0) -> None:
        frame = self.down[w].pop(0 if self.fifo else idx)
        self.up[w].extend(self.workers[w].receive(frame, self.now))
        self.check_worker(w)

    def deliver_up_fifo(self, w: int) -> None:
        frame = self.up[w].pop(0)
        for port, out in self.model.process(frame, self.addrs[w].port):
            self.check_switch_result(out)
            self.down[self.port_of[port]].append(out)

    def deliver_down_fifo(self, w: int) -> None:
        frame = self.down[w].pop(0)
        self.up[w].extend(self.workers[w].receive(frame, self.now))
        self.check_worker(w)

    def drop(self, direction: str, w: int, idx: int) -> None:
        self.queue(direction, w).pop(idx)

    def duplicate(self, direction: str, w: int, idx: int, where: int) -> None:
        q = self.queue(direction, w)
        q.insert(idx + 1 if self.fifo else where, q[idx])

    def tick(self, dt: float) -> None:
        self.now += dt
        for w, worker in enumerate(self.workers):
            self.up[w].extend(worker.tick(self.now))

    # -- properties ----------------------------------------------------------
    def check_switch_result(self, frame: bytes) -> None:
        """Every result the switch emits carries exactly the sum of its chunk."""
        r = P.parse_result(self.layout, frame)
        self.results_seen += 1
        d = r.tsi                                  # int mode: index t is chunk t
        if not 0 <= d < len(self.expected):
            raise ResultMismatch(f"switch emitted a result for tsi {r.tsi}, which no worker sent")
        if not np.array_equal(r.values.astype(np.uint64), self.expected[d]):
            raise ResultMismatch(f"switch result for chunk {d} is {r.values.tolist()}, "
                                 f"expected {self.expected[d].tolist()}")

    def check_worker(self, w: int) -> None:
        wk = self.workers[w]
        done = wk.complete
        if not np.array_equal(wk._out[done], self.expected[done]):
            bad = [d for d in np.flatnonzero(done) if not np.array_equal(wk._out[d], self.expected[d])]
            raise ResultMismatch(f"worker {w} accepted a wrong sum for chunk(s) {bad}")

    def check_all(self) -> None:
        for w in range(len(self.workers)):
            self.check_worker(w)

    def drain(self, max_rounds: int = 2000) -> None:
        """Reliable FIFO delivery from now on, advancing time when idle; every chunk must complete."""
        for _ in range(max_rounds):
            if all(w.done for w in self.workers):
                break
            moved = False
            for w in range(len(self.workers)):
                while self.up[w]:
                    self.deliver_up_fifo(w)
                    moved = True
            for w in range(len(self.workers)):
                while self.down[w]:
                    self.deliver_down_fifo(w)
                    moved = True
            if not moved:
                deadlines = [d for d in (w.next_deadline() for w in self.workers) if d is not None]
                self.tick(max(0.0, min(deadlines) - self.now) if deadlines else 0.01)
        self.check_all()
        stuck = [i for i, w in enumerate(self.workers) if not w.done]
        assert not stuck, (f"workers {stuck} never completed (chunks missing: "
                           f"{[np.flatnonzero(~self.workers[i].complete).tolist() for i in stuck]}); "
                           f"switch stats {self.model.stats}")


def machine(variant: str, fifo: bool, decision=None, n_workers=(2, 4), max_chunks: int = 6):
    """A RuleBasedStateMachine class over ``Net`` for one variant / network model."""
    plan = small_plan(variant)

    class AggregationNetwork(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.net: Net | None = None

        @initialize(n=st.integers(*n_workers), chunks=st.integers(1, max_chunks), window=st.integers(1, 3),
                    seed=st.integers(0, 2 ** 16))
        def setup(self, n, chunks, window, seed):
            self.net = Net(plan, n, chunks, window, seed, fifo, decision=decision)

        def _pick(self, data, direction: str):
            qs = self.net.up if direction == "up" else self.net.down
            w = data.draw(st.sampled_from([i for i, q in enumerate(qs) if q]), label="worker")
            idx = 0 if fifo else data.draw(st.integers(0, len(qs[w]) - 1), label="index")
            return w, idx

        def _any(self, direction: str) -> bool:
            return self.net is not None and any(self.net.up if direction == "up" else self.net.down)

        @precondition(lambda self: self._any("up"))
        @rule(data=st.data())
        def deliver_up(self, data):
            w, idx = self._pick(data, "up")
            self.net.deliver_up(w, idx)

        @precondition(lambda self: self._any("down"))
        @rule(data=st.data())
        def deliver_down(self, data):
            w, idx = self._pick(data, "down")
            self.net.deliver_down(w, idx)

        @precondition(lambda self: self._any("up") or self._any("down"))
        @rule(data=st.data(), direction=st.sampled_from(["up", "down"]))
        def lose(self, data, direction):
            if not self._any(direction):
                return
            qs = self.net.up if direction == "up" else self.net.down
            w = data.draw(st.sampled_from([i for i, q in enumerate(qs) if q]), label="worker")
            self.net.drop(direction, w, data.draw(st.integers(0, len(qs[w]) - 1), label="index"))

        @precondition(lambda self: self._any("up") or self._any("down"))
        @rule(data=st.data(), direction=st.sampled_from(["up", "down"]))
        def duplicate(self, data, direction):
            if not self._any(direction):
                return
            qs = self.net.up if direction == "up" else self.net.down
            w = data.draw(st.sampled_from([i for i, q in enumerate(qs) if q]), label="worker")
            idx = data.draw(st.integers(0, len(qs[w]) - 1), label="index")
            where = data.draw(st.integers(0, len(qs[w])), label="where")
            self.net.duplicate(direction, w, idx, where)

        @precondition(lambda self: self.net is not None)
        @rule(dt=st.sampled_from([0.005, 0.01, 0.04]))
        def time_passes(self, dt):
            self.net.tick(dt)

        @invariant()
        def accepted_results_are_exact(self):
            if self.net is not None:
                self.net.check_all()

        def teardown(self):
            if self.net is not None:
                self.net.drain()

    AggregationNetwork.__name__ = f"AggregationNetwork_{variant}_{'fifo' if fifo else 'any_order'}"
    return AggregationNetwork
