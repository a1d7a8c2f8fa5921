"""What ``p4gen verify`` needs of a plan beyond what :class:`p4gen.plan.Plan` checks when it reads one.

The plan has already been checked as a plan (types, ranges, the decision table, the codes); here only
what the proofs themselves need: a protocol model for the plan's table.  Every failure is one
:class:`~p4gen.errors.PlanError` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4gen.decision import Codes, DecisionTable
from p4gen.errors import PlanError

from .cardinality import WORD


@dataclass(frozen=True)
class Checked:
    """The fields of a plan the proofs use."""
    protocol: str
    variant: str         # reference | hardened | omnireduce (the model the table runs in)
    max_workers: int
    slots: int
    value_width: int
    words: int
    table: DecisionTable
    codes: Codes
    stats: tuple[str, ...]


def check(plan) -> Checked:
    """The plan's protocol, variant, worker range, slots, value width, bitmap words, decision table and codes;
    PlanError when its table fits none of the verifier's protocol models."""
    source = plan.source
    table = plan.decision
    protocol, variant = plan.protocol, plan.variant
    if (protocol == "omnireduce") != (table.step("minnext") is not None):
        raise PlanError(f"{source}: a {protocol} plan needs a decision table "
                        f"{'with' if protocol == 'omnireduce' else 'without'} a minnext step")
    model = "omnireduce" if protocol == "omnireduce" else variant
    if model != "omnireduce" and (table.step("chunk") is not None) != (variant == "hardened"):
        raise PlanError(f"{source}: a {variant} plan needs a decision table "
                        f"{'with' if variant == 'hardened' else 'without'} a chunk step")
    p = plan.params
    if p.bitmap_word_bits != WORD:
        raise PlanError(f"{source}: bitmap_word_bits={p.bitmap_word_bits} must be {WORD} for the word split lemma")
    return Checked(protocol, model, p.max_workers, p.slots, p.value_width, p.bitmap_words, table, plan.codes,
                   plan.stats)
