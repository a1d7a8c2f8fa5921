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

from .. import protocols
from ..cliargs import int_in, number_in, seconds
from ..filewrite import JSON, WORK, write_file
from .errors import TestbedError
from ..progress import steps
from .network_options import (add_network_options, check_network_options, network_from_options, pointing_at_logs,
                              unwind_on_sigterm)

GLOO = "gloo"          # the baseline: torch.distributed's all-reduce on the same links

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

    check_network_options(args)
    if not 0 < args.density <= 1:
        raise TestbedError(f"--density {args.density} must be in (0, 1]")
    size = parse_size(args.size)
    sparse = args.protocol in protocols.protocol_names() and protocols.protocol(args.protocol).sparse
    if not sparse and args.density != 1.0:
        raise TestbedError(f"--density {args.density} applies to a sparse protocol only "
                           f"(--protocol {protocols.sparse_protocol().name})")
    # Gloo runs on the default protocol's network (its switch forwards the Gloo traffic)
    proto = protocols.DEFAULT.name if args.protocol == GLOO else args.protocol
    dtype = "float32" if args.protocol == GLOO else args.dtype
    if args.fault and args.protocol == GLOO:
        raise TestbedError(f"--fault {args.fault} applies to the switch's protocols "
                           f"({', '.join(protocols.protocol_names())}), not {GLOO}")
    if args.protocol == GLOO:
        from p4gen.extras import lacking

        why = lacking(f"--protocol {GLOO}", "torch")
        if why:
            raise TestbedError(why)
    results = []
    net = network_from_options(args, proto, note=steps("testbed"))
    with pointing_at_logs(net), net:
        _apply_loss(net, args.loss)
        for i in range(args.repeat):
            if args.repeat > 1:
                net.note(f"run {i + 1} of {args.repeat}")
            if args.protocol == GLOO:
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
        write_file(path, json.dumps({"runs": [r.to_dict() for r in results]}), JSON, "results file", TestbedError)


def _cmd_run(args: argparse.Namespace) -> int:
    def after(net, results):
        if args.cli:                     # the table first, then the prompt on the same network
            _print_results(results, args.json)
            _mininet_cli(net)

    results = unwind_on_sigterm(lambda: run(args, after))
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
        path = write_file(net.workdir / f"agent-{host}.json", json.dumps(cfg), WORK, "worker config", TestbedError)
        cmds.append(f"{host} {sys.executable} -m p4gen.testbed.agent {path}")
    return cmds


def _cmd_up(args: argparse.Namespace) -> int:
    check_network_options(args)

    def session():
        net = network_from_options(args, args.protocol, note=steps("testbed"))
        with pointing_at_logs(net), net:
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

    unwind_on_sigterm(session)
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


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("testbed", help="all-reduce on Mininet hosts through p4gen's switch")
    sub = p.add_subparsers(dest="testbed_cmd", required=True)
    r = sub.add_parser("run", help="run one all-reduce job and print a table row")
    r.add_argument("--protocol", choices=protocols.protocol_names() + (GLOO,), default=protocols.DEFAULT.name,
                   help=f"{', '.join(protocols.protocol_names())} (default {protocols.DEFAULT.name}), or {GLOO} "
                        "(torch.distributed's ring on the same links, for comparison; needs the torch extra)")
    add_network_options(r)
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
    u.add_argument("--protocol", choices=protocols.protocol_names(), default=protocols.DEFAULT.name,
                   help=f"the job the switch is programmed with: {' or '.join(protocols.protocol_names())} "
                        f"(default {protocols.DEFAULT.name})")
    add_network_options(u)
    u.set_defaults(func=_cmd_up)
    c = sub.add_parser("cleanup", help="end the processes (and so the namespaces) a crashed testbed run left, "
                                       "and remove its work directories")
    c.add_argument("--network", metavar="ID", help="only this network's leftovers (its id, e.g. p4g1a2b)")
    c.set_defaults(func=_cmd_cleanup)
    from .train import register as register_train

    register_train(sub)
    return p
