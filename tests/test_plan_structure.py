"""One meaning per name: a plan p4gen would not have written is refused wherever it is loaded, and the
switch takes an action's arguments by name.

``tests/data/bad_plans.json`` holds hand edits of a bmv2 build's plan.json (a path into the document:
keys, list positions and ``@name`` for the item of that name) next to the line each must give.  Every
reader refuses each of them with that line: :meth:`Plan.load`, ``p4gen verify``, ``p4gen ctl push`` and
the data plane.  Before, the parameter swaps were accepted by all of them, and the software switch then
multicast wrong sums (it read ``set_worker``'s parameters by position, the P4 program by name), stalled,
or crashed at the first contribution; so did plans with a negative register size or a zero width.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st

from aggnet import Net
from p4gen.build import build
from p4gen.cli import main as p4gen_main
from p4gen.errors import PlanError
from p4gen.plan import Plan
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.dataplane import main as dp_main
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "data" / "bad_plans.json").read_text())


def edit(doc: dict, path: list, value) -> None:
    node = doc
    for k in path[:-1]:
        node = next(x for x in node if x["name"] == k[1:]) if isinstance(k, str) and k.startswith("@") else node[k]
    node[path[-1]] = value


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("structure") / "b"
    build(make_spec(slots=64), load_target("bmv2"), out, use_cache=False)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_plan_p4gen_would_not_write_is_refused_by_every_reader_with_one_line(case, build_dir, tmp_path, capsys):
    d = tmp_path / "b"
    shutil.copytree(build_dir, d)
    doc = json.loads((d / "plan.json").read_text())
    for path, value in case["edits"]:
        edit(doc, path, value)
    (d / "plan.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    line = f"{d}/plan.json: {case['error']}"
    with pytest.raises(PlanError) as err:
        Plan.load(d)
    assert str(err.value) == line
    for prog, args, prefix, rc in (
            (p4gen_main, ["verify", str(d)], "p4gen: error: ", 1),
            (p4gen_main, ["ctl", "push", str(d), "--addr", "127.0.0.1:1", "--timeout", "0.5"], "p4gen: error: ", 1),
            (dp_main, ["--plan", str(d), "--port", "1=p4gtest-none0"], "p4gen.switch.dataplane: ", 2)):
        assert prog(args) == rc
        out, errtext = capsys.readouterr()
        assert (out, errtext) == ("", prefix + line + "\n")
    assert not (d / "verify.json").exists()


def _reorders(action: str):
    params = make_plan(make_spec(slots=4), load_target("bmv2")).action(action).params
    return [(action, i, j) for i, j in itertools.combinations(range(len(params)), 2)]


REORDERS = _reorders("set_worker") + _reorders("set_result_dst")


def test_every_pairwise_reorder_is_refused_naming_the_first_moved_parameter():
    data = make_plan(make_spec(slots=8, max_workers=4, elements_per_packet=8), load_target("bmv2")).to_dict()
    assert len(REORDERS) == 21 + 3
    for action, i, j in REORDERS:
        doc = copy.deepcopy(data)
        params = next(a for a in doc["actions"] if a["name"] == action)["params"]
        params[i], params[j] = params[j], params[i]
        with pytest.raises(PlanError) as err:
            Plan.from_dict(doc, "plan.json")
        assert str(err.value) == (f"plan.json: actions.{action}.params[{i}].name is {params[i]['name']!r}; p4gen "
                                  f"writes {params[j]['name']!r} for this spec and target; rebuild it with p4gen build")


def _swapped(plan: Plan, action: str, i: int, j: int) -> Plan:
    """``plan`` with two parameters of ``action`` swapped, made in Python (the loader refuses it)."""
    acts = []
    for a in plan.actions:
        if a.name == action:
            ps = list(a.params)
            ps[i], ps[j] = ps[j], ps[i]
            a = dataclasses.replace(a, params=tuple(ps))
        acts.append(a)
    return dataclasses.replace(plan, actions=tuple(acts))


@pytest.mark.parametrize("action,i,j", REORDERS, ids=[f"{a}-{i}-{j}" for a, i, j in REORDERS])
def test_the_switch_takes_action_arguments_by_name_whatever_their_order(action, i, j):
    """Whatever order a plan gives an action's parameters in, the switch reads each by its name: the same
    look-up entries as for p4gen's order, and a job's exact sums (before: wrong sums, stalls, a crash)."""
    plan = make_plan(make_spec(slots=8, max_workers=4, elements_per_packet=8), load_target("bmv2"))
    odd = _swapped(plan, action, i, j)
    addrs = [WorkerAddr(10 + k, 0x020000000100 + k, 0x0A000001 + k, 40000 + k) for k in range(3)]
    cfg = job_config(plan, 3, addrs, slot_base=2, slot_count=5, mgid=7, rid_base=100)
    a, b = SwitchModel(plan), SwitchModel(odd)
    a.load_config(cfg)
    b.load_config(cfg)
    assert (b.state.workers, b.state.result_dst, b.state.l2) == (a.state.workers, a.state.result_dst, a.state.l2)
    net = Net(odd, 3, chunks=6, window=5, seed=i * 7 + j, fifo=True, slot_base=2)
    net.drain()


# ---------------------------------------------------------------- random edits of a plan's numbers
_PARTS = ("registers", "headers", "tables", "actions", "metadata", "counters", "params")


@st.composite
def _int_edits(draw):
    """A plan.json document with 1 to 3 integers replaced (a size, a width, an ID, a count ...)."""
    doc = json.loads(_small_plan_json())
    for _ in range(draw(st.integers(1, 3))):
        ints = []

        def walk(node, path):
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, path + [k])
            elif isinstance(node, list):
                for k, v in enumerate(node):
                    walk(v, path + [k])
            elif isinstance(node, int) and not isinstance(node, bool):
                ints.append(path)

        part = draw(st.sampled_from(_PARTS))
        walk(doc[part], [part])
        path = draw(st.sampled_from(ints))
        value = draw(st.sampled_from([-1, 0, 1, 2, 7, 1 << 31, 1 << 63]) | st.integers(-2 ** 40, 2 ** 40))
        note(f"{path} = {value}")
        edit(doc, path, value)
    return Doc(doc)


class Doc(dict):
    def __repr__(self) -> str:                  # the edits are noted; the document is 30 kB
        return "<plan.json>"


_JSON: list[str] = []


def _small_plan_json() -> str:
    if not _JSON:
        _JSON.append(make_plan(make_spec(slots=8, max_workers=2, elements_per_packet=8), load_target("bmv2")).to_json())
    return _JSON[0]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_int_edits())
def test_a_plan_with_any_number_changed_is_refused_with_one_line_or_runs_a_job_exactly(doc):
    try:
        plan = Plan.from_dict(doc, "plan.json")
    except PlanError as exc:
        assert "\n" not in str(exc)
        return
    Net(plan, 2, chunks=4, window=4, seed=1, fifo=True).drain()
