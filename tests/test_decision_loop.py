"""The batch path's decision loop, generated as a tree over observation codes from p4gen.ops."""

from __future__ import annotations

import itertools

import pytest

from p4gen import ops
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch import kernels
from p4gen.switch.model import SwitchModel
from p4gen.target import load_target

SMALL = (0, 1, 2, 3, 0xFFFFFFFE, 0xFFFFFFFF)


@pytest.mark.parametrize("role", ["chunk", "bitmap", "counter"])
def test_observed_codes_cover_what_each_kernel_reports(role):
    """observed() reads the codes an op can report off its expression graph; the loop branches on those
    only, so every code the scalar kernel (also derived from p4gen.ops) returns must be among them."""
    params = kernels.SCALAR_ROLES[role].params
    for op in ops.OPS[role]:
        seen = set()
        for args in itertools.product(SMALL, repeat=len(params)):
            vals = dict(zip(params, args))
            if "full" in vals:
                vals["full"] = 0xFFFFFFFF
            out = kernels.scalar_kernel(role, op)(**vals)
            seen.add(int(out[kernels.SCALAR_ROLES[role].stores.index(None)]))
        assert seen <= set(kernels.observed(role, op)), (role, op, seen)
        assert seen, (role, op)


@pytest.mark.parametrize("variant", ["reference", "hardened"])
def test_the_loop_branches_on_codes_not_on_table_lookups(variant):
    """Every packet's op per step is fixed by the branch it is in: no per-packet table look-up remains,
    and each leaf appends its final observation code as a constant."""
    plan = make_plan(make_spec(slots=4, elements_per_packet=8, variant=variant), load_target("bmv2"))
    src = SwitchModel(plan).batch_path.loop.source
    assert "[o]" not in src and "o = o *" not in src
    assert "aO(" in src and all(ln.strip().startswith("aO(") for ln in src.splitlines() if "aO(" in ln
                                and "append" not in ln)
