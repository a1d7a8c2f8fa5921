"""Tables in a symbolic run (:mod:`.symexec`): their keys, const entries and control-plane choices.

A table with const entries runs, for each entry in order, its action where the key values first match
it (else its default action); a decision table the run leaves free (``free``) runs any of its actions
with the arguments of one of its entries; a table without const entries is the control plane's: it
runs any of its actions with any action data.  Each application is recorded as an ``Event``.
"""

from __future__ import annotations

from typing import Any

import z3

from .symstate import Event, State, fit
from .ir import Node


class TableRun:
    """The table part of :class:`.symexec.Executor` (a mixin: it uses the executor's ``ir``, ``ev``, ``run_action``
    and ``merge``)."""

    def table_parts(self, table: Node) -> dict[str, Any]:
        props = {p["name"]: p for p in self.ir.vec(self.ir.get(table["properties"])["properties"])}
        keys = []
        if "key" in props:
            for k in self.ir.vec(self.ir.get(props["key"]["value"])["keyElements"]):
                ann = self.ir.annotation(k, "name")
                kname = ann[0]["value"] if ann else self.path(k["expression"])
                keys.append((kname, self.ir.get(k["expression"]), self.ir.pname(self.ir.get(k["matchType"]))))
        actions = []
        for a in self.ir.vec(self.ir.get(props["actions"]["value"])["actionList"]):
            mce = self.ir.get(a["expression"])
            path = self.ir.get(mce["method"]) if mce["Node_Type"] == "MethodCallExpression" else mce
            actions.append(self.ir.pname(path))
        entries = []
        if "entries" in props:
            for en in self.ir.vec(self.ir.get(props["entries"]["value"])["entries"]):
                ks = self.ir.get(en["keys"])
                comps = self.ir.vec(ks["components"]) if ks["Node_Type"] == "ListExpression" else [ks]
                act = self.ir.get(en["action"])
                entries.append((comps, self.ir.pname(self.ir.get(act["method"])),
                                [self.ir.get(a)["expression"] for a in self.ir.vec(act["arguments"])],
                                en.get("priority")))
        default = None
        if "default_action" in props:
            dv = self.ir.get(self.ir.get(props["default_action"]["value"])["expression"])
            default = (self.ir.pname(self.ir.get(dv["method"])),
                       [self.ir.get(a)["expression"] for a in self.ir.vec(dv["arguments"])])
        return {"keys": keys, "actions": actions, "entries": entries, "default": default,
                "const": "entries" in props}

    def keyset(self, ks: Node, value: Any, st: State, pc: Any) -> Any:
        ks = self.ir.get(ks)
        t = ks["Node_Type"]
        if t == "DefaultExpression":
            return z3.BoolVal(True)
        if t == "Mask":
            v, m = fit(self.ev(ks["left"], st, pc), value.size()), fit(self.ev(ks["right"], st, pc), value.size())
            return value & m == v & m
        if t == "Range":
            lo, hi = (fit(self.ev(ks[k], st, pc), value.size()) for k in ("left", "right"))
            return z3.And(z3.ULE(lo, value), z3.ULE(value, hi))
        v = self.ev(ks, st, pc)
        return value == (fit(v, value.size()) if z3.is_bv(value) else v)

    def apply_table(self, mce: Node, st: State, pc: Any) -> tuple[State, dict[str, Any]]:
        target = self.ir.get(self.ir.get(mce["method"])["expr"])
        table = self._locals[self.ir.pname(target)]
        name = self.ir.user_name(table)
        parts = self.table_parts(table)
        index = {a: i for i, a in enumerate(parts["actions"])}
        keyvals = [(kn, self.ev(expr, st, pc), mt) for kn, expr, mt in parts["keys"]]
        arms: list[tuple[Any, str, list[Any]]] = []       # (condition, action, argument values)
        if self.free(name) and parts["const"]:
            # a decision table: the choice is free (one arm per distinct action and arguments); that its
            # keys and entries choose as the plan does is checked apart
            combos: dict[tuple, tuple[str, list[Any]]] = {}
            for _comps, act, args, _prio in parts["entries"] + ([(None,) + tuple(parts["default"]) + (None,)]
                                                                if parts["default"] else []):
                vals = [self.ev(a, st, pc) for a in args]
                combos.setdefault((act, tuple(str(v) for v in vals)), (act, vals))
            pick = z3.Int(f"sel.{name}")
            for k, (act, vals) in enumerate(combos.values()):
                arms.append((pick == k, act, vals))
            arms[-1] = (z3.And(pick >= len(arms) - 1), arms[-1][1], arms[-1][2])
            hit = z3.BoolVal(True)
        elif parts["const"] or not parts["keys"]:
            earlier: list[Any] = []
            for comps, act, args, _prio in parts["entries"]:
                m = z3.And([self.keyset(c, v, st, pc) for c, (_k, v, _mt) in zip(comps, keyvals)])
                arms.append((z3.And([m] + [z3.Not(e) for e in earlier]), act, [self.ev(a, st, pc) for a in args]))
                earlier.append(m)
            if parts["default"] is not None:
                act, args = parts["default"]
                arms.append((z3.Not(z3.Or(earlier)) if earlier else z3.BoolVal(True), act,
                             [self.ev(a, st, pc) for a in args]))
            hit = z3.Or(earlier) if earlier else z3.BoolVal(False)
        else:
            n = self._applied[name] = self._applied.get(name, 0) + 1
            pinned = self.pins.get(f"cp.{name}")
            pick = z3.IntVal(next(i for a, i in index.items() if self.ir.user_name(self._locals[a]) == pinned)) \
                if pinned is not None else z3.Int(f"cp.{name}!{n}")
            for act in parts["actions"]:
                decl = self._locals[act]
                params = self.ir.vec(self.ir.get(decl["parameters"])["parameters"])
                args = [z3.BitVec(f"cp.{name}.{self.ir.user_name(decl)}.{self.ir.user_name(p)}" + ("" if n == 1 else f"!{n}"),
                                  self.ir.bits(self.ir.resolve_type(p["type"]))) for p in params]
                arms.append((pick == index[act], act, args))
            hit = pick != index[parts["default"][0]] if parts["default"] else z3.BoolVal(True)
        choice = z3.IntVal(index[arms[-1][1]])
        for cond, act, _a in reversed(arms[:-1]):
            choice = z3.If(cond, index[act], choice)
        out = None
        for cond, act, args in reversed(arms):          # first match wins: the arms exclude each other
            cond = z3.simplify(cond)
            if z3.is_false(cond):
                continue
            sub = self.run_action(self._locals[act], args, st.copy(), z3.And(pc, cond))
            out = sub if out is None or z3.is_true(cond) else self.merge(cond, sub, out)
        info = {"choice": z3.simplify(choice), "index": index, "hit": hit, "keys": keyvals,
                "arms": [(c, self.ir.user_name(self._locals[a]), args) for c, a, args in arms],
                "actions": {a: self.ir.user_name(self._locals[a]) for a in parts["actions"]},
                "params": {self.ir.user_name(self._locals[a]): [self.ir.user_name(p) for p in self.ir.vec(
                    self.ir.get(self._locals[a]["parameters"])["parameters"])] for a in parts["actions"]}}
        self.events.append(Event("table", name, pc, info))
        return out if out is not None else st, info
