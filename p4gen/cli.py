"""Command-line interface.  Only this module exits the process.

A warm ``p4gen build`` imports only the compiler's cache code: a plain build
command line (:func:`_plain_build_args`) that the cache's direct mode has
seen is answered before argparse (and its gettext, locale and shutil) is
imported; every other command line goes through argparse.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import __version__
from .errors import P4genError

TYPE_CHECKING = False        # (typing.TYPE_CHECKING without importing typing on a warm build)
if TYPE_CHECKING:
    import argparse

# What to build, declared once for argparse and for _plain_build_args: (flag, type or None, help).
_BUILD_VALUES = (
    ("--spec", None, "TOML spec file (command-line values override it)"),
    ("--protocol", None, "switchml (default: dense) or omnireduce (block-sparse)"),
    ("--variant", None, "auto (default: hardened where it fits), hardened or reference"),
    ("--workers", int, "most workers per job (default 32)"),
    ("--slots", int, "aggregation slots per copy (default 512)"),
    ("--elements", int, "elements per packet (default: largest power of two in one pass)"),
    ("--value-width", int, "bits per value: 32 (default) or 16"),
    ("--jobs", int, "concurrent jobs the tables are sized for (default 1)"),
)
_BUILD_TARGETS = (                       # one or the other
    ("--target", None, "built-in target profile (default tofino; see `p4gen targets`); several, comma-separated, "
                       "build in parallel"),
    ("--target-file", None, "a target profile of your own (TOML)"),
)
_BUILD_OUT = ("--out", None, "output directory (default p4gen-out/<target>-<protocol>)")
_BUILD_FORCE = ("--force", "write into a non-empty directory p4gen did not create")


def _dest(flag: str) -> str:
    """argparse's attribute name for an option."""
    return flag[2:].replace("-", "_")


def _cmd_targets(args: argparse.Namespace) -> int:
    from .target import builtin_names, load_target, load_target_file

    profiles = [load_target_file(args.target_file)] if args.target_file is not None else [load_target(n) for n in builtin_names()]
    heads = ("target", "arch", "pipes", "stages", "ALUs/stage", "register SRAM blk/stage", "PHV bits", "lanes/reg",
             "passes", "MTU")
    rows = [[p.name, p.arch, str(p.pipes), _cell(p.stages), _cell(p.alus_per_stage), _of(p.register_sram_limit,
             p.sram_blocks_per_stage), _phv_cell(p), str(p.lanes_per_register), str(p.max_passes), str(p.mtu_bytes)]
            for p in profiles]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths)))
    for r, p in zip(rows, profiles):
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)) + f"  {p.description}")
    print("register SRAM and PHV bits are the limits a build is held to (report.txt's x/limit); \"of N\" is the "
          "chip's total where the Tofino compiler gives registers or a program less")
    return 0


def _cell(v) -> str:
    return "-" if v is None else str(v)


def _of(limit: int | None, total: int | None) -> str:
    return _cell(limit) if limit == total or total is None else f"{limit} of {total}"


def _phv_cell(p) -> str:
    budget, containers = p.phv_budget_bits, p.phv_container_bits
    if budget is None:
        return "-"
    cell = _of(budget, containers)
    return cell + (f" ({p.phv_bits} + {p.tagalong_bits} tagalong)" if p.tagalong_bits and budget == containers else "")


def _spec_from_args(args: argparse.Namespace):
    from .spec import load_spec_file, make_spec

    fields = {"protocol": args.protocol, "variant": args.variant, "max_workers": args.workers,
              "slots": args.slots, "elements_per_packet": args.elements, "value_width": args.value_width,
              "jobs": args.jobs}
    if args.spec is not None:
        return load_spec_file(args.spec, **fields)
    if fields["slots"] is None:
        fields["slots"] = 512
    return make_spec(**{k: v for k, v in fields.items() if v is not None})


def _profiles_from_args(args: argparse.Namespace):
    from .target import load_target, load_target_file

    if args.target_file is not None:
        return [load_target_file(args.target_file)]
    names = [n.strip() for n in args.target.split(",")]
    if len(set(names)) != len(names) or not all(names):
        raise P4genError(f"--target {args.target!r} must name each target once, separated by commas")
    return [load_target(n) for n in names]


def _direct_inputs(args: argparse.Namespace) -> dict | None:
    """The raw inputs of a single-target build into --out, for the build cache's direct mode (None:
    not this kind of build, or a file it names cannot be read; the usual path then says why)."""
    from .fileread import digest

    if not args.out or args.no_cache or args.compile or args.verify or "," in (args.target or ""):
        return None
    inputs: dict = {k: getattr(args, k) for k in ("protocol", "variant", "workers", "slots", "elements",
                                                   "value_width", "jobs", "target")}
    for k in ("spec", "target_file"):
        if getattr(args, k) is None:
            inputs[k] = None
            continue
        inputs[k] = digest(getattr(args, k))          # bounded: /dev/zero or a huge file is no hit
        if inputs[k] is None:
            return None
    return inputs


def _direct_hit(args) -> tuple:
    """(direct-mode key or None, the build it found in the cache or None) of a build's arguments."""
    from . import build as buildmod

    if args.target is None:
        args.target = "tofino"
    inputs = _direct_inputs(args)
    dkey = buildmod.direct_key(inputs) if inputs is not None else None
    return dkey, (buildmod.build_direct(dkey, args.out, force=args.force) if dkey else None)


def _plain_build_args(argv: list[str]) -> dict | None:
    """The arguments argparse makes of ``build`` followed by nothing but the options declared in
    _BUILD_VALUES, _BUILD_TARGETS and _BUILD_OUT, each at most once as ``--flag VALUE``, and
    ``--force``; None for every other command line (which argparse then reads)."""
    if not argv or argv[0] != "build":
        return None
    types = {flag: typ for flag, typ, _help in _BUILD_VALUES + _BUILD_TARGETS + (_BUILD_OUT,)}
    args: dict = {_dest(flag): None for flag in types}
    args.update(force=False, no_cache=False, compile=False, verify=False)
    seen = set()
    i = 1
    while i < len(argv):
        flag = argv[i]
        if flag in seen:
            return None
        seen.add(flag)
        if flag == _BUILD_FORCE[0]:
            args["force"] = True
            i += 1
            continue
        if flag not in types or i + 1 == len(argv) or argv[i + 1].startswith("-"):
            return None
        typ, text = types[flag], argv[i + 1]
        try:
            args[_dest(flag)] = typ(text) if typ else text
        except ValueError:
            return None
        i += 2
    if args["target"] is not None and args["target_file"] is not None:
        return None
    return args


def _plain_build(argv: list[str]) -> int | None:
    """A plain build command line (see _plain_build_args) whose inputs the cache's direct mode knows:
    written from the cache and reported.  None when it is not one: then argparse and _cmd_build."""
    t0 = time.perf_counter()
    values = _plain_build_args(argv)
    if values is None or values["out"] is None:
        return None
    from types import SimpleNamespace

    args = SimpleNamespace(**values)
    _dkey, hit = _direct_hit(args)
    return None if hit is None else _report_builds(args, [hit], t0)


def _cmd_build(args: argparse.Namespace) -> int:
    from . import build as buildmod

    t0 = time.perf_counter()
    if args.layout is not None:
        from .layout.cli import build_layout

        spec, profile, shape = build_layout(args)
        out = args.out if args.out is not None else Path("p4gen-out") / f"{profile.name}-{spec.protocol}"
        results = [buildmod.build(spec, profile, out, use_cache=not args.no_cache, force=args.force,
                                  compile_p4=args.compile, shape=shape, note=_build_progress(args))]
        return _report_builds(args, results, t0)
    from .layout.workload_args import given_workload

    stray = given_workload(args)
    if stray:
        raise P4genError(f"{stray[0]} describes a workload; it applies with --layout best only")
    dkey, hit = _direct_hit(args)
    if hit is not None:
        results = [hit]
    else:
        spec = _spec_from_args(args)
        profiles = _profiles_from_args(args)
        t0 = time.perf_counter()
        if len(profiles) == 1:
            profile = profiles[0]
            out = args.out if args.out is not None else Path("p4gen-out") / f"{profile.name}-{spec.protocol}"
            results = [buildmod.build(spec, profile, out, use_cache=not args.no_cache, force=args.force,
                                      compile_p4=args.compile, note=_build_progress(args))]
            if dkey:
                buildmod.remember_direct(dkey, results[0].key)
        else:
            root = args.out if args.out is not None else Path("p4gen-out") / spec.protocol
            results = buildmod.build_many(spec, profiles, root, use_cache=not args.no_cache, force=args.force,
                                          compile_p4=args.compile)
    return _report_builds(args, results, t0)


def _build_progress(args: argparse.Namespace):
    """A compile can take minutes (the Tofino compiler): it is announced on stderr as it starts."""
    from .progress import steps

    return steps("build") if args.compile else None


def _report_builds(args: argparse.Namespace, results: list, t0: float) -> int:
    dt = time.perf_counter() - t0
    for res in results:
        r = res.report
        print(f"built {r['protocol']} ({r['variant']}) for {r['target']}: "
              f"slots={r['slots']} elements_per_packet={r['elements_per_packet']} passes={r['passes']} "
              f"max_workers={r['max_workers']} -> {res.out_dir}/ ({'cache hit' if res.cache_hit else 'built'})")
        if "compiled" in r:
            print(f"  checked by {r['compiled']['compiler']}: {r['compiled']['covers']}")
        for name in sorted(res.files):
            print(f"  {res.out_dir / name}")
    print(f"{len(results)} build(s) in {dt * 1000:.0f} ms")
    if args.verify:
        from .verify.cli import NO_PROGRAM_CHECK, program_step
        from .verify.runner import run

        ok, missing = True, False
        for res in results:
            step = program_step(res.plan, res.out_dir, plan_only=False, need=False)
            ok = run(res.plan, program=step).ok and ok
            missing = missing or step.missing
        return 1 if not ok else NO_PROGRAM_CHECK if missing else 0
    return 0


def make_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; with ``command`` one of the compiler's own (build, targets),
    the other packages' subcommands are not registered, so that their modules (gRPC, Z3, Mininet)
    are not imported: a warm-cache ``p4gen build`` loads only the compiler."""
    from .cliargs import OneLineParser

    parser = OneLineParser(prog="p4gen", description="Generate, verify and exercise P4 in-network aggregation pipelines.")
    parser.add_argument("--version", action="version", version=f"p4gen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    b = sub.add_parser("build", help="plan and emit a P4 program, P4Info, plan.json and resource report")
    for flag, typ, text in _BUILD_VALUES:
        b.add_argument(flag, type=typ, help=text)
    tgt = b.add_mutually_exclusive_group()
    for flag, typ, text in _BUILD_TARGETS:
        tgt.add_argument(flag, type=typ, help=text)
    b.add_argument(_BUILD_OUT[0], type=_BUILD_OUT[1], help=_BUILD_OUT[2])
    b.add_argument("--no-cache", action="store_true", help="ignore and do not fill the build cache")
    b.add_argument(_BUILD_FORCE[0], action="store_true", help=_BUILD_FORCE[1])
    b.add_argument("--compile", action="store_true", help="also compile, with the compiler found on PATH: for tofino/tofino2 the Tofino compiler (bf-p4c or p4c-barefoot; report.txt then puts its allocation beside the prediction), else p4test; for bmv2 p4c-bm2-ss")
    b.add_argument("--verify", action="store_true", help="run `p4gen verify` on the result")
    b.add_argument("--layout", metavar="best|FILE",
                   help="build the layout `p4gen plan` chose: a layout file, or best (searched now for the workload "
                        "given by --workers, --link-gbps, --rtt-us and --size)")
    from .layout.workload_args import add_workload_args

    add_workload_args(b, required=False, needed=" (needed with --layout best)")
    b.set_defaults(func=_cmd_build)

    t = sub.add_parser("targets", help="list target profiles and their limits")
    t.add_argument("--target-file", help="show this profile instead of the built-in ones")
    t.set_defaults(func=_cmd_targets)

    if command not in _CORE_COMMANDS:
        # a command line that names one of them loads only its module (ctl's gRPC is no part of plan's
        # start-up); any other (--help, a typo) loads them all, so argparse can list every choice
        named = [_SUBCOMMAND_MODULES[command]] if command in _SUBCOMMAND_MODULES else _SUBCOMMAND_MODULES.values()
        for module in named:
            __import__(module, fromlist=["register"]).register(sub)
    return parser


# Subcommands that live with their own package: each module has register(subparsers).
_SUBCOMMAND_MODULES: dict[str, str] = {"verify": "p4gen.verify.cli", "ctl": "p4gen.controller.cli",
                                       "testbed": "p4gen.testbed.cli", "plan": "p4gen.layout.cli"}
_CORE_COMMANDS = ("build", "targets")


def main(argv: list[str] | None = None) -> int:
    from .cliexit import run_command

    argv = sys.argv[1:] if argv is None else list(argv)
    return run_command("p4gen", lambda: _run(argv), os_errors=True)


def _run(argv: list[str]) -> int | None:
    rc = _plain_build(argv)
    if rc is None:
        # the first word that is not an option names the subcommand (the top level has no valued options)
        args = make_parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)
        rc = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
