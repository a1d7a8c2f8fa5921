"""Pass 1, choose_variant: the variant resolved once; the only pass that reads the protocol registry."""

from __future__ import annotations

import dataclasses

from .. import protocols
from . import placement
from ..spec import Spec
from ..wire import wire_headers
from .fit import Fit


def variants_to_try(spec: Spec) -> list[str]:
    """The variants ``spec`` allows, in the order they are tried."""
    if spec.variant == "auto":
        return [v.name for v in protocols.variants(spec.protocol)]
    return [protocols.variant(spec.protocol, spec.variant).name]


def choose_variant(fit: Fit) -> Fit:
    """Resolve ``fit.variant`` once: its decision table, its step timing, the protocol's headers and
    sparseness, and the variant plan.json compares it with."""
    spec, profile = fit.spec, fit.profile
    proto = protocols.protocol(spec.protocol)
    table = protocols.variant(spec.protocol, fit.variant).table
    return dataclasses.replace(
        fit, table=table, timing=placement.timing(profile, table, spec.max_workers, spec.value_width),
        sparse=proto.sparse, headers=tuple((n, tuple(f)) for n, f in wire_headers(spec.protocol)),
        other=protocols.other_variant(spec.protocol, fit.variant))
