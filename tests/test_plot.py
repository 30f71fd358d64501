"""torque-async plot: real PNGs of the right size, the panels the data calls for, clear errors."""
from __future__ import annotations

import json
import struct
import sys

import pytest
from click.testing import CliRunner
from matplotlib.backends.backend_agg import FigureCanvasAgg

from torque_async import cli, cmdline, export, plot, report
from torque_async.results import SubStream

from conftest import run_cli
from test_report import INFO, MS, hist_of, record

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def sampled_doc(argv: str, per_sample: int = 4):
    """Two tests of a plan, each with latencies, the first sampled every per_sample transfers."""
    plan = cmdline.parse(argv.split())
    samples = tuple(((k + 2) * MS, (k + 1) * per_sample) for k in range(8))
    recs = (record(0, 1, 8 * MS, 8 * per_sample, 65536, samples=samples,
                   hist=hist_of(1000, 2000, 2000), lat_count=3),
            record(1, 1, 6 * MS, 10, 65536, hist=hist_of(5000), lat_count=1))
    return export.document(plan, recs, plan.procs(), INFO, "today")


def lines_of(ax) -> dict[str, object]:
    """An axes' legend entries: label -> artist."""
    handles, labels = ax.get_legend_handles_labels()
    return dict(zip(labels, handles))


def test_each_sampled_test_gets_its_own_panel_on_one_time_axis(tmp_path):
    doc = sampled_doc("-sample 3 -bzero -sample 3 -load")
    doc["tests"][1]["samples"] = doc["tests"][0]["samples"]         # both sampled
    doc["tests"][1]["record"]["transfer_bytes"] = 1024              # a 64 x slower test
    fig, drawn = plot.figure(doc)
    bzero, load, latency = fig.axes
    assert [t for t, _ in drawn] == [
        "proc 0 Bzero: bandwidth over time (intervals of at least 1 ms)",
        "proc 1 Load: bandwidth over time (intervals of at least 1 ms)",
        "Latency per transfer (percentiles)"]
    assert bzero.get_ylim()[1] > 200 and load.get_ylim()[1] < 10    # each on its own scale
    assert load.get_shared_x_axes().joined(bzero, load)
    assert "all tests running" in lines_of(bzero)
    FigureCanvasAgg(fig).draw()
    for ax in fig.axes:                                             # legends beside the data
        assert ax.get_legend().get_window_extent().x0 > ax.get_window_extent().x1


def intervals(doc, test: int, points) -> None:
    """Give test `test` samples at the given (end ns, transfers so far) points, 64 KB each."""
    ends = [(0, 0), *points]
    doc["tests"][test]["samples"]["intervals"] = [
        {"start": t0, "end": t1, "transfers": k1 - k0, "bw": 0.0}
        for (t0, k0), (t1, k1) in zip(ends, points)]
    doc["tests"][test]["record"]["transfer_bytes"] = 65536


def test_intervals_shorter_than_the_minimum_are_merged_so_no_spike_is_drawn():
    doc = sampled_doc("-sample 0 -bzero -load")
    # 400 transfers over 400 ms, one of them measured over 1 us (alone: 62,500 MB/s)
    points, t = [], 0
    for k in range(1, 401):
        t += 1_000 if k == 200 else 1_001_000 if k == 201 else 1_000_000
        points.append((t, k))
    intervals(doc, 0, points)
    fig, drawn = plot.figure(doc)
    stairs = fig.axes[0].patches[0]
    values, edges, _ = stairs.get_data()
    shortest = max(plot.MIN_INTERVAL_NS, t // plot.MAX_POINTS) / 1e9
    assert all(b - a >= shortest - 1e-12 for a, b in zip(edges[:-1], edges[1:]))
    assert values.max() < 2 * 62.5       # 64 KB per ms is 62.5 MB/s; alone, the 1 us one 62,500
    assert abs(sum(v * (b - a) for v, a, b in zip(values, edges[:-1], edges[1:]))
               - 400 * 65536 / 2**20) < 1e-6             # every transfer is still counted
    assert "intervals of at least 2 ms" in drawn[0][0]


def test_latency_is_drawn_as_percentile_curves_on_log_axes():
    doc = sampled_doc("-bzero -load")
    fig, drawn = plot.figure(doc)
    ax = fig.axes[-1]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    curve = lines_of(ax)["proc 0 Bzero: latency per transfer"]
    xs, ys = curve.get_data()
    # 1000, 2000, 2000 ns: a third at most 1.007 us (its bucket), all at most 2.015 us
    assert list(xs) == pytest.approx([1, 1.5, 3])
    assert list(ys) == pytest.approx([1.007, 1.007, 2.015], rel=0.001)
    assert len({tuple(line.get_color()) for line in ax.get_lines()}) == len(ax.get_lines())
    # each curve's own max is marked at its own end, the one-value curve's at x = 1, and no
    # single place on the axis says max (it spans at least to 90%)
    ends = {tuple(c.get_offsets()[-1]) for c in ax.collections}
    assert ends == {(line.get_xdata()[-1], line.get_ydata()[-1]) for line in ax.get_lines()}
    assert {x for x, _ in ends} == {1, 3} and plot.END_MARK in ax.get_xlabel()
    assert [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()] == \
        [(1, "0%"), (2, "50%"), (10, "90%")]
    # curves that end together: the right end, 100% (x = 3), says max; no 90% beside it
    doc["tests"][1]["record"]["hist"] = doc["tests"][0]["record"]["hist"]
    ax = plot.figure(doc)[0].axes[-1]
    assert [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()] == \
        [(1, "0%"), (2, "50%"), (3, "max")]


def test_lateness_zero_is_in_the_legend_not_drawn_and_cyclic_has_its_curve():
    plan = cmdline.parse("-memStreams rw 2 64 62.5 0 1 1 -cyclic 1000".split())
    subs = tuple(SubStream(transfers=4, late=1, late_run=1, lo=0, hi=5000, total=5000,
                           hist=hist_of(0, 0, 0, 5000)) if i == 0 else
                 SubStream(transfers=4, late=0, late_run=0, lo=0, hi=0, total=0,
                           hist=hist_of(0, 0, 0, 0)) for i in range(2))
    recs = (record(0, 1, 8 * MS, 4, 65536, hist=hist_of(3000), lat_count=1, subs=subs),
            record(1, 1, 8 * MS, 0, 0, hist=hist_of(20_000, 40_000), lat_count=2))
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    fig, drawn = plot.figure(doc)
    titles = [t for t, _ in drawn]
    assert titles == ["Latency per transfer (percentiles)",
                      "Lateness: streams' sub-streams and -cyclic wake-ups (percentiles)"]
    names = report.sub_stream_names(["rw", 2])
    late = lines_of(fig.axes[1])
    assert list(late) == [f"proc 0 MemStreams: sub-stream {names[0]} (75% at 0)",
                          f"proc 0 MemStreams: sub-stream {names[1]} (100% at 0)",
                          "proc 1 Cyclic: wake-up lateness"]
    xs, ys = late[f"proc 0 MemStreams: sub-stream {names[0]} (75% at 0)"].get_data()
    assert min(ys) > 1 and list(xs) == [4, 4]              # starts at 75%, nothing at 0
    assert len(late[f"proc 0 MemStreams: sub-stream {names[1]} (100% at 0)"].get_xdata()) == 0
    assert "Cyclic" not in " ".join(lines_of(fig.axes[0]))   # wake-ups are not transfers


def test_a_stream_s_target_is_a_line_and_a_long_title_wraps():
    argv = " ".join(["-sample 0 -memStreams rrw 2 64 25 0 1 1"] + ["-n 4 -bzero"] * 12)
    doc = sampled_doc(argv)
    intervals(doc, 0, [(k * 2_000_000, k) for k in range(1, 50)])
    doc["tests"][0]["streams"] = {"verdict": "MISSED",       # as export puts it for a stream
                                  **{f"sub{i}": {"target_bw": 25.0} for i in range(3)}}
    fig, drawn = plot.figure(doc)
    target = lines_of(fig.axes[0])["target 75.0 MB/s (MISSED)"]
    assert list(target.get_ydata()) == [75, 75]            # three sub-streams of 25 MB/s
    title = fig.get_suptitle()
    assert "\n" in title and all(len(ln) <= plot.TITLE_CHARS for ln in title.splitlines())


def test_a_sampled_run_draws_a_png_of_its_panels(tmp_path):
    out = tmp_path / "run.png"
    drawn = plot.render(sampled_doc("-sample 3 -bzero -load"), str(out))
    assert [t for t, _ in drawn] == ["proc 0 Bzero: bandwidth over time (intervals of at least "
                                     "1 ms)", "Latency per transfer (percentiles)"]
    height = plot.TITLE_IN + plot.BW_PANEL_IN + plot.PERCENTILE_PANEL_IN
    assert png_size(out) == (plot.WIDTH_IN * plot.DPI, round(height * plot.DPI))
    assert out.stat().st_size > 20_000                  # drawn, not a blank canvas


def test_a_scan_sampled_at_every_transfer_maps_bandwidth_across_the_disk(tmp_path):
    out = tmp_path / "scan.png"
    drawn = plot.render(sampled_doc("-n 8 -i 1 -sample 0 -scan /dev/sdz -load", per_sample=1),
                        str(out))
    titles = [title for title, _ in drawn]
    assert titles == ["proc 0 Scan: bandwidth over time (intervals of at least 1 ms)",
                      "Bandwidth across the disk (-scan, -sample 0; intervals of at least 1 ms)",
                      "Latency per transfer (percentiles)"]
    assert drawn[1][1] == ["proc 0 Scan"]


def test_a_real_stream_s_lateness_is_drawn_for_each_sub_stream(tmp_path):
    r = run_cli("-smkey", "0x7702", "-json", "run.json", "-sample", "9", "-memStreams", "rw", "2",
                "64", "62.5", "0", "0.05", "1")
    assert r.returncode == 0, r.stderr
    doc = export.load(str(tmp_path / "run.json"))
    (test,) = doc["tests"]
    subs = test["record"]["subs"]
    assert len(subs) == 2 and all(sum(n for *_, n in s["hist"]) == s["transfers"] > 0 for s in subs)
    drawn = dict(plot.render(doc, str(tmp_path / "run.png")))
    names = report.sub_stream_names(["rw", 2])
    late = drawn["Lateness: streams' sub-streams and -cyclic wake-ups (percentiles)"]
    assert [ln.split(" (")[0] for ln in late] == [f"proc 0 MemStreams: sub-stream {n}"
                                                  for n in names]
    assert drawn["Latency per transfer (percentiles)"] == [
        "proc 0 MemStreams: latency per transfer"]
    verdict = test["streams"]["verdict"]
    (bandwidth,) = [k for k in drawn if k.startswith("proc 0 MemStreams: bandwidth over time")]
    assert drawn[bandwidth] == ["MB/s", f"target 125.0 MB/s ({verdict})"]   # 2 x 62.5
    assert drawn["Streams: frame lateness over time"] == ["proc 0 MemStreams"]
    trace = test["record"]["late_trace"]        # 2 x 50 transfers: one point each, in order
    assert len(trace) == 100 and [t for t, _ in trace] == sorted(t for t, _ in trace)
    assert max(ns for _, ns in trace) == max(s["hi"] for s in subs)


def test_nothing_to_plot_is_said_plainly_with_exit_2(tmp_path):
    plan = cmdline.parse(["-bzero"])
    doc = export.document(plan, (record(0, 0, 0, 0, 64),), plan.procs(), INFO, "today")
    with pytest.raises(plot.NothingToPlot, match="nothing to plot"):
        plot.render(doc, str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()
    (tmp_path / "x.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(cli.main, ["plot", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and result.output.strip() == (
        "torque-async: error: nothing to plot: the results hold no samples and no latencies")


def test_without_matplotlib_the_command_says_how_to_get_it(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sampled_doc("-bzero -load")))
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import fails as if absent
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = CliRunner().invoke(cli.main, ["plot", str(path)])
    assert result.exit_code == 1
    assert result.output.strip() == ("torque-async: error: plotting needs matplotlib: "
                                     "pip install 'torque-async[plot]'")


def test_a_file_that_is_not_results_is_refused_with_exit_2(tmp_path):
    (tmp_path / "x.json").write_text("[]")
    r = run_cli("plot", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "not a torque-async results file" in r.stderr


def test_plot_a_real_run_next_to_its_results(tmp_path):
    r = run_cli("-smkey", "0x7701", "-json", "run.json", "-n", "64", "-i", "1", "-KB", "64",
                "-sample", "7", "-bzero", "-n", "4", "-i", "1", "-MB", "1", "-Sadd")
    assert r.returncode == 0, r.stderr
    p = run_cli("plot", "run.json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith("run.png: proc 0 Bzero: bandwidth over time")
    assert p.stdout.strip().endswith("; Latency per transfer (percentiles)")
    assert png_size(tmp_path / "run.png")[0] == plot.WIDTH_IN * plot.DPI


def test_a_lateness_panel_whose_values_are_all_zero_still_draws(tmp_path):
    """Every frame on time: no curve, and the log axes still get a range (it raised)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot
    fig, ax = pyplot.subplots()
    plot.draw_percentiles(ax, [plot.Curve((None, 0), "proc 0 MemStreams: sub-stream 0",
                                          [[0, 0, 50]])], {(None, 0): plot.Look("C0", ".")})
    fig.savefig(tmp_path / "zero.png")
    assert ax.get_ylim() == (1, 10) and not ax.lines[0].get_xdata().size


def test_a_share_on_time_is_never_rounded_to_all_or_none():
    """One late frame in 1500 was labelled (100% at 0) beside its curve's lone late value."""
    assert [plot.percent(s) for s in (1, 1499 / 1500, 0.75, 0.58, 1 / 5000)] == \
        ["100%", "99.9%", "75%", "58%", "<0.1%"]


def test_a_histogram_of_empty_buckets_is_nothing_to_draw():
    doc = sampled_doc("-bzero -load")
    doc["tests"][1]["record"]["hist"] = [[1000, 1007, 0]]       # hand-edited: it divided by 0
    assert [c.label for c in plot.histograms(doc, lateness=False)] == \
        ["proc 0 Bzero: latency per transfer"]


def test_a_picture_not_named_png_is_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(sampled_doc("-bzero -load")))
    result = CliRunner().invoke(cli.main, ["plot", str(path), "-o", str(tmp_path / "x.svg")])
    assert result.exit_code == 2 and "name it FILE.png" in result.output
    assert not (tmp_path / "x.svg").exists()


def many_doc(procs: int):
    """procs tests of one group, each with latencies (not sampled: one panel)."""
    plan = cmdline.parse(f"-p {procs} -bzero".split())
    recs = tuple(record(p, 1, 8 * MS, 32, 65536,
                        hist=hist_of(1000 * (p + 1), 2000 * (p + 1)), lat_count=2)
                 for p in range(procs))
    return export.document(plan, recs, plan.procs(), INFO, "today")


def test_a_legend_of_many_curves_fits_in_the_picture_and_no_two_curves_look_alike():
    """24 latency curves: the legend ran off the bottom (22 and 23 not shown), and tab20's
    colours repeated from curve 20 on."""
    fig, _ = plot.figure(many_doc(24))
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[-1]
    box, whole = ax.get_legend().get_window_extent(), fig.bbox
    assert len(ax.get_legend().get_texts()) == 24
    assert whole.y0 <= box.y0 and box.y1 <= whole.y1 and box.x1 <= whole.x1
    looks = {(tuple(line.get_color()), line.get_marker()) for line in ax.get_lines()}
    assert len(looks) == 24


def test_a_test_keeps_its_colour_in_every_panel_and_sub_streams_differ_by_line_style():
    plan = cmdline.parse("-n 8 -KB 64 -bzero -memStreams rw 2 64 62.5 0 1 1".split())
    samples = tuple(((k + 2) * MS, (k + 1) * 4) for k in range(8))
    subs = tuple(SubStream(transfers=4, late=1, late_run=1, lo=0, hi=5000 * (i + 1),
                           total=5000 * (i + 1), hist=hist_of(0, 0, 0, 5000 * (i + 1)))
                 for i in range(2))
    recs = (record(0, 1, 8 * MS, 32, 65536, samples=samples, hist=hist_of(3000), lat_count=1),
            record(1, 1, 8 * MS, 32, 65536, samples=samples, hist=hist_of(3000), lat_count=1,
                   subs=subs))
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    fig, drawn = plot.figure(doc)
    colour = [tuple(ax.patches[0].get_edgecolor()) for ax in fig.axes[:2]]   # bandwidth steps
    latency, lateness = fig.axes[2], fig.axes[3]
    assert [tuple(line.get_color()) for line in latency.get_lines()] == colour
    late = [(tuple(line.get_color()), line.get_linestyle()) for line in lateness.get_lines()]
    assert late == [(colour[1], "-"), (colour[1], "--")]


def test_hand_edited_proc_numbers_still_draw():
    """A proc beyond the tests' count (hand-edited) indexed past the palette: IndexError."""
    doc = many_doc(2)
    doc["tests"][0]["proc"] = 99
    _, drawn = plot.figure(doc)
    assert drawn[-1][1] == ["proc 99 Bzero: latency per transfer",
                            "proc 1 Bzero: latency per transfer"]


def test_past_twelve_sampled_tests_a_group_shares_one_bandwidth_panel():
    """A panel a test cost matplotlib about 0.3 s each: 64 sampled tests took 23 s to draw, 200
    did not finish in 100 s."""
    plan = cmdline.parse("-p 12 -n 32 -KB 64 -bzero -p 12 -n 32 -KB 64 -load".split())
    samples = tuple(((k + 2) * MS, (k + 1) * 4) for k in range(8))
    recs = tuple(record(p, 1, 8 * MS, 32, 65536, samples=samples, hist=hist_of(1000),
                        lat_count=1) for p in range(24))
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    _, drawn = plot.figure(doc)
    bandwidth = [(title, labels) for title, labels in drawn if "bandwidth over time" in title]
    assert [title.split(": bandwidth")[0] for title, _ in bandwidth] == [
        "group 0 (-p 12 -n 32 -KB 64 -bzero), its 12 sampled processes",
        "group 1 (-p 12 -n 32 -KB 64 -load), its 12 sampled processes"]
    assert bandwidth[1][1][:12] == [f"proc {p} Load" for p in range(12, 24)]
    doc["tests"] = doc["tests"][:12]                     # twelve: a panel each, as before
    assert sum("bandwidth over time" in t for t, _ in plot.figure(doc)[1]) == 12
