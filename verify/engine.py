"""The transition-system core shared by the protocol models: state, induction, traces.

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
  so one proof covers every worker count in the range.  Every query has a
  budget of solver work (:data:`p4gen.verify.budget.QUERY_RLIMIT`, Z3's resource
  count), never of time, so its answer is the same on a loaded machine and an idle one;
* :class:`Counterexample`: a trace in the model's own words, found by the
  explicit-state search of :mod:`p4gen.verify.explore`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from .budget import QUERY_RLIMIT
from .cardinality import card, card_facts
from .workers import Workers, ground
from .z3alg import BitSet, Shares



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

    # -- what the explicit-state search needs to know ----------------------
    def waiting(self, s: State, ws: Workers, w):
        """The chunk (round) index worker ``w`` waits for: what it retransmits."""
        return s.cur.get(w)

    def chunk_range(self, s: State, ws: Workers, ev: Event) -> tuple:
        """Terms (lo, hi): every chunk index a delivery of ``ev`` can carry lies in lo..hi (the packets the
        worker has sent so far)."""
        return z3.IntVal(0), self.waiting(s, ws, ev.worker)

    def sends_result(self, case: "Case"):
        """The step of ``case`` sends a result (multicast or unicast)."""
        mc, uc = case.info.get("mc"), case.info.get("uc")
        return z3.Or(mc, uc) if mc is not None else z3.BoolVal(False)

    def function_choices(self) -> dict[str, tuple]:
        """For each uninterpreted function the cases apply, the values the search tries for one application."""
        return {}


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

    def __init__(self, model: Model, ws: Workers, rlimit: int = QUERY_RLIMIT):
        self.model, self.ws, self.rlimit = model, ws, rlimit
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
        sol.set("rlimit", self.rlimit)
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
    deadlock: str = ""          # why the slot never completes again after the trace (see explore.deadlock)
    tail: list[TraceRow] = field(default_factory=list)   # rows after the violation that show the deadlock

    @property
    def steps(self) -> int:
        return len(self.rows)

    def to_json(self) -> dict[str, Any]:
        d = {"property": self.prop, "n": self.n, "steps": self.steps, "note": self.note,
             "trace": [r.__dict__ for r in self.rows]}
        if self.deadlock:
            d["deadlock"] = self.deadlock
            d["deadlock_trace"] = [r.__dict__ for r in self.tail]
        return d

    def format(self) -> list[str]:
        head = ("step", "worker", "slot", "copy", "chunk/tsi", "event", "switch action")
        rows = [head] + [(str(r.step), str(r.worker), str(r.slot), str(r.copy), str(r.chunk), r.event, r.action)
                         for r in self.rows + self.tail]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out = ["  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
        out.insert(1, "  " + "  ".join("-" * wd for wd in widths))
        if self.tail:
            out.insert(2 + len(self.rows), f"  violates {self.prop} at step {self.steps}; then:")
        out.append(f"  violates {self.prop}: {self.statement}" + (f" ({self.note})" if self.note else ""))
        if self.deadlock:
            out.append(f"  deadlock: {self.deadlock}")
        return out


_STEP_LOCALS: dict[str, dict[str, tuple]] = {}


def step_local(k, name: str, sort=None, choices: Callable[[int], tuple] | None = None):
    """A constant private to the step whose chunk index is ``k``: a free value of that one step.

    ``choices(depth)``: the values the explicit-state search
    (:mod:`p4gen.verify.explore`) tries for it in a search of ``depth`` steps,
    which the model must show to cover every outcome the constant can have.
    """
    c = z3.Const(f"{k}_{name}", sort or z3.IntSort())
    _STEP_LOCALS.setdefault(str(k), {})[str(c)] = (c, choices)
    return c


def step_locals(k) -> dict[str, tuple]:
    """{name: (constant, choices)} of the step whose chunk index is ``k``."""
    return dict(_STEP_LOCALS.get(str(k), {}))
