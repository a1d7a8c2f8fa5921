"""Output safety: no path form makes p4gen lose, move or half-overwrite a user's file.

Every test takes the bytes of the user's files before and after (``snapshot``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from p4gen import build as buildmod
from p4gen import builddir as outmod
from p4gen import filewrite
from p4gen.cli import main
from p4gen.errors import OutputError
from p4gen.spec import make_spec
from p4gen.target import load_target

USER = {"notes.txt": b"my notes\n", "data.bin": bytes(range(256)), "sub/deep.txt": b"deep\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: file bytes, symlink targets, directories."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def put_user_files(d: Path) -> dict[str, object]:
    for rel, data in USER.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    return {k: v for k, v in snapshot(d).items() if k in USER or k == "sub"}


def user_part(d: Path) -> dict[str, object]:
    return {k: v for k, v in snapshot(d).items() if k in USER or k == "sub"}


def p4gen_build(*args: str, cwd: Path | None = None) -> int:
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return main(["build", *([] if "--target-file" in args else ["--target", "bmv2"]), *args])
    finally:
        os.chdir(old)


def assert_consistent(d: Path) -> None:
    """The marker lists exactly p4gen's files with their digests, and nothing hidden is left over."""
    mark = json.loads((d / outmod.MARKER).read_text())
    for name, digest in mark["files"].items():
        assert hashlib.sha256((d / name).read_bytes()).hexdigest() == digest, name
    hidden = [p.name for p in d.iterdir() if p.name.startswith(".") and p.name != outmod.MARKER]
    assert hidden == [], hidden


@pytest.mark.slow
def test_dot_in_an_output_directory_keeps_user_files_over_many_runs(tmp_path):
    d = tmp_path / "D"
    assert p4gen_build("--slots", "64", "--out", str(d)) == 0
    before = put_user_files(d)
    for i in range(12):
        assert p4gen_build("--slots", str(64 + i), "--out", ".", cwd=d) == 0
        assert user_part(d) == before
    assert json.loads((d / "plan.json").read_text())["params"]["slots"] == 75
    assert_consistent(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "cache"]


def test_dotdot_from_a_subdirectory(tmp_path):
    d = tmp_path / "D"
    assert p4gen_build("--slots", "64", "--out", str(d)) == 0
    before = put_user_files(d)
    for _ in range(3):
        assert p4gen_build("--slots", "32", "--out", "..", cwd=d / "sub") == 0
        assert user_part(d) == before
    assert_consistent(d)


@pytest.mark.parametrize("form", ["rel", "rel/", "./rel//", "x/../rel"])
def test_relative_paths_and_trailing_slashes(tmp_path, form):
    (tmp_path / "x").mkdir()
    assert p4gen_build("--slots", "16", "--out", form, cwd=tmp_path) == 0
    before = put_user_files(tmp_path / "rel")
    assert p4gen_build("--slots", "32", "--out", form, cwd=tmp_path) == 0
    assert user_part(tmp_path / "rel") == before
    assert_consistent(tmp_path / "rel")


def test_symlink_to_an_output_directory_stays_a_link(tmp_path):
    real = tmp_path / "real"
    assert p4gen_build("--slots", "16", "--out", str(real)) == 0
    before = put_user_files(real)
    link = tmp_path / "LINK"
    link.symlink_to(real)
    assert p4gen_build("--slots", "32", "--out", str(link)) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert user_part(real) == before
    assert json.loads((real / "plan.json").read_text())["params"]["slots"] == 32
    assert_consistent(real)


def test_symlink_to_a_foreign_directory_is_refused(tmp_path, capsys):
    real = tmp_path / "mine"
    real.mkdir()
    before = put_user_files(real)
    link = tmp_path / "LINK"
    link.symlink_to(real)
    whole = snapshot(tmp_path / "mine")
    assert p4gen_build("--out", str(link)) == 1
    assert "is not empty and was not created by p4gen" in capsys.readouterr().err
    assert snapshot(real) == whole and user_part(real) == before and link.is_symlink()


def test_dangling_symlink_and_symlink_to_a_file_are_refused(tmp_path, capsys):
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert p4gen_build("--out", str(dangling)) == 1
    assert capsys.readouterr().err == (f"p4gen: error: output '{dangling}' is a symlink to '{tmp_path / 'nowhere'}', "
                                       f"which does not exist; p4gen does not create a symlink's target\n")
    assert not (tmp_path / "nowhere").exists() and dangling.is_symlink()
    f = tmp_path / "file"
    f.write_bytes(b"user data")
    tofile = tmp_path / "tofile"
    tofile.symlink_to(f)
    assert p4gen_build("--out", str(tofile)) == 1
    assert capsys.readouterr().err == f"p4gen: error: output '{tofile}' exists and is not a directory\n"
    assert f.read_bytes() == b"user data"


def test_path_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_bytes(b"x")
    assert p4gen_build("--out", str(f) + "/") == 1
    assert "is not a directory" in capsys.readouterr().err
    assert f.read_bytes() == b"x"
    assert p4gen_build("--out", str(f / "below")) == 1
    assert capsys.readouterr().err == (f"p4gen: error: cannot create output directory '{f / 'below'}': "
                                       f"'{f}' is not a directory\n")
    assert f.read_bytes() == b"x"


def test_empty_out_and_empty_target_file_are_errors(tmp_path, capsys):
    assert p4gen_build("--out", "", cwd=tmp_path) == 1
    assert capsys.readouterr().err == "p4gen: error: output path '' is empty; name a directory\n"
    assert main(["build", "--target-file", "", "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err == "p4gen: error: target file path '' is empty; name a file\n"
    assert main(["build", "--target", "bmv2,tofino", "--out", ""]) == 1
    assert "output path '' is empty" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _run_without_override(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a process that file permissions bind: as root, without CAP_DAC_OVERRIDE (util-linux setpriv)."""
    code = "import sys; from p4gen.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, P4GEN_CACHE_DIR=str(cwd / "cache"))
    argv = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root ignores file permissions and util-linux setpriv (to drop that) is not installed")
        argv = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)


def test_read_only_parent_and_read_only_output(tmp_path):
    os.chmod(tmp_path, 0o755)
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "keep.txt").write_bytes(b"k")
    out = ro / "built"
    assert p4gen_build("--slots", "16", "--out", str(out)) == 0
    before = put_user_files(out)
    whole = snapshot(ro)
    os.chmod(out, 0o555)
    os.chmod(ro, 0o555)
    try:
        res = _run_without_override(["build", "--target", "bmv2", "--out", str(ro / "new")], tmp_path)
        assert res.returncode == 1 and res.stderr == (f"p4gen: error: cannot create output directory "
                                                      f"'{ro / 'new'}': Permission denied\n")
        res = _run_without_override(["build", "--target", "bmv2", "--slots", "32", "--out", str(out)], tmp_path)
        assert res.returncode == 1 and res.stderr == (f"p4gen: error: cannot write into output directory "
                                                      f"'{out}': Permission denied\n")
    finally:
        os.chmod(ro, 0o755)
        os.chmod(out, 0o755)
    assert snapshot(ro) == whole and user_part(out) == before


@pytest.mark.slow
def test_two_builds_racing_into_one_directory(tmp_path):
    d = tmp_path / "D"
    assert p4gen_build("--slots", "16", "--out", str(d)) == 0
    before = put_user_files(d)
    procs = [subprocess.Popen([sys.executable, "-m", "p4gen.cli", "build", "--target", "bmv2", "--slots",
                               str(20 + i), "--out", str(d)], env=dict(os.environ),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(5)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert user_part(d) == before
    assert_consistent(d)
    plan = json.loads((d / "plan.json").read_text())
    report = json.loads((d / "report.json").read_text())
    assert plan["params"]["slots"] in range(20, 25) and report["slots"] == plan["params"]["slots"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "cache"]


def test_force_into_a_directory_where_an_output_name_is_a_directory(tmp_path, capsys):
    d = tmp_path / "foreign"
    d.mkdir()
    put_user_files(d)
    (d / "plan.json").mkdir()
    (d / "program.p4").write_bytes(b"my program")
    whole = snapshot(d)
    assert p4gen_build("--out", str(d), "--force") == 1
    assert capsys.readouterr().err == (f"p4gen: error: '{d / 'plan.json'}' is not a regular file; p4gen writes a "
                                       f"file of that name and will not replace it\n")
    assert snapshot(d) == whole
    (d / "plan.json").rmdir()
    (d / "plan.json").symlink_to(d / "notes.txt")
    whole = snapshot(d)
    assert p4gen_build("--out", str(d), "--force") == 1
    assert "is a symlink; p4gen writes a file of that name" in capsys.readouterr().err
    assert snapshot(d) == whole


def test_a_failure_while_renaming_leaves_the_directory_exactly_as_it_was(tmp_path, monkeypatch):
    d = tmp_path / "D"
    assert p4gen_build("--slots", "16", "--out", str(d)) == 0
    put_user_files(d)
    whole = snapshot(d)
    inodes = {p.name: p.stat().st_ino for p in d.iterdir()}
    real_replace = os.replace
    calls = {"n": 0}

    ino = os.stat(d).st_ino

    def failing(src, dst, **kw):            # the third rename into D fails
        if "dst_dir_fd" in kw and os.fstat(kw["dst_dir_fd"]).st_ino == ino:
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError(28, "No space left on device")
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(filewrite.os, "replace", failing)
    with pytest.raises(OutputError, match="No space left on device"):
        buildmod.build(make_spec(slots=32), load_target("bmv2"), d)
    monkeypatch.undo()
    assert calls["n"] >= 3
    assert snapshot(d) == whole
    assert {p.name: p.stat().st_ino for p in d.iterdir()} == inodes


def test_a_failed_build_into_a_new_directory_leaves_nothing(tmp_path, monkeypatch):
    real_replace = os.replace

    def failing(src, dst, **kw):
        if str(dst).endswith("report.txt"):
            raise OSError(5, "Input/output error")
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(filewrite.os, "replace", failing)
    with pytest.raises(OutputError, match="Input/output error"):
        buildmod.build(make_spec(slots=32), load_target("bmv2"), tmp_path / "a" / "b" / "c")
    assert not (tmp_path / "a").exists()


def test_stale_own_files_go_only_while_unchanged(tmp_path):
    d = tmp_path / "D"
    assert p4gen_build("--slots", "16", "--out", str(d)) == 0
    mark = json.loads((d / outmod.MARKER).read_text())
    for name, data in (("compile.log", b"old log"), ("program.json", b'{"old": 1}')):
        (d / name).write_bytes(data)
        mark["files"][name] = hashlib.sha256(data).hexdigest()
    (d / outmod.MARKER).write_text(json.dumps(mark))
    (d / "program.json").write_bytes(b'{"edited by the user": 1}')
    assert p4gen_build("--slots", "32", "--out", str(d)) == 0
    assert not (d / "compile.log").exists()                       # p4gen's own, unchanged: removed
    assert (d / "program.json").read_bytes() == b'{"edited by the user": 1}'   # changed since: kept
    assert_consistent(d)


def test_multi_target_build_is_all_or_nothing(tmp_path, capsys):
    out = tmp_path / "all"
    assert main(["build", "--target", "bmv2,tofino", "--slots", "30000", "--variant", "hardened", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("p4gen: error: slots=30000 needs 66 SRAM blocks in stage 8") and err.count("\n") == 1
    assert err.endswith("; nothing was written (a build for several targets writes all of them or none)\n")
    assert not out.exists()
    out.mkdir()
    (out / "tofino").mkdir()
    (out / "tofino" / "plan.json").mkdir()
    (out / "tofino" / outmod.MARKER).write_text(json.dumps({"generator": "p4gen", "files": {}}))
    whole = snapshot(out)
    assert main(["build", "--target", "bmv2,tofino", "--slots", "64", "--out", str(out)]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert snapshot(out) == whole


def test_multi_target_failure_while_writing_restores_every_target(tmp_path, monkeypatch):
    out = tmp_path / "all"
    assert main(["build", "--target", "bmv2,tofino", "--slots", "64", "--out", str(out)]) == 0
    put_user_files(out / "bmv2")
    whole = snapshot(out)
    real_replace = os.replace

    tofino = os.stat(out / "tofino").st_ino

    def failing(src, dst, **kw):
        if "dst_dir_fd" in kw and os.fstat(kw["dst_dir_fd"]).st_ino == tofino and str(dst).endswith("report.json"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(filewrite.os, "replace", failing)
    with pytest.raises(OutputError, match="nothing was written"):
        buildmod.build_many(make_spec(slots=32), [load_target("bmv2"), load_target("tofino")], out)
    monkeypatch.undo()
    assert snapshot(out) == whole


@pytest.mark.parametrize("name", ["/tmp/x", "../../x", "a/b", "..", ".hidden", ""])
def test_profile_names_cannot_leave_the_output_root(tmp_path, capsys, name):
    text = (Path(buildmod.__file__).parent / "target" / "bmv2.toml").read_text()
    path = tmp_path / "t.toml"
    path.write_text(text.replace('name = "bmv2"', f"name = {json.dumps(name)}"))
    work = tmp_path / "w"
    work.mkdir()
    before = snapshot(tmp_path)
    assert p4gen_build("--target-file", str(path), cwd=work) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"name={name!r} must be" in err or "must be a non-empty string" in err
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_concurrent_builds_in_threads_keep_user_files(tmp_path):
    """16 builds of a warm cache released at once into one directory that holds user files, 5 times."""
    d = tmp_path / "D"
    assert p4gen_build("--slots", "8", "--out", str(d)) == 0
    before = put_user_files(d)
    for slots in range(8, 24):
        buildmod.build(make_spec(slots=slots), load_target("bmv2"), tmp_path / "warm" / str(slots))
    for _round in range(5):
        errors = []
        gate = threading.Barrier(16)

        def one(slots):
            gate.wait()
            try:
                buildmod.build(make_spec(slots=slots), load_target("bmv2"), d)
            except Exception as exc:  # noqa: BLE001 - collected for the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(8 + i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and user_part(d) == before
        assert_consistent(d)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "cache", "warm"]
