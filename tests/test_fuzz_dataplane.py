"""Hostile frames against the AF_PACKET data plane while a real job runs through it (root, own namespace).

A sender process puts 1,500 frames of every deterministic hostile kind of
``fuzz_frames`` on the workers' links while three workers all-reduce.  The
job's sums must be exact, and the data plane's counters must hold exactly
the hostile frames of each kind: spoofed workers (another port, another
job, an unregistered address) under ``drop_unknown``, malformed frames
under ``drop_malformed``, slots past the job under ``drop_bad_slot``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.switch.model import WorkerAddr, job_config
from p4gen.target import load_target
from p4gen.wire import ip, mac
import test_dataplane
from test_dataplane import _stop, _wait_for
from vethns import sh as _sh

netns = test_dataplane.netns        # the network-namespace fixture (pytest finds it by this name)

HERE = Path(__file__).resolve().parent
KINDS = ["runt", "truncated", "bad_msg_type", "unknown_job", "unregistered", "wrong_port", "other_job", "bad_slot",
         "wrong_lengths", "not_aggregation"]

SENDER = r"""
import json, random, socket, sys, time
sys.path.insert(0, sys.argv[1])
import fuzz_frames as F
from p4gen import wire as W
from p4gen.plan import Plan
from p4gen.switch.model import WorkerAddr
plan = Plan.load(sys.argv[2])
spec = json.loads(sys.argv[3])
t = F.Target(W.FrameLayout(plan), spec["job"], [WorkerAddr(*w) for w in spec["workers"]], spec["slot_count"],
             spec["other_job"], [WorkerAddr(*w) for w in spec["other_workers"]])
ifaces = {int(p): name for p, name in spec["ifaces"].items()}
socks = {}
for p, name in ifaces.items():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((name, 0))
    socks[p] = s
rng = random.Random(spec["seed"])
expect = {}
sent = 0
while sent < spec["count"]:
    kind = rng.choice(spec["kinds"])
    frame, port, counters = F.junk(t, kind, random.Random(rng.randrange(1 << 32)))
    if port not in socks:
        continue
    try:
        socks[port].send(frame)
    except OSError:               # the kernel refuses some runts (shorter than an Ethernet header)
        continue
    (counter,) = counters
    expect[counter] = expect.get(counter, 0) + 1
    sent += 1
    if sent % 50 == 0:
        time.sleep(0.005)
print(json.dumps(expect))
"""


def test_hostile_frames_beside_a_job_on_the_dataplane(netns, tmp_path):
    plan = make_plan(make_spec(slots=16, elements_per_packet=64, jobs=2), load_target("bmv2"))
    (tmp_path / "plan.json").write_text(plan.to_json())
    workers = [WorkerAddr(i + 1, mac(f"02:00:00:00:01:0{i}"), ip(f"10.0.1.{i + 1}"), 41000 + i) for i in range(3)]
    others = [WorkerAddr(i + 1, mac(f"02:00:00:00:02:0{i}"), ip(f"10.0.2.{i + 1}"), 42000 + i) for i in range(2)]
    cfg = job_config(plan, 1, workers, slot_count=4)
    other = job_config(plan, 2, others, slot_base=8, slot_count=4, mgid=2, rid_base=100)
    cfg["tables"]["workers"] += other["tables"]["workers"]
    cfg["tables"]["result_dst"] += other["tables"]["result_dst"]
    cfg["groups"].update(other["groups"])
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    stats = tmp_path / "stats.json"
    dp = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-m", "p4gen.switch.dataplane",
                           "--plan", str(tmp_path), "--config", str(tmp_path / "cfg.json"),
                           "--stats", str(stats), "--stats-interval", "0.1",
                           "--port", "1=s0", "--port", "2=s1", "--port", "3=s2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spec = {"job": 1, "slot_count": 4, "other_job": 2, "seed": 13, "count": 1500, "kinds": KINDS,
            "workers": [list(map(int, (w.port, w.mac, w.ip, w.udp_port))) for w in workers],
            "other_workers": [list(map(int, (w.port, w.mac, w.ip, w.udp_port))) for w in others],
            "ifaces": {"1": "w0", "2": "w1", "3": "w2"}}
    try:
        _wait_for(stats, dp, "data plane did not start")
        sender = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", SENDER, str(HERE),
                                   str(tmp_path / "plan.json"), json.dumps(spec)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        args = [f"w{i},02:00:00:00:01:0{i},10.0.1.{i + 1},{41000 + i}" for i in range(3)]
        drv = _sh("ip", "netns", "exec", netns, sys.executable, str(HERE / "dp_driver.py"),
                  str(tmp_path / "plan.json"), "int", *args)
        out, err = sender.communicate(timeout=120)
        assert sender.returncode == 0, err
        expect = json.loads(out)
    finally:
        rc = _stop(dp)
    assert rc == 0, dp.stderr.read()
    res = json.loads(drv.stdout)
    assert all(res["done"]), res
    exact = np.array(res["expected"]).astype(np.int64).tolist()
    assert all(r == exact for r in res["results"])
    final = {k: v["packets"] for k, v in json.loads(stats.read_text())["stats"].items()}
    assert set(expect) == {"drop_malformed", "drop_unknown", "drop_bad_slot", "l2_flood"}
    for counter in ("drop_malformed", "drop_unknown", "drop_bad_slot"):
        assert final[counter] == expect[counter], (counter, final, expect)
    assert final["l2_flood"] >= expect["l2_flood"]
    assert expect["drop_unknown"] > 300 and final["multicast"] >= 5
