"""SIGINT and SIGTERM at each phase: children end, shared memory goes, the report says so."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from torque_async.results import READY, RUNNING, segment_name

from conftest import start, table, wait_for_rows

LONG = ["-n", "16", "-i", "1000000", "-KB", "256", "-bzero", "-spinWait"]


def assert_clean(proc: subprocess.Popen, key: int, children: list[psutil.Process]) -> None:
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
    assert_clean(proc, key, children)


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
    assert_clean(proc, key, children)
