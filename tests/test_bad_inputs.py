"""Bad input to every command: one line on stderr, a non-zero exit, no traceback, nothing written.

The cases live in ``tests/data/bad_cli.json``, each next to the exact line it
must print.  ``{tmp}`` is the case's own directory and ``{build}`` a fresh
copy of a bmv2 build; a file named ``build/NAME`` replaces that file of the
copy.  File contents ``@deep_toml@``, ``@deep_json@`` and ``@nonutf8@`` stand
for nesting 50,000 levels deep and for bytes that are not UTF-8.  A further
Hypothesis suite feeds random spec, target and job documents.
"""

from __future__ import annotations

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
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "data" / "bad_cli.json").read_text())
SPECIAL = {"@deep_toml@": ("a = " + "[" * 50000 + "]" * 50000 + "\n").encode(),
           "@deep_json@": ("[" * 50000 + "]" * 50000).encode(),
           "@nonutf8@": b"slots = 64\n\xff\xfe\xfd\n"}
PROGRAMS = {"p4gen": p4gen_main, "dataplane": dp_main}
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
        (tmp / name).write_bytes(SPECIAL.get(text, text.encode()))
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

    base = tomllib.loads((Path(__file__).parents[1] / "p4gen" / "targets" / "tofino.toml").read_text())
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
    from p4gen.controller.errors import JobFileError
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
