"""The stateful-ALU lowering of every register operation is the operation of ``p4gen.ops`` (proved with Z3).

``p4gen.ops.salu.lower`` turns an op into what Tofino runs: metadata computed before the RegisterAction,
the RegisterAction's comparisons, lane updates and returned words, and the output the stages after it
compute from those words.  For every op of every role, on Tofino (two comparisons, one returned word)
and Tofino2 (four, four), over 32- and 8-bit registers as the build has them, Z3 proves that running
the lowering gives the register lanes and the outputs ``p4gen.ops`` gives, for all inputs; the
match-action form of a split output (``mau_form``: temporaries and gateway tests) is proved too.  A value
pair on Tofino returns one lane in the pass that updates it and the other in a harvest pass, which reads the
register as the update left it: both lanes' results are proved, and that the harvest changes nothing.
"""

from __future__ import annotations

import pytest
import z3

from p4gen import decision, ops
from p4gen.ops import graph as opgraph, salu
from p4gen.ops.salu import IN, MEM, RV, TMP, SaluCaps
from p4gen.verify.z3alg import BV


A = BV
T1, T2 = SaluCaps(compare_units=2, output_words=1), SaluCaps(compare_units=4, output_words=4)
WIDTHS = {"chunk": 32, "bitmap": 32, "counter": 32, "exponent": 8, "minnext": 32, "values": 32}
INPUT_BITS = {"tsi": 32, "bound": 32, "n": 32, "exp": 8, "nxt": 32, "mask": 32}


def _cases():
    for role, table in ops.OPS.items():
        for op in table:
            for caps in (T1, T2):
                pairs = (False, True) if role == "values" else (role == "bitmap",)
                for pair in pairs:
                    copies = (0, 1) if role in ops.COPY_LANES else (None,)
                    for copy in copies:
                        yield pytest.param(role, op, caps, pair, copy,
                                           id=f"{role}.{op}-{'T1' if caps is T1 else 'T2'}"
                                              f"{'-pair' if pair else ''}{'' if copy is None else f'-copy{copy}'}")


def _leaf_env(role: str, pair: bool, width: int) -> dict:
    env = {}
    for lane in salu.lanes_of(role, pair):
        env[MEM + lane] = z3.BitVec(MEM + lane, width)
    call = opgraph.ROLE_CALLS[role]
    for p in call.params:
        if p in call.registers:
            continue
        if role == "values":
            for name in ([f"pkt{i}" for i in range(2)] if pair else ["pkt"]):
                env[IN + name] = z3.BitVec(IN + name, width)
        else:
            env[IN + p] = z3.BitVec(IN + p, INPUT_BITS[p])
    return env


def _expected(role: str, op: str, pair: bool, copy, env: dict, width: int):
    """(lane -> new value, outputs) of ``p4gen.ops`` itself."""
    if role == "values" and pair:
        news, outs = {}, []
        for i, lane in enumerate(("lo", "hi")):
            new, out = ops.values_op(op, env[MEM + lane], env[f"{IN}pkt{i}"], width, A)
            news[lane] = new
            outs.append(out)
        return news, outs
    if role == "bitmap":
        this, other = ("lo", "hi") if copy == 0 else ("hi", "lo")
        t, o, seen = ops.bitmap_op(op, env[MEM + this], env[MEM + other], env[IN + "mask"], width, A)
        return {this: t, other: o}, [seen]
    call = opgraph.ROLE_CALLS[role]
    vals = {p: (env[MEM + "value"] if p in call.registers else env[IN + p]) for p in call.params}
    res = call.call(op, vals, A, width)
    return {"value": res[0]}, [res[call.output]]


def _same(a, b) -> bool:
    s = z3.Solver()
    if isinstance(a, bool) or isinstance(b, bool) or z3.is_bool(a) or z3.is_bool(b):
        a = a if not isinstance(a, bool) else z3.BoolVal(a)
        b = b if not isinstance(b, bool) else z3.BoolVal(b)
        if z3.is_bv(a):
            a = a != 0
        if z3.is_bv(b):
            b = b != 0
    elif a.size() != b.size():
        w = max(a.size(), b.size())
        a, b = z3.ZeroExt(w - a.size(), a), z3.ZeroExt(w - b.size(), b)
    s.add(a != b)
    return s.check() == z3.unsat


@pytest.mark.parametrize("role, op, caps, pair, copy", list(_cases()))
def test_the_lowering_of_every_op_is_the_op(role, op, caps, pair, copy):
    width = WIDTHS[role]
    widths = {p: (width if p in opgraph.ROLE_CALLS[role].registers else INPUT_BITS.get(p, width))
              for p in opgraph.ROLE_CALLS[role].params}
    low = salu.lower(role, op, caps, pair=pair, copy=copy, widths=widths, width=width, prefix="x")
    env = _leaf_env(role, pair, width)
    want_new, want_out = _expected(role, op, pair, copy, env, width)
    for name, e in low.hoisted:                      # computed before the RegisterAction
        env[name] = opgraph.run(e, env, A)
    assert low.touches == decision.touches(role, op)
    for lane in salu.lanes_of(role, pair):
        got = opgraph.run(low.updates[lane], env, A) if lane in low.updates else env[MEM + lane]
        assert _same(got, want_new[lane]), f"lane {lane}: {salu.key(low.updates.get(lane, opgraph.leaf(lane)))}"
    rv = {f"{RV}{k}": opgraph.run(o, env, A) for k, o in enumerate(low.outputs)}
    # a harvest pass reads the lanes as the action left them, and writes none
    after = {MEM + ln: (opgraph.run(low.updates[ln], env, A) if ln in low.updates else env[MEM + ln])
             for ln in salu.lanes_of(role, pair)}
    rv |= {f"{salu.HV}{k}": opgraph.run(h, {**env, **after}, A) for k, h in enumerate(low.harvest)}
    assert all(h.kind == "leaf" and h.args[0].startswith(MEM) for h in low.harvest)
    assert len(low.harvest) <= caps.output_words
    assert len(low.outputs) <= caps.output_words
    assert len(low.atoms) <= caps.compare_units
    assert all(salu.compare_form(a) is None for a in low.atoms)
    for r, want in zip(low.results, want_out):
        assert _same(opgraph.run(r, {**env, **rv}, A), want), salu.key(r)
        if low.split:
            form = salu.mau_form(r, "p", frozenset(rv))
            tenv = {**env, **rv}
            for name, t in form.temps:
                assert name.startswith(TMP)
                tenv[name] = opgraph.run(t, tenv, A)
            assert all(salu.gateway_test(n.args[0]) for n in opgraph.walk([form.tree]) if n.kind == "ite")
            assert _same(opgraph.run(form.tree, tenv, A), want), salu.key(form.tree)


def test_tofino_splits_the_window_check_and_tofino2_does_not():
    """The hardened chunk step compares three times: Tofino 1's two compare units update the register,
    and the stages after it classify the returned old chunk; Tofino 2 makes all three in the ALU."""
    one = salu.lower("chunk", "advance_window", T1, pair=False, widths={"stored": 32, "tsi": 32, "bound": 32})
    two = salu.lower("chunk", "advance_window", T2, pair=False, widths={"stored": 32, "tsi": 32, "bound": 32})
    assert one.split and len(one.atoms) == 2 and [salu.key(o) for o in one.outputs] == [MEM + "value"]
    assert not two.split and len(two.atoms) == 3
    assert [salu.key(e) for _n, e in one.hoisted] == ["ssub(in.tsi,in.bound)"]


def test_a_bit_test_against_the_workers_mask_is_made_after_the_alu():
    low = salu.lower("bitmap", "set", T2, pair=True, copy=1, widths={}, width=32)
    assert low.split and [salu.key(o) for o in low.outputs] == [MEM + "hi"]
    assert salu.key(low.results[0]) == "ne0(and(rv.0,in.mask))"


def test_an_op_no_stateful_alu_form_fits_is_named():
    """An update that branches on three comparisons does not fit Tofino's two compare units."""
    def op3(op, stored, tsi, A_, bound=0):
        one = A_.const(1, 32)
        new = A_.ite(A_.ugt(tsi, stored), A_.ite(A_.eq(stored, A_.const(5, 32)), stored, tsi),
                     A_.ite(A_.eq(A_.add(stored, one, 32), tsi), tsi, stored))
        return new, A_.const(0, 8)

    call = opgraph.ROLE_CALLS["chunk"]
    orig = call.call
    try:
        object.__setattr__(call, "call", lambda op, v, A_, w: op3(op, v["stored"], v["tsi"], A_, v["bound"]))
        with pytest.raises(salu.SaluError, match="needs 3 comparisons; the stateful ALU has 2"):
            salu.lower("chunk", "advance", T1, pair=False, widths={"stored": 32, "tsi": 32, "bound": 32})
        assert salu.lower("chunk", "advance", T2, pair=False, widths={"stored": 32, "tsi": 32, "bound": 32}).touches
    finally:
        object.__setattr__(call, "call", orig)


@pytest.mark.parametrize("op, now, later", [("add", ["add(mem.hi,in.pkt1)"], ["mem.lo"]),
                                            ("read", ["mem.hi"], ["mem.lo"]),
                                            ("write", [], []), ("clear", [], [])])
def test_a_value_pair_on_tofino_returns_one_lane_and_harvests_the_other(op, now, later):
    """p4app-switchML's forms: a RegisterAction writes or adds both lanes and returns the second; a
    harvest pass reads the first.  A write's outputs are the packet's own values: nothing is returned."""
    low = salu.lower("values", op, T1, pair=True, width=32)
    assert [salu.key(o) for o in low.outputs] == now and [salu.key(h) for h in low.harvest] == later
    assert low.harvested == bool(later)
    assert not salu.lower("values", op, T2, pair=True, width=32).harvested    # Tofino 2 returns both lanes


def test_a_pair_register_with_a_harvest_counts_its_read_action():
    """write, add and read on a pair, and the harvest's read of the first lane: four RegisterActions, the
    most a register has; clear as well needs five."""
    acts = [salu.lower("values", op, T1, pair=True, width=32) for op in ("write", "add", "read")]
    salu.check_register("values0", acts, T1)
    with pytest.raises(salu.SaluError, match="register values0 needs 5 RegisterActions; a register has 4"):
        salu.check_register("values0", acts + [salu.lower("values", "clear", T1, pair=True, width=32)], T1)
