"""``p4gen testbed run|cleanup``: all-reduce on emulated hosts through a switch.

``register(subparsers)`` adds the ``testbed`` command; handlers return an
exit code and raise :class:`~p4gen.errors.P4genError` subclasses (one line)
on failure.  ``run`` prints one table row per run and can write JSON::

    p4gen testbed run --protocol switchml --workers 4 --size 16MiB --bw 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import tempfile
from pathlib import Path

from ..cliargs import int_in, number_in, seconds
from .errors import TestbedError

# (RunResult key, format, column heading)
COLUMNS = [("protocol", "{:<10}", "protocol"), ("workers", "{:>2}", "n"), ("topo", "{:<13}", "topo"),
           ("switch", "{:<6}", "switch"), ("size", "{:>9}", "elements"), ("mbit", "{:>6g}", "Mbit/s"),
           ("loss", "{:>5g}", "loss"), ("time", "{:>8.3f}", "time s"), ("goodput_mbit", "{:>8.2f}", "goodput"),
           ("pct_of_bound", "{:>6.1f}", "%bound"), ("packets", "{:>8}", "packets"), ("retransmissions", "{:>6}", "retx"),
           ("max_abs_error", "{:>9.2e}", "max err"), ("correct", "{:>3}", "ok")]


def _width(fmt: str, head: str) -> int:
    return max(int(re.search(r"(\d+)", fmt).group(1)), len(head))


def header() -> str:
    return "  ".join(h.ljust(_width(f, h)) if f.startswith("{:<") else h.rjust(_width(f, h))
                     for _, f, h in COLUMNS)


def row(r) -> str:
    """One table row: time, goodput (Mbit/s of tensor per worker), % of the link-rate bound, packets,
    retransmissions, max abs error, correct."""
    d = r.to_dict() if hasattr(r, "to_dict") else dict(r)
    cells = []
    for key, fmt, head in COLUMNS:
        v = d[key]
        if key == "correct":
            v = "yes" if v else "no"
        s = fmt.format(v)
        cells.append(s.ljust(_width(fmt, head)) if fmt.startswith("{:<") else s.rjust(_width(fmt, head)))
    return "  ".join(cells)


def parse_size(text: str) -> int:
    """'65536' elements, or '16MiB' / '0.5MiB' / '64KiB' of float32."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(KiB|MiB|GiB)?\s*", text)
    if not m:
        raise TestbedError(f"--size {text!r} must be a number of elements or a size like 16MiB")
    value, unit = float(m.group(1)), m.group(2)
    if unit:
        n = int(value * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit] // 4)
    elif value != int(value):
        raise TestbedError(f"--size {text!r}: a number of elements must be whole")
    else:
        n = int(value)
    if n < 1:
        raise TestbedError(f"--size {text!r} gives {n} elements; at least 1 is needed")
    return n


def _plan_for(protocol: str, workers: int, cache: Path) -> Path:
    """A bmv2-target build of ``protocol`` sized for ``workers`` (cached under ``cache``)."""
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    spec = make_spec(protocol=protocol, max_workers=max(32, workers), slots=512)
    out = cache / f"bmv2-{protocol}"
    res = build(spec, load_target("bmv2"), out, use_cache=True, force=True)
    return res.out_dir


def _topology(kind: str, workers: int, mbit: float):
    from .topo import star, two_level_for

    if kind == "star":
        return star(workers, mbit)
    if kind == "two-level":
        return two_level_for(workers, mbit)
    raise TestbedError(f"--topo {kind!r} must be star or two-level")


def run(args: argparse.Namespace):
    """Build the network, run the job(s), return the RunResults (a generator-free list)."""
    from . import harness
    from .net import Network
    from .nodes import pick_switch

    if args.workers < 2:
        raise TestbedError(f"--workers {args.workers} must be at least 2")
    if not 0 <= args.loss < 1:
        raise TestbedError(f"--loss {args.loss} must be in [0, 1)")
    if not 0 < args.density <= 1:
        raise TestbedError(f"--density {args.density} must be in (0, 1]")
    if args.bw <= 0:
        raise TestbedError(f"--bw {args.bw} must be positive (Mbit/s)")
    size = parse_size(args.size)
    if args.protocol == "omnireduce":
        import importlib.util

        if importlib.util.find_spec("p4gen.host.omni_worker") is None:
            raise TestbedError("--protocol omnireduce: p4gen.host.omni_worker (the OmniReduce worker state machine) "
                               "is not installed")
    elif args.density != 1.0:
        raise TestbedError(f"--density {args.density} applies to --protocol omnireduce only")
    switch = pick_switch(args.switch)
    why = switch.missing()
    if why:
        raise TestbedError(f"--switch {args.switch}: {why}")
    topo = _topology(args.topo, args.workers, args.bw)
    proto = "switchml" if args.protocol == "gloo" else args.protocol
    dtype = "float32" if args.protocol == "gloo" else args.dtype
    plan = _plan_for(proto, args.workers, Path(args.plan_cache))
    results = []
    with Network(topo, switch=switch, plan_dir=plan, keep_logs=args.keep_logs) as net:
        if args.loss:
            net.set_loss(args.loss)
        for _ in range(args.repeat):
            if args.protocol == "gloo":
                r = harness.run_gloo(net, size=size, dtype=dtype, seed=args.seed, timeout=args.timeout)
            else:
                r = harness.run_switchml(net, size=size, dtype=dtype, seed=args.seed, density=args.density,
                                         window=args.window, stall_timeout=args.stall_timeout, fault=args.fault,
                                         timeout=args.timeout, protocol=args.protocol)
            r.loss = args.loss
            results.append(r)
    return results


def _cmd_run(args: argparse.Namespace) -> int:
    # SIGTERM unwinds like Ctrl-C, so the Network's teardown runs either way.
    def on_term(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        results = run(args)
    finally:
        signal.signal(signal.SIGTERM, old)
    print(header())
    for r in results:
        print(row(r))
        if r.fault_outcome:
            print(f"  {r.fault_outcome}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
    return 0 if all(r.correct for r in results) else 1


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from . import netns

    removed = netns.cleanup()
    for path in sorted(Path("/tmp").glob(f"{netns.PREFIX}*")):
        if re.fullmatch(rf"{netns.PREFIX}[0-9a-f]{{4}}-\w+", path.name) and path.is_dir():
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"dir {path}")
    for r in removed:
        print(f"removed {r}")
    print(f"cleanup: {len(removed)} item(s) removed")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("testbed", help="all-reduce on emulated hosts (network namespaces) through a switch")
    sub = p.add_subparsers(dest="testbed_cmd", required=True)
    r = sub.add_parser("run", help="run one all-reduce job and print a table row")
    r.add_argument("--protocol", choices=("switchml", "omnireduce", "gloo"), default="switchml")
    r.add_argument("--workers", type=int_in(2, 64, "workers of one job"), default=3)
    r.add_argument("--size", default="65536", help="elements, or a float32 size such as 16MiB (default 65536)")
    r.add_argument("--dtype", choices=("float32", "int32"), default="float32")
    r.add_argument("--density", type=number_in(0, 1, "a fraction", lo_open=True), default=1.0, help="fraction of non-zero blocks (OmniReduce)")
    r.add_argument("--bw", type=number_in(0, 100000, "Mbit/s", lo_open=True), default=100.0, help="link rate in Mbit/s (default 100)")
    r.add_argument("--loss", type=number_in(0, 1, "a probability", hi_open=True), default=0.0, help="random loss per link and direction (0..1)")
    r.add_argument("--switch", choices=("soft", "bmv2", "auto"), default="auto")
    r.add_argument("--topo", choices=("star", "two-level"), default="star")
    r.add_argument("--window", type=int_in(1, 32768, "slots per worker"), default=None, help="slots per worker (default 64)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--fault", choices=("kill-worker", "restart-switch"), default=None)
    r.add_argument("--stall-timeout", type=seconds(), default=10.0, help="seconds without a result before a worker gives up")
    r.add_argument("--timeout", type=seconds(), default=600.0, help="seconds for the whole job")
    r.add_argument("--repeat", type=int_in(1, 10000, "runs"), default=1)
    r.add_argument("--json", metavar="PATH", help="write the results as JSON")
    r.add_argument("--keep-logs", action="store_true", help="keep the work directory with the logs")
    r.add_argument("--plan-cache", default=str(Path(tempfile.gettempdir()) / "p4g-plans"), help=argparse.SUPPRESS)
    r.set_defaults(func=_cmd_run)
    c = sub.add_parser("cleanup", help="remove every namespace, veth, process and work directory the testbed left")
    c.set_defaults(func=_cmd_cleanup)
    return p
