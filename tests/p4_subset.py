"""Symbolic execution of the register-operation code of a generated P4 program, over Z3 bit-vectors.

Enough of P4_16 for the statements p4gen's templates put around registers: declarations of ``bit<N>``
locals, assignments, ``if``/``else``, blocks, ``reg.read``/``reg.write`` (v1model), ``X.execute(i)`` of
a TNA ``RegisterAction`` (whose ``apply`` body runs on the register cell), table ``apply()`` (ignored),
``isValid()`` (true); expressions with P4 precedence, ``++``, slices, casts and ``?:``.  A condition
that is not constant runs both branches and merges every variable with ``If``.

The program's header, metadata and pair structs, its ``const`` declarations and its registers are
read from the same text.  Every register is one cell (the index is not modelled: each operation reads
and writes one entry).  A field never written reads as a free symbol named after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import z3

_TOKEN = re.compile(r"\s*(?:(\d+w\d+|0x[0-9a-fA-F]+|\d+)|([A-Za-z_]\w*)|(\+\+|&&|\|\||==|!=|<=|>=|<<|>>|[{}()\[\];,=<>+\-&|~!?:.]))")


def tokens(text: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", text)
    out, pos = [], 0
    while True:
        m = _TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip():
                raise SyntaxError(f"cannot read P4 at {text[pos:pos + 40]!r}")
            return out
        out.append(m.group(m.lastindex))
        pos = m.end()


def matching_brace(text: str, start: int) -> int:
    """Index just past the ``}`` that closes the ``{`` at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise SyntaxError("unbalanced braces")


@dataclass
class RegisterAction:
    register: str
    value_type: str          # a struct name or "bit<N>"
    rv_bits: int
    body: list[str]          # tokens of the apply block


@dataclass
class Program:
    """What the interpreter needs of a rendered program."""

    text: str
    widths: dict[str, int] = field(default_factory=dict)          # "hdr.agg.tsi" / "meta.copy" -> bits
    structs: dict[str, dict[str, int]] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)
    registers: dict[str, tuple[str, ...]] = field(default_factory=dict)   # name -> ("bit", N) or (struct,)
    actions: dict[str, RegisterAction] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "Program":
        p = cls(text)
        for kind, name, body in re.findall(r"^(header|struct) (\w+) \{(.*?)^\}", text, re.M | re.S):
            p.structs[name] = {f: int(b) for b, f in re.findall(r"bit<(\d+)> (\w+);", body)}
            for typ, inst in re.findall(r"^\s+(\w+) (\w+);", body, re.M):
                if name == "headers_t":
                    p.structs.setdefault("_hdr", {})[inst] = typ
        for inst, typ in p.structs.get("_hdr", {}).items():
            for f, b in p.structs[typ].items():
                p.widths[f"hdr.{inst}.{f}"] = b
        for f, b in p.structs["metadata_t"].items():
            p.widths[f"meta.{f}"] = b
        for b, name, v in re.findall(r"^const bit<(\d+)> (\w+) = ([^;]+);", text, re.M):
            p.consts[name] = z3.BitVecVal(int(v, 0), int(b))
        for t, name in re.findall(r"^\s+Register<(bit<\d+>|\w+), bit<\d+>>\(\d+\) (\w+);", text, re.M):
            p.registers[name] = ("bit", int(t[4:-1])) if t.startswith("bit<") else (t,)
        for b, name in re.findall(r"^\s+register<bit<(\d+)>>\(\d+\) (\w+);", text, re.M):
            p.registers[name] = ("bit", int(b))
        for m in re.finditer(r"RegisterAction<(bit<\d+>|\w+), bit<\d+>, bit<(\d+)>>\((\w+)\) (\w+) = \{\s*"
                             r"void apply\(inout \S+ value, out bit<\d+> rv\) \{", text):
            end = matching_brace(text, m.end() - 1)
            p.actions[m.group(4)] = RegisterAction(m.group(3), m.group(1), int(m.group(2)),
                                                   tokens(text[m.end() - 1:end]))
        return p


def _bv(v, bits: int):
    return z3.BitVecVal(v, bits) if isinstance(v, int) else v


class Interpreter:
    """Runs statement tokens of ``program`` on ``state`` (name -> Z3 value; register cells are
    ``reg:NAME`` or ``reg:NAME.FIELD``)."""

    def __init__(self, program: Program, state: dict[str, Any]):
        self.p = program
        self.state = state
        self.types: dict[str, int] = dict(program.widths)
        self.executed: set[str] = set()

    # -- values ---------------------------------------------------------------------------------
    def read(self, name: str):
        if name in self.state:
            return self.state[name]
        if name in self.p.consts:
            return self.p.consts[name]
        if name in self.types:
            v = self.state[name] = z3.BitVec(name, self.types[name])
            return v
        raise NameError(f"unknown name {name!r}")

    def write(self, name: str, v) -> None:
        if name not in self.types:
            raise NameError(f"assignment to unknown {name!r}")
        self.state[name] = _bv(v, self.types[name])

    # -- statements -----------------------------------------------------------------------------
    def run(self, toks: list[str]) -> None:
        self.t, self.i = toks, 0
        while self.i < len(self.t):
            self.stmt()

    def peek(self, k: int = 0) -> str | None:
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def take(self, want: str | None = None) -> str:
        tok = self.t[self.i]
        if want is not None and tok != want:
            raise SyntaxError(f"expected {want!r}, got {tok!r} near {' '.join(self.t[self.i:self.i + 12])}")
        self.i += 1
        return tok

    def stmt(self) -> None:
        tok = self.peek()
        if tok == "{":
            self.take("{")
            while self.peek() != "}":
                self.stmt()
            self.take("}")
        elif tok == "if":
            self.if_stmt()
        elif tok == "bit":
            bits = self.bit_type()
            name = self.take()
            self.types[name] = bits
            if self.peek() == "=":
                self.take("=")
                self.write(name, self.expr())
            else:
                self.state[name] = z3.BitVec(f"uninit.{name}", bits)
            self.take(";")
        else:
            target = self.dotted()
            if self.peek() == "=":
                self.take("=")
                self.write(target, self.expr())
            else:
                self.call(target)
            self.take(";")

    def bit_type(self) -> int:
        self.take("bit")
        self.take("<")
        bits = int(self.take())
        self.take(">")
        return bits

    def dotted(self) -> str:
        name = self.take()
        while self.peek() == ".":
            self.take(".")
            name += "." + self.take()
        return name

    def if_stmt(self) -> None:
        self.take("if")
        self.take("(")
        cond = z3.simplify(self.expr())
        self.take(")")
        if z3.is_true(cond) or z3.is_false(cond):
            taken = z3.is_true(cond)
            (self.stmt if taken else self.skip_branch)()
            if self.peek() == "else":
                self.take("else")
                (self.skip_branch if taken else self.stmt)()
            return
        before = dict(self.state)
        self.stmt()
        then = self.state
        self.state = dict(before)
        if self.peek() == "else":
            self.take("else")
            self.stmt()
        other = self.state
        merged = {}
        for k in set(then) | set(other):
            if k in then and k in other:
                merged[k] = then[k] if then[k] is other[k] else z3.If(cond, then[k], other[k])
            elif k in before or k.startswith(("hdr.", "meta.", "reg:")):
                a = then.get(k, before.get(k))
                b = other.get(k, before.get(k))
                if a is None or b is None:          # a field first read (or written) in one branch only
                    a = self.read(k) if a is None else a
                    b = self.read(k) if b is None else b
                merged[k] = z3.If(cond, a, b)
        self.state = merged

    def skip_branch(self) -> None:
        if self.peek() == "{":
            end, depth = self.i, 0
            while True:
                tok = self.t[end]
                depth += tok == "{"
                depth -= tok == "}"
                end += 1
                if depth == 0:
                    break
            self.i = end
        elif self.peek() == "if":
            self.take("if")
            self.take("(")
            depth = 1
            while depth:
                tok = self.take()
                depth += (tok == "(") - (tok == ")")
            self.skip_branch()
            if self.peek() == "else":
                self.take("else")
                self.skip_branch()
        else:
            while self.take() != ";":
                pass

    def call(self, target: str) -> None:
        obj, _, method = target.rpartition(".")
        args = self.arg_tokens()
        if method in ("apply", "setValid", "setInvalid"):
            return
        if method == "read":            # v1model: reg.read(local, index)
            self.write("".join(args[0]), self.read(f"reg:{obj}"))
        elif method == "write":         # v1model: reg.write(index, value)
            self.state[f"reg:{obj}"] = _bv(self.evaluate(args[1]), self.p.registers[obj][1])
        elif method == "execute":
            self.execute(obj)
        else:
            raise SyntaxError(f"unsupported call {target}()")

    def arg_tokens(self) -> list[list[str]]:
        """The tokens of each argument of a call."""
        self.take("(")
        out: list[list[str]] = [[]]
        depth = 0
        while True:
            tok = self.take()
            if tok == ")" and depth == 0:
                return [a for a in out if a]
            depth += (tok == "(") - (tok == ")")
            if tok == "," and depth == 0:
                out.append([])
            else:
                out[-1].append(tok)

    def evaluate(self, toks: list[str]):
        saved = self.t, self.i
        self.t, self.i = toks, 0
        v = self.expr()
        self.t, self.i = saved
        return v

    def execute(self, action: str):
        """Run a TNA RegisterAction on its register's cell; returns ``rv``."""
        ra = self.p.actions[action]
        self.executed.add(action)
        saved = self.t, self.i
        struct = self.p.structs.get(ra.value_type)
        if struct:
            for f, b in struct.items():
                self.types[f"value.{f}"] = b
                self.state[f"value.{f}"] = self.read(f"reg:{ra.register}.{f}")
        else:
            self.types["value"] = int(ra.value_type[4:-1])
            self.state["value"] = self.read(f"reg:{ra.register}")
        self.types["rv"] = ra.rv_bits
        self.state["rv"] = z3.BitVec(f"uninit.rv.{action}", ra.rv_bits)
        self.run(ra.body)
        if struct:
            for f in struct:
                self.state[f"reg:{ra.register}.{f}"] = self.state.pop(f"value.{f}")
        else:
            self.state[f"reg:{ra.register}"] = self.state.pop("value")
        self.t, self.i = saved
        return self.state.pop("rv")

    # -- expressions (P4_16 precedence) -------------------------------------------------------------
    def expr(self):
        c = self.binary(0)
        if self.peek() == "?":
            self.take("?")
            a = self.expr()
            self.take(":")
            b = self.expr()
            return z3.If(c, a, b)
        return c

    _LEVELS = [("||",), ("&&",), ("|",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("+", "-", "++")]

    def binary(self, level: int):
        if level == len(self._LEVELS):
            return self.unary()
        a = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()
            b = self.binary(level + 1)
            a = self.apply(op, a, b)
        return a

    @staticmethod
    def apply(op: str, a, b):
        if op == "++":
            return z3.Concat(a, b)
        if isinstance(a, int) and not isinstance(b, int):
            a = z3.BitVecVal(a, b.size())
        if isinstance(b, int) and not isinstance(a, int):
            b = z3.BitVecVal(b, a.size())
        return {"||": lambda: z3.Or(a, b), "&&": lambda: z3.And(a, b), "|": lambda: a | b, "&": lambda: a & b,
                "==": lambda: a == b, "!=": lambda: a != b, "<": lambda: z3.ULT(a, b), ">": lambda: z3.UGT(a, b),
                "<=": lambda: z3.ULE(a, b), ">=": lambda: z3.UGE(a, b), "+": lambda: a + b,
                "-": lambda: a - b}[op]()

    def unary(self):
        tok = self.peek()
        if tok == "~":
            self.take()
            return ~self.unary()
        if tok == "!":
            self.take()
            return z3.Not(self.unary())
        if tok == "(" and self.peek(1) == "bit":
            self.take("(")
            bits = self.bit_type()
            self.take(")")
            v = self.unary()
            if isinstance(v, int):
                return z3.BitVecVal(v, bits)
            n = v.size()
            return z3.ZeroExt(bits - n, v) if bits >= n else z3.Extract(bits - 1, 0, v)
        return self.postfix()

    def postfix(self):
        tok = self.take()
        if tok == "(":
            v = self.expr()
            self.take(")")
        elif re.fullmatch(r"\d+w\d+", tok):
            bits, val = tok.split("w")
            v = z3.BitVecVal(int(val), int(bits))
        elif re.fullmatch(r"0x[0-9a-fA-F]+|\d+", tok):
            v = int(tok, 0)
        else:
            name = tok
            while self.peek() == "." and self.peek(1) is not None:
                self.take(".")
                name += "." + self.take()
            if self.peek() == "(":
                obj, _, method = name.rpartition(".")
                self.arg_tokens()
                if method == "isValid":
                    return z3.BoolVal(True)
                if method == "execute":
                    return self.execute(obj)
                raise SyntaxError(f"unsupported call {name}() in an expression")
            v = self.read(name)
        while self.peek() == "[":
            self.take("[")
            hi = int(self.take())
            self.take(":")
            lo = int(self.take())
            self.take("]")
            v = z3.Extract(hi, lo, v)
        return v
