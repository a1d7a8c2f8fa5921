"""Layout search: the cost model's figures, the exact inner placement, the outer optimum against brute
force, every returned layout built, re-fitted and verified, multi-job splits and the CLI's messages."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import tomllib
from pathlib import Path

import pytest

from p4gen import protocols
from p4gen.build import compile_program, find_compiler
from p4gen.cli import main
from p4gen.jobfile import parse_job
from p4gen.emit.p4 import render_p4
from p4gen.emit.p4info import render_p4info
from p4gen.errors import InfeasibleError
from p4gen.planner import placement as inner
from p4gen.layout.cost import Geometry, Workload, predict
from p4gen.layout.job_split import Job, equal_split, plan_jobs
from p4gen.layout.search import SearchContext, largest_slots, search, shapes
from p4gen.pass_shape import PassShape
from p4gen.planner import fit, make_plan
from p4gen.registers import Geometry as RegisterGeometry, register_arrays
from p4gen.spec import make_spec
from p4gen.target import profile_from_mapping, load_target

HERE = Path(__file__).resolve().parent


def layout_registers(spec, variant, slots, per_pass, lanes, pass_bits, pipes=1):
    """The register arrays of a layout (the planner's derivation from the variant's table's steps)."""
    g = RegisterGeometry(slots, spec.max_workers, spec.value_width, per_pass, lanes, pass_bits, pipes)
    return register_arrays(protocols.decision_table(variant, spec.protocol), g)


EXAMPLES = HERE.parent / "docs" / "examples"

# a small TNA-like profile: few stages, two ALUs, tiny SRAM blocks, so brute force can cover it
MINI = profile_from_mapping({
    "name": "mini", "arch": "tna", "description": "small test profile", "pipes": 2, "stages": 6,
    "alus_per_stage": 2, "alu_width_bits": 64, "lanes_per_register": 2, "sram_blocks_per_stage": 6,
    "sram_block_words": 16, "sram_block_width_bits": 128, "register_spare_blocks": 1, "phv_bits": 1800,
    "tagalong_bits": 0, "max_passes": 2, "mtu_bytes": 200, "aggregate_rate_gbps": 1600.0, "port_gbps": 100.0,
    "recirc_gbps": 100.0, "pass_latency_ns": 1000.0}, "test")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


# -- the cost model ------------------------------------------------------------------------------------
def test_link_bound_prediction_by_hand():
    prof = dataclasses.replace(load_target("bmv2"), packet_rate_kpps=None)
    wl = Workload(4, 10.0, 20.0, 1 << 20)
    p = predict(prof, wl, Geometry("switchml", 256, 1, "resident", 1, 32, 64))
    wire = 14 + 20 + 8 + 9 + 1024 + 24                 # headers, payload, Ethernet framing
    cycle = 20e-6 + 2 * wire * 8 / 10e9
    assert p.frame_bytes == wire - 24 and p.chunks == 4096 and p.bound == "link"
    assert p.time_s == pytest.approx(cycle + 4095 * wire * 8 / 10e9, rel=1e-12)
    assert p.window_saturates_at == 25                 # 1.137 M chunks/s x 21.76 us = 24.7 chunks in flight


def test_window_bound_and_saturation():
    prof = load_target("tofino")
    wl = Workload(8, 100.0, 50.0, 1 << 24)
    geo = Geometry("switchml", 64, 1, "resident", 1, 32, 8)
    p = predict(prof, wl, geo)
    assert p.bound == "window" and p.rate == pytest.approx(8 / (p.cycle_us * 1e-6))
    sat = p.window_saturates_at
    at = predict(prof, wl, dataclasses.replace(geo, slots=sat))
    below = predict(prof, wl, dataclasses.replace(geo, slots=sat - 1))
    assert at.bound == "link" and below.bound == "window" and below.time_s > at.time_s
    assert predict(prof, wl, dataclasses.replace(geo, slots=4 * sat)).time_s == at.time_s


def test_recirculation_in_one_pipe_costs_what_folding_avoids():
    prof = load_target("tofino")
    wl = Workload(8, 100.0, 10.0, 1 << 24)
    same = predict(prof, wl, Geometry("switchml", 256, 4, "stream", 1, 32, 4096))
    folded = predict(prof, wl, Geometry("switchml", 256, 4, "stream", 4, 32, 4096))
    # 8 workers x 3 shrinking extra passes + 3 growing harvest passes (13-byte pass header) through one port
    per_chunk = 8 * sum(51 + 13 + k * 256 for k in (3, 2, 1)) + sum(51 + 13 + k * 256 for k in (1, 2, 3))
    assert same.bound == "recirculation" and same.rate == pytest.approx(100e9 / (8 * per_chunk))
    assert folded.bound == "link" and folded.time_s < same.time_s / 10


def test_sparse_rounds_follow_the_union_of_blocks():
    prof = load_target("tofino")
    wl = Workload(4, 100.0, 10.0, 64 * 10000, density=0.1)
    p = predict(prof, wl, Geometry("omnireduce", 64, 1, "resident", 1, 32, 16))
    assert p.rounds == 3439 + 16        # blocks some worker holds: (1 - 0.9 ** 4) x 10000; one discovery round a stream


# -- the inner level: exact, against brute force and Z3 ----------------------------------------------------
def _brute_stages(profile, regs, tm) -> int | None:
    stages = range(1, profile.stages - tm.tail)
    best = None
    roles = sorted({r["role"] for r in regs})
    for combo in itertools.product(stages, repeat=len(regs)):
        st = {r["name"]: s for r, s in zip(regs, combo)}
        by_role = {ro: [st[r["name"]] for r in regs if r["role"] == ro] for ro in roles}
        if any(ro != "values" and len(set(v)) > 1 for ro, v in by_role.items()):
            continue
        if any(min(v) < tm.first(ro) for ro, v in by_role.items()):
            continue
        if any(min(by_role[ro]) < max(by_role[d]) + tm.lat(d) + (tm.values_gap if ro == "values" else 0)
               for ro, ds in tm.deps.items() if ro in by_role for d in ds if d in by_role):
            continue
        # the packet counter's SRAM: in the first stage the values may sit in, when some do
        avail = {ro: max(v) + tm.lat(ro) for ro, v in by_role.items() if ro != "values"}
        vfirst = tm.values_first(avail) if "values" in by_role else None
        ok = True
        for s in stages:
            here = [r for r in regs if st[r["name"]] == s]
            counter = tm.counter_blocks if s == vfirst and any(r["role"] == "values" for r in here) else 0
            if (len(here) > profile.alus_per_stage
                    or sum(inner.blocks(profile, r) for r in here) + counter > profile.register_sram_limit):
                ok = False
                break
        if ok:
            used = max(combo) + 1
            best = used if best is None else min(best, used)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("timed", [False, True])
@pytest.mark.parametrize("variant,values,slots", [("hardened", 1, 4), ("hardened", 3, 8), ("hardened", 3, 20),
                                                  ("reference", 2, 30), ("reference", 4, 8), ("hardened", 2, 60)])
def test_inner_placement_is_the_brute_force_minimum(variant, values, slots, timed):
    """The placement search and Z3 against every placement, with each result one stage after its step, and
    (``timed``) with a Tofino-like timing: a first step that waits a stage, a result a gateway computes
    from a returned word (two stages), the values a stage after their table, and the packet counter's SRAM
    in the values' first stage."""
    spec = make_spec(slots=slots, variant=variant, max_workers=32)
    regs = layout_registers(spec, variant, slots, 2 * values, 2, 0)
    table = protocols.decision_table(variant)
    prof = dataclasses.replace(MINI, stages=8) if timed else MINI
    deps = inner.timing(prof, table, 32, 32)
    if timed:
        first = table.steps[0].role
        deps = inner.Timing(deps.deps, {first: 2}, {"bitmap": 2}, values_gap=1, counter_blocks=1)
    found = inner.place(prof, regs, deps)
    brute = _brute_stages(prof, regs, deps)
    assert (found.stages_used if found else None) == brute
    if found:
        assert inner.certify(prof, regs, deps, found.stages_used)
        assert not inner.certify(prof, regs, deps, found.stages_used - 1)


@pytest.mark.slow
def test_the_packet_counter_takes_sram_in_the_values_first_stage_only():
    # 3 value arrays of 3 blocks, stages of 6 blocks and 2 ALUs: the first value stage holds one beside the
    # counter's block, the next stage two, so the program ends in stage 7, as brute force finds
    spec = make_spec(slots=20, variant="reference", max_workers=32)
    regs = layout_registers(spec, "reference", 20, 6, 2, 0)
    prof = dataclasses.replace(MINI, stages=9)
    table = protocols.decision_table("reference")
    tm = inner.Timing(inner.timing(prof, table, 32, 32).deps, {table.steps[0].role: 2}, {"bitmap": 2},
                      values_gap=1, counter_blocks=1)
    found = inner.place(prof, regs, tm)
    assert sorted(s for n, s in found.stage_of.items() if n.startswith("values")) == [6, 7, 7]
    assert found.stages_used == _brute_stages(prof, regs, tm) == 8


def test_the_planner_spreads_arrays_the_earliest_placement_cannot_fit():
    # 4 value arrays whose SRAM fills half a stage each: the earliest placement puts 4 in one stage; the one
    # placement function (its optimiser) spreads them, and a layout given that placement builds the same
    prof = dataclasses.replace(MINI, stages=8, alus_per_stage=4)
    spec = make_spec(slots=40, max_workers=32, elements_per_packet=8)
    regs = layout_registers(spec, "hardened", 40, 8, 2, 0)
    found = inner.place(prof, regs, inner.timing(prof, protocols.decision_table("hardened"), 32, 32))
    assert found is not None
    lay = fit(spec, prof)
    assert {r.name: r.stage for r in lay.registers} == found.stage_of
    assert max(r.stage for r in lay.registers) + 1 == found.stages_used
    given = fit(spec, prof, PassShape(1, placement=found.as_tuple()))
    assert given.registers == lay.registers


# -- the outer level: the optimum against brute force over every shape and slot count ------------------------
@pytest.mark.parametrize("rtt", [2.0, 40.0])
def test_search_optimum_equals_brute_force(rtt):
    wl = Workload(4, 100.0, rtt, 1 << 16)
    res = search(MINI, wl, certify=False)
    ctx = SearchContext(MINI, wl, make_spec(variant="hardened", max_workers=32, slots=1, elements_per_packet=2))
    best = None
    for e, p, mode, pipes, w in shapes(ctx, [32]):
        spec = make_spec(variant="hardened", max_workers=32, slots=1, elements_per_packet=e, value_width=w)
        shape = PassShape(p, mode, pipes)
        top = largest_slots(ctx, spec, shape)
        for s in range(1, top + 1):
            t = predict(MINI, wl, Geometry("switchml", e, p, mode, pipes, w, s)).time_s
            best = t if best is None else min(best, t)
        # one slot more than the bisection's answer does not fit
        regs = layout_registers(spec, "hardened", top + 1, e // p, 2, (p - 1).bit_length(), pipes)
        assert inner.place(MINI, regs, ctx.timing(shape)) is None
    assert res.best.prediction.time_s == pytest.approx(best, rel=1e-12)


# -- every layout plan returns builds, fits and verifies ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("target,gbps", [("tofino", 100.0), ("tofino2", 400.0), ("bmv2", 1.0)])
def test_returned_layouts_build_fit_and_verify(target, gbps):
    from p4gen.verify.runner import run

    prof = load_target(target)
    res = search(prof, Workload(4, gbps, 10.0, 1 << 22), max_workers=4, certify=target == "tofino")
    assert res.certified in (True, None)
    for i, c in enumerate([res.best] + res.runners_up):
        fit(c.spec, prof, c.shape)                      # the planner's fit pass re-checks it
        plan = make_plan(c.spec, prof, c.shape)
        assert plan.params.passes == c.shape.passes and plan.params.pass_pipes == c.shape.pipes
        assert plan.params.pass_mode == (c.shape.mode if c.shape.passes > 1 else "resident")
        assert "RegisterAction" in render_p4(plan) or target == "bmv2"
        render_p4info(plan)
        if i == 0:
            assert run(plan, workers=[2], out=lambda s: None).ok
            if prof.is_tna and find_compiler(prof.arch, backend=False) is not None and os.environ.get("P4GEN_TNA_INCLUDE"):
                compile_program(prof.arch, render_p4(plan).encode(), backend=False)      # p4test accepts it (the bmv2 goldens compile)


def test_more_values_than_a_pass_holds_are_streamed_on_tofino1():
    # 16 hardened values a pass; 64 in 4 passes: resident passes would need a stage after the values to rotate
    # them (12 arrays a pass), so the passes are streamed (each parses its own 16)
    plan = make_plan(make_spec(elements_per_packet=64), load_target("tofino"))
    assert plan.params.passes == 4 and plan.params.pass_mode == "stream"
    assert plan.resources.phv_bits_used <= 6144
    text = render_p4(plan)
    assert "data_h data1;" not in text and "PHASE_HARVEST: parse_harvest;" in text
    # SwitchML's 256 values in 4 passes are 64 a pass: more than a Tofino1 pass of p4gen's program holds
    with pytest.raises(InfeasibleError, match="at most 16 values"):
        make_plan(make_spec(elements_per_packet=256, variant="hardened"), load_target("tofino"))


# -- the CLI -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_plan_prints_best_references_and_builds_it(tmp_path, capsys):
    out = tmp_path / "tofino.json"
    assert main(["plan", "--target", "tofino", "--workers", "8", "--link-gbps", "100", "--rtt-us", "10",
                 "--size", "256MiB", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "reference: p4gen default (16 per packet, 1 pass)" in text and "reference: SwitchML 256 in 4 passes" in text
    assert "Z3 Optimize confirms that 12 stages is the fewest" in text
    best = next(ln for ln in text.splitlines() if ln.startswith("best "))
    assert best.split()[1:6] == ["64", "4", "7", "stream", "4"]
    doc = json.loads(out.read_text())
    assert doc["shape"]["passes"] == 4 and doc["spec"]["elements_per_packet"] == 64
    assert main(["build", "--layout", str(out), "--out", str(tmp_path / "b")]) == 0
    plan = json.loads((tmp_path / "b" / "plan.json").read_text())
    assert plan["params"]["pass_mode"] == "stream" and plan["params"]["pass_pipes"] == 4
    assert {r["name"]: r["stage"] for r in plan["registers"]} == doc["shape"]["placement"]


def test_build_layout_best(tmp_path, capsys):
    assert main(["build", "--layout", "best", "--target", "bmv2", "--workers", "4", "--link-gbps", "1",
                 "--rtt-us", "100", "--size", "1MiB", "--out", str(tmp_path / "b")]) == 0
    assert "elements_per_packet=364" in capsys.readouterr().out


BAD = [
    (["plan", "--target", "tofino", "--workers", "20", "--link-gbps", "100", "--rtt-us", "10", "--size", "1MiB"],
     "workers=20 need 20 ports in one pipe (a job's registers live in one pipe); tofino has 16 ports of 100 Gb/s per pipe"),
    (["plan", "--target", "tofino", "--workers", "4", "--link-gbps", "200", "--rtt-us", "10", "--size", "1MiB"],
     "link_gbps=200 exceeds tofino's fastest port (100 Gb/s)"),
    pytest.param(["plan", "--target", "tofino", "--workers", "8", "--link-gbps", "100", "--rtt-us", "5000", "--size",
                  "256MiB", "--fill-rtt"],
                 "filling a 5000 us RTT at 100 Gb/s needs a window of 234369 slots even with the closest layout (48 "
                 "elements in 4 pass(es) over 4 pipe(s)); tofino's SRAM (48 blocks per stage, 12 stages) fits 26624",
                 marks=pytest.mark.slow),                         # a whole layout search
    (["plan", "--target", "tofino", "--workers", "4", "--rtt-us", "10"], "--link-gbps --size are needed to plan a layout"),
    (["plan", "--target", "tofino", "--workers", "4", "--link-gbps", "1", "--rtt-us", "1", "--size", "12 MB"],
     "--size '12 MB' must be a number of elements or a size such as 256MiB"),
    (["plan", "--target", "tofino", "--workers", "4", "--link-gbps", "1", "--rtt-us", "1", "--size", "1MiB",
      "--objective", "fast"], "objective='fast' must be one of time, slots, stages"),
    (["plan", "--target", "tofino", "--workers", "4", "--link-gbps", "1", "--rtt-us", "1", "--size", "1MiB",
      "--variant", "auto"], "variant='auto': a layout search takes one variant, hardened or reference"),
    (["plan", "--target", "tofino", "--jobs", "nope.toml"], "jobs file 'nope.toml' does not exist"),
    (["build", "--layout", "missing.json"], "layout file 'missing.json' does not exist (write one with p4gen plan)"),
    (["build", "--layout", "best", "--target", "bmv2", "--workers", "4"],
     "--link-gbps --rtt-us --size are needed to plan a layout"),
]


@pytest.mark.parametrize("args,error", BAD, ids=[" ".join((c.values if hasattr(c, "values") else c)[0][:4]) + "..."
                                                  for c in BAD])
def test_bad_requests_get_one_line(args, error, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 1
    *steps, last = capsys.readouterr().err.splitlines()
    assert last == f"p4gen: error: {error}"
    assert all(re.match(r"plan \+[0-9.]+ s: ", s) for s in steps), steps   # a refusal found by the search follows its progress


def _layout_file(tmp_path, **change) -> Path:
    res = search(load_target("tofino"), Workload(4, 100.0, 10.0, 1 << 20), certify=False)
    from p4gen.layout.layoutfile import layout_document

    doc = layout_document("tofino", res.best.spec, res.best.shape)
    for k, v in change.items():
        doc["shape" if k in ("placement", "passes", "pipes", "mode") else k][k] = v
    p = tmp_path / "l.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.slow
def test_tampered_layouts_are_refused_by_the_fit_pass(tmp_path, capsys):
    p = _layout_file(tmp_path)
    doc = json.loads(p.read_text())
    place = doc["shape"]["placement"]
    cases = [
        ({**place, "worker_count": 1}, "counter in stage 1 keys on the result of bitmap in stage 4; it must sit in stage 6 "
                                       "or later"),
        ({**place, "values0": place["values4"], "values1": place["values4"]},
         f"stage {place['values4']} holds 6 register arrays; tofino has 4 stateful ALUs per stage"),
        ({k: v for k, v in place.items() if k != "exponent"}, "the placement leaves register 'exponent' without a stage"),
        ({**place, "values0": 12}, "register values0 in stage 12; tofino has stages 1..11 for registers"),
    ]
    for placement, error in cases:
        doc["shape"]["placement"] = placement
        p.write_text(json.dumps(doc))
        assert main(["build", "--layout", str(p), "--out", str(tmp_path / "o")]) == 1
        assert capsys.readouterr().err == f"p4gen: error: {error}\n"
    doc["shape"] = {"passes": 4, "mode": "stream", "pipes": 2}
    p.write_text(json.dumps(doc))
    assert main(["build", "--layout", str(p), "--out", str(tmp_path / "o")]) == 1
    assert "pipes=2 must be 1 (recirculation in one pipe) or passes=4 (one pipe per pass)" in capsys.readouterr().err
    assert main(["build", "--layout", str(p), "--target", "bmv2"]) == 1
    assert capsys.readouterr().err.endswith("was planned for tofino, not --target bmv2\n")
    assert main(["build", "--layout", str(p), "--slots", "9"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: --layout {p} fixes the spec; drop --slots\n"


# -- several jobs --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_three_jobs_beat_the_equal_split_and_emit_valid_job_files(tmp_path, capsys):
    out = tmp_path / "jobs"
    assert main(["plan", "--target", "tofino", "--jobs", str(EXAMPLES / "three-jobs.toml"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    m = re.search(r"makespan: ([0-9.]+) ms against ([0-9.]+) ms with an equal static split", text)
    assert m and float(m.group(1)) < 0.5 * float(m.group(2))
    doc = tomllib.loads((EXAMPLES / "three-jobs.toml").read_text())
    assert main(["build", "--layout", str(out / "layout.json"), "--out", str(tmp_path / "b")]) == 0
    from p4gen.plan import Plan

    plan = Plan.load(tmp_path / "b")
    ranges = []
    for j in doc["jobs"]:
        job = parse_job(tomllib.loads((out / f"job-{j['name']}.toml").read_text()), plan, j["name"])
        assert len(job.workers) == j["workers"]
        ranges.append((job.slot_base, job.slot_base + job.slot_count))
    ranges.sort()
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])) and ranges[-1][1] <= plan.params.slots


def test_split_optimum_against_brute_force():
    prof = dataclasses.replace(MINI, pipes=1)
    jobs = [Job("a", Workload(2, 100.0, 60.0, 1 << 14)), Job("b", Workload(2, 100.0, 5.0, 1 << 12)),
            Job("c", Workload(3, 100.0, 30.0, 1 << 13))]
    for objective in ("makespan", "sum"):
        split, _ = plan_jobs(prof, jobs, objective)
        from p4gen.layout.job_split import _JobModel, _floors, _time

        models = [_JobModel(prof, j, split.spec, split.shape, split.spec.slots) for j in jobs]
        floors = _floors(models, split.shape, [0, 0, 0])
        total = split.spec.slots
        agg = max if objective == "makespan" else sum
        brute = min(agg([_time(m, f, s) for m, f, s in zip(models, floors, (a, b, total - a - b))])
                    for a in range(1, total - 1) for b in range(1, total - a))
        same_layout = agg([p.time_s for p in split.jobs])
        assert same_layout == pytest.approx(brute, rel=1e-9)
        assert split.value <= equal_split(prof, jobs, split).value


BAD_JOBS = [
    ('[[jobs]]\nname = "a"\nworkers = 4\nlink_gbps = 100\nrtt_us = 10\n', "j.toml: jobs[0].size is missing"),
    ('[[jobs]]\nname = "a b"\nworkers = 4\nlink_gbps = 100\nrtt_us = 10\nsize = 1\n',
     "j.toml: jobs[0].name='a b' must be a word of at most 64 letters, digits, - and _"),
    ('[[jobs]]\nname = "a"\nworkers = 1\nlink_gbps = 100\nrtt_us = 10\nsize = 1\n',
     "j.toml: jobs[0]: workers=1 must be an integer in 2..256"),
    ('[[jobs]]\nname = "a"\nworkers = 4\nlink_gbps = 100\nrtt_us = 10\nsize = "1MiB"\n',
     "a jobs file needs at least 2 jobs; it has 1 (plan one job with --workers)"),
    ('[[jobs]]\nname = "a"\nworkers = 4\nlink_gbps = 100\nrtt_us = 10\nsize = 9\n[[jobs]]\nname = "a"\n'
     'workers = 4\nlink_gbps = 100\nrtt_us = 10\nsize = 9\n', "j.toml: jobs[1].name='a' repeats an earlier job's"),
    ('speed = 3\n', "j.toml: unknown key 'speed'; known keys: jobs, switch_mac"),
]
# each value a job's field may wrongly hold, checked by type and range (a traceback or a silent coercion before)
_JOB = '[[jobs]]\nname = "a"\nworkers = 4\nlink_gbps = 100\nrtt_us = 10\nsize = 9\n'
_TWO = '[[jobs]]\nname = "b"\nworkers = 2\nlink_gbps = 100\nrtt_us = 10\nsize = 9\n'
_HOSTS = ('[[jobs.hosts]]\nport = 1\nmac = "02:00:00:00:00:01"\nip = "10.0.0.1"\nudp_port = 1\n'
          '[[jobs.hosts]]\nport = {port2}\nmac = "02:00:00:00:00:02"\nip = "{ip2}"\nudp_port = 2\n')
BAD_JOBS += [(_JOB + extra + "\n" + _TWO, "j.toml: jobs[0]: " + error) for extra, error in [
    ('density = "x"', "density='x' must be a number in (0, 1]"),
    ("density = true", "density=True must be a number in (0, 1]"),
    ("density = inf", "density=inf must be a number in (0, 1]"),
    ("density = nan", "density=nan must be a number in (0, 1]"),
    ("framing_bytes = 1.5", "framing_bytes=1.5 must be an integer in 0..65535"),
    ('framing_bytes = "a"', "framing_bytes='a' must be an integer in 0..65535"),
    ("framing_bytes = 100000000000000000000", "framing_bytes=100000000000000000000 must be an integer in 0..65535"),
    ('ports_per_pipe = "x"', "ports_per_pipe='x' must be an integer in 1..512"),
]] + [
    (_JOB.replace("link_gbps = 100", "link_gbps = inf") + _TWO, "j.toml: jobs[0]: link_gbps=inf must be a number in "
                                                                "(0, 100000]"),
    (_JOB.replace("size = 9", "size = " + "9" * 40) + _TWO, "j.toml: jobs[0]: --size '" + "9" * 40 + "' gives " + "9" * 40
     + " elements; 1..281474976710656 (2^48) can be planned"),
    (_JOB.replace("size = 9", "size = [1]") + _TWO, "j.toml: jobs[0].size=[1] must be a number of elements or a size "
                                                    'such as "256MiB"'),
    ('switch_mac = "02:00:00:00:00:fe\\n"\n' + _JOB + _TWO,
     "j.toml: switch_mac='02:00:00:00:00:fe\\n' is not a MAC address (six hex octets, e.g. 02:00:00:00:00:fe)"),
    (_TWO + _HOSTS.format(ip2="10.0.0.2\\n", port2=2) + _JOB,
     "j.toml: jobs[0].hosts[1].ip='10.0.0.2\\n' is not a dotted-quad IPv4 address"),
    (_TWO + _HOSTS.format(ip2="10.0.0.2", port2=512) + _JOB,
     "j.toml: jobs[0].hosts[1].port=512 must be an integer in 0..511 (9-bit ports)"),
]


@pytest.mark.parametrize("text,error", BAD_JOBS, ids=[e[:30] for _, e in BAD_JOBS])
def test_bad_jobs_files_get_one_line(text, error, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "j.toml").write_text(text)
    assert main(["plan", "--target", "tofino", "--jobs", "j.toml"]) == 1
    assert capsys.readouterr().err == f"p4gen: error: {error}\n"


# -- what p4gen plan writes beside the user's files ---------------------------------------------------------
PLAN_ARGS = ["plan", "--target", "bmv2", "--workers", "4", "--link-gbps", "1", "--rtt-us", "50", "--size", "1MiB"]


@pytest.mark.slow                  # two layout searches: 2.2 CPU-seconds
def test_plan_replaces_its_own_unchanged_layout_file_and_refuses_an_edited_one(tmp_path, capsys):
    out = tmp_path / "l.json"
    assert main(PLAN_ARGS + ["--out", str(out)]) == 0
    first = out.read_bytes()
    assert main(PLAN_ARGS + ["--rtt-us", "500", "--out", str(out)]) == 0          # p4gen's own, unchanged: replaced
    assert out.read_bytes() != first
    capsys.readouterr()
    edited = out.read_text().replace('"objective": "time"', '"objective": "time", "note": "mine"')
    for text in (edited, "my notes\n"):
        out.write_text(text)
        assert main(PLAN_ARGS + ["--out", str(out)]) == 1
        assert capsys.readouterr().err == (f"p4gen: error: layout file {str(out)!r} exists and is not as p4gen wrote "
                                           "it (edited since, or not p4gen's); move it away or choose another --out\n")
        assert out.read_text() == text
    out.unlink()
    out.symlink_to(tmp_path / "elsewhere.json")
    assert main(PLAN_ARGS + ["--out", str(out)]) == 1
    assert "is a symbolic link; p4gen does not write through it" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere.json").exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


@pytest.mark.slow
def test_plan_jobs_keeps_a_job_file_whose_addresses_the_user_edited_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "jobs"
    args = ["plan", "--target", "tofino", "--jobs", str(EXAMPLES / "three-jobs.toml"), "--out", str(out)]
    assert main(args) == 0
    assert main(args) == 0                                  # a re-run over its own files
    job = sorted(out.glob("job-*.toml"))[0]
    mine = job.read_text().replace("10.0.", "192.168.")
    job.write_text(mine)
    (out / "layout.json").unlink()
    capsys.readouterr()
    assert main(args) == 1
    assert capsys.readouterr().err.startswith(f"p4gen: error: job file {str(job)!r} exists and is not as p4gen wrote it")
    assert job.read_text() == mine and not (out / "layout.json").exists()       # nothing written
