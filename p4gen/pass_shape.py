"""How a packet's elements cross the pipeline: the shape of a layout, as the planner reads it.

A packet of E elements takes ``passes`` passes of E/passes elements each.

* ``mode="resident"``: every pass parses all E values into the PHV and rotates them, so that
  each pass finds its own in ``data0`` (the PHV holds E values).
* ``mode="stream"``: a pass parses only its own E/passes values, the rest of the payload stays
  unparsed.  A consumed chunk leaves the packet (it shrinks); a packet that returns the
  result then reads the earlier chunks back in read-only *harvest* passes, last to first,
  each inserting its chunk in front of the ones already read (the packet grows back).  The
  PHV holds E/passes values.  This is how p4lang/p4app-switchML carries 1 KiB on Tofino1.
* ``pipes=1``: every pass runs in the home pipe, through the recirculation port;
  ``pipes=passes``: pass k runs in pipe ``home + k`` (folded pipes), entered through the
  port with the worker's port number in that pipe, which must be in loopback mode; each
  pipe holds its own copy of the value arrays, indexed by slot and copy only.

``placement`` maps register names to MAU stages; None takes the planner's rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import SpecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .target import TargetProfile

PASS_MODES = ("resident", "stream")


@dataclass(frozen=True)
class PassShape:
    passes: int
    mode: str = "resident"
    pipes: int = 1
    placement: tuple[tuple[str, int], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"passes": self.passes, "mode": self.mode, "pipes": self.pipes}
        if self.placement is not None:
            d["placement"] = dict(self.placement)
        return d

    @property
    def stage_of(self) -> dict[str, int] | None:
        return dict(self.placement) if self.placement is not None else None


def shape_from_dict(d: Any, source: str = "layout") -> PassShape:
    """Validate a shape document (the ``shape`` table of a layout file)."""
    if not isinstance(d, dict):
        raise SpecError(f"{source}: shape must be a table with passes, mode and pipes")
    unknown = sorted(set(d) - {"passes", "mode", "pipes", "placement"})
    if unknown:
        raise SpecError(f"{source}: shape has an unknown key {unknown[0]!r}; known keys: mode, passes, pipes, placement")

    def count(key: str, default: int | None) -> int:
        v = d.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"{source}: shape.{key}={v!r} must be a positive integer")
        return v

    passes, pipes = count("passes", None), count("pipes", 1)
    mode = d.get("mode", "resident")
    if mode not in PASS_MODES:
        raise SpecError(f"{source}: shape.mode={mode!r} must be one of {', '.join(PASS_MODES)}")
    placement = None
    if "placement" in d:
        raw = d["placement"]
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                                for k, v in raw.items()):
            raise SpecError(f"{source}: shape.placement must map register names to stage numbers")
        placement = tuple(sorted(raw.items()))
    return PassShape(passes, mode, pipes, placement)


def shape_problem(profile: "TargetProfile", shape: PassShape, elements: int) -> str | None:
    """Why ``shape`` cannot carry ``elements`` on ``profile``, or None."""
    lanes, p = profile.lanes_per_register, shape.passes
    if p > profile.max_passes:
        return f"passes={p} exceeds the {profile.max_passes} pipeline passes {profile.name} allows"
    if elements % p or (elements // p) % lanes:
        return (f"elements_per_packet={elements} cannot be split into {p} equal passes of whole "
                f"{lanes}-lane register entries")
    if shape.mode == "stream" and (p == 1 or not profile.is_tna):
        return (f"a streamed layout needs several passes on a TNA target; {profile.name} with passes={p} "
                f"holds every value in one pass")
    if shape.pipes not in (1, p):
        return f"pipes={shape.pipes} must be 1 (recirculation in one pipe) or passes={p} (one pipe per pass)"
    if shape.pipes > 1 and (not profile.is_tna or shape.pipes > profile.pipes):
        return f"pipes={shape.pipes} folds the passes over {shape.pipes} pipes; {profile.name} has {profile.pipes}"
    return None
