"""p4gen/errors.py lists every user-facing error kind of the package once, with its message's form and its
exit status, and the command lines end through its one wrapper (p4gen/cliexit.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import p4gen
from p4gen import errors
from p4gen.cliexit import run_command
from p4gen.errors import CATALOGUE, EXIT_ERROR, EXIT_INTERRUPTED, InfeasibleError, P4genError, exit_status

# modules that need what a test machine may lack (grpc, torch, mininet) are imported when they can be
OPTIONAL = ("p4gen.controller", "p4gen.torch", "p4gen.testbed", "p4gen.switch.p4rt", "p4gen.verify")


def _error_classes() -> dict[str, type]:
    out = {}
    roots = [p4gen] + [importlib.import_module(f"p4gen.{sub}") for sub in ("controller", "testbed", "verify")]
    infos = [i for r in roots for i in pkgutil.walk_packages(r.__path__, r.__name__ + ".")
             if not i.name.endswith(".__main__")]
    for info in infos:
        try:
            mod = importlib.import_module(info.name)
        except ImportError:
            if info.name.startswith(OPTIONAL):
                continue
            raise
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, P4genError) and obj is not P4genError \
                    and obj.__module__ == mod.__name__:
                out[f"{obj.__module__}.{obj.__name__}"] = obj
    return out


def test_the_catalogue_lists_every_error_class_of_the_package_once():
    listed = [f"{k.module}.{k.name}" for k in CATALOGUE]
    assert len(listed) == len(set(listed))
    defined = _error_classes()
    assert sorted(set(defined) - set(listed)) == []        # a new error kind is named in the catalogue
    # and everything the catalogue names exists (where its module could be imported here)
    assert sorted(n for n in set(listed) - set(defined) if not n.startswith(OPTIONAL)) == []
    assert all(k.template and k.status == EXIT_ERROR for k in CATALOGUE)


def test_the_one_wrapper_prints_one_line_and_the_catalogues_status(capsys):
    def fails():
        raise InfeasibleError("slots=99999 needs more; the largest slots that fits tofino is 5120")

    assert run_command("p4gen", fails) == exit_status(InfeasibleError("x")) == EXIT_ERROR
    assert capsys.readouterr().err == "p4gen: error: slots=99999 needs more; the largest slots that fits tofino is 5120\n"

    def interrupted():
        raise KeyboardInterrupt

    assert run_command("p4gen", interrupted) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "p4gen: interrupted\n"

    def missing():
        raise FileNotFoundError(2, "No such file or directory", "spec.toml")

    assert run_command("p4gen", missing, os_errors=True) == EXIT_ERROR
    assert capsys.readouterr().err == "p4gen: error: No such file or directory: spec.toml\n"
    with pytest.raises(FileNotFoundError):
        run_command("p4gen", missing)
    assert run_command("p4gen", lambda: None) == 0 and run_command("p4gen", lambda: 3) == 3


def test_a_subclass_takes_the_entry_of_its_nearest_listed_base():
    class Local(errors.PlanError):
        pass

    assert errors.kind_of(Local("x")).name == "PlanError"
    assert errors.kind_of(ValueError("x")) is None
