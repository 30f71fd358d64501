"""torque-async plot: real PNGs of the right size, the panels the data calls for, clear errors."""
from __future__ import annotations

import json
import struct
import sys

import pytest
from click.testing import CliRunner

from torque_async import cli, cmdline, export, plot, report

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


def test_a_sampled_run_draws_bandwidth_over_time_and_latency_histograms(tmp_path):
    out = tmp_path / "run.png"
    drawn = plot.render(sampled_doc("-sample 3 -bzero -load"), str(out))
    assert drawn == [("Bandwidth over time (per sample interval)",
                      ["proc 0 Bzero", "all tests running"]),
                     ("Latency histograms", ["proc 0 Bzero: latency per transfer",
                                             "proc 1 Load: latency per transfer"])]
    assert png_size(out) == (plot.WIDTH_IN * plot.DPI, 2 * plot.PANEL_IN * plot.DPI)
    assert out.stat().st_size > 20_000                  # drawn, not a blank canvas


def test_a_scan_sampled_at_every_transfer_maps_bandwidth_across_the_disk(tmp_path):
    out = tmp_path / "scan.png"
    drawn = plot.render(sampled_doc("-n 8 -i 1 -sample 0 -scan /dev/sdz -load", per_sample=1),
                        str(out))
    titles = [title for title, _ in drawn]
    assert titles == ["Bandwidth over time (per sample interval)",
                      "Bandwidth across the disk (-scan, -sample 0)", "Latency histograms"]
    assert drawn[1][1] == ["proc 0 Scan"]
    assert png_size(out) == (plot.WIDTH_IN * plot.DPI, 3 * plot.PANEL_IN * plot.DPI)


def test_a_real_stream_s_lateness_is_drawn_for_each_sub_stream(tmp_path):
    r = run_cli("-smkey", "0x7702", "-json", "run.json", "-memStreams", "rw", "2", "64", "62.5",
                "0", "0.05", "1")
    assert r.returncode == 0, r.stderr
    doc = export.load(str(tmp_path / "run.json"))
    (test,) = doc["tests"]
    subs = test["record"]["subs"]
    assert len(subs) == 2 and all(sum(n for *_, n in s["hist"]) == s["transfers"] > 0 for s in subs)
    drawn = dict(plot.render(doc, str(tmp_path / "run.png")))
    lateness = [f"proc 0 MemStreams: lateness of sub-stream {n}"
                for n in report.sub_stream_names(["rw", 2])]
    assert drawn["Latency histograms"] == ["proc 0 MemStreams: latency per transfer", *lateness]


def test_nothing_to_plot_is_said_plainly(tmp_path):
    plan = cmdline.parse(["-bzero"])
    doc = export.document(plan, (record(0, 0, 0, 0, 64),), plan.procs(), INFO, "today")
    with pytest.raises(plot.PlotError, match="nothing to plot"):
        plot.render(doc, str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()


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
    assert p.stdout.strip() == ("run.png: Bandwidth over time (per sample interval); "
                                "Latency histograms")
    assert png_size(tmp_path / "run.png") == (1000, 720)
