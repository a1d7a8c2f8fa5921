"""The register operations of ``p4gen.ops`` printed as P4, for the templates to lay out.

Every op a decision step names becomes the body of the step table's action (``p4gen.decision.step_action``):

* **v1model** (BMv2): the op read off its expression graph (:mod:`p4gen.ops.graph`) as one register read,
  the new value and the output as P4 expressions, one register write;
* **TNA / T2NA** (Tofino): the op lowered to a stateful ALU (:mod:`p4gen.ops.salu`): a ``RegisterAction``
  whose body branches on the op's comparisons, an action that executes it, the metadata computed before
  it and, where the ALU returns the register's old value, the match-action work that computes the
  output from it (run only after the actions that need it: ``switch (... .action_run)``).

The values step sets ``meta.values_op`` and every value register then runs the op's code on its own
lanes (``dispatch``), on TNA in the stages that hold them and in each pipeline pass.

Nothing here says what an operation does: change an op in ``p4gen.ops`` and its P4 changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import decision, ops
from ..ops import graph as opgraph, salu, salu_steps
from ..ops.graph import BOOLEAN, Expr
from ..plan import Plan
from ..ops.salu import IN, MEM, TMP, SaluCaps

_INDEX = {"chunk": "meta.sc_index", "counter": "meta.sc_index", "exponent": "meta.sc_index",
          "minnext": "meta.sc_index", "bitmap": "(bit<32>) meta.slot", "values": "meta.vidx"}


def index(plan: Plan, role: str, step: str) -> str:
    """The index a step's RegisterActions address their arrays with.  On Tofino the hash unit forms
    (slot, copy) where the register is executed (``<step>_index``, an identity hash): no stage computes it
    first."""
    if plan.arch == "v1model" or role == "values":
        return _INDEX[role]
    if role == "bitmap":
        return f"{step}_index.get({{meta.slot}})"
    return f"{step}_index.get({{meta.slot, meta.copy}})"


def word_index(step: str, word: int) -> str:
    """A bitmap word's index: each word's own hash unit (one address per stateful operation of an action)."""
    return f"{step}_index{word}.get({{meta.slot}})"


def hashes(plan: Plan) -> list[str]:
    """The identity hashes the Tofino steps index their registers with."""
    if plan.arch == "v1model":
        return []
    out = []
    for st in plan.decision.steps:
        if st.role == "values" or not any(decision.touches(st.role, op) for op in salu_steps.used_ops(st)):
            continue
        if st.role == "bitmap":
            out += [f"Hash<bit<32>>(HashAlgorithm_t.IDENTITY) {st.name}_index{r.word};"
                    for r in plan.registers if r.role == "bitmap"]
        else:
            out.append(f"Hash<bit<32>>(HashAlgorithm_t.IDENTITY) {st.name}_index;")
    return out
_OUTPUT = salu_steps.OUTPUT


@dataclass
class StepCode:
    """What the templates lay out for one decision step."""
    name: str
    role: str
    actions: list[tuple[str, list[str]]] = field(default_factory=list)      # the dt table's actions
    pre: list[str] = field(default_factory=list)                            # before the table (TNA)
    post: list[tuple[list[str], list[str]]] = field(default_factory=list)   # (actions, statements) after it
    registers: list[str] = field(default_factory=list)                      # RegisterActions (TNA)
    before: list[str] = field(default_factory=list)                         # tables applied before it (TNA)
    dispatch: list[str] = field(default_factory=list)                       # the values step's register work
    fields: list[tuple[str, int]] = field(default_factory=list)             # metadata it adds

    @property
    def apply(self) -> str:
        """How the step's table is applied (with the cases of the work after it)."""
        return f"dt_{self.name}.apply()"


# -- P4 expressions --------------------------------------------------------------------------------


def width(e: Expr, names: dict[str, tuple[str, int]]) -> int | None:
    """The bit width of ``e`` (None: a truth value)."""
    if e.kind in BOOLEAN:
        return None
    if e.kind == "leaf":
        return names[e.args[0]][1]
    if isinstance(e.bits, int):
        return e.bits
    if e.kind == "const":
        return None if isinstance(e.args[0], bool) else 32
    for c in e.children()[1:] if e.kind == "ite" else e.children():
        w = width(c, names)
        if w is not None:
            return w
    return None


def text(e: Expr, names: dict[str, tuple[str, int]], arch: str, local: dict[int, str] | None = None) -> str:
    """``e`` as a P4 expression; ``names`` gives each leaf's P4 text and width, ``local`` names shared nodes."""
    local = local or {}
    if id(e) in local:
        return local[id(e)]
    k, a = e.kind, e.args
    t = lambda x: text(x, names, arch, local)  # noqa: E731
    if k == "leaf":
        return names[a[0]][0]
    if k == "const":
        v = a[0]
        if isinstance(v, bool):
            return "true" if v else "false"
        return f"{e.bits}w{int(v)}" if isinstance(e.bits, int) else str(int(v))
    if k == "ite":
        return f"({t(a[0])} ? {t(a[1])} : {t(a[2])})"
    if k == "ssub":
        if arch == "v1model":      # BMv2 has no saturating subtraction
            return f"(({t(a[0])} > {t(a[1])}) ? ({t(a[0])} - {t(a[1])}) : {width(e, names)}w0)"
        return f"({t(a[0])} |-| {t(a[1])})"
    if k == "not":
        return f"(~{t(a[0])})"
    if k == "ne0":
        return f"({t(a[0])} != 0)"
    infix = {"eq": "==", "gt": ">", "add": "+", "sub": "-", "and": "&", "or": "|", "xor": "^"}[k]
    return f"({t(a[0])} {infix} {t(a[1])})"


def _as_bits(s: str, e: Expr, bits: int) -> str:
    """``s`` (the text of ``e``) as a value of ``bits`` bits: a truth value becomes 1 or 0."""
    return f"({s} ? {bits}w1 : {bits}w0)" if e.kind in BOOLEAN or (e.kind == "const" and isinstance(e.args[0], bool)) \
        else s


def _locals(roots: list[Expr], names: dict[str, tuple[str, int]], arch: str, prefix: str) -> tuple[list[str], dict]:
    """Declarations of the nodes ``roots`` share (each computed once), and their names."""
    refs = opgraph.references(roots)
    local: dict[int, str] = {}
    lines = []
    for n in opgraph.walk(roots):
        if refs.get(id(n), 0) > 1 and n.kind not in ("leaf", "const"):
            w = width(n, names)
            name = f"{prefix}{len(local)}"
            lines.append(f"{'bool' if w is None else f'bit<{w}>'} {name} = {text(n, names, arch, local)};")
            local[id(n)] = name
    return lines, local


# -- the register arrays of a step -----------------------------------------------------------------


def _is_bool(e: Expr) -> bool:
    return e.kind in BOOLEAN or (e.kind == "const" and isinstance(e.args[0], bool))


def _arrays(plan: Plan, role: str) -> list:
    return [r for r in plan.registers if r.role == role]


def _lane_names(plan: Plan, reg, pair: bool, arch: str, var: str) -> dict[str, tuple[str, int]]:
    """P4 text of a register's lanes: a RegisterAction's ``value`` (TNA) or the local read (v1model)."""
    w = reg.lane_bits
    if not pair:
        return {MEM + "value": (var, w)}
    if arch == "v1model":
        return {MEM + "lo": (f"{var}[{w - 1}:0]", w), MEM + "hi": (f"{var}[{2 * w - 1}:{w}]", w)}
    return {MEM + "lo": (f"{var}.lo", w), MEM + "hi": (f"{var}.hi", w)}


def _input_names(role: str, reg, pair: bool) -> dict[str, tuple[str, int]]:
    return salu_steps.inputs_of(role, salu_steps.Array.of(reg))


def _widths(role: str, plan: Plan) -> tuple[dict[str, int], int]:
    return salu_steps.widths(role, plan.params.value_width)


def _outputs(role: str, reg) -> list[str]:
    return salu_steps.outputs_of(role, salu_steps.Array.of(reg))


# -- v1model ------------------------------------------------------------------------------------------


def _v1_register_work(plan: Plan, role: str, op: str, reg, copy: int | None, tag: str) -> tuple[list[str], list]:
    """Statements that read ``reg``, compute ``op`` and write it back, and the op's outputs (P4 text of
    locals, with their graphs) for the caller to assign or combine."""
    pair = reg.lanes == 2
    widths, w = _widths(role, plan)
    news, outs = salu.graph(role, op, pair, copy, widths, w)
    var = f"{reg.name}_v"
    names = {**_lane_names(plan, reg, pair, "v1model", var), **_input_names(role, reg, pair)}
    lanes = salu.lanes_of(role, pair)
    changed = {ln: e for ln, e in news.items() if not (e.kind == "leaf" and e.args[0] == MEM + ln)}
    reads = changed or any(n.startswith(MEM) for n in opgraph.leaves(outs))
    lines: list[str] = []
    if reads:
        lines.append(f"bit<{reg.entry_bits}> {var};")
        lines.append(f"{reg.name}.read({var}, {_INDEX[role]});")
    roots = list(changed.values()) + outs
    decl, local = _locals(roots, names, "v1model", f"{tag}_t")
    lines += decl
    results = []
    for i, o in enumerate(outs):
        if o.kind == "leaf" and o.args[0].startswith(IN):
            results.append((None, o))          # the packet keeps the field it carried
            continue
        ow = width(o, names)
        name = f"{tag}_o{i}"
        lines.append(f"{'bool' if ow is None else f'bit<{ow}>'} {name} = {text(o, names, 'v1model', local)};")
        results.append((name, o))
    if changed:
        parts = [text(news.get(ln, opgraph.leaf(MEM + ln)), names, "v1model", local) for ln in reversed(lanes)]
        lines.append(f"{reg.name}.write({_INDEX[role]}, {' ++ '.join(parts)});")
    return lines, results


def _v1_action(plan: Plan, st, op: str, copy: int | None) -> list[str]:
    role = st.role
    lines: list[str] = []
    if role == "bitmap":
        seen = []
        for reg in _arrays(plan, role):
            body, res = _v1_register_work(plan, role, op, reg, copy, reg.name)
            lines += body
            seen.append(res[0])
        cond = " || ".join(f"{n}" if _is_bool(o) else f"({n} != 0)" for n, o in seen)
        lines.append(f"{_OUTPUT[role]} = ({cond}) ? 8w1 : 8w0;")
        return lines
    (reg,) = _arrays(plan, role)
    body, res = _v1_register_work(plan, role, op, reg, copy, reg.name)
    lines += body
    (name, o), = res
    if name is not None:
        lines.append(f"{_OUTPUT[role]} = {_as_bits(name, o, 8)};")
    return lines


def _v1_values(plan: Plan, op: str) -> list[str]:
    lines: list[str] = []
    for reg in _arrays(plan, "values"):
        body, res = _v1_register_work(plan, "values", op, reg, None, reg.name)
        for (name, _o), target in zip(res, _outputs("values", reg)):
            if name is not None:
                body.append(f"{target} = {name};")
        lines += body
    return lines


# -- TNA ---------------------------------------------------------------------------------------------


def _tree(lines: list[str], ind: str, atoms: list[Expr], upd: dict[str, Expr], outs: list[Expr],
          names: dict[str, tuple[str, int]], rv: list[str], lane_text: dict[str, str]) -> None:
    """A RegisterAction body: branch on the first atom any result still depends on, then assign."""
    def depends(e: Expr, a: Expr) -> bool:
        ka = salu.key(a)
        return any(n.kind in BOOLEAN and salu.key(n) == ka for n in opgraph.walk([e])) or \
            (e.kind in BOOLEAN and salu.key(e) == ka)

    for a in atoms:
        if any(depends(e, a) for e in list(upd.values()) + outs):
            k = salu.key(a)
            rest = [x for x in atoms if x is not a]
            lines.append(f"{ind}if {text(a, names, 'tna') if text(a, names, 'tna').startswith('(') else '(' + text(a, names, 'tna') + ')'} {{")
            _tree(lines, ind + "    ", rest, {ln: salu.restrict(e, k, True) for ln, e in upd.items()},
                  [salu.restrict(o, k, True) for o in outs], names, rv, lane_text)
            lines.append(f"{ind}}} else {{")
            _tree(lines, ind + "    ", rest, {ln: salu.restrict(e, k, False) for ln, e in upd.items()},
                  [salu.restrict(o, k, False) for o in outs], names, rv, lane_text)
            lines.append(f"{ind}}}")
            return
    changed = {ln: e for ln, e in upd.items() if not (e.kind == "leaf" and e.args[0] == MEM + ln)}
    after = []
    for i, o in enumerate(outs):
        lane = next((ln for ln, e in changed.items() if salu.key(e) == salu.key(o)), None)
        if lane is not None:
            after.append(f"{ind}{rv[i]} = {lane_text[lane]};")
        elif o.kind in BOOLEAN:
            lines.append(f"{ind}{rv[i]} = ({text(o, names, 'tna')}) ? 1 : 0;")
        elif o.kind == "const":
            lines.append(f"{ind}{rv[i]} = {int(o.args[0])};")
        else:
            lines.append(f"{ind}{rv[i]} = {text(o, names, 'tna')};")
    for ln, e in changed.items():
        lines.append(f"{ind}{lane_text[ln]} = {text(e, names, 'tna')};")
    lines += after


def _tna_type(a: salu_steps.Array) -> str:
    if not a.pair:
        return f"bit<{a.lane_bits}>"
    return "bitmap_pair_t" if a.role == "bitmap" else "pair_t"


def _ra_name(array: str, op: str, copy: int | None) -> str:
    return f"{array}_{op}" + ("" if copy is None else f"_copy{copy}") + "_ra"


def _register_action(a: salu_steps.Array, low: salu.Lowered, names: dict[str, tuple[str, int]],
                     returns: bool) -> list[str]:
    """The RegisterAction of ``low`` on array ``a``; ``returns``: the program reads what it returns."""
    outs = list(low.outputs) if returns else []
    ow = max([width(o, names) or 8 for o in outs] or [8])
    rv = (["rv"] + [f"rv{i + 1}" for i in range(1, len(outs))]) if outs else []
    t = _tna_type(a)
    params = ", ".join([f"inout {t} value"] + [f"out bit<{ow}> {r}" for r in rv])
    lines = [f"RegisterAction<{t}, bit<32>, bit<{ow}>>({a.name}) {_ra_name(a.name, low.op, low.copy)} = {{",
             f"    void apply({params}) {{"]
    lane_text = {ln: names[MEM + ln][0] for ln in low.lanes}
    body: list[str] = []
    # a returned word no comparison decides is read once, before any lane changes (every branch then
    # returns the same source, as a register pair requires)
    fixed = [i for i, o in enumerate(outs) if not any(
        n.kind in BOOLEAN for n in [o] + opgraph.walk([o])) and not any(
        salu.key(o) == salu.key(u) for u in low.updates.values())]
    for i in fixed:
        body.append(f"        {rv[i]} = {text(outs[i], names, 'tna')};")
    rest = [i for i in range(len(outs)) if i not in fixed]
    _tree(body, "        ", list(low.atoms), dict(low.updates), [outs[i] for i in rest], names,
          [rv[i] for i in rest], lane_text)
    return lines + body + ["    }", "};"]


def _field_names(e: Expr) -> dict[str, tuple[str, int]]:
    """Leaves that are P4 names already (after the ALU), with their widths."""
    return {n: (n if not n.startswith(TMP) else f"meta.{n[len(TMP):]}", 32) for n in opgraph.leaves([e])}


def _tna_step(plan: Plan, st, caps: SaluCaps, code: StepCode) -> None:
    """A step on Tofino: its RegisterActions, and the actions of its tables.  An action runs one register
    (a stateful ALU is addressed once per action): the first array's in ``dt_<step>``, each further
    bitmap word's in ``dt_<step>_word<i>``, each value array's in ``run_<array>``."""
    role = st.role
    arrays = [salu_steps.Array.of(r) for r in plan.registers if r.role == role]
    sc = salu_steps.step_code(st, arrays, caps, plan.params.value_width)
    code.fields = list(sc.fields)
    widths_of = dict(sc.fields)
    for field_name, e in sc.hoisted:
        code.pre.append(f"meta.{field_name} = {text(e, _leaf_names(e, widths_of), 'tna')};")
    for a in arrays:
        names = {**_lane_names(plan, a, a.pair, "tna", "value"), **salu_steps.inputs_of(role, a),
                 **{f"{TMP}{n}": (f"meta.{n}", b) for n, b in sc.fields}}
        for c in sc.ops:
            for run in c.runs:
                if run.array == a.name:
                    code.registers += _register_action(a, run.low, names, bool(run.carriers or run.target)
                                                       or role == "values")
    if role == "values":
        _tna_values(plan, st, sc, code)
        return
    # each temporary goes to the action that executes the register whose returned word it reads
    temps_of: dict[tuple[str, str], list[str]] = {}
    for actions, form in sc.post:
        names = _post_names(form, widths_of)
        for n, t in form.temps:
            read = {x for x in opgraph.leaves([t]) if x.startswith("meta.") and x.endswith("_rv0")}
            line = f"{names[n][0]} = {text(t, names, 'tna')};"
            for act in actions:
                for r in read:
                    temps_of.setdefault((act, r), []).append(line)
    declared: set[str] = set()
    for c in sc.ops:
        for i, a in enumerate(arrays):
            run = next((x for x in c.runs if x.array == a.name), None)
            if i == 0:
                name = c.action
            elif run is None:
                name = f"dt_{st.name}_word{i}_miss"
            else:
                name = decision.array_action(a.name, c.op, c.copy)
            body = []
            if run is not None:
                where = word_index(st.name, a.word) if role == "bitmap" else index(plan, role, st.name)
                call = f"{_ra_name(run.array, c.op, c.copy)}.execute({where})"
                if run.carriers:
                    body.append(f"meta.{run.carriers[0]} = {call};")
                    body += temps_of.get((c.action, f"meta.{run.carriers[0]}"), [])   # same stage, on the word
                elif run.target:
                    body.append(f"{run.target} = {call};")
                else:
                    body.append(f"{call};")
            r = c.result
            if i == 0 and r is not None and not c.after and not (r.kind == "leaf" and r.args[0] == sc.output):
                body.append(f"{sc.output} = {_direct_text(r)};")
            if name not in declared:
                declared.add(name)
                code.actions.append((name, body))
    for i in range(1, len(arrays)):
        miss = f"dt_{st.name}_word{i}_miss"
        if miss not in declared:
            declared.add(miss)
            code.actions.append((miss, []))
        code.before.append(f"dt_{st.name}_word{i}.apply();")
    for actions, form in sc.post:
        code.post.append((list(actions), _choice(form, sc.output, widths_of)))


def _leaf_names(e: Expr, widths_of: dict[str, int]) -> dict[str, tuple[str, int]]:
    out = {}
    for n in opgraph.leaves([e]):
        if n.startswith(TMP):
            out[n] = (f"meta.{n[len(TMP):]}", widths_of.get(n[len(TMP):], 32))
        else:
            out[n] = (n, 32)
    return out


def _direct_text(e: Expr) -> str:
    if e.kind == "const":
        v = e.args[0]
        return f"8w{int(v)}" if isinstance(v, bool) or not isinstance(e.bits, int) else f"{e.bits}w{int(v)}"
    return e.args[0]


def _post_names(form: salu.MauForm, widths_of: dict[str, int]) -> dict[str, tuple[str, int]]:
    names: dict[str, tuple[str, int]] = {}
    for e in [t for _n, t in form.temps] + [form.tree]:
        names.update(_leaf_names(e, widths_of))
    for n, _t in form.temps:
        names[n] = (f"meta.{n[len(TMP):]}", widths_of.get(n[len(TMP):], 32))
    return names


def _choice(form: salu.MauForm, out: str, widths_of: dict[str, int]) -> list[str]:
    """The gateway tests on the temporaries, assigning the output."""
    names = _post_names(form, widths_of)
    lines: list[str] = []

    def go(e: Expr, ind: str) -> None:
        if e.kind == "ite":
            lines.append(f"{ind}if ({text(e.args[0], names, 'tna')}) {{")
            go(e.args[1], ind + "    ")
            lines.append(f"{ind}}} else {{")
            go(e.args[2], ind + "    ")
            lines.append(f"{ind}}}")
        else:
            lines.append(f"{ind}{out} = {_direct_text(e) if e.kind == 'const' else text(e, names, 'tna')};")

    go(form.tree, "")
    return lines


def _tna_values(plan: Plan, st, sc: salu_steps.StepCode, code: StepCode) -> None:
    """The values step: its actions set ``values_op``; each value array's table ``run_<array>`` then runs
    that op's RegisterAction (in the stage the array sits in, in every pipeline pass)."""
    codes = plan.codes.ops["values"]
    for c in sc.ops:
        code.actions.append((c.action, [f"meta.values_op = {codes[c.op]};"]))
    for a in sc.arrays:
        outs = salu_steps.outputs_of("values", a)
        for c in sc.ops:
            if any(run.array == a.name for run in c.runs):
                call = f"{_ra_name(a.name, c.op, None)}.execute({', '.join([_INDEX['values']] + outs[1:])})"
                code.actions.append((decision.array_action(a.name, c.op, None), [f"{outs[0]} = {call};"]))
        code.actions.append((f"run_{a.name}_miss", []))
        code.dispatch.append(f"run_{a.name}.apply();")


# -- the program ------------------------------------------------------------------------------------


def steps(plan: Plan) -> list[StepCode]:
    """The P4 of every decision step of ``plan``, for its architecture."""
    arch = plan.arch
    out = []
    caps = SaluCaps.of(plan.target) if arch in ("tna", "t2na") else None
    for st in plan.decision.steps:
        code = StepCode(st.name, st.role)
        table = plan.table(f"dt_{st.name}")
        if table.default_action == f"{st.name}_miss":
            code.actions.append((table.default_action, []))      # never taken: every key combination has an entry
        if arch == "v1model":
            keyed = decision.copy_keyed(st)
            for op in salu_steps.used_ops(st):
                copies = (0, 1) if keyed and decision.touches(st.role, op) else (None,)
                for c in copies:
                    name = decision.step_action(st.name, st.role, op, c)
                    if st.role == "values":
                        code.actions.append((name, [f"meta.values_op = {plan.codes.ops['values'][op]};"]))
                        body = _v1_values(plan, op)
                        if body:
                            code.dispatch.append((plan.codes.ops["values"][op], body))
                    else:
                        code.actions.append((name, _v1_action(plan, st, op, c)))
        else:
            if caps is None:
                raise salu.SaluError(f"target {plan.target.name} gives no stateful ALU limits "
                                     f"(salu_compare_units, salu_output_words)")
            _tna_step(plan, st, caps, code)
        out.append(code)
    return out


def describe(plan: Plan) -> dict[str, Any]:
    """A compact account of the printed steps (tests)."""
    return {c.name: {"actions": [a for a, _ in c.actions], "pre": c.pre, "post": c.post, "fields": c.fields}
            for c in steps(plan)}


__all__ = ["StepCode", "describe", "steps", "text", "width", "ops"]
