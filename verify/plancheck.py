"""What ``p4gen verify`` needs of a plan beyond what :class:`p4gen.plan.Plan` checks when it reads one.

The plan has already been checked as a plan (types, ranges, the decision table, the codes); here only
what the proofs themselves need: a protocol model for the plan's table.  Every failure is one
:class:`~p4gen.errors.PlanError` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4gen import protocols
from p4gen.decision import Codes, DecisionTable
from p4gen.errors import PlanError

from .cardinality import WORD


@dataclass(frozen=True)
class Checked:
    """The fields of a plan the proofs use."""
    protocol: str
    variant: protocols.Variant       # the registry's: its model, its assumptions
    max_workers: int
    slots: int
    value_width: int
    words: int
    table: DecisionTable
    codes: Codes
    stats: tuple[str, ...]


def check(plan) -> Checked:
    """The plan's protocol, variant, worker range, slots, value width, bitmap words, decision table and codes;
    PlanError when its table has other register steps than its variant's (the model's invariant speaks of
    those registers)."""
    source = plan.source
    table = plan.decision
    variant = protocols.variant(plan.protocol, plan.variant)
    if table.roles != variant.table.roles:
        raise PlanError(f"{source}: a {variant.label} plan needs a decision table with the steps "
                        f"{', '.join(variant.table.roles)}; this one has {', '.join(table.roles)}")
    p = plan.params
    if p.bitmap_word_bits != WORD:
        raise PlanError(f"{source}: bitmap_word_bits={p.bitmap_word_bits} must be {WORD} for the word split lemma")
    return Checked(plan.protocol, variant, p.max_workers, p.slots, p.value_width, p.bitmap_words, table, plan.codes,
                   plan.stats)
