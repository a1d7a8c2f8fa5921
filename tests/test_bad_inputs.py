"""Bad input to every command: one line on stderr, a non-zero exit, no traceback, nothing written.

The cases live in ``tests/data/bad_cli.json``, each next to the exact line it
must print.  ``{tmp}`` is the case's own directory and ``{build}`` a fresh
copy of a bmv2 build; a file named ``build/NAME`` replaces that file of the
copy.  File contents ``@deep_toml@``, ``@deep_json@`` and ``@nonutf8@`` stand
for nesting 50,000 levels deep and for bytes that are not UTF-8; ``@big_int@`` in a file stands for an
integer of 5000 digits.  A further
Hypothesis suite feeds random spec, target and job documents.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from p4gen.build import build
from p4gen.cli import main as p4gen_main
from p4gen.errors import P4genError
from p4gen.spec import make_spec
from p4gen.switch.dataplane import main as dp_main
from p4gen.testbed.agent import main as agent_main
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "data" / "bad_cli.json").read_text())
SPECIAL = {"@deep_toml@": ("a = " + "[" * 50000 + "]" * 50000 + "\n").encode(),
           "@deep_json@": ("[" * 50000 + "]" * 50000).encode(),
           "@nonutf8@": b"slots = 64\n\xff\xfe\xfd\n"}
BIG_INT = "7" * 5000
PROGRAMS = {"p4gen": p4gen_main, "dataplane": dp_main, "agent": agent_main}
CASE_SECONDS = 20


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bad") / "b"
    build(make_spec(slots=64), load_target("bmv2"), out, use_cache=False)
    return out


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))


def snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = "dir" if p.is_dir() else p.read_bytes()
    return out


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer within {CASE_SECONDS} s")


def run_case(case: dict, tmp: Path, build_dir: Path) -> int:
    """Lay out the case's files, run its program in-process (bounded in time), return the exit code."""
    copy = tmp / "build"
    shutil.copytree(build_dir, copy)
    for name, text in case["files"].items():
        (tmp / name).write_bytes(SPECIAL.get(text, text.replace("@big_int@", BIG_INT).encode()))
    args = [a.replace("{tmp}", str(tmp)).replace("{build}", str(copy)) for a in case["args"]]
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        return PROGRAMS[case["prog"]](args)
    except SystemExit as exc:
        return exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_every_case_has_a_unique_name():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)) and len(CASES) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_path, build_dir, capfd):
    rc = run_case(case, tmp_path, build_dir)
    before = snapshot(tmp_path)
    out, err = capfd.readouterr()
    expected = case["error"].replace("{tmp}", str(tmp_path)).replace("{build}", str(tmp_path / "build"))
    assert rc == case.get("exit", 1)
    assert err == expected + "\n"
    assert out == ""
    assert not (tmp_path / "out").exists()
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- random documents

_scalar = st.one_of(st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_value = st.recursive(_scalar,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                    max_size=3), max_leaves=8)
SPEC_KEYS = ["protocol", "variant", "max_workers", "slots", "elements_per_packet", "value_width", "jobs"]
TARGET_KEYS = ["name", "arch", "description", "pipes", "stages", "alus_per_stage", "alu_width_bits",
               "lanes_per_register", "sram_blocks_per_stage", "sram_block_words", "sram_block_width_bits",
               "register_spare_blocks", "phv_bits", "tagalong_bits", "max_register_entries", "max_passes",
               "mtu_bytes", "aggregate_rate_gbps"]


def _doc(keys):
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), _value, max_size=8)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(v), repr(v))
    if isinstance(v, (int, str)):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def _toml(doc: dict) -> str:
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in doc.items())


def _bounded(fn, *args):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_SECONDS)
    try:
        return fn(*args)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_doc(SPEC_KEYS))
def test_random_spec_documents_raise_only_p4gen_errors(doc):
    from p4gen.planner import make_plan
    from p4gen.spec import make_spec as mk

    def run():
        try:
            spec = mk(**{k: v for k, v in doc.items()})
        except P4genError as exc:
            assert "\n" not in str(exc)
            return
        try:
            make_plan(spec, load_target("bmv2"))
        except P4genError as exc:
            assert "\n" not in str(exc)

    _bounded(run)


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_doc(TARGET_KEYS))
def test_random_target_documents_raise_only_p4gen_errors(doc, tmp_path_factory):
    from p4gen.planner import make_plan
    from p4gen.target import load_target_file

    base = tomllib.loads((Path(__file__).parents[1] / "p4gen" / "target" / "tofino.toml").read_text())
    base.update(doc)
    path = tmp_path_factory.mktemp("tgt") / "t.toml"
    path.write_text(_toml(base))

    def run():
        try:
            profile = load_target_file(path)
        except P4genError as exc:
            assert "\n" not in str(exc)
            return
        try:
            make_plan(make_spec(slots=64), profile)
        except P4genError as exc:
            assert "\n" not in str(exc)

    _bounded(run)


JOB_KEYS = ["job", "mgid", "slot_base", "slot_count", "switch_mac", "workers"]
WORKER_KEYS = ["id", "port", "mac", "ip", "udp_port"]
_worker = st.dictionaries(st.sampled_from(WORKER_KEYS), _value | st.integers(0, 70000)
                          | st.sampled_from(["02:00:00:00:00:01", "10.0.0.1", "02:00:00:00:00:01\n"]), max_size=6)


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_doc(JOB_KEYS), workers=st.lists(_worker, max_size=4))
def test_random_job_documents_raise_only_job_file_errors(doc, workers, build_dir):
    from p4gen.jobfile import JobFileError
    from p4gen.jobfile import parse_job

    plan = _plan(build_dir)
    if workers:
        doc = {**doc, "workers": workers}
    try:
        parse_job(doc, plan)
    except JobFileError as exc:
        assert "\n" not in str(exc)


_PLANS: dict = {}


def _plan(build_dir):
    from p4gen.plan import Plan

    if build_dir not in _PLANS:
        _PLANS[build_dir] = Plan.load(build_dir)
    return _PLANS[build_dir]


# ---------------------------------------------------------------- p4gen plan --jobs documents (mutated)
_JOBS_DOC = tomllib.loads((HERE.parent / "docs" / "examples" / "three-jobs.toml").read_text())
_JOBS_KEYS = ["name", "workers", "link_gbps", "rtt_us", "size", "density", "framing_bytes", "ports_per_pipe", "hosts"]
_HOST_KEYS = ["id", "port", "mac", "ip", "udp_port"]
_host = st.dictionaries(st.sampled_from(_HOST_KEYS), _value | st.integers(0, 70000)
                        | st.sampled_from(["02:00:00:00:00:01", "10.0.0.1", "10.0.0.1\n", "02:00:00:00:00:0g"]),
                        min_size=3, max_size=5)


def _hosts_for(n):
    return st.lists(st.fixed_dictionaries({"port": st.integers(-1, 600), "udp_port": st.integers(0, 70000),
                                           "mac": st.sampled_from(["02:00:00:00:00:01", "2:0:0:0:0:1", "x"]),
                                           "ip": st.sampled_from(["10.0.0.1", "10.0.0.256", " 10.0.0.1"])}),
                    min_size=n, max_size=n)


@st.composite
def _jobs_documents(draw):
    import copy

    doc = copy.deepcopy(_JOBS_DOC)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["job", "job", "job", "top", "hosts"]))
        if where == "top":
            doc[draw(st.sampled_from(["switch_mac", "jobs", "other"]))] = draw(_value)
        elif not (isinstance(doc.get("jobs"), list) and doc["jobs"]):
            continue
        elif where == "hosts":
            j = draw(st.integers(0, len(doc["jobs"]) - 1))
            if isinstance(doc["jobs"][j], dict):
                n = doc["jobs"][j].get("workers", 2)
                ok = isinstance(n, int) and not isinstance(n, bool) and 0 < n < 10
                doc["jobs"][j]["hosts"] = draw(_hosts_for(n) if ok else st.lists(_host, max_size=3))
        else:
            j = draw(st.integers(0, len(doc["jobs"]) - 1))
            if isinstance(doc["jobs"][j], dict):
                key = draw(st.sampled_from(_JOBS_KEYS) | st.text(max_size=6))
                if draw(st.booleans()) and key in doc["jobs"][j]:
                    del doc["jobs"][j][key]
                else:
                    doc["jobs"][j][key] = draw(_value | st.floats(allow_nan=True) | st.integers(-2 ** 70, 2 ** 70))
    return doc


@pytest.mark.slow
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_jobs_documents())
def test_random_jobs_documents_raise_only_spec_errors_and_write_only_valid_job_files(doc, tmp_path_factory, build_dir):
    """What `p4gen plan --jobs` reads, mutated: a one-line SpecError, or jobs whose job files `p4gen ctl` reads."""
    from types import SimpleNamespace

    from p4gen.jobfile import JobFileError
    from p4gen.jobfile import parse_job
    from p4gen.errors import SpecError
    from p4gen.layout.job_split_cli import _toml_job, load_jobs

    path = tmp_path_factory.mktemp("jobs") / "j.toml"
    path.write_text(_toml(doc))
    try:
        jobs, extra, hosts = _bounded(load_jobs, path)
    except SpecError as exc:
        assert "\n" not in str(exc)
        return
    plan = _plan(build_dir)
    for number, job in enumerate(jobs, start=1):
        if job.name not in hosts:
            continue
        fake = SimpleNamespace(job=job, group=0, slot_base=0, slot_count=8)
        text = _toml_job(number, fake, hosts[job.name], extra, False)
        try:
            parse_job(tomllib.loads(text), plan, source="job.toml")
        except JobFileError as exc:              # only what needs this plan (ids past its max_workers)
            assert "max_workers" in str(exc) or "two workers" in str(exc) or "could not tell" in str(exc), str(exc)


# ---------------------------------------------------------------- layout files (mutated)
@functools.lru_cache(maxsize=None)
def _layout_doc() -> dict:
    from p4gen.layout.layoutfile import layout_document
    from p4gen.pass_shape import PassShape

    return layout_document("bmv2", make_spec(slots=64, max_workers=4, elements_per_packet=128),
                           PassShape(2, "resident", 1))


@st.composite
def _layout_documents(draw):
    import copy

    doc = copy.deepcopy(_layout_doc())
    for _ in range(draw(st.integers(1, 3))):
        part = draw(st.sampled_from(["spec", "spec", "shape", "shape", "top"]))
        table = doc if part == "top" else doc.get(part)
        if not isinstance(table, dict):
            doc[part] = draw(_value)
            continue
        keys = {"top": ["schema", "target", "spec", "shape"], "spec": SPEC_KEYS,
                "shape": ["passes", "mode", "pipes", "placement"]}[part]
        key = draw(st.sampled_from(keys) | st.text(max_size=6))
        if draw(st.booleans()) and key in table:
            del table[key]
        else:
            table[key] = draw(_value | st.sampled_from(["tofino", "bmv2", "stream", "fold", "resident", "omnireduce"])
                              | st.integers(0, 40))
    return doc


@pytest.mark.slow
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=_layout_documents())
def test_random_layout_documents_raise_only_p4gen_errors(doc, tmp_path_factory):
    """What `p4gen build --layout FILE` reads, mutated: a one-line error, or a plan of exactly that layout."""
    from p4gen.layout.layoutfile import read_layout
    from p4gen.planner import make_plan

    path = tmp_path_factory.mktemp("layout") / "l.json"
    path.write_text(json.dumps(doc))

    def run():
        try:
            target, spec, shape = read_layout(path)
        except P4genError as exc:
            assert "\n" not in str(exc)
            return
        assert spec.to_dict() == doc["spec"]          # built as planned: no field filled in by a default
        try:
            make_plan(spec, load_target(target), shape)
        except P4genError as exc:
            assert "\n" not in str(exc)

    _bounded(run)


# ---------------------------------------------------------------- plans given to p4gen verify (mutated)
@functools.lru_cache(maxsize=None)
def _plan_data() -> str:
    from p4gen.planner import make_plan

    return make_plan(make_spec(slots=8, max_workers=2, elements_per_packet=8), load_target("bmv2")).to_json()


_PLAN_PATHS = [("protocol",), ("variant",), ("decision", "variant"), ("decision", "protocol"), ("decision", "steps"),
               ("decision", "outcome"), ("params", "op_codes"), ("params", "op_codes", "values"),
               ("params", "op_codes", "values", "add"), ("params", "max_workers"), ("params", "slots"),
               ("params", "value_width"), ("params", "bitmap_words"), ("registers",), ("headers",), ("tables",),
               ("decision", "steps", 0, "rules", 0, "op"), ("decision", "steps", 0, "rules"),
               ("decision", "outcome", "rules", 0, "stat")]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(path=st.sampled_from(_PLAN_PATHS), value=_value | st.sampled_from(["advance_window", "hardened", "omnireduce",
                                                                         "reference", "nop", "add"]))
def test_random_plan_mutations_are_refused_by_verify_with_one_line(path, value):
    """plan.json as `p4gen verify` reads it, one field replaced: a one-line PlanError before any proof, or a
    plan whose program renders (verify then binds it)."""
    from p4gen.errors import PlanError
    from p4gen.plan import Plan
    from p4gen.verify import artifacts, plancheck

    data = json.loads(_plan_data())
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value

    def run():
        try:
            plan = Plan.from_json(json.dumps(data), "plan.json")
            plancheck.check(plan)
            artifacts._render(plan)
        except PlanError as exc:
            assert "\n" not in str(exc)

    _bounded(run)


# ---------------------------------------------------------------- workload and testbed flags (random text)
_flag_text = st.one_of(st.text(max_size=12), st.sampled_from(["inf", "-inf", "nan", "1e400", "0", "-1", "1.5", "",
                                                             "9" * 30, "1" + "0" * 400, "0x10", " 3"]),
                       st.integers(-2 ** 70, 2 ** 70).map(str), st.floats(allow_nan=True).map(repr))
def _parse(command: str, argv: list[str]):
    """(the parsed arguments, "") or (None, what argparse printed when it refused them with exit 2)."""
    import contextlib
    import io

    from p4gen.cli import make_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        try:
            return make_parser(command).parse_args(argv), ""
        except SystemExit as exc:
            assert exc.code == 2, err.getvalue()
    return None, err.getvalue()


_PLAN_FLAGS = ["--size", "--link-gbps", "--rtt-us", "--density", "--framing-bytes", "--ports-per-pipe", "--slack",
               "--window-headroom", "--objective", "--value-widths"]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(flag=st.sampled_from(_PLAN_FLAGS), text=_flag_text)
def test_random_workload_flags_give_one_line_or_a_workload(flag, text):
    """`p4gen plan` with one workload flag of any text: argparse's one line (exit 2), a one-line SpecError,
    or a workload every field of which is in range, before any search runs."""
    from p4gen.layout.workload_args import opt, value_widths, workload_from_args

    base = {"--link-gbps": "1", "--rtt-us": "50", "--size": "1MiB"}
    base[flag] = text
    argv = ["plan", "--target", "bmv2", "--workers", "4"] + [a for kv in base.items() for a in kv]
    args, err = _parse("plan", argv)
    if args is None:
        assert err.count("\n") == 1 and "error: argument" in err, err
        return
    try:
        wl = workload_from_args(args, 4)
        value_widths(args)
        assert opt(args, "objective") == args.objective or args.objective is None
    except P4genError as exc:
        assert "\n" not in str(exc)
        return
    import math

    assert all(math.isfinite(v) for v in (wl.link_gbps, wl.rtt_us, wl.density)) and 1 <= wl.elements <= 1 << 48


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(cmd=st.sampled_from(["run", "up", "train"]), flag=st.sampled_from(["--delay", "--timeout", "--protocol",
                                                                          "--workers", "--bw", "--loss", "--epochs"]),
       text=_flag_text | st.sampled_from(["switchml,", ",", "gloo,gloo", "switchml,omnireduce", "5ms", "1s"]))
def test_random_testbed_flags_give_one_line_before_any_network(cmd, flag, text):
    """`p4gen testbed run|up|train` with one flag of any text: refused with one line while the arguments are
    read (no network is built here: the checks run before one would be)."""
    from p4gen.testbed.network_options import check_network_options
    from p4gen.testbed.train import _protocols

    if (cmd, flag) in {("up", "--timeout"), ("up", "--epochs"), ("run", "--epochs")}:
        return
    args, err = _parse("testbed", ["testbed", cmd, flag, text])
    if args is None:
        assert err.count("\n") == 1, err
        return
    try:
        check_network_options(args)
        if cmd == "train":
            _protocols(args.protocol)
        if flag == "--timeout":
            import math

            assert math.isfinite(args.timeout) and args.timeout > 0
    except P4genError as exc:
        assert "\n" not in str(exc)
