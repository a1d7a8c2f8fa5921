"""Packet codec: the layout comes from plan["headers"] and nowhere else."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.errors import P4genError, PlanError
from p4gen.plan import Field, Plan
from p4gen.planner import make_plan
from p4gen.spec import make_spec
from p4gen.target import load_target

PLAN = make_plan(make_spec(slots=8, elements_per_packet=64), load_target("bmv2"))
PLAN2 = make_plan(make_spec(slots=8, elements_per_packet=32, value_width=16), load_target("tofino"))
SRC = P.endpoint("02:00:00:00:00:01", "10.0.0.1", 5000)
DST = P.endpoint("02:00:00:00:00:fe", "10.0.0.254", 48864)


def test_layout_follows_the_plan():
    for plan in (PLAN, PLAN2):
        L = W.FrameLayout(plan)
        wire = sum(x.bytes * x.repeat for x in plan.headers if not x.internal)
        assert L.frame_len == wire
        assert L.elements == plan.params.elements_per_packet
        assert L.passes == plan.header("data").repeat and L.value_width == plan.params.value_width
    # change the plan, the codec changes with it (a Plan made in Python: the loader refuses a header p4gen
    # would not write for this spec and target)
    data = PLAN.to_dict()
    agg = next(x for x in data["headers"] if x["name"] == "agg")
    agg["fields"].append({"name": "spare", "bits": 16})
    agg["bytes"] += 2
    with pytest.raises(PlanError, match=r"headers\.agg\.fields has 7 entries; p4gen writes 6"):
        Plan.from_dict(data)
    spare = PLAN.header("agg")
    spare = dataclasses.replace(spare, fields=spare.fields + (Field("spare", 16),), bytes=spare.bytes + 2)
    L = W.FrameLayout(dataclasses.replace(PLAN, headers=tuple(spare if h.name == "agg" else h for h in PLAN.headers)))
    assert L.values_offset == W.FrameLayout(PLAN).values_offset + 2
    assert "agg.spare" in L.slots


@given(tsi=st.integers(0, 2 ** 32 - 1), pool=st.integers(0, 2 ** 16 - 1), exp=st.integers(0, 255),
       job=st.integers(0, 255), seed=st.integers(0, 2 ** 32 - 1), plan=st.sampled_from([PLAN, PLAN2]))
def test_roundtrip(tsi, pool, exp, job, seed, plan):
    L = W.FrameLayout(plan)
    vals = np.random.default_rng(seed).integers(0, 2 ** L.value_width, L.elements)
    f = P.contribution_frame(L, SRC, DST, job=job, tsi=tsi, pool_index=pool, exponent=exp, values=vals)
    assert len(f) == L.frame_len
    r = P.parse_contribution(L, f)
    assert (r.job, r.tsi, r.pool_index, r.exponent) == (job, tsi, pool, exp)
    assert r.values.tolist() == vals.tolist()
    assert W.ipv4_checksum(f[L.ipv4_offset:L.ipv4_offset + L.ipv4_len]) == 0
    u = L.struct.unpack_from(f)
    assert L.get(u, "agg.tsi") == tsi and L.get(u, "ethernet.dst_addr") == DST.mac
    assert L.get(u, "agg.msg_type") == 0 and L.get(u, "ipv4.ihl") == 5


def test_scapy_agrees():
    scapy = pytest.importorskip("scapy.all")
    L = W.FrameLayout(PLAN)
    f = P.contribution_frame(L, SRC, DST, job=1, tsi=9, pool_index=3, exponent=127, values=np.arange(64))
    p = scapy.Ether(f)
    assert p[scapy.IP].src == "10.0.0.1" and p[scapy.UDP].dport == 48864
    q = p[scapy.IP].copy()
    del q.chksum
    assert p[scapy.IP].chksum == scapy.IP(bytes(q)).chksum
    assert p[scapy.IP].len == len(f) - 14 and p[scapy.UDP].len == len(f) - 34


def test_errors_are_typed():
    L = W.FrameLayout(PLAN)
    f = P.contribution_frame(L, SRC, DST, job=1, tsi=9, pool_index=3, exponent=127, values=np.arange(64))
    with pytest.raises(W.MalformedPacket):
        L.decode(f[:-1])
    with pytest.raises(W.MalformedPacket):
        L.decode(f[:10])
    with pytest.raises(W.ForeignPacket):
        L.decode(f[:12] + b"\x86\xdd" + f[14:])
    with pytest.raises(W.PacketError):
        P.parse_result(L, f)                       # a contribution is not a result
    res = bytearray(f)
    res[L.headers["udp"].offset:L.headers["udp"].offset + 4] = bytes.fromhex("bee01388")   # ports swapped
    with pytest.raises(W.MalformedPacket, match="not a result"):
        P.parse_result(L, bytes(res))              # right ports, but msg_type 0
    with pytest.raises(W.PacketError):
        P.contribution_frame(L, SRC, DST, job=256, tsi=0, pool_index=0, exponent=0, values=np.arange(64))
    with pytest.raises(W.PacketError):
        P.contribution_frame(L, SRC, DST, job=1, tsi=0, pool_index=0, exponent=0, values=np.arange(3))
    assert issubclass(W.PacketError, P4genError)
    assert W.mac("02:00:00:00:00:0a") == 0x02000000000A and W.ip("10.0.0.1") == 0x0A000001
