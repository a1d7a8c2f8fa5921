"""Path-complete packet sequences for the dt_* tables of a plan (test support).

The const entries of the ``dt_*`` tables are the expansion of the plan's
decision (:func:`p4gen.decision.expand`, the one the P4 program holds and
the verifier encodes).  A packet's *path* is the entry it takes in every
``dt_*`` table, in pipeline order.  :func:`explore` searches the switch's
state space of one slot breadth-first, with the software model executing
the plan's table (``fast=False``, its ``entry_trace`` saying which entry
each step took), over every packet a configured worker can send to that
slot: any worker, any copy, any tsi of a small set (the ``cmp``
observation only depends on how tsi orders against the stored chunk) and,
for OmniReduce, with or without a block.  The search runs to a fixed point,
so every path reachable in that finite system is found, each with a
shortest packet sequence from the initial state.

An entry that no path takes is unreachable, for one of two reasons that
:func:`why_unreachable` tells apart:

* the op that an earlier step selects for the entry's observations can
  never report the observation the entry keys on, from any register value
  (found by running the op of ``p4gen.ops`` over small register values);
* the op can report it, but no reachable state makes it do so: an
  invariant of the reachable states rules it out (the caller argues it).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from p4gen import decision, ops
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config

Entry = tuple[str, tuple[tuple[str, str], ...]]
Path = tuple[Entry, ...]

JOB = 3
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


@dataclass(frozen=True)
class Pkt:
    """One contribution: worker index, chunk (tsi), copy and (OmniReduce) whether it carries a block."""

    worker: int
    tsi: int
    copy: int
    data: int = 1

    def __str__(self) -> str:
        return f"w{self.worker}:tsi{self.tsi}/c{self.copy}" + ("" if self.data else "/hdr")


def entry_text(e: Entry) -> str:
    return f"{e[0]}[{' '.join(f'{k}={v}' for k, v in e[1]) or '-'}]"


def const_entries(plan: Plan) -> list[Entry]:
    """Every const entry of every dt_* table, as (table, ((key, value), ...)), from decision.expand."""
    table = plan.decision
    out = []
    for name, keys, rules in [(s.name, s.keys, s.rules) for s in table.steps] + [("outcome", table.outcome.keys,
                                                                                   table.outcome.rules)]:
        for obs, _rule in decision.expand(keys, rules):
            out.append((f"dt_{name}", tuple(obs.items())))
    return out


def workers(n: int) -> list[WorkerAddr]:
    """n workers on switch ports 1..n."""
    return [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in range(1, n + 1)]


def job(plan: Plan, n: int) -> dict[str, Any]:
    """The control-plane config of job ``JOB``: n workers, every slot of the plan."""
    return job_config(plan, JOB, workers(n), slot_base=0, slot_count=int(plan.params.slots), mgid=5, rid_base=10)


class Frames:
    """Contribution frames of a plan's job ``JOB`` for the workers of :func:`workers`."""

    def __init__(self, plan: Plan, addrs: list[WorkerAddr], seed: int = 7):
        self.layout = W.FrameLayout(plan)
        self.addrs = addrs
        self.slot_bits = int(plan.params.slot_bits)
        self.rng = np.random.default_rng(seed)

    def frame(self, pkt: Pkt, slot: int) -> tuple[int, bytes]:
        """(ingress port, frame) of ``pkt`` sent to the job's slot ``slot``."""
        L = self.layout
        a = self.addrs[pkt.worker]
        vals = self.rng.integers(0, 1 << L.value_width, size=L.elements, dtype=np.uint64) if pkt.data else None
        kw = {"next": int(self.rng.integers(0, 1 << 20))} if L.omni else {}
        f = P.contribution_frame(L, P.Endpoint(a.mac, a.ip, a.udp_port), SWITCH, job=JOB, tsi=pkt.tsi,
                                 pool_index=(pkt.copy << self.slot_bits) | slot,
                                 exponent=int(self.rng.integers(0, 16)), values=vals, **kw)
        return a.port, f


@dataclass
class Exploration:
    paths: dict[Path, list[Pkt]]          # every reachable path -> a shortest sequence ending with it
    states: int
    invariant_ok: bool                    # counter == popcount(this copy's bitmap) in every reachable state

    @property
    def entries(self) -> set[Entry]:
        return {e for p in self.paths for e in p}


class _Slot:
    """The control registers of slot 0 of a model: read as a hashable state, written back."""

    def __init__(self, model: SwitchModel, plan: Plan):
        self.model = model
        self.regs = [(r.name, r.role) for r in plan.registers if r.role in ("chunk", "bitmap", "counter")]

    def read(self) -> tuple:
        out = []
        for name, role in self.regs:
            a = self.model.register_read(name)
            out.append(tuple(int(x) for x in a[0]) if role == "bitmap" else (int(a[0]), int(a[1])))
        return tuple(out)

    def write(self, state: tuple) -> None:
        for (name, role), v in zip(self.regs, state):
            if role == "bitmap":
                self.model.register_write(name, 0, list(v))
            else:
                self.model.register_write(name, 0, v[0])
                self.model.register_write(name, 1, v[1])

    def counts_match_bitmaps(self, state: tuple) -> bool:
        bm = [v for (_, role), v in zip(self.regs, state) if role == "bitmap"]
        cnt = next(v for (_, role), v in zip(self.regs, state) if role == "counter")
        return all(cnt[c] == sum(bin(w[c]).count("1") for w in bm) for c in (0, 1))


def explore(plan: Plan, n: int = 3, tsis: tuple[int, ...] = (0, 1, 2)) -> Exploration:
    """Breadth-first search of one slot's reachable states for n workers, to a fixed point."""
    addrs = workers(n)
    model = SwitchModel(plan, fast=False)
    model.load_config(job(plan, n))
    frames = Frames(plan, addrs)
    omni = frames.layout.omni
    alphabet = [Pkt(w, t, c, d) for w, t, c, d in
                itertools.product(range(n), tsis, (0, 1), (1, 0) if omni else (1,))]
    sent = {p: frames.frame(p, 0) for p in alphabet}
    slot = _Slot(model, plan)
    start = slot.read()
    seqs: dict[tuple, list[Pkt]] = {start: []}
    paths: dict[Path, list[Pkt]] = {}
    invariant = slot.counts_match_bitmaps(start)
    todo = deque([start])
    while todo:
        state = todo.popleft()
        for pkt in alphabet:
            slot.write(state)
            model.entry_trace = []
            port, f = sent[pkt]
            model.process(f, port)
            path = tuple(model.entry_trace)
            seq = seqs[state] + [pkt]
            if path and path not in paths:
                paths[path] = seq
            new = slot.read()
            if new not in seqs:
                seqs[new] = seq
                invariant = invariant and slot.counts_match_bitmaps(new)
                todo.append(new)
    model.entry_trace = None
    return Exploration(paths, len(seqs), invariant)


# -- why an entry is unreachable ------------------------------------------------------------

def _op_reports(role: str, op: str, n: int) -> set[str]:
    """Every observation ``op`` of ``role`` reports, over small register values (n workers)."""
    got: set[str] = set()
    if role == "chunk":
        for stored, tsi in itertools.product(range(3), repeat=2):     # bound 2: every gap here is within it
            got.add(ops.CMP_NAMES[ops.chunk_op(op, stored, tsi, ops.INT, 2)[1]])
    elif role == "bitmap":
        for this, other, mask in itertools.product(range(4), range(4), (1, 2)):
            got.add("1" if ops.bitmap_op(op, this, other, mask, 2)[2] else "0")
    elif role == "counter":
        for count in range(n + 2):
            got.add(ops.COUNT_NAMES[ops.counter_op(op, count, n, 32)[1]])
    return got


def why_unreachable(plan: Plan, entry: Entry, n: int = 3) -> str | None:
    """The op-level reason ``entry`` can never be taken, or None when only the reachable states exclude it."""
    table = plan.decision
    obs = dict(entry[1])
    for st in table.steps:
        y = st.yields
        if not y or y not in obs or not set(st.keys) <= set(obs):
            continue
        rule = decision.lookup(st.rules, {k: obs[k] for k in st.keys})
        if obs[y] not in _op_reports(st.role, rule.op, n):
            cond = " ".join(f"{k}={obs[k]}" for k in st.keys) or "every packet"
            return f"for {cond} step {st.name} runs {rule.op}, which never reports {y}={obs[y]}"
    return None


def coverage_line(name: str, hit: set[Entry], entries: list[Entry], unreachable: list[Entry]) -> str:
    reachable = [e for e in entries if e not in unreachable]
    got = sum(1 for e in reachable if e in hit)
    return (f"{name}: {got}/{len(reachable)} reachable dt_* entries hit ({100.0 * got / max(1, len(reachable)):.1f}%), "
            f"{len(unreachable)} of {len(entries)} const entries unreachable")


def summary(plan: Plan, found: Exploration, argued: dict[Any, str]) -> list[str]:
    """One line per unreachable entry with its reason (op-level, else the argued invariant)."""
    lines = []
    for e in const_entries(plan):
        if e in found.entries:
            continue
        why = why_unreachable(plan, e) or next((txt for pat, txt in argued.items()
                                                if all(dict(e[1]).get(k) == v for k, v in pat)), None)
        lines.append(f"  {entry_text(e)}: {why or 'NOT ARGUED'}")
    return lines


# -- adversarial sequences ----------------------------------------------------------------------

def adversarial(plan: Plan, slots: list[int], n: int = 3, steps: int = 150, seed: int = 1
                ) -> tuple[list[tuple[str, int, bytes]], Counter]:
    """Workers running the protocol on ``slots`` over a network that loses, duplicates, reorders and replays.

    Each worker sends round k of slot ``slots[i]`` as tsi ``i + k * len(slots)`` on copy ``k mod 2`` and
    moves to round k + 1 when the result labelled with its round reaches it.  Packets wait in flight;
    each step sends, loses, delivers (the oldest, or another: a reordering), delivers and keeps a copy
    in flight (a duplicate), or replays a packet sent long ago.  Results may be lost too.  The model
    decides what comes back.  Returns the frames delivered to the switch, as (label, port, frame), in
    order, and how often each network event happened.
    """
    rng = random.Random(seed)
    addrs = workers(n)
    frames = Frames(plan, addrs, seed)
    L = frames.layout
    model = SwitchModel(plan)
    model.load_config(job(plan, n))
    rounds = {(w, s): 0 for w in range(n) for s in slots}
    flight: list[tuple[str, int, bytes, Pkt]] = []
    history: list[tuple[str, int, bytes, Pkt]] = []
    out: list[tuple[str, int, bytes]] = []
    kinds: Counter = Counter()
    mask = (1 << frames.slot_bits) - 1

    def current(w: int, s: int) -> Pkt:
        k = rounds[w, s]
        return Pkt(w, slots.index(s) + k * len(slots), k % 2, 0 if L.omni and rng.random() < 0.4 else 1)

    def deliver(label: str, port: int, frame: bytes) -> None:
        out.append((label, port, frame))
        for eport, f in model.process(frame, port):
            w = eport - 1
            if not 0 <= w < n:
                continue
            if rng.random() < 0.1:
                kinds["result lost"] += 1
                continue
            res = P.parse_result(L, f)
            s = res.pool_index & mask
            if s in slots and res.tsi == slots.index(s) + rounds[w, s] * len(slots):
                rounds[w, s] += 1

    for _ in range(steps):
        r = rng.random()
        if r < 0.35 or not flight:
            w, s = rng.randrange(n), rng.choice(slots)
            pkt = current(w, s)
            port, f = frames.frame(pkt, s)
            item = (f"{pkt} slot {s}", port, f, pkt)
            flight.append(item)
            history.append(item)
            kinds["sent"] += 1
        elif r < 0.45:
            flight.pop(rng.randrange(len(flight)))
            kinds["lost"] += 1
        elif r < 0.53:
            old = [h for h in history if h[3].tsi < max(rounds.values()) * len(slots) - len(slots)]
            if old:
                label, port, f, _ = rng.choice(old)
                deliver(f"replay {label}", port, f)
                kinds["replayed"] += 1
        else:
            i = 0 if rng.random() < 0.6 else rng.randrange(len(flight))
            label, port, f, pkt = flight[i]
            if i:
                kinds["reordered"] += 1
            if rng.random() < 0.15:
                kinds["duplicated"] += 1
                label = f"{label} (a copy stays in flight)"
            else:
                flight.pop(i)
            deliver(label, port, f)
    kinds["rounds completed"] = sum(rounds.values())
    return out, kinds
