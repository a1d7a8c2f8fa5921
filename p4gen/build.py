"""Build orchestration: plan, emit, cache and write an output directory.

Builds are content-addressed.  The key covers the generator version and
source, every template, the normalised spec and the target profile (and,
for ``--compile``, the compiler's version).  A cache entry is a directory
with a manifest of SHA-256 digests; an entry whose files do not match its
manifest is treated as a miss and rebuilt.  Cache entries are written to a
temporary sibling first and renamed into place.  Output directories are
written by :mod:`p4gen.builddir`, which never loses a user file and leaves the
destination as it was when a build fails.  A multi-target build
(:func:`build_many`) is all or nothing: every target is planned and staged
before any is written, and a failure anywhere writes none.

Like ccache's direct mode, a build's raw inputs (the command-line values
and the bytes of the spec and target files, with the generator's and the
templates' digests) also map to the key of the build they made
(:func:`direct_key`, :func:`build_direct`): a warm build then finds its
entry without normalising the spec or loading the target, so it imports
neither (nor dataclasses, TOML or typing, which this module avoids for it).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from . import __version__
from .emit.templates import template_sources
from .errors import CompileError, OutputError, P4genError
from .builddir import MARKER, OUTPUTS, OWN_NAMES, PROGRAM, check as check_output, marker, resolve, write_outputs

TYPE_CHECKING = False        # (typing.TYPE_CHECKING without importing typing on a warm build)
if TYPE_CHECKING:
    from .pass_shape import PassShape
    from .plan import Plan
    from .spec import Spec
    from .target import TargetProfile

__all__ = ["MARKER", "OUTPUTS", "PROGRAM", "BuildResult", "build", "build_direct", "build_key", "build_many",
           "cache_root", "direct_key", "produce", "remember_direct"]


def cache_root() -> Path:
    env = os.environ.get("P4GEN_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "p4gen"


def _generator_digest() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for sub in ("", "decision", "emit", "layout", "ops", "plan", "planner", "spec", "target", "wire"):
        folder = root.joinpath(sub) if sub else root
        for p in sorted(folder.iterdir(), key=lambda p: p.name):
            if p.name.endswith((".py", ".toml")):
                h.update(p.name.encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def build_key(spec: Spec, profile: TargetProfile, extra: dict | None = None) -> str:
    doc = {
        "generator": __version__,
        "generator_source": _generator_digest(),
        "templates": template_sources(),
        "spec": spec.to_dict(),
        "target": profile.to_dict(),
        "extra": extra or {},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BuildResult:
    """One build: where it was written, its key, whether the cache had it, its plan, its report and its
    file digests.

    ``plan`` is the :class:`~p4gen.plan.Plan` (parsed on first use when the build came from
    :func:`build_direct`); ``report`` is report.json as parsed JSON, which a warm build reads instead of
    parsing its plan."""

    def __init__(self, out_dir: Path, key: str, cache_hit: bool, plan: "Plan | None" = None,
                 files: dict[str, str] | None = None, plan_json: bytes | None = None,
                 report_json: bytes | None = None):
        self.out_dir, self.key, self.cache_hit, self.files = out_dir, key, cache_hit, dict(files or {})
        self._plan, self._plan_json, self._report_json = plan, plan_json, report_json

    @property
    def plan(self) -> "Plan":
        if self._plan is None:
            from .plan import Plan

            self._plan = Plan.from_json(self._plan_json.decode(), "cached plan.json")
        return self._plan

    @property
    def report(self) -> dict:
        if self._report_json is None:
            from .emit.report import report_dict

            return report_dict(self.plan)
        return json.loads(self._report_json)

    def __repr__(self) -> str:
        return f"BuildResult(out_dir={self.out_dir!r}, key={self.key!r}, cache_hit={self.cache_hit!r})"


def render_all(plan: Plan) -> dict[str, bytes]:
    # imported here so that a cache hit never loads Jinja or protobuf
    from .emit.p4 import render_p4
    from .emit.p4info import render_p4info
    from .emit.report import render_report_json, render_report_text

    return {
        PROGRAM: render_p4(plan).encode(),
        "p4info.txt": render_p4info(plan).encode(),
        "plan.json": plan.to_json().encode(),
        "report.txt": render_report_text(plan).encode(),
        "report.json": render_report_json(plan).encode(),
    }


# -- cache -------------------------------------------------------------------

def _cache_get(key: str, root: Path | None = None) -> dict[str, bytes] | None:
    entry = (root or cache_root()) / key[:2] / key
    manifest_path = entry / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        files = {}
        for name, digest in manifest["files"].items():
            if name not in OWN_NAMES:
                return None
            data = (entry / name).read_bytes()
            if _sha(data) != digest:
                return None
            files[name] = data
        return files
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_put(key: str, files: dict[str, bytes], root: Path | None = None) -> None:
    import shutil

    from .filewrite import WORK, make_private_subdir, write_file

    parent = (root or cache_root()) / key[:2]
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = make_private_subdir(parent, f".{key[:12]}-")
    except OSError:
        return  # an unwritable cache only costs speed
    try:
        for name, data in files.items():
            write_file(tmp / name, data, WORK, "build cache file", OutputError)
        write_file(tmp / "manifest.json", json.dumps({"key": key, "files": {n: _sha(d) for n, d in files.items()}},
                                                     indent=1, sort_keys=True), WORK, "build cache file", OutputError)
        final = parent / key
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)   # corrupt entry being replaced
        os.replace(tmp, final)
    except (OSError, OutputError):
        shutil.rmtree(tmp, ignore_errors=True)


# -- compilers -----------------------------------------------------------------

# The open Tofino includes (p4c's tna.p4 / t2na.p4) refuse to be read unless the target is defined:
# "#error Target does not support tofino native architecture".
TOFINO_DEFINE = {"tna": "-D__TARGET_TOFINO__=1", "t2na": "-D__TARGET_TOFINO__=2"}


def find_compiler(arch: str, *, backend: bool = True) -> tuple[str, list[str]] | None:
    """(name, argv prefix) of the compiler available for ``arch``, or None.

    TNA / T2NA programs go to the Tofino compiler (``bf-p4c`` or p4c's ``p4c-barefoot``: see
    :mod:`p4gen.tofino_compiler`) when it is on PATH and ``backend`` is true; otherwise to
    ``p4test``, p4c's front end, with ``-D__TARGET_TOFINO__=1`` (``=2`` for T2NA) and, when
    ``P4GEN_TNA_INCLUDE`` is set, ``-I`` that directory.
    """
    import shutil

    if arch == "v1model":
        exe = shutil.which("p4c-bm2-ss")
        if exe:
            return "p4c-bm2-ss", [exe, "--std", "p4-16", "--arch", "v1model"]
        exe = shutil.which("p4test")
        if exe:
            return "p4test", [exe, "--std", "p4-16"]
        return None
    if backend:
        from . import tofino_compiler

        found = tofino_compiler.find()
        if found is not None:
            return found[0], [found[1]]
    exe = shutil.which("p4test")
    if exe:
        inc = os.environ.get("P4GEN_TNA_INCLUDE")
        argv = [exe, "--std", "p4-16", TOFINO_DEFINE[arch]] + (["-I", inc] if inc else [])
        return "p4test", argv
    return None


def compiler_version(argv: list[str]) -> str:
    from .toolrun import run

    rc, text = run([argv[0], "--version"], seconds=60)
    if rc is None:
        raise CompileError(f"{argv[0]} --version did not answer within 60 s")
    return text.strip()


# A directory where compiles are kept by what determines them (the compiler, its version, its arguments, the
# program): a program compiled before by the same compiler is not compiled again, whatever build made it.
# Unset, nothing is kept beyond the build cache (which keys builds by their spec); the test suite sets it to
# a directory of its own run, so no configuration is compiled twice in a run.
COMPILE_CACHE_ENV = "P4GEN_COMPILE_CACHE"


def _compile_key(arch: str, name: str, argv: list[str], program: bytes) -> str:
    exe = os.path.realpath(argv[0])
    doc = {"arch": arch, "compiler": name, "exe": exe, "version": compiler_version(argv), "args": argv[1:],
           "program": hashlib.sha256(program).hexdigest()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def compile_program(arch: str, program: bytes, *, backend: bool = True) -> dict[str, bytes]:
    """The files a compile of ``program`` adds to a build: its log and the compiler's outputs.
    A refusal raises :class:`p4gen.tofino_compiler.CompileFailed`, which carries the log.  With
    ``P4GEN_COMPILE_CACHE`` set, a program that compiler compiled before is taken from there."""
    found = find_compiler(arch, backend=backend)
    if found is None:
        need = ("p4c-bm2-ss or p4test" if arch == "v1model" else
                "the Tofino compiler (bf-p4c or p4c-barefoot) or p4test (with P4GEN_TNA_INCLUDE pointing at tna.p4)")
        raise CompileError(f"--compile needs {need} on PATH; none was found")
    kept = os.environ.get(COMPILE_CACHE_ENV)
    if not kept:
        return _compile(arch, program, *found)
    key = _compile_key(arch, *found, program)
    files = _cache_get(key, Path(kept))
    if files is None:
        files = _compile(arch, program, *found)
        _cache_put(key, files, Path(kept))
    return files


def _compile(arch: str, program: bytes, name: str, argv: list[str]) -> dict[str, bytes]:
    from .tofino_compiler import NAMES as TOFINO_COMPILERS, TIMEOUT_NOTE, CompileFailed, compile_tna, first_error

    if name in TOFINO_COMPILERS:
        return compile_tna(arch, program, PROGRAM)
    import tempfile

    from .toolrun import log_bytes, read_output, run, timeout

    seconds = timeout()
    with tempfile.TemporaryDirectory(prefix="p4gen-compile-") as tmp:
        from .filewrite import WORK, write_file

        src = write_file(Path(tmp) / PROGRAM, program, WORK, "compiler input", CompileError)
        cmd = list(argv)
        outputs: dict[str, Path] = {}
        if name == "p4c-bm2-ss":
            outputs = {"program.json": Path(tmp) / "program.json", "p4info.p4c.txtpb": Path(tmp) / "p4info.p4c.txtpb"}
            cmd += ["-o", str(outputs["program.json"]), "--p4runtime-files", str(outputs["p4info.p4c.txtpb"])]
        cmd.append(str(src))
        rc, text = run(cmd, seconds=seconds)
        shown = " ".join([name] + [PROGRAM if a == str(src) else a.replace(tmp + "/", "") for a in cmd[1:]])
        log = log_bytes(f"$ {shown}\n" + text.replace(str(src), PROGRAM))
        if rc is None:
            raise CompileFailed(f"{name} did not finish {PROGRAM} within {seconds:g} s ({TIMEOUT_NOTE})",
                                {"compile.log": log})
        if rc != 0:
            raise CompileFailed(f"{name} rejected {PROGRAM}: {first_error(text)}", {"compile.log": log})
        files = {"compile.log": log}
        for fname, path in outputs.items():
            if os.path.lexists(path):
                files[fname] = read_output(path, fname, name)
        return files


def produce(spec: Spec, profile: TargetProfile, *, use_cache: bool = True, compile_p4: bool = False,
            shape: PassShape | None = None, note=None) -> tuple[str, dict[str, bytes], Plan, bool]:
    """(key, files, plan, cache hit) of one build; writes nothing but the cache.  ``shape``: a layout
    chosen by ``p4gen plan`` (part of the key).  ``note`` is called with one line before a compile (the
    CLI's progress)."""
    extra = {}
    if compile_p4:
        compiler = find_compiler(profile.arch)
        if compiler is None:
            compile_program(profile.arch, b"")  # raises the one-line error
        extra = {"compiler": compiler[0], "compiler_version": compiler_version(compiler[1])}
    if shape is not None:
        extra = {**extra, "layout": shape.to_dict()}
    key = build_key(spec, profile, extra)
    files = _cache_get(key) if use_cache else None
    hit = files is not None
    if files is None:
        from .planner import make_plan

        plan = make_plan(spec, profile, shape)
        files = render_all(plan)
        if compile_p4:
            from .tofino_compiler import CompileFailed

            if note is not None:
                from .emit.report import CHECKS

                note(f"compiling {PROGRAM} for {profile.name} with {extra['compiler']}: {CHECKS[extra['compiler']]}")
            try:
                files.update(compile_program(profile.arch, files[PROGRAM]))
            except CompileFailed as exc:
                exc.files, exc.key = {**files, **exc.files}, key
                raise
            files.update(_with_check(plan, files, extra["compiler"], extra["compiler_version"]))
        if use_cache:
            _cache_put(key, files)
    else:
        from .plan import Plan

        plan = Plan.from_json(files["plan.json"].decode(), "cached plan.json")
    return key, files, plan, hit


def _with_check(plan: Plan, files: dict[str, bytes], compiler: str, version_text: str) -> dict[str, bytes]:
    """report.txt and report.json of a compiled build: which compiler checked the program and what that
    covers, and the Tofino compiler's allocation beside the prediction when the compile left its logs."""
    from . import tofino_compiler as tc
    from .emit.report import compiled_by, render_report_text, report_dict

    check = compiled_by(compiler, tc.version_label(compiler, version_text))
    doc = {**report_dict(plan), "compiled": check}
    if tc.RESOURCES not in files:
        text = render_report_text(plan, check)
    else:
        alloc = tc.parse(files[tc.RESOURCES], files[tc.PHV], compiler=check["compiler"])
        text = render_report_text(plan, check, allocated=True) + "\n".join(tc.comparison_lines(doc, alloc)) + "\n"
        doc["allocated"] = alloc.to_dict()
    return {"report.txt": text.encode(), "report.json": (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}


def _with_marker(key: str, files: dict[str, bytes]) -> dict[str, bytes]:
    return {**files, MARKER: marker(key, __version__, files)}


def build(spec: Spec, profile: TargetProfile, out_dir: str | Path, *, use_cache: bool = True,
          force: bool = False, compile_p4: bool = False, shape: PassShape | None = None, note=None) -> BuildResult:
    from .tofino_compiler import CompileFailed

    check_output(out_dir, force)                 # refuse before planning
    try:
        key, files, plan, hit = produce(spec, profile, use_cache=use_cache, compile_p4=compile_p4, shape=shape,
                                        note=note)
    except CompileFailed as exc:                 # keep the program and the whole log for the user to read
        write_outputs([(out_dir, _with_marker(exc.key, exc.files))], force)
        raise CompileError(f"{exc}; the whole log is {Path(out_dir) / 'compile.log'}") from None
    write_outputs([(out_dir, _with_marker(key, files))], force)
    return BuildResult(out_dir=Path(out_dir), key=key, cache_hit=hit, plan=plan,
                       files={n: _sha(d) for n, d in files.items()}, report_json=files["report.json"])


# -- direct mode: raw inputs -> build key ------------------------------------------

def direct_key(inputs: dict) -> str:
    """The key of a build's raw inputs (JSON-able: command-line values, digests of the files they
    name), with the generator's and the templates' digests, so a change of either is a miss."""
    doc = {"generator": __version__, "generator_source": _generator_digest(), "templates": template_sources(),
           "inputs": inputs}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _direct_path(dkey: str) -> Path:
    return cache_root() / "direct" / dkey[:2] / dkey


def build_direct(dkey: str, out_dir: str | Path, *, force: bool = False) -> BuildResult | None:
    """The build that raw inputs of key ``dkey`` made before, written to ``out_dir`` from the cache;
    None when they made none (or its entry is gone or corrupt): then build as usual and
    :func:`remember_direct`.  A remembered key implies the inputs were valid, so the output check is
    the only refusal left."""
    try:
        key = _direct_path(dkey).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    files = _cache_get(key) if len(key) == 64 else None
    if files is None or "plan.json" not in files:
        return None
    out = Path(out_dir)
    write_outputs([(out_dir, _with_marker(key, files))], force)
    return BuildResult(out_dir=out, key=key, cache_hit=True, files={n: _sha(d) for n, d in files.items()},
                       plan_json=files["plan.json"], report_json=files.get("report.json"))


class _BuildKey:
    """A direct-mode cache file: a build key (64 hex digits) and nothing else."""

    private = False

    @staticmethod
    def seal(data: bytes) -> bytes:
        return data

    @staticmethod
    def owns(data: bytes) -> bool:
        return len(data) == 64 and all(c in b"0123456789abcdef" for c in data)


def remember_direct(dkey: str, key: str) -> None:
    """Map raw inputs ``dkey`` to build ``key`` (an unwritable cache only costs speed)."""
    from .filewrite import write_file

    try:
        write_file(_direct_path(dkey), key, _BuildKey, "build cache file", OutputError)
    except OutputError:
        pass


def _produce_one(job: tuple):
    spec, profile, kwargs = job
    return produce(spec, profile, **kwargs)


def build_many(spec: Spec, profiles: list[TargetProfile], out_root: str | Path, *, force: bool = False,
               **kwargs) -> list[BuildResult]:
    """Build ``spec`` for several targets in parallel processes, into ``out_root/<target>``.

    All or nothing: every output directory is checked, and every target
    planned and rendered, before anything is written; the directories are
    then written as one staged commit (:func:`p4gen.builddir.write_outputs`).
    A failure names its target and says that nothing was written.
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from .tofino_compiler import CompileFailed

    root = Path(out_root)
    outs = [root / p.name for p in profiles]
    try:
        resolve(out_root)
        for out in outs:
            check_output(out, force)
        jobs = [(spec, p, kwargs) for p in profiles]
        workers = min(len(jobs), os.cpu_count() or 1)
        if workers <= 1:
            made = [_produce_one(j) for j in jobs]
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                made = list(pool.map(_produce_one, jobs))
        write_outputs([(out, _with_marker(key, files)) for out, (key, files, _p, _h) in zip(outs, made)], force)
    except BrokenProcessPool:
        raise P4genError("a build process ended before its target was built (killed, or out of memory); nothing "
                         "was written (a build for several targets writes all of them or none)") from None
    except P4genError as exc:
        kind = CompileError if isinstance(exc, CompileFailed) else type(exc)
        raise kind(f"{exc}; nothing was written (a build for several targets writes all of them or none)") \
            from None
    return [BuildResult(out_dir=out, key=key, cache_hit=hit, plan=plan, files={n: _sha(d) for n, d in files.items()},
                        report_json=files["report.json"])
            for out, (key, files, plan, hit) in zip(outs, made)]
