"""The program's declarations against the plan's: tables (keys, actions, const entries, defaults), the
actions' parameters, the header types and the deparser's emit order, as p4c's IR states them.

Each difference is one line naming the P4 element and what the plan says instead.
"""

from __future__ import annotations

from typing import Any

from .ir import IR, Node


def _int(ir: IR, e: Node) -> int | None:
    e = ir.get(e)
    if e["Node_Type"] == "Constant":
        return int(e["value"])
    if e["Node_Type"] == "BoolLiteral":
        return int(bool(e["value"]))
    return None


def _locals(ir: IR, ctl: Node) -> dict[str, Node]:
    return {ir.user_name(d): d for d in ir.vec(ctl["controlLocals"])}


def check_tables(plan, ir: IR, controls: dict[str, Node]) -> list[str]:
    """Every table of the plan in its control (``ingress`` or ``egress``): same keys (names, match kinds,
    widths), actions, const entries in order (key values, action, arguments), default action."""
    from .symexec import Executor

    out: list[str] = []
    ex = Executor(ir, plan.arch)
    for t in plan.tables:
        ctl = controls.get(t.scope)
        decl = _locals(ir, ctl).get(t.name) if ctl is not None else None
        if decl is None or decl["Node_Type"] != "P4Table":
            out.append(f"program.p4: no table {t.name} in the {t.scope} control (the plan has one)")
            continue
        ex._locals = {d["name"]: d for d in ir.vec(ctl["controlLocals"])}
        parts = ex.table_parts(decl)
        user = {a: ir.user_name(ex._locals[a]) for a in parts["actions"]}
        keys = [(k, mt, ex.width(e)) for k, e, mt in parts["keys"]]
        want_keys = [(k.name, k.match, k.bits) for k in t.keys]
        if keys != want_keys:
            out.append(f"program.p4: table {t.name} keys on {_keys(keys)} where the plan's keys are "
                       f"{_keys(want_keys)}")
            continue
        if sorted(user.values()) != sorted(t.actions):
            out.append(f"program.p4: table {t.name} has actions {sorted(user.values())} where the plan's are "
                       f"{sorted(t.actions)}")
            continue
        default = user.get(parts["default"][0]) if parts["default"] else None
        if default != t.default_action:
            out.append(f"program.p4: table {t.name}'s default action is {default} where the plan's is "
                       f"{t.default_action}")
            continue
        if parts["default"] and t.default_args is not None:
            dargs = _args(ir, ex, parts["default"][0], parts["default"][1])
            if dargs != dict(t.default_args or {}):
                out.append(f"program.p4: table {t.name}'s default action {default}{_show(dargs)} where the "
                           f"plan's is {t.default_action}{_show(dict(t.default_args or {}))}")
                continue
        if not t.const:
            if parts["const"]:
                out.append(f"program.p4: table {t.name} has const entries; the plan leaves it to the control plane")
            continue
        if not t.keys:
            # a table without keys runs its default action on every packet: the plan's one entry
            if any(e.action != t.default_action for e in t.entries):
                out.append(f"program.p4: table {t.name} runs {default} on every packet where the plan's entries "
                           f"run {sorted({e.action for e in t.entries})}")
            continue
        if not parts["const"] and t.entries:
            out.append(f"program.p4: table {t.name} has no const entries where the plan has {len(t.entries)}")
            continue
        entries = parts["entries"]
        if len(entries) != len(t.entries):
            out.append(f"program.p4: table {t.name} has {len(entries)} const entries where the plan has "
                       f"{len(t.entries)}")
            continue
        for i, ((comps, act, args, prio), want) in enumerate(zip(entries, t.entries)):
            have_match = {k.name: _keyset(ir, c) for k, c in zip(t.keys, comps)}
            want_match = {k.name: want.match.get(k.name) for k in t.keys}
            have_args = _args(ir, ex, act, args)
            if have_match != want_match or user[act] != want.action or have_args != dict(want.args):
                out.append(f"program.p4: table {t.name} entry {i} is {_entry(have_match, user[act], have_args)} "
                           f"where the plan's is {_entry(want_match, want.action, dict(want.args))}")
                break
            if prio is not None and _int(ir, prio) not in (None, i + 1):
                out.append(f"program.p4: table {t.name} entry {i} has priority {_int(ir, prio)}; the plan's "
                           f"entries match first to last")
                break
    return out


def _keyset(ir: IR, c: Node) -> Any:
    c = ir.get(c)
    if c["Node_Type"] == "DefaultExpression":
        return "_"
    if c["Node_Type"] == "Mask":
        return (_int(ir, c["left"]), _int(ir, c["right"]))
    return _int(ir, c)


def _args(ir: IR, ex, action: str, args: list[Node]) -> dict[str, int | None]:
    params = ir.vec(ir.get(ex._locals[action]["parameters"])["parameters"])
    return {ir.user_name(p): _int(ir, a) for p, a in zip(params, args)}


def _keys(keys) -> str:
    return ", ".join(f"{n} ({mt}, {b} bits)" for n, mt, b in keys) or "nothing"


def _show(args: dict) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")"


def _entry(match: dict, action: str, args: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in match.items()) + f" -> {action}{_show(args)}"


def check_actions(plan, ir: IR, controls: dict[str, Node]) -> list[str]:
    """Every action of the plan has the parameters (names and widths) the plan gives it."""
    out = []
    for a in plan.actions:
        ctl = controls.get(a.scope)
        decl = _locals(ir, ctl).get(a.name) if ctl is not None else None
        if decl is None or decl["Node_Type"] != "P4Action":
            out.append(f"program.p4: no action {a.name} in the {a.scope} control (the plan has one)")
            continue
        params = [(ir.user_name(p), IR.bits(ir.resolve_type(p["type"])))
                  for p in ir.vec(ir.get(decl["parameters"])["parameters"])]
        want = [(p.name, p.bits) for p in a.params]
        if params != want:
            out.append(f"program.p4: action {a.name} takes {params} where the plan's takes {want}")
    return out


def check_headers(plan, ir: IR) -> list[str]:
    """Every header of the plan's wire format is a header type ``<name>_h`` with the plan's fields, in
    order and of the plan's widths."""
    out = []
    for h in plan.headers:
        try:
            t = ir.type_decl(f"{h.name}_h")
        except ValueError:
            out.append(f"program.p4: no header type {h.name}_h (the plan's header {h.name})")
            continue
        fields = [(n, IR.bits(ft)) for n, ft in ir.fields(t)]
        want = [(f.name, f.bits) for f in h.fields]
        if fields != want:
            diff = next((i for i, (a, b) in enumerate(zip(fields, want)) if a != b), min(len(fields), len(want)))
            have_f = fields[diff] if diff < len(fields) else "nothing"
            want_f = want[diff] if diff < len(want) else "nothing"
            out.append(f"program.p4: header {h.name}_h field {diff} is {have_f} where the plan's wire format has "
                       f"{want_f}")
    return out


def data_instances(plan) -> list[str]:
    """The data header instances a pass carries: every pass's values when they stay in the packet
    (resident), one pass's when each pass parses its own (streamed)."""
    h = plan.header("data")
    n = h.repeat if plan.params.pass_mode != "stream" else 1
    return [f"data{i}" for i in range(n)]


def wire_order(plan) -> list[str]:
    """The header instances in the order the plan's wire format puts them on a frame."""
    names = []
    for h in plan.headers:
        if h.internal:
            continue
        names += data_instances(plan) if h.name == "data" else [h.name]
    return names


def emits(ir: IR, ctl: Node) -> list[str]:
    """The header instances a deparser emits, in program order."""
    locs = {d["name"]: d for d in ir.vec(ctl["controlLocals"])}
    out: list[str] = []

    def walk(stmt: Node | None) -> None:
        stmt = ir.get(stmt)
        if stmt is None:
            return
        t = stmt["Node_Type"]
        if t == "BlockStatement":
            for s in ir.vec(stmt["components"]):
                walk(s)
        elif t == "IfStatement":
            walk(stmt["ifTrue"])
            walk(stmt.get("ifFalse"))
        elif t == "MethodCallStatement":
            mce = ir.get(stmt["methodCall"])
            m = ir.get(mce["method"])
            if m["Node_Type"] == "Member" and m["member"] == "emit":
                arg = ir.get(ir.vec(mce["arguments"])[0]["expression"])
                out.append(arg["member"] if arg["Node_Type"] == "Member" else ir.pname(arg))
            elif m["Node_Type"] == "Member" and m["member"] == "apply":
                table = locs.get(ir.pname(ir.get(m["expr"])))
                if table is not None:
                    props = {p["name"]: p for p in ir.vec(ir.get(table["properties"])["properties"])}
                    dv = ir.get(ir.get(props["default_action"]["value"])["expression"])
                    walk(locs[ir.pname(ir.get(dv["method"]))]["body"])
            elif m["Node_Type"] == "PathExpression" and ir.pname(m) in locs:
                walk(locs[ir.pname(m)]["body"])

    walk(ctl["body"])
    return out


def check_deparser(plan, ir: IR, deparser: Node) -> list[str]:
    """The deparser emits the plan's headers in the wire format's order (a pass header first)."""
    have = emits(ir, deparser)
    want = wire_order(plan)
    if plan.params.passes > 1:
        want = ["recirc"] + want
    if have != want:
        return [f"program.p4: {ir.user_name(deparser)} emits {', '.join(have)} where the plan's wire format is "
                f"{', '.join(want)}"]
    return []
