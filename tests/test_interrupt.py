"""SIGINT, SIGTERM, SIGHUP and SIGQUIT in every phase, a stopped worker, and what a run leaves
behind.

Each case signals a real run (conftest.start) once it reached the phase (polled in the results
or on disk), then checks the exit code, the report and that nothing is left: no segment, no
named semaphore, no scratch directory, no process.
"""
from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import psutil
import pytest

from torque_async import cli, deadlines
from torque_async.results import (DONE, MEASURED, NEW, READY, RUNNING, free_segment,
                                  segment_name)

from conftest import (CMD, ENV, assert_one_clean_line, execute, left_behind, mapped_by,
                      never_alive, run_cli, segment_held, start, table, wait_for_rows)

LONG = ["-n", "16", "-i", "1000000", "-KB", "256", "-bzero", "-spinWait"]
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGQUIT: 131}
QUICK = 5          # seconds: a signal ends a run within about 1 s; this leaves room for a
                   # loaded machine, and is far below the waits the cases would otherwise take


def semaphores(names: set[str] | None = None) -> set[str]:
    """The named semaphores among `names` (default: /dev/shm's)."""
    return {n for n in (os.listdir("/dev/shm") if names is None else names)
            if n.startswith("sem.")}


def servers(pid: int) -> list[Path]:
    """The workers' server directories of command `pid` (workstart.base: the suite's TMPDIR)."""
    return list(Path(tempfile.gettempdir()).glob(f"torque-async-forkserver.{pid}.*"))


def assert_clean(key: int, children: list[psutil.Process], where: Path | None = None,
                 sems: set[str] | None = None, pid: int | None = None) -> None:
    assert not Path("/dev/shm", segment_name(key)).exists()
    if pid is not None:
        assert not servers(pid), "the run left its workers' server directory"
    _, alive = psutil.wait_procs(children, timeout=QUICK)
    assert not alive, "a test process outlived the run"
    if where is not None:
        assert not [p for p in where.iterdir() if p.name.startswith("torque-async-scratch.")]
    if sems is not None:
        assert not semaphores(left_behind(sems)), "the run left named semaphores"


def interrupt(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    """Send `sig`; the run must end quickly with 128 + sig, the report marked and no
    traceback."""
    began = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - began < QUICK, "the signal waited"
    assert proc.returncode == CODES[sig], err
    assert f"INTERRUPTED by {signal.Signals(sig).name}" in out and "Traceback" not in err
    assert "INCOMPLETE" not in out and "died:" not in out + err, out
    return out, err


@pytest.mark.parametrize("sig", list(CODES))
def test_a_signal_while_testing_stops_everything_and_marks_the_report(sig):
    key = 0x7100 + sig
    proc = start("-smkey", hex(key), *LONG)
    wait_for_rows(key, 2, RUNNING)
    children = psutil.Process(proc.pid).children(recursive=True)
    out, _ = interrupt(proc, sig)
    rows = table(out)                      # what was measured before the signal is reported
    assert [r[8] for r in rows] == ["Bzero", "SpinWait"] and int(rows[0][4]) > 0
    assert_clean(key, children, pid=proc.pid)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                      (signal.SIGQUIT, 131)])
def test_a_signal_before_the_start_ends_the_run_cleanly(sig, code):
    key = 0x7200 + sig
    proc = start("-smkey", hex(key), "-g", *LONG, stdin=subprocess.PIPE)
    wait_for_rows(key, 2, READY)            # set up, held back by -g
    children = psutil.Process(proc.pid).children(recursive=True)
    out, _ = interrupt(proc, sig)
    assert out.count("not started: the run was interrupted") == 2
    assert_clean(key, children, pid=proc.pid)


AT_LAUNCH = """
import os, signal, sys
from torque_async import launch, workstart
real = workstart.context
def context(local):           # as each worker is launched (the signals held), before the event
    os.kill(os.getpid(), signal.SIGTERM)           # loop has them
    return real(local)
workstart.context = context
sys.argv = ["torque-async", *sys.argv[1:]]
launch.main()
"""


AT_THE_END = """
import os, signal, sys
from torque_async import cluster, launch
real = cluster.finish
def finish(code):              # the command's last step: its status made, its exit next
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)
    return real(code)
cluster.finish = finish
sys.argv = ["torque-async", *sys.argv[1:]]
launch.main()
"""


SLOW_REMOVAL = """
import os, sys, time
from torque_async import launch
from torque_async.io import scratch
real = scratch._unlink
def held(*args):               # a discarding file system's unlink: until the test says go
    while not os.path.exists("go"):
        time.sleep(0.01)
    real(*args)
scratch._unlink = held
sys.argv = ["torque-async", *sys.argv[1:]]
launch.main()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_tests_ended_lets_the_report_and_its_files_be_written(
        tmp_path, monkeypatch, capsys, key, sig):
    """A stop signal once the tests are over (here as the machine is surveyed, before the
    report) is held: the report and -json are written whole, the JSON says no test was
    interrupted, and the exit status and one line say the signal came. It lost them: the run's
    end raised it, with nothing printed but 'interrupted'."""
    real = cli.survey

    def survey(*args):
        os.kill(os.getpid(), sig)
        return real(*args)
    monkeypatch.setattr(cli, "survey", survey)
    monkeypatch.chdir(tmp_path)
    code, out, err = execute(capsys, "-smkey", key, "-json", "r.json", "-n", "4", "-i", "1",
                             "-KB", "64", "-bzero")
    assert (code, err) == (CODES[sig], f"torque-async: interrupted by {signal.Signals(sig).name} "
                           "after the tests ended: it stopped none of them, and the report and "
                           "its files are whole\n")
    assert [(row[4], row[8]) for row in table(out)] == [("4", "Bzero")]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is None and doc["tests"][0]["record"]["transfers"] == 4


def full_pipe() -> tuple[int, int, int]:
    """A pipe of one page: (read end, write end, its size)."""
    r, w = os.pipe()
    return r, w, fcntl.fcntl(r, fcntl.F_SETPIPE_SZ, 4096)


def wait_full(proc: subprocess.Popen, r: int, size: int) -> None:
    """Until the pipe holds `size` bytes: its writer waits."""
    waiting, deadline = array.array("i", [0]), time.monotonic() + 60
    while waiting[0] < size:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        fcntl.ioctl(r, termios.FIONREAD, waiting)
        time.sleep(0.01)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGQUIT])
def test_a_report_held_by_a_full_pipe_ends_at_the_first_signal_its_files_whole(tmp_path, sig):
    """Nobody reads the report: the first stop signal ends the command at once (it needed a
    second), and the -json and -csv files, written before the report, are whole."""
    r, w, size = full_pipe()
    proc = subprocess.Popen([*CMD, "-smkey", hex(0x7519 + sig), "-vl", "3", "-n", "300", "-KB",
                             "4", "-bzero", "-json", "r.json", "-csv", "r.csv"],
                            stdout=w, stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)
    os.close(w)
    wait_full(proc, r, size)
    began = time.monotonic()
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == CODES[sig]
    assert time.monotonic() - began < QUICK, "the signal waited"
    os.close(r)
    assert proc.stderr.read() == f"torque-async: interrupted by {signal.Signals(sig).name}\n"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["interrupted"] is None and doc["tests"][0]["record"]["transfers"] == 3000
    assert "Bzero" in (tmp_path / "r.csv").read_text()      # (the report: 40 KiB, -vl 3's
                                                             # samples)


def test_a_signal_once_the_command_has_its_exit_status_is_ignored(tmp_path):
    """Nothing is left to stop: the default handlers back, it died of SIGTERM (-15), or of a
    KeyboardInterrupt that click made 'aborted' (exit 1)."""
    done = subprocess.run([sys.executable, "-c", AT_THE_END, "-smkey", "0x751a", "-n", "4",
                           "-KB", "64", "-bzero"], capture_output=True, text=True, env=ENV,
                          cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stderr) == (0, "") and table(done.stdout)[0][8] == "Bzero"


def test_a_second_signal_after_the_tests_ended_ends_the_report_at_once(tmp_path, monkeypatch,
                                                                        capsys, key):
    """(A report stuck on a full pipe must still end.) The scratch files still go."""
    def survey(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(cli, "survey", survey)
    monkeypatch.chdir(tmp_path)
    code, out, err = execute(capsys, "-smkey", key, "-json", "r.json", "-n", "4", "-KB", "4",
                             "-mfileMB", "1", "-rand")
    assert (code, out, err) == (130, "", "torque-async: interrupted by SIGINT\n")
    assert os.listdir(tmp_path) == []              # no -json, no scratch directory


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_scratch_files_are_removed_waits_for_them(tmp_path, sig):
    """The scratch file goes in a thread behind the report; a stop signal then cannot cut the
    removal short (a join cut short used to let the process end with the directory left): the
    command removes everything, then exits with 128 + the signal, saying so."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_REMOVAL, "-smkey", "0x7205", "-nh",
                             "-n", "8", "-KB", "4", "-mfileMB", "1", "-rand"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**ENV, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path)
    out = ""
    while "Total Bandwidth Consumed" not in out:       # reported: the removal is under way
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        out += line
    proc.send_signal(sig)
    proc.send_signal(sig)                              # twice: the second waits as well
    time.sleep(0.2)         # not synchronisation: a broken build exits within this, leaving
    assert proc.poll() is None, proc.stderr.read()     # the directory
    (tmp_path / "go").touch()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == CODES[sig], err
    # said as the report's end or the removal's, whichever the signal met
    assert f"interrupted by {signal.Signals(sig).name}" in err and "Traceback" not in err
    assert not list(tmp_path.glob("torque-async-scratch.*"))


def test_a_signal_between_the_launch_and_the_event_loop_waits_for_the_loop(tmp_path):
    """It stops the run as a signal during the set-up does: the report, every test not
    started, nothing left."""
    key = 0x7203
    done = subprocess.run([sys.executable, "-c", AT_LAUNCH, "-smkey", hex(key), "-p", "2",
                           *LONG], capture_output=True, text=True, env=ENV, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 143, done.stderr
    assert "INTERRUPTED by SIGTERM" in done.stdout and "Traceback" not in done.stderr
    assert done.stdout.count("not started: the run was interrupted") == 3
    assert_clean(key, [], tmp_path)


def test_a_signal_while_a_scratch_file_is_written_ends_the_set_up(tmp_path):
    """The loop's set-up (here a 3 GB scratch file) is cancelled, not waited for."""
    key, sems = 0x7501, semaphores()
    proc = start("-smkey", hex(key), "-n", "64", "-KB", "64", "-mfileMB", "3000", "-rand",
                 "-n", "4", "-KB", "64", "-bzero", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not any(tmp_path.glob("torque-async-scratch.*/test0.dat")):   # writing has begun
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    children = psutil.Process(proc.pid).children(recursive=True)
    out, _ = interrupt(proc, signal.SIGHUP)
    assert "test 0 (-rand, group 0, process 0) not started: the run was interrupted" in out
    assert_clean(key, children, tmp_path, sems)


@pytest.mark.parametrize("sig,wait,args", [
    (signal.SIGINT, RUNNING, ["-n", "100", "-KB", "64", "-T", "100000000", "-bzero", "-n", "100",
                              "-KB", "4", "-T", "100000000", "-mfileMB", "1", "-r"]),
    (signal.SIGTERM, DONE, ["-n", "4", "-KB", "64", "-sleepEnd", "600", "-bzero"]),
    (signal.SIGHUP, RUNNING, ["-n", "5", "-cyclic", "10000000"]),
], ids=["throttle", "sleepEnd", "cyclic"])
def test_a_signal_ends_a_long_wait_of_a_test_at_once(tmp_path, sig, wait, args):
    """-T 100 s (a worker and a file test), -sleepEnd 600 s, -cyclic every 10 s: the wait
    looks at the stop flag, the report shows what was measured."""
    key, sems = 0x7502 + sig, semaphores()
    proc = start("-smkey", hex(key), *args, cwd=tmp_path)
    rows = wait_for_rows(key, args.count("-n"), wait)
    children = psutil.Process(proc.pid).children(recursive=True)
    interrupt(proc, sig)
    assert_clean(key, children, tmp_path, sems)
    assert len(rows) == args.count("-n")


def test_a_test_the_signal_cut_short_is_named_and_one_that_had_finished_is_not():
    """A test that ends at the stop flag ends as DONE too: its last measured transfer came
    after the signal, so it is listed as cut short; one whose count was complete is not."""
    key = 0x7511
    proc = start("-smkey", hex(key), "-n", "4", "-KB", "64", "-bzero", "-t", "60", "-cyclic",
                 "10000")
    wait_for_rows(key, 2, RUNNING,                                     # bzero's part over
                  until=lambda rows: rows["state"][0] >= MEASURED and rows["transfers"][1])
    out, _ = interrupt(proc, signal.SIGINT)
    assert "test 1 (-cyclic 10000, group 1, process 0) stopped while running" in out
    assert "test 0 " not in out


@pytest.mark.parametrize("action", [["-mfileKB", "256", "-fbc", "-rand"], ["-bzero"]])
def test_a_test_idle_in_its_throttle_at_the_signal_is_cut_short(tmp_path, action):
    """Between two -T waits at the stop (a file lane on the loop, a memory worker): its last
    transfer ended before the signal, and it read as done with 3 of its 1000 made."""
    key = 0x751a + len(action)
    proc = start("-smkey", hex(key), "-json", "r.json", "-n", "1000", "-KB", "4", "-T",
                 "300000", *action, cwd=tmp_path)
    wait_for_rows(key, 1, RUNNING, until=lambda rows: rows["transfers"][0] >= 2)
    out, _ = interrupt(proc, signal.SIGINT)
    said = f"test 0 ({action[-1]}, group 0, process 0) stopped while running: measured until " \
        "the stop"
    doc = json.loads((tmp_path / "r.json").read_text())
    (test,) = doc["tests"]
    assert 2 <= test["record"]["transfers"] < 1000 and test["record"]["whole"] is False
    assert out.rstrip().endswith(said) and doc["cut_short"] == [said]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_ignored_when_the_command_started_stays_ignored(tmp_path, sig):
    """nohup's SIGHUP, a script's background job's SIGINT: the run goes on to its report."""
    key = 0x7512 + sig
    proc = start("-smkey", hex(key), "-n", "16", "-KB", "64", "-t", "2", "-bzero",
                 cwd=tmp_path, preexec_fn=lambda: signal.signal(sig, signal.SIG_IGN))
    wait_for_rows(key, 1, RUNNING)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    (row,) = table(out)
    assert float(row[3]) >= 1900 and "INTERRUPTED" not in out      # Diff: the whole -t 2


def test_a_test_stopped_in_its_ramp_says_so(tmp_path):
    """It read as done, its table row empty, nothing said, its ramp's transfers not counted."""
    key = 0x7518
    proc = start("-smkey", hex(key), "-json", "r.json", "-t", "30", "-ramp", "20", "-n", "64",
                 "-KB", "4", "-mfileKB", "256", "-fbc", "-rand", cwd=tmp_path)
    wait_for_rows(key, 1, RUNNING)
    out, _ = interrupt(proc, signal.SIGINT)
    doc = json.loads((tmp_path / "r.json").read_text())
    (test,) = doc["tests"]
    ramp = test["record"]["ramp_transfers"]
    said = "test 0 (-rand, group 0, process 0) stopped before it measured anything" + \
        (f" ({ramp} unmeasured transfers of its -ramp)" if ramp else "")
    assert test["record"]["transfers"] == 0 and test["table"] is None
    assert "proc,Start" not in out                             # no table without a row
    assert out.rstrip().endswith(said)
    assert doc["interrupted"] == "SIGINT" and doc["cut_short"] == [said]


def test_a_memory_stream_far_behind_still_lets_a_signal_end_the_run():
    """Behind, it never slept, and a memory move never waits: the loop's signal handler got no
    turn, and SIGINT and SIGTERM did nothing (SIGKILL ended it, its segment left)."""
    key = 0x7519
    proc = start("-smkey", hex(key), "-memStreams", "r", "2", "8192", "20000", "0", "10", "64")
    wait_for_rows(key, 1, RUNNING)
    out, _ = interrupt(proc, signal.SIGINT)
    assert "stopped while running" in out
    assert not Path("/dev/shm", segment_name(key)).exists()


def test_sp_interrupted_prints_its_report():
    key = 0x7510
    proc = start("-smkey", hex(key), "-sp", "-n", "16", "-i", "1000000", "-KB", "256", "-bzero")
    wait_for_rows(key, 1, RUNNING, until=lambda rows: rows["transfers"].any())  # to report
    out, _ = interrupt(proc, signal.SIGINT)
    (row,) = table(out)
    assert int(row[4]) > 0 and int(row[10]) == proc.pid


def test_sp_interrupted_in_its_set_up_reports_the_test_not_started():
    """Its set-up runs in the command: the signal ended it with one line, no report and no
    JSON (and a large fill held it for seconds)."""
    key = 0x751b
    proc = start("-smkey", hex(key), "-sp", "-btr", "-n", "64", "-MB", "16", "-load")  # 1 GiB
    wait_for_rows(key, 1, NEW, until=lambda rows: rows["phase"][0][0] > 0)   # of random words
    out, _ = interrupt(proc, signal.SIGTERM)
    assert out.rstrip().endswith("test 0 (-load, group 0, process 0) not started: the run was "
                                 "interrupted")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_a_signal_to_the_process_group_reads_as_an_interruption_not_as_failures(sig):
    """A service manager's SIGTERM or a closed terminal's SIGHUP reaches every process of the
    group: the workers ignore it and end at the stop flag; no test 'died'."""
    key = 0x7520 + sig
    proc = start("-smkey", hex(key), "-p", "2", *LONG, start_new_session=True)
    wait_for_rows(key, 3, RUNNING)
    children = psutil.Process(proc.pid).children(recursive=True)
    began = time.monotonic()
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - began < QUICK
    assert proc.returncode == CODES[sig] and f"INTERRUPTED by {sig.name}" in out, err
    assert err == "" and "died" not in out and "INCOMPLETE" not in out
    assert [int(r[4]) > 0 for r in table(out)] == [True, True, True]
    assert_clean(key, children, pid=proc.pid)


def test_a_stopped_worker_is_named_by_the_watchdog_and_ends_the_run():
    key = 0x7512
    proc = start("-smkey", hex(key), "-n", "200", "-i", "100000", "-KB", "64", "-bzero",
                 "-n", "200", "-i", "20", "-KB", "64", "-load")
    victim = int(wait_for_rows(key, 2, RUNNING)["pid"][0])
    children = psutil.Process(proc.pid).children(recursive=True)
    os.kill(victim, signal.SIGSTOP)
    out, err = proc.communicate(timeout=deadlines.WATCHDOG_S + 60)
    assert proc.returncode == 1, err
    named = [ln for ln in out.splitlines() if "ended by the watchdog" in ln]
    assert named == [f"test 0 (-bzero, group 0, process 0) failed: made no progress for "
                     f"{deadlines.WATCHDOG_S:.0f} s while running (its process {victim} is "
                     f"stopped): ended by the watchdog"]
    assert_clean(key, children)


def test_a_run_keeps_no_named_semaphore_once_its_workers_started():
    """multiprocessing's Barrier and Lock are named semaphores: removed as soon as every
    worker opened them, so even a SIGKILL cannot leak them."""
    key = 0x7513
    proc = start("-smkey", hex(key), "-g", "-p", "2", "-n", "4", "-KB", "64", "-bzero",
                 "-n", "4", "-KB", "64", "-spinWait", stdin=subprocess.PIPE)
    wait_for_rows(key, 3, READY)
    run = psutil.Process(proc.pid)

    def named() -> set[str]:                    # the run's processes' (an unlinked one's
        return semaphores({Path(p).name for q in [run, *run.children(recursive=True)]
                           for p in mapped_by(q.pid)})      # map says '(deleted)': no name)
    deadline = time.monotonic() + 10            # the watchdog removes them within 0.1 s
    while named() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not named()
    out, err = proc.communicate("\n", timeout=120)
    assert proc.returncode == 0, err


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
    (server,) = Path(tempfile.gettempdir()).glob(f"torque-async-forkserver.{proc.pid}.*")
    assert scratch.is_dir() and server.is_dir()  # the workers' server's socket directory
    assert Path("/dev/shm", segment_name(key)).exists()
    again = run_cli("-smkey", hex(key), "-load", cwd=tmp_path)
    assert again.returncode == 2
    assert f"a killed run (pid {proc.pid}) left shared memory" in again.stderr
    assert f"left the scratch directory {scratch}" in again.stderr
    assert f"left the workers' server directory {server}" in again.stderr
    free = run_cli("-smkey", hex(key), "-freeSharedMemory", cwd=tmp_path)
    assert free.returncode == 0 and "removed /dev/shm/" in free.stdout
    assert f"removed the workers' server directory {server} of a run that is gone" in free.stdout
    assert not scratch.exists() and not server.exists()
    assert not Path("/dev/shm", segment_name(key)).exists()


def held_back(key: int) -> subprocess.Popen:
    """A run set up and waiting for Enter (-g), its segment made."""
    proc = start("-smkey", hex(key), "-g", "-n", "4", "-i", "1", "-KB", "64", "-bzero",
                 stdin=subprocess.PIPE)
    wait_for_rows(key, 1, READY)
    return proc


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate("\n", timeout=120)
    assert proc.returncode == 0 and "Traceback" not in err, err
    return out


def test_free_shared_memory_refuses_a_live_run():
    key = 0x7514
    proc = held_back(key)
    r = run_cli("-smkey", hex(key), "-freeSharedMemory")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (f"torque-async: error: shared memory key {key:#x} is in use by pid "
                        f"{proc.pid}, still running: -freeSharedMemory removes only what a "
                        f"killed run left\n")
    assert Path("/dev/shm", segment_name(key)).exists()
    assert table(finish(proc))


def test_a_program_running_torque_async_in_its_own_process_holds_its_segment():
    """A run inside another program (the tests, execute()) has no 'torque' on its command line:
    it was taken for a killed run, and -freeSharedMemory removed its live segment."""
    key = 0x7517
    with segment_held(key) as proc:
        r = run_cli("-smkey", hex(key), "-freeSharedMemory")
        assert (r.returncode, r.stdout) == (2, "") and f"in use by pid {proc.pid}, still " \
            "running" in r.stderr
        r = run_cli("-smkey", hex(key), "-n", "1", "-KB", "4", "-bzero")
        assert r.returncode == 2 and f"in use by pid {proc.pid}, still running" in r.stderr
        assert Path("/dev/shm", segment_name(key)).exists()
    assert not Path("/dev/shm", segment_name(key)).exists()


def test_of_two_runs_started_at_once_on_one_key_the_loser_names_the_winner():
    """The segment appears with its owner already written: never 'a killed run (pid 0)'."""
    key = 0x7515
    for _ in range(3):
        runs = [start("-smkey", hex(key), "-g", "-n", "4", "-KB", "64", "-bzero",
                      stdin=subprocess.PIPE) for _ in range(2)]
        while all(p.poll() is None for p in runs):          # until one has ended
            time.sleep(0.02)
        loser, winner = runs if runs[0].returncode is not None else runs[::-1]
        _, err = loser.communicate(timeout=60)
        assert loser.returncode == 2
        assert err == (f"torque-async: error: shared memory key {key:#x} is in use by pid "
                       f"{winner.pid}, still running: wait for it or choose another -smkey\n")
        finish(winner)


def test_a_run_whose_segment_was_removed_leaves_the_next_runs_segment_alone():
    key = 0x7516
    first = held_back(key)
    os.unlink(Path("/dev/shm", segment_name(key)))    # removed by hand (or an older version)
    second = held_back(key)
    finish(first)
    assert Path("/dev/shm", segment_name(key)).exists(), "the first run removed the second's"
    (row,) = table(finish(second))
    assert int(row[4]) == 4


def test_free_shared_memory_removes_the_semaphores_a_killed_run_named(tmp_path):
    import _multiprocessing
    from torque_async.results import Results
    key, name = 0x7517, "/mp-torque-test"
    dead = never_alive()
    res = Results.create(segment_name(key), 1)
    res.header["owner"], res.header["sems"][0] = dead, name.encode()
    res.release()
    sem = _multiprocessing.SemLock(1, 1, 1, name, False)       # left as a killed run leaves it
    assert Path("/dev/shm/sem.mp-torque-test").exists()
    r = run_cli("-smkey", hex(key), "-freeSharedMemory")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"removed /dev/shm/{segment_name(key)} (created by pid {dead})",
        "removed the semaphore /dev/shm/sem.mp-torque-test of that run"]
    assert not Path("/dev/shm/sem.mp-torque-test").exists()
    del sem


def test_a_segment_name_that_cannot_be_read_is_one_line():
    key = 0x7518
    taken = Path("/dev/shm", segment_name(key))
    taken.mkdir()                          # not a segment at all
    try:
        r = run_cli("-smkey", hex(key), "-n", "4", "-KB", "4", "-load")
    finally:
        taken.rmdir()
    assert_one_clean_line(r.returncode, r.stdout, r.stderr,
                          f"{taken} is not a torque-async segment")


AT_IMPORT = """
import os, runpy, signal, sys
class Hook:                    # the package's first import from __main__: the signal comes now
    def find_spec(self, name, path=None, target=None):
        if name == "torque_async.launch":
            os.kill(os.getpid(), int(os.environ["SIG"]))
            sys.meta_path.remove(self)
sys.meta_path.insert(0, Hook())
sys.argv = ["torque-async", *sys.argv[1:]]
runpy.run_module("torque_async", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", list(CODES))
def test_a_signal_as_the_command_begins_to_load_ends_it_by_that_signal_in_one_line(tmp_path,
                                                                                   sig):
    """The stop signals are held from __main__'s first line: one as the package's modules
    begin to load killed the command, or raised a KeyboardInterrupt traceback."""
    done = subprocess.run([sys.executable, "-c", AT_IMPORT, "-smkey", "0x7521", "-n", "4",
                           "-KB", "64", "-bzero"], capture_output=True, text=True,
                          env={**ENV, "SIG": str(int(sig))}, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == \
        (CODES[sig], "", f"torque-async: interrupted by {signal.Signals(sig).name}\n")
    assert not list(tmp_path.iterdir())


def test_a_run_whose_resource_tracker_was_killed_ends_without_a_word_of_it(tmp_path):
    """multiprocessing's resource tracker SIGKILLed mid-run: telling it to forget the segment
    relaunched one ('process died unexpectedly') that printed a KeyError traceback at the
    exit. The run's own removal of its segment and semaphores does not need it."""
    key, sems = 0x7522, semaphores()
    proc = start("-smkey", hex(key), "-n", "16", "-KB", "64", "-t", "2", "-bzero", cwd=tmp_path)
    wait_for_rows(key, 1, RUNNING)
    (tracker,) = [p for p in psutil.Process(proc.pid).children()
                  if "resource_tracker" in " ".join(p.cmdline())]
    tracker.kill()
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, "")
    assert table(out)[0][8] == "Bzero"
    assert_clean(key, [], tmp_path, sems, pid=proc.pid)
