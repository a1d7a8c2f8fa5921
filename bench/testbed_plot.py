"""bench/testbed.py's picture (``--png``): all-reduce time against workers and against tensor size, each
protocol beside its link-rate bound, from the run rows the script measured (``RunResult.to_dict()``).

* Left: time against workers, at the tensor size measured with the most worker counts (the largest
  such size).  Right: time against tensor size, at the worker count measured with the most sizes.
* Each protocol has one colour: its measured times are solid lines with markers; its link-rate bound
  (wire bytes per element x elements / link rate, ``p4gen.testbed.bounds``) is the dashed line of the
  same colour with open markers, so a panel of one point still shows both.
* Further panels (the OmniReduce density sweep) are drawn by the callables in ``extra``.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Callable

COLOURS = {"switchml": "tab:blue", "omnireduce": "tab:green", "gloo": "tab:orange"}
MARKERS = {"switchml": "o", "omnireduce": "^", "gloo": "s"}
LABELS = {"switchml": "SwitchML (P4 switch)", "omnireduce": "OmniReduce (P4 switch)", "gloo": "Gloo ring (bridge)"}


def _mib(elements: int) -> float:
    return elements * 4 / 2**20


def _pick(rows: list[dict], key: str, other: str) -> int:
    """The value of ``key`` whose rows cover the most values of ``other`` (the largest on a tie)."""
    seen: dict[int, set] = {}
    for r in rows:
        seen.setdefault(r[key], set()).add(r[other])
    counts = Counter({k: len(v) for k, v in seen.items()})
    best = max(counts.values())
    return max(k for k, c in counts.items() if c == best)


def _series(ax, rows: list[dict], x: Callable[[dict], float]) -> None:
    for protocol in ("switchml", "omnireduce", "gloo"):
        pts = sorted((r for r in rows if r["protocol"] == protocol), key=x)
        if not pts:
            continue
        xs = [x(r) for r in pts]
        label = LABELS[protocol] + (f", density {pts[0]['density']:g}" if protocol == "omnireduce" else "")
        c, m = COLOURS[protocol], MARKERS[protocol]
        ax.plot(xs, [r["time"] for r in pts], "-", color=c, marker=m, label=f"{label}: measured")
        ax.plot(xs, [r["bound_time"] for r in pts], "--", color=c, marker=m, markerfacecolor="none",
                label=f"{label}: link-rate bound")


def figure_png(rows: list[dict], mbit: float, extra: tuple = ()) -> bytes:
    """The PNG of :func:`figure`."""
    import matplotlib.pyplot as plt

    fig = figure(rows, mbit, extra)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    plt.close(fig)
    return buf.getvalue()


def figure(rows: list[dict], mbit: float, extra: tuple = ()):
    """The figure of ``rows`` (those at the link rate ``mbit``) and ``extra`` panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("time") and r["mbit"] == mbit]
    panels = 2 + len(extra)
    fig, axs = plt.subplots(1, panels, figsize=(5.5 * panels, 4.4), squeeze=False)
    axs = list(axs[0])
    size = _pick(rows, "size", "workers")
    at_size = [r for r in rows if r["size"] == size]
    _series(axs[0], at_size, lambda r: r["workers"])
    axs[0].set_xlabel("workers")
    axs[0].set_xticks(sorted({r["workers"] for r in at_size}))
    axs[0].set_title(f"{_mib(size):g} MiB float32 per worker, {mbit:g} Mbit/s links")
    n = _pick(rows, "workers", "size")
    at_n = [r for r in rows if r["workers"] == n]
    _series(axs[1], at_n, lambda r: _mib(r["size"]))
    axs[1].set_xlabel("tensor per worker (MiB)")
    sizes = sorted({_mib(r["size"]) for r in at_n})
    if len(sizes) > 1:
        axs[1].set_xscale("log", base=2)
    axs[1].set_xticks(sizes, [f"{s:g}" for s in sizes])
    axs[1].set_title(f"{n} workers, {mbit:g} Mbit/s links" + ("" if len(sizes) > 1 else
                                                               " (one size: --sweep measures several)"))
    for ax in axs[:2]:
        ax.set_yscale("log")
        ax.set_ylabel("all-reduce time (s), slowest worker")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for draw, ax in zip(extra, axs[2:]):
        draw(ax)
    fig.tight_layout()
    return fig


def write_png(path: str, rows: list[dict], mbit: float, json_path: str, extra: tuple = ()) -> None:
    """Write the picture to ``path``, or say in one line why not (no matplotlib: the bench extra)."""
    from p4gen.errors import P4genError
    from p4gen.extras import lacking
    from p4gen.filewrite import PNG, write_file

    why = lacking("the plot", "matplotlib")
    if why:
        print(f"{why}; no plot (results in {json_path})")
        return
    if not any(r.get("time") and r["mbit"] == mbit for r in rows):
        return
    write_file(path, figure_png(rows, mbit, extra), PNG, "plot", P4genError)
    print(f"wrote {path} and {json_path}")
