"""The transition-system core shared by the protocol models: state, induction, bounded model checking, traces.

A protocol model (:class:`Model`; :mod:`p4gen.verify.protocol` for SwitchML,
:mod:`p4gen.verify.omni` for OmniReduce) supplies its state schema, initial
condition, events, the cases of an event (one per path through the decision
table, :mod:`p4gen.verify.paths`), its properties (one check per case) and a
strengthening invariant.  This module runs it:

* :class:`Prover`: plain induction.  The base case and every (event, table
  path) of one acting worker is a *unit*; a unit asks whether the invariant
  and the path imply every invariant clause and every property check after
  the step.  Units are independent, so a pool
  runs them in parallel.  On a symbolic worker set the acting worker is a
  symbolic id, and the queries go through :func:`p4gen.verify.workers.ground`,
  so one proof covers every worker count in the range;
* :func:`bmc`: bounded model checking from the initial state on a concrete
  worker set, with every worker's events, giving the shortest trace that
  violates a property;
* :class:`Counterexample`: a trace in the model's own words.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from .cardinality import card, card_facts
from .workers import Workers, ground
from .z3alg import BitSet, Shares

QUERY_TIMEOUT_MS = 120_000


# ---------------------------------------------------------------------------
# state

class State:
    """The model's state: named fields of the kinds of :data:`KINDS`, scalar or one per copy."""

    def __init__(self, schema: dict[str, tuple[str, int | None]], values: dict[str, Any]):
        self._schema = schema
        for k, v in values.items():
            setattr(self, k, v)

    @classmethod
    def fresh(cls, schema: dict[str, tuple[str, int | None]], ws: Workers, prefix: str) -> "State":
        vals = {}
        for name, (kind, copies) in schema.items():
            make = KINDS[kind]
            vals[name] = make(ws, f"{prefix}_{name}") if copies is None else [
                make(ws, f"{prefix}_{name}{v}") for v in range(copies)]
        return cls(schema, vals)

    def clone(self) -> "State":
        return State(self._schema, {k: (list(getattr(self, k)) if c is not None else getattr(self, k))
                                    for k, (_, c) in self._schema.items()})

    def leaves(self) -> list:
        """Every scalar term of the state (concrete worker sets: vectors are tuples)."""
        out = []
        for k, (_, c) in self._schema.items():
            for x in (getattr(self, k) if c is not None else [getattr(self, k)]):
                out += [x] if isinstance(x, z3.ExprRef) else x.terms()
        return out

    def eq_terms(self, other: "State"):
        out = []
        for k, (_, c) in self._schema.items():
            a, b = getattr(self, k), getattr(other, k)
            for x, y in (zip(a, b) if c is not None else [(a, b)]):
                out.append(x == y if isinstance(x, z3.ExprRef) else x.eq_terms(y))
        return z3.And(out)


class View:
    """Terms derived from a state that both protocols' properties use; M is the ghost ``top`` (the
    newest chunk or round any worker is on)."""

    def __init__(self, s: State, ws: Workers):
        self.s, self.ws, self.N = s, ws, ws.N
        self.M = s.top
        self.all = ws.all

    def bit(self, v: int, u):
        return self.s.bm[v].has(u)

    def card(self, v: int):
        return card(self.ws, self.s.bm[v])

    def full(self, v: int):
        return self.card(v) == self.N

    def per_copy(self, f):
        """f(p, q) for the copy p = M mod 2 of the newest chunk or round and the other copy q."""
        return z3.And([z3.Implies(self.M % 2 == p, f(p, 1 - p)) for p in (0, 1)])


KINDS: dict[str, Callable[[Workers, str], Any]] = {
    "int": lambda ws, name: z3.Int(name),
    "bool": lambda ws, name: z3.Bool(name),
    "bits": BitSet.fresh,
    "shares": Shares.fresh,
    "wint": lambda ws, name: ws.vec(name, z3.IntSort()),
    "wbool": lambda ws, name: ws.vec(name, z3.BoolSort()),
}


@dataclass(frozen=True)
class Event:
    kind: str          # the model's event names (deliver, recv, ...)
    worker: Any        # a worker id (int) or a symbolic id
    copy: int = 0

    def text(self) -> str:
        who = "worker" if not isinstance(self.worker, int) else f"worker {self.worker}"
        return f"{self.kind}({who}, copy {self.copy})" if self.kind.startswith("deliver") else f"{self.kind}({who})"


@dataclass
class Case:
    """One event along one table path: guard (path condition included), post-state, property checks, outputs."""
    guard: Any
    label: str
    post: State
    checks: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Clause:
    name: str
    fn: Callable[[Any], Any]     # fn(view of a state) -> formula (per-worker clauses quantify inside)


class Model:
    """What a protocol model supplies to the engine (see the module docstring)."""

    group = "model"                # the name of its property lines
    properties: dict[str, str] = {}
    schema: dict[str, tuple[str, int | None]] = {}

    def globals(self, ws: Workers) -> tuple[dict[str, Any], list]:
        """Model-wide symbolic constants and their axioms."""
        return {}, []

    def init(self, s: State, ws: Workers, g: dict[str, Any]):
        raise NotImplementedError

    def events(self, ws: Workers, worker) -> list[Event]:
        raise NotImplementedError

    def cases(self, s: State, ws: Workers, g: dict[str, Any], ev: Event, k, prune: bool) -> list[Case]:
        raise NotImplementedError

    def invariant(self) -> list[Clause]:
        raise NotImplementedError

    def view(self, s: State, ws: Workers, g: dict[str, Any]) -> Any:
        raise NotImplementedError

    def bitmaps(self, s: State) -> list[BitSet]:
        return []

    def trace_row(self, step: "TraceStep") -> "TraceRow":
        raise NotImplementedError


# ---------------------------------------------------------------------------
# induction

@dataclass(frozen=True)
class Unit:
    """One induction query group: the base case (event None) or one (event, table path) of the actor."""
    index: int
    event: int | None      # index into Prover.events
    path: int = 0
    where: str = "initial state"


@dataclass
class UnitResult:
    index: int
    where: str
    failed_clauses: list[str] = field(default_factory=list)
    failed_props: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)        # clauses/properties the solver gave up on
    times: dict[str, float] = field(default_factory=dict)   # clause or property -> seconds
    queries: int = 0


class Prover:
    """The induction queries of one model on one worker set (a fresh state ``s``, a symbolic actor)."""

    def __init__(self, model: Model, ws: Workers):
        self.model, self.ws = model, ws
        self.s = State.fresh(model.schema, ws, "s")
        self.g, self.axioms = model.globals(ws)
        self.actor = 0 if ws.concrete else z3.Int("a")
        # a worker other than the actor (there are at least two): named in every query
        self.named = [self.actor] if ws.concrete else [self.actor, z3.If(self.actor == 0, z3.IntVal(1), z3.IntVal(0))]
        if not ws.concrete:
            self.axioms = self.axioms + [ws.in_range(self.actor)]
        self.axioms = self.axioms + ws.axioms()
        self.k = z3.Int("k")
        self.clauses = model.invariant()
        self.events = model.events(ws, self.actor)
        self._cases: dict[int, list[Case]] = {}
        self._units: list[Unit] | None = None

    def units(self) -> list[Unit]:
        if self._units is None:
            self._units = self._enumerate()
        return self._units

    def _enumerate(self) -> list[Unit]:
        out = [Unit(0, None)]
        for i, ev in enumerate(self.events):
            for j, c in enumerate(self.cases(i)):
                where = ev.text()[:-1] + (f"; path {c.label})" if c.label else ")")
                out.append(Unit(len(out), i, j, where))
        return out

    def cases(self, i: int) -> list[Case]:
        if i not in self._cases:
            self._cases[i] = self.model.cases(self.s, self.ws, self.g, self.events[i], self.k, True)
        return self._cases[i]

    def inv(self, s: State):
        d = self.model.view(s, self.ws, self.g)
        return z3.And([c.fn(d) for c in self.clauses])

    def _query(self, hyp, goal) -> tuple[Any, float]:
        f, _ = ground(z3.And(hyp, z3.Not(goal)), self.ws, self.named)
        sol = z3.Solver()
        sol.set("timeout", QUERY_TIMEOUT_MS)
        sol.add(f)
        t0 = time.perf_counter()
        r = sol.check()
        return r, time.perf_counter() - t0

    def _check_all(self, hyp, goals: list[tuple[str, Any]], res: UnitResult, first: bool = False) -> list[str]:
        """Names of the goals ``hyp`` does not imply: one query for all, then one per goal if that fails
        (with ``first``: only up to the first that fails)."""
        goals = [(n, g) for n, g in goals if not z3.is_true(z3.simplify(g))]
        if not goals:
            return []
        if len(goals) > 1:
            r, dt = self._query(hyp, z3.And([g for _, g in goals]))
            res.queries += 1
            for n, _ in goals:
                res.times[n] = res.times.get(n, 0.0) + dt / len(goals)
            if r == z3.unsat:
                return []
        failed = []
        for n, g in goals:
            r, dt = self._query(hyp, g)
            res.queries += 1
            res.times[n] = res.times.get(n, 0.0) + dt
            if r != z3.unsat:
                failed.append(n)
                if r == z3.unknown:
                    res.unknown.append(n)
                if first:
                    break
        return failed

    def check(self, unit: Unit) -> UnitResult:
        res = UnitResult(unit.index, unit.where)
        s, ws = self.s, self.ws
        if unit.event is None:
            bitmaps = self.model.bitmaps(s) + [BitSet.empty(ws)]
            hyp = z3.And(*self.axioms, self.model.init(s, ws, self.g), *card_facts(ws, bitmaps))
            if self._query(hyp, z3.BoolVal(False))[0] == z3.unsat:     # a proof from no initial state proves nothing
                res.failed_clauses = ["the initial state is contradictory"]
                return res
            d = self.model.view(s, ws, self.g)
            res.failed_clauses = self._check_all(hyp, [(c.name, c.fn(d)) for c in self.clauses], res, first=True)
            return res
        case = self.cases(unit.event)[unit.path]
        bitmaps = self.model.bitmaps(s) + self.model.bitmaps(case.post)
        hyp = z3.And(*self.axioms, case.guard, self.inv(s), *card_facts(ws, bitmaps))
        dp = self.model.view(case.post, ws, self.g)
        res.failed_clauses = self._check_all(hyp, [(c.name, c.fn(dp)) for c in self.clauses], res, first=True)
        if not res.failed_clauses:     # with the invariant not inductive no property is proved by it
            res.failed_props = self._check_all(hyp, [(p, case.checks[p]) for p in self.model.properties], res)
        return res


# ---------------------------------------------------------------------------
# bounded model checking

@dataclass
class TraceStep:
    index: int
    event: Event
    k: int
    label: str
    pre: State
    post: State
    info: dict[str, Any]
    val: Callable[[Any], Any]
    history: list["TraceStep"]

    def int(self, t) -> int:
        return self.val(t).as_long()

    def true(self, t) -> bool:
        return z3.is_true(self.val(t))


@dataclass
class TraceRow:
    step: int
    worker: int
    slot: int
    copy: int
    chunk: Any          # the chunk or tsi the event is about
    event: str
    action: str


@dataclass
class Counterexample:
    prop: str
    n: int
    rows: list[TraceRow]
    statement: str = ""
    note: str = ""

    @property
    def steps(self) -> int:
        return len(self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"property": self.prop, "n": self.n, "steps": self.steps, "note": self.note,
                "trace": [r.__dict__ for r in self.rows]}

    def format(self) -> list[str]:
        head = ("step", "worker", "slot", "copy", "chunk/tsi", "event", "switch action")
        rows = [head] + [(str(r.step), str(r.worker), str(r.slot), str(r.copy), str(r.chunk), r.event, r.action)
                         for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out = ["  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
        out.insert(1, "  " + "  ".join("-" * wd for wd in widths))
        out.append(f"  violates {self.prop}: {self.statement}" + (f" ({self.note})" if self.note else ""))
        return out


_STEP_LOCALS: dict[str, dict[str, Any]] = {}


def step_local(k, name: str, sort=None):
    """A constant private to the step whose chunk index is ``k`` (renamed per step by :class:`Unrolling`)."""
    c = z3.Const(f"{k}_{name}", sort or z3.IntSort())
    _STEP_LOCALS.setdefault(str(k), {})[str(c)] = c
    return c


class Unrolling:
    """The transition relation of a model on a concrete worker set, built once and renamed per step.

    ``step(i)`` relates the states ``b{i}`` and ``b{i+1}``: the event index,
    the chunk index and the step's own constants (:func:`step_local`) get
    per-step names.  Every leaf of the next state is one ``If`` chain over the
    (event, table path) cases that change it, so a step adds one equality per
    leaf.
    """

    def __init__(self, model: Model, n: int):
        self.model, self.ws = model, Workers.exactly(n)
        ws = self.ws
        self.events = [e for w in ws.ids() for e in model.events(ws, w)]
        self.g, self.axioms = model.globals(ws)
        self.pre, nxt = State.fresh(model.schema, ws, "p"), State.fresh(model.schema, ws, "q")
        self.ev, self.k = z3.Int("ev"), z3.Int("k")
        self.cases = [model.cases(self.pre, ws, self.g, e, self.k, True) for e in self.events]
        pl, ql = self.pre.leaves(), nxt.leaves()
        upd: list[list] = [[] for _ in pl]
        some = []
        for j, cs in enumerate(self.cases):
            for c in cs:
                taken = z3.And(self.ev == j, c.guard)
                some.append(taken)
                for i, (a, b) in enumerate(zip(pl, c.post.leaves())):
                    if not b.eq(a):
                        upd[i].append((taken, b))
        rel = [self.ev >= 0, self.ev < len(self.events), z3.Or(some)]
        for a, b, u in zip(pl, ql, upd):
            t = a
            for taken, v in reversed(u):
                t = z3.If(taken, v, t)
            rel.append(b == t)
        self.rel = z3.And(rel)
        self.viol = {}
        for p in model.properties:
            bad = [z3.And(self.ev == j, c.guard, z3.Not(c.checks[p])) for j, cs in enumerate(self.cases) for c in cs
                   if not z3.is_true(z3.simplify(c.checks[p]))]
            self.viol[p] = z3.Or(bad) if bad else z3.BoolVal(False)
        self._local = [self.ev, self.k] + list(_STEP_LOCALS.get(str(self.k), {}).values())
        self._pl, self._ql = pl, ql
        self.states: list[State] = []
        self._memo: dict = {}

    def state(self, i: int) -> State:
        while len(self.states) <= i:
            self.states.append(State.fresh(self.model.schema, self.ws, f"b{len(self.states)}"))
        return self.states[i]

    def renaming(self, i: int) -> list:
        """(generic term, step-i term) pairs: the pre-state is b{i}, the post-state b{i+1}."""
        if ("ren", i) not in self._memo:
            pairs = list(zip(self._pl, self.state(i).leaves())) + list(zip(self._ql, self.state(i + 1).leaves()))
            pairs += [(c, z3.Const(f"{c}@{i}", c.sort())) for c in self._local]
            self._memo["ren", i] = pairs
        return self._memo["ren", i]

    def step(self, i: int):
        if ("step", i) not in self._memo:
            self._memo["step", i] = z3.substitute(self.rel, *self.renaming(i))
        return self._memo["step", i]

    def step_as(self, i: int, j: int):
        """Step ``i`` taken by event ``j`` (the other events' cases simplified away)."""
        key = ("as", i, j)
        if key not in self._memo:
            self._memo[key] = z3.simplify(z3.substitute(self.step(i), (self.at(i, self.ev), z3.IntVal(j))))
        return self._memo[key]

    def violation_as(self, i: int, j: int, props: list[str]):
        key = ("vas", i, j, tuple(props))
        if key not in self._memo:
            self._memo[key] = z3.simplify(z3.substitute(self.violation(i, props), (self.at(i, self.ev), z3.IntVal(j))))
        return self._memo[key]

    def violation(self, i: int, props: list[str]):
        key = ("viol", i, tuple(props))
        if key not in self._memo:
            self._memo[key] = z3.substitute(z3.Or([self.viol[p] for p in props]), *self.renaming(i))
        return self._memo[key]

    def init(self):
        return z3.And(*self.axioms, z3.substitute(self.model.init(self.pre, self.ws, self.g),
                                                  *zip(self._pl, self.state(0).leaves())))

    def at(self, i: int, t):
        if t is self.ev or t is self.k:
            return z3.Const(f"{t}@{i}", t.sort())
        return z3.substitute(t, *self.renaming(i))


def _interrupt_on(stop, done: threading.Event) -> None:
    while not done.wait(0.2):
        if stop.is_set():
            z3.main_ctx().interrupt()
            return


def _solver():
    sol = z3.Solver()
    sol.set("timeout", QUERY_TIMEOUT_MS)
    sol.set("relevancy", 0)
    sol.set("arith.solver", 2)
    return sol


LEVELS = (1, 2, 3, 4)


@dataclass
class Search:
    """What a counterexample search found: a trace, or how many steps it covered without one."""
    counterexample: Counterexample | None
    searched: int        # every trace of up to this many events was ruled out (when no counterexample)
    n: int


def search(model: Model, n: int, depth: int, props: list[str] | None = None, stop=None,
           budget: float | None = None, start: int = 0) -> Search:
    """A short trace (up to ``depth`` events) from the initial state that violates one of ``props``.

    Every worker's events, each split by table path as in the induction.
    The search asks, for growing bounds (:data:`LEVELS` above ``start``, then
    ``depth``), whether some step within the bound violates a property; a
    trace found is then shortened by dropping events while the rest still
    ends in a violation (replaying a fixed event sequence is a quick query).
    ``budget``: seconds before the search gives up; ``stop``: an event that,
    once set, ends it.
    """
    props = list(props or model.properties)
    deadline = None if budget is None else time.monotonic() + budget
    u = Unrolling(model, n)
    if all(z3.is_false(z3.simplify(u.viol[p])) for p in props):
        return Search(None, depth, n)
    sol = _solver()
    sol.add(u.init())
    done = threading.Event()
    if stop is not None:
        threading.Thread(target=_interrupt_on, args=(stop, done), daemon=True).start()
    searched = 0
    try:
        added = 0
        for bound in [b for b in LEVELS if start < b < depth] + [depth]:
            while added < bound:
                sol.add(u.step(added))
                added += 1
            if stop is not None and stop.is_set():
                break
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                sol.set("timeout", int(left * 1000))
            sol.push()
            sol.add(z3.Or([u.violation(i, props) for i in range(bound)]))
            r = sol.check()
            if r == z3.sat:
                m = sol.model()
                last = next(i for i in range(bound) if z3.is_true(m.eval(u.violation(i, props))))
                seq = [(m.eval(u.at(i, u.ev)).as_long(), m.eval(u.at(i, u.k), model_completion=True).as_long())
                       for i in range(last + 1)]
                return Search(_shortest(u, seq, props, stop), last + 1, n)
            sol.pop()
            if r == z3.unknown:
                break
            searched = bound
        return Search(None, searched, n)
    finally:
        done.set()


def bmc(model: Model, n: int, depth: int, props: list[str] | None = None, stop=None) -> Counterexample | None:
    """:func:`search` without a budget: a trace, or None when none has up to ``depth`` events."""
    return search(model, n, depth, props, stop).counterexample


def _replay(u: Unrolling, events: list[int], props: list[str]):
    """A model of the event sequence ``events`` (chunk indices free) ending in a violation, or None."""
    sol = _solver()
    sol.add(u.init())
    for i, j in enumerate(events):
        sol.add(u.step_as(i, j), u.at(i, u.ev) == j)
    sol.add(u.violation_as(len(events) - 1, events[-1], props))
    return sol.model() if sol.check() == z3.sat else None


def _shortest(u: Unrolling, seq: list[tuple[int, int]], props: list[str], stop) -> Counterexample:
    """Drop events from ``seq`` (one, else two at a time) while what is left still ends in a violation."""
    events = [j for j, _k in seq]
    m = _replay(u, events, props)
    while len(events) > 1 and not (stop is not None and stop.is_set()):
        n = len(events)
        drops = [(i,) for i in reversed(range(n - 1))]
        if n > LEVELS[-1] + 1:
            drops += [(i, j) for j in reversed(range(n - 1)) for i in reversed(range(j))]
        for d in drops:
            shorter = [e for i, e in enumerate(events) if i not in d]
            m2 = _replay(u, shorter, props)
            if m2 is not None:
                events, m = shorter, m2
                break
        else:
            break
    return _extract(u, m, len(events), props)


def _extract(u: Unrolling, m, steps: int, props: list[str]) -> Counterexample:
    history: list[TraceStep] = []
    rows: list[TraceRow] = []
    prop = props[0]
    for i in range(steps):
        ren = u.renaming(i)
        val = (lambda r: lambda t: m.eval(z3.substitute(t, *r), model_completion=True))(ren)
        j = val(u.ev).as_long()
        taken = next(c for c in u.cases[j] if z3.is_true(val(c.guard)))
        st = TraceStep(i + 1, u.events[j], val(u.k).as_long(), taken.label, u.pre, taken.post, taken.info, val,
                       history)
        rows.append(u.model.trace_row(st))
        history.append(st)
        if i == steps - 1:
            prop = next((p for p in props if not z3.is_true(val(taken.checks[p]))), prop)
    return Counterexample(prop, u.ws.n, rows, u.model.properties[prop])
