"""The user's request, validated at the boundary.

A :class:`Spec` is what a user asks for; the planner decides how (and
whether) it fits a target.  Every message names the field and its legal
range, e.g. ``slots=0 must be an integer in 1..32768``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .. import protocols
from ..errors import SpecError
from ..fileread import load_toml

AUTO = "auto"               # the variant choice that takes a protocol's preferred variant that fits
VALUE_WIDTHS = (16, 32)

# Header field widths bound some fields regardless of target.
MAX_SLOTS = 1 << 24        # sanity bound; the planner applies the header and target limits
MAX_JOBS = 255             # job: 8 bits, 0 reserved
MAX_WORKERS = 256          # worker ids are 8 bits
MAX_ELEMENTS = 4096


@dataclasses.dataclass(frozen=True)
class Spec:
    protocol: str = protocols.DEFAULT.name
    variant: str = AUTO
    max_workers: int = 32
    slots: int = 512
    elements_per_packet: int | None = None
    value_width: int = 32
    jobs: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _int_field(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{name}={value!r} must be an integer in {lo}..{hi}")
    if not lo <= value <= hi:
        raise SpecError(f"{name}={value} must be an integer in {lo}..{hi}")
    return value


def _choice(name: str, value: Any, choices: tuple) -> Any:
    same_type = all(type(value) is type(c) for c in choices)    # 32.0 == 32 and True == 1, but neither is valid
    if not same_type or value not in choices:
        raise SpecError(f"{name}={value!r} must be one of {', '.join(str(c) for c in choices)}")
    return value


def make_spec(**fields: Any) -> Spec:
    """Build a validated Spec; ``None`` values take the defaults."""
    known = {f.name for f in dataclasses.fields(Spec)}
    for key in fields:
        if key not in known:
            raise SpecError(f"unknown spec field {key!r}; known fields: {', '.join(sorted(known))}")
    given = {k: v for k, v in fields.items() if v is not None or k == "elements_per_packet"}
    spec = Spec(**given)
    _choice("protocol", spec.protocol, protocols.protocol_names())
    _choice("variant", spec.variant, (AUTO,) + protocols.variant_names())
    if spec.variant != AUTO:
        protocols.variant(spec.protocol, spec.variant)      # one line when the protocol has no such variant
    _int_field("max_workers", spec.max_workers, 2, MAX_WORKERS)
    _int_field("slots", spec.slots, 1, MAX_SLOTS)
    if spec.elements_per_packet is not None:
        _int_field("elements_per_packet", spec.elements_per_packet, 2, MAX_ELEMENTS)
        if spec.elements_per_packet % 2:
            raise SpecError(f"elements_per_packet={spec.elements_per_packet} must be even (values travel in register pairs)")
    _choice("value_width", spec.value_width, VALUE_WIDTHS)
    _int_field("jobs", spec.jobs, 1, MAX_JOBS)
    return spec


def load_spec_file(path: str | Path, **overrides: Any) -> Spec:
    """Read a TOML spec file; command-line values given in ``overrides`` win."""
    data = load_toml(path, "spec file", SpecError)
    data.update({k: v for k, v in overrides.items() if v is not None})
    return make_spec(**data)
