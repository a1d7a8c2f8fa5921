"""The per-packet aggregation decision, as data.

A decision table is a list of *steps*, one per stateful register group, in
pipeline order, followed by an *outcome* step.  Each step matches on the
observations made by earlier steps and names an operation from
``p4gen.ops``; the step's register reports a new observation.  The table
lives in the Plan (``plan.json``) and is the single definition read by

* the P4 templates, which render every step as a table with const entries;
* the software data plane (``p4gen.switch``), which executes it;
* the verifier (``p4gen.verify``), which encodes it in Z3.

A table is a :class:`DecisionTable` of :class:`Step` and :class:`Outcome`
rules (frozen; :meth:`DecisionTable.from_dict` reads and checks the JSON
form, :meth:`DecisionTable.to_dict` writes it).  Rules are matched
first-to-last; ``"*"`` matches any value.  :func:`expand` turns a step into
one exact entry per combination of its keys, which is what the P4 tables
hold.

plan.json carries the table twice: the rules under ``decision`` and their
expansion, the ``dt_*`` tables with const entries, under ``tables`` (which
the P4 program, P4Info and controller read).  :func:`p4_tables` is the one
derivation of the second from the first; :func:`p4_tables_mismatch` says
where a plan's ``tables`` are not that derivation, and ``p4gen.plan.Plan``
refuses such a plan on load, so every reader sees one decision.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping

from .. import ops

OBSERVATIONS: dict[str, list[str]] = {
    "cmp": [ops.CMP_NAMES[c] for c in (ops.CMP_LT, ops.CMP_EQ, ops.CMP_GT)],
    "seen": ["0", "1"],
    "count": [ops.COUNT_NAMES[c] for c in range(6)],
    "data": ["0", "1"],          # OmniReduce: the packet carries a block (1) or only its next offset (0)
}

# name -> integer code, as the P4 program and the model see them
CODES: dict[str, dict[str, int]] = {
    "cmp": {v: k for k, v in ops.CMP_NAMES.items()},
    "seen": {"0": 0, "1": 1},
    "data": {"0": 0, "1": 1},
    "count": {v: k for k, v in ops.COUNT_NAMES.items()},
}
OUTCOME_CODES = {v: k for k, v in ops.OUTCOME_NAMES.items()}

# packet counter indices (one indexed counter array in the program)
# Every packet is counted exactly once, under its fate.
STATS = [
    "absorbed",          # contribution stored, no packet out
    "multicast",         # last contribution: result sent to every worker
    "unicast",           # retransmission to a complete slot: result to its sender
    "drop_duplicate",    # retransmission to an incomplete slot
    "drop_stale",        # packet for an older chunk than the slot holds (hardened)
    "drop_unknown",      # unknown job / worker / ingress port / source port
    "drop_bad_slot",     # pool index outside the job's slot range
    "drop_malformed",    # parser error: truncated or malformed aggregation packet
    "l2_unicast",        # other traffic, known destination MAC
    "l2_flood",          # other traffic, flooded
]
DROP_REASONS = {"absorbed", "drop_duplicate", "drop_stale"}


@dataclass(frozen=True)
class Codes:
    """The integer codes the P4 program, the model and the verifier share: of every register operation
    (role -> op -> code), of every observation's values (observation -> value name -> code) and of every
    outcome action."""
    ops: Mapping[str, Mapping[str, int]]
    observations: Mapping[str, Mapping[str, int]]
    outcomes: Mapping[str, int]

    def op(self, role: str, name: str) -> int:
        return self.ops[role][name]

    def observation(self, key: str, value: str) -> int:
        return self.observations[key][value]

    def outcome(self, action: str) -> int:
        return self.outcomes[action]

    def observation_names(self, key: str) -> list[str]:
        """The value names of observation ``key``, in code order."""
        return sorted(self.observations[key], key=self.observations[key].get)


class FrozenMap(dict):
    """A dict that refuses changes (the mappings inside frozen dataclasses); it pickles, unlike a mappingproxy,
    so plans and tables cross process pools."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a FrozenMap cannot be changed")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self):
        return (FrozenMap, (dict(self),))

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def _frozen(m: Mapping[str, str]) -> Mapping[str, str]:
    return FrozenMap(m)


@dataclass(frozen=True)
class Rule:
    """One rule of a register step: when ``match`` holds (observation -> value, or "*"), run ``op``."""
    match: Mapping[str, str]
    op: str

    def to_dict(self) -> dict[str, Any]:
        return {"match": dict(self.match), "op": self.op}


@dataclass(frozen=True)
class OutcomeRule:
    """One rule of the outcome step: when ``match`` holds, take ``action`` and count the packet under ``stat``."""
    match: Mapping[str, str]
    action: str
    stat: str

    def to_dict(self) -> dict[str, Any]:
        return {"match": dict(self.match), "action": self.action, "stat": self.stat}


@dataclass(frozen=True)
class Step:
    """One register step: its register role, the observations it keys on, the one it yields, its rules."""
    name: str
    role: str
    keys: tuple[str, ...]
    yields: str | None
    rules: tuple[Rule, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "keys": list(self.keys), "yields": self.yields,
                "rules": [r.to_dict() for r in self.rules]}


@dataclass(frozen=True)
class Outcome:
    """The outcome step: what happens to the packet, by the observations made."""
    keys: tuple[str, ...]
    rules: tuple[OutcomeRule, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "rules": [r.to_dict() for r in self.rules]}


@dataclass(frozen=True)
class DecisionTable:
    """A protocol variant's decision: its register steps in pipeline order and its outcome.  ``parsed``: the
    observations the protocol's parser makes before the first step (``data`` for a sparse protocol)."""
    protocol: str
    variant: str
    assumption: str
    steps: tuple[Step, ...]
    outcome: Outcome
    parsed: tuple[str, ...] = ()

    def step(self, role: str) -> Step | None:
        """The step of register role ``role``, or None."""
        return next((s for s in self.steps if s.role == role), None)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(s.role for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        d = {"protocol": self.protocol, "variant": self.variant, "assumption": self.assumption,
             "steps": [s.to_dict() for s in self.steps], "outcome": self.outcome.to_dict()}
        if self.parsed:
            d["parsed"] = list(self.parsed)
        return d

    def edited(self, edit) -> "DecisionTable":
        """This table with ``edit`` applied to its JSON form (``edit`` changes the dict in place), checked."""
        d = self.to_dict()
        edit(d)
        return DecisionTable.from_dict(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], protocol: str | None = None) -> "DecisionTable":
        """Read a table's JSON form and check it (:func:`validate`).  A malformed document raises
        KeyError (a missing key), TypeError or ValueError; a rule set that is not total, LookupError."""
        if not isinstance(d, Mapping):
            raise TypeError(f"a decision table must be an object, not {type(d).__name__}")

        def strings(v: Any, what: str) -> tuple[str, ...]:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise TypeError(f"{what} must be a list of names")
            return tuple(v)

        def match(r: Any, what: str) -> Mapping[str, str]:
            if not isinstance(r, Mapping):
                raise TypeError(f"{what} must be an object")
            m = r["match"]
            if not isinstance(m, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
                raise TypeError(f"{what}.match must map observations to value names")
            return _frozen(m)

        steps = []
        raw_steps = d["steps"]
        if not isinstance(raw_steps, list):
            raise TypeError("the decision table's steps must be a list")
        for i, st in enumerate(raw_steps):
            if not isinstance(st, Mapping):
                raise TypeError(f"decision step {i} must be an object")
            name, role, yields = st["name"], st["role"], st["yields"]
            if not isinstance(name, str) or not isinstance(role, str) or not (yields is None or isinstance(yields, str)):
                raise TypeError(f"decision step {i}: name and role must be names, yields a name or null")
            if not isinstance(st["rules"], list):
                raise TypeError(f"decision step {name!r}: rules must be a list")
            rules = []
            for j, r in enumerate(st["rules"]):
                m = match(r, f"decision step {name!r} rule {j}")
                if not isinstance(r["op"], str):
                    raise TypeError(f"decision step {name!r} rule {j}: op must be a name")
                rules.append(Rule(m, r["op"]))
            steps.append(Step(name, role, strings(st["keys"], f"decision step {name!r} keys"), yields, tuple(rules)))
        out = d["outcome"]
        if not isinstance(out, Mapping) or not isinstance(out["rules"], list):
            raise TypeError("the decision table's outcome must be an object with a list of rules")
        orules = []
        for j, r in enumerate(out["rules"]):
            m = match(r, f"outcome rule {j}")
            if not isinstance(r["action"], str) or not isinstance(r["stat"], str):
                raise TypeError(f"outcome rule {j}: action and stat must be names")
            orules.append(OutcomeRule(m, r["action"], r["stat"]))
        prot = d["protocol"] if protocol is None or "protocol" in d else protocol
        variant, assumption = d.get("variant", ""), d.get("assumption", "")
        if not all(isinstance(x, str) for x in (prot, variant, assumption)):
            raise TypeError("the decision table's protocol, variant and assumption must be text")
        table = cls(prot, variant, assumption, tuple(steps),
                    Outcome(strings(out["keys"], "outcome keys"), tuple(orules)),
                    strings(d.get("parsed", []), "the decision table's parsed observations"))
        validate(table)
        return table


STANDARD_CODES = Codes(
    FrozenMap({role: FrozenMap({op: i for i, op in enumerate(names)}) for role, names in ops.OPS.items()}),
    FrozenMap({k: FrozenMap(v) for k, v in CODES.items()}), FrozenMap(OUTCOME_CODES))
"""The codes this p4gen's operations report (``p4gen.ops``); every plan carries these."""

def rule_matches(match: Mapping[str, str], obs: Mapping[str, str]) -> bool:
    return all(v == "*" or obs.get(k) == v for k, v in match.items())


def lookup(rules, obs: Mapping[str, str]):
    """First rule whose match holds for ``obs``."""
    for rule in rules:
        if rule_matches(rule.match, obs):
            return rule
    raise LookupError(f"no rule matches {dict(obs)}")


def expand(keys, rules) -> list[tuple[dict[str, str], Any]]:
    """One (observation combination, rule) pair per combination of ``keys``."""
    out = []
    for combo in itertools.product(*(OBSERVATIONS[k] for k in keys)):
        obs = dict(zip(keys, combo))
        out.append((obs, lookup(rules, obs)))
    return out


def validate(table: DecisionTable) -> None:
    """Check that every step only uses earlier observations and known ops, and that every step is total."""
    available: set[str] = set(table.parsed)
    unknown = [k for k in table.parsed if k not in OBSERVATIONS]
    if unknown:
        raise ValueError(f"the parser's observation {unknown[0]!r} is not an observation")
    for step in table.steps:
        if step.role not in ops.OPS:
            raise ValueError(f"decision step {step.name!r}: unknown register role {step.role!r}")
        for key in step.keys:
            if key not in available:
                raise ValueError(f"decision step {step.name!r} keys on {key!r} before it is observed")
        for rule in step.rules:
            if rule.op not in ops.OPS[step.role]:
                raise ValueError(f"decision step {step.name!r}: unknown op {rule.op!r}")
            for k, v in rule.match.items():
                if k not in step.keys or (v != "*" and v not in OBSERVATIONS[k]):
                    raise ValueError(f"decision step {step.name!r}: bad match {k}={v!r}")
        expand(step.keys, step.rules)  # total: every combination matches
        if step.yields:
            if step.yields not in OBSERVATIONS:
                raise ValueError(f"decision step {step.name!r} yields the unknown observation {step.yields!r}")
            available.add(step.yields)
    out = table.outcome
    for key in out.keys:
        if key not in available:
            raise ValueError(f"outcome keys on {key!r} before it is observed")
    for rule in out.rules:
        if rule.action not in OUTCOME_CODES or rule.stat not in STATS:
            raise ValueError(f"outcome rule {rule.to_dict()} names an unknown action or stat")
        for k, v in rule.match.items():
            if k not in out.keys or (v != "*" and v not in OBSERVATIONS[k]):
                raise ValueError(f"outcome rule {rule.to_dict()}: bad match {k}={v!r}")
    expand(out.keys, out.rules)


def _entry_text(obs: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in obs.items())


DERIVED = ("dt_", "run_")      # the prefixes of the tables derived from the decision


def touches(role: str, op: str) -> bool:
    """Whether ``op`` of ``role`` reads or writes the role's registers (else the P4 program runs it as a
    plain action: a nop)."""
    from ..ops import graph as opgraph

    call = opgraph.ROLE_CALLS[role]
    res = opgraph.symbolic(role, op)
    regs = set(call.registers)
    writes = any(not (r.kind == "leaf" and r.args[0] == name)
                 for r, name in zip(res, call.stores) if name is not None)
    return writes or bool(opgraph.leaves([res[call.output]]) & regs)


def step_action(step: str, role: str, op: str, copy: int | None) -> str:
    """The P4 action a ``dt_<step>`` entry runs for ``op`` (for one copy where the role's lanes are the
    two copies and the op touches them)."""
    return f"{step}_{op}" if copy is None else f"{step}_{op}_copy{copy}"


def copy_keyed(st: "Step") -> bool:
    """Whether step ``st``'s table also matches the packet's copy: its role keeps both copies of a slot
    in one register entry and one of its ops touches it (a Tofino stateful ALU runs a fixed program
    per action, so each copy has its own)."""
    return st.role in ops.COPY_LANES and any(touches(st.role, r.op) for r in st.rules)


def arrays_per_table(data: Mapping[str, Any]) -> dict[str, list[str]] | None:
    """For a plan (its JSON form) on a target whose actions run one register each (Tofino: a stateful ALU
    is addressed once per action): role -> the names of its register arrays, for the roles with a table
    per array (the bitmap's words, the value arrays).  None on a target whose actions run any number."""
    if data["target"]["arch"] not in ("tna", "t2na"):
        return None
    out: dict[str, list[str]] = {}
    for r in data["registers"]:
        if r["role"] in ("bitmap", "values"):
            out.setdefault(r["role"], []).append(r["name"])
    return out


def array_action(array: str, op: str, copy: int | None) -> str:
    """The action of a per-array table that runs ``op`` on ``array`` (for one copy where it depends on it)."""
    return f"{array}_{op}" if copy is None else f"{array}_{op}_copy{copy}"


def p4_tables(table: DecisionTable, op_codes: Mapping[str, Mapping[str, int]],
              arrays: Mapping[str, list[str]] | None = None) -> tuple[list[dict], list[dict]]:
    """The P4 tables of ``table`` and their actions, without P4Runtime IDs: ``(tables, actions)``, in
    plan.json's form.

    One ``dt_<step>`` table per step, whose entry for each combination of its keys (:func:`expand`
    order) runs the action of the op the step names (:func:`step_action`: the op's register work,
    or for the values step setting ``values_op``), and ``dt_outcome`` (action
    ``set_outcome(outcome, stat)``).  A step whose role keeps both copies of a slot in one entry also
    matches the packet's copy (:func:`copy_keyed`).  ``op_codes`` maps role -> op name -> code (the
    plan's op codes; every op a step names must have one).

    ``arrays`` (:func:`arrays_per_table`) is given on a target whose actions run one register each:
    then the bitmap's words after the first get tables of their own (``dt_<step>_word<i>``, the step's
    entries), and every value array a table ``run_<array>`` that runs the op ``values_op`` names.
    """
    tables: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    declared: set[str] = set()

    def keys(names) -> list[dict[str, Any]]:
        return [{"name": k, "field": f"meta.{k}", "bits": 1 if k == "copy" else 8, "match": "exact"}
                for k in names]

    def action(name: str) -> str:
        if name not in declared:
            declared.add(name)
            actions.append({"name": name, "scope": "ingress", "params": []})
        return name

    for st in table.steps:
        codes = op_codes[st.role]
        by_copy = copy_keyed(st)
        entries, names = [], []
        for obs, rule in expand(st.keys, st.rules):
            codes[rule.op]            # every op has a code (KeyError otherwise)
            for copy in ((0, 1) if by_copy else (None,)):
                c = copy if copy is not None and touches(st.role, rule.op) else None
                name = action(step_action(st.name, st.role, rule.op, c))
                names.append(name)
                match = ({"copy": copy} if copy is not None else {}) | {k: CODES[k][v] for k, v in obs.items()}
                where = (f"copy={copy} " if copy is not None else "") + _entry_text(obs)
                entries.append({"match": match, "action": name, "args": {}, "comment": f"{where.strip()} -> {rule.op}"})
        if "nop" in codes and any(r.op == "nop" for r in st.rules):
            default = action(step_action(st.name, st.role, "nop", None))
        elif not st.keys and not by_copy:
            default = names[-1]        # a table without keys runs its one action on every packet
        else:
            # every combination of the keys has an entry, so it is never taken; a table's default action
            # cannot run a register (Tofino addresses registers through the hit path's hash unit)
            default = action(f"{st.name}_miss")
        tables.append({"name": f"dt_{st.name}", "scope": "ingress", "size": max(1, len(entries)),
                       "keys": keys((["copy"] if by_copy else []) + list(st.keys)),
                       "actions": list(dict.fromkeys(names + [default])), "default_action": default,
                       "default_args": {}, "const": True, "entries": entries})
        if arrays is not None and st.role == "bitmap":
            for word, array in enumerate(arrays.get("bitmap", [])[1:], start=1):
                w_entries = []
                for e in entries:
                    op = e["comment"].rsplit(" -> ", 1)[1]
                    copy = e["match"].get("copy")
                    name = action(array_action(array, op, copy if touches(st.role, op) else None)
                                  if touches(st.role, op) else f"dt_{st.name}_word{word}_miss")
                    w_entries.append({**e, "action": name})
                w_default = action(f"dt_{st.name}_word{word}_miss")
                tables.append({"name": f"dt_{st.name}_word{word}", "scope": "ingress", "size": len(w_entries),
                               "keys": keys((["copy"] if by_copy else []) + list(st.keys)),
                               "actions": list(dict.fromkeys([x["action"] for x in w_entries] + [w_default])),
                               "default_action": w_default, "default_args": {}, "const": True, "entries": w_entries})
        if arrays is not None and st.role == "values":
            run_ops = sorted({r.op for r in st.rules if touches("values", r.op)}, key=codes.get)
            for array in arrays.get("values", []):
                r_entries = [{"match": {"values_op": codes[op]}, "action": action(array_action(array, op, None)),
                              "args": {}, "comment": f"values_op={codes[op]} -> {op}"} for op in run_ops]
                r_default = action(f"run_{array}_miss")
                tables.append({"name": f"run_{array}", "scope": "ingress", "size": max(1, len(r_entries)),
                               "keys": keys(["values_op"]), "actions": [e["action"] for e in r_entries] + [r_default],
                               "default_action": r_default, "default_args": {}, "const": True,
                               "entries": r_entries})
    out = table.outcome
    actions.append({"name": "set_outcome", "scope": "ingress",
                    "params": [{"name": "outcome", "bits": 8}, {"name": "stat", "bits": 8}]})
    entries = [{"match": {k: CODES[k][v] for k, v in obs.items()}, "action": "set_outcome",
                "args": {"outcome": OUTCOME_CODES[rule.action], "stat": STATS.index(rule.stat)},
                "comment": f"{_entry_text(obs)} -> {rule.action} ({rule.stat})"}
               for obs, rule in expand(out.keys, out.rules)]
    tables.append({"name": "dt_outcome", "scope": "ingress", "size": len(entries), "keys": keys(out.keys),
                   "actions": ["set_outcome"], "default_action": "set_outcome",
                   "default_args": {"outcome": OUTCOME_CODES["drop"], "stat": STATS.index("drop_duplicate")},
                   "const": True, "entries": entries})
    return tables, actions


def _without_id(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "id"}


def p4_tables_mismatch(data: dict[str, Any]) -> str | None:
    """Where plan ``data``'s ``dt_*`` tables (and their actions) differ from the expansion of its ``decision``.

    None when they agree; otherwise one line naming the first difference.
    Raises ValueError (or LookupError / KeyError / TypeError) when the
    decision table itself is not valid.
    """
    table = DecisionTable.from_dict(data["decision"], data.get("protocol"))
    want_tables, want_actions = p4_tables(table, data["params"]["op_codes"], arrays_per_table(data))
    have = {t["name"]: t for t in data["tables"] if str(t.get("name", "")).startswith(DERIVED)}
    want = {t["name"]: t for t in want_tables}
    if set(have) != set(want):
        return (f"'tables' holds {', '.join(sorted(have)) or 'no dt_* table'} but 'decision' has the steps of "
                f"{', '.join(sorted(want))}")
    for name, w in want.items():
        h = _without_id(have[name])
        if h == w:
            continue
        he, we = h.get("entries"), w["entries"]
        if isinstance(he, list) and len(he) == len(we):
            for i, (a, b) in enumerate(zip(he, we)):
                if a == b:
                    continue
                where, what = b["comment"].split(" -> ")
                where = f"{name} entry {i} ({where or 'the only entry'})"
                if not isinstance(a, dict) or a.get("match") != b["match"]:
                    return f"'tables' {where} matches {a.get('match') if isinstance(a, dict) else a!r}, " \
                           f"the decision gives {b['match']}"
                if a.get("action") != b["action"]:
                    return f"'tables' {where} runs {a.get('action')}, the decision runs {b['action']} ({what})"
                if a.get("args") != b["args"]:
                    return f"'tables' {where} gives {a.get('args')}, the decision gives {b['args']} ({what})"
                diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                return f"'tables' {where} differs from the decision in {', '.join(diff)}"
        elif isinstance(he, list):
            return f"'tables' {name} has {len(he)} entries, the decision gives {len(we)}"
        diff = sorted(k for k in set(h) | set(w) if h.get(k) != w.get(k))
        return f"'tables' {name} differs from the decision in {', '.join(diff)}"
    acts = {a.get("name"): a for a in data["actions"]}
    for w in want_actions:
        if w["name"] not in acts or _without_id(acts[w["name"]]) != w:
            return f"'actions' {w['name']} is not the action the decision's tables use ({w['params']})"
    return None

