"""Command-line interface.  Only this module exits the process."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import __version__
from .errors import P4genError


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _cmd_targets(args: argparse.Namespace) -> int:
    from .target import builtin_names, load_target, load_target_file

    profiles = [load_target_file(args.target_file)] if args.target_file is not None else [load_target(n) for n in builtin_names()]
    cols = ("name", "arch", "pipes", "stages", "alus_per_stage", "sram_blocks_per_stage", "phv_bits",
            "tagalong_bits", "lanes_per_register", "max_passes", "mtu_bytes")
    heads = ("target", "arch", "pipes", "stages", "ALUs/stage", "SRAM blk/stage", "PHV bits", "tagalong",
             "lanes/reg", "passes", "MTU")
    rows = [[str(getattr(p, c)) if getattr(p, c) is not None else "-" for c in cols] for p in profiles]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths)))
    for r, p in zip(rows, profiles):
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)) + f"  {p.description}")
    return 0


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
    from .files import digest

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


def _cmd_build(args: argparse.Namespace) -> int:
    from . import build as buildmod

    t0 = time.perf_counter()
    if args.layout is not None:
        from .layout.cli import build_layout

        spec, profile, shape = build_layout(args)
        out = args.out if args.out is not None else Path("p4gen-out") / f"{profile.name}-{spec.protocol}"
        results = [buildmod.build(spec, profile, out, use_cache=not args.no_cache, force=args.force,
                                  compile_p4=args.compile, shape=shape)]
        return _report_builds(args, results, t0)
    stray = [n for n in ("link_gbps", "rtt_us", "size", "framing_bytes", "ports_per_pipe") if getattr(args, n) is not None]
    if stray:
        raise P4genError(f"--{stray[0].replace('_', '-')} describes a workload; it applies with --layout best only")
    args.target = args.target or "tofino"
    inputs = _direct_inputs(args)
    dkey = buildmod.direct_key(inputs) if inputs is not None else None
    hit = buildmod.build_direct(dkey, args.out, force=args.force) if dkey else None
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
                                      compile_p4=args.compile)]
            if dkey:
                buildmod.remember_direct(dkey, results[0].key)
        else:
            root = args.out if args.out is not None else Path("p4gen-out") / spec.protocol
            results = buildmod.build_many(spec, profiles, root, use_cache=not args.no_cache, force=args.force,
                                          compile_p4=args.compile)
    return _report_builds(args, results, t0)


def _report_builds(args: argparse.Namespace, results: list, t0: float) -> int:
    dt = time.perf_counter() - t0
    for res in results:
        d = res.plan_data
        p = d["params"]
        print(f"built {d['protocol']} ({d['variant']}) for {d['target']['name']}: "
              f"slots={p['slots']} elements_per_packet={p['elements_per_packet']} passes={p['passes']} "
              f"max_workers={p['max_workers']} -> {res.out_dir}/ ({'cache hit' if res.cache_hit else 'built'})")
        for name in sorted(res.files):
            print(f"  {res.out_dir / name}")
    print(f"{len(results)} build(s) in {dt * 1000:.0f} ms")
    if args.verify:
        from .verify.runner import run

        ok = True
        for res in results:
            ok = run(res.plan).ok and ok
        return 0 if ok else 1
    return 0


def make_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; with ``command`` one of the compiler's own (build, targets),
    the other packages' subcommands are not registered, so that their modules (gRPC, Z3, Mininet)
    are not imported: a warm-cache ``p4gen build`` loads only the compiler."""
    parser = _Parser(prog="p4gen", description="Generate, verify and exercise P4 in-network aggregation pipelines.")
    parser.add_argument("--version", action="version", version=f"p4gen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    b = sub.add_parser("build", help="plan and emit a P4 program, P4Info, plan.json and resource report")
    b.add_argument("--spec", help="TOML spec file (command-line values override it)")
    b.add_argument("--protocol", help="switchml (default)")
    b.add_argument("--variant", help="auto (default: hardened where it fits), hardened or reference")
    b.add_argument("--workers", type=int, help="most workers per job (default 32)")
    b.add_argument("--slots", type=int, help="aggregation slots per copy (default 512)")
    b.add_argument("--elements", type=int, help="elements per packet (default: largest power of two in one pass)")
    b.add_argument("--value-width", type=int, help="bits per value: 32 (default) or 16")
    b.add_argument("--jobs", type=int, help="concurrent jobs the tables are sized for (default 1)")
    tgt = b.add_mutually_exclusive_group()
    tgt.add_argument("--target",
                     help="built-in target profile (default tofino; see `p4gen targets`); several, comma-separated, "
                          "build in parallel")
    tgt.add_argument("--target-file", help="a target profile of your own (TOML)")
    b.add_argument("--out", help="output directory (default p4gen-out/<target>-<protocol>)")
    b.add_argument("--no-cache", action="store_true", help="ignore and do not fill the build cache")
    b.add_argument("--force", action="store_true", help="write into a non-empty directory p4gen did not create")
    b.add_argument("--compile", action="store_true", help="also compile with p4c-bm2-ss / p4test from PATH")
    b.add_argument("--verify", action="store_true", help="run `p4gen verify` on the result")
    b.add_argument("--layout", metavar="best|FILE",
                   help="build the layout `p4gen plan` chose: a layout file, or best (searched now for the workload "
                        "given by --workers, --link-gbps, --rtt-us and --size)")
    from .layout.cli import add_workload_args

    add_workload_args(b, required=False)
    b.set_defaults(func=_cmd_build)

    t = sub.add_parser("targets", help="list target profiles and their limits")
    t.add_argument("--target-file", help="show this profile instead of the built-in ones")
    t.set_defaults(func=_cmd_targets)

    if command not in _CORE_COMMANDS:
        for module in _SUBCOMMAND_MODULES:
            __import__(module, fromlist=["register"]).register(sub)
    return parser


# Subcommands that live with their own package: each module has register(subparsers).
_SUBCOMMAND_MODULES: list[str] = ["p4gen.verify.cli", "p4gen.controller.cli", "p4gen.testbed.cli", "p4gen.layout.cli"]
_CORE_COMMANDS = ("build", "targets")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # the first word that is not an option names the subcommand (the top level has no valued options)
    parser = make_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except P4genError as exc:
        print(f"p4gen: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("p4gen: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"p4gen: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
