"""Every command README.md and docs/*.md show runs in a test, as written, and the output they quote is the output.

:func:`documented` reads each command from the docs: every line of a ``sh`` block, and in a plain block
each ``$ command`` line (the output under it is the quoted output) and each ``# p4gen ...`` root prompt or
``flock ... bench/...`` line.  :data:`HOW` says, for every one of them, which test runs it:

* ``recipe:NAME``: a recipe test here runs the block that holds it, in a scratch directory, as a shell
  would (``&`` starts it in the background and the recipe waits for the port it names; ``kill %1`` ends
  it), comparing the output a ``$`` transcript quotes;
* ``build``: a test here runs it in-process in a scratch directory (it must succeed);
* ``test:FILE::NAME``: that test runs it (the test must exist), sometimes with a smaller workload, said
  after `` -- ``;
* ``bench``: a benchmark's command line: the script's own parser must accept its arguments (benchmarks
  are run by hand, under the bench lock, and their figures quoted in docs/benchmarks.md);
* ``not run: why``: what cannot run here.

A command added to the docs fails :func:`test_every_documented_command_is_accounted_for` until it has a
line in :data:`HOW`: so the docs stay true as they change.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from p4gen.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md"] + [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent


def _blocks(text: str):
    """(language, body lines) of every fenced block."""
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        yield m.group(1), m.group(2).replace("\\\n", " ").splitlines()


def _command(line: str) -> str:
    """A command line without its trailing comment, spaces folded."""
    return " ".join(re.sub(r"\s+#\s.*$", "", line.strip()).split())


def documented() -> dict[str, list[str]]:
    """command -> the docs that show it."""
    out: dict[str, list[str]] = {}
    for doc in DOCS:
        for lang, lines in _blocks((ROOT / doc).read_text()):
            for line in lines:
                s = line.strip()
                if lang == "sh":
                    cmd = s
                elif lang == "" and s.startswith("$ "):
                    cmd = s[2:]
                elif lang == "" and (s.startswith("# p4gen ") or (s.startswith("flock ") and " bench/" in s)):
                    cmd = s[2:] if s.startswith("# ") else s
                else:
                    continue
                cmd = _command(cmd)
                if cmd and not cmd.startswith("#"):
                    out.setdefault(cmd, []).append(doc)
    return out


TOFINO_REAL = "test:tests/test_tofino_real.py::test_every_tna_golden_compiles_as_predicted"
TRAIN = "test:tests/test_testbed_train.py::test_switchml_and_omnireduce_training_matches_gloo"
HOW: dict[str, str] = {
    # README.md
    ".ci/install && .venv/bin/p4gen build --slots 512 --target tofino":
        "not run: .ci/install needs the network and apt (CI's .ci/run runs it, then .ci/test); the build is "
        "'p4gen build --slots 512 --target tofino', run here",
    ".ci/test": "not run: it is the test suite (CI runs it)",
    "p4gen targets": "build",
    "p4gen build --slots 512 --target tofino": "build",
    "p4gen build --slots 512 --target bmv2 --protocol omnireduce --out bmv2-omni/": "build",
    "p4gen build --slots 100000 --target tofino": "test:tests/test_docs_figures.py::test_quoted_build_errors_are_the_errors_printed",
    "p4gen plan --target tofino --workers 8 --link-gbps 100 --rtt-us 10 --size 256MiB && p4gen build --layout "
    "p4gen-out/tofino-layout.json --out p4gen-out/tofino-best/": "recipe:readme-layout",
    "ip link add veth1 type veth peer name veth1h && ip link add veth2 type veth peer name veth2h":
        "recipe:readme-switch",
    "python -m p4gen.switch.dataplane --plan bmv2-omni/ --port 1=veth1 --port 2=veth2 --p4runtime 127.0.0.1:9559 &":
        "recipe:readme-switch",
    "p4gen ctl push bmv2-omni/ --addr 127.0.0.1:9559": "recipe:readme-switch",
    "p4gen ctl setup bmv2-omni/ controller/examples/job1.toml --addr 127.0.0.1:9559": "recipe:readme-switch",
    "p4gen testbed up --workers 3 --switch soft":
        "test:tests/test_testbed_net.py::test_up_gives_a_mininet_prompt_where_pingall_succeeds",
    "p4gen testbed train --workers 4 --model embbag --epochs 3 --protocol gloo,switchml,omnireduce --png curves.png":
        TRAIN + " -- at --epochs 1 on 50 Mbit/s links, with --switch soft",
    "p4gen build --slots 512 --target tofino --out t1/ && p4gen verify t1/": "recipe:readme-verify",
    # docs/building.md
    "p4gen build --slots 512 --target tofino2 --out t2/": "build",
    "p4gen build --slots 512 --target bmv2 --out bmv2/": "build",
    "p4gen build --slots 512 --target soft --out soft/": "build",
    "p4gen build --slots 512 --elements 32 --target tofino": "build",
    "p4gen build --variant reference --target tofino": "build",
    "p4gen build --target-file my-switch.toml": "build",
    "p4gen build --spec job.toml": "build",
    "p4gen build --workers 200 --target tofino": "test:tests/test_docs_figures.py::test_quoted_build_errors_are_the_errors_printed",
    "p4gen build --slots 512 --target bmv2 --compile --out bmv2/": "recipe:bmv2-load",
    "simple_switch_grpc --device-id 0 -i 1@veth1 -i 2@veth2 --no-p4 -- --grpc-server-addr 127.0.0.1:9559 &":
        "recipe:bmv2-load",
    "p4gen ctl push bmv2/ --addr 127.0.0.1:9559": "recipe:bmv2-load",
    "kill %1": "recipe:bmv2-load",
    "p4gen build --slots 512 --target tofino --out tofino/": "build",
    "bf-p4c --target tofino --arch tna -o tofino/build tofino/program.p4":
        f"{TOFINO_REAL} -- Intel's SDE compiler is not here; p4gen build --compile runs p4c's open Tofino compiler "
        f"(p4c-barefoot --target tofino --arch tna -g) on the same program, tofino/switchml",
    # docs/controller.md
    "p4gen build --target bmv2 --slots 64 --out build/bmv2": "recipe:controller-session",
    "python -m p4gen.switch.p4rt_server --plan build/bmv2 --addr 127.0.0.1:9559 &": "recipe:controller-session",
    "p4gen ctl push build/bmv2 --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl setup build/bmv2 controller/examples/job1.toml --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl setup build/bmv2 controller/examples/job2.toml --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl reset build/bmv2 --job 2 --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl counters build/bmv2 --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl reset build/bmv2 --addr 127.0.0.1:9559": "recipe:controller-session",
    "p4gen ctl teardown build/bmv2 controller/examples/job1.toml --addr 127.0.0.1:9559": "recipe:controller-session",
    # docs/layout.md
    "p4gen plan --target tofino --workers 8 --link-gbps 100 --rtt-us 10 --size 256MiB": "recipe:layout-commands",
    "p4gen build --layout p4gen-out/tofino-layout.json": "recipe:layout-commands",
    "p4gen build --layout best --target tofino --workers 8 --link-gbps 100 --rtt-us 10 --size 256MiB":
        "recipe:layout-commands",
    "p4gen plan --target tofino --jobs docs/examples/three-jobs.toml": "recipe:layout-commands",
    # docs/testbed.md
    "p4gen testbed run --protocol switchml --workers 3 --size 65536 --loss 0.05 --json out.json": "recipe:testbed-runs",
    "p4gen testbed run --protocol omnireduce --workers 4 --density 0.01 --size 8MiB --bw 10": "recipe:testbed-runs",
    "p4gen testbed run --protocol gloo --workers 8 --size 2MiB --bw 5": "recipe:testbed-runs",
    "p4gen testbed run --workers 3 --cli": "recipe:testbed-runs",
    "p4gen testbed run --workers 8 --size 4MiB --bw 25 --target soft": "recipe:testbed-runs",
    "p4gen testbed cleanup": "recipe:testbed-runs",
    # docs/training.md
    "p4gen build --target bmv2 --slots 64 --workers 4 --out lo/":
        "test:tests/test_docs_recipes.py::test_the_loopback_training_recipe_runs_as_written",
    "python -m p4gen.switch.udp --plan lo/ --p4runtime 127.0.0.1:9559 &":
        "test:tests/test_docs_recipes.py::test_the_loopback_training_recipe_runs_as_written",
    "p4gen ctl push lo/ --addr 127.0.0.1:9559": "test:tests/test_docs_recipes.py::test_the_loopback_training_recipe_runs_as_written",
    "p4gen ctl setup lo/ docs/examples/loopback-job.toml --addr 127.0.0.1:9559":
        "test:tests/test_docs_recipes.py::test_the_loopback_training_recipe_runs_as_written",
    "torchrun --standalone --nproc-per-node 4 -m p4gen.torch.train --protocol switchml --plan lo/ --job "
    "docs/examples/loopback-job.toml --switch 127.0.0.1 --epochs 1 --out run.json":
        "test:tests/test_docs_recipes.py::test_the_loopback_training_recipe_runs_as_written",
    "p4gen ctl push build/bmv2 --addr SWITCH:9559 && p4gen ctl setup build/bmv2 job.toml --addr SWITCH:9559":
        "not run: SWITCH is the address of a real switch; the loopback recipe of docs/training.md runs the same "
        "commands against 127.0.0.1 (tests/test_docs_recipes.py)",
    "GLOO_SOCKET_IFNAME=eth0 torchrun --nnodes 4 --node-rank $I --master-addr 10.0.0.1 --master-port 29500 -m "
    "p4gen.torch.train --protocol switchml --plan build/bmv2 --job job.toml --switch 10.0.0.254 --epochs 3 "
    "--out run.json":
        "not run: one command a host on four real hosts; p4gen testbed train runs the same script on Mininet "
        "hosts (tests/test_testbed_train.py) and the loopback recipe on one (tests/test_docs_recipes.py)",
    "p4gen testbed train --workers 4 --model embbag --epochs 3 --protocol gloo,switchml,omnireduce --json runs.json "
    "--png curves.png": TRAIN + " -- at --epochs 1 on 50 Mbit/s links, with --switch soft",
}


def _is_bench(command: str) -> bool:
    return re.search(r"\bbench/\w+\.py\b", command) is not None


def test_every_documented_command_is_accounted_for():
    docs = documented()
    unknown = sorted(c for c in set(docs) - set(HOW) if not _is_bench(c))
    assert unknown == [], "commands in the docs with no line in HOW (tests/test_docs_commands.py):\n" + "\n".join(
        f"  {c!r}  ({', '.join(docs[c])})" for c in unknown)
    gone = sorted(set(HOW) - set(docs))
    assert gone == [], f"HOW names commands no doc shows any more: {gone}"
    assert any(_is_bench(c) for c in docs)          # the benchmarks' lines are checked by their scripts' parsers


def test_every_test_named_in_how_exists():
    for how in HOW.values():
        if how.startswith("test:"):
            path, name = how[5:].split(" -- ")[0].split("::")
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), how


def test_every_recipe_named_in_how_runs_that_command():
    recipes = {h[7:] for h in HOW.values() if h.startswith("recipe:")}
    assert recipes == set(RECIPES), recipes ^ set(RECIPES)
    for cmd, how in HOW.items():
        if how.startswith("recipe:"):
            assert cmd in {_command(c) for c in _recipe_lines(how[7:])}, (how, cmd)


# -- benchmarks: every command line of a bench script the docs show, in a block or in backquotes ----------

def _bench_lines() -> list[str]:
    """Every bench script invocation the docs show: the script and its arguments."""
    out = set()
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for m in re.finditer(r"(?:python3?|\.venv/bin/python) (bench/\w+\.py)([^'`\n]*)|`(bench/\w+\.py)([^`]*)`", text):
            script, rest = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            if not m.group(1) and not rest.strip():
                continue                                           # `bench/x.py` alone names the script
            if "__main__" in (ROOT / script).read_text():           # the others are the scripts' helpers
                out.add(f"{script}{rest.rstrip()}")
    return sorted(out)


def _bench_parser(script: str):
    """The argparse parser ``bench/SCRIPT``'s main() builds, caught as it starts parsing."""
    import argparse

    class Parsed(Exception):
        pass

    def grab(self, args=None, namespace=None):
        raise Parsed(self)

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{Path(script).stem}", ROOT / script)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except ModuleNotFoundError as exc:           # an extra the script needs is not installed
            pytest.skip(f"{script} needs {exc.name}, which is not installed")
        if hasattr(mod, "make_parser"):
            return mod.make_parser()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(argparse.ArgumentParser, "parse_args", grab)
            mp.setattr(sys, "argv", [script])
            with pytest.raises(Parsed) as got:
                mod.main()
        return got.value.args[0]
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.mark.parametrize("line", _bench_lines())
def test_every_bench_command_line_in_the_docs_is_one_its_script_accepts(line):
    script, _, rest = line.partition(" ")
    args = shlex.split(re.sub(r"\[([^\]]*)\]", r"\1", rest))        # a synopsis's [--flag value] as given
    _bench_parser(script).parse_args(args)


# -- builds, in-process ----------------------------------------------------------------------------------

PLACEHOLDERS = {      # files a documented command names as the user's own; made here as the docs describe them
    "my-switch.toml": lambda: (ROOT / "p4gen" / "target" / "tofino.toml").read_text().replace(
        'name = "tofino"', 'name = "my-switch"'),
    "job.toml": lambda: 'slots = 128\nmax_workers = 8\nvariant = "reference"\n',
}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A scratch directory like a checkout's top (docs/ and controller/ beside the user's files), with its own
    build cache, as the working directory."""
    for d in ("docs", "controller"):
        (tmp_path / d).symlink_to(ROOT / d)
    for name, text in PLACEHOLDERS.items():
        (tmp_path / name).write_text(text())
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / ".cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", sorted(c for c, h in HOW.items() if h == "build"))
def test_documented_builds_run_as_written(command, scratch, capsys):
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.startswith("target " if command == "p4gen targets" else "built "), out


def test_the_placeholder_files_are_what_the_docs_describe():
    text = (ROOT / "docs" / "building.md").read_text()
    assert "`--target-file my-switch.toml`" in text or "my-switch.toml" in text
    assert "same keys as p4gen/target/*.toml" in text and "spec fields from TOML" in text


# -- recipes: a doc block run as a shell runs it -----------------------------------------------------------

# name -> the blocks it runs, one after the other: (doc, the block's first command)
RECIPES = {
    "readme-layout": [("README.md", "p4gen plan --target tofino --workers 8")],
    "readme-verify": [("README.md", "p4gen build --slots 512 --target tofino --out t1/")],
    "readme-switch": [("README.md", "ip link add veth1"), ("README.md", "p4gen ctl push bmv2-omni/")],
    "bmv2-load": [("docs/building.md", "ip link add veth1")],
    "controller-session": [("docs/controller.md", "$ p4gen build --target bmv2 --slots 64")],
    "layout-commands": [("docs/layout.md", "p4gen plan --target tofino --workers 8")],
    "testbed-runs": [("docs/testbed.md", "p4gen testbed up --workers 3")],
}


def _recipe_lines(name: str) -> list[str]:
    return [line for doc, first in RECIPES[name] for line in _block_of(doc, first)]


def _block_of(doc: str, first: str) -> list[str]:
    """The command lines of the block of ``doc`` whose first line starts with ``first`` (a ``$`` transcript
    keeps its output lines, each command with its ``$ ``)."""
    for lang, lines in _blocks((ROOT / doc).read_text()):
        if lines and lines[0].strip().startswith(first):
            if first.startswith("$ "):
                return [ln[2:] for ln in lines if ln.startswith("$ ")]
            return [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    raise AssertionError(f"{doc} has no block that starts with {first!r}")


def _transcript(doc: str, first: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines quoted under it) of a ``$`` transcript."""
    for _lang, lines in _blocks((ROOT / doc).read_text()):
        if lines and lines[0].startswith(first):
            out: list[tuple[str, list[str]]] = []
            for ln in lines:
                if ln.startswith("$ "):
                    out.append((_command(ln[2:]), []))
                else:
                    out[-1][1].append(ln)
            return out
    raise AssertionError(f"{doc} has no transcript that starts with {first!r}")


def _matches(quoted: list[str], got: list[str]) -> bool:
    """The lines ``got`` are the ``quoted`` ones, a quoted ``...`` standing for any lines."""
    pattern = "".join(".*?" if q == "..." else re.escape(q + "\n") for q in quoted)
    return re.fullmatch(pattern, "".join(g + "\n" for g in got), re.S) is not None


class Shell:
    """Runs doc lines in ``cwd`` with this interpreter's ``bin`` first on PATH, in a network namespace of
    its own (root): ``cmd &`` in the background (waiting until the port it names accepts connections), ``kill
    %N`` ends the N-th, every other line through ``bash -c``."""

    def __init__(self, cwd: Path):
        if os.geteuid() != 0 or shutil.which("ip") is None:
            pytest.skip("a doc recipe runs in a network namespace of its own: needs root and iproute2")
        self.cwd = cwd
        self.ns = f"p4gtest-doc-{uuid.uuid4().hex[:8]}"
        subprocess.run(["ip", "netns", "add", self.ns], check=True, capture_output=True)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "lo", "up"], check=True, capture_output=True)
        self.env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1",
                        PYTHONUNBUFFERED="1")
        self.background: list[subprocess.Popen] = []

    def _argv(self, line: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, "bash", "-c", line]

    def run(self, line: str, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
        m = re.fullmatch(r"kill %(\d+)", line)
        if m:
            p = self.background[int(m.group(1)) - 1]
            p.terminate()
            p.wait(30)
            return subprocess.CompletedProcess(line, 0, "", "")
        if line.endswith("&"):
            self.start(line[:-1].strip())
            return subprocess.CompletedProcess(line, 0, "", "")
        return subprocess.run(self._argv(line), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout, **kw)

    def start(self, line: str) -> subprocess.Popen:
        p = subprocess.Popen(self._argv(f"exec {line}"), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.background.append(p)
        port = re.search(r"(?:127\.0\.0\.1|0\.0\.0\.0):(\d+)", line)
        if port:
            deadline = time.monotonic() + 60
            probe = f"exec 3<>/dev/tcp/127.0.0.1/{port.group(1)}"
            while subprocess.run(self._argv(probe), capture_output=True).returncode != 0:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{line!r} did not listen on port {port.group(1)}: {p.communicate()}")
                time.sleep(0.2)
        return p

    def close(self) -> None:
        for p in self.background:
            if p.poll() is None:
                p.kill()
            p.wait(30)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


@contextlib.contextmanager
def shell(cwd: Path):
    sh = Shell(cwd)
    try:
        yield sh
    finally:
        sh.close()


def _run_block(name: str, cwd: Path) -> list[subprocess.CompletedProcess]:
    out = []
    with shell(cwd) as sh:
        for line in _recipe_lines(name):
            res = sh.run(_command(line))
            assert res.returncode == 0, (line, res.stdout[-3000:], res.stderr[-3000:])
            out.append(res)
    return out


def _needs(*tools: str) -> None:
    gone = [t for t in tools if shutil.which(t) is None]
    if gone:
        pytest.skip(f"{' and '.join(gone)} not on PATH")


@pytest.mark.slow
def test_readme_layout_search_then_build(scratch):
    res = _run_block("readme-layout", scratch)
    assert "layout written to p4gen-out/tofino-layout.json" in res[0].stdout
    assert (scratch / "p4gen-out" / "tofino-best" / "program.p4").is_file()


@pytest.mark.slow
def test_readme_build_then_verify(scratch):
    res = _run_block("readme-verify", scratch)
    assert res[0].stdout.splitlines()[-1] == "report: t1/verify.json", res[0].stdout[-1000:]


@pytest.mark.slow
def test_readme_software_switch_and_controller(scratch):
    assert main(["build", "--slots", "512", "--target", "bmv2", "--protocol", "omnireduce", "--out", "bmv2-omni/"]) == 0
    res = _run_block("readme-switch", scratch)
    assert res[2].stdout.startswith("pushed bmv2-omni: P4Info p4gen-omnireduce-hardened (")
    assert res[3].stdout.startswith("job 1: 4 workers, slots 0..31, multicast group 1;"), res[3].stdout


@pytest.mark.slow
def test_building_md_bmv2_load_recipe(scratch):
    _needs("p4c-bm2-ss", "simple_switch_grpc")
    res = _run_block("bmv2-load", scratch)
    assert res[1].stdout.splitlines()[1].startswith("  checked by p4c-bm2-ss Version ")
    assert res[3].stdout.startswith("pushed bmv2: P4Info p4info.p4c.txtpb (") and "(device 0)" in res[3].stdout


@pytest.mark.slow
def test_controller_md_session_prints_what_it_quotes(scratch):
    steps = _transcript("docs/controller.md", "$ p4gen build --target bmv2 --slots 64")
    assert [c for c, _ in steps] == [_command(c) for c in _recipe_lines("controller-session")]
    with shell(scratch) as sh:
        for cmd, quoted in steps:
            if cmd.endswith("&"):
                server = sh.start(cmd[:-1].strip())
                got = [server.stdout.readline().rstrip("\n")]
            else:
                res = sh.run(cmd)
                assert res.returncode == 0, (cmd, res.stderr)
                got = res.stdout.splitlines()
            assert not quoted or _matches(quoted, got), (cmd, quoted, got)      # a command quoted without output


@pytest.mark.slow
def test_layout_md_commands(scratch):
    res = _run_block("layout-commands", scratch)
    assert res[1].stdout.startswith("built switchml (hardened) for tofino: ")
    assert res[2].stdout.startswith("built switchml (hardened) for tofino: ")
    assert "plan --jobs: 3 jobs on tofino" in res[3].stdout


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mininet") is None, reason="mininet is not installed (the testbed extra)")
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (the torch extra)")
def test_testbed_md_runs(scratch):
    from p4gen.testbed.procs import missing_requirements

    why = missing_requirements()
    if why:
        pytest.skip(why)
    lines = [_command(c) for c in _recipe_lines("testbed-runs")]
    assert lines[0] == "p4gen testbed up --workers 3 --switch soft"        # tests/test_testbed_net.py runs it
    with shell(scratch) as sh:
        for line in lines[1:]:
            stdin = "h1 ping -c 1 h2\nexit\n" if line.endswith("--cli") else ""
            res = sh.run(line, input=stdin)
            assert res.returncode == 0, (line, res.stdout[-2000:], res.stderr[-3000:])
            if line.startswith("p4gen testbed run"):
                assert re.search(r"^\w+ +\d+ +star\d+ .* yes$", res.stdout, re.M), (line, res.stdout)
            else:
                assert res.stdout.splitlines()[-1].startswith("cleanup: "), res.stdout
