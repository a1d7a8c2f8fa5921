"""Nothing is written through a planted name: at every path p4gen writes, a symlink, a hard link, a FIFO,
someone else's file or a file named like p4gen's temporary changes nothing outside p4gen's own files.

Each test keeps a victim directory outside the paths p4gen writes and compares it byte for byte before
and after.  The testbed's plans are built in a child process whose temporary directory (``TMPDIR``) is
the test's own, so no name in the machine's shared /tmp is touched.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from p4gen.build import build
from p4gen.cli import main
from p4gen.spec import make_spec
from p4gen.target import load_target

HERE = Path(__file__).resolve().parent
JOBS = HERE.parent / "docs" / "examples" / "three-jobs.toml"
PLAN = ["plan", "--target", "bmv2", "--workers", "4", "--link-gbps", "1", "--rtt-us", "50", "--size", "1MiB",
        "--no-certify"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def snapshot(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            out[rel] = ("link", os.readlink(p)) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    (v / "dir").mkdir(parents=True)
    for name in ("a", "b", "c", "d", "e", "f"):
        (v / name).write_bytes(f"the victim's {name}\n".encode())
    return v


def one_line(capsys, *parts: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("p4gen: error: "), err
    for p in parts:
        assert p in err, err
    return err


def small_build(out: Path) -> Path:
    build(make_spec(slots=16, max_workers=2), load_target("bmv2"), out, use_cache=False)
    return out


def build_plan_in_child(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """``p4gen.testbed.plans.build_plan('switchml', 4)`` in a process whose temporary directory is ``tmp``."""
    code = ("import sys\nfrom p4gen.errors import P4genError\nfrom p4gen.testbed.plans import build_plan\n"
            "try:\n    print(build_plan('switchml', 4))\nexcept P4genError as exc:\n"
            "    print(f'p4gen: error: {exc}', file=sys.stderr)\n    sys.exit(1)\n")
    env = dict(os.environ, TMPDIR=str(tmp), P4GEN_CACHE_DIR=str(tmp.parent / "cache"))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------- every path at once (the Done-when line)
def test_a_planted_symlink_at_every_path_p4gen_writes_changes_no_file_outside_its_own(tmp_path, capsys):
    v = victim(tmp_path)
    before = snapshot(v)
    b = small_build(tmp_path / "b")
    (b / "verify.json").symlink_to(v / "a")                               # verify's report
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1"]) == 1
    one_line(capsys, "verify.json", "is a symbolic link; p4gen does not write through it")
    elsewhere = tmp_path / "report.json"
    elsewhere.symlink_to(v / "b")                                         # verify --json PATH
    assert main(["verify", str(b), "--workers", "2", "--jobs", "1", "--json", str(elsewhere)]) == 1
    one_line(capsys, "is a symbolic link")
    layout = tmp_path / "layout.json"
    layout.symlink_to(v / "c")                                            # p4gen plan --out FILE
    assert main(PLAN + ["--out", str(layout)]) == 1
    one_line(capsys, "layout file", "is a symbolic link")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job-rack-a.toml").symlink_to(v / "d")                        # p4gen plan --jobs: a job file
    assert main(["plan", "--target", "tofino", "--jobs", str(JOBS), "--out", str(jobs)]) == 1
    one_line(capsys, "job file", "is a symbolic link")
    (jobs / "job-rack-a.toml").unlink()
    (jobs / "layout.json").symlink_to(v / "e")                            # ... and its layout file
    assert main(["plan", "--target", "tofino", "--jobs", str(JOBS), "--out", str(jobs)]) == 1
    one_line(capsys, "layout file", "is a symbolic link")
    assert sorted(p.name for p in jobs.iterdir()) == ["layout.json"]      # nothing written beside it
    (b / "plan.json").unlink()
    (b / "plan.json").symlink_to(v / "f")                                 # a build's own output name
    assert main(["build", "--target", "bmv2", "--slots", "16", "--workers", "2", "--out", str(b)]) == 1
    one_line(capsys, "is a symlink; p4gen writes a file of that name")
    t = tmp_path / "t"
    t.mkdir()
    (t / "p4g-plans").mkdir()
    (t / "p4g-plans" / "bmv2-switchml").symlink_to(v / "dir")             # the testbed's plans, by their old name
    res = build_plan_in_child(t)
    assert res.returncode == 0, res.stderr
    assert not Path(res.stdout.strip()).resolve().is_relative_to(v)
    root = t / f"p4gen-{os.geteuid()}"
    for p in [root] + list(root.iterdir()):
        p.rename(tmp_path / f"moved-{p.name}") if p != root else None
    root.rmdir()
    root.symlink_to(v / "dir")                                            # ... and the private root itself
    res = build_plan_in_child(t)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "is a symbolic link" in res.stderr, res.stderr
    assert snapshot(v) == before


# ------------------------------------------------------------------- item 1: verify's report
@pytest.mark.slow
def test_verify_writes_its_report_only_over_its_own_and_never_through_a_link(tmp_path, capsys):
    v = victim(tmp_path)
    before = snapshot(v)
    b = small_build(tmp_path / "b")
    report = b / "verify.json"
    args = ["verify", str(b), "--workers", "2", "--jobs", "1"]
    report.symlink_to(v / "a")
    assert main(args) == 1
    one_line(capsys, f"verify report {str(report)!r} is a symbolic link; p4gen does not write through it")
    report.unlink()
    os.link(v / "b", report)                                              # a hard link: another name of b
    assert main(args) == 1
    one_line(capsys, f"verify report {str(report)!r} exists and is not as p4gen wrote it")
    report.unlink()
    os.mkfifo(report)
    assert main(args) == 1
    one_line(capsys, "exists and is not a regular file")
    report.unlink()
    report.write_text('{"my": "notes"}\n')
    assert main(args) == 1
    one_line(capsys, "exists and is not as p4gen wrote it")
    assert report.read_text() == '{"my": "notes"}\n'
    report.unlink()
    assert main(args) == 0                                                # a new report
    first = report.stat().st_ino
    assert main(args) == 0                                                # p4gen's own, unchanged: replaced
    assert report.stat().st_ino != first and json.loads(report.read_text())["ok"] is True
    assert stat.S_ISREG(report.lstat().st_mode) and report.lstat().st_nlink == 1
    assert snapshot(v) == before
    assert [p.name for p in b.iterdir() if p.name.startswith(".verify.json")] == []   # no temporary left


# ------------------------------------------------------------------- item 2: the testbed's plans
def test_the_testbed_builds_its_plans_in_a_private_directory_not_under_a_fixed_shared_name(tmp_path):
    v = victim(tmp_path)
    (v / "dir" / "plan.json").write_text('{"the victim": "plan"}\n')
    before = snapshot(v)
    t = tmp_path / "t"
    (t / "p4g-plans").mkdir(parents=True)
    (t / "p4g-plans" / "bmv2-switchml").symlink_to(v / "dir")
    res = build_plan_in_child(t)
    assert res.returncode == 0, res.stderr
    plan_dir = Path(res.stdout.strip())
    assert (plan_dir / "plan.json").is_file() and not plan_dir.resolve().is_relative_to(v)
    root = t / f"p4gen-{os.geteuid()}"
    st = root.lstat()
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert plan_dir.resolve().is_relative_to(root)
    assert snapshot(v) == before
    os.chmod(root, 0o755)                                                 # opened to others: refused
    res = build_plan_in_child(t)
    assert res.returncode == 1 and res.stderr == (f"p4gen: error: testbed directory {str(root)!r} is not private to "
                                                  f"this user (owner uid {os.geteuid()}, mode 0755); p4gen keeps its "
                                                  f"files only in a directory of its user with mode 0700 (remove it, "
                                                  f"or choose another)\n")


# ------------------------------------------------------------------- item 7: a file named like the temporary
def test_plan_leaves_a_file_named_like_its_temporary_alone(tmp_path, capsys):
    out = tmp_path / "l.json"
    mine = tmp_path / f".l.json.tmp-{os.getpid()}"                        # the name p4gen plan used to write first
    mine.write_text("the user's file\n")
    assert main(PLAN + ["--out", str(out)]) == 0, capsys.readouterr().err
    assert mine.read_text() == "the user's file\n"
    assert out.is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == [mine.name, "l.json"]


KILLED_WRITE = r"""
import os, signal, sys
from p4gen import filewrite
from p4gen.errors import OutputError
def killed(self, *a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
filewrite.Directory.rename = killed             # killed between writing the temporary and renaming it
filewrite.write_file(sys.argv[1], '{"a": 2}', filewrite.JSON, "report", OutputError)
"""


def test_the_temporary_of_a_killed_write_is_removed_by_the_next_write_of_that_name(tmp_path):
    """A p4gen killed while it wrote a file leaves its hidden temporary; the next write of that name removes
    it (its content carries p4gen's digest), and leaves a user's file of a temporary's form alone."""
    from p4gen.errors import OutputError
    from p4gen.filewrite import JSON, write_file

    out = tmp_path / "r.json"
    write_file(out, '{"a": 1}', JSON, "report", OutputError)
    res = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == -9, res.stderr
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".r.json.p4gen-")]
    assert len(left) == 1 and json.loads((tmp_path / left[0]).read_text())["a"] == 2
    mine = tmp_path / ".r.json.p4gen-0123456789ab"
    mine.write_text("the user's file\n")
    write_file(out, '{"a": 3}', JSON, "report", OutputError)
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name, "r.json"]
    assert json.loads(out.read_text())["a"] == 3 and mine.read_text() == "the user's file\n"
