"""Every reachable const entry of every dt_* table is driven by a generated sequence (on the model).

``pathgen.explore`` finds each reachable path through the dt_* tables of
the plan with a shortest packet sequence; this test replays every sequence
on fresh models (the reference execution, whose entry trace is the
measurement, and the fast one, which must emit the same frames), checks
that the sequences take 100% of the reachable entries, and that every
other entry has its reason: an op that never reports the observation, or
the argued invariant below, which the exploration checks in every state it
reaches.  tests/test_bmv2_paths.py runs the same sequences on BMv2.
"""

from __future__ import annotations

import pytest

import pathgen as G
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

PLANS = {
    "hardened": {"variant": "hardened"},
    "reference": {"variant": "reference"},
    "omnireduce": {"protocol": "omnireduce"},
}

# Entries an op can take from some register value, but not from a reachable state, and why.
ARGUED = {
    "hardened": {
        (("cmp", "eq"), ("seen", "0"), ("count", "complete")):
            "inc_sat reports complete only when the count is n; in every reachable state the count of a copy "
            "equals the number of bits set in that copy's bitmap (gt: reset_set and reset_one make both 1; eq, "
            "seen=0: set and inc_sat add one each; otherwise neither changes), so a count of n means every "
            "worker's bit is set, and an eq packet then has seen=1",
    },
}
ARGUED["omnireduce"] = ARGUED["hardened"]


def plan_of(name: str, slots: int = 64):
    return make_plan(make_spec(slots=slots, max_workers=4, elements_per_packet=8, **PLANS[name]), load_target("bmv2"))


def unreachable(plan, found: G.Exploration, name: str) -> dict[G.Entry, str]:
    """Every const entry no path takes, with its reason (op-level, else the argued invariant)."""
    out = {}
    for e in G.const_entries(plan):
        if e in found.entries:
            continue
        why = G.why_unreachable(plan, e)
        if why is None:
            why = next((txt for pat, txt in ARGUED.get(name, {}).items() if set(pat) <= set(e[1])), None)
        out[e] = why
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANS))
def test_sequences_drive_every_reachable_entry(name):
    plan = plan_of(name)
    found = G.explore(plan)
    entries = G.const_entries(plan)
    un = unreachable(plan, found, name)
    assert not [G.entry_text(e) for e, why in un.items() if why is None], "unreachable entries without an argument"
    if name in ARGUED:
        # the invariant the argument rests on holds in every state the search reached
        assert found.invariant_ok
        for pat in ARGUED[name]:
            assert any(set(pat) <= set(e[1]) and G.why_unreachable(plan, e) is None for e in un), pat
    # measured: replay every sequence on fresh models; the reference execution records the entries taken
    hit: set[G.Entry] = set()
    addrs = G.workers(3)
    for path, seq in found.paths.items():
        frames = G.Frames(plan, addrs)
        ref, fast = G.SwitchModel(plan, fast=False), G.SwitchModel(plan)
        ref.load_config(G.job(plan, 3))
        fast.load_config(G.job(plan, 3))
        for i, pkt in enumerate(seq):
            port, f = frames.frame(pkt, 5)
            ref.entry_trace = []
            assert ref.process(f, port) == fast.process(f, port)
            hit.update(ref.entry_trace)
        assert tuple(ref.entry_trace) == path, f"{[str(p) for p in seq]} ends on another path"
    reachable = [e for e in entries if e not in un]
    assert set(reachable) == hit
    print(G.coverage_line(f"{name} (model)", hit, entries, list(un)))


@pytest.mark.slow
def test_more_chunks_reach_no_other_entry():
    """The search's finite system is large enough: a fourth tsi value adds no entry (nor do 4 workers, 18 s)."""
    plan = plan_of("hardened")
    assert G.explore(plan, tsis=(0, 1, 2, 3)).entries == G.explore(plan).entries


@pytest.mark.parametrize("name", list(PLANS))
def test_adversarial_sequences_exercise_the_network_faults(name):
    plan = plan_of(name)
    frames, kinds = G.adversarial(plan, slots=[40, 41], steps=150, seed=3)
    for k in ("lost", "reordered", "duplicated", "replayed", "result lost"):
        assert kinds[k] > 0, (k, kinds)
    assert kinds["rounds completed"] >= 6, kinds
    assert len(frames) > 60
