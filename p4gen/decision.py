"""The per-packet aggregation decision, as data.

A decision table is a list of *steps*, one per stateful register group, in
pipeline order, followed by an *outcome* step.  Each step matches on the
observations made by earlier steps and names an operation from
``p4gen.ops``; the step's register reports a new observation.  The table
lives in the Plan (``plan.json``) and is the single definition read by

* the P4 templates, which render every step as a table with const entries;
* the software data plane (``p4gen.switch.model``), which executes it;
* the verifier (``p4gen.verify``), which encodes it in Z3.

Rules are matched first-to-last; ``"*"`` matches any value.  ``expand``
turns a step into one exact entry per combination of its keys, which is
what the P4 tables hold.

plan.json carries the table twice: the rules under ``decision`` and their
expansion, the ``dt_*`` tables with const entries, under ``tables`` (which
the P4 program, P4Info and controller read).  :func:`p4_tables` is the one
derivation of the second from the first; :func:`p4_tables_mismatch` says
where a plan's ``tables`` are not that derivation, and ``p4gen.plan.Plan``
refuses such a plan on load, so every reader sees one decision.
"""

from __future__ import annotations

import itertools
from typing import Any

from . import ops

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

_REFERENCE: dict[str, Any] = {
    "variant": "reference",
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
    "variant": "hardened",
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
    "variant": "hardened",
    "assumption": _HARDENED["assumption"],
    "steps": [
        # rounds of a stream skip the blocks every worker holds as zero: their tsi gaps have no bound
        {"name": "chunk", "role": "chunk", "keys": [], "yields": "cmp",
         "rules": [{"match": {}, "op": "advance"}]},
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

TABLES = {"reference": _REFERENCE, "hardened": _HARDENED}
PROTOCOL_TABLES = {("switchml", "reference"): _REFERENCE, ("switchml", "hardened"): _HARDENED,
                   ("omnireduce", "hardened"): _OMNIREDUCE}


def decision_table(variant: str, protocol: str = "switchml") -> dict[str, Any]:
    """A fresh copy of the decision table of ``protocol`` / ``variant`` (validated)."""
    import copy

    table = copy.deepcopy(PROTOCOL_TABLES[(protocol, variant)])
    table["protocol"] = protocol
    validate(table)
    return table


def rule_matches(match: dict[str, str], obs: dict[str, str]) -> bool:
    return all(v == "*" or obs.get(k) == v for k, v in match.items())


def lookup(rules: list[dict[str, Any]], obs: dict[str, str]) -> dict[str, Any]:
    """First rule whose match holds for ``obs``."""
    for rule in rules:
        if rule_matches(rule["match"], obs):
            return rule
    raise LookupError(f"no rule matches {obs}")


def expand(keys: list[str], rules: list[dict[str, Any]]) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """One (observation combination, rule) pair per combination of ``keys``."""
    out = []
    for combo in itertools.product(*(OBSERVATIONS[k] for k in keys)):
        obs = dict(zip(keys, combo))
        out.append((obs, lookup(rules, obs)))
    return out


def validate(table: dict[str, Any]) -> None:
    """Check that every step only uses earlier observations and known ops."""
    available: set[str] = {"data"} if table.get("protocol") == "omnireduce" else set()
    for step in table["steps"]:
        for key in step["keys"]:
            if key not in available:
                raise ValueError(f"decision step {step['name']!r} keys on {key!r} before it is observed")
        for rule in step["rules"]:
            if rule["op"] not in ops.OPS[step["role"]]:
                raise ValueError(f"decision step {step['name']!r}: unknown op {rule['op']!r}")
            for k, v in rule["match"].items():
                if k not in step["keys"] or (v != "*" and v not in OBSERVATIONS[k]):
                    raise ValueError(f"decision step {step['name']!r}: bad match {k}={v!r}")
        expand(step["keys"], step["rules"])  # total: every combination matches
        if step["yields"]:
            available.add(step["yields"])
    out = table["outcome"]
    for key in out["keys"]:
        if key not in available:
            raise ValueError(f"outcome keys on {key!r} before it is observed")
    for rule in out["rules"]:
        if rule["action"] not in OUTCOME_CODES or rule["stat"] not in STATS:
            raise ValueError(f"outcome rule {rule} names an unknown action or stat")
    expand(out["keys"], out["rules"])


def _entry_text(obs: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in obs.items())


def p4_tables(table: dict[str, Any], op_codes: dict[str, dict[str, int]]) -> tuple[list[dict], list[dict]]:
    """The P4 tables of ``table`` and their actions, without P4Runtime IDs: ``(tables, actions)``.

    One ``dt_<step>`` table per step (action ``set_<step>_op(op)``) and
    ``dt_outcome`` (action ``set_outcome(outcome, stat)``), each with one
    const entry per combination of its keys, in :func:`expand` order.
    ``op_codes`` maps role -> op name -> code (the plan's ``params.op_codes``).
    """
    tables: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []

    def keys(names: list[str]) -> list[dict[str, Any]]:
        return [{"name": k, "field": f"meta.{k}", "bits": 8, "match": "exact"} for k in names]

    for st in table["steps"]:
        act = f"set_{st['name']}_op"
        actions.append({"name": act, "scope": "ingress", "params": [{"name": "op", "bits": 8}]})
        codes = op_codes[st["role"]]
        entries = [{"match": {k: CODES[k][v] for k, v in obs.items()}, "action": act,
                    "args": {"op": codes[rule["op"]]}, "comment": f"{_entry_text(obs)} -> {rule['op']}"}
                   for obs, rule in expand(st["keys"], st["rules"])]
        tables.append({"name": f"dt_{st['name']}", "scope": "ingress", "size": max(1, len(entries)),
                       "keys": keys(st["keys"]), "actions": [act], "default_action": act,
                       "default_args": {"op": codes.get("nop", 0)}, "const": True, "entries": entries})
    out = table["outcome"]
    actions.append({"name": "set_outcome", "scope": "ingress",
                    "params": [{"name": "outcome", "bits": 8}, {"name": "stat", "bits": 8}]})
    entries = [{"match": {k: CODES[k][v] for k, v in obs.items()}, "action": "set_outcome",
                "args": {"outcome": OUTCOME_CODES[rule["action"]], "stat": STATS.index(rule["stat"])},
                "comment": f"{_entry_text(obs)} -> {rule['action']} ({rule['stat']})"}
               for obs, rule in expand(out["keys"], out["rules"])]
    tables.append({"name": "dt_outcome", "scope": "ingress", "size": len(entries), "keys": keys(out["keys"]),
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
    table = data["decision"]
    validate(table)
    want_tables, want_actions = p4_tables(table, data["params"]["op_codes"])
    have = {t["name"]: t for t in data["tables"] if str(t.get("name", "")).startswith("dt_")}
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


def step(table: dict[str, Any], role: str) -> dict[str, Any] | None:
    for s in table["steps"]:
        if s["role"] == role:
            return s
    return None
