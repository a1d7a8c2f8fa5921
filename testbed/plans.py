"""The build a testbed switch runs: a build of the protocol for the switch's target (cached).

    plan_dir = build_plan(workers=3)                             # SoftSwitch (SwitchML), BMv2's limits (1500-byte MTU)
    plan_dir = build_plan(workers=3, target="soft")              # SoftSwitch, jumbo frames (9000-byte MTU)
    plan_dir = build_plan(workers=3, compile_p4=True)             # BMv2Switch: program.json from p4c-bm2-ss

The software data plane and BMv2 run the same v1model program and plan, so
one bmv2 build serves both; ``compile_p4`` adds BMv2's JSON.  A ``soft``
build (:file:`p4gen/target/soft.toml`) is for the software data plane
alone: 2048 values (8 KiB) a frame on jumbo-frame links, where the bmv2
build carries 256 (SwitchML) or 128 (OmniReduce, bound by simple_switch's
packet headroom) on 1500-byte ones.  A network built for a plan gives
every link its target's MTU (:class:`p4gen.testbed.net.Network`).  The builds live in
the user's private testbed directory (:mod:`.workspace`), never under a fixed
name in the shared temporary directory, where another user could plant a
symlink and choose where the build is written and which plan the switch loads.
"""

from __future__ import annotations

from pathlib import Path

from .errors import TestbedError
from .workspace import plans_dir

TARGETS = ("bmv2", "soft")


def build_plan(protocol: str | None = None, workers: int = 32, cache: str | Path | None = None,
               compile_p4: bool = False, target: str = "bmv2") -> Path:
    """A ``target`` build of ``protocol`` (the default protocol unless given) sized for ``workers`` (at
    least 32), in the private directory ``cache`` (default: the testbed's own, see
    :func:`p4gen.testbed.workspace.plans_dir`)."""
    from p4gen import protocols
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    protocol = protocol or protocols.DEFAULT.name
    if target not in TARGETS:
        raise TestbedError(f"target={target!r} must be one of {', '.join(TARGETS)}")
    if compile_p4 and target != "bmv2":
        raise TestbedError(f"a {target} build is for the software data plane; BMv2 runs bmv2 builds")
    spec = make_spec(protocol=protocol, max_workers=max(32, workers), slots=512)
    out = plans_dir(cache) / f"{target}-{protocol}{'-compiled' if compile_p4 else ''}"
    return build(spec, load_target(target), out, use_cache=True, force=True, compile_p4=compile_p4).out_dir
