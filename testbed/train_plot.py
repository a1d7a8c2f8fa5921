"""The picture of ``p4gen testbed train --png``: what differs between the protocols, and what must not.

Four panels from the runs' records (``p4gen.torch.train``):

* training loss against wall-clock time: where the protocols differ, since
  a step through the switch takes another time than one through Gloo;
* training loss against step: where they must not differ (the parity
  check); the curves lie on top of each other, so each protocol has its own
  line style and width, drawn widest first;
* test accuracy per epoch: one marker shape per protocol, hollow and of
  decreasing size, so that equal values show as nested markers;
* step time per protocol: the mean over the steps after the first (a bar),
  every step (dots), and the link-rate bound of the bytes a step needs (a
  black line), as ``p4gen testbed train`` prints them.
"""

from __future__ import annotations

import io

from p4gen.filewrite import PNG, write_file

from .errors import TestbedError

STYLES = ({"linestyle": "-", "linewidth": 5.0, "alpha": 0.35, "marker": "o", "size": 11},
          {"linestyle": "--", "linewidth": 2.2, "alpha": 0.9, "marker": "s", "size": 8},
          {"linestyle": ":", "linewidth": 2.2, "alpha": 1.0, "marker": "^", "size": 5})


def plot(records: dict[str, dict], path: str) -> None:
    """Write the four panels of ``records`` (protocol -> rank 0's run record) to the PNG ``path``."""
    from p4gen.extras import lacking

    why = lacking("--png", "matplotlib")
    if why:
        raise TestbedError(why)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .train_stats import steady_step, step_bound

    fig, ((lt, ls), (acc, st)) = plt.subplots(2, 2, figsize=(11, 8))
    names = list(records)
    bars = []
    for i, proto in enumerate(names):
        rec, sty = records[proto], STYLES[i % len(STYLES)]
        line = {"linestyle": sty["linestyle"], "linewidth": sty["linewidth"], "alpha": sty["alpha"], "label": proto}
        t, clock = 0.0, []
        for dt in rec["step_time"]:
            t += dt
            clock.append(t)
        color = lt.plot(clock, rec["step_loss"], **line)[0].get_color()
        ls.plot(range(1, len(rec["step_loss"]) + 1), rec["step_loss"], color=color, **line)
        epochs = range(1, len(rec["test_acc"]) + 1)
        acc.plot(epochs, rec["test_acc"], linestyle="none", marker=sty["marker"], markersize=sty["size"],
                 markerfacecolor="none", markeredgewidth=1.8, color=color, label=proto)
        mean, b = 1e3 * steady_step(rec), 1e3 * step_bound(rec)[0]
        st.bar(i, mean, color=color, alpha=0.5, width=0.6, label="mean after the first step" if i == 0 else None)
        st.plot([i - 0.3, i + 0.3], [b, b], color="black", linewidth=2,
                label="link-rate bound of a step's bytes" if i == 0 else None)
        st.annotate(f"{mean:.0f} ms", (i, mean), ha="center", va="bottom", fontsize=9, xytext=(0, 3),
                    textcoords="offset points")
        bars.append((i, color, [1e3 * x for x in rec["step_time"]], mean, b))
    lt.set_xlabel("wall-clock time of the training steps (s)")
    ls.set_xlabel("step")
    for ax in (lt, ls):
        ax.set_ylabel("training loss (rank 0's batch)")
    acc.set_xlabel("epoch")
    acc.set_ylabel("test accuracy")
    acc.set_xticks(list(range(1, max(len(r["test_acc"]) for r in records.values()) + 1)))
    # every step as a dot; the first step (DDP's first iteration) can be several times the others: a step
    # above the panel's top is drawn at the top with its time written beside it
    top = 1.3 * max(max(mean, b, sorted(ms)[len(ms) // 2]) for _i, _c, ms, mean, b in bars)
    for i, color, ms, _mean, _b in bars:
        st.plot([i + 0.15] * len(ms), [min(x, top) for x in ms], linestyle="none", marker=".", color=color,
                label="each step" if i == 0 else None)
        over = [x for x in ms if x > top]
        if over:
            first = " (step 1)" if max(over) == ms[0] else ""
            st.annotate(f"{max(over) / 1e3:.1f} s{first}", (i + 0.15, top), ha="left", va="top", fontsize=8,
                        xytext=(4, -2), textcoords="offset points")
    st.set_xticks(range(len(names)), names)
    st.set_ylabel("step time (ms)")
    st.set_ylim(0, 1.45 * top)                 # room for the legend above the clipped steps
    for ax in (lt, ls, acc, st):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9, ncol=2 if ax is st else 1, loc="upper right" if ax is st else "best")
    r0 = next(iter(records.values()))
    fig.suptitle(f"{r0['model']} ({r0['parameters']:,} parameters), {r0['workers']} workers, {r0['mbit']:g} Mbit/s "
                 f"links, MTU {r0.get('mtu', 1500)}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=90, format="png")
    plt.close(fig)
    write_file(path, buf.getvalue(), PNG, "plot", TestbedError)
