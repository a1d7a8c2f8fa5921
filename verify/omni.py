"""OmniReduce coordination proofs: a one-slot transition system built from the Plan's decision table.

The OmniReduce table (``p4gen.decision._OMNIREDUCE``) is the hardened
SwitchML table (per-copy round register ``advance``, bitmap ``reset_set`` /
``set``, counter ``reset_one`` / ``inc_sat`` / ``probe_full``, exponent) plus
a ``minnext`` step (smallest next non-zero block offset of the round) and a
``values`` step that also keys on the packet's ``data`` observation (block
or header-only).  As in :mod:`p4gen.verify.protocol`, every step's const
entries come from :func:`p4gen.decision.expand` and select among the
``p4gen.ops`` operations, evaluated over :data:`p4gen.verify.z3alg.Z3`; no
rule is restated here.

Model (one slot; slots are independent for the reasons given in
``protocol.py``: every register is indexed by slot or (slot, copy), and a
stream runs on one slot and reacts only to that slot's results):

* rounds ``k = 0, 1, ...`` of the stream; round k uses copy ``k mod 2`` and
  ``tsi = k + 1``.  The real tsi of a stream grows strictly and is at least
  1 while the round register starts at 0; the switch only compares tsi
  values with each other and with that 0 (``advance``: gt / eq / lt), so
  any strictly increasing positive sequence behaves exactly like k + 1;
* what worker w sends in round k is fixed by two uninterpreted functions:
  ``DATA(w, k)`` (it has a non-zero block: a data packet, else header-only)
  and ``NX(w, k)`` (its 32-bit next offset, ``0xFFFFFFFF`` = none).  Every
  choice of the functions is allowed, so the proof covers every sparsity
  pattern and every offset sequence; a retransmission resends the same
  packet, which the functions make automatic;
* values are a :class:`~p4gen.verify.z3alg.ShareVec` (which contributions a
  sum holds).  A data packet carries worker w's contribution for round k.
  A header-only packet carries no data header; what a value op would read
  from it is not a contribution (the P4 program reads an invalid header),
  so it is a *junk* share: a sum that ever adds it is wrong.  ``clear``
  (store zeros) is the empty share;
* the exponent register uses the share domain as in ``protocol.py``: every
  packet, data or header-only, announces an exponent for its round;
* the minnext register holds a real offset: an unsigned 32-bit integer,
  kept as a Z3 integer as the Z3 algebra keeps the counter (``ugt`` on
  integers in 0..2**32-1 is the unsigned comparison, and ``min`` never
  computes a new value, it only picks one of its operands, so no wrap-around
  can occur).  ``minnext_op``'s ``min`` (``ite(ugt(stored, nxt), nxt,
  stored)``) is evaluated on these terms.  The proof holds for every integer
  offset, in particular for every 32-bit one;
* network: any packet a worker ever sent may reach the switch any number of
  times in any order; any result may reach any worker late or twice.  No
  FIFO.  Workers accept only a result labelled with their outstanding round
  (the label check on tsi/copy) and then send the next round on the
  flipped copy.

Proof: plain induction with a strengthening invariant adapted from the
hardened SwitchML invariant, one fresh query per clause and per path of a
delivery through the table; popcount is the uninterpreted function of
``protocol.py`` with the same proved lemma instances.  Worker symmetry: the
transition relation, the properties and the invariant treat all workers
alike, and the sets of possible ``DATA``/``NX`` functions are closed under
renaming workers, so the events of worker 0 suffice, and a per-worker clause
is checked for worker 0 and for worker 1 (which stands for every other
worker, all treated alike by worker 0's events).
Counterexamples come from bounded model checking from the initial state
with every worker's events.
"""

from __future__ import annotations

import copy as _copy
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import z3

from p4gen import decision, ops

from . import protocol
from .mutants import _drop_seen, _set_op
from .protocol import POPCOUNT, WORD, Clause, TraceRow, _feasible, _goals, _select, popcount_lemmas, prove_popcount_lemmas
from .runner import _ns_text
from .z3alg import EMPTY, ONE, Share, ShareVec, Z3, Z3Algebra

QUERY_TIMEOUT_MS = 120_000
BMC_DEPTH = 10
FAILURE_BMC_DEPTH = 6   # per property after a failed induction (a property that holds costs the full depth)
MAX_N = WORD            # one bitmap word
NONE_OFFSET = 0xFFFFFFFF
JUNK = 3                # share state: what a value op reads from a header-only packet
OFF = 1                 # tsi = round + 1

PROPERTIES: dict[str, str] = {
    "exact_result": "every result the switch sends holds, for the round it is labelled with, exactly one "
                    "contribution of each worker that sent data in that round and nothing of the others "
                    "(header-only packets add nothing); its exponent covers exactly one announcement of every "
                    "worker; no label is ahead of a recipient",
    "min_next": "every result's next offset is the minimum of the next offsets all workers announced for its "
                "round (so the next round's block is no later than any worker's next non-zero block)",
    "exact_accept": "a worker accepts only the exact sum and minimum for the round it waits for",
    "copy_reuse": "a copy takes a round's packets only after every worker holds the result of the previous "
                  "round on that copy",
    "retransmission_harmless": "a packet whose round the copy has already counted for its worker never changes "
                               "the sum, the minimum or the exponent",
    "retransmission_answered": "a worker still waiting for a round whose packets are all in gets the result when "
                               "it retransmits",
}

DATA = z3.Function("omni_data", z3.IntSort(), z3.IntSort(), z3.BoolSort())
NX = z3.Function("omni_next", z3.IntSort(), z3.IntSort(), z3.IntSort())


def data_of(w: int, k):
    return DATA(z3.IntVal(w), k)


def next_of(w: int, k):
    return NX(z3.IntVal(w), k)


@dataclass(frozen=True)
class OmniConfig:
    n: int
    table: dict[str, Any]
    copy_rule: str = "round"       # round: k mod 2 | zero: always copy 0 (no shadow copy)
    slots: int = 64                # display only
    value_width: int = 32

    @property
    def reuse_gap(self) -> int:
        """How many rounds back the previous round on the same copy is."""
        return 1 if self.copy_rule == "zero" else 2


class _ValuesAlgebra(Z3Algebra):
    """The Z3 algebra on the values lane: a constant stored into it (``clear``) holds no contribution."""

    def __init__(self, n: int):
        self.n = n

    def const(self, value, bits):
        if value != 0:
            raise ValueError("a value register only ever takes the constant 0")
        return ShareVec.empty(self.n)


@dataclass
class State:
    bm: list
    cnt: list
    chk: list
    sh: list
    ex: list
    mn: list
    cur: list
    avail: list
    abad: list
    top: Any

    @classmethod
    def fresh(cls, p: str, n: int) -> "State":
        I, B = z3.Int, z3.Bool
        return cls(bm=[z3.BitVec(f"{p}_bm{v}", WORD) for v in (0, 1)],
                   cnt=[I(f"{p}_cnt{v}") for v in (0, 1)],
                   chk=[I(f"{p}_chk{v}") for v in (0, 1)],
                   sh=[ShareVec.fresh(f"{p}_val{v}", n) for v in (0, 1)],
                   ex=[ShareVec.fresh(f"{p}_exp{v}", n) for v in (0, 1)],
                   mn=[z3.Int(f"{p}_mn{v}") for v in (0, 1)],
                   cur=[I(f"{p}_cur{w}") for w in range(n)],
                   avail=[B(f"{p}_avail{w}") for w in range(n)],
                   abad=[B(f"{p}_abad{w}") for w in range(n)],
                   top=I(f"{p}_top"))

    def clone(self) -> "State":
        return State(*[list(getattr(self, f)) for f in ("bm", "cnt", "chk", "sh", "ex", "mn", "cur", "avail", "abad")],
                     top=self.top)

    def eq_terms(self, o: "State"):
        t = []
        for f in ("bm", "cnt", "chk", "mn", "cur", "avail", "abad"):
            t += [a == b for a, b in zip(getattr(self, f), getattr(o, f))]
        t += [a.eq_terms(b) for a, b in zip(self.sh + self.ex, o.sh + o.ex)]
        t.append(self.top == o.top)
        return z3.And(t)


def init_state(s: State):
    n = len(s.cur)
    t = [s.bm[v] == 0 for v in (0, 1)] + [s.cnt[v] == 0 for v in (0, 1)] + [s.chk[v] == 0 for v in (0, 1)]
    t += [s.mn[v] == 0 for v in (0, 1)]
    t += [x.is_empty() for v in (0, 1) for x in s.sh[v].items + s.ex[v].items]
    t.append(s.top == 0)
    for w in range(n):
        t += [s.cur[w] == 0, z3.Not(s.avail[w]), z3.Not(s.abad[w])]
    return z3.And(t)


def expected_share(sh: Share, w: int, k):
    """Worker w's share of round k's sum: its contribution if it sent data, else nothing."""
    return z3.If(data_of(w, k), sh.is_one(k), sh.is_empty())


def expected_sum(vec: ShareVec, k):
    return z3.And([expected_share(x, u, k) for u, x in enumerate(vec.items)])


def is_min(x, n: int, k, members: Callable[[int], Any] | None = None):
    """x is the minimum of NX(u, k) over the workers u with ``members(u)`` (all workers by default)."""
    mem = members or (lambda u: z3.BoolVal(True))
    return z3.And(z3.And([z3.Implies(mem(u), x <= next_of(u, k)) for u in range(n)]),
                  z3.Or([z3.And(mem(u), x == next_of(u, k)) for u in range(n)]))


@dataclass(frozen=True)
class Event:
    kind: str          # deliver | recv
    worker: int
    copy: int = 0


def events_for(cfg: OmniConfig, w: int) -> list[Event]:
    ev = [Event("deliver", w, 0)]
    if cfg.copy_rule != "zero":
        ev.append(Event("deliver", w, 1))
    ev.append(Event("recv", w))
    return ev


@dataclass
class Path:
    """One entry sequence through the register steps (exclusive and exhaustive, as in ``protocol.Path``)."""
    cond: list
    reg: dict
    obs: dict
    ops: dict


_FEASIBLE: dict[tuple, bool] = {}


def _feasible_prefix(key: tuple, conds: list) -> bool:
    """``_feasible`` memoised by (table, n, worker, copy, entry sequence so far).

    Sound because every caller passes a state and a round of fresh variables
    (``State.fresh``, a fresh ``k``): whether an entry sequence can be taken
    at all then does not depend on which fresh names they have.
    """
    if key not in _FEASIBLE:
        _FEASIBLE[key] = _feasible(conds)
    return _FEASIBLE[key]


def table_paths(cfg: OmniConfig, s: State, w: int, v: int, k, prune: bool = False) -> list[Path]:
    """Run the decision table for worker w's packet of round k on copy v, one :class:`Path` per entry sequence."""
    n = cfg.n
    tsi = k + OFF
    mask = z3.BitVecVal(1 << (w % WORD), WORD)
    n_c = Z3.const(n, 32)
    data = data_of(w, k)
    nxt = next_of(w, k)
    vals = ShareVec(tuple(Share(z3.If(data, z3.IntVal(ONE), z3.IntVal(JUNK)), k) if u == w
                          else Share(z3.IntVal(EMPTY), z3.IntVal(0)) for u in range(n)))
    ann = ShareVec.packet(n, w, k)
    valg = _ValuesAlgebra(n)
    reg0 = {"chk": s.chk[v], "this": s.bm[v], "other": s.bm[1 - v], "cnt": s.cnt[v], "val": s.sh[v],
            "carried": vals, "exp": s.ex[v], "exp_carried": ann, "mn": s.mn[v], "mn_carried": nxt}
    paths = [Path([], reg0, {"data": z3.If(data, z3.IntVal(1), z3.IntVal(0))}, {})]
    memo = (repr(cfg.table), n, w, v)
    for stp in cfg.table["steps"]:
        role = stp["role"]
        nxt_paths: list[Path] = []
        for pa in paths:
            choices = _select(stp["keys"], stp["rules"], pa.obs, lambda r: r["op"])
            sels = list(choices)
            for i, op in enumerate(sels):
                taken = [z3.Not(choices[x]) for x in sels[:i]] + ([choices[op]] if i < len(sels) - 1 else [])
                taken = [z3.simplify(t) for t in taken]
                if any(z3.is_false(t) for t in taken):
                    continue
                cond = pa.cond + [t for t in taken if not z3.is_true(t)]
                if prune and taken and not _feasible_prefix(memo + tuple(pa.ops.values()) + (op,), cond):
                    continue
                reg, obs = dict(pa.reg), dict(pa.obs)
                y = None
                if role == "chunk":
                    reg["chk"], y = ops.chunk_op(op, reg["chk"], tsi, Z3)
                elif role == "bitmap":
                    reg["this"], reg["other"], seen = ops.bitmap_op(op, reg["this"], reg["other"], mask, WORD, Z3)
                    y = z3.If(seen, Z3.const(1, 8), Z3.const(0, 8))
                elif role == "counter":
                    reg["cnt"], y = ops.counter_op(op, reg["cnt"], n_c, 32, Z3)
                elif role == "exponent":
                    reg["exp"], reg["exp_carried"] = ops.exponent_op(op, reg["exp"], ann, Z3)
                elif role == "minnext":
                    reg["mn"], reg["mn_carried"] = ops.minnext_op(op, reg["mn"], nxt, Z3)
                elif role == "values":
                    reg["val"], reg["carried"] = ops.values_op(op, reg["val"], vals, cfg.value_width, valg)
                else:
                    raise KeyError(f"register role {role!r}")
                if stp["yields"]:
                    obs[stp["yields"]] = z3.simplify(y)
                nxt_paths.append(Path(cond, reg, obs, {**pa.ops, role: op}))
        paths = nxt_paths
    return paths


def _outcome(cfg: OmniConfig, pa: Path) -> dict[str, Any]:
    oc = cfg.table["outcome"]
    outs = _select(oc["keys"], oc["rules"], pa.obs, lambda r: (r["action"], r["stat"]))
    sels = list(outs)
    mc = uc = stat = None
    for i in reversed(range(len(sels))):
        (a, st), c = sels[i], outs[sels[i]]
        if i == len(sels) - 1:
            mc, uc, stat = z3.BoolVal(a == "multicast"), z3.BoolVal(a == "unicast"), z3.IntVal(decision.STATS.index(st))
        else:
            mc = z3.If(c, z3.BoolVal(a == "multicast"), mc)
            uc = z3.If(c, z3.BoolVal(a == "unicast"), uc)
            stat = z3.If(c, z3.IntVal(decision.STATS.index(st)), stat)
    takes = pa.ops.get("values") in ("write", "add", "clear")
    return {"mc": z3.simplify(mc), "uc": z3.simplify(uc), "stat": z3.simplify(stat),
            "carried": pa.reg["carried"], "exp_carried": pa.reg["exp_carried"], "mn_carried": pa.reg["mn_carried"],
            "contrib": z3.BoolVal(takes)}


def _apply(s: State, v: int, reg: dict) -> State:
    post = s.clone()
    post.chk[v], post.bm[v], post.bm[1 - v], post.cnt[v], post.mn[v] = (
        reg["chk"], reg["this"], reg["other"], reg["cnt"], reg["mn"])
    post.sh[v], post.ex[v] = reg["val"], reg["exp"]
    return post


def switch_cases(cfg: OmniConfig, s: State, w: int, v: int, k, prune: bool = False):
    """[(label, path condition, post-state, info)], one per path through the table."""
    out = []
    for pa in table_paths(cfg, s, w, v, k, prune):
        cond = z3.And(pa.cond) if pa.cond else z3.BoolVal(True)
        out.append(("/".join(pa.ops[r] for r in pa.ops), cond, _apply(s, v, pa.reg), _outcome(cfg, pa)))
    return out


def _ite_vec(c, a: ShareVec, b: ShareVec) -> ShareVec:
    return Z3.ite(c, a, b)


def switch_step(cfg: OmniConfig, s: State, w: int, v: int, k):
    """The paths merged by their conditions (exclusive and exhaustive, so the last is the default)."""
    cases = switch_cases(cfg, s, w, v, k, prune=True)
    _, _, post, info = cases[-1]
    post = post.clone()
    info = dict(info)
    for _, cond, p2, i2 in reversed(cases[:-1]):
        for f in ("chk", "bm", "cnt", "mn"):
            getattr(post, f)[:] = [z3.If(cond, a, b) for a, b in zip(getattr(p2, f), getattr(post, f))]
        post.sh = [_ite_vec(cond, a, b) for a, b in zip(p2.sh, post.sh)]
        post.ex = [_ite_vec(cond, a, b) for a, b in zip(p2.ex, post.ex)]
        for key in info:
            info[key] = Z3.ite(cond, i2[key], info[key])
    return post, info


def _deliver(cfg: OmniConfig, s: State, ev: Event, k, post: State, info: dict):
    n, w, v = cfg.n, ev.worker, ev.copy
    checks = {p: z3.BoolVal(True) for p in PROPERTIES}
    guard = [k >= 0, k <= s.cur[w]]
    if cfg.copy_rule == "round":
        guard.append(k % 2 == v)
    elif v != 0:
        guard.append(z3.BoolVal(False))
    mc, uc = info["mc"], info["uc"]
    good_sum = z3.And(expected_sum(info["carried"], k), info["exp_carried"].exact(k))
    good_min = is_min(info["mn_carried"], n, k)
    ahead = []
    post.avail, post.abad = list(s.avail), list(s.abad)
    for u in range(n):
        rec = z3.Or(mc, uc) if u == w else mc
        post.avail[u] = z3.Or(s.avail[u], z3.And(rec, k == s.cur[u]))
        post.abad[u] = z3.Or(s.abad[u], z3.And(rec, k == s.cur[u], z3.Not(z3.And(good_sum, good_min))))
        ahead.append(z3.Implies(rec, k <= s.cur[u]))
    sent = z3.Or(mc, uc)
    checks["exact_result"] = z3.Implies(sent, z3.And(good_sum, *ahead))
    checks["min_next"] = z3.Implies(sent, good_min)
    checks["retransmission_harmless"] = z3.Implies(
        s.ex[v].items[w].is_one(k),
        z3.And(post.sh[v].same(s.sh[v]), post.ex[v].same(s.ex[v]), post.mn[v] == s.mn[v]))
    checks["copy_reuse"] = z3.Implies(info["contrib"], z3.And([s.cur[u] >= k - cfg.reuse_gap + 1 for u in range(n)]))
    checks["retransmission_answered"] = z3.Implies(z3.And(k == s.cur[w], s.ex[v].exact(k)), sent)
    return z3.And(guard), post, checks


def _receive(cfg: OmniConfig, s: State, ev: Event):
    w = ev.worker
    checks = {p: z3.BoolVal(True) for p in PROPERTIES}
    checks["exact_accept"] = z3.Not(s.abad[w])
    post = s.clone()
    post.cur[w] = s.cur[w] + 1
    post.top = z3.If(s.cur[w] + 1 > s.top, s.cur[w] + 1, s.top)
    post.avail[w] = z3.BoolVal(False)
    post.abad[w] = z3.BoolVal(False)
    return s.avail[w], post, checks


def transition(cfg: OmniConfig, s: State, ev: Event, k):
    """(guard, post-state, {property: check}, info) of one event."""
    if ev.kind == "deliver":
        post, info = switch_step(cfg, s, ev.worker, ev.copy, k)
        guard, post, checks = _deliver(cfg, s, ev, k, post, info)
        return guard, post, checks, info
    guard, post, checks = _receive(cfg, s, ev)
    return guard, post, checks, {}


def transition_cases(cfg: OmniConfig, s: State, ev: Event, k):
    """The event split by table path: [(guard, path label, post-state, checks)]."""
    if ev.kind != "deliver":
        guard, post, checks = _receive(cfg, s, ev)
        w = ev.worker
        # split on whether the worker becomes the newest one, so the new top is a plain term in each case
        newest, behind = post.clone(), post.clone()
        newest.top, behind.top = s.cur[w] + 1, s.top
        return [(z3.And(guard, s.cur[w] + 1 > s.top), "newest", newest, checks),
                (z3.And(guard, s.cur[w] + 1 <= s.top), "behind", behind, checks)]
    out = []
    for label, cond, post, info in switch_cases(cfg, s, ev.worker, ev.copy, k, prune=True):
        guard, post, checks = _deliver(cfg, s, ev, k, post, info)
        out.append((z3.And(guard, cond), label, post, checks))
    return out


# ---------------------------------------------------------------------------
# strengthening invariant (the hardened SwitchML invariant, plus data-dependent shares and the minimum)

class Derived:
    """Terms derived from a state; M is the ghost ``top`` (the newest round any worker is on)."""

    def __init__(self, cfg: OmniConfig, s: State):
        self.cfg, self.s, self.n = cfg, s, cfg.n
        self.M = s.top
        self.all = z3.BitVecVal((1 << self.n) - 1, WORD)
        self._bits: dict[tuple[int, int], Any] = {}

    def bit(self, v: int, w: int):
        # simplify pushes the extraction through the op selection, so a bit an event does not touch stays the
        # very same term
        if (v, w) not in self._bits:
            self._bits[v, w] = z3.simplify(z3.Extract(w, w, self.s.bm[v])) == 1
        return self._bits[v, w]

    def per_copy(self, f: Callable[[int, int], Any]):
        """f(p, q) for the copy p = M mod 2 of the newest round and the other copy q."""
        return z3.And([z3.Implies(self.M % 2 == p, f(p, 1 - p)) for p in (0, 1)])

    def started(self, p: int):
        return self.s.chk[p] == self.M + OFF


def omni_invariant() -> list[Clause]:
    def top_bounds(d, w):
        return z3.And(d.s.cur[w] <= d.M, d.s.cur[w] >= d.M - 1, d.s.cur[w] >= 0)

    def top_reached(d):
        return z3.Or([c == d.M for c in d.s.cur])

    def unused_bits(d):
        return z3.And([d.s.bm[v] & ~d.all == 0 for v in (0, 1)])

    def current_copy(d):
        s, M, n = d.s, d.M, d.n

        def f(p, q):
            st = d.started(p)
            old = z3.Or(z3.And(M >= 2, s.chk[p] == M - 2 + OFF, s.bm[p] == d.all, s.cnt[p] == n),
                        z3.And(M < 2, s.chk[p] == 0, s.bm[p] == 0, s.cnt[p] == 0))
            return z3.And(z3.Implies(st, s.cnt[p] == POPCOUNT(s.bm[p])), z3.Implies(z3.Not(st), old))
        return d.per_copy(f)

    def current_shares(d, w):
        s, M = d.s, d.M

        def f(p, q):
            st, b = d.started(p), d.bit(p, w)
            sh, ex = s.sh[p].items[w], s.ex[p].items[w]
            return z3.And(
                z3.Implies(z3.And(st, b), z3.And(expected_share(sh, w, M), ex.is_one(M), s.cur[w] == M)),
                z3.Implies(z3.And(st, z3.Not(b)), z3.And(sh.is_empty(), ex.is_empty())),
                z3.Implies(z3.And(z3.Not(st), M >= 2), z3.And(expected_share(sh, w, M - 2), ex.is_one(M - 2))),
                z3.Implies(z3.And(z3.Not(st), M < 2), z3.And(sh.is_empty(), ex.is_empty())))
        return d.per_copy(f)

    def current_min(d):
        s, M, n = d.s, d.M, d.n

        def f(p, q):
            st = d.started(p)
            return z3.And(z3.Implies(st, is_min(s.mn[p], n, M, lambda u: d.bit(p, u))),
                          z3.Implies(z3.And(z3.Not(st), M >= 2), is_min(s.mn[p], n, M - 2)))
        return d.per_copy(f)

    def previous_copy(d):
        s, M, n = d.s, d.M, d.n
        return d.per_copy(lambda p, q: z3.If(
            M >= 1, z3.And(s.chk[q] == M - 1 + OFF, s.bm[q] == d.all, s.cnt[q] == n),
            z3.And(s.chk[q] == 0, s.bm[q] == 0, s.cnt[q] == 0)))

    def previous_shares(d, w):
        s, M = d.s, d.M

        def f(p, q):
            sh, ex = s.sh[q].items[w], s.ex[q].items[w]
            return z3.If(M >= 1, z3.And(expected_share(sh, w, M - 1), ex.is_one(M - 1)),
                         z3.And(sh.is_empty(), ex.is_empty()))
        return d.per_copy(f)

    def previous_min(d):
        return d.per_copy(lambda p, q: z3.Implies(d.M >= 1, is_min(d.s.mn[q], d.n, d.M - 1)))

    def results(d, w):
        s = d.s
        complete = d.per_copy(lambda p, q: z3.And(d.started(p), s.bm[p] == d.all))
        return z3.And(z3.Implies(s.avail[w], z3.Or(s.cur[w] == d.M - 1, complete)), z3.Not(s.abad[w]))

    return [Clause("top_bounds", True, top_bounds), Clause("top_reached", False, top_reached),
            Clause("unused_bits", False, unused_bits), Clause("current_copy", False, current_copy),
            Clause("current_copy_shares", True, current_shares), Clause("current_copy_min", False, current_min),
            Clause("previous_copy", False, previous_copy), Clause("previous_copy_shares", True, previous_shares),
            Clause("previous_copy_min", False, previous_min), Clause("results", True, results)]


def _inv_all(clauses: list[Clause], d: Derived) -> list:
    out = []
    for c in clauses:
        out += [c.fn(d, w) for w in range(d.n)] if c.per_worker else [c.fn(d)]
    return out


@dataclass
class InductionResult:
    n: int
    inductive: bool
    failed_clause: str | None = None
    failed_event: str | None = None
    properties: dict[str, str] = field(default_factory=dict)   # proved | cti | unknown
    times: dict[str, float] = field(default_factory=dict)
    clause_times: dict[str, float] = field(default_factory=dict)   # invariant clause or property -> seconds
    queries: int = 0

    @property
    def proved(self) -> bool:
        return self.inductive and all(v == "proved" for v in self.properties.values())

    @property
    def seconds(self) -> float:
        return sum(self.times.values())


def _query(hyp, goal) -> tuple[z3.CheckSatResult, float]:
    sol = z3.Solver()
    sol.set("timeout", QUERY_TIMEOUT_MS)
    sol.add(hyp, z3.Not(goal))
    t0 = time.perf_counter()
    r = sol.check()
    return r, time.perf_counter() - t0


def _check_all(hyp, goals: list[tuple[str, Any]], res: InductionResult, combine: bool) -> list[str]:
    """Names of the goals ``hyp`` does not imply (one query per goal; with ``combine`` first one query for all).

    Time goes to ``res.clause_times`` per name (a combined query's time is shared out equally).
    """
    goals = [(name, g) for name, g in goals if not z3.is_true(z3.simplify(g))]
    if not goals:
        return []
    if combine and len(goals) > 1:
        r, dt = _query(hyp, z3.And([g for _, g in goals]))
        res.queries += 1
        for name, _ in goals:
            res.clause_times[name] = res.clause_times.get(name, 0.0) + dt / len(goals)
        if r == z3.unsat:
            return []
    failed = []
    for name, g in goals:
        r, dt = _query(hyp, g)
        res.queries += 1
        res.clause_times[name] = res.clause_times.get(name, 0.0) + dt
        if r != z3.unsat and name not in failed:
            failed.append(name)
    return failed


def prove(cfg: OmniConfig, combine: bool = True) -> InductionResult:
    """Inductive proof of every property of :data:`PROPERTIES` for ``cfg`` (worker 0's events, by symmetry).

    Each base case and each (event, table path) of worker 0 is one query for
    all invariant clauses and one for all properties; only when such a query
    is not unsat (or ``combine`` is off) is every clause, resp. property,
    asked on its own, which names what fails.
    """
    if not 2 <= cfg.n <= MAX_N:
        raise ValueError(f"n={cfg.n}: the model covers 2..{MAX_N} workers (one bitmap word)")
    res = InductionResult(cfg.n, True)
    res.times = {"invariant": 0.0, **{p: 0.0 for p in PROPERTIES}}
    t0 = time.perf_counter()
    bad = [name for name, ok in prove_popcount_lemmas(cfg.n).items() if not ok]
    res.times["invariant"] += time.perf_counter() - t0
    if bad:
        res.inductive, res.failed_clause, res.failed_event = False, f"popcount lemma {bad[0]}", "lemma"
        res.properties = {p: "unknown" for p in PROPERTIES}
        return res
    clauses = omni_invariant()
    s = State.fresh("s", cfg.n)
    d = Derived(cfg, s)

    def clause_goals(dd: Derived):
        return [(c.name, g) for c in clauses for g in _goals(c, dd)]

    base = z3.And(init_state(s), *popcount_lemmas(cfg.n, s.bm, []))
    failed = _check_all(base, clause_goals(d), res, combine)
    if failed:
        res.inductive, res.failed_clause, res.failed_event = False, failed[0], "initial state"
    inv = z3.And(_inv_all(clauses, d))
    status = {p: "proved" for p in PROPERTIES}
    k = z3.Int("k")
    for ev in events_for(cfg, 0):
        for guard, label, post, checks in transition_cases(cfg, s, ev, k):
            where = f"{ev.kind}(worker 0, copy {ev.copy}{'; ' + label if label else ''})"
            hyp = z3.And(guard, inv, *popcount_lemmas(cfg.n, s.bm, post.bm))
            failed = _check_all(hyp, clause_goals(Derived(cfg, post)), res, combine)
            if failed and res.inductive:
                res.inductive, res.failed_clause, res.failed_event = False, failed[0], where
            for p in _check_all(hyp, [(p, checks[p]) for p in PROPERTIES], res, combine):
                status[p] = "cti"
    for name, dt in res.clause_times.items():
        res.times[name if name in PROPERTIES else "invariant"] += dt
    for p in PROPERTIES:
        res.properties[p] = status[p] if res.inductive else "unknown"
    return res


# ---------------------------------------------------------------------------
# bounded model checking: concrete traces from the initial state

class Counterexample(protocol.Counterexample):
    """A trace of the OmniReduce model; the same table as SwitchML's, with this model's properties."""

    def describe(self, prop: str) -> str:
        return PROPERTIES[prop]


def bmc(cfg: OmniConfig, depth: int = BMC_DEPTH, props: list[str] | None = None) -> Counterexample | None:
    """Shortest trace (up to ``depth`` events) from the initial state violating one of ``props``."""
    props = list(props or PROPERTIES)
    events = [e for w in range(cfg.n) for e in events_for(cfg, w)]
    sol = z3.Solver()
    sol.set("timeout", QUERY_TIMEOUT_MS)
    states = [State.fresh("b0", cfg.n)]
    sol.add(init_state(states[0]))
    evs, ks, infos = [], [], []
    for i in range(depth):
        s = states[-1]
        nxt = State.fresh(f"b{i + 1}", cfg.n)
        ev, k = z3.Int(f"ev{i}"), z3.Int(f"k{i}")
        sol.add(ev >= 0, ev < len(events))
        sol.add([z3.And(next_of(w, k) >= 0, next_of(w, k) <= NONE_OFFSET) for w in range(cfg.n)])
        viol, step_info = [], []
        for j, e in enumerate(events):
            guard, post, checks, info = transition(cfg, s, e, k)
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
            cex = _extract(cfg, sol.model(), states, evs, ks, infos, events, props)
            sol.pop()
            return cex
        sol.pop()
    return None


def _offset_text(x: int) -> str:
    return "none" if x == NONE_OFFSET else str(x)


def _extract(cfg, m, states, evs, ks, infos, events, props) -> Counterexample:
    val = lambda t: m.eval(t, model_completion=True)  # noqa: E731
    rows: list[TraceRow] = []
    prop = props[0]
    sent: set[tuple[int, int]] = set()
    for i, (ev, k) in enumerate(zip(evs, ks)):
        j = val(ev).as_long()
        e, kv = events[j], val(k).as_long()
        s = states[i]
        cur = val(s.cur[e.worker]).as_long()
        info, checks = infos[i][j]
        if e.kind == "deliver":
            has = z3.is_true(val(data_of(e.worker, z3.IntVal(kv))))
            nx = val(next_of(e.worker, z3.IntVal(kv))).as_long()
            pkt = f"{'block' if has else 'header-only'}, next={_offset_text(nx)}"
            if kv < cur:
                what = f"old round tsi {kv + OFF} packet ({pkt}) arrives (delayed duplicate; worker is at tsi {cur + OFF})"
            elif (e.worker, kv) in sent:
                what = f"round tsi {kv + OFF} packet ({pkt}) arrives again (retransmission)"
            else:
                what = f"round tsi {kv + OFF} packet ({pkt}) arrives"
            sent.add((e.worker, kv))
            st = decision.STATS[val(info["stat"]).as_long()]
            mn = _offset_text(val(info["mn_carried"]).as_long())
            act = {"multicast": f"multicast result tsi {kv + OFF}, next={mn}",
                   "unicast": f"unicast result tsi {kv + OFF}, next={mn} to worker {e.worker}",
                   "absorbed": "absorb (store block/offset), no packet out"}.get(st, f"drop ({st})")
            rows.append(TraceRow(i + 1, e.worker, 0, e.copy, kv + OFF, what, act))
        else:
            nxt_copy = 0 if cfg.copy_rule == "zero" else (cur + 1) % 2
            what = f"accepts result of tsi {cur + OFF}; sends round tsi {cur + 1 + OFF} on copy {nxt_copy}"
            rows.append(TraceRow(i + 1, e.worker, 0, nxt_copy, cur + OFF, what, "-"))
        if i == len(evs) - 1:
            for p in props:
                if not z3.is_true(m.eval(checks[p], model_completion=True)):
                    prop = p
                    break
    return Counterexample(prop, cfg.n, rows)


# ---------------------------------------------------------------------------
# mutants: broken decision tables and worker behaviours the model must refute

def _header_only_adds(table: dict[str, Any]) -> dict[str, Any]:
    """The values step adds whatever a packet carries, data header or not (add rules ignore ``data``)."""
    t = _copy.deepcopy(table)
    for r in decision.step(t, "values")["rules"]:
        if r["op"] == "add":
            r["match"]["data"] = "*"
    return t


def _header_only_writes(table: dict[str, Any]) -> dict[str, Any]:
    """A header-only first packet stores what it carries (write) instead of zeros (clear)."""
    return _set_op(table, "values", "clear", "write")


@dataclass(frozen=True)
class OmniMutant:
    name: str
    description: str
    apply: Callable[[OmniConfig], OmniConfig]


MUTANTS: list[OmniMutant] = [
    OmniMutant("omni_minnext_last_writer", "the minnext register keeps the last packet's offset (write, not min)",
               lambda c: replace(c, table=_set_op(c.table, "minnext", "min", "write"))),
    OmniMutant("omni_header_only_adds", "a header-only packet is added to the sum (values add when data=0)",
               lambda c: replace(c, table=_header_only_adds(c.table))),
    OmniMutant("omni_no_shadow_copy", "workers run every round on copy 0 (no shadow copy)",
               lambda c: replace(c, copy_rule="zero")),
    OmniMutant("omni_header_only_first_writes", "a header-only first packet stores what it carries (write, not clear)",
               lambda c: replace(c, table=_header_only_writes(c.table))),
    OmniMutant("omni_no_bitmap_check", "the switch takes a packet even when the worker's bit is set",
               lambda c: replace(c, table=_drop_seen(c.table))),
]


def mutant_config(m: OmniMutant, n: int = 2, table: dict[str, Any] | None = None, slots: int = 64,
                  value_width: int = 32) -> OmniConfig:
    base = OmniConfig(n=n, table=table if table is not None else decision.decision_table("hardened", "omnireduce"),
                      slots=slots, value_width=value_width)
    return m.apply(base)


# ---------------------------------------------------------------------------
# entry point

def _row(name: str, status: str, seconds: float, ns: list[int], detail: str = "",
         cex: Counterexample | None = None) -> dict[str, Any]:
    row = {"group": "omnireduce", "property": name, "status": status, "seconds": round(seconds, 3), "n": ns,
           "detail": detail}
    if cex is not None:
        row["counterexample"] = cex.to_json()
    return row


def _print_row(out, row: dict[str, Any], cex: Counterexample | None) -> None:
    out(f"{row['group'] + '/' + row['property']:<40} {_ns_text(row['n']):<10} {row['status']:<15} "
        f"{row['seconds']:7.2f}s" + (f"  {row['detail']}" if row["detail"] else ""))
    if cex is not None:
        for line in cex.format():
            out(line)


def _plan_table(plan) -> tuple[dict[str, Any], dict[str, Any]]:
    from p4gen.errors import PlanError

    try:
        params, table = plan.params, plan.decision
        protocol = plan.data.get("protocol", table.get("protocol"))
        decision.validate(table)
        int(params["max_workers"]), int(params["value_width"]), int(params["slots"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"plan.json has no usable params/decision table: {exc}") from None
    if protocol != "omnireduce" or decision.step(table, "minnext") is None:
        raise PlanError(f"plan.json is not an OmniReduce plan (protocol {protocol!r})")
    return params, table


def run_omnireduce(plan, *, workers: list[int] | None = None, mutants: bool = False,
                   out: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Prove the OmniReduce coordination properties for ``plan``; optionally refute :data:`MUTANTS`.

    Returns one row per property, shaped like ``PropertyLine.to_json`` of the
    SwitchML runner (group ``"omnireduce"``, property, status ``proved`` /
    ``COUNTEREXAMPLE`` / ``NOT PROVED``, seconds, n, detail, and
    counterexample when there is one), followed, with ``mutants``, by one row
    per mutant shaped like the runner's mutant entries (mutant, variant,
    description, refuted, seconds, counterexample).
    """
    from p4gen.errors import PlanError

    params, table = _plan_table(plan)
    max_n = int(params["max_workers"])
    slots, width = int(params["slots"]), int(params["value_width"])
    if workers:
        bad = [n for n in workers if not 2 <= n <= max_n]
        if bad:
            raise PlanError(f"--workers {bad[0]} must be in 2..{max_n} (the plan's max_workers)")
        ns = sorted(set(workers))
    else:
        ns = list(range(2, max_n + 1))
    pns = [n for n in ns if n <= MAX_N]
    out(f"omnireduce coordination: value_width={width}, max_workers={max_n}, slots={slots}")
    out("  assume: network: packets and results may be lost, duplicated and reordered (no FIFO); workers "
        "label-check results; tsi grows strictly along a stream and does not wrap; one slot (slots are independent)")
    rows: list[dict[str, Any]] = []
    times = {p: 0.0 for p in PROPERTIES}
    inv_time = 0.0
    failed: InductionResult | None = None
    for n in pns:
        res = prove(OmniConfig(n=n, table=table, slots=slots, value_width=width))
        inv_time += res.times["invariant"]
        for p in PROPERTIES:
            times[p] += res.times[p]
        if not res.proved:
            failed = res
            break
    share = inv_time / len(PROPERTIES)
    if failed is None:
        for p in PROPERTIES:
            row = _row(p, "proved", times[p] + share, pns)
            rows.append(row)
            _print_row(out, row, None)
    else:
        n = failed.n
        cfg = OmniConfig(n=n, table=table, slots=slots, value_width=width)
        why = (f"invariant clause {failed.failed_clause} not inductive on {failed.failed_event}"
               if not failed.inductive else "property not implied by the invariant")
        for p in PROPERTIES:
            t0 = time.perf_counter()
            cex = None if failed.properties.get(p) == "proved" else bmc(cfg, FAILURE_BMC_DEPTH, [p])
            dt = time.perf_counter() - t0 + times[p] + share
            if cex is not None:
                row = _row(p, "COUNTEREXAMPLE", dt, [n], f"{cex.steps} steps", cex)
            elif failed.properties.get(p) == "proved":
                row = _row(p, "NOT PROVED", dt, [n], f"{why}; no violation of this property")
            else:
                row = _row(p, "NOT PROVED", dt, [n], f"{why}; no counterexample within {FAILURE_BMC_DEPTH} steps")
            rows.append(row)
            _print_row(out, row, cex)
    if len(pns) < len(ns):
        out(f"  note: omnireduce proofs cover n <= {MAX_N} (one bitmap word); n={MAX_N + 1}..{ns[-1]} not covered")
    if mutants:
        out("omnireduce mutants (each must be refuted by a concrete trace):")
        for m in MUTANTS:
            t0 = time.perf_counter()
            cex = bmc(mutant_config(m, 2, table, slots, width), BMC_DEPTH)
            dt = time.perf_counter() - t0
            rows.append({"mutant": m.name, "variant": "omnireduce", "description": m.description,
                         "refuted": cex is not None, "seconds": round(dt, 3),
                         "counterexample": cex.to_json() if cex else None})
            status = f"refuted ({cex.prop}, {cex.steps} steps)" if cex else f"NOT REFUTED within {BMC_DEPTH} steps"
            out(f"mutant/{m.name:<36} n=2        {status:<40} {dt:7.2f}s")
            if cex is not None:
                for line in cex.format():
                    out(line)
    return rows
