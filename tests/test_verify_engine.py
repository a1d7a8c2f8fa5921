"""The transition-system core: quantifier grounding, bitmap sets, set sizes, word split, table paths."""

import ast
import itertools
from pathlib import Path

import pytest
import z3

from p4gen import decision, ops
from p4gen import protocols
from p4gen.verify import cardinality, engine, paths
from p4gen.verify.mutants import base_model
from p4gen.verify.workers import UnplacedQuantifier, Vec, Workers, ground
from p4gen.verify.z3alg import BitSet, BitsAlgebra, Mask, Shares

VERIFY = Path(__file__).resolve().parents[1] / "verify"


def _valid(ws, hyp, goal, named):
    f, _ = ground(z3.And(hyp, z3.Not(goal)), ws, named)
    s = z3.Solver()
    s.add(f)
    return s.check() == z3.unsat


def test_ground_instantiates_universals_and_skolemises_goals():
    ws = Workers.between(2, 64)
    a = z3.Int("a")
    arr = z3.Array("x", z3.IntSort(), z3.IntSort())
    hyp = z3.And(ws.in_range(a), ws.all(lambda u: z3.Select(arr, u) >= 3))
    # implied for every worker: proved through the goal's Skolem constant
    assert _valid(ws, hyp, ws.all(lambda u: z3.Select(arr, u) >= 2), [a])
    # an existential goal is witnessed by a named worker
    assert _valid(ws, hyp, ws.some(lambda u: z3.Select(arr, u) >= 3), [a])
    # not implied: grounding must not make it look proved
    assert not _valid(ws, hyp, ws.all(lambda u: z3.Select(arr, u) >= 4), [a])
    assert not _valid(ws, ws.in_range(a), ws.some(lambda u: z3.Select(arr, u) >= 3), [a])


def test_ground_keeps_hypothesis_existentials():
    ws = Workers.between(2, 8)
    arr = z3.Array("y", z3.IntSort(), z3.BoolSort())
    hyp = ws.some(lambda u: z3.Select(arr, u))
    assert _valid(ws, hyp, ws.some(lambda u: z3.Select(arr, u)), [])
    assert not _valid(ws, hyp, ws.all(lambda u: z3.Select(arr, u)), [])


def _quantifiers(f) -> int:
    seen, todo, count = set(), [f], 0
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        count += z3.is_quantifier(e) and not e.is_lambda()
        todo.extend([e.body()] if z3.is_quantifier(e) else e.children())
    return count


def test_an_exists_under_a_forall_gets_its_own_witness_in_every_instance():
    """Every worker u has some worker v with f(u) == g(v): nothing says v is a worker the query names.

    Expanding the inner exists by its syntax, as a disjunction over the named workers a and b, would assert
    f(a) == g(a) or f(a) == g(b), and with the two disequalities below turn a satisfiable hypothesis (n = 3,
    the third worker is a's witness) into a contradiction: a wrong proof.  By polarity the exists is
    existential, so each instance gets a fresh witness."""
    ws = Workers.between(2, 4)
    a = z3.Int("a")
    b = z3.If(a == 0, z3.IntVal(1), z3.IntVal(0))
    f, g = z3.Function("f", z3.IntSort(), z3.IntSort()), z3.Function("g", z3.IntSort(), z3.IntSort())
    hyp = z3.And(ws.in_range(a), ws.all(lambda u: ws.some(lambda v: f(u) == g(v))), f(a) != g(a), f(a) != g(b))
    grounded, _ = ground(hyp, ws, [a, b])
    assert _quantifiers(hyp) == 2 and _quantifiers(grounded) == 0
    sol = z3.Solver()
    sol.add(grounded)
    assert sol.check() == z3.sat
    # the same clause as a goal: its negation puts the forall in existential position, the exists in universal
    goal = ws.all(lambda u: ws.some(lambda v: v == u))
    assert _valid(ws, z3.BoolVal(True), goal, [a])


def test_a_quantifier_under_an_if_then_else_follows_its_branch():
    ws = Workers.between(2, 8)
    a, p = z3.Int("a"), z3.Bool("p")
    arr = z3.Array("z", z3.IntSort(), z3.IntSort())
    hyp = z3.And(ws.in_range(a), p, z3.If(p, ws.all(lambda u: z3.Select(arr, u) >= 3), ws.some(lambda u: z3.Select(arr, u) < 0)))
    assert _valid(ws, hyp, z3.Select(arr, a) >= 3, [a])
    assert not _valid(ws, hyp, z3.Select(arr, a) >= 4, [a])


@pytest.mark.parametrize("where", ["ite condition", "boolean ==", "xor", "lambda body"])
def test_a_quantifier_with_no_single_polarity_is_refused(where):
    ws = Workers.between(2, 8)
    arr = z3.Array("w", z3.IntSort(), z3.BoolSort())
    q = ws.all(lambda u: z3.Select(arr, u))
    p, x = z3.Bool("p"), z3.Int("x")
    formula = {"ite condition": z3.If(q, x > 0, x < 0), "boolean ==": q == p, "xor": z3.Xor(q, p),
               "lambda body": z3.Select(z3.Lambda([x], z3.And(q, x > 0)), 1)}[where]
    with pytest.raises(UnplacedQuantifier, match="no single polarity|both polarities"):
        ground(z3.And(p, formula), ws, [x])


def test_concrete_workers_are_finite_conjunctions():
    ws = Workers.exactly(3)
    v = ws.vec("c", z3.IntSort())
    assert z3.is_and(ws.all(lambda u: v.get(u) > 0)) and len(ws.all(lambda u: v.get(u) > 0).children()) == 3


@pytest.mark.parametrize("op", sorted(ops.OPS["bitmap"]))
def test_bits_algebra_is_the_bitmap_op_on_single_bits(op):
    """On a one-bit mask, the set interpretation gives what the integer op gives, for every 3-bit state."""
    ws = Workers.exactly(3)
    A = BitsAlgebra(ws)
    for this, other, w in itertools.product(range(8), range(8), range(3)):
        t, o, seen = ops.bitmap_op(op, this, other, 1 << w, 3, ops.INT)
        st = BitSet(ws.const_vec(z3.BoolVal(False)))
        for u in range(3):
            st = BitSet(st.bits.set(u, z3.BoolVal(bool(this >> u & 1))))
        so = BitSet(ws.const_vec(z3.BoolVal(False)))
        for u in range(3):
            so = BitSet(so.bits.set(u, z3.BoolVal(bool(other >> u & 1))))
        t2, o2, s2 = ops.bitmap_op(op, st, so, Mask(w), 3, A)
        t2, o2 = A.word(t2), A.word(o2)
        got_t = sum(1 << u for u in range(3) if z3.is_true(z3.simplify(t2.has(u))))
        got_o = sum(1 << u for u in range(3) if z3.is_true(z3.simplify(o2.has(u))))
        assert (got_t, got_o, z3.is_true(z3.simplify(s2))) == (t, o, bool(seen)), (op, this, other, w)


@pytest.mark.parametrize("words", [1, 2, 8])
def test_word_split_lemma(words):
    assert all(cardinality.word_split_lemmas(words).values())


def test_word_split_lemma_catches_a_cross_word_op(monkeypatch):
    real = ops.bitmap_op

    def shifted(op, this, other, mask, bits=32, A=ops.INT):
        t, o, s = real(op, this, other, mask, bits, A)
        return (t | (mask << 1) if op == "set" else t), o, s     # also sets the next worker's bit
    monkeypatch.setattr(ops, "bitmap_op", shifted)
    cardinality.prove_word_split.cache_clear()
    try:
        assert not cardinality.prove_word_split(2, "set")
    finally:
        monkeypatch.undo()
        cardinality.prove_word_split.cache_clear()


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3])
def test_card_facts_hold_for_the_real_set_size(n):
    """Every size fact holds when CARD is the real size of {u < n : S[u]}, for every set and store."""
    ws = Workers.between(2, 4)
    a = z3.Int("a")
    base = z3.Array("S", z3.IntSort(), z3.BoolSort())
    for bits in range(1 << n):
        for w, val in itertools.product(range(n), (True, False)):
            arr = z3.Store(base, a, z3.BoolVal(val))
            facts = cardinality.card_facts(ws, [BitSet(Vec(None, arr))])
            s = z3.Solver()
            s.add(ws.n == n, a == w)
            s.add([z3.Select(base, u) == z3.BoolVal(bool(bits >> u & 1)) for u in range(n)])
            size = lambda t: z3.Sum([z3.If(z3.Select(t, u), 1, 0) for u in range(n)])  # noqa: E731
            s.add(cardinality.CARD(base) == size(base), cardinality.CARD(arr) == size(arr))
            f, _ = ground(z3.And(facts), ws, [a] + [z3.IntVal(u) for u in range(n)])
            s.add(f)
            assert s.check() == z3.sat, (n, bits, w, val)


@pytest.mark.parametrize("variant", ["reference", "hardened", "omnireduce"])
def test_table_paths_are_exclusive_and_exhaustive(variant):
    # the paths of a delivery cover every state and never overlap, so splitting a query by path is a tautology
    m = base_model(variant)
    ws = Workers.exactly(3)
    s = engine.State.fresh(m.schema, ws, "t")
    k = z3.Int("k")
    pkt = paths.Packet(tsi=k + 1, mask=Mask(0), n=ws.N, values=Shares.packet(ws, 0, k),
                       exponent=Shares.packet(ws, 0, k), nxt=z3.Int("nx"),
                       obs={"data": z3.If(z3.Bool("d"), z3.IntVal(1), z3.IntVal(0))}, bound=z3.Int("window"))
    regs = {"chk": s.chk[1], "this": s.bm[1], "other": s.bm[0], "cnt": s.cnt[1], "val": s.sh[1], "exp": s.ex[1],
            "mn": z3.Int("mn")}
    feasible = lambda _ops, cond: paths.feasible(cond)  # noqa: E731
    conds = [z3.And(pa.cond) if pa.cond else z3.BoolVal(True)
             for pa in paths.table_paths(m.table, ws, regs, pkt, m.codes, feasible)]
    sol = z3.Solver()
    sol.add(z3.Not(z3.Or(conds)))
    assert sol.check() == z3.unsat
    for i, j in itertools.combinations(range(len(conds)), 2):
        sol = z3.Solver()
        sol.add(conds[i], conds[j])
        assert sol.check() == z3.unsat


def test_shares_of_a_packet_touch_only_its_worker():
    ws = Workers.between(2, 16)
    a, k = z3.Int("a"), z3.Int("k")
    stored = Shares.fresh(ws, "st")
    summed = stored.combine(Shares.packet(ws, a, k), lambda x, y: y)
    u = z3.Int("u")
    s = z3.Solver()
    s.add(u != a, z3.Not(summed.at(u).same(stored.at(u))))
    assert s.check() == z3.unsat


def test_paths_read_the_decision_table():
    # an edit to the table changes the paths the model runs
    t = protocols.decision_table("hardened").to_dict()
    ws = Workers.exactly(2)
    m = base_model("hardened", decision.DecisionTable.from_dict(t))
    before = {c.label for c in m.cases(engine.State.fresh(m.schema, ws, "x"), ws, m.globals(ws)[0],
                                       engine.Event("deliver", 0, 0), z3.Int("k"), True)}
    for r in next(s for s in t["steps"] if s["role"] == "values")["rules"]:
        if r["op"] == "add":
            r["op"] = "write"
    m2 = base_model("hardened", decision.DecisionTable.from_dict(t))
    after = {c.label for c in m2.cases(engine.State.fresh(m2.schema, ws, "x"), ws, m2.globals(ws)[0],
                                       engine.Event("deliver", 0, 0), z3.Int("k"), True)}
    assert "advance_window/set/inc_sat/max/add" in before and "advance_window/set/inc_sat/max/add" not in after
    assert paths.COUNTER_BITS == 32


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("p4gen.verify."):
            out.add(node.module.split(".")[2])
    return out


def test_verify_has_no_import_cycles_and_no_long_files():
    mods = {p.stem: _imports(p) for p in VERIFY.glob("*.py")}
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for d in mods.get(m, ()):
            assert state.get(d) != 1, f"import cycle: {' -> '.join(stack + [m, d])}"
            if d not in state:
                visit(d, stack + [m])
        state[m] = 2
    for m in mods:
        if m not in state:
            visit(m, [])
    for p in VERIFY.glob("*.py"):
        assert len(p.read_text().splitlines()) <= 600, p.name
