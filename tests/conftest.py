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


@pytest.fixture(scope="session")
def _session_build_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture
def compiled_cache(_session_build_cache, monkeypatch):
    """The build cache of this test session (P4GEN_CACHE_DIR): a build with ``--compile`` of a configuration
    another test of the run compiled already is a cache hit, so no configuration is compiled twice a run;
    empty at the start of every run, so every run compiles each one (the key covers the compiler's version)."""
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(_session_build_cache))
    return _session_build_cache
