"""torque-async plot: pictures of a -json results file (matplotlib, the optional `plot` extra).

Bandwidth over time gets one panel per sampled test (its own y axis, all on one time axis,
the window in which all tests ran shaded, a stream's target as a dashed line), from samples
merged into intervals of at least MIN_INTERVAL_NS or 1/MAX_POINTS of the run, so sampling
every transfer does not draw one transfer's rate as a spike. A scan sampled at every transfer
is drawn across the disk. Latencies and lateness are percentile curves on log axes (x: 90%,
99%, 99.9%, ... as in fio-plot and HdrHistogram), one panel for latency per transfer and one
for lateness (stream sub-streams, -cyclic wake-ups); lateness 0 (on time) is said in the
legend, not drawn, as a log axis has no 0. Each stream's frame lateness over time (its greatest
lateness per run of frames) gets a panel of its own.
"""
from __future__ import annotations

import io
import math
import statistics
import textwrap
from dataclasses import dataclass
from typing import Any

from . import outputs
from .report import sub_stream_names

WIDTH_IN, DPI = 11.0, 100
BW_PANEL_IN, PERCENTILE_PANEL_IN, TITLE_IN = 1.9, 3.4, 0.5
SCAN_ACTIONS = ("scan", "scanfile")
STREAM_ACTIONS = ("streams", "memStreams")
MIN_INTERVAL_NS = 1_000_000        # merged sample intervals last at least 1 ms ...
MAX_POINTS = 200                   # ... and at least 1/200 of the sampled span
TITLE_CHARS = 110
PERCENTILE_TICKS = ((1, "0%"), (2, "50%"), (10, "90%"), (100, "99%"), (1000, "99.9%"),
                    (10**4, "99.99%"), (10**5, "99.999%"), (10**6, "99.9999%"))
END_MARKER, END_MARK = "D", "\u25c6"  # each curve's max: a diamond, named in the xlabel
TICK_ROOM = 0.07                   # a percentile's tick closer than this share of the axis
                                   # to the max's (log) is left out: their labels would touch
MARKERS = ".x^+"                   # a test's marker: its place among the tests, per 10 (the
                                   # palette's colours repeat beyond 10)
SUB_STYLES = ("-", "--", ":")      # a stream's sub-streams (MAX_SUBS) in the lateness panel
LEGEND_ROW_IN, LEGEND_MARGIN_IN = 0.16, 0.4   # a legend entry's height at fontsize 7
MAX_BW_PANELS = 12                 # bandwidth panels of one test each at most (bandwidth_sets)


class PlotError(Exception):
    """The picture cannot be made: matplotlib is missing, or it cannot be written; says which."""


class NothingToPlot(PlotError):
    """The results hold nothing to draw (the input's doing: exit 2)."""


def name(doc: dict[str, Any], test: dict[str, Any]) -> str:
    """A test in legends and titles: its proc and kind; under mpiexec its rank too, and its
    host when the ranks ran on more than one."""
    where = doc.get("cluster")
    if not where:
        return f"proc {test['proc']} {test['kind']}"
    host = f" on {test.get('host')}" if len(where.get("hosts", ())) > 1 else ""
    return f"proc {test['proc']} {test['kind']} (rank {test.get('rank')}{host})"


def sampled(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The tests with samples that move bytes (-cyclic and spinWait have no bandwidth) over a
    time that passed."""
    return [t for t in doc["tests"] if t["record"]["transfer_bytes"] and
            any(s["end"] > s["start"] for s in t["samples"]["intervals"])]


def scanned(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in sampled(doc) if t["action"] in SCAN_ACTIONS and t["samples"]["every"] == 1]


@dataclass(frozen=True)
class Span:
    start: int                     # ns since time zero
    end: int
    transfers: int
    first: int                     # transfers before this span (the place of a scan)

    def bw(self, transfer_bytes: int) -> float:
        return self.transfers * transfer_bytes / 2**20 / ((self.end - self.start) / 1e9)


def merged(test: dict[str, Any], shortest: int) -> list[Span]:
    """The test's sample intervals joined until each lasts at least `shortest` ns; a shorter
    rest at the end joins the last span (alone only when it is all there is)."""
    out, start, count, first = [], None, 0, 0
    for s in test["samples"]["intervals"]:
        if start is None:
            start = s["start"]
        count += s["transfers"]
        if s["end"] - start >= shortest:
            out.append(Span(start, s["end"], count, first))
            first, start, count = first + count, None, 0
    if start is not None:
        last = out.pop() if out else Span(start, start, 0, first)
        out.append(Span(last.start, s["end"], last.transfers + count, last.first))
    return [span for span in out if span.end > span.start]


def shortest_interval(tests: list[dict[str, Any]]) -> int:
    """MIN_INTERVAL_NS, or 1/MAX_POINTS of the span the samples cover when that is longer."""
    spans = [t["samples"]["intervals"] for t in tests]
    whole = max(s[-1]["end"] for s in spans) - min(s[0]["start"] for s in spans)
    return max(MIN_INTERVAL_NS, whole // MAX_POINTS)


def stream_target(test: dict[str, Any]) -> float | None:
    """MiB/s a stream test is paced at: its sub-streams' targets summed."""
    if not test.get("streams"):
        return None
    return sum(sub["target_bw"] for key, sub in test["streams"].items() if key != "verdict" and sub)


def draw_bandwidth(ax, doc: dict[str, Any], tests: list[dict[str, Any]], shortest: int,
                   look: dict[tuple, Look]) -> None:
    """Tests' bandwidth over merged intervals, as steps on the time axis (s); a panel of one
    test labels its line MB/s (its title names it), of several each by its name."""
    for test in tests:
        tb = test["record"]["transfer_bytes"]
        spans = merged(test, shortest)
        edges = [spans[0].start / 1e9, *(s.end / 1e9 for s in spans)]
        ax.stairs([s.bw(tb) for s in spans], edges, color=look[key(test)].colour,
                  label="MB/s" if len(tests) == 1 else name(doc, test), linewidth=1.2)
        target = stream_target(test)
        if target is not None:
            ax.axhline(target, color="tab:red", linestyle="--", linewidth=1,
                       label=f"target {target:.1f} MB/s ({test['streams']['verdict']})"
                       + ("" if len(tests) == 1 else f", {name(doc, test)}"))
    window = doc["overlap"]
    if window and window["together"]:
        ax.axvspan(window["start_ns"] / 1e9, window["end_ns"] / 1e9, color="tab:green",
                   alpha=0.12, label="all tests running")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("MB/s")


def bandwidth_sets(doc: dict[str, Any], tests: list[dict[str, Any]]) -> list[tuple[str, list]]:
    """(what, tests) of each bandwidth panel: a panel a test, or past MAX_BW_PANELS of them a
    panel a group, or past that many groups one for all (matplotlib's time grows with the
    panels: a panel a test would not finish for hundreds of tests)."""
    if len(tests) <= MAX_BW_PANELS:
        return [(name(doc, t), [t]) for t in tests]
    groups: dict[int, list] = {}
    for t in tests:
        groups.setdefault(t["group"], []).append(t)
    if len(groups) > MAX_BW_PANELS:
        return [(f"all {len(tests)} sampled tests", tests)]
    return [(f"group {g} ({doc['plan']['groups'][g]['text']}), its {len(ts)} sampled "
             f"process{'es' * (len(ts) > 1)}", ts) for g, ts in groups.items()]


def traced_streams(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc["tests"] if t["record"].get("late_trace")]


def draw_lateness(ax, doc: dict[str, Any], tests: list[dict[str, Any]],
                  look: dict[tuple, Look]) -> None:
    """Each stream's greatest lateness per run of frames (ms) at the run's last completion."""
    t0 = doc["time_zero_ns"]
    for test in tests:
        trace = test["record"]["late_trace"]
        ax.step([(t - t0) / 1e9 for t, _ in trace], [ns / 1e6 for _, ns in trace], where="pre",
                label=name(doc, test), color=look[key(test)].colour, linewidth=1.2)
    ax.set_xlabel("seconds since the start")
    ax.set_ylabel("frame lateness, ms (greatest per point)")


def draw_scan(ax, doc: dict[str, Any], tests: list[dict[str, Any]], shortest: int,
              look: dict[tuple, Look]) -> None:
    """Bandwidth of merged transfers against their place on the disk (transfer k of n at k/n)."""
    for test in tests:
        n = doc["plan"]["groups"][test["group"]]["locals"]["n"]
        spans = merged(test, shortest)
        ax.plot([100 * (s.first % n) / n for s in spans],
                [s.bw(test["record"]["transfer_bytes"]) for s in spans], look[key(test)].marker,
                markersize=3, color=look[key(test)].colour, label=name(doc, test))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("place on the disk (% of the scan)")
    ax.set_ylabel("MB/s")


def key(test: dict[str, Any]) -> tuple:
    """A test among the document's: its rank (under mpiexec) and proc."""
    return test.get("rank"), test["proc"]


@dataclass(frozen=True)
class Look:
    colour: Any
    marker: str


def looks(doc: dict[str, Any]) -> dict[tuple, Look]:
    """Each test's colour and marker, the same in every panel (by its place among the tests, so
    any proc number has one)."""
    tests, colours = doc["tests"], palette()
    return {key(t): Look(colour, MARKERS[i // len(colours) % len(MARKERS)])
            for i, (t, colour) in enumerate(zip(tests, colours * len(tests)))}


@dataclass(frozen=True)
class Curve:
    test: tuple                    # key(test)
    label: str
    hist: list[list[int]]          # sparse [lowest, highest ns, count]
    sub: int = 0                   # a stream's sub-stream: its line style


def histograms(doc: dict[str, Any], lateness: bool) -> list[Curve]:
    """Each non-empty latency histogram, or with `lateness` each lateness histogram (stream
    sub-streams, -cyclic wake-ups)."""
    found = []
    for test in doc["tests"]:
        rec, who = test["record"], key(test)
        if test["action"] == "cyclic":
            if lateness:
                found.append(Curve(who, f"{name(doc, test)}: wake-up lateness", rec["hist"]))
            continue
        if not lateness:
            found.append(Curve(who, f"{name(doc, test)}: latency per transfer", rec["hist"]))
        elif rec["subs"]:
            subs = sub_stream_names(doc["plan"]["groups"][test["group"]]["args"])
            found += [Curve(who, f"{name(doc, test)}: sub-stream {sub}", s["hist"], i)
                      for i, (sub, s) in enumerate(zip(subs, rec["subs"]))]
    return [c for c in found if any(n for *_, n in c.hist)]


def percent(share: float) -> str:
    """A share as a percentage that never rounds to 0% or 100% unless it is exactly that: one
    late frame in 1500 is 99.9%, not 100%."""
    shown = math.floor(share * 1000 + 1e-6) / 10      # (0.58 * 1000 is 579.999...)
    if share < 1:
        shown = min(shown, 99.9)
    return f"{shown:g}%" if shown or not share else "<0.1%"


def nines(share: float, total: int) -> float:
    """The x of a percentile: 1 / (1 - p), the top one 1 / total from 100%."""
    return 1 / max(1 - share, 1 / total)


def percentile_curve(hist: list[list[int]]) -> tuple[list[float], list[float], float]:
    """(x, y in us, share at 0) of a histogram, to be drawn as steps ending at each point: the
    values between percentiles x[i-1] and x[i] are at most y[i] (a bucket's highest value).
    Values of 0 (on time) are left out and counted in the share at 0."""
    total = sum(n for *_, n in hist)
    zeros = sum(n for _, top, n in hist if top <= 0)
    xs, ys, seen = [], [], zeros
    for _, top, n in hist:
        if top <= 0:
            continue
        if not xs:
            xs.append(nines(seen / total, total))       # where the first bucket begins
            ys.append(top / 1000)
        seen += n
        xs.append(nines(seen / total, total))
        ys.append(top / 1000)
    return xs, ys, zeros / total


def draw_percentiles(ax, found: list[Curve], look: dict[tuple, Look]) -> None:
    """Percentile curves, log-log: the tail to the right, where a histogram can't show it. A
    histogram of zeros only has no curve, only its legend entry."""
    right, ends = 10.0, set()
    for curve in found:
        xs, ys, on_time = percentile_curve(curve.hist)
        shown = f"{curve.label} ({percent(on_time)} at 0)" if on_time else curve.label
        colour = look[curve.test].colour
        ax.plot(xs, ys, drawstyle="steps-pre", marker=look[curve.test].marker, markersize=3,
                color=colour, linestyle=SUB_STYLES[curve.sub % len(SUB_STYLES)], label=shown)
        if xs:                     # its own max: a curve of fewer values ends further left
            ax.scatter(xs[-1:], ys[-1:], marker=END_MARKER, s=25, color=colour, zorder=3)
            ends.add(xs[-1])
    right = max([right, *ends])
    ax.set_xscale("log")
    ax.set_yscale("log")
    if len(ends) == 1:             # every curve ends at the same 100%: the axis says max there
        end, = ends
        room = TICK_ROOM * math.log10(right * 1.3)
        ticks = [(x, label) for x, label in PERCENTILE_TICKS
                 if math.log10(end / x) >= room] + [(end, "max")]
    else:                          # each curve's max is its own mark, not one place on the axis
        if not ends:               # every value 0 (all on time): a log axis needs a range
            ax.set_ylim(1, 10)
        ticks = [(x, label) for x, label in PERCENTILE_TICKS if x <= right]
    ax.set_xticks([x for x, _ in ticks], [label for _, label in ticks])
    ax.set_xlim(0.8, right * 1.3)         # a curve's first value (0%, x = 1) clear of the edge
    ax.set_xlabel(f"percentile ({END_MARK} marks each curve's max)" if ends else "percentile")
    ax.set_ylabel("us (bucket upper bound)")


def palette() -> list:
    """tab10's colours: tab20's come in pairs of one hue, hard to tell apart."""
    from matplotlib import colormaps
    cmap = colormaps["tab10"]
    return [cmap(i) for i in range(cmap.N)]


@dataclass(frozen=True)
class Panel:
    title: str
    height: float
    draw: Any                      # f(ax) drawing the panel
    timeline: bool = False         # a bandwidth-over-time panel: they share the time axis


def legend_room(base: float, entries: int) -> float:
    """A panel's height: `base`, or more where its legend (beside it) needs it."""
    return max(base, entries * LEGEND_ROW_IN + LEGEND_MARGIN_IN)


def panels(doc: dict[str, Any]) -> list[Panel]:
    """Every panel the results have data for, top to bottom."""
    out = []
    tests, look = sampled(doc), looks(doc)
    if tests:
        shortest = shortest_interval(tests)
        every = f"intervals of at least {shortest / 1e6:.2g} ms"
        cut = ", sampling stopped at its limit"
        out += [Panel(f"{what}: bandwidth over time ({every}"
                      f"{cut if any(t['samples']['limit_reached'] for t in ts) else ''})",
                      legend_room(BW_PANEL_IN, len(ts) + 1),
                      lambda ax, ts=ts: draw_bandwidth(ax, doc, ts, shortest, look),
                      timeline=True)
                for what, ts in bandwidth_sets(doc, tests)]
        scans = scanned(doc)
        if scans:
            out.append(Panel(f"Bandwidth across the disk (-scan, -sample 0; {every})",
                             legend_room(PERCENTILE_PANEL_IN, len(scans)),
                             lambda ax: draw_scan(ax, doc, scans, shortest, look)))
    traced = traced_streams(doc)
    if traced:
        out.append(Panel("Streams: frame lateness over time", legend_room(BW_PANEL_IN, len(traced)),
                         lambda ax: draw_lateness(ax, doc, traced, look), timeline=True))
    for title, lateness in (("Latency per transfer (percentiles)", False),
                            ("Lateness: streams' sub-streams and -cyclic wake-ups (percentiles)",
                             True)):
        curves = histograms(doc, lateness)
        if curves:
            out.append(Panel(title, legend_room(PERCENTILE_PANEL_IN, len(curves)),
                             lambda ax, curves=curves: draw_percentiles(ax, curves, look)))
    return out


def figure(doc: dict[str, Any]):
    """The matplotlib Figure of the results (or of a capacity search: curve) and (title,
    legend labels) of each panel."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install 'torque-async[plot]'") from None
    from matplotlib import rc_context
    with rc_context({"text.parse_math": False}):   # a '$' in a command or a name is text
        return (curve if doc.get("schema") == CAPACITY else drawn_figure)(doc, Figure)


CAPACITY = "torque-async-capacity"     # capacity --json (capacity.SCHEMA)
VERDICT_LOOK = {True: ("o", "tab:green", "passed"), False: ("X", "tab:red", "failed"),
                None: ("s", "tab:gray", "not decided")}


def curve(doc: dict[str, Any], Figure):
    """capacity --json: the varied value against the first criterion's figure, each round a
    dot and each point's median marked by its verdict, the criterion's limit a dashed line."""
    if not doc["points"]:
        raise NothingToPlot("nothing to plot: the search ran no point")
    crit = doc["criteria"][0]
    limit = crit["limit"] / 1e3 if crit["kind"] in ("p99", "p999") else crit["limit"]
    fig = Figure(figsize=(WIDTH_IN, 5), dpi=DPI, layout="constrained")
    fig.suptitle("\n".join(textwrap.wrap(f"torque-async {doc['command']}", TITLE_CHARS)),
                 fontsize=9)
    ax = fig.subplots()
    shown = set()
    for p in doc["points"]:
        ys = [r["figures"][0] for r in p["rounds"] if r["figures"][0] is not None]
        if not ys:
            continue
        ax.plot([p["value"]] * len(ys), ys, ".", color="black", alpha=0.4)
        marker, colour, said = VERDICT_LOOK[p["verdict"]]
        ax.plot([p["value"]], [statistics.median(ys)], marker, color=colour, markersize=9,
                label=None if said in shown else f"median, {said}")
        shown.add(said)
    ax.axhline(limit, linestyle="--", color="tab:blue", label=f"criterion {crit['text']}")
    values = [p["value"] for p in doc["points"]]
    if max(values) >= 8 * min(values):
        ax.set_xscale("log", base=2)
    else:
        ax.xaxis.get_major_locator().set_params(integer=True)
        if len(set(values)) == 1:          # one value: room for integer ticks (not 0.96, 1.04)
            ax.set_xlim(values[0] - 1, values[0] + 1)
    ax.set_xlabel(f"{doc['varied']} of group {doc['group']}")
    ax.set_ylabel(crit["figure"])
    found = "none" if doc["capacity"] is None else doc["capacity"]
    title = f"capacity: {found}" + (f", {doc['failed']} failed" if doc["failed"] else "")
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    return fig, [(title, ax.get_legend_handles_labels()[1])]


def drawn_figure(doc: dict[str, Any], Figure):
    chosen = panels(doc)
    if not chosen:
        raise NothingToPlot("nothing to plot: the results hold no samples and no latencies")
    heights = [p.height for p in chosen]
    fig = Figure(figsize=(WIDTH_IN, TITLE_IN + sum(heights)), dpi=DPI, layout="constrained")
    fig.suptitle("\n".join(textwrap.wrap(f"torque-async {doc['command']}", TITLE_CHARS)),
                 fontsize=9)
    axes = fig.subplots(len(chosen), 1, squeeze=False, height_ratios=heights)[:, 0]
    bandwidth = [ax for ax, p in zip(axes, chosen) if p.timeline]
    for ax in bandwidth[1:]:
        ax.sharex(bandwidth[0])
    if bandwidth:
        bandwidth[-1].set_xlabel("seconds since the start")
    drawn = []
    for ax, panel in zip(axes, chosen):
        panel.draw(ax)
        ax.set_title(panel.title, fontsize=9, loc="left")
        ax.grid(True, which="major", alpha=0.3)
        labels = ax.get_legend_handles_labels()[1]
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
        drawn.append((panel.title, labels))
    return fig, drawn


MARK = "plot"                      # the mark of a picture plot made (outputs.made_here)


def render(doc: dict[str, Any], path: str, replace: bool = False) -> list[tuple[str, list[str]]]:
    """Draw the results into a PNG at path (a file there that plot did not make only when
    `replace`); (title, legend labels) of each panel drawn."""
    fig, drawn = figure(doc)
    png = io.BytesIO()
    fig.savefig(png, format="png")
    try:
        outputs.write(path, png.getvalue(), mark=MARK, replace=replace)
    except OSError as e:
        raise PlotError(f"cannot write {path}: {e.strerror}") from None
    return drawn
