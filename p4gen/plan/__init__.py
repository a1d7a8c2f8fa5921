"""The Plan IR: everything downstream of the planner reads this, and only this.

A Plan is a JSON document (``plan.json``) with a versioned schema.  It holds
the normalised spec, the target profile, the header layout, the register
arrays and their stages, the P4 tables and their P4Runtime IDs, the decision
table, the observation/outcome/op codes, the packet counter's indices and the
resource table.  :meth:`Plan.from_json` parses it once into the frozen
dataclasses below and checks it once; every emitter, the software switch, the
verifier, the controller, the testbed and the host side then read attributes
(``plan.params.slots``, ``plan.codes.outcome("drop")``, ``plan.stats``), never
keys of the JSON document.

The decision logic is stored twice, for readers of plan.json: the rules
(``decision``) and their expansion into the ``dt_*`` const-entry tables
(``tables``).  A :class:`Plan` is only ever made of a plan whose ``tables``
are exactly the expansion of its ``decision`` (``p4gen.decision.p4_tables``),
so the P4 program, the P4Info, the model, the verifier and the controller
all read one decision; an edited table is refused with one line.  To change
the decision of a plan, use :meth:`Plan.with_decision`, which re-derives
the tables.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import decision as dmod
from .. import ops, protocols
from ..decision import Codes, DecisionTable, FrozenMap
from ..errors import P4genError, PlanError
from ..filecommit import interrupted
from ..fileread import parse_json, read_text
from .reader import FIELD_KINDS, Reader, names
from .structure import header_dict, plain, structure_problem
from ..spec import MAX_SLOTS, MAX_WORKERS, VALUE_WIDTHS, Spec, make_spec
from ..target import TargetProfile, profile_from_mapping

SCHEMA = "p4gen.plan/1"

# ---------------------------------------------------------------------------------------------- parts

@dataclass(frozen=True)
class Generator:
    name: str
    version: str


@dataclass(frozen=True)
class Params:
    """The numbers every consumer needs: sizes, the pass layout, widths, ports and message types."""
    max_workers: int
    jobs: int
    slots: int
    copies: int
    elements_per_packet: int
    elements_per_pass: int
    passes: int
    pass_bits: int
    pass_mode: str
    pass_pipes: int
    value_width: int
    lanes: int
    bitmap_words: int
    bitmap_word_bits: int
    slot_bits: int
    udp_port_min: int
    udp_port_max: int
    exponent_bias: int
    flood_group_base: int
    recirc_port: int
    msg_contribution: int
    msg_result: int


@dataclass(frozen=True)
class Field:
    name: str
    bits: int


@dataclass(frozen=True)
class Header:
    name: str
    fields: tuple[Field, ...]
    bytes: int
    repeat: int = 1
    internal: bool = False


@dataclass(frozen=True)
class Register:
    name: str
    role: str
    entries: int
    lane_bits: int
    lanes: int
    entry_bits: int
    index: str
    stage: int
    sram_blocks: int
    id: int
    word: int | None = None
    elements: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Stage:
    index: int
    registers: tuple[str, ...]
    alus_used: int
    sram_blocks_used: int
    tables: tuple[str, ...] = ()
    alus_limit: int | None = None
    sram_blocks_limit: int | None = None


@dataclass(frozen=True)
class Key:
    name: str
    field: str
    bits: int
    match: str


@dataclass(frozen=True)
class Entry:
    match: Mapping[str, int]
    action: str
    args: Mapping[str, int]
    comment: str


@dataclass(frozen=True)
class Table:
    name: str
    scope: str
    size: int
    keys: tuple[Key, ...]
    actions: tuple[str, ...]
    default_action: str
    const: bool
    id: int
    default_args: Mapping[str, int] | None = None
    entries: tuple[Entry, ...] = ()


@dataclass(frozen=True)
class Action:
    name: str
    scope: str
    params: tuple[Field, ...]
    id: int


@dataclass(frozen=True)
class Counter:
    name: str
    scope: str
    size: int
    unit: str
    indices: tuple[str, ...]
    id: int


@dataclass(frozen=True)
class Resources:
    stages_used: int
    stages_limit: int | None
    alus_used: int
    alus_limit: int | None
    sram_blocks_used: int
    sram_blocks_limit: int | None
    phv_bits_used: int
    phv_bits_limit: int | None
    passes: int
    passes_limit: int
    register_bits: int


@dataclass(frozen=True)
class Alternative:
    """The other variant of the same spec: whether it fits, and what it would cost."""
    variant: str
    fits: bool
    why: str | None = None
    register_arrays: int | None = None
    register_arrays_delta: int | None = None
    stages: int | None = None
    stages_delta: int | None = None
    sram_blocks: int | None = None
    sram_blocks_delta: int | None = None
    register_bits_delta: int | None = None


@dataclass(frozen=True)
class Limits:
    largest_slots: int


@dataclass(frozen=True)
class P4Names:
    ingress: str
    egress: str
    prefix: str

    def qualified(self, scope: str, name: str) -> str:
        """The fully qualified P4 name of an object of control ``scope`` (as P4Info and BMv2 spell it)."""
        return f"{self.prefix}{self.ingress if scope == 'ingress' else self.egress}.{name}"


FIELD_KINDS.update({
    "Mapping[str, int] | None": lambda r, v, w: None if v is None else r.int_map(v, w),
})

# the top-level keys of plan.json and their JSON types; every list holds objects
_REQUIRED: dict[str, type] = {
    "schema": str, "generator": dict, "spec": dict, "target": dict, "protocol": str, "variant": str,
    "requested_variant": str, "params": dict, "headers": list, "metadata": list, "registers": list,
    "stages": list, "tables": list, "actions": list, "counters": list, "decision": dict, "resources": dict,
    "alternative": dict, "limits": dict, "p4names": dict,
}
_PARAM_CODES = ("op_codes", "codes", "outcome_codes", "stats")


# ---------------------------------------------------------------------------------------------- the plan

@dataclass(frozen=True)
class Plan:
    """One build's plan.  Construct it with :meth:`from_json`, :meth:`from_dict` or :meth:`load`."""
    generator: Generator
    spec: Spec
    requested_variant: str
    target: TargetProfile
    protocol: str
    variant: str
    params: Params
    codes: Codes
    stats: tuple[str, ...]
    headers: tuple[Header, ...]
    metadata: tuple[Field, ...]
    registers: tuple[Register, ...]
    stages: tuple[Stage, ...]
    tables: tuple[Table, ...]
    actions: tuple[Action, ...]
    counters: tuple[Counter, ...]
    decision: DecisionTable
    resources: Resources
    alternative: Alternative
    limits: Limits
    p4names: P4Names
    source: str = dataclasses.field(default="plan", compare=False)     # where it was read from, for messages

    # -- views --------------------------------------------------------------------------------
    @property
    def arch(self) -> str:
        return self.target.arch

    @property
    def schema(self) -> str:
        return SCHEMA

    def header(self, name: str) -> Header:
        for h in self.headers:
            if h.name == name:
                return h
        raise KeyError(name)

    def registers_of(self, role: str) -> list[Register]:
        return [r for r in self.registers if r.role == role]

    def register(self, name: str) -> Register:
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(name)

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    def action(self, name: str) -> Action:
        for a in self.actions:
            if a.name == name:
                return a
        raise KeyError(name)

    def counter(self, name: str) -> Counter:
        for c in self.counters:
            if c.name == name:
                return c
        raise KeyError(name)

    def stat(self, name: str) -> int:
        """The index of stat ``name`` in the packet counter."""
        return self.stats.index(name)

    # -- changes ------------------------------------------------------------------------------
    def with_decision(self, table: DecisionTable | Mapping[str, Any]) -> "Plan":
        """This plan with ``table`` as its decision and the ``dt_*`` tables re-derived from it.

        The table's steps must be those of this plan (the same step names:
        other steps need other registers, i.e. a new ``p4gen build``).  The
        P4Runtime IDs of the tables and actions are kept.
        """
        data = self.to_dict()
        try:
            if not isinstance(table, DecisionTable):
                table = DecisionTable.from_dict(table, self.protocol)
            new_tables, new_actions = dmod.p4_tables(table, data["params"]["op_codes"], dmod.arrays_per_table(data))
        except (KeyError, LookupError, TypeError, ValueError) as exc:
            raise PlanError(f"the decision table is not valid: {exc}") from None
        old_t = {t["name"]: t for t in data["tables"]}
        if {t["name"] for t in new_tables} != {n for n in old_t if n.startswith(dmod.DERIVED)}:
            raise PlanError(f"the decision table's steps ({', '.join(s.name for s in table.steps)}) are not "
                            f"those of this plan ({', '.join(s.name for s in self.decision.steps)}); "
                            f"other steps need a new layout: run p4gen build")
        for new in new_tables:
            old = old_t[new["name"]]
            pid = old.get("id")
            old.clear()
            old.update(new, id=pid)
        # the decision's actions: kept IDs for the names it still uses, new IDs after the highest for the others;
        # the old decision's actions no table names any more are dropped
        old_dt = {a for t in self.tables if t.name.startswith(dmod.DERIVED) for a in t.actions}
        old_a = {a["name"]: a for a in data["actions"]}
        next_id = max((a.get("id", 0) for a in data["actions"]), default=0x01000000) + 1
        kept = [a for a in data["actions"] if a["name"] not in old_dt]
        for new in new_actions:
            pid = old_a[new["name"]].get("id") if new["name"] in old_a else None
            if pid is None:
                pid, next_id = next_id, next_id + 1
            kept.append({**new, "id": pid})
        data["actions"] = kept
        data["decision"] = table.to_dict()
        return Plan.from_dict(data, self.source)

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """plan.json as a JSON-able document."""
        params = plain(self.params)
        params.update(op_codes=plain(self.codes.ops), codes=plain(self.codes.observations),
                      outcome_codes=plain(self.codes.outcomes), stats=list(self.stats))
        stages = [{k: v for k, v in plain(s).items() if not (k == "tables" and not v)} for s in self.stages]
        headers = [header_dict(h) for h in self.headers]
        tables = []
        for t in self.tables:
            d = plain(t)
            if not t.const:
                d.pop("entries")
            tables.append(d)
        return {
            "schema": SCHEMA, "generator": plain(self.generator), "spec": self.spec.to_dict(),
            "requested_variant": self.requested_variant, "target": self.target.to_dict(),
            "protocol": self.protocol, "variant": self.variant, "params": params, "headers": headers,
            "metadata": plain(self.metadata), "registers": plain(self.registers), "stages": stages,
            "tables": tables, "actions": plain(self.actions), "counters": plain(self.counters),
            "decision": self.decision.to_dict(), "resources": plain(self.resources),
            "alternative": plain(self.alternative), "limits": plain(self.limits), "p4names": plain(self.p4names),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "plan.json") -> "Plan":
        return cls.from_dict(parse_json(text, source, PlanError), source)

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        p = Path(path)
        if p.is_dir():
            p = p / "plan.json"
        why = interrupted(p.parent)
        if why:
            raise PlanError(why)
        if not p.exists():
            raise PlanError(f"{str(p)!r} does not exist (run p4gen build first)")
        return cls.from_json(read_text(p, "plan", PlanError), str(p))

    @classmethod
    def from_dict(cls, data: Any, source: str = "plan") -> "Plan":
        """Check the plan.json document ``data`` and parse it (one PlanError line on the first problem)."""
        return _parse(data, source)


# ---------------------------------------------------------------------------------------------- parsing

def _parse(data: Any, source: str) -> Plan:
    r = Reader(source)
    if not isinstance(data, dict):
        raise PlanError(f"{source} must hold a JSON object")
    if data.get("schema") != SCHEMA:
        raise PlanError(f"{source} has schema {data.get('schema')!r}; this p4gen reads {SCHEMA!r}")
    for key, kind in _REQUIRED.items():
        r.get(data, key, "")
        r.typed(data[key], kind, key)
        if kind is list:
            r.items(data[key], key)
    protocol, variant = data["protocol"], data["variant"]
    if protocol not in protocols.protocol_names():
        raise r.fail(f"protocol={protocol!r} must be one of {', '.join(protocols.protocol_names())}")
    allowed = [v.name for v in protocols.variants(protocol)]
    if variant not in allowed:
        raise r.fail(f"variant={variant!r} must be one of {', '.join(allowed)} for protocol {protocol}")
    raw = data["params"]
    for name, lo, hi in (("max_workers", 2, MAX_WORKERS), ("slots", 1, MAX_SLOTS)):
        v = raw.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise r.fail(f"{name}={v!r} must be an integer in {lo}..{hi}")
    width = raw.get("value_width")
    if isinstance(width, bool) or not isinstance(width, int) or width not in VALUE_WIDTHS:
        raise r.fail(f"value_width={width!r} must be one of {', '.join(map(str, VALUE_WIDTHS))}")
    params = r.record(Params, {k: v for k, v in raw.items() if k not in _PARAM_CODES}, "params")
    _check_params(r, params)
    for key in ("registers", "headers"):
        if not data[key]:
            raise r.fail(f"{key} must be a non-empty list (got [])")
    check_decision(data, source)
    table = DecisionTable.from_dict(data["decision"], protocol)
    check_op_codes(r.get(raw, "op_codes", "params"), source)
    codes = Codes(_code_maps(r, r.get(raw, "op_codes", "params"), "params.op_codes"),
                  _code_maps(r, r.get(raw, "codes", "params"), "params.codes"),
                  r.int_map(r.get(raw, "outcome_codes", "params"), "params.outcome_codes"))
    stats = names(r, r.get(raw, "stats", "params"), "params.stats")
    _check_codes(r, codes, stats)

    def records(cls, key: str, read=None) -> tuple:
        return tuple((read or (lambda v, w: r.record(cls, v, w)))(v, f"{key}[{i}]")
                     for i, v in enumerate(data[key]))

    def header(v, w):
        fields = tuple(r.record(Field, f, f"{w}.fields[{j}]") for j, f in enumerate(r.items(r.get(v, "fields", w),
                                                                                           f"{w}.fields")))
        return r.record(Header, v, w, fields=fields)

    def table_(v, w):
        keys = tuple(r.record(Key, k, f"{w}.keys[{j}]") for j, k in enumerate(r.items(r.get(v, "keys", w), f"{w}.keys")))
        entries = tuple(r.record(Entry, e, f"{w}.entries[{j}]", match=r.int_map(r.get(e, "match", w), f"{w}.entries[{j}].match"),
                                 args=r.int_map(r.get(e, "args", w), f"{w}.entries[{j}].args"))
                        for j, e in enumerate(r.items(v.get("entries", []), f"{w}.entries")))
        return r.record(Table, v, w, keys=keys, entries=entries)

    def action(v, w):
        prms = tuple(r.record(Field, p, f"{w}.params[{j}]") for j, p in enumerate(r.items(r.get(v, "params", w),
                                                                                          f"{w}.params")))
        return r.record(Action, v, w, params=prms)

    try:
        spec = make_spec(**r.obj(data["spec"], "spec"))
    except (P4genError, TypeError) as exc:
        raise r.fail(f"spec: {exc}") from None
    try:
        target = profile_from_mapping(dict(data["target"]), "in the plan")
    except P4genError as exc:
        raise r.fail(str(exc)) from None
    plan = Plan(
        generator=r.record(Generator, data["generator"], "generator"), spec=spec,
        requested_variant=data["requested_variant"], target=target, protocol=protocol, variant=variant,
        params=params, codes=codes, stats=stats, headers=records(Header, "headers", header),
        metadata=records(Field, "metadata"), registers=records(Register, "registers"),
        stages=records(Stage, "stages"), tables=records(Table, "tables", table_),
        actions=records(Action, "actions", action), counters=records(Counter, "counters"), decision=table,
        resources=r.record(Resources, data["resources"], "resources"),
        alternative=r.record(Alternative, data["alternative"], "alternative"),
        limits=r.record(Limits, data["limits"], "limits"), p4names=r.record(P4Names, data["p4names"], "p4names"),
        source=source)
    _check_program(r, plan)
    return plan


def _code_maps(r: Reader, value: Any, where: str) -> Mapping[str, Mapping[str, int]]:
    r.obj(value, where)
    return FrozenMap({k: r.int_map(v, f"{where}.{k}") for k, v in value.items()})


def _int_in(r: Reader, name: str, value: int, lo: int, hi: int) -> None:
    if not lo <= value <= hi:
        raise r.fail(f"{name}={value} must be an integer in {lo}..{hi}")


def _check_params(r: Reader, p: Params) -> None:
    _int_in(r, "max_workers", p.max_workers, 2, MAX_WORKERS)
    _int_in(r, "slots", p.slots, 1, MAX_SLOTS)
    if p.value_width not in VALUE_WIDTHS:
        raise r.fail(f"value_width={p.value_width!r} must be one of {', '.join(map(str, VALUE_WIDTHS))}")
    words = math.ceil(p.max_workers / p.bitmap_word_bits) if p.bitmap_word_bits > 0 else -1
    if p.bitmap_word_bits != 32 or p.bitmap_words != words:
        raise r.fail(f"bitmap_words={p.bitmap_words!r} x bitmap_word_bits={p.bitmap_word_bits!r} must be "
                     f"{math.ceil(p.max_workers / 32)} x 32 for max_workers={p.max_workers}")
    if (p.passes < 1 or p.lanes < 1 or p.elements_per_pass * p.passes != p.elements_per_packet
            or p.elements_per_pass % p.lanes):
        raise r.fail(f"elements_per_packet={p.elements_per_packet} is not passes={p.passes} x elements_per_pass="
                     f"{p.elements_per_pass} of whole {p.lanes}-lane register entries")


def _check_codes(r: Reader, codes: Codes, stats: tuple[str, ...]) -> None:
    """The codes must be this p4gen's: they are what its operations (``p4gen.ops``) report."""
    for name, have, want in (("op_codes", codes.ops, op_codes()), ("codes", codes.observations, dmod.CODES),
                             ("outcome_codes", codes.outcomes, dmod.OUTCOME_CODES)):
        if json.loads(json.dumps(have, default=dict)) != want:
            raise r.fail(f"params.{name} are not the codes this p4gen's operations report ({want})")
    missing = [s for s in dmod.STATS if s not in stats]
    if missing or len(set(stats)) != len(stats):
        raise r.fail(f"params.stats must name each of {', '.join(dmod.STATS)} once (it lacks {missing[0]!r})"
                     if missing else "params.stats names a stat twice")


def _check_program(r: Reader, plan: Plan) -> None:
    """What every reader relies on: the counter, the writable tables, value registers that cover a pass."""
    counter = next((c for c in plan.counters if c.name == "stats"), None)
    if counter is None or list(counter.indices) != list(plan.stats) or counter.size != len(plan.stats):
        raise r.fail("counters must hold 'stats', one index per stat of params.stats")
    names = {t.name for t in plan.tables}
    for need in ("workers", "l2_forward", "result_dst"):
        if need not in names:
            raise r.fail(f"tables lacks the table {need!r}")
    acts = {a.name for a in plan.actions}
    for t in plan.tables:
        bad = [a for a in t.actions + (t.default_action,) if a not in acts]
        if bad:
            raise r.fail(f"table {t.name} names the action {bad[0]!r}, which actions lacks")
    roles = set(plan.decision.roles)
    regs = {r_.role for r_ in plan.registers}
    if roles - regs:
        raise r.fail(f"the decision table has a {sorted(roles - regs)[0]} step but registers has no such array")
    values = plan.registers_of("values")
    if len({v.entries for v in values}) > 1:
        raise r.fail("the value registers differ in size")
    for v in values:
        if v.lane_bits != plan.params.value_width or not v.elements:
            raise r.fail(f"value register {v.name} must hold {plan.params.value_width}-bit lanes and name its elements")
    cols = sorted(c for v in values for c in v.elements)
    if values and cols != list(range(plan.params.elements_per_pass)):
        raise r.fail("the value registers do not cover each element of a pass exactly once")
    if tuple(plan.decision.parsed) != protocols.protocol(plan.protocol).parsed:
        raise r.fail(f"the decision table takes the observations {list(plan.decision.parsed)} from the parser; "
                     f"an {plan.protocol} plan's parser makes {list(protocols.protocol(plan.protocol).parsed)}")
    why = structure_problem(plan)
    if why:
        raise r.fail(f"{why}; rebuild it with p4gen build")


def op_codes() -> dict[str, dict[str, int]]:
    """The code of every register operation, as p4gen/ops/ defines them (its order in ``OPS``): the
    numbers the P4 program dispatches on, the model executes and the proofs read."""
    return {role: {op: i for i, op in enumerate(names)} for role, names in ops.OPS.items()}


def check_op_codes(codes: Any, source: str = "plan") -> None:
    """Refuse (PlanError, one line) ``params.op_codes`` that are not exactly those of p4gen/ops/: a
    program that dispatched on other codes would run other operations than the ones the decision names
    and the proofs cover."""
    want = op_codes()
    if codes == want:
        return
    if not isinstance(codes, dict) or set(codes) != set(want):
        got = sorted(codes) if isinstance(codes, dict) else type(codes).__name__
        raise PlanError(f"{source}: params.op_codes must give the roles {', '.join(want)} (got {got}); "
                        f"the codes are those of p4gen/ops.py: rebuild with p4gen build")
    for role, ops_ in want.items():
        have = codes[role]
        if not isinstance(have, dict) or set(have) != set(ops_):
            raise PlanError(f"{source}: params.op_codes.{role} must give the operations {', '.join(ops_)} "
                            f"(got {sorted(have) if isinstance(have, dict) else have!r}); rebuild with p4gen build")
        for op, code in ops_.items():
            if have[op] != code or type(have[op]) is not int:
                shared = sorted(o for o, c in have.items() if c == have[op] and o != op)
                also = f", the code of {', '.join(shared)} too" if shared else ""
                raise PlanError(f"{source}: params.op_codes.{role}.{op} is {have[op]!r}{also}; p4gen/ops.py gives "
                                f"{code}: the program dispatches on these codes, so a plan with others is not the "
                                f"program the decision names (rebuild with p4gen build)")


def check_decision(data: dict[str, Any], source: str = "plan") -> None:
    """Refuse (PlanError, one line) a plan whose ``dt_*`` tables are not the expansion of its ``decision``."""
    try:
        why = dmod.p4_tables_mismatch(data)
    except (KeyError, LookupError, TypeError, ValueError, AttributeError) as exc:
        why = (f"the key {exc.args[0]!r} is missing" if type(exc) is KeyError and exc.args
               else str(exc).strip() or exc.__class__.__name__)
        raise PlanError(f"{source} has no valid decision table: {why}") from None
    if why is not None:
        raise PlanError(f"{source}: {why}; the dt_* tables are derived from 'decision': edit only 'decision' "
                        f"and re-derive them (Plan.with_decision), or rebuild with p4gen build")
