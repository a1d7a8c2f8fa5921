"""Training on Mininet hosts: torchrun per host, the digits, gradients through the software switch.

Needs root, Mininet and torch (skips with the reason otherwise).  One epoch of the EmbeddingBag
model on 4 workers, three times on the same links: Gloo, SwitchML and OmniReduce.  Both switch
runs must stay within p4gen.torch.parity's tolerance of the Gloo run, and nothing may be left
behind (tests/leakcheck.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from needs import modules

modules("the testbed", "mininet")

from leakcheck import leaks, snapshot  # noqa: E402
from p4gen.extras import lacking  # noqa: E402
from p4gen.testbed import procs  # noqa: E402
from p4gen.testbed.nodes import SoftSwitch  # noqa: E402

# torch and scikit-learn are looked up, not imported: collecting this file stays cheap
_why = procs.missing_requirements() or SoftSwitch.missing() or lacking("training", "torch", "sklearn")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]


def test_switchml_and_omnireduce_training_matches_gloo(tmp_path):
    before = snapshot()
    out = tmp_path / "train.json"
    tmp = tmp_path / "tmp"                    # the run's temporary directory: torchrun must leave nothing in it
    tmp.mkdir()
    p = subprocess.run([sys.executable, "-m", "p4gen.cli", "testbed", "train", "--workers", "4", "--switch", "soft",
                        "--bw", "50", "--model", "embbag", "--epochs", "1", "--protocol", "gloo,switchml,omnireduce",
                        "--json", str(out), "--plan-cache", str(tmp_path / "plans")],
                       capture_output=True, text=True, timeout=1500, env=dict(os.environ, TMPDIR=str(tmp)))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    left = sorted(q.name for q in tmp.iterdir())
    assert [n for n in left if n.startswith("torchelastic_")] == [], left
    assert left == [f"p4gen-{os.geteuid()}"] and list((tmp / left[0]).iterdir()) == [], left
    recs = json.loads(out.read_text())
    assert isinstance(recs.pop("p4gen_digest"), str)          # how p4gen knows its own file when it writes again
    assert set(recs) == {"gloo", "switchml", "omnireduce"}
    for proto in ("switchml", "omnireduce"):
        par = recs[proto]["parity"]
        assert par["ok"] and par["steps"] == len(recs["gloo"]["step_loss"]) > 0
        assert f"{proto} against gloo: within the tolerance" in p.stdout
        hook = recs[proto]["hook"]
        assert hook["arrays"] == par["steps"] and hook["flagged"] == 0
        assert 0 < hook["block_density"] < 1          # the embedding's gradient is block-sparse
    assert recs["gloo"]["test_acc"][-1] > 0.3          # it learns (10 classes: chance is 0.1)
    assert leaks(before) == []


def test_the_sparse_model_on_jumbo_frames_with_its_plot(tmp_path):
    """--target soft: 9000-byte links for Gloo and OmniReduce alike, 2048-value blocks; the click model's
    gradient is block-sparse at a few percent per worker; OmniReduce stays within the tolerance of Gloo;
    the plot is written."""
    before = snapshot()
    out, png = tmp_path / "train.json", tmp_path / "curves.png"
    p = subprocess.run([sys.executable, "-m", "p4gen.cli", "testbed", "train", "--workers", "4", "--switch", "soft",
                        "--target", "soft", "--bw", "100", "--model", "rec", "--protocol", "gloo,omnireduce",
                        "--json", str(out), "--png", str(png), "--plan-cache", str(tmp_path / "plans")],
                       capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    recs = json.loads(out.read_text())
    assert {recs[k]["mtu"] for k in ("gloo", "omnireduce")} == {9000}
    omni = recs["omnireduce"]
    assert omni["target"] == "soft" and omni["parameters"] == 1056962
    assert recs["omnireduce"]["parity"]["ok"]
    h = omni["hook"]
    assert 0 < h["block_density"] <= 0.1 and h["block_density"] <= h["union_density"] < 1
    assert h["arrays"] == len(omni["step_time"]) and h["malformed"] == 0
    assert "omnireduce against gloo: within the tolerance" in p.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leaks(before) == []
