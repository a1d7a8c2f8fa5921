"""The registry of protocols and variants (p4gen/protocols.py) is the one list of them.

A variant built from existing operations is one ``register_variant`` call: its table, its network
assumption and the verifier's model whose invariant covers it.  The toy variant below is declared that
way, at run time, and nothing else changes: the CLI builds it for BMv2 and Tofino, the P4 program and the
software switch follow its table, the layout search takes it and ``p4gen verify`` proves it with the
SwitchML model's invariant.  A variant whose table no model covers would add that model in ``p4gen.verify``:
a second file, and no other.

The names of the registered protocols and variants appear as string literals only in the registry.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from p4gen import protocols
from p4gen.cli import main
from p4gen.emit.p4 import render_p4
from p4gen.host import packet as P
from p4gen.layout.cost import Workload
from p4gen.layout.search import search
from p4gen.plan import Plan
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config
from p4gen.target import load_target
from p4gen.verify import runner
from p4gen.wire import FrameLayout

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ("p4gen", "verify", "controller", "testbed")


def _toy_table() -> dict:
    """SwitchML's hardened rules, except that a stale packet probes its copy's counter instead of leaving it
    alone: other const entries, the same behaviour on the wire."""
    table = protocols.SWITCHML_HARDENED.table.to_dict()
    counter = next(s for s in table["steps"] if s["role"] == "counter")
    counter["rules"] = [dict(r, op="probe_full") if r["match"] == {"cmp": "lt"} else r for r in counter["rules"]]
    table["assumption"] = "none on the network; a stale packet reads its copy's counter"
    return table


@pytest.fixture
def toy():
    v = protocols.register_variant(protocols.SWITCHML, "probe_stale", _toy_table(), fifo=False,
                                   model=protocols.SWITCHML_HARDENED.model)
    yield v
    protocols.unregister_variant(v)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def test_a_toy_variant_builds_on_every_target_from_the_command_line(toy, tmp_path, capsys):
    for target in ("bmv2", "tofino", "tofino2"):
        out = tmp_path / target
        assert main(["build", "--variant", toy.name, "--target", target, "--slots", "64", "--out", str(out)]) == 0
        plan = Plan.load(out)
        assert (plan.protocol, plan.variant) == (protocols.SWITCHML.name, toy.name)
        assert plan.decision == toy.table
        # the program follows the table: a stale packet's dt_counter entry selects probe_full
        p4 = (out / "program.p4").read_text()
        counter = [ln for ln in p4.splitlines() if ": counter_" in ln and "// cmp=lt" in ln]
        assert len(counter) == 2 and all(ln.endswith("-> probe_full") and "counter_probe_full()" in ln
                                          for ln in counter)
        assert json.loads((out / "report.json").read_text())["variant"] == toy.name
    capsys.readouterr()
    # an unknown variant is still refused with the registry's names
    assert main(["build", "--variant", "nope", "--out", str(tmp_path / "x")]) == 1
    assert f"must be one of auto, hardened, reference, {toy.name}" in capsys.readouterr().err


def test_the_switch_runs_the_toy_variant_exactly(toy):
    plan = make_plan(make_spec(variant=toy.name, slots=4, max_workers=4, elements_per_packet=8), load_target("bmv2"))
    L = FrameLayout(plan)
    addrs = [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in (1, 2)]
    model = SwitchModel(plan)
    model.load_config(job_config(plan, 1, addrs, mgid=5, rid_base=10))
    sw = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)

    def send(k, tsi, v):
        src = P.Endpoint(addrs[k].mac, addrs[k].ip, addrs[k].udp_port)
        frame = P.contribution_frame(L, src, sw, job=1, tsi=tsi, pool_index=0, exponent=0,
                                     values=np.full(L.elements, v, dtype=np.uint64))
        return model.process(frame, addrs[k].port)

    assert send(0, 8, 3) == [] and send(0, 0, 5) == []          # the second is older: dropped as stale
    out = send(1, 8, 4)
    assert [int(x) for x in P.parse_result(L, out[0][1]).values] == [7] * 8
    stats = model.stats
    assert stats["multicast"] == 1 and stats["drop_stale"] == 1 and stats["absorbed"] == 1


@pytest.mark.slow
def test_the_layout_search_takes_the_toy_variant(toy):
    res = search(load_target("tofino"), Workload(4, 100.0, 10.0, 1 << 16), variant=toy.name, certify=False)
    assert res.best.spec.variant == toy.name


@pytest.mark.slow
def test_verify_proves_the_toy_variant_with_the_switchml_invariant(toy):
    plan = make_plan(make_spec(variant=toy.name, slots=4, max_workers=3, elements_per_packet=8), load_target("bmv2"))
    lines: list[str] = []
    rep = runner.run(plan, workers=[2, 3], jobs=2, out=lines.append)
    assert rep.ok, "\n".join(lines)
    assert any(line.startswith("protocol/exact_result") and " proved " in line for line in lines), "\n".join(lines)


# -- the names are literals only in the registry ---------------------------------------------------------

def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_protocol_and_variant_names_are_literals_only_in_the_registry():
    names = set(protocols.protocol_names()) | set(protocols.variant_names())
    found = []
    for folder in SOURCE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "p4gen" / "protocols.py":
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in _literals(path) if text in names]
    for path in sorted((ROOT / "templates").glob("*.j2")):
        for name in names:
            if re.search(rf"[\"']{name}[\"']", path.read_text()):
                found.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert found == []
    # and the registry does hold them
    registry = {text for _line, text in _literals(ROOT / "p4gen" / "protocols.py")}
    assert names <= registry


def test_every_list_of_protocols_and_variants_is_the_registry():
    from p4gen.spec import AUTO
    from p4gen.verify import mutants

    assert protocols.protocol_names() == ("switchml", "omnireduce")
    assert protocols.variant_names() == ("hardened", "reference")
    assert [v.name for v in protocols.variants("switchml")] == ["hardened", "reference"]    # auto: hardened first
    assert set(mutants.VARIANTS) == {v.label for p in protocols.protocol_names() for v in protocols.variants(p)}
    with pytest.raises(Exception, match="variant='reference' exists for protocol switchml only; omnireduce is "
                                        "built hardened"):
        make_spec(protocol="omnireduce", variant="reference")
    assert make_spec().variant == AUTO
