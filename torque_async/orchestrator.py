"""One run: the results segment, the spawned workers, the barrier, supervision and clean-up.

Everything runs on one uvloop event loop. Workers are spawned processes; the loop takes its
place at the barrier through a thread so it never blocks, and it watches every worker's
sentinel: a worker that dies or fails stops the run (stop flag, barrier abort), never hangs it.
SIGINT, SIGTERM and SIGHUP stop the run the same way in every phase (the loop's own set-up is a
task that is cancelled; every long wait of a test checks the stop flag at least every
timer.SLICE_NS); workers ignore them and end at the stop flag, or are killed STOP_GRACE after
it. A watchdog ends a run whose results stopped moving (WATCHDOG_S). The segment is unlinked
whatever happens, if it is still this run's.
"""
from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing import resource_tracker
from threading import BrokenBarrierError
from typing import Any, Callable

import psutil
import uvloop

from . import progress, semaphores, workstart
from .cmdline import UsageError
from .kinds import KINDS, LOOP, WORKER, resolve
from .loop import LoopSide
from .plan import Plan, Proc
from .results import (ABORTED, DONE, FAILED, MEASURED, NEW, READY, RUNNING, STATE_NAMES, Record,
                      Results, STOP_SIGNALS, NotASegment, SegmentExists, live_owner, owner_of,
                      segment_name)
from .streams.schedule import Geometry
from .testing.api import TestError, WorkerSpec
from .testing.rows import mark_failed

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
    unfinished: tuple[str, ...] = ()   # interrupted: the tests the signal cut short, by name
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


@contextlib.contextmanager
def signals_held():
    """The stop signals wait (blocked) meanwhile; a process started meanwhile starts with them
    blocked, so a signal to the process group cannot end it before it ignores them."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


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
        if owner and live_owner(owner):
            raise UsageError(f"shared memory key {plan.settings.smkey:#x} is in use by "
                             f"torque-async pid {owner}: wait for it or choose another -smkey")
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
    with signals_held():           # the resource tracker, started here, never sees them
        resource_tracker.ensure_running()
    results = open_segment(plan, len(procs))
    try:
        if plan.settings.sp and KINDS[procs[0].group.action].runs_in == WORKER:
            return in_process(plan, procs[0], results, linesize)
        return uvloop.run(Supervisor(plan, procs, results, linesize, meet).run())
    finally:
        results.header["stop"] = 1
        results.unlink()
        results.release()


def in_process(plan: Plan, proc: Proc, results: Results, linesize: int) -> Outcome:
    """-sp: the one worker test in this process. A stop signal before it is released ends the
    run at once (Interrupted); once it measures, it sets the stop flag, so the test ends its
    measured part and the report shows it."""
    caught = []                  # (signal, when)
    state = results.rows["state"]

    def stop(signum: int, _frame) -> None:
        if state[proc.row] < RUNNING:
            raise Interrupted(signum)
        caught.append((signum, time.monotonic_ns()))
        results.header["stop"] = 1
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        spec = spec_for(plan, proc, results.shm.name.lstrip("/"), linesize)
        resolve(WORKER_MAIN)(spec, threading.Barrier(1), threading.Lock(), in_process=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    interrupted, stopped_ns = caught[0] if caught else (0, 0)
    failed, cut = ended((proc,), results, {}, set(), interrupted, stopped_ns)
    return Outcome(results.snapshot(), failed, interrupted, cut)


def ended(procs, results: Results, exitcodes: dict[int, int | None], killed: set[int],
          interrupted: int, stopped_ns: int = 0) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """How every process that did not finish well ended, saying why: (the failures, the tests a
    stop signal cut short). A test the run's stop ended is a failure only when no signal
    stopped the run; one that ended at the stop flag (its last measured transfer after the
    signal came at `stopped_ns`) was cut short."""
    failed, cut = [], []
    for proc, rec in zip(procs, results.snapshot()):
        code, was_killed = exitcodes.get(proc.row, 0), proc.row in killed
        if rec.error:
            failed.append(f"{describe(proc)} failed: {rec.error}")
        elif rec.state in (NEW, READY, ABORTED) and (interrupted or was_killed):
            (cut if interrupted else failed).append(
                f"{describe(proc)} not started: the run was "
                f"{'interrupted' if interrupted else 'stopped'}")
        elif rec.state == DONE and was_killed:
            continue                     # its part was over: killed while it exited
        elif rec.state == DONE and interrupted and rec.transfers and rec.finish > stopped_ns:
            cut.append(f"{describe(proc)} stopped while running: measured until the stop")
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
    return tuple(failed), tuple(cut)


def on_own_thread(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> asyncio.Future:
    """fn() on a daemon thread, its end a future of the loop: a party that died at the barrier
    may leave that thread blocked for good, and the command never waits for it (at exit
    either, as it would for an executor's thread)."""
    done = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error else done.set_result(None)

    def run() -> None:
        try:
            fn()
            error = None
        except BaseException as e:  # noqa: BLE001 - handed to the loop, which raises it
            error = e
        with contextlib.suppress(RuntimeError):         # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, error)
    threading.Thread(target=run, daemon=True, name="torque-async barrier").start()
    return done


def progress_of(rows) -> bytes:
    """What changes in the rows while any test makes progress: states, measured transfers and
    latencies (sub-streams too), phase marks."""
    return b"".join(rows[f].tobytes() for f in ("state", "transfers", "lat_count", "sub_xfers",
                                                 "phase"))


def longest_pause(procs) -> float:
    """Seconds a test may rightly show no progress by itself: its -T throttle, a -cyclic
    interval, or a stream's start delay and one frame period."""
    def pause(group) -> float:
        if group.action == "cyclic":
            return group.args[0] / 1e6
        if KINDS[group.action].family == "streams":
            g = Geometry.of(group.args, group.local)
            return (g.start_delay + float(g.period)) / 1e9
        return 0.0
    return max([p.group.local.T / 1e6 + pause(p.group) for p in procs] + [0.0])


class Supervisor:
    def __init__(self, plan: Plan, procs, results: Results, linesize: int, meet=None):
        self.plan, self.procs, self.results, self.linesize = plan, procs, results, linesize
        self.meet = meet
        self.workers = [p for p in procs if KINDS[p.group.action].runs_in == WORKER]
        self.loop_side = LoopSide(plan, [p for p in procs if KINDS[p.group.action].runs_in == LOOP],
                                  results, linesize, self.abort)
        (self.barrier, self.calibration_lock), self.sems = semaphores.made_by(
            lambda: (workstart.FORKED.Barrier(len(self.workers) + 1),
                     workstart.FORKED.Lock()))        # spinWait measures its idle rate alone
        results.header["sems"][:len(self.sems)] = [n.encode() for n in self.sems]
        self.children: dict[int, mp.process.BaseProcess] = {}
        self.exitcodes: dict[int, int | None] = {}
        self.killed: set[int] = set()
        self.failed = asyncio.Event()
        self.problems: tuple[str, ...] = ()
        self.interrupted = self.stopped_ns = 0          # the first stop signal, and when
        self.testing = False           # the barrier released the tests
        self.broken = False            # its abort was started

    async def run(self) -> Outcome:
        self.loop = loop = asyncio.get_running_loop()
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:                   # a signal stops the run like a failure does
            loop.add_signal_handler(sig, self.interrupt, sig)
        ticker = watchdog = None
        try:
            with signals_held():
                self.spawn()
            ended_ = [self.watch(loop, row, child) for row, child in self.children.items()]
            watchdog = asyncio.ensure_future(self.watchdog())
            await self.unless_failed(self.loop_side.setup())
            if self.plan.settings.g:
                await self.unless_failed(self.key_pressed())
            ticker = progress.start(self.plan, self.procs, self.results, sys.stderr)
            await self.unless_failed(on_own_thread(loop, self.pass_barrier))
            if not self.failed.is_set():
                self.testing = True
                testing = asyncio.ensure_future(asyncio.gather(self.loop_side.run(), *ended_))
                await self.unless_failed(testing, STOP_GRACE)
        finally:
            for task in (ticker, watchdog):
                await progress.stop(task)
            self.stop()
            semaphores.forget(self.sems)
            await self.loop_side.close()
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)
        failed, cut = ended(self.procs, self.results, self.exitcodes, self.killed,
                            self.interrupted, self.stopped_ns)
        return Outcome(self.results.snapshot(), self.problems + failed, self.interrupted, cut)

    async def unless_failed(self, step, grace: float = 0) -> None:
        """Wait for a step, or for the run to be stopped (and then up to `grace` seconds more
        for the step to end by itself), whichever comes first; a step still going is
        cancelled."""
        failed = asyncio.ensure_future(self.failed.wait())
        step = asyncio.ensure_future(step)
        await asyncio.wait([step, failed], return_when=asyncio.FIRST_COMPLETED)
        failed.cancel()
        if not step.done() and grace:
            await asyncio.wait([step], timeout=grace)
        if not step.done():
            step.cancel()
            await asyncio.wait([step])
        if not step.cancelled() and isinstance(step.exception(), Exception):
            raise step.exception()

    def interrupt(self, signum: int) -> None:
        if not self.interrupted:
            self.interrupted, self.stopped_ns = signum, time.monotonic_ns()
        self.abort()

    def spawn(self) -> None:
        """Start the workers (workstart.py: forked from the server, or -execChild's new
        interpreters), each on the CPUs the command has at its launch (-affinityParent's)."""
        segment = self.results.shm.name.lstrip("/")
        workstart.start_server(self.plan)
        for proc in self.workers:
            local = proc.group.local
            parent_cpus = os.sched_getaffinity(0)
            if local.affinityParent is not None:
                os.sched_setaffinity(0, {local.affinityParent})
            spec = spec_for(self.plan, proc, segment, self.linesize, os.sched_getaffinity(0),
                            workstart.parent(local))
            child = workstart.context(local).Process(
                target=resolve(WORKER_PROCESS), name=f"torque-async {describe(proc)}",
                args=(spec, self.barrier, self.calibration_lock))
            child.start()
            if local.affinityParent is not None and not local.noResetParentAffinity:
                os.sched_setaffinity(0, parent_cpus)
            self.children[proc.row] = child

    def watch(self, loop: asyncio.AbstractEventLoop, row: int, child) -> asyncio.Future:
        """A future that resolves when the child exits; a bad exit stops the whole run."""
        done = loop.create_future()

        def exited() -> None:
            loop.remove_reader(child.sentinel)
            child.join()
            self.exitcodes[row] = child.exitcode
            if child.exitcode != 0 or self.results.rows["state"][row] != DONE:
                self.abort()
            if not done.done():                  # (cancelled when the run was stopped)
                done.set_result(child.exitcode)
        loop.add_reader(child.sentinel, exited)
        return done

    async def watchdog(self) -> None:
        """Remove the semaphores' names once every worker has opened them; then, while
        testing, end the run when no results row changed for WATCHDOG_S (plus the longest
        pause a test makes by itself), naming the tests that had not finished."""
        rows = self.results.rows
        workers = [p.row for p in self.workers]
        while self.sems:
            if all(rows["pid"][r] or self.children[r].exitcode is not None for r in workers):
                semaphores.forget(self.sems)
                self.results.header["sems"] = b""
                self.sems = ()
            await asyncio.sleep(WATCH_EVERY)
        limit = WATCHDOG_S + longest_pause(self.procs)
        seen, since = None, time.monotonic()
        while not self.failed.is_set():
            now, state = time.monotonic(), progress_of(rows)
            if not self.testing or state != seen:
                seen, since = state, now
            elif now - since > limit and self.name_stalled(limit):
                self.abort()
            await asyncio.sleep(WATCH_EVERY)

    def name_stalled(self, limit: float) -> bool:
        """Fail the rows the run waits for, in their rows: those still before their measured
        end, else (all measured) those not done. False when there are none (-sleepEnd)."""
        states = self.results.rows["state"]
        unfinished = [p for p in self.procs if states[p.row] in (NEW, READY, RUNNING, MEASURED)]
        waited = [p for p in unfinished if states[p.row] != MEASURED] or unfinished
        for proc in waited:
            child = self.children.get(proc.row)
            try:
                status = f" (its process {child.pid} is {psutil.Process(child.pid).status()})" \
                    if child else ""
            except psutil.Error:
                status = ""
            mark_failed(self.results.row(proc.row), TestError(
                f"made no progress for {limit:.0f} s while {STATE_NAMES[states[proc.row]]}"
                f"{status}: ended by the watchdog"))
        return bool(waited)

    async def key_pressed(self) -> None:
        """-g: show every test's pid, then wait for Enter (a reader on stdin, not a thread)."""
        for row, child in self.children.items():
            print(f"pid {child.pid}: {describe(self.procs[row])}", file=sys.stderr)
        print("press Enter to start testing", file=sys.stderr, flush=True)
        pressed = self.loop.create_future()
        fd = sys.stdin.fileno()
        self.loop.add_reader(fd, lambda: pressed.done() or pressed.set_result(os.read(fd, 4096)))
        try:
            await pressed
        finally:
            self.loop.remove_reader(fd)

    def pass_barrier(self) -> None:
        """The loop's place at the barrier: all set up, then (after calibration) the start,
        stamped as every loop test's "released" mark (the workers stamp their own)."""
        try:
            self.barrier.wait(SETUP_TIMEOUT)
            problem = self.meet(self.failed.is_set) if self.meet else ""
            if problem:
                self.problems = (problem,)
                self.loop.call_soon_threadsafe(self.abort)
                return
            self.barrier.wait(SETUP_TIMEOUT)
            released = time.monotonic_ns()
            for proc in self.loop_side.procs:
                self.results.rows["phase"][proc.row, 2] = released
        except BrokenBarrierError:
            if not self.failed.is_set():     # nobody aborted: the wait timed out
                self.problems = (f"the tests did not all set up within {SETUP_TIMEOUT:.0f} s",)
                self.loop.call_soon_threadsafe(self.abort)

    def abort(self) -> None:
        self.results.header["stop"] = 1
        self.break_barrier()
        self.failed.set()

    def break_barrier(self) -> None:
        """Abort the barrier, once, on a thread of its own: a multiprocessing Barrier's abort
        waits for every party waiting at it to wake, and one that died there never does (the
        loop, blocked, could then be stopped by no signal)."""
        if not self.broken:
            self.broken = True
            threading.Thread(target=self.barrier.abort, daemon=True,
                             name="torque-async barrier abort").start()

    def stop(self) -> None:
        """Stop every worker: the stop flag first, then SIGKILL to those still running
        STOP_GRACE after it; one that never started testing has nothing to lose: at once."""
        self.results.header["stop"] = 1
        self.break_barrier()
        deadline = time.monotonic() + STOP_GRACE
        states = self.results.rows["state"]
        for row, child in self.children.items():
            if states[row] not in (NEW, READY, ABORTED):
                child.join(max(0.0, deadline - time.monotonic()))
            if child.exitcode is None:
                child.kill()
                child.join()
                self.killed.add(row)
        self.exitcodes.update((row, c.exitcode) for row, c in self.children.items())
