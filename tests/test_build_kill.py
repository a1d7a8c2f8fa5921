"""A build killed at any step leaves a directory that every reader takes as one whole build or refuses
with one line, and the next build into it needs no --force and leaves no temporary behind.

A child process rebuilds a directory (another spec, so every file changes) and is SIGKILLed just before
its k-th step in that directory (creating the journal or a temporary, linking a backup, renaming a file
into place, removing one); the test walks k from 0 until the build runs to its end.  Before, a kill
between two renames left the new plan.json and p4info.txt beside the old program.p4 and marker: the
readers took it, and the next build refused it until --force.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from p4gen.controller.pipeline import load_build
from p4gen.errors import P4genError, PlanError
from p4gen.plan import Plan

CHILD = r"""
import os, signal, sys
from p4gen import filewrite
out, at, slots = sys.argv[1], int(sys.argv[2]), sys.argv[3]
steps = [0]
def hook(fn):
    def step(self, *a, **k):
        if str(self.path) == out:
            if steps[0] == at:
                os.kill(os.getpid(), signal.SIGKILL)
            steps[0] += 1
        return fn(self, *a, **k)
    return step
for m in ("create", "stage", "rename", "link", "unlink"):
    if m in vars(filewrite.Directory) and not (m == "stage" and "create" in vars(filewrite.Directory)):
        setattr(filewrite.Directory, m, hook(getattr(filewrite.Directory, m)))
from p4gen.cli import main
rc = main(["build", "--target", "bmv2", "--slots", slots, "--out", out, "--no-cache"])
print(rc, steps[0])
"""


def _build(out: Path, slots: int, at: int = -1) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(out), str(at), str(slots)], capture_output=True,
                          text=True, timeout=120)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


@pytest.mark.slow
def test_a_kill_at_every_step_of_a_rebuild_leaves_one_build_or_a_refusal(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    assert _build(old, 64).returncode == 0 and _build(new, 128).returncode == 0
    builds = {"old": _files(old), "new": _files(new)}
    assert set(builds["old"]) == set(builds["new"]) and all(builds["old"][n] != builds["new"][n]
                                                            for n in builds["old"])
    seen = {"old": 0, "new": 0, "refused": 0}
    at = 0
    while True:
        d = tmp_path / f"k{at}"
        shutil.copytree(old, d)
        res = _build(d, 128, at)
        if res.returncode == 0:                        # the build ran to its end: every step was walked
            assert res.stdout.splitlines()[-1].split() == ["0", str(at)], res.stdout + res.stderr
            break
        assert res.returncode == -signal.SIGKILL, res.stderr
        try:
            plan = Plan.load(d)
        except PlanError as exc:
            assert str(exc) == (f"{str(d)!r} holds files p4gen was writing when it stopped (killed, or still "
                                f"writing): run the same p4gen command into it again, which completes them first "
                                f"(p4gen build --out {d})")
            with pytest.raises(P4genError, match="p4gen was writing its files|holds files p4gen was writing"):
                load_build(d)
            seen["refused"] += 1
        else:
            now = _files(d)
            which = next((k for k, files in builds.items() if now == files), None)
            assert which is not None, f"a kill before step {at} left a mix: {sorted(now)}"
            assert plan.params.slots == (64 if which == "old" else 128)
            load_build(d)
            seen[which] += 1
        again = _build(d, 64)                          # the next build: no --force, no temporaries left
        assert again.returncode == 0, again.stderr
        assert _files(d) == builds["old"], f"after a kill before step {at}: {sorted(_files(d))}"
        at += 1
    print(f"{at} steps; a kill before each left: {seen}")
    assert at > 10 and seen["refused"] and seen["old"]
