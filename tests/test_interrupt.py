"""SIGINT and SIGTERM at each phase: children end, shared memory goes, the report says so."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from torque_async.results import READY, RUNNING, free_segment, segment_name

from conftest import run_cli, start, table, wait_for_rows

LONG = ["-n", "16", "-i", "1000000", "-KB", "256", "-bzero", "-spinWait"]


def assert_clean(key: int, children: list[psutil.Process]) -> None:
    assert not Path("/dev/shm", segment_name(key)).exists()
    _, alive = psutil.wait_procs(children, timeout=2)
    assert not alive, "a test process outlived the run"


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_testing_stops_everything_and_marks_the_report(sig, code):
    key = 0x7100 + sig
    proc = start("-smkey", hex(key), *LONG)
    wait_for_rows(key, 2, RUNNING)
    children = psutil.Process(proc.pid).children(recursive=True)
    began = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - began < 5
    assert proc.returncode == code, err
    assert f"INTERRUPTED by {signal.Signals(sig).name}" in out and "Traceback" not in err
    rows = table(out)                      # what was measured before the signal is reported
    assert [r[8] for r in rows] == ["Bzero", "SpinWait"] and int(rows[0][4]) > 0
    assert_clean(key, children)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_before_the_start_ends_the_run_cleanly(sig, code):
    key = 0x7200 + sig
    proc = start("-smkey", hex(key), "-g", *LONG, stdin=subprocess.PIPE)
    wait_for_rows(key, 2, READY)            # set up, held back by -g
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err and f"INTERRUPTED by {signal.Signals(sig).name}" in out
    assert_clean(key, children)


def test_a_killed_orchestrator_leaves_what_the_next_run_names_and_free_removes(tmp_path):
    key = 0x7300
    free_segment(segment_name(key))              # what an earlier, failed attempt left
    proc = start("-smkey", hex(key), "-n", "64", "-KB", "64", "-i", "100000", "-mfileMB", "4",
                 "-rand", *LONG, cwd=tmp_path, start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_rows(key, 3, RUNNING)
    os.killpg(proc.pid, signal.SIGKILL)          # the run, its workers and its resource tracker
    proc.wait()
    (scratch,) = tmp_path.glob(f"torque-async-scratch.{proc.pid}.*")
    assert scratch.is_dir()
    assert Path("/dev/shm", segment_name(key)).exists()
    again = run_cli("-smkey", hex(key), "-load", cwd=tmp_path)
    assert again.returncode == 2
    assert f"a killed run (pid {proc.pid}) left shared memory" in again.stderr
    assert f"left the scratch directory {scratch}" in again.stderr
    free = run_cli("-smkey", hex(key), "-freeSharedMemory", cwd=tmp_path)
    assert free.returncode == 0 and "removed /dev/shm/" in free.stdout
    assert not scratch.exists() and not Path("/dev/shm", segment_name(key)).exists()
