"""One run: the results segment, the workers, the barrier, supervision and clean-up.

The workers are launched first (workstart.py), each with a spec stamped at its launch; then the
run goes on one uvloop event loop (supervisor.py, imported only now: the event loop's modules
load while the workers set up). The loop takes its place at the barrier through a thread so it
never blocks, and it watches every worker's sentinel: a worker that dies or fails stops the run
(stop flag, barrier abort), never hangs it. SIGINT, SIGTERM and SIGHUP stop the run the same way
in every phase once the loop runs (the loop's own set-up is a task that is cancelled; every long
wait of a test checks the stop flag at least every timer.SLICE_NS); before that, one raises
Interrupted and the workers launched so far are killed. Workers ignore them and end at the stop
flag, or are killed STOP_GRACE after it. A watchdog ends a run whose results stopped moving
(WATCHDOG_S). The segment is unlinked whatever happens, if it is still this run's.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from typing import Any, Callable

from . import semaphores, workstart
from .cmdline import UsageError
from .kinds import KINDS, WORKER, resolve
from .plan import Plan, Proc
from .results import (ABORTED, DONE, MEASURED, NEW, READY, RUNNING, STATE_NAMES, Record,
                      Results, STOP_SIGNALS, NotASegment, SegmentExists, live_owner, owner_of,
                      segment_name, signals_held)
from .testing.api import WorkerSpec

WORKER_MAIN, WORKER_PROCESS = "workers.entry:main", "workers.entry:process_main"   # by name:
                                   # the core never imports workers/
SETUP_TIMEOUT = 300.0              # seconds every test may take to set up before the start
STOP_GRACE = 0.8                   # seconds the tests get to end after the stop flag, then
                                   # the workers still running are killed
WATCHDOG_S = 10.0                  # seconds of no change in any results row while testing
                                   # (plus the longest -T or -cyclic pause) that end the run
WATCH_EVERY = 0.1                  # seconds between the watchdog's looks at the rows


@dataclass(frozen=True)
class Outcome:
    records: tuple[Record, ...]
    failures: tuple[str, ...]      # one line per test process that failed, by name
    interrupted: int = 0           # the signal (SIGINT, SIGTERM, SIGHUP) that stopped the run
    unfinished: tuple[str, ...] = ()   # the tests a stop (a signal, a failure) cut short
    cluster: Any = None            # under mpiexec, rank 0's: every rank's run, whose records these
                                   # are (report_cluster.ClusterRun; cluster.Cluster.gather)


class Interrupted(BaseException):
    """A stop signal outside the event loop (plan check, set-up, report): unwinds with
    clean-up."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_interrupted(signum: int, _frame) -> None:
    raise Interrupted(signum)


def describe(proc: Proc) -> str:
    g = proc.group
    return f"test {proc.row} (-{g.action}{' ' + ' '.join(map(str, g.args)) if g.args else ''}, " \
           f"group {g.index}, process {proc.index})"


def open_segment(plan: Plan, rows: int) -> Results:
    name = segment_name(plan.settings.smkey)
    try:
        return Results.create(name, rows)
    except SegmentExists:
        try:
            owner = owner_of(name)
        except NotASegment as e:
            raise UsageError(str(e)) from None
        except OSError as e:                     # another user's segment
            raise UsageError(f"shared memory /dev/shm/{name} exists and cannot be read: "
                             f"{e.strerror}: choose another -smkey") from None
        if owner is None:                        # gone meanwhile: that run just ended
            return open_segment(plan, rows)
        if owner and live_owner(owner, name):
            raise UsageError(f"shared memory key {plan.settings.smkey:#x} is in use by "
                             f"pid {owner}, still running: wait for it or choose another -smkey")
        raise UsageError(f"a killed run (pid {owner}) left shared memory /dev/shm/{name}: "
                         f"remove it with -freeSharedMemory") from None


def spec_for(plan: Plan, proc: Proc, segment: str, linesize: int,
             cpus: set[int] | None = None, parent: int = 0) -> WorkerSpec:
    """A worker's spec, stamped now: made just before its process is started."""
    return WorkerSpec(segment, proc, plan.settings.seed, linesize, plan.slow,
                      calibrate=not plan.settings.baseline, launched=time.monotonic_ns(),
                      cpus=frozenset(cpus) if cpus else None, parent=parent)


def run(plan: Plan, linesize: int,
        meet: Callable[[Callable[[], bool]], str] | None = None) -> Outcome:
    """The run; `meet` (several hosts, see cluster.py) is called once every test here is set up
    and before their release, with a function that tells whether this run was stopped; it
    returns '' or why the run cannot start."""
    procs = plan.procs()
    scratch = sys.modules.get("torque_async.io.scratch")
    if scratch is not None:        # a run before this one (-baseline, -repeat): its scratch
        scratch.settle()           # files' removal (their discards) would slow this one's tests
    with signals_held():           # the resource tracker, started here, never sees them
        resource_tracker.ensure_running()
    results = open_segment(plan, len(procs))
    try:
        if plan.settings.sp and KINDS[procs[0].group.action].runs_in == WORKER:
            return in_process(plan, procs[0], results, linesize)
        return launched(plan, results, linesize, meet)
    finally:
        results.stop()
        results.unlink()
        results.release()


def launched(plan: Plan, results: Results, linesize: int, meet) -> Outcome:
    """Launch the workers, then supervise the run on the event loop. A stop signal that comes
    before the loop takes the signals waits for it (`caught`): it stops the run as one during
    set-up does."""
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum))
                for sig in STOP_SIGNALS}
    workers = Workers.meeting(plan, results)
    try:
        workers.launch(plan, results, linesize)
        from .supervisor import supervise         # the event loop's modules, while they set up
        return supervise(plan, results, linesize, workers, meet, caught)
    except BaseException:          # (before the loop ran, or from its end)
        workers.stop(results)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def in_process(plan: Plan, proc: Proc, results: Results, linesize: int) -> Outcome:
    """-sp: the one worker test in this process. A stop signal sets the stop flag: before the
    test is released it also ends its set-up at once (Interrupted, caught here), once it
    measures the test ends its measured part; the report shows either, as a worker's."""
    caught = []
    state = results.rows["state"]

    def stop(signum: int, _frame) -> None:
        first = not caught
        caught.append(signum)
        results.stop()
        if first and state[proc.row] < RUNNING:
            raise Interrupted(signum)
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        spec = spec_for(plan, proc, results.shm.name.lstrip("/"), linesize)
        resolve(WORKER_MAIN)(spec, threading.Barrier(1), threading.Lock(), in_process=True)
    except Interrupted:                # in its set-up: nothing measured, the report says so
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    interrupted = caught[0] if caught else 0
    failed, cut = ended((proc,), results, {}, set(), interrupted)
    return Outcome(results.snapshot(), failed, interrupted, cut)


def ended(procs, results: Results, exitcodes: dict[int, int | None], killed: set[int],
          interrupted: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """How every process that did not finish well ended, saying why: (the failures, the tests a
    stop cut short). A test the run's stop ended is a failure only when no signal stopped the
    run; one whose measured part the stop ended before its limit (not `whole`: a signal's stop
    or a failure's) was cut short, as was one that never started beside a failure."""
    failed, cut, unstarted = [], [], []
    until = "the stop" if interrupted else "a failure stopped the run"
    for proc, rec in zip(procs, results.snapshot()):
        code, was_killed = exitcodes.get(proc.row, 0), proc.row in killed
        if rec.error:
            failed.append(f"{describe(proc)} failed: {rec.error}")
        elif rec.state in (NEW, READY, ABORTED) and (interrupted or was_killed or not code):
            unstarted.append(f"{describe(proc)} not started: the run was "
                             f"{'interrupted' if interrupted else 'stopped'}")
        elif rec.state == DONE and was_killed:
            continue                     # its part was over: killed while it exited
        elif rec.state == DONE and rec.transfers and not rec.whole:
            cut.append(f"{describe(proc)} stopped while running: measured until {until}")
        elif rec.state == DONE and not rec.whole:
            ramp = rec.ramp_transfers
            cut.append(f"{describe(proc)} stopped before it measured anything"
                       + (f" ({ramp} unmeasured transfers of its -ramp)" if ramp else ""))
        elif was_killed:
            (cut if interrupted else failed).append(
                f"{describe(proc)} did not stop within {STOP_GRACE} s of the stop: killed "
                f"while {STATE_NAMES[rec.state]}")
        elif code is not None and code < 0:
            failed.append(f"{describe(proc)} died: {signal.Signals(-code).name}")
        elif rec.state in (RUNNING, MEASURED) and interrupted:
            cut.append(f"{describe(proc)} stopped while {STATE_NAMES[rec.state]}")
        elif rec.state in (READY, RUNNING, MEASURED) or code:
            failed.append(f"{describe(proc)} stopped while {STATE_NAMES[rec.state]} "
                          f"(exit code {code})")
    (cut if interrupted or failed else failed).extend(unstarted)   # (alone: nothing else
    return tuple(failed), tuple(cut)                               # says why they did not)


@dataclass
class Workers:
    """A run's worker processes (by row) and what they meet at: the start barrier and the lock
    that lets spinWait measure its idle rate alone (named semaphores, `sems` their names)."""
    barrier: Any
    calibration_lock: Any
    sems: tuple[str, ...]
    children: dict[int, mp.process.BaseProcess] = field(default_factory=dict)
    killed: set[int] = field(default_factory=set)
    broken: bool = False           # the barrier's abort was started

    @classmethod
    def meeting(cls, plan: Plan, results: Results) -> Workers:
        """None launched yet; their barrier and lock made, their names in the segment's header."""
        parties = sum(KINDS[p.group.action].runs_in == WORKER for p in plan.procs()) + 1
        (barrier, lock), sems = semaphores.made_by(
            lambda: (workstart.FORKED.Barrier(parties), workstart.FORKED.Lock()))
        results.header["sems"][:len(sems)] = [n.encode() for n in sems]
        return cls(barrier, lock, sems)

    def launch(self, plan: Plan, results: Results, linesize: int) -> None:
        """Start the plan's workers (workstart.py: forked from the server, or -execChild's new
        interpreters), each on the CPUs the command has at its launch (-affinityParent's)."""
        segment = results.shm.name.lstrip("/")
        with signals_held():
            workstart.start_server(plan)
            for proc in plan.procs():
                if KINDS[proc.group.action].runs_in == WORKER:
                    self.children[proc.row] = self.start(plan, proc, segment, linesize)

    def start(self, plan: Plan, proc: Proc, segment: str, linesize: int):
        local = proc.group.local
        parent_cpus = os.sched_getaffinity(0)
        if local.affinityParent is not None:
            os.sched_setaffinity(0, {local.affinityParent})
        spec = spec_for(plan, proc, segment, linesize, os.sched_getaffinity(0),
                        workstart.parent(local))
        child = workstart.context(local).Process(
            target=resolve(WORKER_PROCESS), name=f"torque-async {describe(proc)}",
            args=(spec, self.barrier, self.calibration_lock))
        workstart.launch(child, local)
        if local.affinityParent is not None and not local.noResetParentAffinity:
            os.sched_setaffinity(0, parent_cpus)
        return child

    def break_barrier(self) -> None:
        """Abort the barrier, once, on a thread of its own: a multiprocessing Barrier's abort
        waits for every party waiting at it to wake, and one that died there never does (the
        loop, blocked, could then be stopped by no signal)."""
        if not self.broken:
            self.broken = True
            threading.Thread(target=self.barrier.abort, daemon=True,
                             name="torque-async barrier abort").start()

    def stop(self, results: Results) -> dict[int, int | None]:
        """Stop every worker: the stop flag first, then SIGKILL to those still running
        STOP_GRACE after it; one that never started testing has nothing to lose: at once. Their
        semaphores' names go; their exit codes, by row."""
        results.stop()
        self.break_barrier()
        deadline = time.monotonic() + STOP_GRACE
        states = results.rows["state"]
        for row, child in self.children.items():
            if states[row] not in (NEW, READY, ABORTED):
                child.join(max(0.0, deadline - time.monotonic()))
            if child.exitcode is None:
                child.kill()
                child.join()
                self.killed.add(row)
        self.forget()
        return {row: c.exitcode for row, c in self.children.items()}

    def forget(self) -> None:
        """Remove the semaphores' names (once every worker has opened them, or at the end)."""
        semaphores.forget(self.sems)
        self.sems = ()
