"""Differential test: BMv2 simple_switch and SwitchModel on the same frames.

For each program (SwitchML hardened and reference, OmniReduce) the test
compiles the BMv2 JSON, runs simple_switch inside a private network
namespace (p4gtest-bm-*) with three veth pairs (switch ports 1..3), loads the
same job entries into the switch (through simple_switch_CLI) and into
:class:`p4gen.switch.model.SwitchModel`, sends a scripted sequence of frames one at a
time through the host ends of the veth pairs, and compares, per step, the set
of (egress port, frame bytes) seen on the wire with the model's output; at the
end the stats counter.  Runs only where BMv2 and p4c-bm2-ss are installed and
we are root (namespaces, AF_PACKET); skips elsewhere.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import sys
import time

import numpy as np
import pytest

from bmv2_harness import Bmv2, Netns, _sh, cli_commands, collect, drain, is_agg, missing_tools, read_counter
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel, WorkerAddr, job_config

_missing = missing_tools()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not on PATH (BMv2 differential test)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and AF_PACKET sockets"),
]

SWITCH = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)
L2_MAC = 0x02AA00000003
JOB = 3
MGID = 5
RID_BASE = 10
SLOT_BASE = 4
SLOT_COUNT = 8
# -- scripted frames ----------------------------------------------------------------------
def scenario(plan: Plan, addrs: list[WorkerAddr]) -> list[tuple[str, int, bytes]]:
    """(label, ingress port, frame) in sending order."""
    L = W.FrameLayout(plan)
    omni = L.omni
    rng = np.random.default_rng(7)
    width = L.value_width
    srcs = [P.Endpoint(a.mac, a.ip, a.udp_port) for a in addrs]
    slot_bits = plan.params.slot_bits

    def vals():
        return rng.integers(0, 1 << width, size=L.elements, dtype=np.uint64)

    def f(w, tsi, slot, copy=0, exp=0, data=True, nxt=None, src=None):
        kw = {"next": (0xFFFFFFFF if nxt is None else nxt)} if omni else {}
        return P.contribution_frame(L, srcs[w] if src is None else src, SWITCH, job=JOB, tsi=tsi,
                                    pool_index=(copy << slot_bits) | slot, exponent=exp,
                                    values=vals() if data else None, **kw)

    port = [a.port for a in addrs]
    s = []
    s.append(("w0 first slot0", port[0], f(0, 0, 0, exp=3, nxt=2)))
    s.append(("w1 mid slot0", port[1], f(1, 0, 0, exp=7, nxt=1)))
    dup = f(1, 0, 0, exp=7, nxt=1)
    s.append(("w1 again slot0 (new values)", port[1], dup))
    s.append(("w1 duplicate slot0", port[1], dup))
    s.append(("w2 last slot0 (multicast)", port[2], f(2, 0, 0, exp=5, nxt=4)))
    s.append(("w0 retransmit to complete slot0 (unicast)", port[0], f(0, 0, 0, exp=3, nxt=2)))
    s.append(("w0 first slot1", port[0], f(0, 1, 1, exp=1)))
    s.append(("w1 slot1 copy1 tsi 9", port[1], f(1, 9, 1, copy=1, exp=2)))
    s.append(("w2 stale tsi 1 to slot1 copy0", port[2], f(2, 1, 1)))
    s.append(("w0 next chunk tsi 16 slot0 copy0", port[0], f(0, 16, 0, exp=4)))
    s.append(("w1 stale tsi 0 slot0 copy0", port[1], f(1, 0, 0, exp=7)))
    s.append(("unknown worker (src port)", port[0], f(0, 2, 2, src=P.Endpoint(addrs[0].mac, addrs[0].ip, 41999))))
    s.append(("unknown worker (wrong ingress port)", port[1], f(0, 2, 2)))
    s.append(("out-of-range slot", port[0], f(0, 2, SLOT_COUNT + 1)))
    s.append(("truncated frame", port[2], f(2, 2, 2)[:L.fixed_len + 3]))
    s.append(("truncated headers", port[2], f(2, 2, 2)[:L.fixed_len - 2]))
    if omni:
        s.append(("w0 header-only slot3", port[0], f(0, 3, 3, data=False, nxt=9)))
        s.append(("w1 data slot3", port[1], f(1, 3, 3, nxt=5)))
        s.append(("w2 last header-only slot3 (grows)", port[2], f(2, 3, 3, data=False, nxt=6)))
        s.append(("w0 header-only slot4", port[0], f(0, 4, 4, data=False, nxt=7)))
        s.append(("w1 header-only slot4", port[1], f(1, 4, 4, data=False, nxt=8)))
        s.append(("w2 last header-only slot4 (all header-only)", port[2], f(2, 4, 4, data=False, nxt=12)))
        s.append(("w1 retransmit header-only slot4", port[1], f(1, 4, 4, data=False, nxt=8)))
    else:
        s.append(("w1 slot2", port[1], f(1, 2, 2, exp=9)))
        s.append(("w0 slot2", port[0], f(0, 2, 2, exp=2)))
        s.append(("w2 last slot2 (multicast)", port[2], f(2, 2, 2, exp=1)))
    # plain L2 traffic (not an aggregation port): l2_forward unicast
    l2 = L.encode({"ethernet": {"dst_addr": L2_MAC, "src_addr": addrs[0].mac},
                   "ipv4": {"src_addr": addrs[0].ip, "dst_addr": 0x0A0000FD},
                   "udp": {"src_port": 1234, "dst_port": 80}}, np.zeros(L.elements, dtype=np.uint64)) \
        if not omni else L.encode({"ethernet": {"dst_addr": L2_MAC, "src_addr": addrs[0].mac},
                                   "ipv4": {"src_addr": addrs[0].ip, "dst_addr": 0x0A0000FD},
                                   "udp": {"src_port": 1234, "dst_port": 80}, "agg": {"flags": 1}},
                                  np.zeros(L.elements, dtype=np.uint64))
    s.append(("L2 unicast (l2_forward)", port[0], l2))
    return s


def _hex(b: bytes) -> str:
    return b.hex()


VARIANTS = {
    "hardened": ["--variant", "hardened"],
    "reference": ["--variant", "reference"],
    "omnireduce": ["--protocol", "omnireduce"],
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_bmv2_matches_model(variant, tmp_path):
    out = tmp_path / "build"
    r = _sh(sys.executable, "-m", "p4gen.cli", "build", "--target", "bmv2", "--slots", "16", "--elements", "8", "--workers", "4",
            *VARIANTS[variant], "--compile", "--no-cache", "--out", str(out), check=False)
    assert r.returncode == 0, f"p4gen build failed: {r.stdout}\n{r.stderr}"
    program = out / "program.json"
    assert program.exists(), f"no {program}; see {out / 'compile.log'}"
    plan = Plan.load(out / "plan.json")
    layout = W.FrameLayout(plan)

    addrs = [WorkerAddr(k, 0x020000000100 + k, 0x0A000000 + k, 40000 + k) for k in (1, 2, 3)]
    cfg = job_config(plan, JOB, addrs, slot_base=SLOT_BASE, slot_count=SLOT_COUNT, mgid=MGID, rid_base=RID_BASE)
    l2_extra = [("l2_forward", {"dst_addr": L2_MAC}, "l2_unicast", {"port": 3})]
    model = SwitchModel(plan)
    model.load_config(cfg)
    for t, m, a, p in l2_extra:
        model.insert(t, m, a, p)

    ns = Netns(3)
    log = tmp_path / "simple_switch.log"
    sw = Bmv2(ns, program, log, device_id=secrets.randbelow(1000))
    socks: dict[int, socket.socket] = {}
    try:
        ns.create()
        sw.start()
        cmds, assoc = cli_commands(plan, cfg, l2_extra)
        txt = sw.cli(cmds)
        handles = [int(h) for h in re.findall(r"node was created with handle (\d+)", txt)]
        assert handles == list(range(len(assoc))), f"unexpected multicast node handles {handles}:\n{txt[-2000:]}"
        txt2 = sw.cli(assoc)
        for c, t in ((cmds, txt), (assoc, txt2)):
            assert "Error" not in t and "Invalid" not in t, f"simple_switch_CLI rejected a command:\n{t[-3000:]}"
        socks = {k: ns.packet_socket(ns.host(k)) for k in (1, 2, 3)}
        time.sleep(0.2)
        drain(socks)
        l2_ok: set[bytes] = set()
        mismatches = []
        steps = scenario(plan, addrs)
        emitted = 0
        for label, port, frame in steps:
            if not is_agg(frame, layout):
                l2_ok.add(frame)
            want = sorted(model.process(frame, port))
            socks[port].send(frame)
            got = sorted(collect(socks, layout, l2_ok))
            emitted += len(got)
            if got != want:
                mismatches.append((label, port, frame, got, want))
        bm = read_counter(sw, model.stat_names)
        mc = model.counter_read()
        cdiff = {n: (bm[n], mc[n]) for n in model.stat_names if bm[n] != mc[n]}
        if mismatches or cdiff:
            lines = [f"{variant}: BMv2 and the model disagree (log: {log})"]
            for label, port, frame, got, want in mismatches:
                lines.append(f"step {label!r}: in port {port}, frame {_hex(frame)}")
                lines.append(f"  BMv2 : {[(p, _hex(b)) for p, b in got]}")
                lines.append(f"  model: {[(p, _hex(b)) for p, b in want]}")
            if cdiff:
                lines.append(f"stats (packets, bytes) as (BMv2, model): {cdiff}")
            pytest.fail("\n".join(lines))
        # not vacuous: results (multicast to all three ports, unicast) and the L2 frame came out
        assert emitted >= 8, f"only {emitted} frames came out of BMv2; see {log}"
        assert mc["multicast"][0] >= 2 and mc["unicast"][0] >= 1
    finally:
        for s in socks.values():
            s.close()
        sw.stop()
        ns.delete()
