"""What ``p4gen verify`` reads from a plan, checked before anything runs.

Every failure is one :class:`~p4gen.errors.PlanError` line that names the
field, the value and what it must be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from p4gen import decision
from p4gen.errors import PlanError
from p4gen.spec import MAX_SLOTS, MAX_WORKERS, PROTOCOLS, VALUE_WIDTHS

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
    table: dict[str, Any]


def _int(source: str, name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{source}: {name}={value!r} must be an integer in {lo}..{hi}")
    if not lo <= value <= hi:
        raise PlanError(f"{source}: {name}={value} must be an integer in {lo}..{hi}")
    return value


def check(plan, source: str = "plan.json") -> Checked:
    """The plan's protocol, variant, worker range, slots, value width, bitmap words and decision table."""
    data = plan.data
    protocol = data.get("protocol")
    if protocol not in PROTOCOLS:
        raise PlanError(f"{source}: protocol={protocol!r} must be one of {', '.join(PROTOCOLS)}")
    variant = data.get("variant")
    allowed = ("hardened",) if protocol == "omnireduce" else ("reference", "hardened")
    if variant not in allowed:
        raise PlanError(f"{source}: variant={variant!r} must be one of {', '.join(allowed)} for protocol {protocol}")
    params = data.get("params")
    if not isinstance(params, dict):
        raise PlanError(f"{source}: params must be an object, not {type(params).__name__}")
    mw = params.get("max_workers")
    if isinstance(mw, int) and not isinstance(mw, bool) and mw < 2:
        raise PlanError(f"{source}: max_workers={mw} leaves no worker count to prove (it must be an integer in "
                        f"2..{MAX_WORKERS}): NOT COVERED")
    mw = _int(source, "max_workers", mw, 2, MAX_WORKERS)
    slots = _int(source, "slots", params.get("slots"), 1, MAX_SLOTS)
    width = params.get("value_width")
    if isinstance(width, bool) or not isinstance(width, int) or width not in VALUE_WIDTHS:
        raise PlanError(f"{source}: value_width={width!r} must be one of {', '.join(map(str, VALUE_WIDTHS))}")
    words = math.ceil(mw / WORD)
    if params.get("bitmap_words", words) != words or params.get("bitmap_word_bits", WORD) != WORD:
        raise PlanError(f"{source}: bitmap_words={params.get('bitmap_words')!r} x bitmap_word_bits="
                        f"{params.get('bitmap_word_bits')!r} must be {words} x {WORD} for max_workers={mw}")
    for key in ("registers", "headers"):
        val = data.get(key)
        if not isinstance(val, list) or not val:
            raise PlanError(f"{source}: {key} must be a non-empty list (got {val!r:.40})")
    table = data.get("decision")
    if not isinstance(table, dict):
        raise PlanError(f"{source}: decision must be an object, not {type(table).__name__}")
    try:
        decision.validate(table)
    except LookupError as exc:
        raise PlanError(f"{source}: the decision table is not total: {_text(exc)}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"{source}: the decision table is malformed: {_text(exc)}") from None
    if table.get("protocol", protocol) != protocol:
        raise PlanError(f"{source}: the decision table is for protocol {table.get('protocol')!r}, the plan for {protocol!r}")
    if (protocol == "omnireduce") != (decision.step(table, "minnext") is not None):
        raise PlanError(f"{source}: a {protocol} plan needs a decision table "
                        f"{'with' if protocol == 'omnireduce' else 'without'} a minnext step")
    model = "omnireduce" if protocol == "omnireduce" else variant
    if model != "omnireduce" and (decision.step(table, "chunk") is not None) != (variant == "hardened"):
        raise PlanError(f"{source}: a {variant} plan needs a decision table "
                        f"{'with' if variant == 'hardened' else 'without'} a chunk step")
    return Checked(protocol, model, mw, slots, width, words, table)


def _text(exc: BaseException) -> str:
    return (str(exc.args[0]) if exc.args else "").strip() or exc.__class__.__name__
