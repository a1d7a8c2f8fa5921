"""Counterexample search: explicit-state breadth-first search of a model on a concrete worker set.

:func:`search` runs a protocol model (:class:`~p4gen.verify.engine.Model`)
from its initial state on ``n`` concrete workers, every worker's events at
every step, and stops at the first step that violates a property.  States
are concrete (every register, every worker's chunk, every ghost), and a
state reached twice is explored once: what can happen next depends only on
the state.  Breadth first, so the trace found is a shortest one.

What one step may choose, and what the search tries:

* the event: every event of every worker, each split by its path through the
  decision table (the model's cases);
* the chunk index a delivery carries: every index the worker has sent
  (:meth:`~p4gen.verify.engine.Model.chunk_range`);
* a constant private to the step (:func:`~p4gen.verify.engine.step_local`):
  the values its ``choices`` name, which the model shows to cover every
  outcome (e.g. SwitchML's window bound: only whether a gap exceeds it
  matters, so the smallest bound and one beyond every gap);
* a value the model leaves to an uninterpreted function (OmniReduce: what a
  worker sends in a round): chosen when a step first depends on it, from
  :meth:`~p4gen.verify.engine.Model.function_choices`, and kept in the state;
* model-wide constants (the slot's tsi offset): every value their axioms
  allow, one search root each.

Each step runs the model's own terms, compiled once into Python
(:mod:`p4gen.verify.concrete`); a trace found is then checked step by step
against Z3 (every guard taken holds, the violated check fails), so the
compiled evaluation can never report a false trace.

The search is bounded by *work*, never by time: ``budget`` transitions
(one transition = one evaluated case of one event from one state).  The
same model, depth and budget give the same answer on any machine at any
load.  A search that stops at its budget says so (:attr:`Search.budget_hit`)
and how deep it got.

Deadlock.  A violation of a progress property (``progress``,
``contributions_kept``, ``retransmission_answered``: a packet the protocol
needs was lost to the slot) is followed by :func:`deadlock`: from the state
after the trace, allowing workers to take the results already on their way,
is there a state from which, once those results are lost, *no order* of the
workers' retransmissions (each worker resends the packet of the chunk it
waits for, as it does on a timeout) is ever answered?  If so, the
counterexample says so, with every worker's retransmission from that state
as the trace's tail: the slot never completes again, whatever the network
delivers of what the workers still send.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import z3

from .budget import SEARCH_STEPS
from .concrete import Compiler, Undecided, value_of
from .engine import Counterexample, Model, State, TraceRow, TraceStep, step_locals
from .workers import Workers

LIVENESS = ("progress", "contributions_kept", "retransmission_answered")
DEADLOCK_DEPTH = 8            # worker moves and retransmissions tried before the deadlock check gives up
CLOSURE_STATES = 20_000       # states of one retransmission closure


@dataclass
class Search:
    """What a counterexample search found: a trace, or how far it ruled traces out."""
    counterexample: Counterexample | None
    searched: int             # every trace of up to this many events was ruled out (when no counterexample)
    n: int
    steps: int = 0            # transitions evaluated
    budget: int = SEARCH_STEPS
    budget_hit: bool = False
    exhausted: bool = False   # every reachable state was explored: no trace of any length
    states: int = 0

    def reach(self) -> str:
        """How far a search without a trace went: what follows "no counterexample within"."""
        if self.exhausted:
            return f"any number of steps at n={self.n} (all {self.states} reachable states explored)"
        text = f"{self.searched} steps at n={self.n}"
        if self.budget_hit:
            text += f" (search budget of {self.budget:,} transitions used up)"
        return text


class _Event:
    """One event compiled: its cases' guards and bodies, the free values it takes."""

    def __init__(self, ex: "Explorer", j: int):
        ev = ex.events[j]
        self.j, self.ev = j, ev
        self.cases = ex.cases[j]
        terms = [t for c in self.cases for t in [c.guard] + c.post.leaves() + list(c.checks.values())]
        used = ex.compiler.constants(terms)
        self.slots = [i for i, (name, _) in enumerate(ex.free) if name in used]
        self.guards = [ex.compiler.compile([c.guard]) for c in self.cases]
        self.bodies = [ex.compiler.compile(c.post.leaves() + [c.checks[p] for p in ex.props]) for c in self.cases]
        self.sends = [ex.compiler.compile([ex.model.sends_result(c)]) for c in self.cases]
        lo, hi = ex.model.chunk_range(ex.pre, ex.ws, ev)
        self.krange = ex.compiler.compile([lo, hi])
        self.uses_k = "k" in used


class Explorer:
    """A model on ``n`` concrete workers, ready to be stepped on concrete states.

    A state is a tuple: the values of the generic state's leaves, then of the
    model-wide constants, then the values chosen so far for uninterpreted
    function applications (a sorted tuple of ((name, args), value)).
    """

    def __init__(self, model: Model, n: int, depth: int):
        self.model, self.ws, self.depth = model, Workers.exactly(n), depth
        ws = self.ws
        self.events = [e for w in ws.ids() for e in model.events(ws, w)]
        self.g, self.axioms = model.globals(ws)
        self.pre = State.fresh(model.schema, ws, "p")
        self.k = z3.Int("k")
        self.props = list(model.properties)
        self.cases = [model.cases(self.pre, ws, self.g, e, self.k, True) for e in self.events]
        self.leaves = self.pre.leaves()
        self.globals = list(self.g.values())
        locals_ = step_locals(self.k)
        self.free = [("k", None)] + [(name, ch) for name, (_c, ch) in sorted(locals_.items())]
        self.free_consts = [self.k] + [locals_[name][0] for name, _ in self.free[1:]]
        base = self.leaves + self.globals
        self.names = {str(c): i for i, c in enumerate(base + self.free_consts)}
        self.width = len(base)
        self.fchoices = model.function_choices()
        self.compiler = Compiler(self.names)
        self.compiled = [_Event(self, j) for j in range(len(self.events))]
        self.waiting = self.compiler.compile([model.waiting(self.pre, ws, w) for w in ws.ids()])
        terms = [t for cs in self.cases for c in cs for t in [c.guard] + c.post.leaves() + list(c.checks.values())]
        self.decls = self.compiler.functions(terms)
        self.enums = self.compiler.enums
        self.steps = 0

    # -- states -----------------------------------------------------------
    def roots(self) -> list[tuple]:
        """One initial state per assignment of the model-wide constants their axioms allow."""
        init = z3.And(*self.axioms, self.model.init(self.pre, self.ws, self.g))
        sol = z3.Solver()
        sol.add(init)
        out = []
        while sol.check() == z3.sat:
            m = sol.model()
            lits = [m.eval(t, model_completion=True) for t in self.leaves + self.globals]
            vals = tuple(value_of(x) for x in lits)
            self.enums.update({v: x for v, x in zip(vals, lits) if isinstance(v, str)})
            out.append(vals + ((),))
            if not self.globals or len(out) > 64:
                break
            sol.add(z3.Or([g != m.eval(g, model_completion=True) for g in self.globals]))
        if len(out) > 64:
            raise ValueError("the model-wide constants have more than 64 values; the search needs a few")
        for r in out:          # the initial condition must fix every leaf
            s2 = z3.Solver()
            s2.add(init, *[g == _lit(v, self.enums) for g, v in zip(self.globals, r[len(self.leaves):-1])])
            s2.add(z3.Or([t != _lit(v, self.enums) for t, v in zip(self.leaves, r)]))
            if s2.check() != z3.unsat:
                raise ValueError("the model's initial condition leaves a state value open")
        return out

    def choices(self, e: _Event, s: tuple):
        """Every assignment of the free values of one step of event ``e`` from state ``s``."""
        env = s[:-1] + (0,) * len(self.free)
        lo, hi = e.krange(env, _no_functions)
        doms = []
        for i, (name, ch) in enumerate(self.free):
            if i not in e.slots:
                doms.append((0,))
            elif name == "k":
                doms.append(tuple(range(lo, hi + 1)) if e.uses_k else (0,))
            else:
                doms.append(tuple(ch(self.depth)) if ch is not None else _missing(name))
        return itertools.product(*doms)

    def successors(self, e: _Event, s: tuple, ch: tuple):
        """(case index, post-state, checks) for every branch on undecided function values."""
        env = s[:-1] + ch
        todo = [s[-1]]
        while todo:
            decided = todo.pop(0)
            table = dict(decided)

            def fn(name, *args):
                key = (name, args)
                if key not in table:
                    raise Undecided(key)
                return table[key]
            self.steps += 1
            try:
                taken = next((i for i, g in enumerate(e.guards) if g(env, fn)[0]), None)
                if taken is None:
                    continue
                out = e.bodies[taken](env, fn)
            except Undecided as u:
                if u.key[0] not in self.fchoices:
                    raise KeyError(f"the model gives no choices for {u.key[0]}") from None
                todo += [tuple(sorted(decided + ((u.key, v),))) for v in self.fchoices[u.key[0]]]
                continue
            nl = len(self.leaves)
            post = out[:nl] + s[nl:-1] + (decided,)
            yield taken, post, out[nl:]

    # -- traces -------------------------------------------------------------
    def valuation(self, s: tuple, ch: tuple) -> Callable[[Any], Any]:
        """t -> the Z3 literal of term t in state s with free values ch (Z3's own evaluation)."""
        pairs = [(c, _lit(v, self.enums)) for c, v in zip(self.leaves + self.globals + self.free_consts, s[:-1] + ch)]
        apps = [(self.decls[name](*[_lit(a, self.enums) for a in args]), _lit(v, self.enums))
                for (name, args), v in s[-1] if name in self.decls]

        def val(t):
            r = z3.simplify(z3.substitute(t, *pairs))
            if apps:
                r = z3.simplify(z3.substitute(r, *apps))
            return r
        return val

    def trace(self, path: list[tuple], history: list[TraceStep], prop: str | None = None) -> list[TraceRow]:
        """Rows of ``path`` ((state, event index, choice, case index, post) per step), numbered on from
        ``history`` (extended), each step checked against Z3: its case's guard holds and, with ``prop``,
        the last step violates ``prop``."""
        rows: list[TraceRow] = []
        for i, (s, j, ch, ci, post) in enumerate(path):
            case = self.cases[j][ci]
            val = self.valuation(s[:-1] + (post[-1],), ch)
            if not z3.is_true(val(case.guard)):
                raise RuntimeError(f"internal: step {len(history) + 1} of a trace is not a step of the model in Z3")
            if prop is not None and i == len(path) - 1 and not z3.is_false(val(case.checks[prop])):
                raise RuntimeError(f"internal: the trace's last step does not violate {prop} in Z3")
            st = TraceStep(len(history) + 1, self.events[j], ch[0], case.label, self.pre, case.post, case.info, val,
                           history)
            rows.append(self.model.trace_row(st))
            history.append(st)
        return rows


def _no_functions(name, *args):
    raise Undecided((name, args))


def _missing(name: str):
    raise KeyError(f"step constant {name} has no choices for the search")


def _lit(v, enums: dict[str, Any]):
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, int):
        return z3.IntVal(v)
    return enums[v]


def search(model: Model, n: int, depth: int, props: list[str] | None = None, stop=None,
           budget: int = SEARCH_STEPS) -> Search:
    """A shortest trace (up to ``depth`` events) from the initial state that violates one of ``props``.

    ``budget``: transitions before the search gives up; ``stop``: an object
    whose ``is_set()`` ends the search early (its result is then partial).
    """
    props = list(props or model.properties)
    ex = Explorer(model, n, depth)
    idx = [ex.props.index(p) for p in props]
    roots = ex.roots()
    parent: dict[tuple, tuple | None] = {r: None for r in roots}
    frontier = roots
    for d in range(1, depth + 1):
        nxt = []
        for s in frontier:
            if stop is not None and stop.is_set():
                return Search(None, d - 1, n, ex.steps, budget, states=len(parent))
            for e in ex.compiled:
                for ch in ex.choices(e, s):
                    for ci, post, checks in ex.successors(e, s, ch):
                        bad = next((p for p, i in zip(props, idx) if not checks[i]), None)
                        if bad is not None:
                            path = _path(parent, s) + [(s, e.j, ch, ci, post)]
                            return Search(_counterexample(ex, path, bad, budget), d, n, ex.steps, budget,
                                          states=len(parent))
                        if post not in parent:
                            parent[post] = (s, e.j, ch, ci)
                            nxt.append(post)
                    if ex.steps > budget:
                        return Search(None, d - 1, n, ex.steps, budget, budget_hit=True, states=len(parent))
        if not nxt:
            return Search(None, d, n, ex.steps, budget, exhausted=True, states=len(parent))
        frontier = nxt
    return Search(None, depth, n, ex.steps, budget, states=len(parent))


def bmc(model: Model, n: int, depth: int, props: list[str] | None = None, stop=None) -> Counterexample | None:
    """:func:`search`'s trace, or None when none has up to ``depth`` events."""
    return search(model, n, depth, props, stop).counterexample


def _path(parent: dict, s: tuple) -> list[tuple]:
    out = []
    while parent[s] is not None:
        p, j, ch, ci = parent[s]
        out.append((p, j, ch, ci, s))
        s = p
    return out[::-1]


def _counterexample(ex: Explorer, path: list[tuple], prop: str, budget: int) -> Counterexample:
    history: list[TraceStep] = []
    rows = ex.trace(path, history, prop)
    cex = Counterexample(prop, ex.ws.n, rows, ex.model.properties[prop])
    if prop in LIVENESS:
        found = deadlock(ex, path[-1][-1], budget)
        if found is not None:
            tail, cex.deadlock = found
            cex.tail = ex.trace(tail, history)
    return cex


# ---------------------------------------------------------------------------
# deadlock

def _retransmissions(ex: Explorer, s: tuple):
    """(step, answered) for every worker's resend of the packet of the chunk it waits for from ``s`` (every
    copy and window choice); ``answered``: the switch sends a result (which that worker accepts)."""
    env = s[:-1] + (0,) * len(ex.free)
    waits = ex.waiting(env, _no_functions)
    for e in ex.compiled:
        if e.ev.kind != "deliver":
            continue
        for ch in ex.choices(e, s):
            if ch[0] != waits[e.ev.worker]:
                continue
            for ci, post, _checks in ex.successors(e, s, ch):
                env2 = s[:-1] + ch
                yield (s, e.j, ch, ci, post), bool(e.sends[ci](env2, _table_fn(post))[0])


def _table_fn(post: tuple):
    table = dict(post[-1])

    def fn(name, *args):
        return table[(name, args)]
    return fn


def _stuck(ex: Explorer, s: tuple) -> int | None:
    """The number of states the workers' retransmissions can reach from ``s`` when none of those
    retransmissions is ever answered; None when one is (or the states are too many to tell)."""
    seen = {s}
    todo = [s]
    while todo:
        x = todo.pop()
        for step, answered in _retransmissions(ex, x):
            if answered:
                return None
            post = step[-1]
            if post not in seen:
                if len(seen) >= CLOSURE_STATES:
                    return None
                seen.add(post)
                todo.append(post)
    return len(seen)


def deadlock(ex: Explorer, s: tuple, budget: int) -> tuple[list[tuple], str] | None:
    """From state ``s`` (after a trace), a way to a deadlock state: (the steps to it, then one retransmission
    of every worker; the reason in words), or None when none turns up within :data:`DEADLOCK_DEPTH` steps
    (of workers taking a result or retransmitting).

    A deadlock state: the results already on their way may be lost (the network may lose any packet), and
    then, in whatever order the workers' retransmissions arrive, the switch never answers one."""
    parent: dict[tuple, tuple | None] = {s: None}
    frontier = [s]
    for _d in range(DEADLOCK_DEPTH + 1):
        nxt = []
        for x in frontier:
            size = _stuck(ex, x)
            if size is not None:
                path = _path(parent, x)
                tail, y = [], x
                for w in ex.ws.ids():
                    step = next((st for st, _a in _retransmissions(ex, y) if ex.events[st[1]].worker == w), None)
                    if step is not None:
                        tail.append(step)
                        y = step[-1]
                where = "the end of the trace" if not path else f"step {len(path)} after it"
                text = (f"from {where} on, once the results already on their way are lost, the switch answers "
                        f"no worker's retransmission of the chunk it waits for, in whatever order they arrive "
                        f"({size} state{'s' if size != 1 else ''} reachable that way): the slot never completes "
                        f"again")
                return path + tail, text
            for step in _worker_steps(ex, x):
                post = step[-1]
                if post not in parent:
                    parent[post] = step[:4]
                    nxt.append(post)
            if ex.steps > 2 * budget:
                return None
        frontier = nxt
    return None


def _worker_steps(ex: Explorer, s: tuple):
    """Retransmissions, and workers taking a result (the model's events that are not deliveries)."""
    for step, _a in _retransmissions(ex, s):
        yield step
    for e in ex.compiled:
        if e.ev.kind.startswith("deliver"):
            continue
        for ch in ex.choices(e, s):
            for ci, post, _checks in ex.successors(e, s, ch):
                yield (s, e.j, ch, ci, post)
