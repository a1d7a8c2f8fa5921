"""The controller compares p4c's P4Info with the plan on what p4c takes from the program.

p4c gives a const-entry table (the dt_* decision tables, whose P4 declares no size) its default
size of 1024, while the plan knows how many entries the program fixes.  No p4c needed: the
P4Info p4c would write is the plan's with those sizes.
"""

from __future__ import annotations

import pytest

from p4gen.build import build
from p4gen.controller.pipeline import p4info_diff
from p4gen.emit.p4info import build_p4info
from p4gen.spec import make_spec
from p4gen.target import load_target


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    return build(make_spec(slots=64), load_target("bmv2"), tmp_path_factory.mktemp("b") / "o").plan


def _p4c_like(plan, **sizes):
    info = build_p4info(plan)
    for t in info.tables:
        short = t.preamble.name.rsplit(".", 1)[-1]
        if t.is_const_table:
            t.size = 1024
        if short in sizes:
            t.size = sizes[short]
    return info


def test_p4c_default_size_of_a_const_table_is_accepted(plan):
    want = build_p4info(plan)
    got = _p4c_like(plan)
    assert any(t.is_const_table for t in got.tables)
    assert p4info_diff(want, got, strict=False) is None


def test_a_const_table_size_still_counts_between_two_plans(plan):
    first = min((t for t in build_p4info(plan).tables if t.is_const_table), key=lambda t: t.preamble.id)
    assert p4info_diff(build_p4info(plan), _p4c_like(plan), strict=True) == (
        f"table {first.preamble.name} (id {first.preamble.id}) has size 1024; the plan has size {first.size}")


def test_a_written_table_of_another_size_is_refused(plan):
    workers = next(t for t in build_p4info(plan).tables if t.preamble.name.endswith(".workers"))
    assert p4info_diff(build_p4info(plan), _p4c_like(plan, workers=workers.size + 1), strict=False) == (
        f"table {workers.preamble.name} (id {workers.preamble.id}) has size {workers.size + 1}; "
        f"the plan has size {workers.size}")


def test_bmv2_flood_groups_stay_below_the_group_ids_pi_reserves(plan):
    # PI refuses multicast group ids >= 1 << 15 on simple_switch_grpc ("Group id value is too high")
    base = int(plan.params.flood_group_base)
    assert base + 511 < 1 << 15 and base == (1 << 15) - 512
