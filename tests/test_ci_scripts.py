""".ci/install's wait for apt's lock and .ci/test's first line, with stand-in tools on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _apt_get(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """``apt_get update -qq`` (.ci/apt.sh) with a stand-in apt-get whose script is ``body``."""
    stub = tmp_path / "bin" / "apt-get"
    stub.parent.mkdir()
    stub.write_text("#!/bin/bash\n" + body)
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{stub.parent}:/usr/bin:/bin", APT_LOCK_POLL="0")
    return subprocess.run(["bash", "-c", ". .ci/apt.sh && apt_get update -qq"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_apt_get_waits_while_another_apt_run_holds_the_lock(tmp_path):
    count = tmp_path / "calls"
    res = _apt_get(tmp_path, f"echo x >> {count}\n"
                             f"if [ $(wc -l < {count}) -lt 3 ]; then\n"
                             "  echo 'E: Could not get lock /var/lib/apt/lists/lock. It is held by process 42 (apt-get)' >&2\n"
                             "  exit 100\nfi\necho \"$@\" > " + str(tmp_path / "argv") + "\n")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ".ci/install: another apt run holds its lock; waiting for it (up to 10 min)\n"
    assert count.read_text().count("x") == 3
    assert (tmp_path / "argv").read_text().split() == ["-o", "DPkg::Lock::Timeout=600", "update", "-qq"]


def test_apt_get_gives_any_other_failure_at_once(tmp_path):
    res = _apt_get(tmp_path, "echo 'E: Unable to locate package nosuch' >&2\nexit 100\n")
    assert (res.returncode, res.stderr) == (1, "E: Unable to locate package nosuch\n")


def test_the_first_line_of_ci_test_names_the_toolchain_and_what_skips(tmp_path):
    env = dict(os.environ, PATH=f"{tmp_path}:/usr/bin:/bin")
    res = subprocess.run([sys.executable, ".ci/tools.py", ""], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and res.stderr == ""
    line = res.stdout.rstrip("\n")
    assert "\n" not in line
    assert line.startswith(".ci/test: no P4 toolchain (neither ../shared/p4toolchain nor P4GEN_P4TOOLCHAIN); runs: ")
    skips = line.split("; skips: ", 1)[1]
    assert skips.startswith("p4c (p4c-bm2-ss and p4test not on PATH); BMv2 (simple_switch and simple_switch_grpc "
                            "not on PATH); Tofino compiler (bf-p4c and p4c-barefoot not on PATH)")


def test_the_first_line_readme_quotes_names_every_family_ci_test_reports():
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("ci_tools", ROOT / ".ci" / "tools.py")
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)
    quoted = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith(".ci/test: "))
    m = re.fullmatch(r"\.ci/test: toolchain \S+; runs: (.*); skips: none", quoted)
    assert m, quoted
    runs = [re.sub(r" \(.*\)$", "", f) for f in re.split(r", (?![^(]*\))", m.group(1))]
    assert runs == [name for name, _tools, _why in tools.families()]
