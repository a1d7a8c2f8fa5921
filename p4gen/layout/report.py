"""Text and JSON views of a layout search (``p4gen plan``)."""

from __future__ import annotations

from typing import Any

from .. import protocols
from .search import Candidate, SearchResult


def _time(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _size(elements: int) -> str:
    b = elements * 4
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:g} {unit} float32"
    return f"{b} B float32"


HEAD = ("layout", "elements", "passes", "result passes", "mode", "pipes", "width", "slots", "stages", "SRAM blocks",
        "predicted", "bound", "best saves")


def _row(label: str, c: Candidate, gain: str) -> list[str]:
    s, p = c.spec, c.prediction
    dash = "-"
    return [label, str(s.elements_per_packet), str(c.shape.passes), str(p.passes_per_result), c.shape.mode,
            str(c.shape.pipes), str(s.value_width), str(s.slots), str(c.stages_used or dash),
            str(c.sram_blocks) if c.placement and c.placement.stage_of is not None else dash,
            _time(p.time_s), p.bound, gain]


def render_text(res: SearchResult) -> str:
    wl, prof = res.workload, res.profile
    b = res.best.spec
    lines = [
        f"plan: {b.protocol} ({b.variant}) on {prof.name}: {wl.workers} workers, {wl.link_gbps:g} Gb/s links, "
        f"RTT {wl.rtt_us:g} us, {wl.elements} elements ({_size(wl.elements)})"
        + (f", block density {wl.density:g}" if protocols.protocol(b.protocol).sparse else "") + f"; objective {res.objective}",
        f"search: exhaustive over {res.shapes} shapes (elements x passes x PHV mode x pipes x value width), "
        f"{res.shapes_fitting} of which fit, and slots 1..{res.slot_range} per shape by bisection "
        f"(fitting never gets easier with more slots; the time-optimal window is the smallest that reaches "
        f"the other bounds); "
        f"the result is the optimum of the cost model over that space",
    ]
    if res.certified is not None:
        lines.append(f"stages: placed exactly; Z3 Optimize {'confirms' if res.certified else 'does NOT confirm'} "
                     f"that {res.best.stages_used} stages is the fewest for the best layout")
    rows = [_row("best", res.best, "")]
    rows += [_row("runner-up", c, f"{res.gain(c):.1f}%") for c in res.runners_up]
    rows += [_row(f"reference: {c.label}", c, f"{res.gain(c):.1f}%") for c in res.references]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEAD)]
    lines.append("")
    lines.append("  ".join(h.ljust(w) for h, w in zip(HEAD, widths)).rstrip())
    for r in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    lines.append("")
    lines.append("best saves: the predicted time the best layout saves against the row's layout, in percent of the row's")
    for c in res.references:
        if abs(res.gain(c)) < 0.05:
            lines.append(f"{c.label} is already optimal here: it is bound by the {c.prediction.bound} as the best is, "
                         f"with the same bytes per element on the wire")
    for n in res.notes:
        lines.append(n)
    return "\n".join(lines)


def result_dict(res: SearchResult) -> dict[str, Any]:
    return {"target": res.profile.name, "workload": res.workload.to_dict(), "objective": res.objective,
            "best": res.best.describe(), "runners_up": [c.describe() for c in res.runners_up],
            "references": [{**c.describe(), "gain_pct": res.gain(c)} for c in res.references],
            "search": {"shapes": res.shapes, "shapes_fitting": res.shapes_fitting, "slot_range": res.slot_range,
                       "exhaustive": True, "certified": res.certified}}
