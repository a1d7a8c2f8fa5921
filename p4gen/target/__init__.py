"""Target profiles: the resource limits of a switch, kept as data files.

Built-in profiles live in ``p4gen/target/*.toml``; a user's own profile is
loaded from any path with the same keys.  A key left out of a profile means
the target has no such limit (BMv2 has no MAU stages, for instance).
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from ..errors import TargetError
from ..fileread import load_toml

ARCHES = ("tna", "t2na", "v1model")

# key -> (minimum, maximum, required).  The maxima are far above any switch (Tofino2: 20 stages,
# 4 passes) and keep the planner's searches, which walk stages and passes, short.
_INT_FIELDS: dict[str, tuple[int, int, bool]] = {
    "pipes": (1, 64, True),
    "stages": (1, 256, False),
    "alus_per_stage": (1, 64, False),
    "alu_width_bits": (8, 1024, False),
    "lanes_per_register": (1, 2, True),
    "sram_blocks_per_stage": (1, 1 << 16, False),
    "register_sram_blocks_per_stage": (1, 1 << 16, False),
    "register_sram_rows": (2, 64, False),
    "register_sram_reach": (1, 64, False),
    "register_sram_group": (2, 64, False),
    "sram_block_words": (1, 1 << 24, False),
    "sram_block_width_bits": (8, 4096, False),
    "register_spare_blocks": (0, 1 << 16, False),
    "phv_bits": (64, 1 << 20, False),
    "tagalong_bits": (0, 1 << 20, False),
    "phv_allocatable_bits": (64, 1 << 20, False),
    "max_register_entries": (1, 1 << 32, False),
    "max_passes": (1, 64, True),
    "mtu_bytes": (128, 65535, True),
    "packet_headroom_bytes": (0, 65535, False),
    "multicast_group_limit": (1024, 65536, False),
    "salu_compare_units": (1, 16, False),
    "phv_fixed_bits": (-(1 << 16), 1 << 16, False),
    "salu_output_words": (1, 16, False),
}
_WHY: dict[str, str] = {}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_STR_FIELDS = ("name", "arch", "description")
# rates and latencies read by the layout cost model (p4gen.layout.cost); absent = no such bound
_FLOAT_FIELDS = ("aggregate_rate_gbps", "port_gbps", "recirc_gbps", "pass_latency_ns", "packet_rate_kpps")


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    name: str
    arch: str
    description: str
    pipes: int
    lanes_per_register: int
    max_passes: int
    mtu_bytes: int
    stages: int | None = None
    alus_per_stage: int | None = None
    alu_width_bits: int | None = None
    sram_blocks_per_stage: int | None = None
    register_sram_blocks_per_stage: int | None = None    # of those, the blocks registers can use
    register_sram_rows: int | None = None        # ... in rows, a stateful ALU on every other one
    register_sram_reach: int | None = None       # rows below its ALU's a register's blocks may sit
    register_sram_group: int | None = None       # rows a register may not cross (a memory core's half)
    sram_block_words: int | None = None
    sram_block_width_bits: int | None = None
    register_spare_blocks: int | None = None
    phv_bits: int | None = None
    tagalong_bits: int | None = None
    phv_allocatable_bits: int | None = None      # the most the compiler allocates, when below the containers
    max_register_entries: int | None = None
    aggregate_rate_gbps: float | None = None
    port_gbps: float | None = None          # fastest front-panel port
    recirc_gbps: float | None = None        # a pipe's dedicated recirculation port
    pass_latency_ns: float | None = None    # one pass through a pipe
    packet_rate_kpps: float | None = None   # packets the whole switch processes per second (software switches)
    packet_headroom_bytes: int | None = None    # bytes a packet may grow by in the pipeline (None: no limit)
    multicast_group_limit: int | None = None    # multicast group ids usable are 1 .. limit - 1 (None: 16 bits)
    salu_compare_units: int | None = None       # comparisons one RegisterAction makes (Tofino: 2, Tofino2: 4)
    salu_output_words: int | None = None        # 32-bit words one RegisterAction returns (Tofino: 1, Tofino2: 4)
    phv_fixed_bits: int | None = None           # PHV bits of every program beyond its headers and metadata (may be < 0)
    source: str = "builtin"

    @property
    def is_tna(self) -> bool:
        return self.arch in ("tna", "t2na")

    @property
    def has_stage_limits(self) -> bool:
        return self.stages is not None

    @property
    def register_sram_limit(self) -> int | None:
        """SRAM blocks per stage that can hold registers (all of the stage's, unless the profile says less)."""
        return self.register_sram_blocks_per_stage or self.sram_blocks_per_stage

    @property
    def phv_budget_bits(self) -> int | None:
        """PHV bits a program may occupy: the containers' bits, or less where the compiler is known to
        fail to allocate more (``phv_allocatable_bits``, measured on p4gen's own programs)."""
        containers = self.phv_container_bits
        if containers is None:
            return None
        return min(containers, self.phv_allocatable_bits or containers)

    @property
    def phv_budget_text(self) -> str:
        """The PHV budget in words, for a "does not fit" line."""
        budget, containers = self.phv_budget_bits, self.phv_container_bits
        if budget == containers:
            return f"{self.name} has {budget}"
        return f"the Tofino compiler allocates at most {budget} of {self.name}'s {containers}"

    @property
    def phv_container_bits(self) -> int | None:
        if self.phv_bits is None:
            return None
        return self.phv_bits + (self.tagalong_bits or 0)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("source")
        return {k: v for k, v in d.items() if v is not None}

    def sram_blocks_for(self, entries: int, entry_bits: int) -> int:
        """SRAM blocks (spare included) for a register of ``entries`` x ``entry_bits``."""
        assert self.sram_block_words and self.sram_block_width_bits
        per_word = max(1, self.sram_block_width_bits // entry_bits)
        words = -(-entries // per_word)
        return -(-words // self.sram_block_words) + (self.register_spare_blocks or 0)


# the built-in profiles ship inside the package (a plain directory: importlib.resources costs a warm build
# more than the look-up it saves)
_TARGETS = Path(__file__).resolve().parent


def builtin_names() -> list[str]:
    files = _TARGETS
    return sorted(p.name[: -len(".toml")] for p in files.iterdir() if p.name.endswith(".toml"))


def profile_from_mapping(data: dict[str, Any], source: str) -> TargetProfile:
    known = set(_INT_FIELDS) | set(_STR_FIELDS) | set(_FLOAT_FIELDS)
    unknown = sorted(set(data) - known)
    if unknown:
        raise TargetError(f"target profile {source}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
    kwargs: dict[str, Any] = {"source": source}
    for key in _STR_FIELDS:
        if key not in data:
            raise TargetError(f"target profile {source}: missing required key {key!r}")
        if not isinstance(data[key], str) or not data[key]:
            raise TargetError(f"target profile {source}: {key}={data[key]!r} must be a non-empty string")
        kwargs[key] = data[key]
    if not _NAME.fullmatch(kwargs["name"]) or ".." in kwargs["name"]:
        raise TargetError(f"target profile {source}: name={kwargs['name']!r} must be 1-64 letters, digits, '.', '_' "
                          f"or '-', starting with a letter or digit (it names the output directory)")
    if "\n" in kwargs["description"] or len(kwargs["description"]) > 200:
        raise TargetError(f"target profile {source}: description must be one line of at most 200 characters")
    if kwargs["arch"] not in ARCHES:
        raise TargetError(f"target profile {source}: arch={kwargs['arch']!r} must be one of {', '.join(ARCHES)}")
    for key, (minimum, maximum, required) in _INT_FIELDS.items():
        if key not in data:
            if required:
                raise TargetError(f"target profile {source}: missing required key {key!r}")
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TargetError(f"target profile {source}: {key}={value!r} must be an integer >= {minimum}")
        if not minimum <= value <= maximum:
            rng = f"must be {minimum}" if minimum == maximum else f"must be in {minimum}..{maximum}"
            raise TargetError(f"target profile {source}: {key}={value} {rng}{_WHY.get(key, '')}")
        kwargs[key] = value
    for key in _FLOAT_FIELDS:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise TargetError(f"target profile {source}: {key}={value!r} must be a finite non-negative number")
            kwargs[key] = float(value)
    profile = TargetProfile(**kwargs)
    staged = ("stages", "alus_per_stage", "sram_blocks_per_stage", "sram_block_words", "sram_block_width_bits")
    present = [k for k in staged if getattr(profile, k) is not None]
    if present and len(present) != len(staged):
        missing = [k for k in staged if getattr(profile, k) is None]
        raise TargetError(f"target profile {source}: {present[0]!r} is set, so {missing[0]!r} must be set too")
    if profile.is_tna and not present:
        raise TargetError(f"target profile {source}: arch={profile.arch!r} needs stages, alus_per_stage and SRAM geometry")
    return profile


def load_target_file(path: str | Path) -> TargetProfile:
    return profile_from_mapping(load_toml(path, "target file", TargetError), str(path))


def load_target(name: str) -> TargetProfile:
    names = builtin_names()
    if name not in names:
        raise TargetError(f"unknown target {name!r}; known targets: {', '.join(names)} (or pass --target-file PATH)")
    text = (_TARGETS / f"{name}.toml").read_text(encoding="utf-8")
    return profile_from_mapping(tomllib.loads(text), "builtin")
