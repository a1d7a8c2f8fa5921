"""Path-complete differential: BMv2 and the model on sequences that take every reachable dt_* entry.

For SwitchML hardened and reference and for OmniReduce, the test builds and
compiles the bmv2 program, finds every reachable path through its dt_*
tables with ``pathgen.explore`` (the const entries are
``p4gen.decision.expand`` of the plan's decision, as the verifier encodes
them), runs each path's shortest sequence on a fresh slot, then adversarial
sequences (loss, duplication, reordering, replays, lost results) on two
more slots, and compares, frame by frame, what BMv2 puts on the wire with
what both model executions emit, then the stats counter and every register.

Entry coverage is measured twice and must agree: BMv2's log names the
table, key and action data of every dt_* table a frame applies; the model's
reference execution records the entry each step takes.  The test prints
the coverage of the reachable entries and lists the unreachable ones with
their reason.  It needs simple_switch, simple_switch_CLI and p4c-bm2-ss on
PATH and root; elsewhere it skips.  Run it under the net lock.
"""

from __future__ import annotations

import os
import secrets
import sys

import pytest

import pathgen as G
from bmv2_harness import (Bmv2, Netns, SwitchLog, _sh, cli_commands, collect, drain, missing_tools, model_registers,
                          read_counter, read_registers, register_mismatches)
from p4gen import decision
from p4gen import wire as W
from p4gen.plan import Plan
from p4gen.switch.model import SwitchModel
from test_dt_paths import PLANS, unreachable

_missing = missing_tools()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not on PATH (BMv2 path differential)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and AF_PACKET sockets"),
]

N = 3                       # workers of the job (the plan admits 4)
ADVERSARIAL_SLOTS = [60, 61]


def _names(keys) -> tuple[tuple[str, str], ...]:
    """The observations among a dt_* entry's keys, by name (the packet's copy, which only picks the
    register lanes an action runs on, is not one)."""
    names = {k: {c: v for v, c in decision.CODES[k].items()} for k in decision.CODES}
    return tuple((k, names[k][c]) for k, c in keys if k != "copy")


def _copy(keys) -> int | None:
    return next((c for k, c in keys if k == "copy"), None)


def _entry_args(plan: Plan) -> dict[tuple, tuple[str, tuple[int, ...]]]:
    """(table, named observations, copy) -> (action, args) of every const entry of the plan's dt_* tables."""
    out = {}
    for t in plan.tables:
        if not t.name.startswith("dt_"):
            continue
        names = [k.name for k in t.keys]
        for e in t.entries:
            keys = [(k, e.match[k]) for k in names]
            out[(t.name, _names(keys), _copy(keys))] = (e.action, tuple(e.args.values()))
    return out


@pytest.mark.parametrize("name", list(PLANS))
def test_bmv2_takes_every_reachable_entry_like_the_model(name, tmp_path, capsys):
    out = tmp_path / "build"
    flags = ["--protocol", "omnireduce"] if name == "omnireduce" else ["--variant", name]
    r = _sh(sys.executable, "-m", "p4gen.cli", "build", "--target", "bmv2", "--slots", "64", "--elements", "8",
            "--workers", "4", *flags, "--compile", "--no-cache", "--out", str(out), check=False)
    assert r.returncode == 0, f"p4gen build failed: {r.stdout}\n{r.stderr}"
    plan = Plan.load(out / "plan.json")
    layout = W.FrameLayout(plan)
    found = G.explore(plan, n=N)
    entries = G.const_entries(plan)
    un = unreachable(plan, found, name)
    assert all(un.values())
    args_of = _entry_args(plan)

    # the frames: one fresh slot per path, then the adversarial run
    frames = G.Frames(plan, G.workers(N), seed=11)
    steps: list[tuple[str, int, bytes]] = []
    for i, (path, seq) in enumerate(sorted(found.paths.items(), key=lambda kv: [G.entry_text(e) for e in kv[0]])):
        for pkt in seq:
            port, f = frames.frame(pkt, i)
            steps.append((f"path {i} slot {i}: {pkt}", port, f))
    assert len(found.paths) <= ADVERSARIAL_SLOTS[0]
    adv, kinds = G.adversarial(plan, ADVERSARIAL_SLOTS, n=N, steps=300, seed=5)
    steps += [(f"adversarial: {label}", port, f) for label, port, f in adv]

    cfg = G.job(plan, N)
    fast, ref = SwitchModel(plan), SwitchModel(plan, fast=False)
    for m in (fast, ref):
        m.load_config(cfg)
    ns = Netns(N)
    log = tmp_path / "simple_switch.log"
    sw = Bmv2(ns, out / "program.json", log, device_id=secrets.randbelow(1000))
    socks = {}
    try:
        ns.create()
        sw.start()
        cmds, assoc = cli_commands(plan, cfg, [])
        txt = sw.cli(cmds) + sw.cli(assoc)
        assert "Error" not in txt and "Invalid" not in txt, f"simple_switch_CLI rejected a command:\n{txt[-3000:]}"
        socks = {k: ns.packet_socket(ns.host(k)) for k in range(1, N + 1)}
        drain(socks)
        blog = SwitchLog(log)
        blog.skip()
        mismatches: list[str] = []
        bm_hit: set[G.Entry] = set()
        logged = False
        model_hit: set[G.Entry] = set()
        for label, port, frame in steps:
            ref.entry_trace = []
            want = sorted(fast.process(frame, port))
            assert sorted(ref.process(frame, port)) == want, f"{label}: the model's two executions disagree"
            socks[port].send(frame)
            got = sorted(collect(socks, layout, set()))
            taken = blog.entries(blog.new_text())
            bm_entries = []
            for table, keys, action, args in taken:
                e = (table, _names(keys))
                bm_entries.append(e)
                if args_of.get((*e, _copy(keys))) != (action, args):
                    mismatches.append(f"{label}: BMv2 took {G.entry_text(e)} with {action}{args}; the plan's entry "
                                      f"is {args_of.get((*e, _copy(keys)))}")
            if got != want:
                mismatches.append(f"{label}: port {port} frame {frame.hex()}\n  BMv2 : "
                                  f"{[(p, b.hex()) for p, b in got]}\n  model: {[(p, b.hex()) for p, b in want]}")
            logged = logged or bool(taken)
            if logged and bm_entries != ref.entry_trace:
                mismatches.append(f"{label}: BMv2 entries {[G.entry_text(e) for e in bm_entries]}, model "
                                  f"{[G.entry_text(e) for e in ref.entry_trace]}")
            bm_hit.update(bm_entries)
            model_hit.update(ref.entry_trace)
        bm_stats = read_counter(sw, fast.stat_names)
        cdiff = {k: (bm_stats[k], v) for k, v in fast.counter_read().items() if bm_stats[k] != v}
        if cdiff:
            mismatches.append(f"stats (packets, bytes) as (BMv2, model): {cdiff}")
        bad_regs, saturated = register_mismatches(read_registers(sw, plan), model_registers(fast, plan))
        mismatches += bad_regs
        assert not mismatches, f"{name}: {len(mismatches)} mismatches (log {log}):\n" + "\n".join(mismatches[:20])
    finally:
        for s in socks.values():
            s.close()
        sw.stop()
        ns.delete()

    if not logged:
        pytest.skip(f"{name}: BMv2 agreed with the model on {len(steps)} frames, the counters and the registers, "
                    f"but this simple_switch logs no table lookups (built with --disable-logging-macros), so the "
                    f"entry coverage, which is read from its log, was not measured")
    reachable = [e for e in entries if e not in un]
    missed = [G.entry_text(e) for e in reachable if e not in bm_hit]
    with capsys.disabled():
        print(f"\n{G.coverage_line(f'{name} (BMv2)', bm_hit, entries, list(un))}; {len(steps)} frames "
              f"({len(found.paths)} paths, adversarial: {dict(kinds)}), 0 mismatches in frames, entries, "
              f"counters and {len(plan.registers)} registers ({saturated} register entries at or above "
              f"2**63 - 1, which the Thrift read saturates)")
        for e, why in un.items():
            print(f"  unreachable {G.entry_text(e)}: {why}")
    assert bm_hit == model_hit
    assert not missed, f"reachable entries BMv2 never took: {missed}"
    assert not (bm_hit - set(reachable)), "BMv2 took an entry argued unreachable"
