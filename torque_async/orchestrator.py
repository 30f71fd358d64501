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
(WATCHDOG_S; both in deadlines.py). The segment is unlinked whatever happens, if it is still
this run's. The workers' specs, launch and stop are in processes.py.
"""
from __future__ import annotations

import signal
import sys
import threading
from multiprocessing import resource_tracker
from typing import Callable

from .errors import UsageError
from .kinds import KINDS, WORKER, WORKER_MAIN, resolve
from .outcome import Outcome
from .plan import Plan, Proc
from .processes import Workers, ended, spec_for
from .results import (RUNNING, STOP_SIGNALS, NotASegment, Results, SegmentExists, live_owner,
                      owner_of, segment_name, signals_held)


class Interrupted(BaseException):
    """A stop signal outside the event loop (plan check, set-up, report): unwinds with
    clean-up."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_interrupted(signum: int, _frame) -> None:
    raise Interrupted(signum)


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


