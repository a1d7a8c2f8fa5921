"""Testbed pieces that need no root: topologies, the fast worker, the switch config, the CLI parser."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from p4gen.switch.model import SwitchModel
from p4gen.wire import FrameLayout
from p4gen.host.packet import endpoint
from p4gen.plan import Plan
from p4gen.testbed import cli
from p4gen.testbed.errors import TestbedError
from p4gen.host.fastworker import FastWorker
from p4gen.testbed.program import JobSpec, WorkerSpec, json_config
from p4gen.testbed.tensors import check_switchml, expected
from p4gen.testbed.topo import star, two_level, two_level_for
from p4gen.host.worker import Worker
from needs import modules


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Plan:
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    out = tmp_path_factory.mktemp("plan") / "sml"
    return build(make_spec(protocol="switchml", max_workers=32, slots=512), load_target("bmv2"), out).plan


def test_star_ports_and_routes():
    t = star(3, 50)
    assert t.ports("s1") == {1: "s1-eth1", 2: "s1-eth2", 3: "s1-eth3"}
    assert [t.route("s1", h.name) for h in t.hosts] == [1, 2, 3]
    assert {ln.mbit for ln in t.links} == {50}


def test_two_level_routes_go_through_the_spine():
    t = two_level(2, 2, 10)
    assert t.aggregator.name == "s1" and [s.role for s in t.switches] == ["aggregate", "forward", "forward"]
    assert [t.route("s1", h.name) for h in t.hosts] == [1, 1, 2, 2]
    assert [t.route("l1", h.name) for h in t.hosts] == [1, 2, 3, 3]      # port 3: uplink
    up = [ln for ln in t.links if ln.a == "l1" and ln.b == "s1"][0]
    assert up.mbit == 20


def test_topology_arguments_are_checked():
    with pytest.raises(TestbedError, match=r"^workers=0 must be 1\.\.250$"):
        star(0)
    with pytest.raises(TestbedError, match=r"^workers=5: the two-level topology needs an even number"):
        two_level_for(5)


def _run(plan, workers, model):
    """Drive workers against the model in-process until done (no loss)."""
    q = [f for w in workers for f in w.start(0.0)]
    port = {w.src.ip: i + 1 for i, w in enumerate(workers)}
    while q:
        f = q.pop(0)
        src_ip = int.from_bytes(f[26:30], "big")
        for eport, out in model.process(f, port[src_ip]):
            q += workers[eport - 1].receive(out, 0.0)
    assert all(w.done for w in workers)
    return [w.result() for w in workers]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_fast_worker_sends_the_same_bytes_and_gets_the_same_result(plan, dtype):
    L = FrameLayout(plan)
    n, size = 3, 5000
    total, xs = expected(n, size, dtype, 7, 1.0, L.elements)
    spec = JobSpec(0, 1, 0, 8, tuple(WorkerSpec(i, i + 1, f"02:00:00:00:00:0{i + 1}", f"10.0.0.{i + 1}", 50000 + i)
                                     for i in range(n)), (), (1, 2, 3))
    results = {}
    for cls in (Worker, FastWorker):
        m = SwitchModel(plan)
        m.load_config(json_config(plan, spec))
        ws = [cls(L, xs[i], job=0, window=8, n_workers=n, mode="float" if dtype == "float32" else "int",
                  src=endpoint(w.mac, w.ip, w.udp_port), dst=endpoint("02:00:00:00:00:fe", "10.0.0.254", 0xBEE0))
              for i, w in enumerate(spec.workers)]
        results[cls] = _run(plan, ws, m)
    for a, b in zip(results[Worker], results[FastWorker]):
        assert np.array_equal(a, b)
    c = check_switchml(results[FastWorker][0], xs, total, L.elements)
    assert c.exact and c.correct


def test_fast_worker_frames_are_byte_identical(plan):
    L = FrameLayout(plan)
    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    kw = dict(job=0, window=4, n_workers=3, src=endpoint("02:00:00:00:00:01", "10.0.0.1", 50000),
              dst=endpoint("02:00:00:00:00:fe", "10.0.0.254", 0xBEE0))
    a, b = Worker(L, x, **kw), FastWorker(L, x, **kw)
    a._emax[:] = b._emax[:] = np.arange(a.chunks) % 5 - 2
    assert all(a._frame(t) == b._frame(t) for t in range(a.indices))


def test_json_config_has_job_l2_and_flood_groups(plan):
    spec = JobSpec(0, 1, 0, 64, (WorkerSpec(0, 1, "02:00:00:00:00:01", "10.0.0.1", 50000),
                                 WorkerSpec(1, 2, "02:00:00:00:00:02", "10.0.0.2", 50001)),
                   (("02:00:00:00:00:01", 1), ("02:00:00:00:00:02", 2)), (1, 2))
    cfg = json_config(plan, spec)
    assert len(cfg["tables"]["workers"]) == 2
    assert cfg["groups"]["1"] == [[1, 1], [2, 2]]
    assert cfg["groups"][str(plan.params.flood_group_base + 1)] == [[2, 0]]
    SwitchModel(plan).load_config(cfg)             # the model accepts it


def test_json_config_of_two_jobs_shares_l2_and_flood_groups(plan):
    a = JobSpec(0, 1, 0, 32, (WorkerSpec(0, 1, "02:00:00:00:00:01", "10.0.0.1", 50000),
                              WorkerSpec(1, 2, "02:00:00:00:00:02", "10.0.0.2", 50001)),
                (("02:00:00:00:00:01", 1), ("02:00:00:00:00:02", 2), ("02:00:00:00:00:03", 3)), (1, 2, 3))
    b = JobSpec(1, 2, 32, 32, (WorkerSpec(0, 3, "02:00:00:00:00:03", "10.0.0.3", 50000),
                               WorkerSpec(1, 1, "02:00:00:00:00:01", "10.0.0.1", 50001)), a.hosts, a.ports)
    cfg = json_config(plan, a, b)
    assert len(cfg["tables"]["workers"]) == 4 and len(cfg["tables"]["l2_forward"]) == 3
    assert cfg["groups"]["1"] == [[1, 1], [2, 2]] and cfg["groups"]["2"] == [[3, 33], [1, 34]]
    SwitchModel(plan).load_config(cfg)
    with pytest.raises(TestbedError, match=r"^job 1: multicast group 1 is taken by another job$"):
        json_config(plan, a, JobSpec(1, 1, 32, 32, b.workers, a.hosts, a.ports))


def test_mininet_topologies_are_built_from_the_topology_data():
    pytest.importorskip("mininet.topo", reason="the mininet Python module is not installed")
    from p4gen.testbed.mntopo import StarTopo, TwoLevelTopo
    from p4gen.testbed.nodes import Leaf

    t = StarTopo(3, bw=20)
    assert t.hosts() == ["h1", "h2", "h3"] and t.switches() == ["s1"]
    assert t.nodeInfo("h2") == {"ip": "10.0.0.2/24", "mac": "02:00:00:00:00:02"}
    links = t.links(sort=True, withInfo=True)
    assert [(a, b) for a, b, _ in links] == [("h1", "s1"), ("h2", "s1"), ("h3", "s1")]
    info = links[1][2]
    assert (info["port1"], info["port2"], info["intfName2"]) == (0, 2, "s1-eth2")
    assert (info["bw"], info["txo"], info["rxo"]) == (20, False, False)
    t2 = TwoLevelTopo(2, 2, bw=10)
    assert t2.nodeInfo("l1")["cls"] is Leaf and "cls" not in t2.nodeInfo("s1")
    assert t2.data.route("s1", "h3") == 2


def test_delay_without_netem_is_refused_in_one_line(monkeypatch):
    from p4gen.testbed import loss

    monkeypatch.setattr(loss, "netem_available", lambda: False)
    with pytest.raises(TestbedError, match=r"^--delay 5ms: link delay needs the netem qdisc, which this kernel "
                                           r"lacks \(tc: Specified qdisc kind is unknown\); links run without "
                                           r"added delay$"):
        loss.check_delay("5ms")
    loss.check_delay(None)


def test_cli_parses_up_and_cleanup():
    a = _parser().parse_args(["testbed", "up", "--workers", "4", "--switch", "bmv2", "--topo", "two-level"])
    assert (a.workers, a.switch, a.topo, a.protocol) == (4, "bmv2", "two-level", "switchml")
    a = _parser().parse_args(["testbed", "run", "--cli", "--delay", "5ms"])
    assert a.cli and a.delay == "5ms"
    a = _parser().parse_args(["testbed", "cleanup", "--network", "h1"])
    with pytest.raises(TestbedError, match=r"^--network 'h1' must look like p4g and 4 hex digits \(e\.g\. p4g1a2b\)$"):
        a.func(a)


def _parser():
    ap = argparse.ArgumentParser(prog="p4gen")
    cli.register(ap.add_subparsers(dest="cmd", required=True))
    return ap


def test_cli_parses_run_options():
    a = _parser().parse_args(["testbed", "run", "--protocol", "gloo", "--workers", "4", "--size", "16MiB",
                              "--bw", "20", "--loss", "0.01", "--switch", "soft", "--topo", "two-level"])
    assert (a.protocol, a.workers, a.bw, a.loss, a.switch, a.topo) == ("gloo", 4, 20.0, 0.01, "soft", "two-level")
    assert cli.parse_size(a.size) == 4 << 20
    assert callable(a.func)


@pytest.mark.parametrize("text,msg", [("16MB", r"^--size '16MB' must be a number of elements or a size like 16MiB$"),
                                      ("1.5", r"^--size '1\.5': a number of elements must be whole$"),
                                      ("0", r"^--size '0' gives 0 elements; at least 1 is needed$")])
def test_size_errors(text, msg):
    with pytest.raises(TestbedError, match=msg):
        cli.parse_size(text)


def test_run_checks_arguments_before_touching_the_system(capsys):
    for argv, msg in ((["--workers", "1"], "argument --workers: 1 is outside 2..64 (workers of one job)"),
                      (["--loss", "1.5"], "argument --loss: '1.5' must be a number in [0, 1) (a probability)")):
        with pytest.raises(SystemExit):
            _parser().parse_args(["testbed", "run", *argv])
        assert msg in capsys.readouterr().err
    a = _parser().parse_args(["testbed", "run"])
    a.workers = 1                  # a caller that fills the namespace itself is still checked by run()
    with pytest.raises(TestbedError, match=r"^--workers 1 must be at least 2$"):
        a.func(a)


def test_table_row_lines_up_with_header():
    from p4gen.testbed.harness import RunResult

    r = RunResult("switchml", 4, 4 << 20, "float32", 1.0, 20, 0.0, "star4", "switch", 8.1, 16.6, 6.7, 83.0,
                  65600, 3, 4.4e6, 2.4e-7, 5e-7, True, True)
    assert len(cli.row(r)) == len(cli.header())
    assert cli.row(r).rstrip().endswith("yes")


def test_a_failed_training_run_reports_the_scripts_own_error_not_torchruns_banner(tmp_path):
    from p4gen.testbed.procs import Proc
    from p4gen.testbed.train import _reason

    log = tmp_path / "train-gloo-0.log"
    log.write_text("Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'sklearn'\n"
                   "p4gen.torch.train: rank 0: No module named 'sklearn'\n"
                   "E1201 failed (exitcode: 1)\n" + "=" * 60 + "\nRoot Cause (first observed failure):\n" + "=" * 60 + "\n")
    assert _reason(Proc("h1", None, log)) == "p4gen.torch.train: rank 0: No module named 'sklearn'"
    log.write_text("Killed\n")
    assert _reason(Proc("h1", None, log)) == "Killed"


def test_train_png_without_matplotlib_fails_in_one_line_before_any_run(monkeypatch, capsys):
    import sys

    from p4gen.cli import main
    from p4gen.testbed import train

    modules("testbed train", "torch", "sklearn")                   # checked before --png
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib raises ImportError
    monkeypatch.setattr(train, "network_from_options", lambda *a: pytest.fail("a network was built"))
    assert main(["testbed", "train", "--workers", "4", "--png", "x.png"]) != 0
    err = capsys.readouterr().err.strip()
    assert err == ("p4gen: error: --png needs matplotlib (the bench extra: pip install -e '.[bench]' in the p4gen "
                   "checkout)"), err


def test_emulators_gather_half_their_windows_time_on_the_link_at_most_40_ms():
    from p4gen.testbed.harness import gather_time

    assert gather_time(25, 1075, 64) == pytest.approx(64 * 1075 * 8 / 25e6 / 2)    # 64 frames take 22 ms: 11 ms
    assert gather_time(25, 1075, 256) == 0.040                                   # 88 ms: at most 40
    assert gather_time(25, 8243, 32) == 0.040                                    # 32 jumbo frames: 84 ms
    assert gather_time(100, 1075, 8) == pytest.approx(8 * 1075 * 8 / 100e6 / 2)   # BMv2's window of 8: 0.34 ms


def test_the_software_switch_begins_a_round_after_8_frames_on_the_slowest_link_at_most_10_ms():
    modules("the testbed", "mininet")
    from p4gen.testbed.nodes import SoftSwitch

    assert SoftSwitch.round_frames == 8 and SoftSwitch.round_max == 0.010


def test_a_testbed_build_names_its_target_and_refuses_what_it_cannot_build(tmp_path):
    from p4gen.testbed.errors import TestbedError
    from p4gen.testbed.plans import build_plan

    with pytest.raises(TestbedError, match=r"^target='tofino' must be one of bmv2, soft$"):
        build_plan("switchml", 3, tmp_path, target="tofino")
    with pytest.raises(TestbedError, match=r"^a soft build is for the software data plane; BMv2 runs bmv2 builds$"):
        build_plan("switchml", 3, tmp_path, target="soft", compile_p4=True)
    soft, bmv2 = (FrameLayout(Plan.load(build_plan("switchml", 3, tmp_path, target=t))) for t in ("soft", "bmv2"))
    assert (soft.elements, soft.frame_len) == (2048, 8243) and (bmv2.elements, bmv2.frame_len) == (256, 1075)
    assert Plan.load(build_plan("omnireduce", 3, tmp_path, target="soft")).target.mtu_bytes == 9000


def test_run_target_soft_takes_the_software_switch_and_refuses_bmv2(monkeypatch, tmp_path):
    modules("the testbed", "mininet")
    from p4gen.testbed import nodes, procs
    from p4gen.testbed.network_options import network_from_options

    a = _parser().parse_args(["testbed", "run", "--target", "soft", "--plan-cache", str(tmp_path)])
    assert a.target == "soft" and _parser().parse_args(["testbed", "run"]).target == "bmv2"
    monkeypatch.setattr(nodes.BMv2Switch, "missing", classmethod(lambda cls: None))    # as if BMv2 were installed
    monkeypatch.setattr(procs, "require", lambda: None)         # no root or Mininet needed to describe a network
    net = network_from_options(a, "switchml")          # auto: the software switch, a soft build
    assert net.switch_cls is nodes.SoftSwitch and Plan.load(net.plan_dir).target.name == "soft"
    a.switch = "bmv2"
    with pytest.raises(TestbedError, match=r"^--target soft is for the software switch \(--switch soft\); "
                                           r"BMv2 runs bmv2 builds$"):
        network_from_options(a, "switchml")


def test_training_paces_the_hook_as_the_emulators_for_the_gradients_size(tmp_path):
    """testbed train's window, timeouts and gather: the emulators' for a tensor of the gradient's size, the
    window never above its chunks, no gathering for OmniReduce."""
    from types import SimpleNamespace

    modules("the testbed", "mininet")
    from p4gen.testbed.nodes import SoftSwitch
    from p4gen.testbed.plans import build_plan
    from p4gen.testbed.train import pacing

    def net(protocol, target, mbit=25.0, n=8):
        plan = Plan.load(build_plan(protocol, n, tmp_path, target=target))
        return SimpleNamespace(agg=SimpleNamespace(plan=plan, max_in_flight=SoftSwitch.max_in_flight),
                               topo=SimpleNamespace(links=[SimpleNamespace(mbit=mbit)] * n, hosts=[None] * n))

    dense = 1_126_410                                  # the wide model: 550 chunks of 2048, 4401 of 256
    p = pacing(net("switchml", "soft"), "switchml", dense)
    assert p == {"window": 32, "timeout": pytest.approx(3 * 32 * 8243 * 8 / 25e6), "gather": 0.040,
                 "max_timeout": 1.0}
    assert pacing(net("switchml", "bmv2"), "switchml", dense)["window"] == 256
    q = pacing(net("omnireduce", "soft"), "omnireduce", 1_056_962)
    assert q["window"] == 32 and q["gather"] == 0.0
    assert pacing(net("switchml", "bmv2", 50.0, 4), "switchml", 4810)["window"] == 19     # 19 chunks: no more
