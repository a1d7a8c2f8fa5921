"""SwitchML slot-reuse model: events, state, properties and invariants (run by :mod:`p4gen.verify.engine`).

The model is ONE aggregation slot.  One slot suffices: every register is
indexed by the slot (bitmap word pairs) or by (slot, copy) (chunk, counter,
exponent, values; recirculation passes use ``(slot_copy << pass_bits) | p``,
still private to the slot), a packet for slot j reads and writes only slot
j's entries, and a worker's behaviour on slot j (send chunk c + s after the
result of chunk c, retransmit the outstanding chunk on timeout) depends only
on results for slot j.  The whole switch is therefore an interleaving of
independent per-slot systems, and a safety property of one slot holds for
all of them.  This is also why proof time does not depend on ``slots``.

State (one slot, the workers of :class:`~p4gen.verify.workers.Workers`):

* switch: per copy v in {0, 1} the bitmap (:class:`~p4gen.verify.z3alg.BitSet`:
  the plan's words as one set of worker ids, see
  :func:`~p4gen.verify.cardinality.prove_word_split`), the counter (an
  integer kept in 0..2**32-1, so the op arithmetic is exact), the chunk
  register (hardened), and the value and exponent registers as
  :class:`~p4gen.verify.z3alg.Shares` (for each worker, which of its
  contributions the sum, resp. the max, covers);
* worker u: ``cur[u]`` (the chunk index k it waits for on this slot: chunk
  ``slot + k * slots``, copy ``k mod 2``), ``avail[u]`` (a result labelled
  ``cur[u]`` has been sent to u), ``abad[u]`` (one such result was not the
  exact sum), ``stale[u]`` (a result for an older chunk may still reach u);
* network: every packet u ever sent (chunks ``0..cur[u]``) may arrive any
  number of times in any order (loss, duplication, reordering).  Under the
  FIFO assumption (reference variant) ``lo[u]``, the chunk of u's last
  delivered packet, bounds what may still arrive: ``lo[u] <= k``.  Results
  travel without FIFO in every mode: any result sent to u may arrive late or
  twice; workers check its chunk label;
* ghost ``top``: the newest chunk index any worker is on (max of cur).

Events: ``deliver(w, v)`` (w's packet for some chunk k on copy v reaches the
switch, which runs the decision table and emits its outcome), ``recv(w)``
(w accepts the result labelled ``cur[w]`` and sends its next chunk on the
flipped copy) and, only for workers that do not check labels,
``recv_stale(w)``.

The chunk index k stands for ``tsi = slot + k * slots``: the model's tsi is
``k + off`` with ``off`` 0 (slot 0) or 1 (any other slot), which orders
every pair of this slot's tsi values (and the registers' initial 0) as the
real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from p4gen.decision import STANDARD_CODES, STATS, Codes, DecisionTable

from . import engine
from .engine import Case, Clause, Event, State, TraceRow, TraceStep
from .paths import Packet
from .slotmodel import SlotModel, sum_effect
from .workers import Workers, define
from .z3alg import JUNK, BitSet, Mask, Shares

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
    "completion_multicast": "the contribution that completes a chunk's sum is answered in the same step by "
                            "the result multicast to the job's workers (every one of them, no one else)",
    "retransmission_unicast": "a packet whose contribution the sum already holds is never multicast: the "
                              "answer to a retransmission goes to its sender only",
    "progress": "a worker's packet for the chunk it waits for is added to the copy's sum or answered with the "
                "result: it is never dropped while the sum lacks it",
    "contributions_kept": "no packet takes out of a copy's sum the contribution of a worker that still waits for "
                          "that chunk's result",
}

# tables that keep a chunk per copy (hardened) also answer for frames far ahead of it
FAR_PROPERTIES: dict[str, str] = {
    "far_tsi_ignored": "a frame from a registered worker whose tsi is more than two of the job's windows ahead of "
                       "the copy's chunk changes no register and sends nothing (one corrupted frame cannot "
                       "strand a copy)",
}

SCHEMA = {"bm": ("bits", 2), "cnt": ("int", 2), "chk": ("int", 2), "sh": ("shares", 2), "ex": ("shares", 2),
          "cur": ("wint", None), "lo": ("wint", None), "avail": ("wbool", None), "abad": ("wbool", None),
          "stale": ("wbool", None), "top": ("int", None)}


@dataclass
class SwitchML(SlotModel):
    table: DecisionTable
    fifo: bool
    copy_rule: str = "round"       # round: k mod 2 | zero: always 0 | toggle: either copy (flip per send)
    label_check: bool = True
    counter_delta: int = 0         # num_workers the counter compares with = n + delta
    slots: int = 512               # display only
    far_frames: bool = True        # hardened tables: a registered worker's corrupted frame far ahead (deliver_far)
    codes: Codes = STANDARD_CODES  # the plan's observation and outcome codes
    stats: tuple[str, ...] = tuple(STATS)     # the plan's packet counter indices
    _feasible: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    group = "protocol"             # the name of its property lines
    schema = SCHEMA

    def assumptions(self, fifo: bool, label: str) -> list[str]:
        return [
            f"decision table: {label} variant ({self.table.assumption})",
            "network: switch->worker results may be lost, duplicated and reordered; worker->switch packets may be "
            "lost, duplicated and reordered" + (", except that each worker's link to the switch delivers in order "
                                                "(FIFO)" if fifo else " (no FIFO assumption)"),
            "workers label-check results; tsi does not wrap within a job; one slot is modelled (slots are "
            "independent)",
            "values are generic (distinct contributions give distinct sums); the exponent rows are in the protocol "
            "model as 'which contributions the max covers', and fixedpoint/max_exponent proves the 8-bit max itself",
        ]

    @property
    def hardened(self) -> bool:
        return self.table.step("chunk") is not None

    @property
    def properties(self) -> dict[str, str]:
        return {**PROPERTIES, **FAR_PROPERTIES} if self.hardened and self.far_frames else PROPERTIES

    def globals(self, ws: Workers):
        off = z3.Int("off")
        return {"off": off}, [off == 0 if self.slots <= 1 else z3.Or(off == 0, off == 1)]

    def init(self, s: State, ws: Workers, g):
        t = [s.bm[v].eq_terms(BitSet.empty(ws)) for v in (0, 1)]
        t += [s.cnt[v] == 0 for v in (0, 1)] + [s.chk[v] == 0 for v in (0, 1)]
        t += [x.eq_terms(Shares.empty(ws)) for v in (0, 1) for x in (s.sh[v], s.ex[v])]
        t += [s.top == 0, s.cur.eq_terms(ws.const_vec(z3.IntVal(0))), s.lo.eq_terms(ws.const_vec(z3.IntVal(-1)))]
        t += [x.eq_terms(ws.const_vec(z3.BoolVal(False))) for x in (s.avail, s.abad, s.stale)]
        return z3.And(t)

    def events(self, ws: Workers, w) -> list[Event]:
        ev = self._deliveries(w)
        if not self.label_check:
            ev.append(Event("recv_stale", w))
        if self.hardened and self.far_frames:
            ev += [Event("deliver_far", w, v) for v in (0, 1)]
        return ev

    def view(self, s: State, ws: Workers, g) -> "View":
        return View(self, s, ws, g["off"])

    # -- transitions ------------------------------------------------------
    def cases(self, s: State, ws: Workers, g, ev: Event, k, prune: bool) -> list[Case]:
        if not ev.kind.startswith("deliver"):
            return self._receive(s, ws, ev)
        w, v = ev.worker, ev.copy
        far = ev.kind == "deliver_far"
        bound, ahead, extra = self._window(k, v, far)
        if far:
            pkt = Packet(tsi=s.chk[v] + bound + ahead, mask=Mask(w), n=ws.N + self.counter_delta,
                         values=Shares.packet(ws, w, k, JUNK),
                         exponent=Shares.packet(ws, w, k, JUNK), bound=bound)
        else:
            pkt = Packet(tsi=k + g["off"], mask=Mask(w), n=ws.N + self.counter_delta,
                         values=Shares.packet(ws, w, k), exponent=Shares.packet(ws, w, k), bound=bound)
        out = []
        for pa, post, info in self._switch(s, ws, ev, pkt, extra, prune):
            if far:
                guard, checks = self._deliver_far(s, ws, ev, post, info, extra)
            else:
                guard, checks = self._deliver(s, ws, ev, k, post, info)
                guard = z3.And(guard, *extra)
            cond = z3.And(pa.cond) if pa.cond else z3.BoolVal(True)
            out.append(Case(z3.And(guard, cond), pa.label, post, checks, info))
        return out

    def _deliver_far(self, s: State, ws: Workers, ev: Event, post: State, info: dict, guard: list):
        """A corrupted frame of worker ev.worker: a tsi beyond the bound, junk values; the worker state stays."""
        return z3.And(guard), self._far_checks(s, ws, ev, post, info, _kept)

    def _deliver(self, s: State, ws: Workers, ev: Event, k, post: State, info: dict):
        w, v = ev.worker, ev.copy
        checks = {p: z3.BoolVal(True) for p in self.properties}
        guard = [k >= 0, k <= s.cur.get(w)]
        if self.fifo:
            guard.append(k >= s.lo.get(w))
        guard += self._copy_guard(k, v)
        post.lo = s.lo.set(w, k)
        mc, uc = info["mc"], info["uc"]
        good = z3.And(info["carried"].exact(ws, k), info["exp_carried"].exact(ws, k))
        bad = define(ws, guard, f"{k}_bad_{v}", z3.Not(good))

        rec = self._answer(s, ws, w, k, mc, uc, bad, post)
        post.stale = ws.tabulate(lambda u: z3.Or(s.stale.get(u), z3.And(rec(u), k < s.cur.get(u))))
        held = s.sh[v].at(w).is_one(k)
        checks["exact_result"] = z3.Implies(z3.Or(mc, uc),
                                            z3.And(good, ws.all(lambda u: z3.Implies(rec(u), k <= s.cur.get(u)))))
        checks["retransmission_harmless"] = z3.Implies(held, z3.And(post.sh[v].same(ws, s.sh[v]),
                                                                    post.ex[v].same(ws, s.ex[v])))
        checks["copy_reuse"] = z3.Implies(info["contrib"], ws.all(lambda u: s.cur.get(u) >= k - 1))
        checks["retransmission_answered"] = z3.Implies(z3.And(k == s.cur.get(w), s.sh[v].exact(ws, k)), z3.Or(mc, uc))
        checks["completion_multicast"] = z3.Implies(z3.And(z3.Not(s.sh[v].exact(ws, k)), post.sh[v].exact(ws, k)), mc)
        checks["retransmission_unicast"] = z3.Implies(held, z3.Not(mc))
        checks["progress"] = z3.Implies(k == s.cur.get(w), z3.Or(post.sh[v].at(w).is_one(k), mc, uc))
        checks["contributions_kept"] = _kept(ws, s, post, v)
        return z3.And(guard), checks

    def _receive(self, s: State, ws: Workers, ev: Event) -> list[Case]:
        w = ev.worker
        checks = {p: z3.BoolVal(True) for p in self.properties}
        if ev.kind == "recv":
            guard = s.avail.get(w)
            checks["exact_accept"] = z3.Not(s.abad.get(w))
        elif ev.kind == "recv_stale":
            guard = s.stale.get(w)
            checks["exact_accept"] = z3.BoolVal(False)
        else:
            raise KeyError(ev.kind)
        post, nxt = self._accept(s, w)
        post.stale = s.stale.set(w, z3.BoolVal(True))
        return self._split_newest(s, post, nxt, guard, checks)

    # -- invariants -------------------------------------------------------
    def invariant(self) -> list[Clause]:
        return hardened_invariant() if self.hardened else reference_invariant()

    # -- traces -----------------------------------------------------------
    def trace_row(self, st: TraceStep) -> TraceRow:
        off = st.int(z3.Int("off"))
        slot = 0 if off == 0 else 1
        chunk = lambda k: slot + k * self.slots  # noqa: E731
        e = st.event
        cur = st.int(st.pre.cur.get(e.worker))
        if e.kind == "deliver_far":
            stat = self.stats[st.int(st.info["stat"])]
            act = {"multicast": "multicast result", "unicast": f"unicast result to worker {e.worker}",
                   "absorbed": "takes the frame, no packet out"}.get(stat, f"drop ({stat})")
            return TraceRow(st.index, e.worker, slot, e.copy, "far ahead",
                            "corrupted frame with a tsi more than two windows ahead of the copy's chunk arrives", act)
        if e.kind == "deliver":
            k = st.k
            if k < cur:
                what = f"old packet for chunk {chunk(k)} arrives (delayed duplicate; worker is at chunk {chunk(cur)})"
            elif any(h.event.kind == "deliver" and h.event.worker == e.worker and h.k == k for h in st.history):
                what = f"packet for chunk {chunk(k)} arrives again (retransmission)"
            else:
                what = f"packet for chunk {chunk(k)} arrives"
            stat = self.stats[st.int(st.info["stat"])]
            act = {"multicast": f"multicast result labelled {chunk(k)}",
                   "unicast": f"unicast result labelled {chunk(k)} to worker {e.worker}",
                   "absorbed": f"{_took(st.info)}, no packet out"}.get(stat, f"drop ({stat})")
            return TraceRow(st.index, e.worker, slot, e.copy, chunk(k), what, act)
        nxt_copy = 0 if self.copy_rule == "zero" else (cur + 1) % 2
        if e.kind == "recv":
            what = f"accepts result of chunk {chunk(cur)}; sends chunk {chunk(cur + 1)} on copy {nxt_copy}"
        else:
            what = (f"accepts an old result (no label check) as chunk {chunk(cur)}'s; "
                    f"sends chunk {chunk(cur + 1)} on copy {nxt_copy}")
        return TraceRow(st.index, e.worker, slot, nxt_copy, chunk(cur), what, "-")


def _took(info: dict) -> str:
    """What the values step did with an absorbed packet, in words."""
    op = info.get("ops", {}).get("values", "add")
    return {"adds": f"adds the contribution ({op})", "stores": f"stores the contribution, first of the round ({op})",
            "clears": f"stores zeros, the sum starts over ({op})"}.get(sum_effect(op),
                                                                       f"takes no contribution (values: {op})")


def _kept(ws: Workers, s: State, post: State, v: int):
    """Every contribution copy v holds for the chunk its worker waits for is still there after the step."""
    return ws.all(lambda u: z3.Implies(s.sh[v].at(u).is_one(s.cur.get(u)), post.sh[v].at(u).is_one(s.cur.get(u))))


# ---------------------------------------------------------------------------
# strengthening invariants

class View(engine.View):
    """Terms derived from a state: M = the ghost ``top`` (max cur, see the ``top`` clauses)."""

    def __init__(self, model: SwitchML, s: State, ws: Workers, off):
        super().__init__(s, ws)
        self.model, self.off = model, off


def share_desc(sh, choices):
    """choices: list of (cond, rnd or None for empty), last cond ignored (default)."""
    *front, (_, last) = choices
    out = sh.is_empty() if last is None else sh.is_one(last)
    for cond, r in reversed(front):
        out = z3.If(cond, sh.is_empty() if r is None else sh.is_one(r), out)
    return out


def top_bounds(d: View):
    return d.all(lambda u: z3.And(d.s.cur.get(u) <= d.M, d.s.cur.get(u) >= d.M - 1, d.s.cur.get(u) >= 0))


def top_reached(d: View):
    return d.ws.some(lambda u: d.s.cur.get(u) == d.M)


def exponent_shares(d: View):
    """Each copy's exponent register covers exactly the contributions its value register holds.

    Why it holds: in both tables the exponent rows write where the value rows
    write (the round's first packet), take the max where they add (a packet
    whose bit was clear), and otherwise leave the register alone.  Max and add
    cover the same contributions except when a contribution would be taken
    twice, which the bitmap rules out (the value-share clauses).  Like every
    clause it is checked, not assumed: base case and every event.
    """
    return d.all(lambda u: z3.And([d.s.ex[v].at(u).same(d.s.sh[v].at(u)) for v in (0, 1)]))


def previous_shares(d: View):
    return d.per_copy(lambda p, q: d.all(lambda u: share_desc(d.s.sh[q].at(u), [(d.M >= 1, d.M - 1), (True, None)])))


def reference_invariant() -> list[Clause]:
    def ranges(d):
        s, M = d.s, d.M
        return d.all(lambda u: z3.And(s.lo.get(u) >= M - 1, s.lo.get(u) <= s.cur.get(u), s.lo.get(u) >= -1))

    def bits(d):
        lo = d.s.lo.get
        return d.all(lambda u: z3.And([d.bit(v, u) == z3.And(lo(u) >= 0, lo(u) % 2 == v) for v in (0, 1)]))

    def current_shares(d):
        M, lo = d.M, d.s.lo.get
        return d.per_copy(lambda p, q: d.all(lambda u: share_desc(
            d.s.sh[p].at(u), [(lo(u) == M, M), (d.card(p) >= 1, None), (M >= 2, M - 2), (True, None)])))

    def current_counter(d):
        return d.per_copy(lambda p, q: d.s.cnt[p] == z3.If(d.full(p), 0, d.card(p)))

    def previous_counter(d):
        return d.per_copy(lambda p, q: d.s.cnt[q] == 0)

    def results(d):
        s = d.s
        complete = d.per_copy(lambda p, q: d.full(p))
        return d.all(lambda u: z3.And(z3.Implies(s.avail.get(u), z3.Or(s.cur.get(u) == d.M - 1, complete)),
                                      z3.Not(s.abad.get(u))))

    return [Clause("top_bounds", top_bounds), Clause("top_reached", top_reached), Clause("ranges", ranges),
            Clause("bitmap", bits), Clause("current_copy_shares", current_shares),
            Clause("current_copy_counter", current_counter), Clause("previous_copy_shares", previous_shares),
            Clause("previous_copy_counter", previous_counter), Clause("exponent_shares", exponent_shares),
            Clause("results", results)]


def hardened_invariant() -> list[Clause]:
    def started(d, p):
        return d.s.chk[p] == d.M + d.off

    def current_copy(d):
        s, M, off, N = d.s, d.M, d.off, d.N

        def f(p, q):
            st = started(d, p)
            old = z3.Or(z3.And(M >= 2, s.chk[p] == M - 2 + off, d.full(p), s.cnt[p] == N),
                        z3.And(M < 2, s.chk[p] == 0, M + off > 0, d.card(p) == 0, s.cnt[p] == 0))
            return z3.And(z3.Implies(st, s.cnt[p] == d.card(p)), z3.Implies(z3.Not(st), old))
        return d.per_copy(f)

    def current_shares(d):
        s, M = d.s, d.M

        def f(p, q):
            st = started(d, p)
            return d.all(lambda u: z3.And(
                share_desc(s.sh[p].at(u), [(z3.And(st, d.bit(p, u)), M), (st, None), (M >= 2, M - 2), (True, None)]),
                z3.Implies(z3.And(st, d.bit(p, u)), s.cur.get(u) == M)))
        return d.per_copy(f)

    def previous_copy(d):
        s, M, off, N = d.s, d.M, d.off, d.N
        return d.per_copy(lambda p, q: z3.If(
            M >= 1, z3.And(s.chk[q] == M - 1 + off, d.full(q), s.cnt[q] == N),
            z3.And(s.chk[q] == 0, d.card(q) == 0, s.cnt[q] == 0)))

    def results(d):
        s = d.s
        complete = d.per_copy(lambda p, q: z3.And(started(d, p), d.full(p)))
        return d.all(lambda u: z3.And(z3.Implies(s.avail.get(u), z3.Or(s.cur.get(u) == d.M - 1, complete)),
                                      z3.Not(s.abad.get(u))))

    return [Clause("top_bounds", top_bounds), Clause("top_reached", top_reached),
            Clause("current_copy", current_copy), Clause("current_copy_shares", current_shares),
            Clause("previous_copy", previous_copy), Clause("previous_copy_shares", previous_shares),
            Clause("exponent_shares", exponent_shares), Clause("results", results)]
