"""Packet fuzzing and spoofed workers on BMv2: the model fuzz suites' runs through a real simple_switch.

The programs are p4gen's bmv2 builds of the plans of ``test_fuzz_packets``
(SwitchML hardened and reference, OmniReduce), compiled with p4c-bm2-ss and
run in simple_switch inside a namespace of their own, in lockstep with the
model (:mod:`bmv2_lockstep`): every frame's outputs and the counter it lands
in, and at the end of every example each register, must be the model's.

* Fuzzed sequences of valid and hostile frames, from the strategies of the
  model suites (:func:`fuzz_frames.sequence_strategy`), with flooding on:
  BMv2, ``process`` and ``process_batch`` agree, and each hostile frame
  whose fate does not depend on the slot's state lands in its counter.
* A real job of worker emulators runs on BMv2 while hostile frames arrive
  between its packets (``test_fuzz_packets.junk_beside_a_job``): its sums
  stay exact and each hostile frame lands in its counter.
* Spoofed workers: a registered worker's address from another port,
  another job's worker, an unregistered address.  Each is dropped as
  ``drop_unknown`` and changes no register, and the job's sum is exact.
* The reference variant's hazard: one replayed frame, or one with its copy
  bit flipped, from a registered worker corrupts a later sum; the hardened
  variant's sum stays exact (``test_fuzz_packets.hazard``).

Runts are left out: a veth refuses frames shorter than an Ethernet header.
Needs p4c-bm2-ss, simple_switch and simple_switch_CLI on PATH, and root.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fuzz_frames as F
import test_fuzz_packets as FP
from bmv2_harness import build_program, missing_tools, read_registers
from bmv2_lockstep import Lockstep
from p4gen import wire as W
from p4gen.host import packet as P
from p4gen.switch.model import SwitchModel, WorkerAddr

_missing = missing_tools()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not on PATH (BMv2 fuzz and spoof tests)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and AF_PACKET sockets"),
]

# switch ports: the two jobs of test_fuzz_packets (1..5, 6 for frames on a port no worker has) and
# aggnet's job (10..13, 14 likewise)
PORTS = list(range(1, 7)) + list(range(10, 15))
FUZZ_PORTS = list(range(1, 7))
# examples per variant, whatever the Hypothesis profile: BMv2 takes a few ms per frame
SEQUENCES = 25
JOBS = 20
BMV2_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def bmv2(request, tmp_path_factory):
    """(variant, a Lockstep on its program); one simple_switch per variant for the whole module."""
    variant = request.param
    work = tmp_path_factory.mktemp(f"bmv2-{variant}")
    program = build_program(FP.PLANS[variant], work / "build")
    with Lockstep(FP.PLANS[variant], program, work, PORTS) as sw:
        yield variant, sw
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nBMv2 {variant}: {sw.total} frames in {sw.runs} runs; every frame's outputs and counter, and "
              f"every run's registers, were the model's")


def _flooding(variant: str) -> dict:
    """The two jobs of test_fuzz_packets, with a flood group per port (every other fuzzed port)."""
    cfg = FP.config(variant)
    base = int(FP.PLANS[variant].params.flood_group_base)
    for p in FUZZ_PORTS:
        cfg["groups"][str(base + p)] = [[q, 0] for q in FUZZ_PORTS if q != p]
    return cfg


# ---------------------------------------------------------------- fuzzed sequences
@pytest.mark.parametrize("bmv2", FP.VARIANTS, indirect=True)
@settings(max_examples=SEQUENCES, **BMV2_SETTINGS)
@given(seq=F.sequence_strategy(F.on_the_wire(list(F.KINDS))))
def test_bmv2_agrees_with_the_model_on_fuzzed_sequences(bmv2, seq):
    variant, sw = bmv2
    cfg = _flooding(variant)
    sw.configure(cfg)
    frames = F.sequence(FP._target(variant), *seq)
    outs = []
    for frame, port, kind in frames:
        before = sw.stats
        outs.append(sw.process(frame, port))          # raises where BMv2 and the model disagree
        delta = {k: v - before[k] for k, v in sw.stats.items() if v != before[k]}
        assert sum(delta.values()) == 1, (kind, delta)
        if kind is not None and kind != "replay":     # (a replay's fate depends on the slot's state)
            assert set(delta) <= F.KINDS[kind], (kind, delta)
    sw.check_state()
    batch = SwitchModel(FP.PLANS[variant])
    batch.load_config(cfg)
    assert [sorted(o) for o in batch.process_batch([(f, p) for f, p, _k in frames])] == [sorted(o) for o in outs]


# ---------------------------------------------------------------- a real job beside hostile frames
@pytest.mark.parametrize("bmv2", ["hardened", "reference"], indirect=True)
@settings(max_examples=JOBS, **BMV2_SETTINGS)
@given(shape=F.JOB_SHAPE, data=st.data())
def test_real_job_on_bmv2_stays_exact_beside_hostile_frames(bmv2, shape, data):
    variant, sw = bmv2
    items = data.draw(F.items(F.on_the_wire(F.kinds_for(variant)), max_size=30))
    FP.junk_beside_a_job(variant, *shape, items, switch=lambda net: sw.configure(net.config))
    sw.check_state()


# ---------------------------------------------------------------- spoofed workers
def _spoofs(t: F.Target, w: WorkerAddr, slot: int, rng: random.Random) -> list[tuple[str, int, bytes]]:
    """(what, ingress port, frame) of every way to claim to be one of job JOB's workers on ``slot``."""
    me = P.Endpoint(w.mac, w.ip, w.udp_port)
    out = [(f"{w} from port {p}", p, F.contribution(t, rng, w, slot=slot, copy=0, tsi=slot))
           for p in FUZZ_PORTS if p != w.port]
    for o in t.other_workers:       # another job's worker, claiming this job from its own port
        out.append((f"job {t.other_job}'s {o} claiming job {t.job}", o.port,
                    F.contribution(t, rng, o, slot=slot, copy=0, tsi=slot, job=t.job)))
    out.append((f"{w} claiming job {t.other_job}", w.port,
                F.contribution(t, rng, w, slot=slot + 4, copy=0, tsi=slot, job=t.other_job)))
    for what, src in (("another UDP port", P.Endpoint(me.mac, me.ip, me.port + 7)),
                      ("another IPv4 source", P.Endpoint(me.mac, me.ip ^ 0x100, me.port)),
                      ("an unregistered address", P.Endpoint(0x02FFFF000001, 0x0A0A0A0A, 47000))):
        out.append((f"{w} from {what}", w.port, F.contribution(t, rng, w, slot=slot, copy=0, tsi=slot, src=src)))
    return out


@pytest.mark.parametrize("bmv2", FP.VARIANTS, indirect=True)
def test_spoofed_workers_are_dropped_and_counted_on_bmv2(bmv2):
    """On each of slots 0..2 worker 0 contributes, every spoof claiming one of the job's workers follows
    (each: no output, one more ``drop_unknown``, no register changed), then workers 1 and 2 complete the
    slot, and the result is the exact sum of the three workers' values."""
    variant, sw = bmv2
    sw.configure(FP.config(variant))
    t = FP._target(variant)
    L = W.FrameLayout(FP.PLANS[variant])
    rng = random.Random(3)
    spoofed = 0
    for slot in range(3):
        vals = [np.array([rng.randrange(1 << 20) for _ in range(L.elements)], dtype=np.int64) for _ in t.workers]

        def send(i):
            kw = {"next": 0xFFFFFFFF} if L.omni else {}
            w = t.workers[i]
            return sw.process(P.contribution_frame(L, P.Endpoint(w.mac, w.ip, w.udp_port), F.SWITCH, job=t.job,
                                                   tsi=slot, pool_index=slot, exponent=0, values=vals[i], **kw),
                              w.port)

        assert send(0) == []
        for w in t.workers:
            for what, port, frame in _spoofs(t, w, slot, rng):
                before, regs = sw.stats, read_registers(sw.cli, sw.plan)
                assert sw.process(frame, port) == [], what
                delta = {k: v - before[k] for k, v in sw.stats.items() if v != before[k]}
                assert delta == {"drop_unknown": 1}, (what, delta)
                assert read_registers(sw.cli, sw.plan) == regs, f"{what} changed a register"
                spoofed += 1
        assert send(1) == []
        out = send(2)
        assert sorted(p for p, _f in out) == sorted(w.port for w in t.workers)
        for _p, frame in out:
            assert P.parse_result(L, frame).values.astype(np.int64).tolist() == sum(vals).tolist()
    assert sw.stats["drop_unknown"] == spoofed and sw.stats["multicast"] == 3
    sw.check_state()


# ---------------------------------------------------------------- the reference variant's hazard
@pytest.mark.parametrize("bad", ["replay", "flipped_copy"])
@pytest.mark.parametrize("bmv2", ["reference", "hardened"], indirect=True)
def test_one_bad_frame_from_a_registered_worker_on_bmv2(bmv2, bad):
    """Reference: chunk 2 sums to 1 + 2 (replay) or 3 + 2 (flipped copy bit), not 2 + 2; hardened: 2 + 2."""
    variant, sw = bmv2
    FP.check_hazard(variant, bad, *FP.hazard(variant, bad, switch=sw.configure))
    sw.check_state()
