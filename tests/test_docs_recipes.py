"""The loopback training recipe of docs/training.md, run line by line as a user would copy it.

The lines run in a scratch directory (with the checkout's ``docs/`` beside them, as in the
checkout), with this interpreter's ``bin`` first on PATH, so ``p4gen``, ``python`` and
``torchrun`` are the installed ones.  The recipe names fixed ports (9559 for P4Runtime, 48864
for the switch, 50001-50004 for the workers); the test skips when one is taken.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _recipe() -> list[str]:
    text = (ROOT / "docs" / "training.md").read_text()
    block = text.split("A copyable run", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.replace("\\\n", " ").splitlines()


def _taken(kind: int, port: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (the torch extra)")
def test_the_loopback_training_recipe_runs_as_written(tmp_path):
    busy = [p for k, p in [(socket.SOCK_STREAM, 9559), (socket.SOCK_DGRAM, 48864)] +
            [(socket.SOCK_DGRAM, 50001 + i) for i in range(4)] if _taken(k, p)]
    if busy:
        pytest.skip(f"port(s) {busy} on 127.0.0.1 are in use; the recipe names them")
    lines = _recipe()
    assert lines[-1] == "kill %1" and lines[1].endswith(" &"), lines
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               OMP_NUM_THREADS="1")
    switch = None
    try:
        for line in lines[:-1]:
            if line.endswith(" &"):
                switch = subprocess.Popen(["sh", "-c", f"exec {line[:-2]}"], cwd=tmp_path, env=env,
                                          stderr=subprocess.PIPE, text=True)
                assert "listening on 127.0.0.1:48864" in switch.stderr.readline()
                continue
            out = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert out.returncode == 0, (line, out.stdout[-2000:], out.stderr[-3000:])
    finally:
        if switch is not None:                      # the recipe's kill %1
            switch.terminate()
            switch.wait(10)
    rec = json.loads((tmp_path / "run.json").read_text())
    assert rec["protocol"] == "switchml" and rec["workers"] == 4 and len(rec["test_acc"]) == 1
    assert rec["test_acc"][0] > 0.5 and rec["hook"]["arrays"] == len(rec["step_time"]) > 0   # a bucket a step
