"""Failures end the run cleanly and name what failed; no data the user did not give is touched."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from torque_async.results import RUNNING

from conftest import run_cli, start, wait_for_rows


def test_disk_full_during_a_write_names_the_test_and_the_file():
    r = run_cli("-smkey", "0x7401", "-writeDevices", "-f", "/dev/full", "-n", "4", "-KB", "4", "-w")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert ("test 0 (-w, group 0, process 0) failed: write of 4096 bytes at byte 0 of "
            "/dev/full: No space left on device") in r.stderr


def test_an_unwritable_working_directory_is_refused_before_the_run():
    r = run_cli("-smkey", "0x7402", "-n", "4", "-KB", "4", "-r", cwd="/proc")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "(scratch files) on the file system of /proc, which has 0 bytes free" in r.stderr


def test_a_worker_failing_in_set_up_ends_the_run_at_once():
    began = time.monotonic()
    r = run_cli("-smkey", "0x7403", "-display", "99", "-n", "4", "-V", "1",
                "-n", "100", "-MB", "1", "-i", "100", "-bzero")
    assert time.monotonic() - began < 30          # the barrier never waits for a dead party
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "test 0 (-V 1, group 0, process 0) failed: -display '99'" in r.stderr


def test_files_refuses_a_directory_holding_foreign_files_and_symbolic_links(tmp_path):
    tree = tmp_path / "www"
    tree.mkdir()
    (tree / "index.html").write_text("precious")
    args = ["-smkey", "0x7404", "-dir", str(tree), "-cfiles", "-mfileKB", "64", "-KB", "4",
            "-n", "20", "-files", "5"]
    r = run_cli(*args)
    assert r.returncode == 2 and "holds" in r.stderr and "-allowForeign" in r.stderr
    assert sorted(os.listdir(tree)) == ["index.html"]             # nothing written
    r = run_cli("-allowForeign", *args)
    assert r.returncode == 0, r.stderr
    assert (tree / "index.html").read_text() == "precious"
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tree / "001")
    r = run_cli("-allowForeign", *args)
    assert r.returncode == 2 and "is a symbolic link" in r.stderr
    assert os.listdir(outside) == []


def test_the_default_files_directory_planted_as_a_link_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "filestest")
    r = run_cli("-smkey", "0x7406", "-cfiles", "-mfileKB", "64", "-KB", "4", "-n", "20",
                "-files", "5", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == ("torque-async: error: -files: -dir filestest is a "
                                              "symbolic link: name the directory itself\n")
    for spelled in ("filestest/", "filestest/.", "filestest//./"):    # the system follows these
        for action in (["-files", "5"], ["-web"]):
            r = run_cli("-smkey", "0x7406", "-dir", spelled, "-cfiles", "-mfileKB", "64", "-KB",
                        "4", "-n", "20", *action, cwd=tmp_path)
            assert r.returncode == 2 and f"-dir {spelled} is a symbolic link" in r.stderr
    assert os.listdir(outside) == []


def test_sigterm_during_a_file_test_removes_its_scratch_files(tmp_path):
    key = 0x7405
    proc = start("-smkey", hex(key), "-n", "64", "-KB", "64", "-i", "100000", "-mfileMB", "4",
                 "-rand", "-n", "16", "-i", "1000000", "-KB", "256", "-bzero", cwd=tmp_path)
    wait_for_rows(key, 2, RUNNING)
    assert any(p.name.startswith("torque-async-scratch.") for p in tmp_path.iterdir())
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "INTERRUPTED by SIGTERM" in out, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sysctl.current"]
    assert not psutil.wait_procs(children, timeout=5)[1]         # room for a loaded machine
    assert not Path("/dev/shm", f"torque-async-{key:x}").exists()
