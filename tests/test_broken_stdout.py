"""Standard output that cannot be written: closed (`>&-`) or on a full disk (/dev/full).

The -json and -csv files are written before the report, so they are whole; then one line on
stderr says the report is lost, and the exit status is 1 (128 + the signal when one stopped the
run). Every other command (compare, plot, --help, --version) says so in one line too."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from torque_async.results import READY, RUNNING

from conftest import CMD, ENV, start, wait_for_rows

RUN = ["-n", "4", "-KB", "64", "-bzero", "-json", "r.json", "-csv", "r.csv"]


def closed() -> None:
    os.close(1)


def run(tmp_path, *args, how: str) -> subprocess.CompletedProcess:
    """The command with stdout closed ('closed') or on /dev/full ('full')."""
    with open("/dev/full", "w") as full:
        return subprocess.run([*CMD, *args], stdout=full if how == "full" else None,
                              stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path,
                              timeout=120, preexec_fn=closed if how == "closed" else None)


def whole(tmp_path) -> None:
    assert json.loads((tmp_path / "r.json").read_text())["tests"][0]["record"]["transfers"] == 40
    assert "Bzero" in (tmp_path / "r.csv").read_text()


@pytest.mark.parametrize("how,why", [
    ("closed", "standard output is closed: nothing could be printed"),
    ("full", "cannot write standard output: No space left on device")])
def test_a_run_whose_stdout_cannot_be_written_keeps_its_files_and_says_so_in_one_line(
        tmp_path, how, why):
    """Closed: an AttributeError traceback after the run, no -json; full: no -json either."""
    done = run(tmp_path, "-smkey", "0x7601", *RUN, how=how)
    assert (done.returncode, done.stderr) == \
        (1, f"torque-async: {why}; the report is lost (r.json, r.csv written whole)\n")
    whole(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.json", "sysctl.current"]


def test_a_run_with_stdout_closed_opens_no_file_in_its_place(tmp_path):
    """A file opened next takes the lowest free descriptor: 1, where output meant for the
    terminal would land in it. The command puts /dev/null there first."""
    proc = start("-smkey", "0x7602", "-g", "-n", "4", "-KB", "4", "-mfileKB", "64", "-rand",
                 stdout=None, stdin=subprocess.PIPE, preexec_fn=closed, cwd=tmp_path)
    wait_for_rows(0x7602, 1, READY)                    # its files open, held back by -g
    assert os.readlink(f"/proc/{proc.pid}/fd/1") == "/dev/null"
    _, err = proc.communicate("\n", timeout=60)
    assert proc.returncode == 1 and "standard output is closed" in err


def test_an_interrupted_run_with_stdout_closed_exits_by_the_signal(tmp_path):
    """It exited 1 (the AttributeError), the -json file unwritten."""
    proc = start("-smkey", "0x7603", "-n", "16", "-i", "1000000", "-KB", "256", "-bzero",
                 "-json", "r.json", stdout=None, preexec_fn=closed, cwd=tmp_path)
    wait_for_rows(0x7603, 1, RUNNING)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert json.loads((tmp_path / "r.json").read_text())["interrupted"] == "SIGINT"


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["-help"], ["-version"],
                                  ["run", "--help"], ["compare", "r.json", "r.json"],
                                  ["plot", "r.json"]])
def test_every_command_on_a_full_stdout_is_one_line(tmp_path, args):
    """compare, plot, --help and --version printed an OSError traceback."""
    if "r.json" in args:
        made = run(tmp_path, "-smkey", "0x7604", "-sample", "1", *RUN, how="full")
        assert made.returncode == 1, made.stderr
    done = run(tmp_path, *args, how="full")
    assert (done.returncode, done.stderr) == \
        (1, "torque-async: error: cannot write standard output: No space left on device\n")


def test_json_to_a_full_stdout_says_that_output_is_lost_and_keeps_the_csv(tmp_path):
    done = run(tmp_path, "-smkey", "0x7605", "-n", "4", "-KB", "64", "-bzero", "-json", "-",
               "-csv", "r.csv", how="full")
    assert done.returncode == 1
    assert done.stderr.endswith("torque-async: cannot write standard output: No space left on "
                                "device; the -json output is lost (r.csv written whole)\n")
    assert "Bzero" in (tmp_path / "r.csv").read_text()
