"""The network options ``p4gen testbed run``, ``up`` and ``train`` share, and the network they describe.

:func:`add_network_options` declares them (workers, link rate, loss, delay, switch, build target, topology, logs),
:func:`check_network_options` refuses bad values with one line and :func:`network_from_options` builds
the (not yet started) :class:`~p4gen.testbed.net.Network`; :func:`unwind_on_sigterm` makes SIGTERM
unwind like Ctrl-C, so a network's teardown runs either way.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
from pathlib import Path

from ..cliargs import int_in, number_in
from .errors import TestbedError


def plan_for(protocol: str, workers: int, cache: str | Path | None, compile_p4: bool = False, target: str = "bmv2") -> Path:
    from .plans import build_plan

    return build_plan(protocol, workers, cache, compile_p4, target=target)


def topology(kind: str, workers: int, mbit: float):
    from .topo import star, two_level_for

    if kind == "star":
        return star(workers, mbit)
    if kind == "two-level":
        return two_level_for(workers, mbit)
    raise TestbedError(f"--topo {kind!r} must be star or two-level")


def check_network_options(args: argparse.Namespace) -> None:
    if args.workers < 2:
        raise TestbedError(f"--workers {args.workers} must be at least 2")
    if not 0 <= args.loss < 1:
        raise TestbedError(f"--loss {args.loss} must be in [0, 1)")
    if args.bw <= 0:
        raise TestbedError(f"--bw {args.bw} must be positive (Mbit/s)")


def network_from_options(args: argparse.Namespace, protocol: str, note=None):
    """The (not yet built) Network for ``args``: topology, switch class, plan, loss and delay.  ``note``
    (one line a step: the build, the network, the switch, each job) is the CLI's progress."""
    from . import loss, procs

    procs.require()                      # root, Mininet and the tools, before importing Mininet
    from .net import Network
    from .nodes import BMv2Switch, pick_switch

    target = getattr(args, "target", "bmv2")
    switch = pick_switch("soft" if target == "soft" and args.switch == "auto" else args.switch)
    why = switch.missing()
    if why:
        raise TestbedError(f"--switch {args.switch}: {why}")
    if switch is BMv2Switch and target != "bmv2":
        raise TestbedError(f"--target {target} is for the software switch (--switch soft); BMv2 runs bmv2 builds")
    loss.check_delay(args.delay)
    topo = topology(args.topo, args.workers, args.bw)
    if note is not None:
        note(f"building the {protocol} program for {target}" +
             (" and compiling it with p4c-bm2-ss for BMv2" if switch is BMv2Switch else ""))
    plan = plan_for(protocol, args.workers, args.plan_cache, compile_p4=switch is BMv2Switch, target=target)
    return Network(topo, switch=switch, plan_dir=plan, keep_logs=args.keep_logs, delay=args.delay, note=note)


@contextlib.contextmanager
def pointing_at_logs(net):
    """A testbed failure inside the block says where the failed network's logs were kept, when its
    message does not name them already."""
    from p4gen.errors import P4genError

    try:
        yield
    except P4genError as exc:
        where = getattr(net, "kept_logs", None)
        if where is not None and str(where) not in str(exc):
            exc.args = (f"{exc}; the logs of the failed run are in {where}",)
        raise


def unwind_on_sigterm(fn):
    """Run ``fn()`` with SIGTERM unwinding like Ctrl-C, so the network's teardown runs either way."""
    def on_term(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        return fn()
    finally:
        signal.signal(signal.SIGTERM, old)


def delay(text: str) -> str:
    """A tc time such as 5ms, 200us or 1s."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?(us|ms|s)", text):
        raise argparse.ArgumentTypeError(f"{text!r} must be a time such as 5ms, 200us or 1s")
    return text


def add_network_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int_in(2, 64, "workers of one job"), default=3,
                   help="hosts, one worker each, 2..64 (default 3)")
    p.add_argument("--bw", type=number_in(0, 100000, "Mbit/s", lo_open=True), default=100.0, help="link rate in Mbit/s (default 100)")
    p.add_argument("--loss", type=number_in(0, 1, "a probability", hi_open=True), default=0.0,
                   help="random loss per link and direction, 0..1 (default 0)")
    p.add_argument("--delay", type=delay, default=None, help="link delay such as 5ms (default none; needs netem)")
    p.add_argument("--switch", choices=("soft", "bmv2", "auto"), default="auto",
                   help="soft (p4gen's software data plane), bmv2 (simple_switch_grpc running the compiled "
                        "program) or auto (default: bmv2 when p4c-bm2-ss and simple_switch_grpc are on PATH, "
                        "else soft; soft with --target soft)")
    p.add_argument("--target", choices=("bmv2", "soft"), default="bmv2",
                   help="the build's target: bmv2 (default: BMv2's limits, 1500-byte links) or soft (the software "
                        "switch's own: 8 KiB frames on 9000-byte links; with --switch soft or auto)")
    p.add_argument("--topo", choices=("star", "two-level"), default="star",
                   help="star (default: every host on the switch) or two-level (racks of hosts under "
                        "Linux-bridge leaves, the switch as their spine)")
    p.add_argument("--keep-logs", action="store_true", help="keep the work directory with the logs")
    p.add_argument("--plan-cache", default=None, help=argparse.SUPPRESS)      # a private directory of builds
