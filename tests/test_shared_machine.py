"""A machine shared by several runs and users: each run's results segment is its own (the
default key is the run's pid), and -freeSharedMemory without a key frees only killed runs'."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from torque_async.results import Results, segment_name

from conftest import CMD, ENV, never_alive, run_cli


def test_two_runs_without_a_key_at_once_each_have_their_own_segment_and_succeed(tmp_path):
    runs = [subprocess.Popen([*CMD, "-t", "2", "-n", "16", "-KB", "64", "-bzero"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                             cwd=tmp_path) for _ in range(2)]
    segments = [Path("/dev/shm", segment_name(r.pid)) for r in runs]
    deadline = time.monotonic() + 60
    while not all(s.exists() for s in segments):     # both hold theirs at once (one key
        assert time.monotonic() < deadline           # for every run refused the second)
        assert all(r.poll() is None for r in runs), [r.communicate() for r in runs]
        time.sleep(0.01)
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert f"smkey = {run.pid:#x}" in out.splitlines()        # the key is printed
    assert not any(s.exists() for s in segments)


def test_free_shared_memory_without_a_key_frees_every_killed_run_s_and_no_live_one():
    dead, live = never_alive(), Results.create(segment_name(0x7a91), 1)   # (this process's)
    left = Results.create(segment_name(0x7a90), 1)
    left.header["owner"] = dead
    left.release()
    try:
        r = run_cli("-freeSharedMemory")
        assert r.returncode == 0, r.stderr
        assert f"removed /dev/shm/{segment_name(0x7a90)} (created by pid {dead})" in \
            r.stdout.splitlines()
        assert not Path("/dev/shm", segment_name(0x7a90)).exists()
        assert Path("/dev/shm", segment_name(0x7a91)).exists()
        assert segment_name(0x7a91) not in r.stdout
    finally:
        live.release()
        Path("/dev/shm", segment_name(0x7a91)).unlink(missing_ok=True)
