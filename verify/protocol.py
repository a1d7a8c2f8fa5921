"""Slot-reuse protocol proofs: a transition system built from the Plan's decision table.

The model is ONE aggregation slot.  One slot suffices: every register is
indexed by the slot (bitmap word pairs) or by (slot, copy) (chunk, counter,
exponent, values; recirculation passes use ``(slot_copy << pass_bits) | p``,
still private to the slot), a packet for slot j reads and writes only slot
j's entries, and a worker's behaviour on slot j (send chunk c + s after the
result of chunk c, retransmit the outstanding chunk on timeout) depends
only on results for slot j.  The whole switch is therefore an interleaving
of independent per-slot systems, and a safety property of one slot holds
for all of them.  This is also why proof time does not depend on ``slots``.

State (one slot, n workers):

* switch: per copy v in {0, 1} the bitmap word (the pair holds both copies),
  counter (an integer kept in 0..2**32-1, so the op arithmetic is exact),
  chunk register (hardened), and the value and exponent registers as
  :class:`~p4gen.verify.z3alg.ShareVec` (for each worker, which of its
  contributions the sum, resp. the max, covers);
* worker w: ``cur[w]`` (the chunk index k it waits for on this slot: chunk
  ``slot + k * slots``, copy ``k mod 2``), ``avail[w]`` (a result labelled
  ``cur[w]`` has been sent to w), ``abad[w]`` (one such result was not the
  exact sum), ``stale[w]`` (a result for an older chunk may still reach w);
* network: every packet w ever sent (chunks ``0..cur[w]``) may arrive any
  number of times in any order (loss, duplication, reordering).  Under the
  FIFO assumption (reference variant) ``lo[w]``, the chunk of w's last
  delivered packet, bounds what may still arrive: ``lo[w] <= k``.  Results
  travel without FIFO in every mode: any result sent to w may arrive late or
  twice; workers check its chunk label.

Events: ``deliver(w, k, v)`` (w's packet for chunk k on copy v reaches the
switch; the switch runs the decision table and emits its outcome),
``recv(w)`` (w accepts the result labelled ``cur[w]`` and sends its next
chunk on the flipped copy), and, only for workers that do not check labels,
``recv_stale(w)``.  The switch step is the table: every step of
``plan.data["decision"]`` is taken entry by entry from
``p4gen.decision.expand`` (the const entries of the P4 tables), each entry's
op is evaluated with the ``p4gen.ops`` definition over
:class:`~p4gen.verify.z3alg.Z3Algebra`, and the entries select among the
results.  The exponent rows are run the same way: the packet's exponent
stands for its contribution, and ``exponent_op``'s max covers the
contributions of both operands.

Proof: plain induction with a strengthening invariant (init => Inv; Inv and
one event => Inv'), one solver query per clause (a push/pop scope on a
solver holding the hypothesis of that event path), and each property as a
query on Inv and one event.  A delivery is split by its path through the
table (:class:`Path`: the entry selections, exclusive and exhaustive, so the
split is a tautology); along a path the register updates are straight-line
terms.  The counter clauses use popcount as an uninterpreted function; each
query assumes instances of lemmas that :func:`prove_popcount_lemmas` proves
for the real popcount over all 32-bit words (sound: the real popcount is one
interpretation satisfying them), so Z3 never has to compare two adder
chains over the bitmap.
Worker symmetry: the model and the invariant treat all workers alike (every
per-worker clause is instantiated for every worker, the masks are a
permutation of bit positions), so it suffices to check the events of worker
0, and for per-worker clauses the goal for worker 0 and for one other worker
(worker 1 represents all of 1..n-1, which worker 0's events treat alike).
A failed induction query only yields a CTI; counterexamples come from bounded
model checking from the initial state, with every worker's events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from p4gen import decision, ops

from .z3alg import Z3, ShareVec

WORD = 32
QUERY_TIMEOUT_MS = 120_000

PROPERTIES: dict[str, str] = {
    "exact_result": "every result the switch sends is the sum of exactly one contribution of every worker "
                    "for the chunk it is labelled with, its exponent is the max over exactly those "
                    "contributions, and no label is ahead of a recipient",
    "exact_accept": "a worker accepts only the exact sum (and max exponent) for the chunk it waits for",
    "copy_reuse": "a copy takes chunk c's contributions only after every worker holds the result of "
                  "the copy's previous chunk (c - 2*slots)",
    "retransmission_harmless": "a packet whose contribution the sum already holds never changes the sum "
                               "or the exponent",
    "retransmission_answered": "a worker still waiting for a chunk whose sum is complete gets the result "
                               "when it retransmits (a lost result never strands a worker)",
}


@dataclass(frozen=True)
class ModelConfig:
    n: int
    table: dict[str, Any]
    fifo: bool
    copy_rule: str = "round"       # round: k mod 2 | zero: always 0 | toggle: either copy (flip per send)
    label_check: bool = True
    counter_delta: int = 0         # num_workers the counter compares with = n + delta
    slots: int = 512               # display only
    value_width: int = 32

    @property
    def hardened(self) -> bool:
        return decision.step(self.table, "chunk") is not None


@dataclass
class State:
    bm: list
    cnt: list
    chk: list
    sh: list
    ex: list
    cur: list
    lo: list
    avail: list
    abad: list
    stale: list
    top: Any = None    # ghost: the newest chunk index any worker is on (max of cur)

    @classmethod
    def fresh(cls, p: str, n: int) -> "State":
        I, B = z3.Int, z3.Bool
        return cls(bm=[z3.BitVec(f"{p}_bm{v}", WORD) for v in (0, 1)],
                   cnt=[I(f"{p}_cnt{v}") for v in (0, 1)],
                   chk=[I(f"{p}_chk{v}") for v in (0, 1)],
                   sh=[ShareVec.fresh(f"{p}_val{v}", n) for v in (0, 1)],
                   ex=[ShareVec.fresh(f"{p}_exp{v}", n) for v in (0, 1)],
                   cur=[I(f"{p}_cur{w}") for w in range(n)],
                   lo=[I(f"{p}_lo{w}") for w in range(n)],
                   avail=[B(f"{p}_avail{w}") for w in range(n)],
                   abad=[B(f"{p}_abad{w}") for w in range(n)],
                   stale=[B(f"{p}_stale{w}") for w in range(n)],
                   top=I(f"{p}_top"))

    def clone(self) -> "State":
        return State(*[list(getattr(self, f)) for f in ("bm", "cnt", "chk", "sh", "ex", "cur", "lo", "avail", "abad", "stale")],
                     top=self.top)

    def eq_terms(self, o: "State"):
        t = []
        for f in ("bm", "cnt", "chk", "cur", "lo", "avail", "abad", "stale"):
            t += [a == b for a, b in zip(getattr(self, f), getattr(o, f))]
        t += [a.eq_terms(b) for a, b in zip(self.sh + self.ex, o.sh + o.ex)]
        t.append(self.top == o.top)
        return z3.And(t)


def init_state(s: State):
    n = len(s.cur)
    t = [s.bm[v] == 0 for v in (0, 1)] + [s.cnt[v] == 0 for v in (0, 1)] + [s.chk[v] == 0 for v in (0, 1)]
    t += [x.is_empty() for v in (0, 1) for x in s.sh[v].items + s.ex[v].items]
    t.append(s.top == 0)
    for w in range(n):
        t += [s.cur[w] == 0, s.lo[w] == -1, z3.Not(s.avail[w]), z3.Not(s.abad[w]), z3.Not(s.stale[w])]
    return z3.And(t)


def off_axiom(off, slots: int):
    """tsi = slot + k*slots is order-isomorphic to k + off, off = 0 (slot 0) or 1 (slot > 0)."""
    return off == 0 if slots <= 1 else z3.Or(off == 0, off == 1)


@dataclass(frozen=True)
class Event:
    kind: str          # deliver | recv | recv_stale
    worker: int
    copy: int = 0


def events_for(cfg: ModelConfig, w: int) -> list[Event]:
    ev = [Event("deliver", w, 0)]
    if cfg.copy_rule != "zero":
        ev.append(Event("deliver", w, 1))
    ev.append(Event("recv", w))
    if not cfg.label_check:
        ev.append(Event("recv_stale", w))
    return ev


def _select(keys: list[str], rules: list[dict], obs: dict[str, Any], label: Callable[[dict], Any]):
    """Group a step's expanded const entries by what they select: {selection: condition}, in entry order."""
    groups: dict[Any, list] = {}
    eqs: dict[tuple[str, str], Any] = {}
    for combo, rule in decision.expand(keys, rules):
        for key, val in combo.items():
            if (key, val) not in eqs:
                eqs[key, val] = obs[key] == decision.CODES[key][val]
        cond = z3.And([eqs[key, val] for key, val in combo.items()])
        groups.setdefault(label(rule), []).append(cond)
    return {sel: (conds[0] if len(conds) == 1 else z3.Or(conds)) for sel, conds in groups.items()}


@dataclass
class Path:
    """One way through the decision table's register steps.

    ``cond`` is the conjunction of the entry selections it takes.  Step by
    step, the entries of a step are tried in the order ``_select`` lists
    them and the last one is the default (taken when none of the others is),
    so the paths of a packet are mutually exclusive and together cover every
    state: splitting a query by path is a tautological case split.  Along a
    path every register's new value is the op's result with no selection
    term around it, so a bit the op does not touch stays the very same term.
    """
    cond: list
    reg: dict
    obs: dict
    ops: dict


def _feasible(conds: list) -> bool:
    sol = z3.Solver()
    sol.set("timeout", 2_000)
    sol.add(conds)
    return sol.check() != z3.unsat


def table_paths(cfg: ModelConfig, s: State, off, w: int, v: int, k, prune: bool = False) -> list[Path]:
    """Run the decision table for worker w's packet (chunk k, copy v), one :class:`Path` per entry sequence.

    Paths whose condition simplifies to false are left out (they are never
    taken); with ``prune`` so are paths whose condition Z3 shows unsatisfiable.
    """
    n = cfg.n
    tsi = k + off
    mask = z3.BitVecVal(1 << (w % WORD), WORD)
    n_c = Z3.const(n + cfg.counter_delta, 32)
    pkt = ShareVec.packet(n, w, k)
    reg0 = {"chk": s.chk[v], "this": s.bm[v], "other": s.bm[1 - v], "cnt": s.cnt[v], "val": s.sh[v],
            "carried": pkt, "exp": s.ex[v], "exp_carried": pkt}
    paths = [Path([], reg0, {}, {})]
    for stp in cfg.table["steps"]:
        role = stp["role"]
        nxt: list[Path] = []
        for pa in paths:
            choices = _select(stp["keys"], stp["rules"], pa.obs, lambda r: r["op"])
            sels = list(choices)
            for i, op in enumerate(sels):
                taken = [z3.Not(choices[x]) for x in sels[:i]] + ([choices[op]] if i < len(sels) - 1 else [])
                taken = [z3.simplify(t) for t in taken]
                if any(z3.is_false(t) for t in taken):
                    continue
                cond = pa.cond + [t for t in taken if not z3.is_true(t)]
                if prune and taken and not _feasible(cond):
                    continue
                reg, obs = dict(pa.reg), dict(pa.obs)
                if role == "chunk":
                    reg["chk"], y = ops.chunk_op(op, reg["chk"], tsi, Z3)
                elif role == "bitmap":
                    reg["this"], reg["other"], seen = ops.bitmap_op(op, reg["this"], reg["other"], mask, WORD, Z3)
                    y = z3.If(seen, Z3.const(1, 8), Z3.const(0, 8))
                elif role == "counter":
                    reg["cnt"], y = ops.counter_op(op, reg["cnt"], n_c, 32, Z3)
                elif role == "values":
                    reg["val"], reg["carried"] = ops.values_op(op, reg["val"], pkt, cfg.value_width, Z3)
                    y = None
                elif role == "exponent":
                    # the packet's exponent stands for its contribution, like its values
                    reg["exp"], reg["exp_carried"] = ops.exponent_op(op, reg["exp"], pkt, Z3)
                    y = None
                else:
                    raise KeyError(f"register role {role!r}")
                if stp["yields"]:
                    obs[stp["yields"]] = z3.simplify(y)
                nxt.append(Path(cond, reg, obs, {**pa.ops, role: op}))
        paths = nxt
    return paths


def _outcome(cfg: ModelConfig, pa: Path) -> dict[str, Any]:
    oc = cfg.table["outcome"]
    outs = _select(oc["keys"], oc["rules"], pa.obs, lambda r: (r["action"], r["stat"]))
    sels = list(outs)
    # first-listed selection wins, the last one is the default (as for the register steps)
    mc, uc, stat = z3.BoolVal(False), z3.BoolVal(False), None
    for i in reversed(range(len(sels))):
        (a, st), c = sels[i], outs[sels[i]]
        if i == len(sels) - 1:
            mc, uc, stat = z3.BoolVal(a == "multicast"), z3.BoolVal(a == "unicast"), z3.IntVal(decision.STATS.index(st))
        else:
            mc = z3.If(c, z3.BoolVal(a == "multicast"), mc)
            uc = z3.If(c, z3.BoolVal(a == "unicast"), uc)
            stat = z3.If(c, z3.IntVal(decision.STATS.index(st)), stat)
    return {"mc": z3.simplify(mc), "uc": z3.simplify(uc), "stat": z3.simplify(stat),
            "carried": pa.reg["carried"], "exp_carried": pa.reg["exp_carried"], "contrib": z3.BoolVal(pa.ops.get("values") in ("write", "add"))}


def _apply(s: State, v: int, reg: dict) -> State:
    post = s.clone()
    post.chk[v], post.bm[v], post.bm[1 - v], post.cnt[v] = reg["chk"], reg["this"], reg["other"], reg["cnt"]
    post.sh, post.ex = list(s.sh), list(s.ex)
    post.sh[v], post.ex[v] = reg["val"], reg["exp"]
    return post


def switch_cases(cfg: ModelConfig, s: State, off, w: int, v: int, k, prune: bool = False):
    """[(label, path condition, post-state, info)], one per path through the table."""
    out = []
    for pa in table_paths(cfg, s, off, w, v, k, prune):
        cond = z3.And(pa.cond) if pa.cond else z3.BoolVal(True)
        label = "/".join(pa.ops[r] for r in pa.ops)
        out.append((label, cond, _apply(s, v, pa.reg), _outcome(cfg, pa)))
    return out


def switch_step(cfg: ModelConfig, s: State, off, w: int, v: int, k):
    """Run the decision table for worker w's packet (chunk k, copy v). Return (post, info).

    The paths, merged by their conditions (exclusive and exhaustive, so the
    last one can be the default).
    """
    cases = switch_cases(cfg, s, off, w, v, k)
    _, _, post, info = cases[-1]
    post = post.clone()
    post.sh, post.ex = list(post.sh), list(post.ex)
    info = dict(info)
    for _, cond, p2, i2 in reversed(cases[:-1]):
        for f in ("chk", "bm", "cnt"):
            getattr(post, f)[:] = [Z3.ite(cond, a, b) for a, b in zip(getattr(p2, f), getattr(post, f))]
        post.sh = [Z3.ite(cond, a, b) for a, b in zip(p2.sh, post.sh)]
        post.ex = [Z3.ite(cond, a, b) for a, b in zip(p2.ex, post.ex)]
        for key in info:
            info[key] = Z3.ite(cond, i2[key], info[key])
    return post, info


def _deliver(cfg: ModelConfig, s: State, ev: "Event", k, post: State, info: dict):
    n, w, v = cfg.n, ev.worker, ev.copy
    checks = {p: z3.BoolVal(True) for p in PROPERTIES}
    guard = [k >= 0, k <= s.cur[w]]
    if cfg.fifo:
        guard.append(k >= s.lo[w])
    if cfg.copy_rule == "round":
        guard.append(k % 2 == v)
    elif cfg.copy_rule == "zero" and v != 0:
        guard.append(z3.BoolVal(False))
    post.lo[w] = k
    mc, uc = info["mc"], info["uc"]
    good = z3.And(info["carried"].exact(k), info["exp_carried"].exact(k))
    ahead = []
    post.avail, post.abad, post.stale = list(s.avail), list(s.abad), list(s.stale)
    for u in range(n):
        rec = z3.Or(mc, uc) if u == w else mc
        post.avail[u] = z3.Or(s.avail[u], z3.And(rec, k == s.cur[u]))
        post.abad[u] = z3.Or(s.abad[u], z3.And(rec, k == s.cur[u], z3.Not(good)))
        post.stale[u] = z3.Or(s.stale[u], z3.And(rec, k < s.cur[u]))
        ahead.append(z3.Implies(rec, k <= s.cur[u]))
    checks["exact_result"] = z3.Implies(z3.Or(mc, uc), z3.And(good, *ahead))
    checks["retransmission_harmless"] = z3.Implies(s.sh[v].items[w].is_one(k),
                                                          z3.And(post.sh[v].same(s.sh[v]), post.ex[v].same(s.ex[v])))
    checks["copy_reuse"] = z3.Implies(info["contrib"], z3.And([s.cur[u] >= k - 1 for u in range(n)]))
    checks["retransmission_answered"] = z3.Implies(z3.And(k == s.cur[w], s.sh[v].exact(k)), z3.Or(mc, uc))
    return z3.And(guard), post, checks


def _receive(cfg: ModelConfig, s: State, ev: "Event"):
    w = ev.worker
    checks = {p: z3.BoolVal(True) for p in PROPERTIES}
    post = s.clone()
    if ev.kind == "recv":
        guard = s.avail[w]
        checks["exact_accept"] = z3.Not(s.abad[w])
    elif ev.kind == "recv_stale":
        guard = s.stale[w]
        checks["exact_accept"] = z3.BoolVal(False)
    else:
        raise KeyError(ev.kind)
    post.cur[w] = s.cur[w] + 1
    post.top = z3.If(s.cur[w] + 1 > s.top, s.cur[w] + 1, s.top)
    post.avail[w] = z3.BoolVal(False)
    post.abad[w] = z3.BoolVal(False)
    post.stale[w] = z3.BoolVal(True)
    return guard, post, checks


def transition(cfg: ModelConfig, s: State, off, ev: "Event", k):
    """(guard, post-state, {property: check}, info) of one event."""
    if ev.kind == "deliver":
        post, info = switch_step(cfg, s, off, ev.worker, ev.copy, k)
        guard, post, checks = _deliver(cfg, s, ev, k, post, info)
        return guard, post, checks, info
    guard, post, checks = _receive(cfg, s, ev)
    return guard, post, checks, {}


def transition_cases(cfg: ModelConfig, s: State, off, ev: "Event", k):
    """The event split by table path: [(guard, path label, post-state, checks)]."""
    if ev.kind != "deliver":
        guard, post, checks = _receive(cfg, s, ev)
        return [(guard, "", post, checks)]
    out = []
    for label, cond, post, info in switch_cases(cfg, s, off, ev.worker, ev.copy, k, prune=True):
        guard, post, checks = _deliver(cfg, s, ev, k, post, info)
        out.append((z3.And(guard, cond), label, post, checks))
    return out


# ---------------------------------------------------------------------------
# popcount: an uninterpreted function plus proved lemma instances

POPCOUNT = z3.Function("popcount", z3.BitVecSort(WORD), z3.IntSort())


def popcount_real(x):
    """The number of set bits of the word ``x`` (an integer term)."""
    return z3.Sum([z3.If(z3.Extract(i, i, x) == 1, 1, 0) for i in range(WORD)])


def _lemma_schemas(n: int, w: int = 0) -> dict[str, Callable[..., Any]]:
    """Facts about popcount ``pc`` at a word ``x`` (``m`` = worker w's bit, ``all`` = the n workers' bits)."""
    m = z3.BitVecVal(1 << (w % WORD), WORD)
    full = z3.BitVecVal((1 << n) - 1, WORD)
    bit = lambda x: z3.Extract(w % WORD, w % WORD, x) == 1  # noqa: E731
    return {
        "range": lambda pc, x: z3.And(pc(x) >= 0, pc(x) <= WORD),
        "zero": lambda pc, x: (pc(x) == 0) == (x == 0),
        "full": lambda pc, x: z3.Implies(x & ~full == 0, z3.And(pc(x) <= n, (pc(x) == n) == (x == full))),
        "set": lambda pc, x: z3.Implies(z3.Not(bit(x)), pc(x | m) == pc(x) + 1),
        "clear": lambda pc, x: z3.Implies(bit(x), pc(x & ~m) == pc(x) - 1),
        "single": lambda pc, x: pc(m) == 1,
    }


def prove_popcount_lemmas(n: int, w: int = 0) -> dict[str, bool]:
    """Every schema of :func:`_lemma_schemas` holds for the real popcount and every 32-bit word.

    This is what makes the popcount abstraction sound: an induction query
    states the counter clauses over the uninterpreted :data:`POPCOUNT` and
    assumes only instances of these schemas about it.  The real popcount is
    one interpretation that satisfies every instance, so if the query has no
    model for any interpretation it has none for the real popcount either.
    """
    x = z3.BitVec("x", WORD)
    out = {}
    for name, lem in _lemma_schemas(n, w).items():
        sol = z3.Solver()
        sol.add(z3.Not(lem(popcount_real, x)))
        out[name] = sol.check() == z3.unsat
    return out


def popcount_lemmas(n: int, pre: list, post: list, w: int = 0) -> list:
    """Instances of the popcount schemas for a query: every schema at every bitmap word of the pre- and
    post-state, the set/clear schemas at the pre-state words (their results are the post-state words of
    worker w's set / clear ops)."""
    sch = _lemma_schemas(n, w)
    words = []
    for x in list(pre) + list(post):
        if not any(x.eq(y) for y in words):
            words.append(x)
    out = [sch["single"](POPCOUNT, None)]
    for x in words:
        out += [sch[k](POPCOUNT, x) for k in ("range", "zero", "full")]
    for x in pre:
        out += [sch[k](POPCOUNT, x) for k in ("set", "clear")]
    return out


# ---------------------------------------------------------------------------
# strengthening invariants

@dataclass(frozen=True)
class Clause:
    name: str
    per_worker: bool
    fn: Callable[..., Any]     # fn(d, w) or fn(d)


class Derived:
    """Terms derived from a state: M = the ghost ``top`` (max cur, see the ``top`` clauses)."""

    def __init__(self, cfg: ModelConfig, s: State, off):
        self.cfg, self.s, self.off, self.n = cfg, s, off, cfg.n
        self.M = s.top
        self.all = z3.BitVecVal((1 << self.n) - 1, WORD)

    def bit(self, v: int, w: int):
        # simplify pushes the extraction through the op selection (If), so a
        # bit an event does not touch stays syntactically the same term
        return z3.simplify(z3.Extract(w, w, self.s.bm[v])) == 1

    def popcount(self, v: int):
        """Number of set bits of copy v's word: the uninterpreted :data:`POPCOUNT` (see :func:`popcount_lemmas`)."""
        return POPCOUNT(self.s.bm[v])

    def count(self, v: int):
        return self.s.cnt[v]

    def per_copy(self, f: Callable[[int, int], Any]):
        """f(p, q) for the copy p = M mod 2 of the newest chunk and the other copy q."""
        return z3.And([z3.Implies(self.M % 2 == p, f(p, 1 - p)) for p in (0, 1)])


def _share_desc(sh, choices):
    """choices: list of (cond, rnd or None for empty), last cond ignored (default)."""
    *front, (_, last) = choices
    out = sh.is_empty() if last is None else sh.is_one(last)
    for cond, r in reversed(front):
        out = z3.If(cond, sh.is_empty() if r is None else sh.is_one(r), out)
    return out


def top_bounds(d, w):
    return z3.And(d.s.cur[w] <= d.M, d.s.cur[w] >= d.M - 1)


def top_reached(d):
    return z3.Or([c == d.M for c in d.s.cur])


def exponent_shares(d, w):
    """Each copy's exponent register covers exactly the contributions its value register holds.

    Why it holds: in both tables the exponent rows write where the value rows
    write (the round's first packet), take the max where they add (a packet
    whose bit was clear), and otherwise leave the register alone.  Max and add
    cover the same contributions except when a contribution would be taken
    twice, which the bitmap rules out (the value-share clauses).  Like every
    clause it is checked, not assumed: base case and every event.
    """
    return z3.And([d.s.ex[v].items[w].same(d.s.sh[v].items[w]) for v in (0, 1)])


def reference_invariant() -> list[Clause]:
    def ranges(d, w):
        s, M = d.s, d.M
        return z3.And(s.cur[w] >= 0, s.cur[w] >= M - 1, s.lo[w] >= M - 1, s.lo[w] <= s.cur[w], s.lo[w] >= -1)

    def bits(d, w):
        lo = d.s.lo[w]
        return z3.And([d.bit(v, w) == z3.And(lo >= 0, lo % 2 == v) for v in (0, 1)])

    def unused_bits(d):
        return z3.And([d.s.bm[v] & ~d.all == 0 for v in (0, 1)])

    def any_m(d):
        return z3.Or([lo == d.M for lo in d.s.lo])

    def current_shares(d, w):
        M, lo = d.M, d.s.lo[w]
        a = any_m(d)
        return d.per_copy(lambda p, q: _share_desc(d.s.sh[p].items[w],
                                                   [(lo == M, M), (a, None), (M >= 2, M - 2), (True, None)]))

    def current_counter(d):
        return d.per_copy(lambda p, q: d.count(p) == z3.If(d.s.bm[p] == d.all, 0, d.popcount(p)))

    def previous_shares(d, w):
        return d.per_copy(lambda p, q: _share_desc(d.s.sh[q].items[w], [(d.M >= 1, d.M - 1), (True, None)]))

    def previous_counter(d):
        return d.per_copy(lambda p, q: d.s.cnt[q] == 0)

    def results(d, w):
        s = d.s
        all_m = z3.And([lo == d.M for lo in s.lo])
        return z3.And(z3.Implies(s.avail[w], z3.Or(s.cur[w] == d.M - 1, all_m)), z3.Not(s.abad[w]))

    return [Clause("top_bounds", True, top_bounds), Clause("top_reached", False, top_reached),
            Clause("ranges", True, ranges), Clause("bitmap", True, bits), Clause("unused_bits", False, unused_bits),
            Clause("current_copy_shares", True, current_shares), Clause("current_copy_counter", False, current_counter),
            Clause("previous_copy_shares", True, previous_shares),
            Clause("previous_copy_counter", False, previous_counter), Clause("exponent_shares", True, exponent_shares),
            Clause("results", True, results)]


def hardened_invariant() -> list[Clause]:
    def started(d, p):
        return d.s.chk[p] == d.M + d.off

    def ranges(d, w):
        s = d.s
        return z3.And(s.cur[w] >= 0, s.cur[w] >= d.M - 1)

    def unused_bits(d):
        return z3.And([d.s.bm[v] & ~d.all == 0 for v in (0, 1)])

    def current_copy(d):
        s, M, off, n = d.s, d.M, d.off, d.n

        def f(p, q):
            st = started(d, p)
            old = z3.Or(z3.And(M >= 2, s.chk[p] == M - 2 + off, s.bm[p] == d.all, s.cnt[p] == n),
                        z3.And(M < 2, s.chk[p] == 0, M + off > 0, s.bm[p] == 0, s.cnt[p] == 0))
            return z3.And(z3.Implies(st, d.count(p) == d.popcount(p)), z3.Implies(z3.Not(st), old))
        return d.per_copy(f)

    def current_shares(d, w):
        s, M = d.s, d.M

        def f(p, q):
            st, b = started(d, p), d.bit(p, w)
            return z3.And(_share_desc(s.sh[p].items[w], [(z3.And(st, b), M), (st, None), (M >= 2, M - 2), (True, None)]),
                          z3.Implies(z3.And(st, b), s.cur[w] == M))
        return d.per_copy(f)

    def previous_copy(d):
        s, M, off, n = d.s, d.M, d.off, d.n
        return d.per_copy(lambda p, q: z3.If(
            M >= 1, z3.And(s.chk[q] == M - 1 + off, s.bm[q] == d.all, s.cnt[q] == n),
            z3.And(s.chk[q] == 0, s.bm[q] == 0, s.cnt[q] == 0)))

    def previous_shares(d, w):
        return d.per_copy(lambda p, q: _share_desc(d.s.sh[q].items[w], [(d.M >= 1, d.M - 1), (True, None)]))

    def results(d, w):
        s = d.s
        complete = d.per_copy(lambda p, q: z3.And(started(d, p), s.bm[p] == d.all))
        return z3.And(z3.Implies(s.avail[w], z3.Or(s.cur[w] == d.M - 1, complete)), z3.Not(s.abad[w]))

    return [Clause("top_bounds", True, top_bounds), Clause("top_reached", False, top_reached),
            Clause("ranges", True, ranges), Clause("unused_bits", False, unused_bits),
            Clause("current_copy", False, current_copy), Clause("current_copy_shares", True, current_shares),
            Clause("previous_copy", False, previous_copy), Clause("previous_copy_shares", True, previous_shares),
            Clause("exponent_shares", True, exponent_shares), Clause("results", True, results)]


def invariant_for(cfg: ModelConfig) -> list[Clause]:
    return hardened_invariant() if cfg.hardened else reference_invariant()


def _inv_all(clauses: list[Clause], d: Derived):
    out = []
    for c in clauses:
        if c.per_worker:
            out += [c.fn(d, w) for w in range(d.n)]
        else:
            out.append(c.fn(d))
    return out


def _goals(c: Clause, d: Derived):
    if not c.per_worker:
        return [c.fn(d)]
    return [c.fn(d, w) for w in sorted({0, min(1, d.n - 1)})]


# ---------------------------------------------------------------------------
# induction

@dataclass
class InductionResult:
    n: int
    inductive: bool
    failed_clause: str | None = None
    failed_event: str | None = None
    properties: dict[str, str] = field(default_factory=dict)   # proved | violated_step | unknown
    times: dict[str, float] = field(default_factory=dict)      # property -> seconds; "invariant" too
    queries: int = 0

    @property
    def proved(self) -> bool:
        return self.inductive and all(v == "proved" for v in self.properties.values())


class _Hyp:
    """One solver holding a query's hypothesis (invariant, guard, path, lemma instances).

    Each goal is one check in its own push/pop scope, so the queries of an
    event path share the solver's work on the hypothesis, and no goal sees
    another goal's negation.
    """

    def __init__(self, hyp):
        self.sol = z3.Solver()
        self.sol.set("timeout", QUERY_TIMEOUT_MS)
        self.sol.add(hyp)

    def query(self, goal) -> tuple[z3.CheckSatResult, float]:
        """Does the hypothesis imply ``goal``?  (unsat of hypothesis and not goal.)"""
        self.sol.push()
        self.sol.add(z3.Not(goal))
        t0 = time.perf_counter()
        r = self.sol.check()
        self.sol.pop()
        return r, time.perf_counter() - t0


def prove(cfg: ModelConfig) -> InductionResult:
    """Inductive proof of every property for ``cfg`` (worker 0's events, by symmetry)."""
    res = InductionResult(cfg.n, True)
    res.times = {"invariant": 0.0, **{p: 0.0 for p in PROPERTIES}}
    clauses = invariant_for(cfg)
    off = z3.Int("off")
    s = State.fresh("s", cfg.n)
    d = Derived(cfg, s, off)
    # the popcount abstraction rests on these lemmas (see prove_popcount_lemmas)
    t0 = time.perf_counter()
    bad = [name for name, ok in prove_popcount_lemmas(cfg.n).items() if not ok]
    res.times["invariant"] += time.perf_counter() - t0
    if bad:
        res.inductive, res.failed_clause, res.failed_event = False, f"popcount lemma {bad[0]}", "lemma"
        res.properties = {p: "unknown" for p in PROPERTIES}
        return res
    # base case
    base = _Hyp(z3.And(init_state(s), off_axiom(off, cfg.slots), *popcount_lemmas(cfg.n, s.bm, [])))
    for c in clauses:
        for g in _goals(c, d):
            r, dt = base.query(g)
            res.times["invariant"] += dt
            res.queries += 1
            if r != z3.unsat and res.inductive:
                res.inductive, res.failed_clause, res.failed_event = False, c.name, "initial state"
    inv = z3.And(_inv_all(clauses, d))
    status = {p: "proved" for p in PROPERTIES}
    k = z3.Int("k")
    for ev in events_for(cfg, 0):
        for guard, label, post, checks in transition_cases(cfg, s, off, ev, k):
            dp = Derived(cfg, post, off)
            where = f"{ev.kind}(worker 0, copy {ev.copy}{'; ' + label if label else ''})"
            hyp = _Hyp(z3.And(off_axiom(off, cfg.slots), guard, inv, *popcount_lemmas(cfg.n, s.bm, post.bm)))
            for c in clauses:
                for g in _goals(c, dp):
                    r, dt = hyp.query(g)
                    res.times["invariant"] += dt
                    res.queries += 1
                    if r != z3.unsat and res.inductive:
                        res.inductive, res.failed_clause, res.failed_event = False, c.name, where
            for p in PROPERTIES:
                if z3.is_true(z3.simplify(checks[p])):
                    continue
                r, dt = hyp.query(checks[p])
                res.times[p] += dt
                res.queries += 1
                if r != z3.unsat:
                    status[p] = "cti"
    for p in PROPERTIES:
        res.properties[p] = status[p] if res.inductive else "unknown"
    return res


# ---------------------------------------------------------------------------
# bounded model checking: concrete traces from the initial state

@dataclass
class TraceRow:
    step: int
    worker: int
    slot: int
    copy: int
    chunk: int
    event: str
    action: str


@dataclass
class Counterexample:
    prop: str
    n: int
    rows: list[TraceRow]
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
        out.append(f"  violates {self.prop}: {self.describe(self.prop)}" + (f" ({self.note})" if self.note else ""))
        return out

    def describe(self, prop: str) -> str:
        """The one-line statement of ``prop`` (models with their own properties override this)."""
        return PROPERTIES[prop]


def bmc(cfg: ModelConfig, depth: int = 12, props: list[str] | None = None) -> Counterexample | None:
    """Shortest trace (up to ``depth`` events) from the initial state violating one of ``props``."""
    props = list(props or PROPERTIES)
    events = [e for w in range(cfg.n) for e in events_for(cfg, w)]
    off = z3.Int("off")
    sol = z3.Solver()
    sol.set("timeout", QUERY_TIMEOUT_MS)
    states = [State.fresh("b0", cfg.n)]
    sol.add(init_state(states[0]), off_axiom(off, cfg.slots))
    evs, ks, infos = [], [], []
    for i in range(depth):
        s = states[-1]
        nxt = State.fresh(f"b{i + 1}", cfg.n)
        ev, k = z3.Int(f"ev{i}"), z3.Int(f"k{i}")
        sol.add(ev >= 0, ev < len(events))
        viol = []
        step_info = []
        for j, e in enumerate(events):
            guard, post, checks, info = transition(cfg, s, off, e, k)
            sol.add(z3.Implies(ev == j, z3.And(guard, nxt.eq_terms(post))))
            bad = [p for p in props if not z3.is_true(z3.simplify(checks[p]))]
            viol.append(z3.And(ev == j, z3.Or([z3.Not(checks[p]) for p in bad] or [z3.BoolVal(False)])))
            step_info.append((info, checks))
        states.append(nxt)
        evs.append(ev)
        ks.append(k)
        infos.append(step_info)
        sol.push()
        sol.add(z3.Or(viol))
        r = sol.check()
        if r == z3.sat:
            m = sol.model()
            cex = _extract(cfg, m, off, states, evs, ks, infos, events, props)
            sol.pop()
            return cex
        sol.pop()
    return None


def _extract(cfg, m, off, states, evs, ks, infos, events, props) -> Counterexample:
    ev_val = lambda t: m.eval(t, model_completion=True)  # noqa: E731
    offv = ev_val(off).as_long()
    slot = 0 if offv == 0 else 1
    chunk = lambda k: slot + k * cfg.slots  # noqa: E731
    rows = []
    prop = props[0]
    for i, (ev, k) in enumerate(zip(evs, ks)):
        e = events[ev_val(ev).as_long()]
        kv = ev_val(k).as_long()
        s = states[i]
        cur = ev_val(s.cur[e.worker]).as_long()
        info, checks = infos[i][ev_val(ev).as_long()]
        if e.kind == "deliver":
            if kv < cur:
                what = f"old packet for chunk {chunk(kv)} arrives (delayed duplicate; worker is at chunk {chunk(cur)})"
            elif i and any(_was_delivered(m, evs[:i], ks[:i], events, e.worker, kv)):
                what = f"packet for chunk {chunk(kv)} arrives again (retransmission)"
            else:
                what = f"packet for chunk {chunk(kv)} arrives"
            st = decision.STATS[ev_val(info["stat"]).as_long()]
            act = {"multicast": f"multicast result labelled {chunk(kv)}",
                   "unicast": f"unicast result labelled {chunk(kv)} to worker {e.worker}",
                   "absorbed": "add contribution, no packet out"}.get(st, f"drop ({st})")
            rows.append(TraceRow(i + 1, e.worker, slot, e.copy, chunk(kv), what, act))
        else:
            nxt_copy = 0 if cfg.copy_rule == "zero" else (cur + 1) % 2
            if e.kind == "recv":
                what = f"accepts result of chunk {chunk(cur)}; sends chunk {chunk(cur + 1)} on copy {nxt_copy}"
            else:
                what = (f"accepts an old result (no label check) as chunk {chunk(cur)}'s; "
                        f"sends chunk {chunk(cur + 1)} on copy {nxt_copy}")
            rows.append(TraceRow(i + 1, e.worker, slot, nxt_copy, chunk(cur), what, "-"))
        if i == len(evs) - 1:
            for p in props:
                if not z3.is_true(m.eval(checks[p], model_completion=True)):
                    prop = p
                    break
    return Counterexample(prop, cfg.n, rows)


def _was_delivered(m, evs, ks, events, w, k):
    for ev, kk in zip(evs, ks):
        e = events[m.eval(ev, model_completion=True).as_long()]
        if e.kind == "deliver" and e.worker == w and m.eval(kk, model_completion=True).as_long() == k:
            yield True

