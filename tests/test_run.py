"""End-to-end runs of the real command with tiny sizes: processes, barrier, report, clean-up."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from torque_async.results import READY, RUNNING, Results, segment_name

from conftest import REPO, run, run_cli, start, table, wait_for_rows


def shm_left(key: int) -> bool:
    return Path("/dev/shm", segment_name(key)).exists()


def test_two_load_processes_report_a_table_that_parses_back():
    r = run_cli("-smkey", "0x7001", "-p", "2", "-n", "8", "-i", "3", "-KB", "256", "-load")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [row[0] for row in rows] == ["0", "1"]
    for row in rows:
        start, finish, diff, xfers = map(int, row[1:5])
        assert xfers == 24 and finish >= start and diff <= finish - start + 1
        assert float(row[5]) > 0 and row[6] == "256" and row[8] == "Load"
    pids = {int(row[10]) for row in rows}
    assert len(pids) == 2 and os.getpid() not in pids
    bw = next(line for line in r.stdout.splitlines() if line.startswith("BW:"))
    total = int(bw.split(",")[-1])
    assert abs(total - sum(float(row[5]) for row in rows)) <= 2   # load counts its bytes once
    assert "Total Bandwidth Consumed (MBytes/sec)" in r.stdout
    assert not shm_left(0x7001)


def test_quit_shows_the_plan_and_runs_nothing():
    r = run_cli("run", "-n", "16", "-MB", "8", "-Striad", "-spinWait", "-bcopy", "-quit")
    assert r.returncode == 0, r.stderr
    assert "group 0: -Striad x 1" in r.stdout and "group 2: -bcopy x 1" in r.stdout
    assert "size=8388608, n=16" in r.stdout and "proc,Start" not in r.stdout
    assert "  working set: 3 x 128 MBytes per process" in r.stdout      # (the help's example
    assert "  working set: 2 x 64 MBytes per process" in r.stdout       # promised it)


def test_the_default_workload_shipped_in_the_package_runs_where_there_is_no_config(tmp_path):
    r = run_cli("-smkey", "0x700B", timeout=300)       # a global only: the config's actions run
    assert r.returncode == 0, r.stderr
    packaged = REPO / "torque_async" / "Torque.config"
    assert f"configuration file = {packaged}" in r.stdout.splitlines() and "BW:" in r.stdout
    assert len(table(r.stdout)) >= 3
    assert (tmp_path / "sysctl.current").read_text().count("version numpy") == 1


def test_spinwait_reports_its_loop_rate_alone_and_under_load(tmp_path):
    r = run_cli("-smkey", "0x7002", "-json", str(tmp_path / "r.json"), "-n", "20", "-KB", "512",
                "-spinWait", "-n", "20", "-MB", "1", "-bzero")
    assert r.returncode == 0, r.stderr
    spin, bzero = json.loads((tmp_path / "r.json").read_text())["tests"]
    rec = spin["record"]
    assert rec["ops"] == rec["transfers"] * 65536             # 512 KB of doubles: 4 fills of 16384
    assert rec["ref_rate"] > 0 and bzero["record"]["ref_rate"] == 0   # only spinWait calibrates
    under = rec["ops"] / ((rec["finish"] - rec["start"]) / 1e9)
    assert spin["spin"]["loops_per_s"] == pytest.approx(under)
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("SpinWait proc 0"))
    kept = 100 * under / rec["ref_rate"]
    assert line.startswith(f"SpinWait proc 0: {under / 1e6:.2f} Mloops/s under load, "
                           f"{rec['ref_rate'] / 1e6:.2f} Mloops/s alone: {kept:.1f}% of its rate "
                           f"alone kept")
    assert line.endswith("than during the test)") == (kept > 100)


def test_slow_keeps_a_finished_test_running_and_fast_does_not():
    args = ["-n", "2", "-i", "1", "-KB", "4", "-bzero", "-n", "64", "-i", "4", "-MB", "1", "-bcopy"]
    slow = run_cli("-smkey", "0x7003", *args)
    assert slow.returncode == 0, slow.stderr
    m = re.search(r"^Unmeasured transfers while waiting for the slowest test \(-slow\) = (\d+)$",
                  slow.stdout, re.M)
    assert m and int(m[1]) > 0
    fast = run_cli("-smkey", "0x7003", "-fast", *args)
    assert fast.returncode == 0, fast.stderr
    assert "Unmeasured transfers" not in fast.stdout


def test_throttle_adds_its_delay_between_transfers():
    r = run_cli("-smkey", "0x7004", "-n", "20", "-i", "1", "-KB", "4", "-T", "3000", "-bzero")
    assert r.returncode == 0, r.stderr
    (row,) = table(r.stdout)
    assert int(row[3]) >= 19 * 3 - 1            # 20 transfers, 3 ms between each and the next


def test_the_pause_after_the_last_transfer_is_not_measured(key):
    """As a file test's: a memory test counted it, so one stopped in it read as whole with a
    shorter interval, a higher bandwidth than the same test left to end (+25%)."""
    (rec,) = run(key, "-n", "1", "-i", "2", "-MB", "1", "-T", "1000000", "-load").records
    assert rec.transfers == 2 and 1e9 <= rec.elapsed < 2e9      # one pause, not two


def test_sp_runs_the_test_in_the_main_process():
    proc = start("-smkey", "0x7005", "-sp", "-n", "4", "-i", "1", "-KB", "64", "-Scopy")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (row,) = table(out)
    assert int(row[10]) == proc.pid and row[8] == "SCopy"


def test_g_prints_pids_and_waits_for_enter():
    proc = start("-smkey", "0x7007", "-g", "-n", "4", "-KB", "64", "-bzero", stdin=subprocess.PIPE)
    lines = []
    while not lines or "press Enter" not in lines[-1]:
        lines.append(proc.stderr.readline())
    pid = int(lines[0].split()[1].rstrip(":"))
    assert psutil.Process(pid).parent().ppid() == proc.pid      # forked from its workers' server
    out, _ = proc.communicate("\n", timeout=60)
    assert proc.returncode == 0 and table(out)[0][10] == str(pid)


def test_a_worker_killed_at_the_start_barrier_ends_the_run_not_hangs_it():
    """A multiprocessing Barrier's abort waits for each party waiting at it to wake: a dead one
    never does, and the loop that aborted it was stuck for good (no signal stopped it)."""
    proc = start("-smkey", "0x7009", "-g", "-n", "2", "-MB", "1", "-bcopy", "-spinWait",
                 stdin=subprocess.PIPE)                   # Enter never comes
    victim = int(wait_for_rows(0x7009, 2, READY)["pid"][0])
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "test 0 (-bcopy, group 0, process 0) died: SIGKILL" in err
    assert "not started" not in err            # the other did not fail: the report says why
    assert "set up within" not in out + err    # (the broken barrier read as a time-out)
    assert out.rstrip().endswith("test 0 (-bcopy, group 0, process 0) died: SIGKILL\n"
                                 "test 1 (-spinWait, group 1, process 0) not started: the run "
                                 "was stopped")
    assert not shm_left(0x7009)


def test_a_killed_worker_ends_the_run_cleanly_and_names_the_test(tmp_path):
    """The test the failure cut short says so (in the report and the JSON), as one a signal
    cut short does: it read as done, as if its count had been made. The dead one published
    nothing: it has no table row (its live count, with start and finish 0, printed as a row
    some 10**12 ms before the start)."""
    proc = start("-smkey", "0x7008", "-json", "r.json", "-n", "16", "-i", "1000000", "-KB",
                 "64", "-bzero", "-spinWait", cwd=tmp_path)
    victim = int(wait_for_rows(0x7008, 2, RUNNING, until=lambda r: r["transfers"][0] > 0)
                 ["pid"][0])
    children = psutil.Process(proc.pid).children(recursive=True)
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "died: SIGKILL" in err and "Traceback" not in err
    cut = "test 1 (-spinWait, group 1, process 0) stopped while running: measured until a " \
          "failure stopped the run"
    assert out.rstrip().endswith("INCOMPLETE: some tests failed\n"
                                 "test 0 (-bzero, group 0, process 0) died: SIGKILL\n" + cut)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cut_short"] == [cut] and doc["interrupted"] is None
    assert [row[0] for row in table(out)] == ["1"] and "proc 0:" not in out   # (0.0 ms: short)
    assert doc["tests"][0]["table"] is None and doc["tests"][1]["table"]["proc"] == 1
    assert [t["record"]["transfers"] < 1000000 * 16 for t in doc["tests"]] == [True, True]
    assert not shm_left(0x7008)
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive


def test_a_leftover_segment_is_detected_and_freed():
    res = Results.create(segment_name(0x7009), 1)
    res.header["owner"] = 999_999_999                      # a pid that cannot be alive
    res.release()
    r = run_cli("-smkey", "0x7009", "-load")
    assert r.returncode == 2 and "-freeSharedMemory" in r.stderr
    r = run_cli("-smkey", "0x7009", "-freeSharedMemory")
    assert r.returncode == 0 and "removed /dev/shm/torque-async-7009" in r.stdout
    assert not shm_left(0x7009)


def test_affinity_pins_each_process_as_asked():
    key = 0x700A
    proc = start("-smkey", hex(key), "-g", "-affinityNumber", "1", "-p", "2", "-n", "4", "-KB",
                 "64", "-bzero", "-affinityNumberDiff", "0", "-p", "2", "-n", "4", "-KB", "64",
                 "-store", stdin=subprocess.PIPE)
    rows = wait_for_rows(key, 4, READY)                    # set up, held back by -g
    cpus = [psutil.Process(int(pid)).cpu_affinity() for pid in rows["pid"]]
    out, err = proc.communicate("\n", timeout=60)
    assert proc.returncode == 0, err
    assert cpus == [[1], [1], [0], [1]]


@pytest.mark.parametrize("size,numbers", [("8", 1), ("12", 1), ("200000", 25000)])
def test_spinwait_makes_transfer_size_over_8_numbers_exactly(tmp_path, size, numbers):
    """-B 8, -KB 8 and -KB 200 all made 16384 numbers a transfer (whole fills of its block):
    the loop rate counted numbers the header's transaction size did not ask for."""
    r = run_cli("-smkey", "0x7003", "-json", str(tmp_path / "r.json"), "-n", "5", "-B", size,
                "-spinWait")
    assert r.returncode == 0, r.stderr
    (spin,) = json.loads((tmp_path / "r.json").read_text())["tests"]
    assert spin["record"]["ops"] == spin["record"]["transfers"] * numbers
    assert f"{numbers} random number{'s' * (numbers != 1)} per transfer" + \
        (f" ({size}-byte transfers rounded down to whole 8-byte doubles)" if int(size) % 8
         else "") in r.stdout


def test_a_stream_kernel_says_it_moved_whole_words_of_a_transfer():
    """-B 12 -Striad moved 8 bytes a transfer, said nowhere but in its bandwidth."""
    r = run_cli("-smkey", "0x7004", "-n", "4", "-B", "12", "-Striad")
    assert r.returncode == 0, r.stderr
    assert "transfers of 12 bytes move 8 (whole 8-byte words); 4 x 8 bytes per array" in r.stdout
