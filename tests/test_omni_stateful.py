"""Stateful properties of OmniReduce workers and the switch model over an adversarial network.

2..4 workers (``p4gen.host.omni_worker.OmniWorker``, integer mode) run one
block-sparse all-reduce through ``SwitchModel`` on the omnireduce plan; the
network of ``aggnet.Net`` loses, duplicates, delays and reorders frames in
both directions.  Sparsity patterns: random, some workers all-zero, every
worker dense, disjoint supports, and everything zero.

Properties (``OmniNet`` raises ``ResultMismatch`` when one fails):

* every frame a worker sends belongs to a round whose block is non-zero for
  some worker (all-zero block positions are never sent by anyone), carries
  data exactly when the block is non-zero for the sender, and announces the
  sender's true next non-zero block of the stream;
* every result the switch emits carries the exact sum of its block (so no
  contribution counts twice or is lost) and the true minimum next block;
* every result a worker accepts is exact, and with eventual reliable
  delivery every worker assembles the exact dense sum.

Two mutants of the decision table (the minimum replaced by the last
writer; a round that opens with a header-only packet forgetting to clear
the slot) are caught by Hypothesis searching the same machine.
"""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import initialize, run_state_machine_as_test

from aggnet import JOB, SWITCH, Net, ResultMismatch, machine
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.host.omni_packet import NONE
from p4gen.host.omni_worker import OmniProtocolError, OmniWorker
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

PATTERNS = ("random", "zero_workers", "dense", "disjoint", "all_zero")


@functools.lru_cache(maxsize=None)
def omni_plan(elements: int = 4, slots: int = 4, max_workers: int = 4):
    return make_plan(make_spec(protocol="omnireduce", slots=slots, elements_per_packet=elements,
                               max_workers=max_workers), load_target("bmv2"))


def sparsity(pattern: str, n: int, blocks: int, rng: np.random.Generator) -> np.ndarray:
    """(n, blocks) bool: which blocks are non-zero for which worker."""
    if pattern == "dense":
        return np.ones((n, blocks), dtype=bool)
    if pattern == "all_zero":
        return np.zeros((n, blocks), dtype=bool)
    if pattern == "disjoint":
        owner = rng.integers(-1, n, size=blocks)            # -1: nobody
        return np.arange(n)[:, None] == owner[None, :]
    nz = rng.random((n, blocks)) < rng.choice([0.2, 0.5, 0.8])
    if pattern == "zero_workers":
        zero = rng.random(n) < 0.5
        zero[rng.integers(n)] = True
        nz[zero] = False
    return nz


class OmniNet(Net):
    """``aggnet.Net`` with OmniReduce workers and OmniReduce checks (same network actions)."""

    def __init__(self, plan, n: int, blocks: int, window: int, seed: int, fifo: bool, pattern: str,
                 decision=None):
        self.plan = plan
        self.layout = L = W.FrameLayout(plan)
        self.fifo = fifo
        self.model = SwitchModel(plan, decision=decision)
        self.addrs = [WorkerAddr(10 + i, 0x020000000100 + i, 0x0A000001 + i, 40000 + i) for i in range(n)]
        self.model.load_config(job_config(plan, JOB, self.addrs, slot_count=window, mgid=7, rid_base=100))
        self.port_of = {a.port: i for i, a in enumerate(self.addrs)}
        k, width = L.elements, L.value_width
        rng = np.random.default_rng(seed)
        self.nz = sparsity(pattern, n, blocks, rng)
        self.inputs = []
        for i in range(n):
            x = rng.integers(1, 1 << (width - 2), size=(blocks, k), dtype=np.int64)
            x[rng.random((blocks, k)) < 0.3] = 0              # zeros inside non-zero blocks too
            x[:, 0] = np.where(x[:, 0] == 0, 1, x[:, 0])
            x[~self.nz[i]] = 0
            self.inputs.append(x.reshape(-1))
        total = np.zeros(blocks * k, dtype=np.int64)
        for x in self.inputs:
            total = (total + x) & ((1 << width) - 1)
        self.expected = total.reshape(blocks, k).astype(np.uint64)
        self.any_nz = self.nz.any(axis=0)
        self.S, self.window = min(window, blocks), window
        self.workers = [OmniWorker(L, x, job=JOB, window=window, n_workers=n,
                                   src=P.Endpoint(a.mac, a.ip, a.udp_port), dst=SWITCH, mode="int",
                                   timeout=0.01, backoff=2.0, max_timeout=0.08)
                        for x, a in zip(self.inputs, self.addrs)]
        self.up = [list(w.start(0.0)) for w in self.workers]
        self.down = [[] for _ in self.workers]
        self.now = 0.0
        self.results_seen = 0
        self.rounds_seen: set[int] = set()

    # -- oracle ---------------------------------------------------------------
    def next_nz(self, rows, block: int, stream: int) -> int:
        """First block after ``block`` of ``stream`` non-zero in ``rows`` (any of them), or NONE."""
        start = stream if block < 0 else block + self.S
        for b in range(start, len(self.any_nz), self.S):
            if rows[b]:
                return b
        return NONE

    def _block_of(self, tsi: int, j: int) -> int:
        """The block of slot j's round whose tsi is ``tsi`` (tsi_base 0: tsi = 1 + j + window * round; round 0
        is the discovery round, -1; round r >= 1 is the stream's r-th block some worker holds); -2 if none."""
        rho, off = divmod(tsi - 1 - j, self.window)
        blocks = [b for b in range(j, len(self.any_nz), self.S) if self.any_nz[b]] if j < self.S else []
        if off or rho < 0 or rho > len(blocks):
            return -2
        return -1 if rho == 0 else blocks[rho - 1]

    # -- properties -------------------------------------------------------------
    def check_sent(self, w: int, frame: bytes) -> None:
        agg, payload = self.workers[w].frames.parse_contribution(frame)
        j = agg["pool_index"] & ((1 << int(self.layout.params.slot_bits)) - 1)
        b = self._block_of(agg["tsi"], j)
        if b == -2:
            raise ResultMismatch(f"worker {w} sent tsi {agg['tsi']} on slot {j}, no round of that slot")
        if b >= 0 and not self.any_nz[b]:
            raise ResultMismatch(f"worker {w} sent a round for block {b}, which is zero for every worker")
        if b >= 0 and b % self.S != j:
            raise ResultMismatch(f"worker {w} sent block {b} on slot {j}, not its stream")
        want_data = b >= 0 and bool(self.nz[w, b])
        if (payload is not None) != want_data:
            raise ResultMismatch(f"worker {w} block {b}: data={payload is not None}, expected {want_data}")
        if payload is not None:
            k = self.layout.elements
            mine = self.inputs[w][b * k:(b + 1) * k].astype(self.layout.value_dtype).tobytes()
            if payload != mine:
                raise ResultMismatch(f"worker {w} block {b}: payload is not its block")
        if agg["next"] != self.next_nz(self.nz[w], b, j):
            raise ResultMismatch(f"worker {w} block {b}: next={agg['next']}, "
                                 f"expected {self.next_nz(self.nz[w], b, j)}")

    def deliver_up(self, w: int, idx: int = 0) -> None:
        self.check_sent(w, self.up[w][0 if self.fifo else idx])
        super().deliver_up(w, idx)

    def deliver_up_fifo(self, w: int) -> None:
        self.check_sent(w, self.up[w][0])
        super().deliver_up_fifo(w)

    def check_switch_result(self, frame: bytes) -> None:
        r = self.workers[0].frames.parse_result(frame)
        self.results_seen += 1
        j = r.pool_index & ((1 << int(self.layout.params.slot_bits)) - 1)
        b = self._block_of(r.tsi, j)
        if not -1 <= b < len(self.expected):
            raise ResultMismatch(f"switch emitted a result for tsi {r.tsi}, which no worker sent")
        values = r.values(self.layout).astype(np.uint64)
        want = self.expected[b] if b >= 0 else np.zeros_like(values)
        if not np.array_equal(values, want):
            raise ResultMismatch(f"switch result for block {b} is {values.tolist()}, expected {want.tolist()}")
        if r.next != self.next_nz(self.any_nz, b, j):
            raise ResultMismatch(f"switch result for block {b} (slot {j}) says next={r.next}, "
                                 f"expected the minimum {self.next_nz(self.any_nz, b, j)}")

    def drain(self, max_rounds: int = 2000) -> None:
        super().drain(max_rounds)
        for i, wk in enumerate(self.workers):
            if not np.array_equal(wk.result(), self.expected.reshape(-1)):
                raise ResultMismatch(f"worker {i} assembled a tensor that is not the exact sum")
        rounds = [wk.stats.extra["rounds"] for wk in self.workers]
        want = int(self.any_nz.sum()) + self.S                # one discovery round per stream
        if any(r != want for r in rounds):
            raise ResultMismatch(f"workers ran {rounds} rounds; {want} expected "
                                 f"({int(self.any_nz.sum())} non-zero blocks + {self.S} discoveries)")


def omni_machine(fifo: bool = False, decision=None, n_workers=(2, 4), max_blocks: int = 8):
    base = machine("hardened", fifo=fifo, n_workers=n_workers)
    plan = omni_plan()

    class OmniAggregationNetwork(base):
        @initialize(n=st.integers(*n_workers), blocks=st.integers(1, max_blocks), window=st.integers(1, 3),
                    seed=st.integers(0, 2 ** 16), pattern=st.sampled_from(PATTERNS))
        def setup(self, n, blocks, window, seed, pattern):
            self.net = OmniNet(plan, n, blocks, window, seed, fifo, pattern, decision=decision)

    OmniAggregationNetwork.__name__ = f"OmniAggregationNetwork_{'fifo' if fifo else 'any_order'}"
    return OmniAggregationNetwork


CI = settings(settings.default, stateful_step_count=40,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

TestOmniAnyOrder = omni_machine(fifo=False).TestCase
TestOmniAnyOrder = pytest.mark.slow(TestOmniAnyOrder)
TestOmniAnyOrder.settings = CI


def _search(machine_cls, examples: int = 600):
    run_state_machine_as_test(machine_cls, settings=settings(
        max_examples=examples, stateful_step_count=40, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck), database=None, derandomize=True))


def _mutant(step_role: str, match: dict, op: str):
    table = omni_plan().decision.to_dict()
    step = next(s for s in table["steps"] if s["role"] == step_role)
    step["rules"].insert(0, {"match": match, "op": op})
    return table


MUTANTS = {
    # the last packet's offset overwrites the minimum: a worker's earlier block can be skipped
    "minnext_last_writer": _mutant("minnext", {"cmp": "eq", "seen": "0"}, "write"),
    # a round opened by a header-only packet keeps the slot's old sum instead of clearing it
    "header_only_first_keeps_old_sum": _mutant("values", {"cmp": "gt", "count": "first", "data": "0"}, "nop"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_decision_table_is_caught(name):
    with pytest.raises((ResultMismatch, AssertionError, OmniProtocolError, Flaky)):
        _search(omni_machine(fifo=False, decision=MUTANTS[name], n_workers=(2, 3)))


def test_all_zero_tensor_runs_discovery_only():
    net = OmniNet(omni_plan(), n=3, blocks=6, window=3, seed=1, fifo=True, pattern="all_zero")
    net.drain()
    assert all(w.stats.extra == {"data_frames": 0, "header_frames": 3, "rounds": 3} for w in net.workers)
    assert net.model.stats["multicast"] == 3


def test_disjoint_supports_send_each_block_once():
    net = OmniNet(omni_plan(), n=3, blocks=8, window=2, seed=4, fifo=False, pattern="disjoint")
    net.duplicate("up", 0, 0, 1)
    net.drain()
    assert sum(w.stats.extra["data_frames"] for w in net.workers) == int(net.nz.sum())
