"""torque-async plot: pictures of a -json results file (matplotlib, the optional `plot` extra).

One panel for each picture the run has data for, from the table PANELS: bandwidth over time of
every sampled test on one time axis (the window in which all tests ran shaded), bandwidth
across the disk for -scan/-scanfile sampled at every transfer, and every latency histogram the
results carry (each test's latency per transfer, each stream's lateness per sub-stream). A new
kind of picture is one more Panel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .report import sub_stream_names

WIDTH_IN, PANEL_IN, DPI = 10.0, 3.6, 100
SCAN_ACTIONS = ("scan", "scanfile")


class PlotError(Exception):
    """Nothing can be drawn, or matplotlib is missing; says which."""


def name(test: dict[str, Any]) -> str:
    return f"proc {test['proc']} {test['kind']}"


def sampled(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc["tests"] if t["samples"]["intervals"]]


def scanned(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in sampled(doc) if t["action"] in SCAN_ACTIONS and t["samples"]["every"] == 1]


def histograms(doc: dict[str, Any]) -> list[tuple[str, list[list[int]]]]:
    """(label, sparse histogram) of every non-empty histogram in the results."""
    found = []
    for test in doc["tests"]:
        rec = test["record"]
        found.append((f"{name(test)}: latency per transfer", rec["hist"]))
        if rec["subs"]:
            subs = sub_stream_names(doc["plan"]["groups"][test["group"]]["args"])
            found += [(f"{name(test)}: lateness of sub-stream {sub}", s["hist"])
                      for sub, s in zip(subs, rec["subs"])]
    return [(label, hist) for label, hist in found if hist]


def draw_bandwidth(ax, doc: dict[str, Any]) -> None:
    """Each sampled test's bandwidth over each interval, as steps on a time axis (s)."""
    for test in sampled(doc):
        spans = test["samples"]["intervals"]
        edges = [spans[0]["start"] / 1e9, *(s["end"] / 1e9 for s in spans)]
        ax.stairs([s["bw"] for s in spans], edges, label=name(test), linewidth=1.2)
    window = doc["overlap"]
    if window and window["together"]:
        ax.axvspan(window["start_ns"] / 1e9, window["end_ns"] / 1e9, color="tab:green",
                   alpha=0.12, label="all tests running")
    ax.set_xlabel("seconds since the start")
    ax.set_ylabel("MB/s")


def draw_scan(ax, doc: dict[str, Any]) -> None:
    """Bandwidth of each transfer against its place on the disk (transfer k of n at k/n)."""
    for test in scanned(doc):
        n = doc["plan"]["groups"][test["group"]]["locals"]["n"]
        place, xs = 0, []
        for span in test["samples"]["intervals"]:
            xs.append(100 * (place % n) / n)
            place += span["transfers"]
        ax.plot(xs, [s["bw"] for s in test["samples"]["intervals"]], ".", markersize=2,
                label=name(test))
    ax.set_xlabel("place on the disk (% of the scan)")
    ax.set_ylabel("MB/s")


def draw_histograms(ax, doc: dict[str, Any]) -> None:
    """Share of transfers per latency bucket (us, log scale), one line per histogram."""
    for label, buckets in histograms(doc):
        total = sum(n for *_, n in buckets)
        ax.plot([max(top, 1) / 1000 for _, top, _ in buckets],
                [100 * n / total for *_, n in buckets],
                drawstyle="steps-mid", marker=".", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency or lateness (us, upper bound of the bucket)")
    ax.set_ylabel("% of transfers")


@dataclass(frozen=True)
class Panel:
    title: str
    wanted: Callable[[dict[str, Any]], list]
    draw: Callable[[Any, dict[str, Any]], None]


PANELS = (Panel("Bandwidth over time (per sample interval)", sampled, draw_bandwidth),
          Panel("Bandwidth across the disk (-scan, -sample 0)", scanned, draw_scan),
          Panel("Latency histograms", histograms, draw_histograms))


def render(doc: dict[str, Any], path: str) -> list[tuple[str, list[str]]]:
    """Draw every panel the results have data for into a PNG at path; (title, line labels) of
    each panel drawn."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install 'torque-async[plot]'") from None
    panels = [p for p in PANELS if p.wanted(doc)]
    if not panels:
        raise PlotError("nothing to plot: the results hold no samples and no latencies")
    fig = Figure(figsize=(WIDTH_IN, PANEL_IN * len(panels)), dpi=DPI, layout="constrained")
    fig.suptitle(f"torque-async {doc['command']}", fontsize=9)
    drawn = []
    for ax, panel in zip(fig.subplots(len(panels), 1, squeeze=False)[:, 0], panels):
        panel.draw(ax, doc)
        ax.set_title(panel.title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        labels = ax.get_legend_handles_labels()[1]
        ax.legend(fontsize=7, ncol=max(1, len(labels) // 8))
        drawn.append((panel.title, labels))
    fig.savefig(path, format="png")
    return drawn
