"""The registry of protocols and their variants: every protocol and variant p4gen builds is declared here, once.

A :class:`Protocol` says what its packets carry beyond SwitchML's header and whether it is sparse
(header-only packets, one pass per block).  A :class:`Variant` of a protocol is its decision table
(the steps, the register operations of ``p4gen.ops`` they run, the outcome), the network assumption its
proofs make (``fifo``: each worker's link to the switch delivers in order) and the verifier's model whose
invariant covers it (``model``, named as ``module:Class``, imported only by ``p4gen verify``).

Everything else is derived from these declarations: the register arrays of a build come from its
table's steps (one role per step, shapes in :data:`ROLES`), their stages from the steps'
dependencies, the CLI's choices, the spec's checks, the layout search's variants, the verifier's models,
the torch session's and the testbed's protocol lists.  Adding a variant that uses existing operations is
one :func:`register` call here (its table) and, only when no model's invariant covers it, a model in
``p4gen.verify``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .decision import DecisionTable
from .errors import SpecError

# ---------------------------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Protocol:
    """A protocol: the fields its ``agg`` header carries beyond SwitchML's, and whether it is sparse.

    A sparse protocol's workers send header-only packets for the blocks they hold as zero (its parser
    observes ``data``, agg.flags bit 0, before the first step), so a result may answer a packet that
    carried no values and grow by the block, and a block must fit one pipeline pass."""
    name: str
    description: str
    agg_fields: tuple[tuple[str, int], ...] = ()
    sparse: bool = False
    # the protocol's own published layouts, the layout search's references on TNA targets:
    # (elements per packet, passes, pipes, label), with the slots they were published with
    published_layouts: tuple[tuple[int, int, int, str], ...] = ()
    published_slots: int = 0

    @property
    def parsed(self) -> tuple[str, ...]:
        """The observations its parser makes before the decision's first step."""
        return ("data",) if self.sparse else ()


@dataclass(frozen=True)
class Variant:
    """One variant of a protocol: its decision table, whether its proofs assume that each worker's link
    to the switch delivers in order (``fifo``), and the verifier's model whose invariant covers it
    (``module:Class``, imported by ``p4gen verify`` only).  ``variant=auto`` tries a protocol's variants
    in the order they are declared."""
    protocol: str
    name: str
    table: DecisionTable
    fifo: bool
    model: str

    @property
    def label(self) -> str:
        """How the verifier names the variant: the protocol's name when it is the protocol's only variant."""
        return self.protocol if len(variants(self.protocol)) == 1 else self.name


_PROTOCOLS: dict[str, Protocol] = {}
_VARIANTS: dict[tuple[str, str], Variant] = {}


def register_protocol(p: Protocol) -> Protocol:
    _PROTOCOLS[p.name] = p
    return p


def register_variant(protocol: Protocol, name: str, table: dict[str, Any], *, fifo: bool, model: str) -> Variant:
    """Declare variant ``name`` of ``protocol`` with the decision table ``table`` (its JSON form; checked)."""
    doc = {**table, "protocol": protocol.name, "variant": name, "parsed": list(protocol.parsed)}
    v = Variant(protocol.name, name, DecisionTable.from_dict(doc), fifo, model)
    _VARIANTS[(protocol.name, name)] = v
    return v


def unregister_variant(v: Variant) -> None:
    """Take a variant out of the registry again (a test's toy variant)."""
    _VARIANTS.pop((v.protocol, v.name), None)


# ---------------------------------------------------------------------------------------------- look-ups

def protocol_names() -> tuple[str, ...]:
    return tuple(_PROTOCOLS)


def protocol(name: str) -> Protocol:
    try:
        return _PROTOCOLS[name]
    except KeyError:
        raise SpecError(f"protocol={name!r} must be one of {', '.join(_PROTOCOLS)}") from None


def variants(protocol_name: str) -> list[Variant]:
    """The variants of a protocol, in the order they are declared (the preferred first)."""
    return [v for v in _VARIANTS.values() if v.protocol == protocol_name]


def variant_names() -> tuple[str, ...]:
    """Every variant name of every protocol, each once, in declaration order."""
    return tuple(dict.fromkeys(v.name for v in _VARIANTS.values()))


def variant(protocol_name: str, name: str) -> Variant:
    try:
        return _VARIANTS[(protocol_name, name)]
    except KeyError:
        have = [v.name for v in variants(protocol_name)]
        owners = [p for p, n in _VARIANTS if n == name]
        if owners:
            raise SpecError(f"variant={name!r} exists for protocol {', '.join(owners)} only; {protocol_name} is "
                            f"built {', '.join(have)}") from None
        raise SpecError(f"variant={name!r} must be one of {', '.join(variant_names())}") from None


def decision_table(variant_name: str, protocol_name: str | None = None) -> DecisionTable:
    """The decision table of a registered variant (of the default protocol unless ``protocol_name``)."""
    return variant(protocol_name or DEFAULT.name, variant_name).table


def search_variant_names(protocol_name: str) -> list[str]:
    """The variants a layout search can take for ``protocol_name``."""
    return [v.name for v in variants(protocol_name)]


def sparse_protocol() -> Protocol:
    """The protocol a workload with zero blocks runs (the first sparse one)."""
    return next(p for p in _PROTOCOLS.values() if p.sparse)


def without_fifo(protocol_name: str) -> Variant:
    """The protocol's preferred variant whose proofs assume nothing of the network."""
    protocol(protocol_name)
    return next(v for v in variants(protocol_name) if not v.fifo)


def other_variant(protocol_name: str, name: str) -> tuple[str, str | None]:
    """(the name of a variant of the same spec to compare with, why there is none or None)."""
    others = [v.name for v in variants(protocol_name) if v.name != name]
    if others:
        return others[0], None
    elsewhere = [n for n in variant_names() if n != name]
    return (elsewhere[0] if elsewhere else name), f"{protocol_name} is built {name} only"


# ---------------------------------------------------------------------------------------------- the declarations

# p4lang/p4app-switchML: 64 values a pass, or 256 in 4 streamed passes folded over 4 pipes;
# configuration.p4: num_slots = register_size / 2 = 16384 / 2
SWITCHML = register_protocol(Protocol("switchml", "dense all-reduce (SwitchML, NSDI'21)",
                                      published_layouts=((64, 1, 1, "SwitchML 64/pass"),
                                                         (256, 4, 4, "SwitchML 256 in 4 passes")),
                                      published_slots=8192))
OMNIREDUCE = register_protocol(Protocol("omnireduce", "block-sparse all-reduce (OmniReduce, SIGCOMM'21): workers "
                                                      "send only their non-zero blocks, each with its next one's "
                                                      "offset", agg_fields=(("next", 32),), sparse=True))
DEFAULT = SWITCHML

_SWITCHML_MODEL = "p4gen.verify.protocol:SwitchML"
_OMNIREDUCE_MODEL = "p4gen.verify.omni:OmniReduce"

_REFERENCE: dict[str, Any] = {
    "assumption": "per-worker-link FIFO delivery; results labelled with the chunk offset and checked by workers",
    "steps": [
        {"name": "bitmap", "role": "bitmap", "keys": [], "yields": "seen",
         "rules": [{"match": {}, "op": "set_clear"}]},
        {"name": "counter", "role": "counter", "keys": ["seen"], "yields": "count",
         "rules": [{"match": {"seen": "0"}, "op": "inc_mod"},
                   {"match": {"seen": "1"}, "op": "probe_zero"}]},
        {"name": "exponent", "role": "exponent", "keys": ["seen", "count"], "yields": None,
         "rules": [{"match": {"seen": "0", "count": "first"}, "op": "write"},
                   {"match": {"seen": "0", "count": "mid"}, "op": "max"},
                   {"match": {"seen": "0", "count": "last"}, "op": "max"},
                   {"match": {"seen": "1", "count": "complete"}, "op": "read"},
                   {"match": {}, "op": "nop"}]},
        {"name": "values", "role": "values", "keys": ["seen", "count"], "yields": None,
         "rules": [{"match": {"seen": "0", "count": "first"}, "op": "write"},
                   {"match": {"seen": "0", "count": "mid"}, "op": "add"},
                   {"match": {"seen": "0", "count": "last"}, "op": "add"},
                   {"match": {"seen": "1", "count": "complete"}, "op": "read"},
                   {"match": {}, "op": "nop"}]},
    ],
    "outcome": {"keys": ["seen", "count"],
                "rules": [{"match": {"seen": "0", "count": "first"}, "action": "drop", "stat": "absorbed"},
                          {"match": {"seen": "0", "count": "mid"}, "action": "drop", "stat": "absorbed"},
                          {"match": {"seen": "0", "count": "last"}, "action": "multicast", "stat": "multicast"},
                          {"match": {"seen": "1", "count": "complete"}, "action": "unicast", "stat": "unicast"},
                          {"match": {}, "action": "drop", "stat": "drop_duplicate"}]},
}

_HARDENED: dict[str, Any] = {
    "assumption": "none on the network (loss, duplication and reordering allowed); results labelled with the chunk offset and checked by workers",
    "steps": [
        # a copy moves on to a newer chunk only within two of the job's windows (the protocol never moves a
        # copy further), so one corrupted frame with a huge tsi is dropped as stale instead of stranding the copy
        {"name": "chunk", "role": "chunk", "keys": [], "yields": "cmp",
         "rules": [{"match": {}, "op": "advance_window"}]},
        {"name": "bitmap", "role": "bitmap", "keys": ["cmp"], "yields": "seen",
         "rules": [{"match": {"cmp": "gt"}, "op": "reset_set"},
                   {"match": {"cmp": "eq"}, "op": "set"},
                   {"match": {"cmp": "lt"}, "op": "nop"}]},
        {"name": "counter", "role": "counter", "keys": ["cmp", "seen"], "yields": "count",
         "rules": [{"match": {"cmp": "gt"}, "op": "reset_one"},
                   {"match": {"cmp": "eq", "seen": "0"}, "op": "inc_sat"},
                   {"match": {"cmp": "eq", "seen": "1"}, "op": "probe_full"},
                   {"match": {"cmp": "lt"}, "op": "nop"}]},
        {"name": "exponent", "role": "exponent", "keys": ["cmp", "seen"], "yields": None,
         "rules": [{"match": {"cmp": "gt"}, "op": "write"},
                   {"match": {"cmp": "eq", "seen": "0"}, "op": "max"},
                   {"match": {"cmp": "eq", "seen": "1"}, "op": "read"},
                   {"match": {"cmp": "lt"}, "op": "nop"}]},
        {"name": "values", "role": "values", "keys": ["cmp", "seen", "count"], "yields": None,
         "rules": [{"match": {"cmp": "gt", "count": "first"}, "op": "write"},
                   {"match": {"cmp": "eq", "seen": "0", "count": "mid"}, "op": "add"},
                   {"match": {"cmp": "eq", "seen": "0", "count": "last"}, "op": "add"},
                   {"match": {"cmp": "eq", "count": "complete"}, "op": "read"},
                   {"match": {}, "op": "nop"}]},
    ],
    "outcome": {"keys": ["cmp", "seen", "count"],
                "rules": [{"match": {"cmp": "gt", "count": "first"}, "action": "drop", "stat": "absorbed"},
                          {"match": {"cmp": "eq", "seen": "0", "count": "mid"}, "action": "drop", "stat": "absorbed"},
                          {"match": {"cmp": "eq", "seen": "0", "count": "last"}, "action": "multicast", "stat": "multicast"},
                          {"match": {"cmp": "eq", "count": "complete"}, "action": "unicast", "stat": "unicast"},
                          {"match": {"cmp": "lt"}, "action": "drop", "stat": "drop_stale"},
                          {"match": {}, "action": "drop", "stat": "drop_duplicate"}]},
}

# OmniReduce in the switch (block-sparse).  Every worker sends one packet per
# round of a slot: the block the previous result asked for, if it is non-zero
# for that worker (data=1), else a header-only packet (data=0); both carry the
# worker's next non-zero block offset.  The switch sums the blocks, keeps the
# smallest next offset, and the last packet of the round returns both.  Built
# on the hardened SwitchML rules (per-copy round index in the chunk register).
_OMNIREDUCE: dict[str, Any] = {
    "assumption": _HARDENED["assumption"],
    "steps": [
        # a slot's rounds are numbered like SwitchML's chunks (p4gen.host.omni_worker: tsi moves on by two of
        # the job's windows from one use of a copy to the next, however many zero blocks a stream skips), so the
        # advance is bounded as in the hardened table and one far-ahead frame is dropped as stale
        _HARDENED["steps"][0],
        _HARDENED["steps"][1],
        _HARDENED["steps"][2],
        _HARDENED["steps"][3],
        {"name": "minnext", "role": "minnext", "keys": ["cmp", "seen"], "yields": None,
         "rules": [{"match": {"cmp": "gt"}, "op": "write"},
                   {"match": {"cmp": "eq", "seen": "0"}, "op": "min"},
                   {"match": {"cmp": "eq", "seen": "1"}, "op": "read"},
                   {"match": {"cmp": "lt"}, "op": "nop"}]},
        {"name": "values", "role": "values", "keys": ["cmp", "seen", "count", "data"], "yields": None,
         "rules": [{"match": {"cmp": "gt", "count": "first", "data": "1"}, "op": "write"},
                   {"match": {"cmp": "gt", "count": "first", "data": "0"}, "op": "clear"},
                   {"match": {"cmp": "eq", "seen": "0", "count": "mid", "data": "1"}, "op": "add"},
                   {"match": {"cmp": "eq", "seen": "0", "count": "last", "data": "1"}, "op": "add"},
                   {"match": {"cmp": "eq", "seen": "0", "count": "last", "data": "0"}, "op": "read"},
                   {"match": {"cmp": "eq", "count": "complete"}, "op": "read"},
                   {"match": {}, "op": "nop"}]},
    ],
    "outcome": _HARDENED["outcome"],
}


# the hardened variant first: variant=auto takes it where it fits
SWITCHML_HARDENED = register_variant(SWITCHML, "hardened", _HARDENED, fifo=False, model=_SWITCHML_MODEL)
SWITCHML_REFERENCE = register_variant(SWITCHML, "reference", _REFERENCE, fifo=True, model=_SWITCHML_MODEL)
OMNIREDUCE_HARDENED = register_variant(OMNIREDUCE, "hardened", _OMNIREDUCE, fifo=False, model=_OMNIREDUCE_MODEL)
