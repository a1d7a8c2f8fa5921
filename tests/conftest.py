import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from cpu_budget import CpuBudget

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Tools the tests run that are Python scripts (BMv2's simple_switch_CLI: `#!/usr/bin/env python3`) find this
# interpreter, with this environment's packages (thrift), first on PATH, as in an activated venv.
_bin = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _bin:
    os.environ["PATH"] = _bin + os.pathsep + os.environ.get("PATH", "")


def pytest_collection_modifyitems(items):
    """A test that needs a network namespace of veth pairs (the ``netns`` fixture, root) is slow."""
    for item in items:
        if "netns" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    config.pluginmanager.register(CpuBudget(config), "p4gen-cpu-budget")


@pytest.fixture(scope="session", autouse=True)
def _compile_once_a_run(tmp_path_factory):
    """P4GEN_COMPILE_CACHE for the whole run, its subprocesses included: a program a test compiled is not
    compiled again by another (p4gen.build.compile_program); empty at the start of every run."""
    from p4gen.build import COMPILE_CACHE_ENV

    old = os.environ.get(COMPILE_CACHE_ENV)
    os.environ[COMPILE_CACHE_ENV] = str(tmp_path_factory.mktemp("compiled"))
    yield
    if old is None:
        os.environ.pop(COMPILE_CACHE_ENV, None)
    else:
        os.environ[COMPILE_CACHE_ENV] = old
