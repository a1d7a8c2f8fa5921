"""The DDP communication hook under torchrun, against the software switch on loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from p4gen.host import codec

from loopback import build_plan, udp_switch, write_job

# torchrun: minutes of CPU; torch is looked up, not imported (collecting this file stays cheap)
pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                                   reason="torch is not installed (the torch extra)")]

N = 3
DRIVER = Path(__file__).with_name("torch_driver.py")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    plan = build_plan(d / "build")
    return plan, d / "build", write_job(d / "job.toml", N)


def torchrun(case, build_dir, job, switch, out, n=N, timeout=240):
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(DRIVER.parent))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           str(DRIVER), case, str(build_dir), str(job), switch, str(out)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(n)]


def _addr(sw):
    return f"{sw.address[0]}:{sw.address[1]}"


def test_the_hook_gives_every_rank_the_average_of_the_local_gradients(setup, tmp_path):
    plan, build_dir, job = setup
    with udp_switch(plan, job) as sw:
        recs = torchrun("grads", build_dir, job, _addr(sw), tmp_path)
    assert sw.model.stats["multicast"] > 0
    for i in range(len(recs[0]["local"])):
        local = [np.asarray(r["local"][i], np.float64).reshape(-1) for r in recs]
        exact = np.sum(local, axis=0)
        e = max(int(codec.exponent_of(x)) for x in local)
        for r in recs:
            got = np.asarray(r["averaged"][i], np.float64).reshape(-1)
            assert np.array_equal(got, np.asarray(recs[0]["averaged"][i]).reshape(-1))
            assert np.all(np.abs(got * N - exact) <= codec.error_bound(e, N, 32) + np.abs(exact) * 2.0 ** -22)
    assert all(r["arrays"] >= 1 for r in recs)


def test_per_bucket_updates_leave_bit_identical_parameters(setup, tmp_path):
    plan, build_dir, job = setup
    with udp_switch(plan, job) as sw:
        recs = torchrun("per_bucket", build_dir, job, _addr(sw), tmp_path)
    for r in recs:
        a, b = r["after_backward"], r["per_bucket"]
        assert a["arrays"] == b["arrays"] >= 3 * 5           # several buckets per step
        assert a["params"] == b["params"]                     # every step, every tensor, every bit
        assert a["params"][-1] == recs[0]["after_backward"]["params"][-1]
        assert a["params"][0] != a["params"][-1]


def test_nan_on_one_rank_skips_the_same_update_on_every_rank(setup, tmp_path):
    plan, build_dir, job = setup
    with udp_switch(plan, job) as sw:
        recs = torchrun("nan", build_dir, job, _addr(sw), tmp_path)
    for r in recs:
        a, b = r["after_backward"], r["per_bucket"]
        assert a["skipped_steps"] == 1 and b["skipped_buckets"] == b["arrays"] // 4   # step 2 of 4, all its buckets
        assert a["params"][2] == a["params"][1]               # step 2 left the parameters alone
        assert b["params"][2] == b["params"][1]
        assert a["params"] == b["params"]
        assert a["params"][3] == recs[0]["after_backward"]["params"][3]


def test_a_lost_switch_fails_the_training_step_with_a_clear_error(setup, tmp_path):
    plan, build_dir, job = setup
    with udp_switch(plan, job) as sw:
        addr = _addr(sw)
    recs = torchrun("lost", build_dir, job, addr, tmp_path)          # nobody listens there any more
    for r in recs:
        assert r["error"] is not None and "SwitchLostError: rank " in r["error"]
        assert f"no result from the switch at {addr} for 1 s" in r["error"]
        assert r["seconds"] < 5.0
