"""Shared helpers: run the real command in-process or as a subprocess, in a clean directory."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import psutil
import pytest

from torque_async import cli, cluster, cmdline, orchestrator, report, validate
from torque_async.io import uring
from torque_async.results import HEADER, ROW, segment_name

REPO = Path(__file__).resolve().parents[1]
CMD = [sys.executable, "-m", "torque_async"]
for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):   # a suite started
    if signal.getsignal(_sig) == signal.SIG_IGN:     # by nohup or in a script's background: the
        signal.signal(_sig, signal.SIG_DFL)          # runs it starts take signals as a user's
TEMP = tempfile.mkdtemp(prefix="ta-tests.")  # the suite's temp dir (short: a socket goes in it)
tempfile.tempdir = os.environ["TMPDIR"] = TEMP  # what runs killed elsewhere left in /tmp (their
atexit.register(shutil.rmtree, TEMP, ignore_errors=True)   # workers' servers') is not here
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}   # this checkout's code
os.environ["PYTHONPATH"] = str(REPO)    # and in-process runs' workers' server (Python 3.11's
                                        # forkserver ignores the sys.path it is sent)
NO_URING = uring.unavailable()       # e.g. io_uring_disabled, a seccomp filter
needs_uring = pytest.mark.skipif(NO_URING is not None, reason=f"io_uring: {NO_URING}")
DIRECT = uring.chains()             # how -web's requests open files through a ring here
needs_direct_files = pytest.mark.skipif(DIRECT[0] != "direct", reason="io_uring opens no direct "
                                        f"descriptors here: {DIRECT[1] or DIRECT[0]}")
LOOP = shutil.which("losetup") is not None and os.path.exists("/dev/loop-control") and \
    os.geteuid() == 0
needs_loop = pytest.mark.skipif(not LOOP, reason="no loop devices here (losetup, "
                                "/dev/loop-control and root)")
AUTO = "io_uring" if NO_URING is None else f"threads (io_uring unavailable: {NO_URING})"  # -engine auto


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Every test runs in its own empty directory: no stray Torque.config, sysctl.current kept."""
    monkeypatch.chdir(tmp_path)


def never_alive(k: int = 0) -> int:
    """A pid no process has (above the kernel's largest): a killed run's, for leftovers tests
    (a reaped child's pid may be given again meanwhile, to a run of the suite even)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + k


def run_cli(*args: str, timeout: float = 120, cwd=None, **popen) -> subprocess.CompletedProcess:
    """The command as a user runs it (a fresh process: spawn, signals, exit codes); keywords
    go to subprocess.run (preexec_fn=... for a ulimit)."""
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=cwd, **popen)


def execute(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.execute(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clean_line(code: int, out: str, err: str, message: str = "") -> None:
    """Bad input: exit 2, nothing on stdout, one 'torque-async: error:' line holding `message`."""
    assert code == 2, (code, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("torque-async: error: ")
    assert message in err and "Traceback" not in err


def table(out: str, header: str = report.TABLE_HEADER) -> list[list[str]]:
    """The rows of the table under the line that starts with `header` (the bandwidth table),
    split into their columns; the table ends at a blank line or a 'proc N: ...' or
    'procs N-M: ...' note."""
    lines = out.splitlines()
    i = next(j for j, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for line in lines[i + 1:]:
        if not line.strip() or line.startswith(("proc ", "procs ")):
            break
        rows.append([c.strip() for c in line.split(",")])
    return rows


_NONE = np.zeros(0, ROW)


def rows_of(key: int) -> np.ndarray:
    """The live results rows of the run using shared memory key `key` (none if no such run)."""
    seg = Path("/dev/shm", segment_name(key))
    try:
        return np.fromfile(seg, ROW, offset=HEADER.itemsize) if seg.exists() else _NONE
    except (FileNotFoundError, ValueError):          # removed, or still being sized
        return _NONE


def start(*args: str, **popen) -> subprocess.Popen:
    """The command in the background, for tests that signal it or talk to it; keywords go to
    Popen (stdin=PIPE, cwd=..., or other stdout/stderr)."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": ENV}
    return subprocess.Popen([*CMD, *args], **{**pipes, **popen})


def wait_for_rows(key: int, count: int, state: int, timeout: float = 60,
                  until=lambda rows: True) -> np.ndarray:
    """Poll the results until `count` rows reached `state` and `until(rows)` holds (polling,
    not a sleep-as-sync)."""
    deadline = time.monotonic() + timeout
    rows = _NONE
    while time.monotonic() < deadline:
        rows = rows_of(key)
        if len(rows) == count and (rows["state"] >= state).all() and until(rows):
            return rows
        time.sleep(0.05)
    raise AssertionError(f"rows of {key:#x} never reached state {state}: {rows['state']}")


@pytest.fixture
def key(request) -> str:
    """A shared-memory key of this test's own."""
    return hex(0x10000 + zlib.crc32(request.node.nodeid.encode()) % 0xE0000)


def run(key: str, *argv: str):
    """Check and run a plan in this process; its Outcome."""
    plan = cmdline.parse(["-smkey", key, *argv])
    validate.check(plan)
    return orchestrator.run(plan, 64)


@contextlib.contextmanager
def segment_held(key: int):
    """A live process of another program (no 'torque' on its command line) holding the
    results segment of `key` until the block ends; yields it (its pid names the owner)."""
    holder = Path(tempfile.mkdtemp(prefix="holder."), "holder.py")   # a path without the name
    holder.write_text("import sys\nfrom torque_async.results import Results, segment_name\n"
                      f"held = Results.create(segment_name({key:#x}), 1)\n"
                      "print('made', flush=True)\nsys.stdin.read()\nheld.unlink()\n")
    proc = subprocess.Popen([sys.executable, str(holder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout.readline() == "made\n"
        yield proc
    finally:
        proc.communicate("", timeout=30)
        shutil.rmtree(holder.parent, ignore_errors=True)


def shm_now() -> set[str]:
    return set(os.listdir("/dev/shm"))


def mapped_by(pid: int) -> set[str]:
    """The /dev/shm files process `pid` maps (none when it is gone or not ours to read)."""
    try:
        return {path for _, path in cluster.mpi_files(f"/proc/{pid}/maps")}
    except OSError:
        return set()


def left_behind(before: set[str]) -> set[str]:
    """The files in /dev/shm (segments, MPI's, named semaphores) made since `before` that no
    live process maps: a job running beside this one (another test run on a shared machine)
    still maps its own."""
    held = set().union(*(mapped_by(pid) for pid in psutil.pids()))
    return {n for n in shm_now() - before if f"/dev/shm/{n}" not in held}


def still_left(before: set[str], timeout: float = 15) -> set[str]:
    """left_behind(before) once it is empty, or when `timeout` s passed (a killed rank's guard
    removes its files after the rank ended)."""
    deadline = time.monotonic() + timeout
    while (left := left_behind(before)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
