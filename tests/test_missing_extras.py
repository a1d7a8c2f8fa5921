"""A command whose optional dependency is missing says so in one line, naming the extra: no traceback.

Each module is hidden by setting it to None in ``sys.modules`` (``import`` then raises and
``find_spec`` finds nothing), so these run wherever the extras are installed too.
"""

from __future__ import annotations

import sys

import pytest

from p4gen import extras
from p4gen.cli import main


def _hint(extra: str) -> str:
    return f"(the {extra} extra: pip install -e '.[{extra}]' in the p4gen checkout)"


@pytest.fixture
def root(monkeypatch):
    from p4gen.testbed import procs

    monkeypatch.setattr(procs.os, "geteuid", lambda: 0)       # so the module check is the one that speaks


def _hide(monkeypatch, *modules: str) -> None:
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def _one_line(capsys) -> str:
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    return lines[0]


def test_lacking_names_every_missing_distribution_and_its_extras(monkeypatch):
    assert extras.lacking("x", "json") is None
    _hide(monkeypatch, "torch", "sklearn", "matplotlib")
    assert extras.lacking("x", "torch", "sklearn", "json") == f"x needs torch and scikit-learn {_hint('torch')}"
    assert extras.lacking("y", "matplotlib", "torch") == (
        "y needs matplotlib and torch (the bench extra: pip install -e '.[bench]' in the p4gen checkout; "
        "the torch extra: pip install -e '.[torch]' in the p4gen checkout)")


@pytest.mark.parametrize("argv", [["testbed", "up"], ["testbed", "run"], ["testbed", "train", "--protocol", "gloo"]])
def test_testbed_without_mininet(root, monkeypatch, capsys, argv):
    if argv[1] == "train" and extras.lacking("t", "torch", "sklearn"):
        pytest.skip("torch or scikit-learn is not installed either (the torch extra): testbed train names them first")
    _hide(monkeypatch, "mininet")
    assert main(argv) == 1
    assert _one_line(capsys) == f"p4gen: error: the testbed needs mininet {_hint('testbed')}"


def test_testbed_gloo_run_without_torch(root, monkeypatch, capsys):
    _hide(monkeypatch, "torch")
    assert main(["testbed", "run", "--protocol", "gloo"]) == 1
    assert _one_line(capsys) == f"p4gen: error: --protocol gloo needs torch {_hint('torch')}"


def test_testbed_train_without_torch_or_scikit_learn(root, monkeypatch, capsys):
    _hide(monkeypatch, "torch", "sklearn")
    assert main(["testbed", "train"]) == 1
    assert _one_line(capsys) == f"p4gen: error: p4gen testbed train needs torch and scikit-learn {_hint('torch')}"


def test_training_script_without_torch(monkeypatch, capsys):
    from p4gen.torch import train

    _hide(monkeypatch, "torch", "sklearn")
    monkeypatch.delenv("RANK", raising=False)
    assert train.main(["--protocol", "gloo"]) == 1
    assert _one_line(capsys) == (f"p4gen.torch.train: rank ?: p4gen.torch.train needs torch and scikit-learn "
                                 f"{_hint('torch')}")


def test_the_hook_without_torch_is_an_import_error_naming_the_extra(monkeypatch):
    import p4gen.torch

    _hide(monkeypatch, "torch")
    with pytest.raises(ImportError, match=r"^p4gen\.torch needs torch \(the torch extra: "):
        p4gen.torch.register


def test_register_reset_without_thrift_names_the_extra(tmp_path, monkeypatch):
    from p4gen.controller import bmv2
    from p4gen.controller.errors import ControllerError

    cli = tmp_path / "simple_switch_CLI"                          # as BMv2's CLI fails without thrift
    cli.write_text("#!/bin/sh\ncat >/dev/null\necho \"ModuleNotFoundError: No module named 'thrift'\" >&2\n")
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(ControllerError) as exc:
        bmv2.register_reset(["P4genIngress.bitmap0"])
    assert str(exc.value) == f"simple_switch_CLI needs the Python thrift package {_hint('bmv2')}"


def test_a_python_cli_runs_under_this_interpreter_when_it_has_thrift(tmp_path, monkeypatch):
    from p4gen.controller import bmv2

    if extras.lacking("t", "thrift"):
        pytest.skip("thrift is not installed (the bmv2 extra)")
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text("#!/usr/bin/env python3\nimport sys\nopen(sys.argv[0] + '.exe', 'w').write(sys.executable)\n")
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    bmv2.register_reset(["P4genIngress.bitmap0"])
    assert (tmp_path / "simple_switch_CLI.exe").read_text() == sys.executable
