"""The Tofino goldens, compiled by the real Tofino compiler.

Each build runs ``p4gen build --compile`` as a user does (the compiler, then its assembler) and reads
what it allocated: the program must compile, and p4gen's prediction must be what the compiler did (the
same stages and stateful ALUs, the registers' SRAM blocks and the PHV bits within 10%).  Skipped where
no Tofino compiler (``bf-p4c`` or p4c's ``p4c-barefoot``) is on PATH.

A compile takes 10 s to minutes, so each program is compiled once a run: conftest.py gives the run a
compile cache of its own (P4GEN_COMPILE_CACHE), which any other test that compiles the same program
shares.  What bench/tofino.py's sweep judges is not compiled again here: tests/test_tofino_alloc.py
replays the recorded sweep (tests/data/tofino_sweep.json) against today's planner, its 11 configurations
p4gen refuses among them, each refused by the compiler too with the target's limits lifted (one such
refusal took the compiler five minutes of this suite), and a new sweep re-records it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from p4gen import tofino_compiler
from p4gen.build import build
from p4gen.pass_shape import shape_from_dict
from p4gen.spec import make_spec
from p4gen.target import load_target

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import regen  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(tofino_compiler.find() is None,
                       reason="the Tofino compiler (bf-p4c or p4c-barefoot) is not on PATH"),
]

TNA_CASES = [(t, s, f) for t, s, f in regen.CASES if t != "bmv2"]


def _within(pred: int, alloc: int, pct: float = 10.0) -> bool:
    return abs(pred - alloc) <= pct / 100.0 * max(alloc, 1)


def _compile(target: str, fields: dict, out: Path) -> dict:
    fields = dict(fields)
    shape = shape_from_dict(fields.pop("shape")) if "shape" in fields else None
    build(make_spec(**fields), load_target(target), out, use_cache=False, compile_p4=True, shape=shape)
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("target,stem,fields", TNA_CASES, ids=[f"{t}-{s}" for t, s, _ in TNA_CASES])
def test_every_tna_golden_compiles_as_predicted(target, stem, fields, tmp_path):
    rep = _compile(target, fields, tmp_path / "b")
    pred, alloc = rep["totals"], rep["allocated"]
    assert alloc["stages_used"] == pred["stages_used"], (pred, alloc)
    assert alloc["stateful_alus"] == pred["alus_used"]
    assert _within(pred["sram_blocks_used"], alloc["register_sram_blocks"]), (pred, alloc)
    assert _within(pred["phv_bits_used"], alloc["phv_bits"]), (pred, alloc)
    predicted_stage = {r: st["stage"] for st in rep["stages"] for r in st["registers"]}
    assert set(alloc["register_stage"]) == set(predicted_stage)
