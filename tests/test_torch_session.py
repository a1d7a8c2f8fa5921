"""p4gen.torch's all-reduce service against the software switch on loopback (no root, no torch needed)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from p4gen.jobfile import load_job
from p4gen.host import codec
from p4gen.torch.session import Session, SwitchLostError, TorchHookError, member_from_job

from loopback import build_plan, udp_switch, write_job

N = 3


@pytest.fixture(scope="module", params=["switchml", "omnireduce"])
def setup(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    plan = build_plan(d / "build", request.param)
    return plan, write_job(d / "job.toml", N)


def _sessions(plan, job_file, sw, **kw):
    job = load_job(job_file, plan)
    addr = f"{sw.address[0]}:{sw.address[1]}"
    return [Session(plan, member_from_job(job, plan, r, N, addr), **kw) for r in range(N)]


def _run(sessions, arrays_per_rank):
    """Each rank submits its arrays in order on its own thread, as DDP's buckets arrive; the results."""
    out = [None] * len(sessions)

    def rank(r):
        futs = [sessions[r].submit(a) for a in arrays_per_rank[r]]
        out[r] = [f.result(timeout=60) for f in futs]
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(len(sessions))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def _through_switch(plan, job_file, arrays):
    """The arrays of each rank all-reduced through a fresh loopback switch: (results, each rank's session
    stats); no datagram reached the switch from an unknown sender."""
    with udp_switch(plan, job_file) as sw:
        ss = _sessions(plan, job_file, sw)
        try:
            got = _run(ss, arrays)
        finally:
            for s in ss:
                s.close()
    assert sw.model.stats["drop_unknown"] == 0
    return got, [s.stats for s in ss]


def test_bucket_sequences_sum_within_the_codec_bound(setup):
    plan, job_file = setup
    rng = np.random.default_rng(0)
    sizes = [700, 64, 1, 3000]
    arrays = [[(rng.standard_normal(s) * 10.0 ** rng.integers(-4, 3)).astype(np.float32) for s in sizes]
              for _ in range(N)]
    if plan.protocol == "omnireduce":          # block-sparse: most blocks zero on each worker
        for r in range(N):
            for a in arrays[r]:
                blocks = a[: a.size // 64 * 64].reshape(-1, 64)
                blocks[rng.random(len(blocks)) < 0.7] = 0
    got, _stats = _through_switch(plan, job_file, arrays)
    k = 64
    for i, size in enumerate(sizes):
        exact = np.sum([arrays[r][i].astype(np.float64) for r in range(N)], axis=0)
        for r in range(N):
            red = got[r][i]
            assert not red.flagged and red.total.shape == (size,)
            assert np.array_equal(red.total, got[0][i].total)          # every worker gets the same bytes
            for c in range(0, size, k):
                e = max(int(codec.exponent_of(arrays[q][i][c:c + k])) for q in range(N))
                if plan.protocol == "omnireduce":        # one exponent per stream: bound by the max
                    e = max(int(codec.exponent_of(arrays[q][i])) for q in range(N))
                bound = codec.error_bound(e, N, 32) + np.abs(exact[c:c + k]) * 2.0 ** -23
                assert np.all(np.abs(red.total[c:c + k] - exact[c:c + k]) <= bound)


def test_nan_on_one_worker_flags_that_bucket_on_every_worker(setup):
    plan, job_file = setup
    rng = np.random.default_rng(1)
    arrays = [[rng.standard_normal(300).astype(np.float32) for _ in range(3)] for _ in range(N)]
    arrays[2][1][17] = np.inf
    arrays[0][1][5] = np.nan
    got, _stats = _through_switch(plan, job_file, arrays)
    assert [[red.flagged for red in got[r]] for r in range(N)] == [[False, True, False]] * N
    exact = np.sum([arrays[r][2].astype(np.float64) for r in range(N)], axis=0)
    assert np.allclose(got[1][2].total, exact, atol=1e-6)                 # the bucket after it is clean


def test_a_lost_switch_fails_the_bucket_within_the_stall_timeout(setup):
    plan, job_file = setup
    with udp_switch(plan, job_file) as sw:
        ss = _sessions(plan, job_file, sw, stall_timeout=0.5, max_timeout=0.1)
    try:                                   # the switch is gone now
        t0 = time.monotonic()
        f = ss[0].submit(np.ones(500, np.float32))
        with pytest.raises(SwitchLostError, match=r"^rank 0: no result from the switch at 127\.0\.0\.1:\d+ "
                                                  r"for 0\.5 s \(array 0, .*\); the switch or a peer worker is gone$"):
            f.result(timeout=10)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(SwitchLostError):                         # and every later bucket at once
            ss[0].submit(np.ones(5, np.float32)).result(timeout=1)
    finally:
        for s in ss:
            s.close()


def test_arguments_are_checked(setup, tmp_path):
    plan, job_file = setup
    job = load_job(job_file, plan)
    with pytest.raises(TorchHookError, match=r"^the process group has 2 ranks; job 1 \(.*\) has 3 workers$"):
        member_from_job(job, plan, 0, 2, "127.0.0.1")
    with pytest.raises(TorchHookError, match=r"^switch='nowhere' must be an IPv4 address, optionally with :PORT$"):
        member_from_job(job, plan, 0, N, "nowhere")
    with pytest.raises(TorchHookError, match=r"^window=17 must be in 1\.\.16 \(the slots of job 1\)$"):
        member_from_job(job, plan, 0, N, "127.0.0.1", window=17)
    other = "omnireduce" if plan.protocol == "switchml" else "switchml"
    with pytest.raises(TorchHookError, match=rf"^protocol='{other}', but the switch's plan is built for "):
        Session(plan, member_from_job(job, plan, 0, N, "127.0.0.1"), protocol=other)


def test_a_job_whose_chunk_indices_run_out_fails_the_bucket_with_one_line(setup):
    """Near the end of the 32-bit tsi: SwitchML's next chunk index, OmniReduce's rounds per slot."""
    plan, job_file = setup
    job = load_job(job_file, plan)
    m = member_from_job(job, plan, 0, N, "127.0.0.1:9")
    omni = plan.protocol == "omnireduce"
    room = (0, [(1 << 32) // m.window - 10] * m.window) if omni else ((1 << 32) - 5, [0] * m.window)
    s = Session(plan, m, position=room)
    try:
        with pytest.raises(TorchHookError, match=r"^rank 0: the job has used up its 2\^32 chunk indices; "
                                                 r"start a new job$"):
            s.submit(np.ones(64 * 40, np.float32)).result(timeout=10)
        assert s.position == room                       # nothing was sent, nothing moved on
    finally:
        s.close()
    s = Session(plan, m, position=(0, [0] * m.window))  # a fresh job has room for the same array
    try:
        assert s.pipeline.worker(np.ones(64 * 40, np.float32)).chunks == 40
    finally:
        s.close()


def test_a_bucket_starts_on_the_slots_the_one_before_frees(setup):
    """Buckets are pipelined: the second bucket's first packets go out while the first one still waits
    for its last results (it frees the slots its second round does not use), and the sums are those of
    the codec."""
    plan, job_file = setup
    rng = np.random.default_rng(3)
    # 20 chunks (blocks) on 16 slots: slots 4-15 are free while slots 0-3 carry a last round
    sizes = [20 * 64, 5 * 64, 64 * 64]
    arrays = [[rng.standard_normal(s).astype(np.float32) for s in sizes] for _ in range(N)]
    got, stats = _through_switch(plan, job_file, arrays)
    for r in range(N):
        times = stats[r].per_array
        assert [t[0] for t in times] == sizes
        assert times[1][2] < times[0][3] and times[2][2] < times[1][3]     # first sent before the last one's sum
        for i in range(len(sizes)):
            exact = np.sum([arrays[q][i].astype(np.float64) for q in range(N)], axis=0)
            e = max(int(codec.exponent_of(arrays[q][i])) for q in range(N))
            assert np.all(np.abs(got[r][i].total - exact) <= codec.error_bound(e, N, 32) + np.abs(exact) * 2.0 ** -23)
