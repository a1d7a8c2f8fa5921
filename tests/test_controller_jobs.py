"""Controller against the software switch's P4Runtime server, over loopback gRPC.

A 4-worker job is set up through P4Runtime; SwitchModel.process then shows
that the job's workers are aggregated (absorbed, then multicast with the
exact sum to each worker's own address) and a stranger is dropped; after
teardown the same packets are dropped too.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.build import build
from p4gen.controller import Controller, connect, load_build, load_job
from p4gen.controller.cli import main as ctl_main
from p4gen.jobfile import job_rid
from p4gen.switch.model import SwitchModel
from p4gen.switch.p4rt_server import P4RuntimeServer
from p4gen.spec import make_spec
from p4gen.target import load_target

EXAMPLES = Path(__file__).resolve().parent.parent / "controller" / "examples"
SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctl") / "bmv2-64"
    build(make_spec(slots=64, elements_per_packet=16), load_target("bmv2"), out, use_cache=False)
    return out


@pytest.fixture
def switch(build_dir):
    """(model, server) with the build pushed by a primary controller; no threads left behind."""
    before = set(threading.enumerate())
    model = SwitchModel(load_build(build_dir).plan)
    with P4RuntimeServer(model) as server:
        yield model, server
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


def frame(model, job, worker, tsi, slot, values):
    L = model.layout
    src = P.endpoint(worker["mac"], worker["ip"], worker["udp_port"])
    return P.contribution_frame(L, src, SWITCH, job=job, tsi=tsi, pool_index=slot, exponent=0,
                                values=np.asarray(values, dtype=np.int64) & 0xFFFFFFFF)


def job_doc(path):
    import tomllib
    return tomllib.loads(Path(path).read_text())


def test_setup_aggregate_teardown(build_dir, switch):
    model, server = switch
    b = load_build(build_dir)
    job = load_job(EXAMPLES / "job1.toml", b.plan)
    doc = job_doc(EXAMPLES / "job1.toml")
    n = model.layout.elements
    with connect(server.addr, election_id=10) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ch = ctl.setup(job)
        assert (ch.job, ch.workers, ch.slots, ch.mgid) == (1, 4, (0, 32), 1)

        # entities on the switch are the plan's: one workers entry per worker, a group with one rid each
        cfg = model.dump_config()
        assert sorted(e["params"]["worker_id"] for e in cfg["tables"]["workers"]) == [0, 1, 2, 3]
        assert cfg["groups"]["1"] == [[w.port, job_rid(b.plan, 1, w.id)] for w in job.workers]
        flood = int(b.plan.params.flood_group_base)
        assert cfg["groups"][str(flood + 1)] == [[2, 0], [3, 0], [4, 0]]

        rng = np.random.default_rng(5)
        vals = rng.integers(-1000, 1000, size=(4, n))
        slot = 7
        for i, w in enumerate(doc["workers"][:3]):
            assert model.process(frame(model, 1, w, 1, slot, vals[i]), w["port"]) == []
        last = doc["workers"][3]
        out = model.process(frame(model, 1, last, 1, slot, vals[3]), last["port"])
        want = (vals.sum(axis=0) & 0xFFFFFFFF).astype(np.uint32)
        assert sorted(p for p, _ in out) == [1, 2, 3, 4]
        for port, fr in out:
            res = P.parse_result(model.layout, fr)
            w = doc["workers"][port - 1]
            assert res.headers["ipv4"]["dst_addr"] == W.ip(w["ip"])
            assert res.headers["ethernet"]["dst_addr"] == W.mac(w["mac"])
            assert res.headers["udp"]["dst_port"] == w["udp_port"]
            np.testing.assert_array_equal(res.values, want)

        stranger = {"mac": "02:00:00:00:00:99", "ip": "10.0.0.99", "udp_port": 48864}
        assert model.process(frame(model, 1, stranger, 1, slot, vals[0]), 9) == []
        # a known worker on the wrong port is a stranger too
        assert model.process(frame(model, 1, doc["workers"][0], 2, slot, vals[0]), 9) == []

        stats = ctl.counters()
        assert stats["absorbed"][0] == 3 and stats["multicast"][0] == 1 and stats["drop_unknown"][0] == 2
        assert stats["multicast"][1] == len(frame(model, 1, last, 1, slot, vals[3]))

        assert ctl.teardown(1).job == 1
        cfg = model.dump_config()
        assert cfg == {"tables": {"workers": [], "l2_forward": [], "result_dst": []}, "groups": {}}
        before = model.stats["drop_unknown"]
        for w in doc["workers"]:
            assert model.process(frame(model, 1, w, 2, slot, vals[0]), w["port"]) == []
        assert model.stats["drop_unknown"] == before + 4


def test_two_jobs_share_switch_and_teardown_keeps_the_other(build_dir, switch):
    model, server = switch
    b = load_build(build_dir)
    with connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(load_job(EXAMPLES / "job1.toml", b.plan))
        ctl.setup(load_job(EXAMPLES / "job2.toml", b.plan))
        flood = int(b.plan.params.flood_group_base)
        assert model.groups[flood + 5] == [(1, 0), (2, 0), (3, 0), (4, 0), (6, 0)]
        ctl.teardown(1)
        state = ctl.state()
        assert sorted(state.jobs) == [2]
        assert sorted(state.l2) == [W.mac("02:00:00:00:00:05"), W.mac("02:00:00:00:00:06")]
        assert model.groups == {2: [(5, job_rid(b.plan, 2, 0)), (6, job_rid(b.plan, 2, 1))],
                                flood + 5: [(6, 0)], flood + 6: [(5, 0)]}
        # job 2 still aggregates: slot 0 of job 2 is pool slot 32
        doc = job_doc(EXAMPLES / "job2.toml")
        n = model.layout.elements
        assert model.process(frame(model, 2, doc["workers"][0], 1, 0, np.ones(n)), 5) == []
        out = model.process(frame(model, 2, doc["workers"][1], 1, 0, np.ones(n)), 6)
        assert sorted(p for p, _ in out) == [5, 6]
        counts = model.register_read("worker_count")
        assert counts[(32 << 1) | 0] == 2 and counts[0] == 0  # job 2's slot 0 is pool slot 32


def test_l2_entries_forward_worker_macs(build_dir, switch):
    model, server = switch
    b = load_build(build_dir)
    with connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(load_job(EXAMPLES / "job1.toml", b.plan))
    arp_like = bytes.fromhex("020000000003" "020000000001" "0806") + bytes(46)
    assert model.process(arp_like, 1) == [(3, arp_like)]
    flood = bytes.fromhex("ffffffffffff" "020000000001" "0806") + bytes(46)
    assert sorted(p for p, _ in model.process(flood, 1)) == [2, 3, 4]


def test_register_reset_through_p4runtime(build_dir, switch):
    model, server = switch
    b = load_build(build_dir)
    doc = job_doc(EXAMPLES / "job1.toml")
    with connect(server.addr) as conn:
        ctl = Controller(b, conn)
        ctl.push()
        ctl.setup(load_job(EXAMPLES / "job1.toml", b.plan))
        model.process(frame(model, 1, doc["workers"][0], 5, 3, np.arange(model.layout.elements)), 1)
        assert model.register_read("values1").any() and model.register_read("chunk").any()
        assert ctl.reset_registers().startswith("P4Runtime RegisterEntry writes")
    for name in model.register_names():
        assert not model.register_read(name).any(), name


def test_cli_session(build_dir, switch, capsys):
    model, server = switch
    addr = ["--addr", server.addr, "--election-id", "3"]
    assert ctl_main(["ctl", "push", str(build_dir), *addr]) == 0
    assert ctl_main(["ctl", "setup", str(build_dir), str(EXAMPLES / "job1.toml"), *addr]) == 0
    doc = job_doc(EXAMPLES / "job1.toml")
    for w in doc["workers"]:
        model.process(frame(model, 1, w, 1, 0, np.ones(model.layout.elements)), w["port"])
    model.process(frame(model, 1, {"mac": "02:00:00:00:00:99", "ip": "10.9.9.9", "udp_port": 1}, 1, 0,
                        np.ones(model.layout.elements)), 7)
    assert ctl_main(["ctl", "counters", str(build_dir), *addr]) == 0
    assert ctl_main(["ctl", "reset", str(build_dir), *addr]) == 0
    assert ctl_main(["ctl", "teardown", str(build_dir), "1", *addr]) == 0
    out = capsys.readouterr().out.splitlines()
    size = len(frame(model, 1, doc["workers"][0], 1, 0, np.ones(model.layout.elements)))
    assert out[0].startswith(f"pushed {build_dir}: P4Info p4gen-switchml-hardened (")
    assert out[0].endswith(f"device config none (software data plane), to switch at {server.addr} (device 0)")
    assert out[1] == (f"job 1: 4 workers, slots 0..31, multicast group 1; its 736 register entries zeroed with "
                      f"P4Runtime RegisterEntry writes; wrote 17 updates to switch at {server.addr}")
    stats = out[2:12]
    assert [ln.split()[0] for ln in stats] == b_stats(build_dir)
    assert f"absorbed        packets=3 bytes={3 * size}" in stats
    assert f"multicast       packets=1 bytes={size}" in stats
    assert f"drop_unknown    packets=1 bytes={size}" in stats
    assert out[12] == (f"reset the aggregation registers of switch at {server.addr} with P4Runtime RegisterEntry "
                       f"writes ({len(model.register_names())} registers)")
    assert out[13] == (f"job 1: removed 4 workers, slots 0..31, multicast group 1; wrote 17 updates to switch at "
                       f"{server.addr}")


def b_stats(build_dir):
    return list(load_build(build_dir).plan.stats)


def test_teardown_by_job_file(build_dir, switch, capsys):
    model, server = switch
    addr = ["--addr", server.addr]
    job = str(EXAMPLES / "job2.toml")
    assert ctl_main(["ctl", "push", str(build_dir), *addr]) == 0
    assert ctl_main(["ctl", "setup", str(build_dir), job, *addr]) == 0
    assert ctl_main(["ctl", "teardown", str(build_dir), job, *addr]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("job 2: removed 2 workers, slots 32..63")
    assert model.dump_config()["groups"] == {}
