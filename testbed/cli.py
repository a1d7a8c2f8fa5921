"""``p4gen testbed run|up|cleanup``: all-reduce on Mininet hosts through p4gen's switch.

``register(subparsers)`` adds the ``testbed`` command; handlers return an
exit code and raise :class:`~p4gen.errors.P4genError` subclasses (one line)
on failure.  ``run`` prints one table row per run and can write JSON::

    p4gen testbed run --protocol switchml --workers 4 --size 16MiB --bw 20 --json out.json
    p4gen testbed up --workers 3 --switch soft          # mininet> prompt, switch programmed
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


def _plan_for(protocol: str, workers: int, cache: Path, compile_p4: bool = False) -> Path:
    from .plans import build_plan

    return build_plan(protocol, workers, cache, compile_p4)


def _topology(kind: str, workers: int, mbit: float):
    from .topo import star, two_level_for

    if kind == "star":
        return star(workers, mbit)
    if kind == "two-level":
        return two_level_for(workers, mbit)
    raise TestbedError(f"--topo {kind!r} must be star or two-level")


def _check_common(args: argparse.Namespace) -> None:
    if args.workers < 2:
        raise TestbedError(f"--workers {args.workers} must be at least 2")
    if not 0 <= args.loss < 1:
        raise TestbedError(f"--loss {args.loss} must be in [0, 1)")
    if args.bw <= 0:
        raise TestbedError(f"--bw {args.bw} must be positive (Mbit/s)")


def _network(args: argparse.Namespace, protocol: str):
    """The (not yet built) Network for ``args``: topology, switch class, plan, loss and delay."""
    from . import loss, procs

    procs.require()                      # root, Mininet and the tools, before importing Mininet
    from .net import Network
    from .nodes import BMv2Switch, pick_switch

    switch = pick_switch(args.switch)
    why = switch.missing()
    if why:
        raise TestbedError(f"--switch {args.switch}: {why}")
    loss.check_delay(args.delay)
    topo = _topology(args.topo, args.workers, args.bw)
    plan = _plan_for(protocol, args.workers, Path(args.plan_cache), compile_p4=switch is BMv2Switch)
    return Network(topo, switch=switch, plan_dir=plan, keep_logs=args.keep_logs, delay=args.delay)


def _apply_loss(net, p: float) -> None:
    if p:
        print(net.set_loss(p), flush=True)


def _mininet_cli(net) -> None:
    """Leave the user at ``mininet>`` (commands may come on stdin, one a line)."""
    import sys

    from mininet.cli import CLI

    if not sys.stdin.isatty():
        CLI.readlineInited = True       # no history file for commands fed on stdin
    CLI(net.mn)


def run(args: argparse.Namespace, after=None):
    """Build the network, run the job(s), return the RunResults; ``after(net)`` runs before teardown."""
    from . import harness

    _check_common(args)
    if not 0 < args.density <= 1:
        raise TestbedError(f"--density {args.density} must be in (0, 1]")
    size = parse_size(args.size)
    if args.protocol == "omnireduce":
        import importlib.util

        if importlib.util.find_spec("p4gen.host.omni_worker") is None:
            raise TestbedError("--protocol omnireduce: p4gen.host.omni_worker (the OmniReduce worker state machine) "
                               "is not installed")
    elif args.density != 1.0:
        raise TestbedError(f"--density {args.density} applies to --protocol omnireduce only")
    if args.protocol == "gloo":
        from p4gen.extras import lacking

        why = lacking("--protocol gloo", "torch")
        if why:
            raise TestbedError(why)
    proto = "switchml" if args.protocol == "gloo" else args.protocol
    dtype = "float32" if args.protocol == "gloo" else args.dtype
    results = []
    with _network(args, proto) as net:
        _apply_loss(net, args.loss)
        for _ in range(args.repeat):
            if args.protocol == "gloo":
                r = harness.run_gloo(net, size=size, dtype=dtype, seed=args.seed, timeout=args.timeout)
            else:
                r = harness.run_switchml(net, size=size, dtype=dtype, seed=args.seed, density=args.density,
                                         window=args.window, stall_timeout=args.stall_timeout, fault=args.fault,
                                         timeout=args.timeout, protocol=args.protocol)
            results.append(r)
        if after is not None:
            after(net, results)
    return results


def _print_results(results, path: str | None) -> None:
    print(header())
    for r in results:
        print(row(r))
        if r.fault_outcome:
            print(f"  {r.fault_outcome}")
    for how in dict.fromkeys(r.bound_how for r in results if r.bound_how):
        print(f"%bound = link-rate bound / time; the bound counts {how}")
    for r in results:
        if r.path:
            print(f"{r.protocol} frames through the switch node: {r.path}")
    if path:
        Path(path).write_text(json.dumps([r.to_dict() for r in results], indent=2) + "\n")


def _unwind_on_sigterm(fn):
    """Run ``fn()`` with SIGTERM unwinding like Ctrl-C, so the network's teardown runs either way."""
    def on_term(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        return fn()
    finally:
        signal.signal(signal.SIGTERM, old)


def _cmd_run(args: argparse.Namespace) -> int:
    def after(net, results):
        if args.cli:                     # the table first, then the prompt on the same network
            _print_results(results, args.json)
            _mininet_cli(net)

    results = _unwind_on_sigterm(lambda: run(args, after))
    if not args.cli:
        _print_results(results, args.json)
    return 0 if all(r.correct for r in results) else 1


def hand_start(net, spec, protocol: str, size: int = 65536) -> list[str]:
    """Write a by-hand worker config per host of ``spec``; return the ``mininet>`` commands that start them."""
    import sys

    from .harness import worker_config

    names = {h.ip: h.name for h in net.topo.hosts}
    cmds = []
    for w in spec.workers:
        host = names[w.ip]
        cfg = worker_config(net, spec, w.id, host, protocol=protocol, size=size, stall_timeout=60.0,
                            wait_go=False)
        path = net.workdir / f"agent-{host}.json"
        path.write_text(json.dumps(cfg))
        cmds.append(f"{host} {sys.executable} -m p4gen.testbed.agent {path}")
    return cmds


def _cmd_up(args: argparse.Namespace) -> int:
    _check_common(args)

    def session():
        with _network(args, args.protocol) as net:
            spec = net.job_spec(slot_count=64)
            net.program(spec)
            net.wait_forwarding()
            _apply_loss(net, args.loss)
            cmds = hand_start(net, spec, args.protocol)
            print(f"{net.topo.name}: {len(net.topo.hosts)} hosts, {net.agg.kind} {net.agg.name} running "
                  f"{args.protocol} job {spec.job} over every host; logs in {net.workdir}")
            print("start a worker on each host (the last one in the foreground):")
            for c in cmds[:-1]:
                print(f"  mininet> {c} &")
            print(f"  mininet> {cmds[-1]}")
            _mininet_cli(net)

    _unwind_on_sigterm(session)
    return 0


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from . import procs

    if args.network and not procs.is_id(args.network):
        raise TestbedError(f"--network {args.network!r} must look like {procs.PREFIX} and 4 hex digits "
                           f"(e.g. {procs.PREFIX}1a2b)")
    report = procs.cleanup(args.network)
    for r in report.removed:
        print(f"removed {r}")
    for k in report.kept:
        print(f"left alone: {k}")
    print(f"cleanup: {len(report.removed)} item(s) removed, {len(report.kept)} network(s) left alone")
    return 0


def _network_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int_in(2, 64, "workers of one job"), default=3,
                   help="hosts, one worker each, 2..64 (default 3)")
    p.add_argument("--bw", type=number_in(0, 100000, "Mbit/s", lo_open=True), default=100.0, help="link rate in Mbit/s (default 100)")
    p.add_argument("--loss", type=number_in(0, 1, "a probability", hi_open=True), default=0.0,
                   help="random loss per link and direction, 0..1 (default 0)")
    p.add_argument("--delay", default=None, help="link delay such as 5ms (default none; needs netem)")
    p.add_argument("--switch", choices=("soft", "bmv2", "auto"), default="auto",
                   help="soft (p4gen's software data plane), bmv2 (simple_switch_grpc running the compiled "
                        "program) or auto (default: bmv2 when p4c-bm2-ss and simple_switch_grpc are on PATH, "
                        "else soft)")
    p.add_argument("--topo", choices=("star", "two-level"), default="star",
                   help="star (default: every host on the switch) or two-level (racks of hosts under "
                        "Linux-bridge leaves, the switch as their spine)")
    p.add_argument("--keep-logs", action="store_true", help="keep the work directory with the logs")
    p.add_argument("--plan-cache", default=str(Path(tempfile.gettempdir()) / "p4g-plans"), help=argparse.SUPPRESS)


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("testbed", help="all-reduce on Mininet hosts through p4gen's switch")
    sub = p.add_subparsers(dest="testbed_cmd", required=True)
    r = sub.add_parser("run", help="run one all-reduce job and print a table row")
    r.add_argument("--protocol", choices=("switchml", "omnireduce", "gloo"), default="switchml",
                   help="switchml (default), omnireduce, or gloo (torch.distributed's ring on the same links, "
                        "for comparison; needs the torch extra)")
    _network_options(r)
    r.add_argument("--size", default="65536", help="elements, or a float32 size such as 16MiB (default 65536)")
    r.add_argument("--dtype", choices=("float32", "int32"), default="float32",
                   help="float32 (default: through the fixed-point codec) or int32 (exact integer sums)")
    r.add_argument("--density", type=number_in(0, 1, "a fraction", lo_open=True), default=1.0,
                   help="fraction of non-zero blocks, OmniReduce only (default 1)")
    r.add_argument("--window", type=int_in(1, 32768, "slots per worker"), default=None, help="slots per worker (default: a sixteenth of the chunks, 64 to 256, OmniReduce 64; on BMv2 its 24 frames in flight over the workers)")
    r.add_argument("--seed", type=int, default=0, help="seed of the workers' random tensors (default 0)")
    r.add_argument("--fault", choices=("kill-worker", "restart-switch"), default=None,
                   help="mid-job: kill the last worker, or restart the switch (default: no fault)")
    r.add_argument("--stall-timeout", type=seconds(), default=10.0,
                   help="seconds without a result before a worker gives up (default 10)")
    r.add_argument("--timeout", type=seconds(), default=600.0, help="seconds for the whole job (default 600)")
    r.add_argument("--repeat", type=int_in(1, 10000, "runs"), default=1,
                   help="runs of the job on the same network, one row each (default 1)")
    r.add_argument("--json", metavar="PATH", help="write the results as JSON")
    r.add_argument("--cli", action="store_true", help="after the job, leave the network at a mininet> prompt")
    r.set_defaults(func=_cmd_run)
    u = sub.add_parser("up", help="build the network, program the switch and leave you at mininet>")
    u.add_argument("--protocol", choices=("switchml", "omnireduce"), default="switchml",
                   help="the job the switch is programmed with: switchml (default) or omnireduce")
    _network_options(u)
    u.set_defaults(func=_cmd_up)
    c = sub.add_parser("cleanup", help="end the processes (and so the namespaces) a crashed testbed run left, "
                                       "and remove its work directories")
    c.add_argument("--network", metavar="ID", help="only this network's leftovers (its id, e.g. p4g1a2b)")
    c.set_defaults(func=_cmd_cleanup)
    from .train import register as register_train

    register_train(sub)
    return p
