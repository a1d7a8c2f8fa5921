"""How a register operation of ``p4gen.ops`` runs on a Tofino stateful ALU: its lowering, as data.

An op's results, as graphs (:mod:`p4gen.ops.graph`), become one RegisterAction and the match-action (MAU)
work around it:

* **before** (``hoisted``): sub-expressions that read only packet fields or metadata (the chunk window's
  floor, ``tsi |-| bound``) are computed into metadata first, so the ALU compares the register with
  one field;
* **in the stateful ALU**: the comparisons the results branch on (``atoms``, one compare unit each),
  the new value of each register lane (``updates``) and what the action returns (``outputs``);
* **after** (``results``): what the packet or the decision carries on, computed from the returned
  words;
* **in a harvest pass** (``harvest``): a register pair whose outputs are both lanes as the action leaves
  them, on a stateful ALU that returns fewer words than that (Tofino 1: one), returns the last lanes in
  the pass that updates it and the others in one more pass, whose RegisterAction reads them and changes
  nothing (p4app-switchML's ``sum_read1`` / ``read0``).  When an output needs more comparisons than the ALU has, or a comparison the ALU cannot make
  (a bit test against a per-worker mask), the ALU returns the register's old value and the output is
  computed from it in the match-action stages that follow (:func:`mau_form` says how).

The rules are the Tofino back end's (p4c ``backends/tofino/bf-p4c/mau/stateful_alu.cpp`` and the
assembler ``bf-asm/salu_inst.cpp``): a comparison reads at most one register word, one packet field
and one constant; a lane has two update ALUs; a single-word register has two spare ALUs for returning
constants or expressions, a register pair none (every branch returns the same source); Tofino 1
returns one 32-bit word, Tofino 2 up to four; a register has at most two packet inputs over all its
RegisterActions, and at most four RegisterActions.  :class:`SaluCaps` holds the per-target numbers,
from the target profile.  :func:`check_register` checks a register's actions together and names the
first rule one breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import graph as opgraph
from .graph import BOOLEAN, Expr, const

# leaf name prefixes
MEM = "mem."      # a register lane's value when the action starts: mem.value (one word), mem.lo / mem.hi (a pair)
IN = "in."        # a packet field or metadata the action reads
TMP = "tmp."      # metadata computed before the action
RV = "rv."        # the action's returned words, as the stages after it see them
HV = "hv."        # the words a harvest pass's RegisterAction returns (lanes as the action left them)


@dataclass(frozen=True)
class SaluCaps:
    """What one stateful ALU can do (from the target profile)."""
    compare_units: int              # comparisons per RegisterAction
    output_words: int               # 32-bit words a RegisterAction returns
    alus_per_lane: int = 2          # update instructions per register lane
    spare_outputs: int = 2          # returned constants/expressions on a one-word register (its unused high ALUs)
    inputs_per_register: int = 2    # packet fields or metadata one register's actions read, together
    actions_per_register: int = 4   # RegisterActions of one register
    word_bits: int = 32

    @classmethod
    def of(cls, profile) -> "SaluCaps | None":
        units = getattr(profile, "salu_compare_units", None)
        if units is None:
            return None
        return cls(compare_units=units, output_words=profile.salu_output_words)


class SaluError(ValueError):
    """An operation that no stateful ALU form of this module fits (a generator limit, named)."""


@dataclass(frozen=True)
class Lowered:
    """One op of one role on one register (for one ``copy`` when its lanes depend on the packet's copy)."""
    role: str
    op: str
    copy: int | None
    lanes: tuple[str, ...]                      # ("value",) or ("lo", "hi")
    touches: bool                               # runs a RegisterAction
    atoms: tuple[Expr, ...] = ()                # compare units, in order
    updates: dict[str, Expr] = field(default_factory=dict)     # lane -> new value (over atoms); kept lanes absent
    outputs: tuple[Expr, ...] = ()              # returned words (over atoms)
    hoisted: tuple[tuple[str, Expr], ...] = ()  # tmp name -> what it holds (packet fields and metadata only)
    results: tuple[Expr, ...] = ()              # per output of the op: over rv.k, in.* and tmp.* leaves
    split: bool = False                         # the results are computed after the ALU
    harvest: tuple[Expr, ...] = ()              # words a harvest pass reads (mem.<lane>: the lane as this action
                                                # left it); results read them as hv.k

    @property
    def harvested(self) -> bool:
        """Some result needs a harvest pass (the ALU returns fewer words than the op's outputs)."""
        return bool(self.harvest)

    def inputs(self) -> set[str]:
        """The packet fields, metadata and temporaries the RegisterAction reads."""
        roots = list(self.atoms) + list(self.updates.values()) + list(self.outputs)
        return {n for n in opgraph.leaves(roots) if not n.startswith(MEM)}


# -- expression shapes ------------------------------------------------------------------------------


def key(e: Expr) -> str:
    """A structural key: two nodes with the same key compute the same value."""
    if e.kind == "leaf":
        return e.args[0]
    if e.kind == "const":
        return f"{int(e.args[0])}" + (f"w{e.bits}" if isinstance(e.bits, int) else "")
    return f"{e.kind}({','.join(key(c) for c in e.children())})"


def _is_mem(e: Expr) -> bool:
    return e.kind == "leaf" and e.args[0].startswith(MEM)


def _is_field(e: Expr) -> bool:
    return e.kind == "leaf" and not e.args[0].startswith(MEM)


def _reads_mem(e: Expr) -> bool:
    return any(n.startswith(MEM) for n in opgraph.leaves([e]))


def _terms(e: Expr, sign: int = 1, out: list | None = None) -> list[tuple[int, Expr]] | None:
    """``e`` as a signed sum of leaves and constants, or None when it is not one."""
    out = [] if out is None else out
    if e.kind in ("leaf", "const"):
        out.append((sign, e))
        return out
    if e.kind == "add":
        if _terms(e.args[0], sign, out) is None or _terms(e.args[1], sign, out) is None:
            return None
        return out
    if e.kind == "sub":
        if _terms(e.args[0], sign, out) is None or _terms(e.args[1], -sign, out) is None:
            return None
        return out
    return None


def compare_form(atom: Expr) -> str | None:
    """Why ``atom`` is not a comparison a stateful ALU makes (None: it is one).

    A comparison is ``left - right`` against 0: at most one register word, one field and one constant."""
    if atom.kind == "ne0":
        inner = atom.args[0]
        if inner.kind == "and":
            return "a bit test against a mask that is not a constant"
        sides = [inner]
    elif atom.kind in ("eq", "gt"):
        sides = list(atom.children())
    else:
        return f"{atom.kind} is not a comparison"
    mem = fields = consts = 0
    for side in sides:
        terms = _terms(side)
        if terms is None:
            return f"{key(side)} is not a sum of a register word, a field and a constant"
        for _s, t in terms:
            if t.kind == "const":
                consts += 1
            elif _is_mem(t):
                mem += 1
            else:
                fields += 1
    if mem > 1 or fields > 1 or consts > 1:
        return f"{key(atom)} reads {mem} register words, {fields} fields and {consts} constants (at most one each)"
    return None


def instruction_form(lane: str, e: Expr) -> str | None:
    """Why ``e`` is not what one update ALU of ``lane`` computes (None: it is): a constant, a field, or
    one operator on the lane's value and a field or constant (``a & ~b`` counts as one)."""
    me = MEM + lane
    if e.kind == "const" or _is_field(e):
        return None
    if e.kind == "leaf":
        return f"lane {lane} cannot take another lane's value ({e.args[0]})"

    def operand(x: Expr) -> bool:
        return x.kind == "const" or _is_field(x) or (x.kind == "not" and _is_field(x.args[0]))

    if e.kind in ("add", "sub", "ssub", "and", "or"):
        a, b = e.args[0], e.args[1]
        if (a.kind == "leaf" and a.args[0] == me and operand(b)) or \
           (e.kind in ("add", "and", "or") and b.kind == "leaf" and b.args[0] == me and operand(a)):
            return None
    return f"{key(e)} is not one ALU instruction on {lane}"


# -- decision trees over the atoms ------------------------------------------------------------------


def restrict(e: Expr, atom_key: str, value: bool, memo: dict | None = None) -> Expr:
    """``e`` with the atom whose key is ``atom_key`` fixed to ``value`` (constant conditions folded)."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    if e.kind in ("leaf", "const"):
        out = e
    elif e.kind in BOOLEAN and key(e) == atom_key:
        out = const(value)
    else:
        kids = [restrict(c, atom_key, value, memo) for c in e.children()]
        if e.kind == "ite":
            out = opgraph.SYM.ite(*kids)
        elif all(k is c for k, c in zip(kids, e.children())):
            out = e
        else:
            args = list(e.args)
            ki = iter(kids)
            args = [next(ki) if isinstance(a, Expr) else a for a in args]
            out = Expr(e.kind, *args, bits=e.bits)
    memo[id(e)] = out
    return out


def conditions(roots) -> list[Expr]:
    """The distinct conditions of the ``ite`` nodes under ``roots`` and the roots that are truth values,
    in the order a depth-first walk meets them."""
    found: dict[str, Expr] = {}
    for r in roots:
        if r.kind in BOOLEAN:
            found.setdefault(key(r), r)
    for n in opgraph.walk(roots):
        if n.kind == "ite":
            c = n.args[0]
            if c.kind in BOOLEAN:
                found.setdefault(key(c), c)
            elif c.kind != "const":
                raise SaluError(f"condition {key(c)} is not a comparison")
    return list(found.values())


def branch_leaves(e: Expr, atoms: list[Expr]) -> list[Expr]:
    """The condition-free expressions ``e`` takes over every truth assignment of ``atoms``."""
    out: dict[str, Expr] = {}

    def go(x: Expr, i: int) -> None:
        if i == len(atoms):
            if x.kind in BOOLEAN:
                raise SaluError(f"{key(x)} is left undecided")
            out.setdefault(key(x), x)
            return
        k = key(atoms[i])
        go(restrict(x, k, True), i + 1)
        go(restrict(x, k, False), i + 1)

    go(e, 0)
    return list(out.values())


# -- the lowering -----------------------------------------------------------------------------------


def lanes_of(role: str, pair: bool) -> tuple[str, ...]:
    return ("lo", "hi") if pair else ("value",)


def graph(role: str, op: str, pair: bool, copy: int | None, widths: dict[str, int], width: int):
    """The op's results over mem.*/in.* leaves: (lane -> new value, outputs)."""
    call = opgraph.ROLE_CALLS[role]
    if role == "values" and pair:
        news, outs = {}, []
        for i, lane in enumerate(("lo", "hi")):
            names = {"stored": MEM + lane, "pkt": f"{IN}pkt{i}"}
            res = opgraph.symbolic(role, op, names, {"stored": width, "pkt": width}, width)
            news[lane] = res[0]
            outs.append(res[1])
        return news, outs
    if role == "bitmap":
        this, other = ("lo", "hi") if copy == 0 else ("hi", "lo")
        names = {"this": MEM + this, "other": MEM + other, "mask": IN + "mask"}
        res = opgraph.symbolic(role, op, names, {"this": width, "other": width, "mask": width}, width)
        return {this: res[0], other: res[1]}, [res[2]]
    reg = call.registers[0]
    names = {p: (MEM + "value" if p == reg else IN + p) for p in call.params}
    res = opgraph.symbolic(role, op, names, {p: widths.get(p, width) for p in call.params}, width)
    return {"value": res[0]}, [res[call.output]]


def _hoist(roots: list[Expr], prefix: str) -> tuple[list[Expr], list[tuple[str, Expr]]]:
    """Move the operations that read no register lane, under nodes that do, into temporaries."""
    hoisted: dict[str, tuple[str, Expr]] = {}

    def fix(e: Expr, memo: dict) -> Expr:
        if id(e) in memo:
            return memo[id(e)]
        if e.kind in ("leaf", "const"):
            out = e
        else:
            kids = []
            for c in e.children():
                if (c.kind not in ("leaf", "const", "ite") and c.kind not in BOOLEAN
                        and not (c.kind == "not" and c.args[0].kind == "leaf")
                        and not _reads_mem(c) and _reads_mem(e)):
                    k = key(c)
                    if k not in hoisted:
                        hoisted[k] = (f"{TMP}{prefix}{len(hoisted)}", c)
                    kids.append(opgraph.leaf(hoisted[k][0], c.bits))
                else:
                    kids.append(fix(c, memo))
            ki = iter(kids)
            out = Expr(e.kind, *[next(ki) if isinstance(a, Expr) else a for a in e.args], bits=e.bits)
            if e.kind == "ite":
                out = opgraph.SYM.ite(*out.args)
        memo[id(e)] = out
        return out

    memo: dict = {}
    return [fix(r, memo) for r in roots], list(hoisted.values())


def _output_source(e: Expr, lane_new: dict[str, Expr]) -> str:
    """What kind of ALU output a condition-free returned expression is."""
    if e.kind == "const":
        return "zero" if int(e.args[0]) == 0 else "spare"
    if e.kind in BOOLEAN:
        return "compare"
    if _is_field(e):
        return "field"
    if _is_mem(e):
        return "old"
    for lane, new in lane_new.items():
        if key(new) == key(e):
            return "new"
    return "spare"


def lower(role: str, op: str, caps: SaluCaps, *, pair: bool, copy: int | None = None,
          widths: dict[str, int] | None = None, width: int = 32, prefix: str = "t") -> Lowered:
    """The RegisterAction form of ``op`` of ``role`` (a register pair when ``pair``; ``copy``: which lane
    is this copy's, for a role whose lanes are the two copies).  ``prefix`` names the temporaries."""
    widths = widths or {}
    lanes = lanes_of(role, pair)
    news, outs = graph(role, op, pair, copy, widths, width)
    news = {ln: e for ln, e in news.items() if not (_is_mem(e) and e.args[0] == MEM + ln)}
    reads = any(_reads_mem(o) for o in outs)
    if not news and not reads:
        # no register access: the outputs are fields or constants the stages set directly
        return Lowered(role, op, copy, lanes, False, results=tuple(outs))
    roots, hoisted = _hoist(list(news.values()) + outs, prefix)
    news = dict(zip(news, roots[:len(news)]))
    outs = roots[len(news):]

    # the updates must fit whatever the outputs do
    upd_atoms = conditions(list(news.values()))
    for a in upd_atoms:
        why = compare_form(a)
        if why:
            raise SaluError(f"{role}.{op}: the update branches on {why}")
    if len(upd_atoms) > caps.compare_units:
        raise SaluError(f"{role}.{op}: the update needs {len(upd_atoms)} comparisons; the stateful ALU has "
                        f"{caps.compare_units}")
    for lane, e in news.items():
        forms = [x for x in branch_leaves(e, upd_atoms) if not (_is_mem(x) and x.args[0] == MEM + lane)]
        for x in forms:
            why = instruction_form(lane, x)
            if why:
                raise SaluError(f"{role}.{op}: {why}")
        if len(forms) > caps.alus_per_lane:
            raise SaluError(f"{role}.{op}: lane {lane} needs {len(forms)} update instructions; it has "
                            f"{caps.alus_per_lane}")

    hv = _harvest_form(outs, news, lanes, upd_atoms, caps) if pair and len(outs) > caps.output_words else None
    if hv is not None:
        now, later, results = hv
        return Lowered(role, op, copy, lanes, True, tuple(upd_atoms), news, now, tuple(hoisted), results,
                       harvest=later)

    if _outputs_fit(outs, upd_atoms, news, caps, pair):
        atoms = upd_atoms + [a for a in conditions(outs) if key(a) not in {key(u) for u in upd_atoms}]
        rvs = tuple(opgraph.leaf(f"{RV}{i}", o.bits) for i, o in enumerate(outs))
        return Lowered(role, op, copy, lanes, True, tuple(atoms), news, tuple(outs), tuple(hoisted), rvs)

    # split: the ALU returns the old value of the one lane each output reads; the stages after compute it
    carriers: list[Expr] = []
    results = []
    for o in outs:
        read = sorted(n for n in opgraph.leaves([o]) if n.startswith(MEM))
        if len(read) != 1:
            raise SaluError(f"{role}.{op}: an output reads {len(read)} register lanes; at most one can be returned")
        k = next((i for i, c in enumerate(carriers) if c.args[0] == read[0]), None)
        if k is None:
            carriers.append(opgraph.leaf(read[0], width))
            k = len(carriers) - 1
        results.append(opgraph.substitute(o, {read[0]: opgraph.leaf(f"{RV}{k}", width)}))
    if len(carriers) > caps.output_words:
        raise SaluError(f"{role}.{op}: returns {len(carriers)} words; the stateful ALU returns {caps.output_words}")
    return Lowered(role, op, copy, lanes, True, tuple(upd_atoms), news, tuple(carriers), tuple(hoisted),
                   tuple(results), split=True)


def _outputs_fit(outs: list[Expr], upd_atoms: list[Expr], news: dict[str, Expr], caps: SaluCaps,
                 pair: bool) -> bool:
    if len(outs) > caps.output_words:
        return False
    out_atoms = [a for a in conditions(outs) if key(a) not in {key(u) for u in upd_atoms}]
    if any(compare_form(a) for a in out_atoms) or len(upd_atoms) + len(out_atoms) > caps.compare_units:
        return False
    atoms = upd_atoms + out_atoms
    spare: set[str] = set()
    for o in outs:
        if any(key(o) == key(n) for n in news.values()):
            continue                    # a lane's new value: returned as the lane's ALU leaves it
        sources = {}
        for x in branch_leaves(o, atoms):
            src = _output_source(x, {})
            if src == "compare" and compare_form(x):
                return False
            if src != "zero":
                sources[key(x)] = (src, x)
        if len(sources) <= 1 and all(src in ("old", "field", "compare") for src, _x in sources.values()):
            continue                    # one direct source (or nothing): no spare ALU
        if pair:
            return False                # a pair returns one source in every branch
        for k, (src, x) in sources.items():
            if src == "spare" and not _spare_form(x):
                return False
            spare.add(k)
    return len(spare) <= caps.spare_outputs


def _harvest_form(outs: list[Expr], news: dict[str, Expr], lanes: tuple[str, ...], upd_atoms: list[Expr],
                  caps: SaluCaps) -> tuple[tuple[Expr, ...], tuple[Expr, ...], tuple[Expr, ...]] | None:
    """A register pair whose outputs are lanes' values after the action (or fields and constants), more
    outputs than the ALU returns words: (the words returned in this pass, the lanes a harvest pass reads, the
    results over rv.k, hv.k, fields and constants), or None when the outputs are not of that form.

    A field or constant output is no returned word (the packet carries it, or the stages set it).  The last
    lanes are returned by the action that updates them (a lane's ALU output, or the stored word when the
    action leaves it), the others by one harvest pass (at most ``output_words`` of them)."""
    if upd_atoms:
        return None                     # a lane chosen by a comparison: not a plain read of the lane
    after = {(key(news[ln]) if ln in news else MEM + ln): ln for ln in lanes}
    reads: list[str | None] = []
    for o in outs:
        if o.kind == "const" or _is_field(o):
            reads.append(None)
        elif key(o) in after:
            reads.append(after[key(o)])
        else:
            return None
    read = list(dict.fromkeys(ln for ln in reads if ln is not None))
    split = max(0, len(read) - caps.output_words)
    now, later = read[split:], read[:split]
    if len(later) > caps.output_words:
        raise SaluError(f"a register of {len(read)} lanes needs {len(later)} words in a harvest pass; the stateful "
                        f"ALU returns {caps.output_words}")
    words = tuple(news.get(ln, opgraph.leaf(MEM + ln)) for ln in now)
    results = tuple(o if ln is None else
                    opgraph.leaf(f"{RV}{now.index(ln)}", o.bits) if ln in now else
                    opgraph.leaf(f"{HV}{later.index(ln)}", o.bits) for o, ln in zip(outs, reads))
    return words, tuple(opgraph.leaf(MEM + ln) for ln in later), results


def _spare_form(e: Expr) -> bool:
    """A constant, or one operator on the register word and a field or constant (a spare ALU's work)."""
    if e.kind == "const":
        return True
    if e.kind in ("add", "sub", "and", "or", "ssub"):
        a, b = e.args[0], e.args[1]
        ok = lambda x: x.kind == "const" or _is_field(x)  # noqa: E731
        return (_is_mem(a) and ok(b)) or (_is_mem(b) and ok(a))
    return False


def check_register(name: str, actions: list[Lowered], caps: SaluCaps) -> None:
    """The rules that bind all the RegisterActions of one register together."""
    running = [a for a in actions if a.touches]
    harvests = {tuple(key(h) for h in a.harvest) for a in running if a.harvest}   # one read each, shared
    if len(running) + len(harvests) > caps.actions_per_register:
        raise SaluError(f"register {name} needs {len(running) + len(harvests)} RegisterActions; a register has "
                        f"{caps.actions_per_register}")
    inputs = set().union(*(a.inputs() for a in running)) if running else set()
    if len(inputs) > caps.inputs_per_register:
        raise SaluError(f"register {name}'s actions read {len(inputs)} fields ({', '.join(sorted(inputs))}); "
                        f"a stateful ALU takes {caps.inputs_per_register}")


# -- the stages after the ALU -----------------------------------------------------------------------


@dataclass(frozen=True)
class MauForm:
    """An output computed in match-action stages: temporaries (one ALU instruction each, all in one
    stage) and then a choice over tests a gateway makes (a field against a constant)."""
    temps: tuple[tuple[str, Expr], ...]
    tree: Expr          # over gateway tests; leaves are constants or fields


def gateway_test(e: Expr) -> bool:
    """A comparison a gateway makes: a field (or temporary) against a constant."""
    if e.kind == "ne0":
        return e.args[0].kind == "leaf"
    if e.kind in ("eq", "gt"):
        a, b = e.args
        return (a.kind == "leaf" and b.kind == "const") or (b.kind == "leaf" and a.kind == "const")
    return False


def mau_form(e: Expr, prefix: str, returned: frozenset[str] = frozenset()) -> MauForm:
    """``e`` (a result over returned words and fields) as temporaries and gateway tests.

    A temporary is one ALU instruction of the action that executes the RegisterAction, with the word it
    returned as an operand (a match-action ALU takes that word, which arrives on the action data bus,
    only as the first operand of a subtraction); ``returned`` names those words' leaves.  ``a == b``
    becomes ``t = a ^ b`` tested ``t == 0``; ``(a & m) != 0`` becomes ``t = a & m`` tested ``t != 0``;
    ``a > b`` becomes ``t = a |-| b`` tested ``t != 0``, or, when ``b`` is a returned word,
    ``b |-| a == 0 and b ^ a != 0``."""
    temps: dict[str, tuple[str, Expr]] = {}

    def temp(x: Expr) -> Expr:
        k = key(x)
        if k not in temps:
            temps[k] = (f"{TMP}{prefix}{len(temps)}", x)
        return opgraph.leaf(temps[k][0], x.bits)

    def bits(a: Expr, b: Expr):
        return a.bits or b.bits

    def ret(x: Expr) -> bool:
        return x.kind == "leaf" and x.args[0] in returned

    def test(a: Expr) -> Expr:
        """A condition over gateway tests equal to atom ``a``."""
        if gateway_test(a):
            return a
        if a.kind == "gt":
            x, y = a.args
            if ret(y) and not ret(x):
                le = Expr("eq", temp(Expr("ssub", y, x, bits=bits(x, y))), const(0, bits(x, y)))
                ne = Expr("ne0", temp(Expr("xor", y, x, bits=bits(x, y))))
                return Expr("and2", le, ne)
            return Expr("ne0", temp(Expr("ssub", x, y, bits=bits(x, y))))
        if a.kind == "eq":
            x, y = a.args
            if ret(y):
                x, y = y, x
            return Expr("eq", temp(Expr("xor", x, y, bits=bits(x, y))), const(0, bits(x, y)))
        if a.kind == "ne0" and a.args[0].kind == "and":
            x, y = a.args[0].args
            if ret(y):
                x, y = y, x
            return Expr("ne0", temp(Expr("and", x, y, bits=bits(x, y))))
        raise SaluError(f"{key(a)} cannot be tested in a gateway")

    def branch(c: Expr, yes: Expr, no: Expr) -> Expr:
        if c.kind == "and2":                        # both tests: nested choices
            return branch(c.args[0], branch(c.args[1], yes, no), no)
        return opgraph.SYM.ite(c, yes, no)

    def go(x: Expr) -> Expr:
        if x.kind == "ite":
            return branch(test(x.args[0]), go(x.args[1]), go(x.args[2]))
        if x.kind in BOOLEAN:
            return branch(test(x), const(1, 8), const(0, 8))
        if x.kind in ("leaf", "const"):
            return x
        raise SaluError(f"{key(x)} is not a choice between constants and fields")

    tree = go(e)
    for _name, t in temps.values():
        if any(c.kind not in ("leaf", "const") for c in t.children()):
            raise SaluError(f"{key(t)} is more than one instruction")
        if t.kind == "ssub" and ret(t.args[1]):
            raise SaluError(f"{key(t)} subtracts a returned word")
    return MauForm(tuple(temps.values()), tree)


def describe(low: Lowered) -> dict[str, Any]:
    """A short account of a lowering (tests, docs)."""
    return {"role": low.role, "op": low.op, "copy": low.copy, "touches": low.touches, "split": low.split,
            "compares": [key(a) for a in low.atoms], "updates": {k: key(v) for k, v in low.updates.items()},
            "outputs": [key(o) for o in low.outputs], "hoisted": [(n, key(e)) for n, e in low.hoisted],
            "results": [key(r) for r in low.results], "harvest": [key(h) for h in low.harvest]}
