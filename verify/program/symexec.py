"""Symbolic execution of p4c's IR (:mod:`.ir`) into Z3 terms.

One run takes a packet through a parser and a control block with every input symbolic: the packet's
header fields as the parser extracts them, the action data a control plane installs, every register's
contents (a Z3 array per register lane).  Both sides of every branch run, and the states are merged
with ``If`` on the condition, so one run gives each field and each register as one term over the inputs.

What the run records (:class:`Event`): each table applied (its key values at that moment, the action it
chose and the arguments it passed), each register an element writes (which RegisterAction or action
did it), each counter counted.  The checks of :mod:`.checks` ask Z3 about these terms.

The semantics follow the P4_16 specification, with these architecture facts (documented in
docs/verification.md):

* ``Hash<...>(HashAlgorithm_t.IDENTITY).get(list)``: the list's fields concatenated, the first field
  in the most significant bits, cut or zero-extended to the result's width;
* a TNA ``RegisterAction.execute(i)`` runs its ``apply`` on ``value`` = the register's entry ``i``
  (a struct's fields are the entry's lanes), writes ``value`` back and returns the first ``out``
  parameter; an ``out`` parameter no branch assigns is a fresh unknown;
* v1model ``mark_to_drop(std)`` sets ``egress_spec`` to 511 and ``mcast_grp`` to 0; BMv2 user
  metadata starts at 0; TNA metadata starts unknown (the parser's assignments set it);
* a table without const entries is the control plane's: it may run any of its actions with any
  action data (fresh unknowns per application).
"""

from __future__ import annotations

import itertools
from typing import Any

import z3

from .ir import IR, IRError, Node
from .symparse import ParserRun
from .symstate import VALID, Event, State, same_term, fit
from .symtables import TableRun

_ARITH = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
          "BAnd": lambda a, b: a & b, "BOr": lambda a, b: a | b, "BXor": lambda a, b: a ^ b}
_CMP = {"Equ": lambda a, b: a == b, "Neq": lambda a, b: a != b, "Lss": z3.ULT, "Leq": z3.ULE,
        "Grt": z3.UGT, "Geq": z3.UGE}


class Executor(TableRun, ParserRun):
    """Runs parsers and controls of one program (``arch``: ``v1model``, ``tna`` or ``t2na``)."""

    def __init__(self, ir: IR, arch: str, pins: dict[str, Any] | None = None, free=lambda name: False):
        """``pins``: inputs fixed for this run (place -> value; ``cp.<table>`` -> the action the control
        plane's table runs), which folds the branches they decide.  ``free(table)``: the const-entry tables
        whose choice the run leaves free (``sel.<table>``) instead of computing it from their keys."""
        self.ir, self.arch = ir, arch
        self.free = free
        self.pins = dict(pins or {})
        self.inputs: dict[str, Any] = {}
        self.events: list[Event] = []
        self.widths: dict[str, int | None] = {}
        self.reg_arrays: dict[str, dict[str, Any]] = {}       # register instance -> lane -> initial array
        self.reg_names: dict[str, str] = {}                     # register instance -> the program's name
        self._fresh = itertools.count()
        self._locals: dict[str, Node] = {}
        self._applied: dict[str, int] = {}
        self.zeroed = ("meta.", "std.mcast_grp", "std.egress_spec") if arch == "v1model" else \
            ("ig_tm_md.", "ig_dprsr_md.")

    # -- values --------------------------------------------------------------------------------------

    def input(self, path: str, bits: int | None) -> Any:
        """The symbolic value ``path`` holds before the run (created on first use)."""
        v = self.inputs.get(path)
        if v is None:
            if path in self.pins:
                v = self.pins[path]
                v = fit(v, bits) if not isinstance(v, z3.BoolRef) else v
            elif path.endswith(VALID):
                v = z3.BoolVal(False)            # a header no parser state extracted is invalid
            elif path.startswith(self.zeroed):      # the architecture starts these at 0
                v = z3.BoolVal(False) if bits is None else z3.BitVecVal(0, bits)
            else:
                v = z3.Bool(path) if bits is None else z3.BitVec(path, bits)
            self.inputs[path] = v
            self.widths[path] = bits
        return v

    def fresh(self, what: str, bits: int | None) -> Any:
        n = next(self._fresh)
        return z3.Bool(f"{what}!{n}") if bits is None else z3.BitVec(f"{what}!{n}", bits)

    def read(self, st: State, path: str, bits: int | None) -> Any:
        v = st.env.get(path)
        if v is None:
            v = self.input(path, bits)
        return fit(v, bits) if bits is not None and z3.is_bv(v) and v.size() != bits else v

    # -- paths and types -----------------------------------------------------------------------------

    def path(self, e: Node) -> str:
        e = self.ir.get(e)
        t = e["Node_Type"]
        if t == "PathExpression":
            return self.ir.pname(e)
        if t == "Member":
            return f"{self.path(e['expr'])}.{e['member']}"
        if t == "ArrayIndex":
            idx = self.ir.get(e["right"])
            if idx["Node_Type"] != "Constant":
                raise IRError("a header stack indexed by a run-time value")
            return f"{self.path(e['left'])}[{int(idx['value'])}]"
        raise IRError(f"{t} is not a place a value can be stored")

    def width(self, e: Node) -> int | None:
        t = self.ir.type_of(e)
        if t["Node_Type"] == "Type_Bits":
            return int(t["size"])
        if t["Node_Type"] == "Type_Boolean":
            return None
        if t["Node_Type"] in ("Type_Error", "Type_InfInt"):
            return 32 if t["Node_Type"] == "Type_InfInt" else 16
        raise IRError(f"no width for a value of type {t['Node_Type']}")

    def is_composite(self, t: Node) -> bool:
        return t["Node_Type"] in ("Type_Header", "Type_Struct", "Type_SpecializedCanonical")

    def leaf_paths(self, base: str, t: Node) -> list[tuple[str, int | None]]:
        """The scalar places under ``base`` of type ``t`` (a header's fields and its validity)."""
        t = self.ir.resolve_type(t)
        out: list[tuple[str, int | None]] = []
        if t["Node_Type"] == "Type_Header":
            out.append((f"{base}.{VALID}", None))
        if self.is_composite(t):
            for name, ft in self.ir.fields(t):
                out += self.leaf_paths(f"{base}.{name}", ft)
            return out
        return [(base, self.ir.bits(t))]

    # -- expressions ---------------------------------------------------------------------------------

    def ev(self, e: Node, st: State, pc: Any) -> Any:
        e = self.ir.get(e)
        t = e["Node_Type"]
        if t == "Constant":
            bits = self.width(e)
            return z3.BitVecVal(int(e["value"]) % (1 << bits), bits)
        if t == "BoolLiteral":
            return z3.BoolVal(bool(e["value"]))
        if t in ("PathExpression", "Member", "ArrayIndex"):
            if t == "Member":
                base = self.ir.get(e["expr"])
                if base["Node_Type"] == "TypeNameExpression":
                    return self._enum_member(base, e["member"])
            return self.read(st, self.path(e), self.width(e))
        if t == "Slice":
            hi, lo = (int(self.ir.get(e[k])["value"]) for k in ("e1", "e2"))
            return z3.Extract(hi, lo, self.ev(e["e0"], st, pc))
        if t == "Concat":
            return z3.Concat(self.ev(e["left"], st, pc), self.ev(e["right"], st, pc))
        if t == "Cast":
            return fit(self.ev(e["expr"], st, pc), self.width(e))
        if t in _ARITH or t in ("Shl", "Shr", "AddSat", "SubSat"):
            a, b = self.ev(e["left"], st, pc), self.ev(e["right"], st, pc)
            bits = self.width(e)
            a = fit(a, bits)
            if t == "Shl":
                return a << fit(b, bits)
            if t == "Shr":
                return z3.LShR(a, fit(b, bits))
            b = fit(b, bits)
            if t == "AddSat":
                return z3.If(z3.ULT(a + b, a), z3.BitVecVal((1 << bits) - 1, bits), a + b)
            if t == "SubSat":
                return z3.If(z3.UGT(a, b), a - b, z3.BitVecVal(0, bits))
            return _ARITH[t](a, b)
        if t in _CMP:
            a, b = self.ev(e["left"], st, pc), self.ev(e["right"], st, pc)
            if z3.is_bv(a) and z3.is_bv(b) and a.size() != b.size():
                b = fit(b, a.size())
            return _CMP[t](a, b)
        if t == "LAnd":
            return z3.And(self.ev(e["left"], st, pc), self.ev(e["right"], st, pc))
        if t == "LOr":
            return z3.Or(self.ev(e["left"], st, pc), self.ev(e["right"], st, pc))
        if t == "LNot":
            return z3.Not(self.ev(e["expr"], st, pc))
        if t == "Cmpl":
            return ~self.ev(e["expr"], st, pc)
        if t == "Neg":
            return -self.ev(e["expr"], st, pc)
        if t == "Mux":
            c = self.ev(e["e0"], st, pc)
            a, b = self.ev(e["e1"], st, pc), self.ev(e["e2"], st, pc)
            if z3.is_bv(a) and z3.is_bv(b) and a.size() != b.size():
                b = fit(b, a.size())
            return z3.If(c, a, b)
        if t == "MethodCallExpression":
            return self.call(e, st, pc)
        raise IRError(f"the program check does not know the expression {t}")

    def _enum_member(self, base: Node, member: str) -> Any:
        tname = self.ir.pname(self.ir.get(base["typeName"]))
        decl = self.ir.type_decl(tname)
        names = [m["name"] for m in self.ir.vec(decl["members"])]
        return z3.BitVecVal(names.index(member), 16)

    def values_of(self, e: Node, st: State, pc: Any) -> list[Any]:
        """The scalar values of a list, a struct expression or a header/struct-typed place, in order."""
        e = self.ir.get(e)
        t = e["Node_Type"]
        if t == "ListExpression":
            return [v for c in self.ir.vec(e["components"]) for v in self.values_of(c, st, pc)]
        if t == "StructExpression":
            return [v for c in self.ir.vec(e["components"]) for v in self.values_of(c["expression"], st, pc)]
        ty = self.ir.type_of(e)
        if ty["Node_Type"] == "Type_Bits" and int(ty["size"]) == 0:
            return []                      # bit<0>: no bits to contribute
        if self.is_composite(ty):
            return [self.read(st, p, b) for p, b in self.leaf_paths(self.path(e), ty) if not p.endswith(VALID)]
        return [self.ev(e, st, pc)]

    # -- statements ----------------------------------------------------------------------------------

    def run(self, stmt: Node | None, st: State, pc: Any) -> State:
        stmt = self.ir.get(stmt)
        if stmt is None:
            return st
        t = stmt["Node_Type"]
        if t == "BlockStatement":
            for s in self.ir.vec(stmt["components"]):
                st = self.run(s, st, pc)
            return st
        if t == "EmptyStatement":
            return st
        if t == "Declaration_Variable":
            ty = self.ir.resolve_type(stmt["type"])
            if stmt.get("initializer") is not None:
                return self.assign(stmt["name"], ty, stmt["initializer"], st, pc)
            for p, b in self.leaf_paths(stmt["name"], ty):
                st.env[p] = self.fresh(f"uninit.{p}", b)
            return st
        if t == "AssignmentStatement":
            return self.assign(self.path(stmt["left"]), self.ir.type_of(self.ir.get(stmt["left"])), stmt["right"],
                               st, pc)
        if t == "MethodCallStatement":
            self.call(self.ir.get(stmt["methodCall"]), st, pc)
            return st
        if t == "IfStatement":
            c = self.ev(stmt["condition"], st, pc)
            return self.branch(c, stmt["ifTrue"], stmt.get("ifFalse"), st, pc)
        if t == "SwitchStatement":
            return self.switch(stmt, st, pc)
        raise IRError(f"the program check does not know the statement {t}")

    def assign(self, left: str, ty: Node, right: Node, st: State, pc: Any) -> State:
        ty = self.ir.resolve_type(ty)
        if self.is_composite(ty):
            r = self.ir.get(right)
            src = self.path(r)
            for p, b in self.leaf_paths(left, ty):
                st.env[p] = self.read(st, src + p[len(left):], b)
            return st
        v = self.ev(right, st, pc)
        st.env[left] = fit(v, self.ir.bits(ty)) if z3.is_bv(v) or isinstance(v, z3.BoolRef) else v
        return st

    def branch(self, c: Any, yes: Node | None, no: Node | None, st: State, pc: Any) -> State:
        c = z3.simplify(c)
        if z3.is_true(c):
            return self.run(yes, st, pc)
        if z3.is_false(c):
            return self.run(no, st, pc)
        a = self.run(yes, st.copy(), z3.And(pc, c))
        b = self.run(no, st.copy(), z3.And(pc, z3.Not(c)))
        return self.merge(c, a, b)

    def switch(self, stmt: Node, st: State, pc: Any) -> State:
        expr = self.ir.get(stmt["expression"])
        if not (expr["Node_Type"] == "Member" and expr["member"] == "action_run"):
            raise IRError("a switch on anything but a table's action_run")
        st, info = self.apply_table(self.ir.get(expr["expr"]), st, pc)
        choice, index = info["choice"], info["index"]
        arms: list[tuple[Any, Node]] = []
        labels: list[Any] = []
        covered: list[Any] = []
        for case in self.ir.vec(stmt["cases"]):
            label = self.ir.get(case["label"])
            if label["Node_Type"] == "DefaultExpression":
                labels.append(z3.Not(z3.Or(covered)) if covered else z3.BoolVal(True))
            else:
                cond = choice == index[self.ir.pname(label)]
                labels.append(cond)
                covered.append(cond)
            body = self.ir.get(case.get("statement"))
            if body is not None:
                arms.append((z3.Or(labels), body))
                labels = []
        out = st
        for cond, body in reversed(arms):
            out = self.merge(cond, self.run(body, st.copy(), z3.And(pc, cond)), out)
        return out

    # -- calls ---------------------------------------------------------------------------------------

    def call(self, mce: Node, st: State, pc: Any) -> Any:
        m = self.ir.get(mce["method"])
        args = [self.ir.get(a)["expression"] for a in self.ir.vec(mce["arguments"])]
        if m["Node_Type"] == "PathExpression":
            name = self.ir.pname(m)
            if name == "mark_to_drop":
                std = self.path(args[0])
                st.env[f"{std}.egress_spec"] = z3.BitVecVal(511, 9)
                st.env[f"{std}.mcast_grp"] = z3.BitVecVal(0, 16)
                return None
            if name in ("update_checksum", "verify_checksum", "update_checksum_with_payload",
                        "verify_checksum_with_payload"):
                return None
            action = self._locals.get(name)
            if action is not None and action["Node_Type"] == "P4Action":
                self.run_action(action, [self.ev(a, st, pc) for a in args], st, pc)
                return None
            raise IRError(f"the program check does not know the call {name}()")
        if m["Node_Type"] != "Member":
            raise IRError(f"a call through {m['Node_Type']}")
        method, target = m["member"], self.ir.get(m["expr"])
        if target["Node_Type"] == "PathExpression" and self.ir.pname(target) in self._locals:
            decl = self._locals[self.ir.pname(target)]
            if decl["Node_Type"] == "P4Table" and method == "apply":
                st2, info = self.apply_table(mce, st, pc)
                st.env, st.regs = st2.env, st2.regs
                return None
            if decl["Node_Type"] == "Declaration_Instance":
                return self.extern_call(decl, method, args, st, pc, mce)
        if method in ("isValid", "setValid", "setInvalid"):
            p = f"{self.path(target)}.{VALID}"
            if method == "isValid":
                return self.read(st, p, None)
            st.env[p] = z3.BoolVal(method == "setValid")
            return None
        raise IRError(f"the program check does not know the method {method}()")

    def extern_call(self, decl: Node, method: str, args: list[Node], st: State, pc: Any, mce: Node) -> Any:
        kind = self.extern_kind(decl)
        name = self.ir.user_name(decl)
        if kind in ("Counter", "counter", "DirectCounter") and method == "count":
            self.events.append(Event("count", name, pc, {"index": self.ev(args[0], st, pc) if args else None}))
            return None
        if kind == "Hash" and method == "get":
            vals = self.values_of(args[0], st, pc)
            v = vals[0] if len(vals) == 1 else z3.Concat(*[fit(x, x.size() if z3.is_bv(x) else 1) for x in vals])
            return fit(v, self.width(mce))
        if kind == "register" and method in ("read", "write"):
            arr = self.register(st, decl)
            if method == "read":
                dest = self.path(args[0])
                idx = fit(self.ev(args[1], st, pc), 32)
                st.env[dest] = arr[""][idx]
                return None
            idx = fit(self.ev(args[0], st, pc), 32)
            v = self.ev(args[1], st, pc)
            st.regs[decl["name"]] = {"": z3.Store(arr[""], idx, fit(v, arr[""].range().size()))}
            self.events.append(Event("write", self.reg_names[decl["name"]], pc, {"element": self._element, "index": idx}))
            return None
        if kind == "RegisterAction" and method == "execute":
            # T2NA: execute(index, out rv2, ...) also returns the further out parameters into its arguments
            return self.execute(decl, fit(self.ev(args[0], st, pc), 32), st, pc, [self.path(a) for a in args[1:]])
        if kind == "Checksum":
            return self.fresh(f"{name}.{method}", self.width(mce)) if method in ("update", "get") else None
        raise IRError(f"the program check does not know {kind}.{method}()")

    def extern_kind(self, decl: Node) -> str:
        t = self.ir.get(decl["type"])
        if t["Node_Type"] in ("Type_Specialized", "Type_SpecializedCanonical"):
            t = self.ir.get(t["baseType"])
        if t["Node_Type"] == "Type_Name":
            return self.ir.pname(t)
        return t.get("name", t["Node_Type"])

    def register(self, st: State, decl: Node) -> dict[str, Any]:
        """The current arrays (lane -> array) of register instance ``decl``."""
        key = decl["name"]
        if key not in st.regs:
            if key not in self.reg_arrays:
                t = self.ir.get(decl["type"])
                args = self.ir.vec(t["arguments"])
                vt = self.ir.resolve_type(args[0])
                name = self.ir.user_name(decl)
                self.reg_names[key] = name
                lanes = [("", self.ir.bits(vt))] if vt["Node_Type"] == "Type_Bits" else \
                    [(n, self.ir.bits(ft)) for n, ft in self.ir.fields(vt)]
                self.reg_arrays[key] = {ln: z3.Array(f"reg.{name}.{ln}" if ln else f"reg.{name}",
                                                     z3.BitVecSort(32), z3.BitVecSort(b)) for ln, b in lanes}
            st.regs[key] = dict(self.reg_arrays[key])
        return st.regs[key]

    def execute(self, ra: Node, idx: Any, st: State, pc: Any, more: list[str] = ()) -> Any:
        """A RegisterAction's ``execute(idx)``: its apply body on the register's entry ``idx``."""
        reg_path = self.ir.get(self.ir.vec(ra["arguments"])[0]["expression"])
        reg = self._locals[self.ir.pname(reg_path)]
        arrays = self.register(st, reg)
        fn = next(c for c in self.ir.vec(self.ir.get(ra["initializer"])["components"])
                  if c["Node_Type"] == "Function" and c["name"] == "apply")
        params = self.ir.vec(self.ir.get(self.ir.get(fn["type"])["parameters"])["parameters"])
        inner = State(dict(st.env), st.regs)
        vname = params[0]["name"]
        for ln, arr in arrays.items():
            inner.env[f"{vname}.{ln}" if ln else vname] = arr[idx]
        outs = []
        for p in params[1:]:
            b = self.ir.bits(self.ir.resolve_type(p["type"]))
            inner.env[p["name"]] = self.fresh(f"{self.ir.user_name(ra)}.{p['name']}", b)
            outs.append(p["name"])
        saved = self._element
        self._element = self.ir.user_name(ra)
        inner = self.run(fn["body"], inner, pc)
        self._element = saved
        new = {ln: z3.Store(arr, idx, inner.env[f"{vname}.{ln}" if ln else vname]) for ln, arr in arrays.items()}
        st.regs[reg["name"]] = new
        self.events.append(Event("write", self.reg_names[reg["name"]], pc, {"element": self.ir.user_name(ra),
                                                                           "index": idx}))
        for place, name in zip(more, outs[1:]):
            st.env[place] = inner.env[name]
        return inner.env[outs[0]] if outs else None

    _element = "apply"

    def element_name(self, action: Node) -> str:
        """How a refusal names an action: its own name, or for the statements of an ``apply`` block that
        p4c's midend moved into a hidden action, the block and the line they start on."""
        if self.ir.annotation(action, "hidden") is None:
            return self.ir.user_name(action)
        body = self.ir.vec(self.ir.get(action["body"])["components"])
        line = next((self.ir.line(b) for b in body if self.ir.line(b)), None)
        return "the ingress apply block" + (f" (program.p4 line {line})" if line else "")

    def run_action(self, action: Node, args: list[Any], st: State, pc: Any) -> State:
        params = self.ir.vec(self.ir.get(action["parameters"])["parameters"])
        saved_env = {p["name"]: st.env.get(p["name"]) for p in params}
        for p, a in zip(params, args):
            st.env[p["name"]] = fit(a, self.ir.bits(self.ir.resolve_type(p["type"])))
        saved = self._element
        self._element = self.element_name(action)
        out = self.run(action["body"], st, pc)
        self._element = saved
        for k, v in saved_env.items():
            if v is None:
                out.env.pop(k, None)
            else:
                out.env[k] = v
        return out

    # -- blocks --------------------------------------------------------------------------------------

    def control(self, ctl: Node, st: State, pc: Any = None) -> State:
        """Run a control block's ``apply`` on ``st``."""
        self._locals = {d["name"]: d for d in self.ir.vec(ctl["controlLocals"])}
        return self.run(ctl["body"], st, z3.BoolVal(True) if pc is None else pc)

    def merge(self, c: Any, a: State, b: State) -> State:
        """The state that is ``a`` where ``c`` holds and ``b`` elsewhere."""
        return merge(c, a, b, self)


def merge(c: Any, a: State, b: State, ex: "Executor") -> State:
    """The state that is ``a`` where ``c`` holds and ``b`` elsewhere (a place one side never set holds
    its value from before the run)."""
    out = State()
    for k in set(a.env) | set(b.env):
        x, y = a.env.get(k), b.env.get(k)
        if x is None or y is None:
            v = x if y is None else y
            inp = ex.input(k, v.size() if z3.is_bv(v) else None)
            x, y = (x, inp) if y is None else (inp, y)
        if same_term(x, y):
            out.env[k] = x
        else:
            if z3.is_bv(x) and z3.is_bv(y) and x.size() != y.size():
                y = fit(y, x.size())
            out.env[k] = z3.If(c, x, y)
    for k in set(a.regs) | set(b.regs):
        x, y = a.regs.get(k), b.regs.get(k)
        if x is None or y is None:
            init = {ln: arr for ln, arr in ex.reg_arrays[k].items()}
            x, y = (x, init) if y is None else (init, y)
        out.regs[k] = {ln: (x[ln] if same_term(x[ln], y[ln]) else z3.If(c, x[ln], y[ln])) for ln in x}
    return out
