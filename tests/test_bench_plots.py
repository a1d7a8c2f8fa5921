"""bench/testbed.py's picture: time against workers and against size, each protocol beside its link-rate
bound, every series visible even when a run measured one point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from needs import modules

modules("the plot", "matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import testbed_plot  # noqa: E402


def _row(protocol: str, workers: int, mib: float, time: float, bound: float, mbit: float = 25.0) -> dict:
    return {"protocol": protocol, "workers": workers, "size": int(mib * 2**18), "time": time, "bound_time": bound,
            "density": 0.1 if protocol == "omnireduce" else 1.0, "mbit": mbit}


def _drawn(ax) -> dict[str, tuple[list, list, str]]:
    """label -> (x, y, marker) of every line with a label."""
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata()), ln.get_marker()) for ln in ax.get_lines()
            if not ln.get_label().startswith("_")}


def test_time_against_workers_and_size_with_every_bound_drawn():
    rows = [_row(p, n, mib, t * n * mib, b * n * mib)
            for p, t, b in (("switchml", 0.5, 0.4), ("gloo", 0.7, 0.6), ("omnireduce", 0.3, 0.1))
            for n in (2, 4, 8) for mib in (1, 4)]
    rows.append(_row("switchml", 4, 16, 99.0, 1.0, mbit=20.0))         # another link rate: not in this picture
    fig = testbed_plot.figure(rows, 25.0)
    by_workers, by_size = fig.axes[:2]
    lines = _drawn(by_workers)
    assert lines["SwitchML (P4 switch): measured"] == ([2, 4, 8], [4.0, 8.0, 16.0], "o")   # at 4 MiB
    assert lines["SwitchML (P4 switch): link-rate bound"][1] == pytest.approx([3.2, 6.4, 12.8])
    assert set(lines) == {f"{p}: {k}" for p in ("SwitchML (P4 switch)", "Gloo ring (bridge)",
                                                  "OmniReduce (P4 switch), density 0.1")
                          for k in ("measured", "link-rate bound")}
    assert {text.get_text() for text in by_workers.get_legend().get_texts()} == set(lines)
    sizes = _drawn(by_size)
    assert sizes["Gloo ring (bridge): measured"][:2] == ([1.0, 4.0], [0.7 * 8, 0.7 * 8 * 4])     # at 8 workers
    assert by_size.get_title() == "8 workers, 25 Mbit/s links"


def test_one_run_still_shows_its_points_and_bounds():
    rows = [_row("switchml", 8, 4, 2.35, 1.4), _row("gloo", 8, 4, 2.69, 2.45)]
    fig = testbed_plot.figure(rows, 25.0)
    for ax in fig.axes[:2]:
        lines = _drawn(ax)
        assert len(lines) == 4 and all(marker not in ("None", "", None) for _x, _y, marker in lines.values())
    assert fig.axes[1].get_title() == "8 workers, 25 Mbit/s links (one size: --sweep measures several)"
    assert testbed_plot.figure_png(rows, 25.0).startswith(b"\x89PNG\r\n\x1a\n")
