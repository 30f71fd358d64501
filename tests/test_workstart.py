"""Where workers start from: forked from the workers' server (started while the command still
imports), or under -execChild as new interpreters of the command's own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from torque_async.results import READY

from conftest import CMD, ENV, start, wait_for_rows

EARLY = """
import json, sys
from multiprocessing import forkserver
from torque_async import launch
launch.early(sys.argv[1:])
print(json.dumps([forkserver._forkserver._forkserver_pid is not None,
                  sorted(m for m in ("numpy", "torque_async.cli") if m in sys.modules)]))
"""


@pytest.mark.parametrize("argv,started", [
    (["-p", "2", "-bcopy"], True),
    (["run", "-n", "4", "-load"], True),
    (["-r"], False),                          # a loop test: no worker
    (["-execChild", "-bcopy"], False),        # new interpreters: no server
    (["-quit", "-bcopy"], False),
    (["-help"], False),
    (["plot", "RESULTS.json"], False),        # not a run
    (["-bcopy", "-nosuch"], False),           # the command reports it
])
def test_the_server_starts_before_the_imports_only_for_a_plan_with_forked_workers(
        tmp_path, argv, started):
    done = subprocess.run([sys.executable, "-c", EARLY, *argv], capture_output=True, text=True,
                          env=ENV, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [started, []]      # nothing heavy imported by then


def test_workers_fork_from_the_server_and_exec_child_workers_are_the_command_s(key, tmp_path):
    proc = start("-smkey", key, "-g", "-n", "4", "-KB", "64", "-bzero", "-execChild", "-n", "4",
                 "-KB", "64", "-load", stdin=subprocess.PIPE, cwd=tmp_path)
    rows = wait_for_rows(int(key, 16), 2, READY)          # set up, held back by -g
    forked, execed = (psutil.Process(int(pid)) for pid in rows["pid"])
    server, execed_parent = forked.parent(), execed.ppid()
    server_parent, server_line = server.ppid(), " ".join(server.cmdline())
    server_dirs = list(Path(tempfile.gettempdir()).glob(f"torque-async-forkserver.{proc.pid}.*"))
    out, err = proc.communicate("\n", timeout=120)
    assert proc.returncode == 0, err
    assert execed_parent == proc.pid != server.pid and server_parent == proc.pid
    assert "multiprocessing.forkserver" in server_line
    assert "(forked from the workers' server)" in out
    assert "(a new interpreter and its imports included: -execChild)" in out
    assert len(server_dirs) == 1 and not server_dirs[0].exists()    # removed at the end
    assert ended(server)


def ended(p: psutil.Process) -> bool:
    """Gone, or only its exit status left to collect (its parent, the command, is gone too)."""
    try:
        p.wait(timeout=10)
    except psutil.TimeoutExpired:
        return p.status() == psutil.STATUS_ZOMBIE
    return True


def test_a_forked_worker_starts_on_the_cpu_affinity_parent_gave_the_command(key, tmp_path):
    cpu = max(os.sched_getaffinity(0))
    proc = start("-smkey", key, "-g", "-affinityParent", str(cpu), "-n", "4", "-KB", "64",
                 "-load", stdin=subprocess.PIPE, cwd=tmp_path)
    (row,) = wait_for_rows(int(key, 16), 1, READY)
    worker = psutil.Process(int(row["pid"]))
    on = worker.cpu_affinity()
    command = psutil.Process(proc.pid).cpu_affinity()      # reset after the launch
    out, err = proc.communicate("\n", timeout=120)
    assert proc.returncode == 0, err
    assert on == [cpu] and set(command) == os.sched_getaffinity(0)


def test_the_server_and_its_workers_end_with_a_command_killed_alone(key, tmp_path):
    """SIGKILL to the command only (not its group): nothing of it runs on. The server holds
    no pipe end that could keep it waiting (its workers hold copies of its "alive" pipe);
    it is killed at its parent's death, and its workers at theirs."""
    proc = start("-smkey", key, "-n", "16", "-i", "1000000", "-KB", "64", "-bzero",
                 "-spinWait", cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = wait_for_rows(int(key, 16), 2, READY)
    workers = [psutil.Process(int(pid)) for pid in rows["pid"]]
    server = workers[0].parent()
    proc.kill()
    proc.wait()
    _, alive = psutil.wait_procs([server, *workers], timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    (left,) = Path(tempfile.gettempdir()).glob(f"torque-async-forkserver.{proc.pid}.*")
    free = subprocess.run([*CMD, "-smkey", key, "-freeSharedMemory"], capture_output=True,
                          text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert f"removed the workers' server directory {left}" in free.stdout and not left.exists()


def test_the_tracker_and_the_server_start_with_the_stop_signals_blocked(key, tmp_path):
    """A signal to the process group while they start (Ctrl-C, a closed terminal) must reach
    the command alone: the resource tracker's own start unblocked SIGINT and SIGTERM before
    the server's, which then died of a Ctrl-C with a traceback, and a SIGHUP killed the
    tracker."""
    proc = start("-smkey", key, "-g", "-n", "4", "-KB", "64", "-load", stdin=subprocess.PIPE,
                 cwd=tmp_path)
    (row,) = wait_for_rows(int(key, 16), 1, READY)
    server = psutil.Process(int(row["pid"])).parent()
    tracker, = [p for p in psutil.Process(proc.pid).children()
                if "resource_tracker" in " ".join(p.cmdline())]
    masks = [signals(p.pid, "SigBlk") | signals(p.pid, "SigIgn") for p in (server, tracker)]
    out, err = proc.communicate("\n", timeout=120)
    assert proc.returncode == 0, err
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert all(stops <= mask for mask in masks), masks     # (the tracker ignores two itself)


def signals(pid: int, field: str) -> set[int]:
    """The signals a process has blocked or ignored (/proc's SigBlk or SigIgn)."""
    status = Path(f"/proc/{pid}/status").read_text()
    bits = int(status.split(f"{field}:")[1].split()[0], 16)
    return {n for n in range(1, 65) if bits >> (n - 1) & 1}


LOADING = """
import atexit, os, signal, sys
from torque_async import launch
real, sig, key = launch.early, int(sys.argv[1]), sys.argv[2]
def early(argv):
    real(argv)                                   # the server started, its directory made
    atexit.register(os.kill, os.getpid(), signal.SIGINT)   # another as it exits, before the
    os.kill(os.getpid(), sig)                    # directory's removal; this one while the rest
                                                 # of the modules would load
launch.early = early
sys.argv = ["torque-async", "-smkey", key, "-nh", "-n", "4", "-KB", "64", "-load"]
launch.main()
"""


COMPILING = """
import os, subprocess, sys, time
from torque_async import launch, options
real = launch.early
def early(argv):
    real(argv)
    source = open(options.__file__).read()         # compiled for 0.5 s, as a module with no
    subprocess.Popen(["sh", "-c", f"sleep 0.05; kill -TERM {os.getpid()}"])  # bytecode cached
    began = time.monotonic()                       # is, while the signal comes (from outside:
    while time.monotonic() - began < 0.5:          # a thread of ours would wait for the GIL)
        compile(source, "options.py", "exec")
launch.early = early
sys.argv = ["torque-async", "-smkey", sys.argv[1], "-nh", "-n", "4", "-KB", "64", "-load"]
launch.main()
"""


def test_a_stop_signal_while_a_module_compiles_is_not_lost(key, tmp_path):
    """compile() loses the exception a signal handler raises in it: the signal was lost, and
    the run went on to its end (exit 0)."""
    done = subprocess.run([sys.executable, "-c", COMPILING, key], capture_output=True,
                          text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == \
        (143, "", "torque-async: interrupted by SIGTERM\n")


@pytest.mark.parametrize("sig,ignored", [(signal.SIGTERM, False), (signal.SIGHUP, False),
                                         (signal.SIGINT, False), (signal.SIGHUP, True)])
def test_a_stop_signal_while_the_modules_load_is_one_line_and_its_exit_code(key, tmp_path, sig,
                                                                              ignored):
    """A second signal as it exits is ignored: it died of it (-2), with a KeyboardInterrupt
    ignored in an exit hook, and the server's directory was left."""
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-c", LOADING, str(int(sig)), key], capture_output=True,
                          text=True, env={**ENV, "TMPDIR": str(temp)}, cwd=tmp_path,
                          timeout=120, preexec_fn=(lambda: signal.signal(sig, signal.SIG_IGN))
                          if ignored else None)
    if ignored:                                     # nohup's SIGHUP: the command goes on
        assert done.returncode == 0 and ", Load," in done.stdout, done.stderr
        assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
    else:
        assert done.returncode == 128 + sig and done.stdout == ""
        assert done.stderr == f"torque-async: interrupted by {signal.Signals(sig).name}\n"
    assert not list(temp.iterdir())                # the server's directory went at exit


def test_a_worker_whose_parent_died_before_it_asked_to_die_with_it_ends_at_once():
    """Its parent-death signal is asked for after its start: a parent gone by then (the
    command SIGKILLed, its server killed with it) would leave it waiting at the barrier for
    good, owned by init. It checks, and ends."""
    from torque_async import cmdline, kinds, processes, workstart
    from torque_async.results import Results, segment_name
    plan = cmdline.parse(["-n", "2", "-load"])
    results = Results.create(segment_name(0x7A0F), 1)
    try:
        spec = processes.spec_for(plan, plan.procs()[0], segment_name(0x7A0F), 64, None,
                                  parent=os.getpid() + 1)      # not its parent
        ctx = workstart.EXECED
        meet = ctx.Barrier(2), ctx.Lock()          # kept: their names live while they do
        child = ctx.Process(target=kinds.resolve(kinds.WORKER_PROCESS),
                            args=(spec, *meet))     # nobody else comes to the barrier
        child.start()
        child.join(20)
        code, pid = child.exitcode, int(results.rows["pid"][0])
        if code is None:
            child.kill()
    finally:
        results.unlink()
        results.release()
    assert code == 1 and pid == 0                  # ended before it took its row
