"""What the one-slot protocol models share (:mod:`p4gen.verify.protocol`, :mod:`p4gen.verify.omni`).

Both models run one slot's decision table on a packet (:func:`p4gen.verify.paths.table_paths`), split by
the table's paths, and write the path's register values back into the copy the packet names; both
accept a result the same way (the worker moves to its next chunk or round, splitting on whether it
becomes the newest worker).  :class:`SlotModel` holds those steps once; a model names the registers it
keeps beyond the common ones (``extra_registers``).

Whether a values op *takes* something into a copy's sum (the ``copy_reuse`` obligation covers exactly
those steps) is read from the op's definition in ``p4gen.ops`` (:func:`changes_sum`), never from its
name: an op added there that accumulates is covered by the proof with no change here.
"""

from __future__ import annotations

from typing import Any, Iterator

import z3

from p4gen.ops import graph as opgraph

from .engine import Case, Event, Model, State, step_local
from .paths import Packet, feasible, outcome, table_paths
from .workers import Workers, sel


def sum_effect(op: str | None) -> str:
    """What values op ``op`` does to the sum it runs on, read from its definition in ``p4gen.ops``:
    ``adds`` (the new sum reads the old one and the packet's value), ``stores`` (the packet's value
    alone), ``clears`` (neither: a constant), ``keeps`` (the old sum itself, or no op)."""
    if op is None:
        return "keeps"
    call = opgraph.ROLE_CALLS["values"]
    res = opgraph.symbolic("values", op)
    new = res[call.stores.index("stored")]
    if new.kind == "leaf" and new.args[0] == "stored":
        return "keeps"
    reads = opgraph.leaves([new])
    if "pkt" in reads:
        return "adds" if "stored" in reads else "stores"
    return "clears" if not reads else "rewrites"


def changes_sum(op: str | None) -> bool:
    """Whether values op ``op`` changes the register it runs on (writes, adds, clears, accumulates): its
    new stored value is anything but the stored value itself (see :func:`sum_effect`)."""
    return sum_effect(op) != "keeps"


def window_bounds(depth: int) -> tuple:
    """Window bounds the search tries: a chunk op only asks whether a newer tsi's gap exceeds the bound, and in
    ``depth`` steps no packet's tsi is more than ``depth + 1`` ahead of a chunk register (a far frame's tsi is
    always beyond the bound), so 2 and ``depth + 2`` give every outcome."""
    return (2, depth + 2)


def far_aheads(depth: int) -> tuple:
    """How far beyond the bound a corrupted frame's tsi is: only its order against the tsi of later packets
    (at most ``depth + 1``) can matter, and 1..depth reach every value up to ``depth + 2`` and one above."""
    return tuple(range(1, depth + 1))


class SlotModel(Model):
    """The steps the slot models share (subclasses are dataclasses with ``table``, ``codes``, ``stats``,
    ``copy_rule``, ``far_frames`` and ``_feasible``)."""

    # (the table paths' register name, the state's field) of registers beyond chunk, bitmap, counter, values
    # and exponent
    extra_registers: tuple[tuple[str, str], ...] = ()

    def _deliveries(self, w) -> list[Event]:
        """A worker's packet on each copy it may use, and its accepting a result."""
        ev = [Event("deliver", w, 0)]
        if self.copy_rule != "zero":
            ev.append(Event("deliver", w, 1))
        ev.append(Event("recv", w))
        return ev

    def bitmaps(self, s: State) -> list:
        return list(s.bm)

    def _window(self, k, v, far: bool) -> tuple[Any, Any, list]:
        """(bound, how far beyond it a corrupted frame is or None, their axioms) of one delivery: how far
        ahead of the stored chunk the switch takes a tsi, 2 * slot_count in tsi units, at least two of
        this slot's chunks or rounds in the model's units."""
        bound = step_local(k, f"window{v}", choices=window_bounds)
        extra = [bound >= 2]
        ahead = None
        if far:
            ahead = step_local(k, f"ahead{v}", choices=far_aheads)
            extra.append(ahead >= 1)
        return bound, ahead, extra

    def _copy_guard(self, k, v) -> list:
        """The copy a packet of chunk or round k may use: k mod 2 (``round``), copy 0 only (``zero``), either."""
        if self.copy_rule == "round":
            return [k % 2 == v]
        if self.copy_rule == "zero" and v != 0:
            return [z3.BoolVal(False)]
        return []

    def _answer(self, s: State, ws: Workers, w, k, mc, uc, bad, post: State):
        """Who receives the step's result (``rec(u)``: the sender on unicast or multicast, everyone on
        multicast), recorded as available (and bad, where it is not the exact one) to each worker that waits
        for chunk or round k."""
        def rec(u):
            return sel(ws.same(u, w), z3.Or(mc, uc), mc)
        post.avail = ws.tabulate(lambda u: z3.Or(s.avail.get(u), z3.And(rec(u), k == s.cur.get(u))))
        post.abad = ws.tabulate(lambda u: z3.Or(s.abad.get(u), z3.And(rec(u), k == s.cur.get(u), bad)))
        return rec

    def _prune(self, ws: Workers, w, v, kind: str, extra: list):
        key0 = (ws.concrete, isinstance(w, int), v, kind)

        def ok(path_ops: tuple, cond: list) -> bool:
            key = key0 + path_ops
            if key not in self._feasible:
                self._feasible[key] = feasible(cond, extra)
            return self._feasible[key]
        return ok

    def _switch(self, s: State, ws: Workers, ev: Event, pkt: Packet, extra: list,
                prune: bool) -> Iterator[tuple[Any, State, dict]]:
        """(path, state after it, what it did) for every path of the table a packet on copy ``ev.copy`` takes."""
        w, v = ev.worker, ev.copy
        regs = {"chk": s.chk[v], "this": s.bm[v], "other": s.bm[1 - v], "cnt": s.cnt[v], "val": s.sh[v],
                "exp": s.ex[v], **{r: getattr(s, f)[v] for r, f in self.extra_registers}}
        for pa in table_paths(self.table, ws, regs, pkt, self.codes,
                              self._prune(ws, w, v, ev.kind, extra) if prune else None):
            post = s.clone()
            post.chk[v], post.bm[v], post.bm[1 - v], post.cnt[v] = pa.reg["chk"], pa.reg["this"], pa.reg["other"], pa.reg["cnt"]
            post.sh[v], post.ex[v] = pa.reg["val"], pa.reg["exp"]
            for r, f in self.extra_registers:
                getattr(post, f)[v] = pa.reg[r]
            info = dict(outcome(self.table, pa, self.codes, self.stats), carried=pa.reg["carried"],
                        exp_carried=pa.reg["exp_carried"],
                        **{f"{r}_carried": pa.reg[f"{r}_carried"] for r, _f in self.extra_registers},
                        contrib=z3.BoolVal(changes_sum(pa.ops.get("values"))), ops=dict(pa.ops))
            yield pa, post, info

    def _far_checks(self, s: State, ws: Workers, ev: Event, post: State, info: dict, kept) -> dict[str, Any]:
        """A corrupted frame far ahead: it takes out no one's contribution and changes no register of either
        copy (nor this copy's extra registers), and sends nothing."""
        v = ev.copy
        checks = {p: z3.BoolVal(True) for p in self.properties}
        checks["contributions_kept"] = kept(ws, s, post, v)
        same = [post.chk[u] == s.chk[u] for u in (0, 1)] + [post.cnt[u] == s.cnt[u] for u in (0, 1)]
        same += [post.bm[u].eq_terms(s.bm[u]) for u in (0, 1)]
        same += [getattr(post, f)[v] == getattr(s, f)[v] for _r, f in self.extra_registers]
        same += [post.sh[v].same(ws, s.sh[v]), post.ex[v].same(ws, s.ex[v])]
        checks["far_tsi_ignored"] = z3.And(*same, z3.Not(info["mc"]), z3.Not(info["uc"]))
        return checks

    def _accept(self, s: State, w) -> tuple[State, Any]:
        """A worker accepts its result and moves to its next chunk or round: (the state after, its index)."""
        post = s.clone()
        nxt = s.cur.get(w) + 1
        post.cur = s.cur.set(w, nxt)
        post.avail = s.avail.set(w, z3.BoolVal(False))
        post.abad = s.abad.set(w, z3.BoolVal(False))
        return post, nxt

    @staticmethod
    def _split_newest(s: State, post: State, nxt, guard, checks: dict[str, Any]) -> list[Case]:
        """Split on whether the worker becomes the newest one, so the new ``top`` is a plain term in each."""
        newest, behind = post, post.clone()
        newest.top = nxt
        return [Case(z3.And(guard, nxt > s.top), "newest", newest, checks, {}),
                Case(z3.And(guard, nxt <= s.top), "behind", behind, checks, {})]
