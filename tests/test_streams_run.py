"""Streams as a user runs them: the command, the table, the stream lines, files left behind."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from torque_async.report import SAMPLES_HEADER, STREAM_HEADER
from torque_async.streams.frames import WRITTEN, header_of
from torque_async.units import KB

from conftest import needs_loop, run_cli, table


def stream_rows(out: str) -> list[list[str]]:
    return table(out, STREAM_HEADER)


def test_a_memory_stream_holds_its_target_over_a_few_seconds():
    # 128 KB every 5 ms for 3 s: a modest rate any loaded machine keeps.
    r = run_cli("-smkey", "0x7A201", "-memStreams", "rrw", "2", "128", "25", "0", "3", "4")
    assert r.returncode == 0, r.stderr
    (row,) = table(r.stdout)
    assert row[8] == "MemStreams" and int(row[4]) == 3 * 600
    assert abs(float(row[5]) - 75) <= 0.05 * 75              # three sub-streams of 25 MB/s
    subs = stream_rows(r.stdout)
    assert [s[1] for s in subs] == ["0 read t0", "1 read t1", "2 write t2"]
    for s in subs:
        assert s[2] == "25.0" and abs(float(s[4]) - 25) <= 0.05 * 25 and s[6] == "600"
        assert s[3] == "200.000" and abs(float(s[5]) - 200) <= 0.05 * 200     # frames per second
        assert s[7] == "0" and int(s[8]) <= 600 and s[-1] == "MemStreams rrw"   # no buffer
        assert s[9] == "0" and s[15] == ("HELD" if s[8] == "0" else "MISSED")
    bw = next(line for line in r.stdout.splitlines() if line.startswith("BW:"))
    assert abs(int(bw.split(",")[1]) - 2 * float(row[5])) <= 2   # a memory copy reads + writes


def test_a_prefetching_stream_spans_its_frames_periods_not_its_early_reads():
    """Lookahead 8 reads 9 frames at once: the process row said 181 MB/s of a 100 MB/s stream
    (20 frames over the 110 ms from the first release to the last completion) while the stream
    table said 100. Paced, it cannot move more than its target: both span its 20 periods."""
    r = run_cli("-smkey", "0x7A207", "-nh", "-json", "-", "-memStreams", "r", "8", "1024", "100",
                "0", "0.2", "64")
    assert r.returncode == 0, r.stderr
    (row,) = table(r.stderr)
    (sub,) = stream_rows(r.stderr)
    assert int(row[4]) == 20 and float(row[3]) >= 200            # Diff (ms): its 20 periods
    assert 50 <= float(row[5]) <= 100.0 and 50 <= float(sub[4]) <= 100.0
    record = json.loads(r.stdout)["tests"][0]["record"]
    assert record["finish"] - record["start"] >= record["subs"][0]["elapsed"] >= 200_000_000


def test_under_slow_a_stream_ends_with_the_last_test_measuring_not_a_period_later():
    """A 1 s period kept the run going until its next frame, after every other test had
    measured (4 s periods held it 2.5 s past the end)."""
    r = run_cli("-smkey", "0x7A208", "-nh", "-json", "-", "-slow", "-streams", "rw", "0",
                "1024", "1", "0", "1", "64", "-t", "1.4", "-n", "4", "-MB", "1", "-bcopy")
    assert r.returncode == 0, r.stderr                       # (its data check passed)
    stream, bcopy = (t["record"] for t in json.loads(r.stdout)["tests"])
    assert stream["transfers"] == 2 and bcopy["finish"] - bcopy["start"] >= 1_400_000_000
    assert stream["extra_transfers"] <= 2       # the frame at 1 s, each way; not the one at 2 s


def test_an_impossible_target_is_reported_late_not_skipped():
    r = run_cli("-smkey", "0x7A202", "-nh", "-memStreams", "r", "0", "1024", "102400", "0",
                "0.005", "8")
    assert r.returncode == 0, r.stderr
    (s,) = stream_rows(r.stdout)
    assert s[6] == "512" and s[8] == "512" and s[11] == "512"     # every transfer lost, in a row
    assert s[10] == "0" and s[15] == "MISSED"                     # none skipped
    assert float(s[4]) < 102400 and 0 < float(s[12]) <= float(s[13]) <= float(s[14])
    assert "streams: 0 held, 1 missed" in r.stdout


def test_a_camera_stream_on_a_named_file_writes_it_and_keeps_it(tmp_path):
    path = tmp_path / "cam.dat"
    r = run_cli("-smkey", "0x7A203", "-f", str(path), "-sample", "49",
                "-streams", "wr", "2", "64", "12.5", "0", "2", "1")
    assert r.returncode == 0, r.stderr
    (row,) = table(r.stdout)
    assert row[9] == str(path) and int(row[4]) == 2 * 400
    assert abs(float(row[5]) - 25) <= 0.05 * 25
    assert [s[6] for s in stream_rows(r.stdout)] == ["400", "400"]
    data = np.fromfile(path, np.uint8).reshape(-1, 64 * KB)       # 16 slots, frames 384..399
    assert sorted(header_of(f) for f in data) == [(WRITTEN, k) for k in range(384, 400)]
    intervals = table(r.stdout, SAMPLES_HEADER)
    assert len(intervals) == 16 and all(i[4] == "50" for i in intervals)
    bws = sorted(float(i[5]) for i in intervals)
    assert abs(bws[len(bws) // 2] - 25) <= 0.1 * 25          # a stall moves one or two only


def test_scratch_files_are_removed_and_streams_run_beside_a_memory_load(tmp_path):
    r = run_cli("-smkey", "0x7A204", "-p", "2", "-streams", "rw", "2", "256", "20", "0.2", "1",
                "2", "-n", "16", "-MB", "1", "-i", "4", "-Striad")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [row[8] for row in rows] == ["Streams", "Streams", "STriad"]
    for row in rows[:2]:
        assert int(row[4]) == 2 * 80 and int(row[1]) >= 190         # startTime 0.2 s
        assert os.path.basename(os.path.dirname(row[9])).startswith("torque-async-scratch.")
    assert len(stream_rows(r.stdout)) == 4
    assert sorted(os.listdir(tmp_path)) == ["sysctl.current"]


def test_bad_stream_arguments_are_usage_errors(tmp_path):
    r = run_cli("-memStreams", "rw", "2", "4096", "100", "0", "1", "2")
    assert r.returncode == 2 and "holds no transfer of 4096 KB" in r.stderr
    r = run_cli("-memStreams", "rx", "2", "64", "100", "0", "1", "2")
    assert r.returncode == 2 and "'rx' is not one of r, w, rw, wr, rwr, rrw" in r.stderr
    r = run_cli("-f", str(tmp_path / "none.dat"), "-streams", "r", "2", "64", "100", "0", "1", "1")
    assert r.returncode == 2 and "reads 1 MB of it" in r.stderr
    assert not (tmp_path / "none.dat").exists()


@pytest.fixture
def loop_device(tmp_path):
    """A 32 MiB block device (a loop device over a file here; needs_loop: the machine lends
    them)."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    made = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                          text=True)
    assert made.returncode == 0, made.stderr
    yield made.stdout.strip()
    subprocess.run(["losetup", "-d", made.stdout.strip()], check=True)


@needs_loop
def test_a_stream_writes_and_reads_back_a_block_device(loop_device):
    """Its size read as 0 (st_size): a write failed 'cannot size stream file ... No such
    device', a read 'holds 0 MB'."""
    wrote = run_cli("-smkey", "0x7A1F4", "-writeDevices", "-f", loop_device, "-streams", "w", "2",
                    "1024", "20", "0", "0.3", "8")
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    read = run_cli("-smkey", "0x7A1F5", "-f", loop_device, "-streams", "r", "2", "1024", "20",
                   "0", "0.3", "8")
    assert read.returncode == 0, read.stdout + read.stderr
    assert [row[-1] for row in stream_rows(wrote.stdout) + stream_rows(read.stdout)] == \
        ["Streams w", "Streams r"]
    too_big = run_cli("-smkey", "0x7A1F6", "-f", loop_device, "-streams", "r", "2", "1024", "20",
                      "0", "3", "64")
    assert too_big.returncode == 2 and f"{loop_device} holds 32 MB; the stream reads 60 MB" in \
        too_big.stderr
