"""Stateful properties of the switch model with 2..4 workers over an adversarial network.

Properties (checked by ``aggnet.Net``): every result the switch emits and
every result a worker accepts equals the exact wrap-around sum of the
workers' inputs for that chunk (so no contribution counts twice and no chunk
mixes with another); with eventual reliable delivery every chunk completes.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from aggnet import Net, ResultMismatch, machine, small_plan

CI = settings(settings.default, stateful_step_count=40,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# The suites that must hold.
TestReferenceFifo = machine("reference", fifo=True).TestCase
TestReferenceFifo = pytest.mark.slow(TestReferenceFifo)
TestReferenceFifo.settings = CI
TestHardenedAnyOrder = machine("hardened", fifo=False).TestCase
TestHardenedAnyOrder = pytest.mark.slow(TestHardenedAnyOrder)
TestHardenedAnyOrder.settings = CI


def _search(machine_cls, examples: int = 1500):
    """Run a state machine until Hypothesis reports a failure (no shrinking)."""
    run_state_machine_as_test(machine_cls, settings=settings(
        max_examples=examples, stateful_step_count=50, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck), database=None, derandomize=True))


def test_reference_late_duplicate_counterexample():
    """Reference variant, non-FIFO link: a late duplicate of chunk 0 is added again.

    Worker A's chunk-0 packet is duplicated in the network.  Chunk 0 completes,
    A moves on to chunk 1 (copy 1), which clears A's bit in copy 0.  The late
    duplicate then looks new on copy 0 and restarts it; B's chunk 2 later
    completes copy 0 with A's chunk-0 values inside.
    """
    net = Net(small_plan("reference"), n=2, chunks=3, window=1, seed=5, fifo=False)
    a, b = 0, 1
    net.duplicate("up", a, 0, 1)           # A: [c0, c0']
    net.deliver_up(a, 0)                   # c0 absorbed
    net.deliver_up(b, 0)                   # B c0: last -> multicast
    net.deliver_down(a, 0)                 # A gets result 0, sends c1
    net.deliver_down(b, 0)                 # B gets result 0, sends c1
    net.deliver_up(a, 1)                   # A c1 overtakes the duplicate
    net.deliver_up(a, 0)                   # late duplicate of A c0: looks new on copy 0
    net.deliver_up(b, 0)                   # B c1: chunk 1 completes
    net.deliver_down(a, 0)                 # A gets result 1, sends c2 (copy 0)
    net.deliver_up(a, 0)                   # A's bit in copy 0 is set (by the duplicate) -> dropped
    with pytest.raises(ResultMismatch, match="chunk 2"):
        net.deliver_down(b, 0)             # B sends c2 ...
        net.deliver_up(b, 0)               # ... which "completes" copy 0 with A's chunk 0 inside
    assert net.model.stats["drop_duplicate"] >= 1


def test_hardened_survives_the_late_duplicate():
    net = Net(small_plan("hardened"), n=2, chunks=3, window=1, seed=5, fifo=False)
    net.duplicate("up", 0, 0, 1)
    net.deliver_up(0, 0)
    net.deliver_up(1, 0)
    net.deliver_down(0, 0)
    net.deliver_down(1, 0)
    net.deliver_up(0, 1)
    net.deliver_up(0, 0)                   # late duplicate: same chunk, already seen -> not added
    net.drain()
    assert net.model.stats["drop_stale"] + net.model.stats["unicast"] + net.model.stats["drop_duplicate"] >= 1


@pytest.mark.slow
def test_hypothesis_finds_the_reference_reordering_failure():
    """Hypothesis itself finds a counterexample for the reference variant on a reordering network."""
    with pytest.raises((ResultMismatch, AssertionError, Flaky)):
        _search(machine("reference", fifo=False, n_workers=(2, 2), max_chunks=4))


def _mutant_without_bitmap_check():
    """Hardened table with the bitmap check removed for values: a seen worker's values are added again."""
    table = small_plan("hardened").decision.to_dict()
    values = next(s for s in table["steps"] if s["role"] == "values")
    values["rules"].insert(0, {"match": {"cmp": "eq", "seen": "1"}, "op": "add"})
    return table


def test_mutant_decision_table_is_caught():
    table = _mutant_without_bitmap_check()
    with pytest.raises((ResultMismatch, AssertionError, Flaky)):
        _search(machine("hardened", fifo=False, decision=table, n_workers=(2, 3)), examples=500)


def test_mutant_is_caught_on_a_plain_duplicate():
    net = Net(small_plan("hardened"), n=3, chunks=2, window=1, seed=1, fifo=True,
              decision=_mutant_without_bitmap_check())
    net.duplicate("up", 0, 0, 1)
    net.deliver_up(0)
    net.deliver_up(0)                      # duplicate: the mutant adds A's values twice
    net.deliver_up(1)
    with pytest.raises(ResultMismatch):
        net.deliver_up(2)
