"""OmniReduce coordination model: events, state, properties and invariant (run by :mod:`p4gen.verify.engine`).

The OmniReduce table (``p4gen.protocols._OMNIREDUCE``) is the hardened
SwitchML table (per-copy round register ``advance_window``, bitmap ``reset_set`` /
``set``, counter ``reset_one`` / ``inc_sat`` / ``probe_full``, exponent) plus
a ``minnext`` step (smallest next non-zero block offset of the round) and a
``values`` step that also keys on the packet's ``data`` observation (block
or header-only).  The switch step is :func:`p4gen.verify.paths.table_paths`,
as for SwitchML; no rule is restated here.

Model (one slot; slots are independent for the reasons given in
:mod:`p4gen.verify.protocol`: every register is indexed by slot or (slot,
copy), and a stream runs on one slot and reacts only to that slot's results):

* rounds ``k = 0, 1, ...`` of the slot; round k uses copy ``k mod 2`` and
  ``tsi = k + 1``, in units of the job's window: the worker's real tsi is
  ``tsi_base + 1 + slot + window * k`` (``p4gen.host.omni_worker``), at
  least 1 while the round register starts at 0.  The switch compares tsi
  values with each other and with that 0, and takes a newer one only within
  its bound (``advance_window``: ``2 * slot_count``); the model's bound is a
  fresh integer >= 2 per delivery, as in :mod:`p4gen.verify.protocol`, which
  covers every window up to ``slot_count``: a copy's round moves on by 2
  (two windows) and the first round of each copy is at most 2 ahead of 0;
* a corrupted frame (``deliver_far``): from a registered worker, any time,
  on either copy, its tsi more than the bound ahead of the copy's round, its
  values, exponent, block flag and next offset junk;
* what worker u sends in round k is fixed by two uninterpreted functions:
  ``DATA(u, k)`` (it has a non-zero block: a data packet, else header-only)
  and ``NX(u, k)`` (its next offset, ``0xFFFFFFFF`` = none).  Every choice of
  the functions is allowed, so the proof covers every sparsity pattern and
  every offset sequence; a retransmission resends the same packet, which the
  functions make automatic;
* values are :class:`~p4gen.verify.z3alg.Shares` (which contributions a sum
  holds).  A data packet carries worker u's contribution for round k.  A
  header-only packet carries no data header; what a value op would read from
  it is not a contribution (the P4 program reads an invalid header), so it is
  a *junk* share: a sum that ever adds it is wrong.  ``clear`` (store zeros)
  is the empty share;
* the exponent register uses the share domain as in SwitchML: every packet,
  data or header-only, announces an exponent for its round;
* the minnext register holds a real offset: an unsigned 32-bit integer, kept
  as a Z3 integer as the Z3 algebra keeps the counter (``ugt`` on integers in
  0..2**32-1 is the unsigned comparison, and ``min`` never computes a new
  value, it only picks one of its operands, so no wrap-around can occur).
  ``minnext_op``'s ``min`` is evaluated on these terms;
* network: any packet a worker ever sent may reach the switch any number of
  times in any order; any result may reach any worker late or twice.  No
  FIFO.  Workers accept only a result labelled with their outstanding round
  (the label check on tsi/copy) and then send the next round on the flipped
  copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from p4gen.decision import STANDARD_CODES, STATS, Codes, DecisionTable

from . import engine
from .engine import Case, Clause, Event, State, TraceRow, TraceStep, step_local
from .paths import Packet
from .slotmodel import SlotModel
from .protocol import FAR_PROPERTIES
from .workers import Workers, define
from .z3alg import EMPTY, JUNK, ONE, BitSet, Mask, Share, Shares

NONE_OFFSET = 0xFFFFFFFF
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
    "completion_multicast": "the packet that completes a round is answered in the same step by the result "
                            "multicast to the job's workers (every one of them, no one else)",
    "retransmission_unicast": "a packet whose round the copy has already counted for its worker is never "
                              "multicast: the answer to a retransmission goes to its sender only",
    "progress": "a worker's packet for the round it waits for is counted in the copy or answered with the result: "
                "it is never dropped while the copy lacks it",
    "contributions_kept": "no packet takes out of a copy the packet of a worker that still waits for that round's "
                          "result",
}

DATA = z3.Function("omni_data", z3.IntSort(), z3.IntSort(), z3.BoolSort())
NX = z3.Function("omni_next", z3.IntSort(), z3.IntSort(), z3.IntSort())

SCHEMA = {"bm": ("bits", 2), "cnt": ("int", 2), "chk": ("int", 2), "sh": ("shares", 2), "ex": ("shares", 2),
          "mn": ("int", 2), "cur": ("wint", None), "avail": ("wbool", None), "abad": ("wbool", None),
          "top": ("int", None)}


def _w(u):
    return z3.IntVal(u) if isinstance(u, int) else u


def data_of(u, k):
    return DATA(_w(u), k)


def next_of(u, k):
    return NX(_w(u), k)


def expected_share(sh: Share, u, k):
    """Worker u's share of round k's sum: its contribution if it sent data, else nothing."""
    return z3.If(data_of(u, k), sh.is_one(k), sh.is_empty())


def expected_sum(ws: Workers, vec: Shares, k):
    return ws.all(lambda u: expected_share(vec.at(u), u, k))


def is_min(ws: Workers, x, k, members: Callable[[Any], Any] | None = None):
    """x is the minimum of NX(u, k) over the workers u with ``members(u)`` (all workers by default)."""
    mem = members or (lambda u: z3.BoolVal(True))
    return z3.And(ws.all(lambda u: z3.Implies(mem(u), x <= next_of(u, k))),
                  ws.some(lambda u: z3.And(mem(u), x == next_of(u, k))))


@dataclass
class OmniReduce(SlotModel):
    table: DecisionTable
    copy_rule: str = "round"       # round: k mod 2 | zero: always copy 0 (no shadow copy)
    slots: int = 64                # display only
    codes: Codes = STANDARD_CODES  # the plan's observation and outcome codes
    stats: tuple[str, ...] = tuple(STATS)     # the plan's packet counter indices
    far_frames: bool = True        # a registered worker's corrupted frame far ahead (deliver_far)
    _feasible: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    schema = SCHEMA
    extra_registers = (("mn", "mn"),)

    @property
    def properties(self) -> dict[str, str]:
        return {**PROPERTIES, **FAR_PROPERTIES} if self.far_frames else PROPERTIES

    @property
    def group(self) -> str:
        """The name of its property lines: the protocol's."""
        return self.table.protocol

    def assumptions(self, fifo: bool, label: str) -> list[str]:
        return [
            "network: packets and results may be lost, duplicated and reordered (no FIFO)",
            "workers label-check results; tsi grows strictly along a stream and does not wrap; one slot is "
            "modelled (slots are independent)",
            "what each worker sends in each round (a block or header-only, and its next offset) is arbitrary",
        ]

    @property
    def reuse_gap(self) -> int:
        """How many rounds back the previous round on the same copy is."""
        return 1 if self.copy_rule == "zero" else 2

    def init(self, s: State, ws: Workers, g):
        t = [s.bm[v].eq_terms(BitSet.empty(ws)) for v in (0, 1)]
        t += [s.cnt[v] == 0 for v in (0, 1)] + [s.chk[v] == 0 for v in (0, 1)] + [s.mn[v] == 0 for v in (0, 1)]
        t += [x.eq_terms(Shares.empty(ws)) for v in (0, 1) for x in (s.sh[v], s.ex[v])]
        t += [s.top == 0, s.cur.eq_terms(ws.const_vec(z3.IntVal(0)))]
        t += [x.eq_terms(ws.const_vec(z3.BoolVal(False))) for x in (s.avail, s.abad)]
        return z3.And(t)

    def events(self, ws: Workers, w) -> list[Event]:
        ev = self._deliveries(w)
        if self.far_frames:
            ev += [Event("deliver_far", w, v) for v in (0, 1)]
        return ev

    def view(self, s: State, ws: Workers, g) -> "View":
        return View(s, ws)

    def function_choices(self) -> dict[str, tuple]:
        """What the counterexample search tries for one packet: a block or header-only, and the next offset 1
        or 2 (so two packets of a round announce equal offsets or either one the smaller)."""
        return {DATA.name(): (True, False), NX.name(): (1, 2)}

    def cases(self, s: State, ws: Workers, g, ev: Event, k, prune: bool) -> list[Case]:
        if not ev.kind.startswith("deliver"):
            return self._receive(s, ws, ev)
        w, v = ev.worker, ev.copy
        far = ev.kind == "deliver_far"
        bound, ahead, extra = self._window(k, v, far)
        if far:
            junk_data = step_local(k, f"junk_data{v}", choices=lambda depth: (0, 1))
            junk_next = step_local(k, f"junk_next{v}", choices=lambda depth: (1, 2))
            extra += [junk_data >= 0, junk_data <= 1, junk_next >= 0, junk_next <= NONE_OFFSET]
            pkt = Packet(tsi=s.chk[v] + bound + ahead, mask=Mask(w), n=ws.N, values=Shares.packet(ws, w, k, JUNK),
                         exponent=Shares.packet(ws, w, k, JUNK), nxt=junk_next, obs={"data": junk_data}, bound=bound)
        else:
            data = data_of(w, k)
            vals = Shares.packet(ws, w, k, z3.If(data, ONE, JUNK))
            pkt = Packet(tsi=k + OFF, mask=Mask(w), n=ws.N, values=vals, exponent=Shares.packet(ws, w, k),
                         nxt=next_of(w, k), obs={"data": z3.If(data, z3.IntVal(1), z3.IntVal(0))}, bound=bound)
        out = []
        for pa, post, info in self._switch(s, ws, ev, pkt, extra, prune):
            if far:
                guard, checks = self._deliver_far(s, ws, ev, post, info)
            else:
                guard, checks = self._deliver(s, ws, ev, k, post, info)
            cond = z3.And(pa.cond) if pa.cond else z3.BoolVal(True)
            out.append(Case(z3.And(guard, *extra, cond), pa.label, post, checks, info))
        return out

    def _deliver_far(self, s: State, ws: Workers, ev: Event, post: State, info: dict):
        """A corrupted frame of worker ev.worker: a tsi beyond the bound, junk; the workers' state stays."""
        return z3.BoolVal(True), self._far_checks(s, ws, ev, post, info, _kept)

    def _deliver(self, s: State, ws: Workers, ev: Event, k, post: State, info: dict):
        w, v = ev.worker, ev.copy
        checks = {p: z3.BoolVal(True) for p in self.properties}
        guard = [k >= 0, k <= s.cur.get(w), next_of(w, k) >= 0, next_of(w, k) <= NONE_OFFSET]
        guard += self._copy_guard(k, v)
        mc, uc = info["mc"], info["uc"]
        good_sum = z3.And(expected_sum(ws, info["carried"], k), info["exp_carried"].exact(ws, k))
        good_min = is_min(ws, info["mn_carried"], k)
        bad = define(ws, guard, f"{k}_bad_{v}", z3.Not(z3.And(good_sum, good_min)))

        rec = self._answer(s, ws, w, k, mc, uc, bad, post)
        sent = z3.Or(mc, uc)
        held = s.ex[v].at(w).is_one(k)
        checks["exact_result"] = z3.Implies(sent, z3.And(good_sum, ws.all(lambda u: z3.Implies(rec(u), k <= s.cur.get(u)))))
        checks["min_next"] = z3.Implies(sent, good_min)
        checks["retransmission_harmless"] = z3.Implies(
            held, z3.And(post.sh[v].same(ws, s.sh[v]), post.ex[v].same(ws, s.ex[v]), post.mn[v] == s.mn[v]))
        checks["copy_reuse"] = z3.Implies(info["contrib"], ws.all(lambda u: s.cur.get(u) >= k - self.reuse_gap + 1))
        checks["retransmission_answered"] = z3.Implies(z3.And(k == s.cur.get(w), s.ex[v].exact(ws, k)), sent)
        checks["completion_multicast"] = z3.Implies(z3.And(z3.Not(s.ex[v].exact(ws, k)), post.ex[v].exact(ws, k)), mc)
        checks["retransmission_unicast"] = z3.Implies(held, z3.Not(mc))
        checks["progress"] = z3.Implies(k == s.cur.get(w), z3.Or(post.ex[v].at(w).is_one(k), sent))
        checks["contributions_kept"] = _kept(ws, s, post, v)
        return z3.And(guard), checks

    def _receive(self, s: State, ws: Workers, ev: Event) -> list[Case]:
        w = ev.worker
        checks = {p: z3.BoolVal(True) for p in self.properties}
        checks["exact_accept"] = z3.Not(s.abad.get(w))
        post, nxt = self._accept(s, w)
        return self._split_newest(s, post, nxt, s.avail.get(w), checks)

    def invariant(self) -> list[Clause]:
        return omni_invariant()

    def trace_row(self, st: TraceStep) -> TraceRow:
        e = st.event
        cur = st.int(st.pre.cur.get(e.worker))
        if e.kind == "deliver_far":
            stat = self.stats[st.int(st.info["stat"])]
            act = {"multicast": "multicast result", "unicast": f"unicast result to worker {e.worker}",
                   "absorbed": "takes the frame, no packet out"}.get(stat, f"drop ({stat})")
            return TraceRow(st.index, e.worker, 0, e.copy, "far ahead",
                            "corrupted frame with a tsi more than two windows ahead of the copy's round arrives", act)
        if e.kind == "deliver":
            k = st.k
            has = st.true(data_of(e.worker, z3.IntVal(k)))
            pkt = f"{'block' if has else 'header-only'}, next={_offset_text(st.int(next_of(e.worker, z3.IntVal(k))))}"
            if k < cur:
                what = f"old round tsi {k + OFF} packet ({pkt}) arrives (delayed duplicate; worker is at tsi {cur + OFF})"
            elif any(h.event.kind == "deliver" and h.event.worker == e.worker and h.k == k for h in st.history):
                what = f"round tsi {k + OFF} packet ({pkt}) arrives again (retransmission)"
            else:
                what = f"round tsi {k + OFF} packet ({pkt}) arrives"
            stat = self.stats[st.int(st.info["stat"])]
            mn = _offset_text(st.int(st.info["mn_carried"]))
            act = {"multicast": f"multicast result tsi {k + OFF}, next={mn}",
                   "unicast": f"unicast result tsi {k + OFF}, next={mn} to worker {e.worker}",
                   "absorbed": f"absorbs (values: {st.info['ops'].get('values')}, next offset: "
                               f"{st.info['ops'].get('minnext')}), no packet out"}.get(stat, f"drop ({stat})")
            return TraceRow(st.index, e.worker, 0, e.copy, k + OFF, what, act)
        nxt_copy = 0 if self.copy_rule == "zero" else (cur + 1) % 2
        what = f"accepts result of tsi {cur + OFF}; sends round tsi {cur + 1 + OFF} on copy {nxt_copy}"
        return TraceRow(st.index, e.worker, 0, nxt_copy, cur + OFF, what, "-")


def _kept(ws: Workers, s: State, post: State, v: int):
    """Every packet copy v has counted for the round its worker waits for is still counted after the step."""
    return ws.all(lambda u: z3.Implies(s.ex[v].at(u).is_one(s.cur.get(u)), post.ex[v].at(u).is_one(s.cur.get(u))))


def _offset_text(x: int) -> str:
    return "none" if x == NONE_OFFSET else str(x)


# ---------------------------------------------------------------------------
# strengthening invariant (the hardened SwitchML invariant, plus data-dependent shares and the minimum)

class View(engine.View):
    """Terms derived from a state; M is the ghost ``top`` (the newest round any worker is on)."""

    def started(self, p: int):
        return self.s.chk[p] == self.M + OFF


def omni_invariant() -> list[Clause]:
    def top_bounds(d):
        return d.all(lambda u: z3.And(d.s.cur.get(u) <= d.M, d.s.cur.get(u) >= d.M - 1, d.s.cur.get(u) >= 0))

    def top_reached(d):
        return d.ws.some(lambda u: d.s.cur.get(u) == d.M)

    def current_copy(d):
        s, M, N = d.s, d.M, d.N

        def f(p, q):
            st = d.started(p)
            old = z3.Or(z3.And(M >= 2, s.chk[p] == M - 2 + OFF, d.full(p), s.cnt[p] == N),
                        z3.And(M < 2, s.chk[p] == 0, d.card(p) == 0, s.cnt[p] == 0))
            return z3.And(z3.Implies(st, s.cnt[p] == d.card(p)), z3.Implies(z3.Not(st), old))
        return d.per_copy(f)

    def current_shares(d):
        s, M = d.s, d.M

        def f(p, q):
            st = d.started(p)

            def g(u):
                b = d.bit(p, u)
                sh, ex = s.sh[p].at(u), s.ex[p].at(u)
                return z3.And(
                    z3.Implies(z3.And(st, b), z3.And(expected_share(sh, u, M), ex.is_one(M), s.cur.get(u) == M)),
                    z3.Implies(z3.And(st, z3.Not(b)), z3.And(sh.is_empty(), ex.is_empty())),
                    z3.Implies(z3.And(z3.Not(st), M >= 2), z3.And(expected_share(sh, u, M - 2), ex.is_one(M - 2))),
                    z3.Implies(z3.And(z3.Not(st), M < 2), z3.And(sh.is_empty(), ex.is_empty())))
            return d.all(g)
        return d.per_copy(f)

    def current_min(d):
        s, M, ws = d.s, d.M, d.ws

        def f(p, q):
            st = d.started(p)
            return z3.And(z3.Implies(st, is_min(ws, s.mn[p], M, lambda u: d.bit(p, u))),
                          z3.Implies(z3.And(z3.Not(st), M >= 2), is_min(ws, s.mn[p], M - 2)))
        return d.per_copy(f)

    def previous_copy(d):
        s, M, N = d.s, d.M, d.N
        return d.per_copy(lambda p, q: z3.If(
            M >= 1, z3.And(s.chk[q] == M - 1 + OFF, d.full(q), s.cnt[q] == N),
            z3.And(s.chk[q] == 0, d.card(q) == 0, s.cnt[q] == 0)))

    def previous_shares(d):
        s, M = d.s, d.M

        def f(p, q):
            def g(u):
                sh, ex = s.sh[q].at(u), s.ex[q].at(u)
                return z3.If(M >= 1, z3.And(expected_share(sh, u, M - 1), ex.is_one(M - 1)),
                             z3.And(sh.is_empty(), ex.is_empty()))
            return d.all(g)
        return d.per_copy(f)

    def previous_min(d):
        return d.per_copy(lambda p, q: z3.Implies(d.M >= 1, is_min(d.ws, d.s.mn[q], d.M - 1)))

    def results(d):
        s = d.s
        complete = d.per_copy(lambda p, q: z3.And(d.started(p), d.full(p)))
        return d.all(lambda u: z3.And(z3.Implies(s.avail.get(u), z3.Or(s.cur.get(u) == d.M - 1, complete)),
                                      z3.Not(s.abad.get(u))))

    return [Clause("top_bounds", top_bounds), Clause("top_reached", top_reached),
            Clause("current_copy", current_copy), Clause("current_copy_shares", current_shares),
            Clause("current_copy_min", current_min), Clause("previous_copy", previous_copy),
            Clause("previous_copy_shares", previous_shares), Clause("previous_copy_min", previous_min),
            Clause("results", results)]


__all__ = ["EMPTY", "NONE_OFFSET", "OmniReduce", "PROPERTIES", "data_of", "next_of"]
