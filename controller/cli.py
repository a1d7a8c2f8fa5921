"""``p4gen ctl``: push a build, set up and tear down jobs, read counters, reset registers.

The main CLI adds these with ``register(subparsers)``; each handler returns
an exit code and raises P4genError subclasses, which the main CLI prints as
one line.  Until then ``python -m p4gen.controller ctl ...`` runs them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from p4gen.cliargs import OneLineParser, address, int_in, seconds
from p4gen.cliexit import run_command
from .client import DEFAULT_TIMEOUT, connect
from p4gen.jobfile import load_job
from .job_control import Controller
from .pipeline import load_build


MAX_TIMEOUT = 3600.0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("build_dir", metavar="BUILD_DIR", help="output directory of `p4gen build`")
    p.add_argument("--addr", type=address, default="127.0.0.1:9559",
                   help="P4Runtime server HOST:PORT (default 127.0.0.1:9559)")
    p.add_argument("--device-id", type=int_in(0, (1 << 64) - 1, "a P4Runtime device id is a uint64"), default=0,
                   help="P4Runtime device id (default 0)")
    p.add_argument("--election-id", type=int_in(1, (1 << 128) - 1, "a P4Runtime election id is a uint128, not 0"),
                   default=1, help="election id; the highest connected one is primary (default 1)")
    p.add_argument("--timeout", type=seconds(MAX_TIMEOUT), default=DEFAULT_TIMEOUT,
                   help=f"seconds to wait for the switch, at most {MAX_TIMEOUT:g} (default {DEFAULT_TIMEOUT:g})")


def _thrift(p: argparse.ArgumentParser) -> None:
    p.add_argument("--thrift-port", type=int_in(1, 65535, "a TCP port"), default=9090,
                   help="BMv2's Thrift port, where registers are written (P4Runtime cannot there; default 9090)")


def _session(args: argparse.Namespace):
    build = load_build(args.build_dir)
    conn = connect(args.addr, args.device_id, args.election_id, args.timeout)
    return build, conn


def _cmd_push(args: argparse.Namespace) -> int:
    build, conn = _session(args)
    with conn:
        Controller(build, conn).push()
    info = build.p4info
    named = info.pkg_info.name or build.p4info_file          # p4c's P4Info names no package
    print(f"pushed {build.path}: P4Info {named} ({len(info.tables)} tables, {len(info.actions)} actions, "
          f"{len(info.counters)} counters, {len(info.registers)} registers), device config "
          f"{build.device_config_name}, to switch at {args.addr} (device {args.device_id})")
    return 0


def _cmd_setup(args: argparse.Namespace) -> int:
    build = load_build(args.build_dir)
    job = load_job(args.job_file, build.plan)        # validated before any connection
    with connect(args.addr, args.device_id, args.election_id, args.timeout) as conn:
        ch = Controller(build, conn).setup(job, args.thrift_port)
    print(f"job {ch.job}: {ch.workers} workers, slots {ch.slots[0]}..{ch.slots[0] + ch.slots[1] - 1}, "
          f"multicast group {ch.mgid}; {ch.reset}; wrote {ch.updates} updates to switch at {args.addr}")
    return 0


def _cmd_teardown(args: argparse.Namespace) -> int:
    build = load_build(args.build_dir)
    target = args.job
    if Path(target).is_file() or not target.isdigit():
        job_id = load_job(target, build.plan).job
    else:
        job_id = int(target)
    with connect(args.addr, args.device_id, args.election_id, args.timeout) as conn:
        ch = Controller(build, conn).teardown(job_id)
    print(f"job {ch.job}: removed {ch.workers} workers, slots {ch.slots[0]}..{ch.slots[0] + ch.slots[1] - 1}, "
          f"multicast group {ch.mgid}; wrote {ch.updates} updates to switch at {args.addr}")
    return 0


def _cmd_counters(args: argparse.Namespace) -> int:
    build, conn = _session(args)
    with conn:
        values = Controller(build, conn).counters()
    width = max(len(n) for n in values)
    for name, (packets, nbytes) in values.items():
        print(f"{name.ljust(width)}  packets={packets} bytes={nbytes}")
    return 0


def _cmd_reset(args: argparse.Namespace) -> int:
    build, conn = _session(args)
    with conn:
        if args.job is not None:
            js, n, how = Controller(build, conn).reset_job(args.job, args.thrift_port)
            print(f"job {args.job}: zeroed the {n} register entries of slots {js.slot_base}..{js.slot_end} with "
                  f"{how} on switch at {args.addr}; the other jobs' are as they were")
            return 0
        how = Controller(build, conn).reset_registers(args.thrift_port)
    print(f"reset the aggregation registers of switch at {args.addr} with {how}")
    return 0


def register(subparsers) -> None:
    ctl = subparsers.add_parser("ctl", help="program a switch over P4Runtime from a build and job files")
    sub = ctl.add_subparsers(dest="ctl_command", required=True, metavar="{push,setup,teardown,counters,reset}",
                             parser_class=type(ctl))

    p = sub.add_parser("push", help="install the build's P4Info and device config (clears the switch)")
    _common(p)
    p.set_defaults(func=_cmd_push)

    p = sub.add_parser("setup", help="set up a job from a TOML job file (its slots' registers zeroed first)")
    _common(p)
    p.add_argument("job_file", metavar="JOB.toml", help="the job file (docs/controller.md; e.g. controller/examples/job1.toml)")
    _thrift(p)
    p.set_defaults(func=_cmd_setup)

    p = sub.add_parser("teardown", help="remove a job (by job file or job id)")
    _common(p)
    p.add_argument("job", metavar="JOB.toml|JOB_ID", help="the job file the job was set up from, or its job id")
    p.set_defaults(func=_cmd_teardown)

    p = sub.add_parser("counters", help="print the stats counter: one line per stat")
    _common(p)
    p.set_defaults(func=_cmd_counters)

    p = sub.add_parser("reset", help="zero the aggregation registers, or with --job N one job's (P4Runtime, or "
                                     "simple_switch_CLI on BMv2)")
    _common(p)
    p.add_argument("--job", type=int_in(0, 255, "a job id"), default=None,
                   help="zero only the registers of this job's slots (read from the switch); the other jobs run on")
    _thrift(p)
    p.set_defaults(func=_cmd_reset)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m p4gen.controller``) with the main CLI's error conventions."""
    parser = OneLineParser(prog="p4gen")
    register(parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser))
    args = parser.parse_args(argv)
    return run_command("p4gen", lambda: args.func(args))
