"""Parsers in a symbolic run (:mod:`.symexec`): from ``start`` to ``accept``, both sides of every
``select`` taken and merged.  ``extract`` makes a header valid with its fields the packet's (inputs named
``pkt:<place>``) and is recorded as an ``Event``.
"""

from __future__ import annotations

from typing import Any

import z3

from .symstate import VALID, Event, State
from .ir import IRError, Node


class ParserRun:
    """The parser part of :class:`.symexec.Executor` (a mixin)."""

    def parser(self, prs: Node, st: State, pc: Any = None) -> State:
        """Run a parser from ``start`` to ``accept``; ``extract`` makes a header valid with its fields the
        packet's (inputs named by the header's place)."""
        self._locals = {d["name"]: d for d in self.ir.vec(prs.get("parserLocals"))}
        states = {s["name"]: s for s in self.ir.vec(prs["states"])}
        return self._state(states, "start", st, z3.BoolVal(True) if pc is None else pc, 0)

    def _state(self, states: dict[str, Node], name: str, st: State, pc: Any, depth: int) -> State:
        if name in ("accept", "reject"):
            return st
        if depth > 64:
            raise IRError("a parser loop the program check does not unroll")
        s = states[name]
        for c in self.ir.vec(s["components"]):
            c = self.ir.get(c)
            if c["Node_Type"] == "MethodCallStatement":
                mce = self.ir.get(c["methodCall"])
                m = self.ir.get(mce["method"])
                if m["Node_Type"] == "Member" and m["member"] in ("extract", "advance"):
                    if m["member"] == "extract":
                        arg = self.ir.get(self.ir.vec(mce["arguments"])[0]["expression"])
                        base = self.path(arg)
                        for p, b in self.leaf_paths(base, self.ir.type_of(arg)):
                            st.env[p] = z3.BoolVal(True) if p.endswith(VALID) else self.input("pkt:" + p, b)
                        self.events.append(Event("extract", base, pc))
                    continue
            st = self.run(c, st, pc)
        sel = self.ir.get(s.get("selectExpression"))
        if sel is None:
            return st
        if sel["Node_Type"] == "PathExpression":
            return self._state(states, self.ir.pname(sel), st, pc, depth + 1)
        keys = self.values_of(sel["select"], st, pc)
        conds: list[Any] = []
        arms = []
        for case in self.ir.vec(sel["selectCases"]):
            ks = self.ir.get(case["keyset"])
            comps = self.ir.vec(ks["components"]) if ks["Node_Type"] == "ListExpression" else [ks]
            if len(comps) == 1 and len(keys) > 1 and comps[0]["Node_Type"] == "DefaultExpression":
                comps = comps * len(keys)
            m = z3.And([self.keyset(k, v, st, pc) for k, v in zip(comps, keys)])
            arms.append((z3.And([m] + [z3.Not(x) for x in conds]), self.ir.pname(self.ir.get(case["state"]))))
            conds.append(m)
        rest = z3.Not(z3.Or(conds)) if conds else z3.BoolVal(True)
        result = st       # no case matches: the parser stops here (p4gen's parsers always have a default)
        for cond, nxt in reversed(arms):
            sub = self._state(states, nxt, st.copy(), z3.And(pc, cond), depth + 1)
            result = sub if result is st and z3.is_false(z3.simplify(rest)) else self.merge(cond, sub, result)
        return result
