"""Every seeded mutant is refuted by a concrete trace from the initial state, naming the property it breaks."""

from dataclasses import replace

import pytest

from p4gen import decision
from p4gen.verify.explore import bmc
from p4gen.verify.mutants import CATALOGUE, VARIANTS, mutant_model, of_variant

# what each mutant breaks, and the most events its shortest trace takes
EXPECTED = {
    "no_shadow_copy": ("exact_result", 4),
    "no_bitmap_check": ("exact_result", 2),
    "counter_off_by_one": ("exact_result", 2),
    "no_unicast_on_retransmission": ("retransmission_answered", 3),
    "other_bit_not_cleared": ("exact_result", 8),
    "wrong_copy_flip": ("exact_result", 3),
    "unlabelled_results": ("exact_accept", 4),
    "exponent_last_writer": ("exact_result", 2),
    "last_absorbed": ("completion_multicast", 2),
    "retransmission_multicast": ("retransmission_unicast", 3),
    "mid_write": ("contributions_kept", 2),              # the write takes the first contribution out
    "add_write_swapped": ("exact_result", 2),
    "hardened_no_bitmap_check": ("exact_result", 2),
    "hardened_no_stale_drop": ("far_tsi_ignored", 1),      # older and far-ahead frames both report lt
    "hardened_last_absorbed": ("completion_multicast", 2),
    "hardened_retransmission_multicast": ("retransmission_unicast", 3),
    "hardened_mid_write": ("contributions_kept", 2),
    "hardened_add_write_swapped": ("exact_result", 2),
    "hardened_unbounded_advance": ("far_tsi_ignored", 1),
    "omni_minnext_last_writer": ("min_next", 2),
    "omni_header_only_adds": ("exact_result", 2),
    "omni_no_shadow_copy": ("copy_reuse", 4),
    "omni_header_only_first_writes": ("exact_result", 2),
    "omni_no_bitmap_check": ("exact_result", 2),
    "omni_last_absorbed": ("completion_multicast", 2),
    "omni_retransmission_multicast": ("retransmission_unicast", 3),
    "omni_mid_write": ("exact_result", 3),
    "omni_unbounded_advance": ("far_tsi_ignored", 1),
    # deadlocks: the trace shows the packet the slot loses, and then that no retransmission is ever answered
    "counter_never_resets": ("retransmission_answered", 3),
    "hardened_equal_tsi_restarts": ("contributions_kept", 2),
    "hardened_bitmap_set_not_reset": ("progress", 10),
    "hardened_new_chunk_not_counted": ("progress", 1),
    "hardened_counter_never_counts": ("progress", 1),
    "omni_equal_tsi_restarts": ("contributions_kept", 2),
    "omni_bitmap_set_not_reset": ("progress", 10),
}
DEADLOCKS = {name for name, (prop, _) in EXPECTED.items()
             if name in {m.name for m in CATALOGUE if m.deadlock}}


def test_catalogue():
    assert {m.name for m in CATALOGUE} == set(EXPECTED)
    assert len(DEADLOCKS) == 7 and {m.variant for m in CATALOGUE if m.deadlock} == set(VARIANTS)
    for v in VARIANTS:
        names = {m.name for m in of_variant(v)}
        # the two normal-path mutants exist for every protocol and variant
        assert any("last_absorbed" in n for n in names) and any("retransmission_multicast" in n for n in names), v
    for m in CATALOGUE:
        decision.validate(mutant_model(m).table)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_mutant_refuted(mutant):
    cex = bmc(mutant_model(mutant), mutant.n, 12)
    assert cex is not None, f"{mutant.name} not refuted"
    prop, steps = EXPECTED[mutant.name]
    text = "\n".join(cex.format())
    assert cex.prop == prop and 1 <= cex.steps <= steps, text
    if mutant.deadlock:
        # after the trace, every worker's retransmission is dropped: the slot never completes again
        assert cex.deadlock and "never completes again" in text, text
        assert len(cex.tail) >= mutant.n and all("drop" in r.action or "no packet out" in r.action
                                                  for r in cex.tail[-mutant.n:]), text
        assert {r.worker for r in cex.tail[-mutant.n:]} == set(range(mutant.n)), text
    assert "step  worker  slot  copy  chunk/tsi  event" in text and f"violates {prop}" in text
    last = cex.rows[-1]
    if prop == "completion_multicast":
        # the completing contribution is taken and nothing goes out
        assert "no packet out" in last.action or "absorb" in last.action
    if prop == "retransmission_unicast":
        assert "multicast" in last.action and ("again" in last.event or "retransmission" in last.event)
    if mutant.name == "omni_header_only_adds":
        assert any("header-only" in r.event for r in cex.rows)
    if mutant.name == "omni_minnext_last_writer":
        # the result's next is not the smaller of the two announced offsets
        announced = [r.event.split("next=")[1].split(")")[0] for r in cex.rows if "next=" in r.event]
        result = last.action.split("next=")[1].split()[0].rstrip(",")
        nums = [int(x) for x in announced if x != "none"]
        assert nums and result != str(min(nums))


@pytest.mark.slow
def test_a_deep_trace():
    # without the far-ahead frames the stale-drop mutant needs 9 events: an old packet taken as current
    m = next(x for x in CATALOGUE if x.name == "hardened_no_stale_drop")
    model = replace(mutant_model(m), far_frames=False)
    cex = bmc(model, 2, 12)
    assert cex is not None and cex.prop == "exact_result" and cex.steps <= 9, cex and "\n".join(cex.format())
    assert any("old packet" in r.event for r in cex.rows)


def test_far_ahead_frame_trace():
    m = next(x for x in CATALOGUE if x.name == "hardened_unbounded_advance")
    cex = bmc(mutant_model(m), 2, 4)
    assert cex.steps == 1 and "more than two windows ahead" in cex.rows[0].event
    assert "violates far_tsi_ignored" in "\n".join(cex.format())


@pytest.mark.slow
def test_a_mutant_is_not_proved():
    # the induction is not vacuous: a broken table breaks it
    from p4gen.verify.engine import Prover
    from p4gen.verify.workers import Workers

    m = next(x for x in CATALOGUE if x.name == "hardened_last_absorbed")
    p = Prover(mutant_model(m), Workers.between(2, 64))
    assert any(p.check(u).failed_props or p.check(u).failed_clauses for u in p.units())
