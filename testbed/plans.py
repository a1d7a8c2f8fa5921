"""The build a testbed switch runs: a bmv2-target build of the protocol (cached).

    plan_dir = build_plan(workers=3)                             # SoftSwitch (SwitchML)
    plan_dir = build_plan(workers=3, compile_p4=True)             # BMv2Switch: program.json from p4c-bm2-ss

The software data plane and BMv2 run the same v1model program and plan, so
one build serves both; ``compile_p4`` adds BMv2's JSON.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

CACHE = Path(tempfile.gettempdir()) / "p4g-plans"


def build_plan(protocol: str | None = None, workers: int = 32, cache: str | Path | None = None,
               compile_p4: bool = False) -> Path:
    """A bmv2-target build of ``protocol`` (the default protocol unless given) sized for ``workers`` (at least
    32), in ``cache``."""
    from p4gen import protocols
    from p4gen.build import build
    from p4gen.spec import make_spec
    from p4gen.target import load_target

    protocol = protocol or protocols.DEFAULT.name
    spec = make_spec(protocol=protocol, max_workers=max(32, workers), slots=512)
    out = Path(cache or CACHE) / f"bmv2-{protocol}{'-compiled' if compile_p4 else ''}"
    return build(spec, load_target("bmv2"), out, use_cache=True, force=True, compile_p4=compile_p4).out_dir
