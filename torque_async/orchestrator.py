"""One run: the results segment, the spawned workers, the barrier, supervision and clean-up.

Everything runs on one uvloop event loop. Workers are spawned processes; the loop takes its
place at the barrier through a thread so it never blocks, and it watches every worker's
sentinel: a worker that dies or fails stops the run (stop flag, barrier abort), never hangs it.
The segment is unlinked whatever happens.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from threading import BrokenBarrierError
from typing import Callable

import psutil
import uvloop

from . import progress
from .cmdline import UsageError
from .kinds import KINDS, LOOP, WORKER, resolve
from .loop import LoopSide
from .plan import Plan, Proc
from .results import (DONE, MEASURED, READY, RUNNING, STATE_NAMES, Record, Results, SegmentExists,
                      owner_of, segment_name)
from .testing.api import WorkerSpec

WORKER_MAIN, WORKER_PROCESS = "workers.entry:main", "workers.entry:process_main"   # by name:
                                   # the core never imports workers/
SETUP_TIMEOUT = 300.0              # seconds every test may take to set up before the start
STOP_GRACE = 2.0                   # seconds a stopped worker gets before it is killed


@dataclass(frozen=True)
class Outcome:
    records: tuple[Record, ...]
    failures: tuple[str, ...]      # one line per test process that failed, by name
    interrupted: int = 0           # the signal (SIGINT, SIGTERM) that stopped the run early


class Interrupted(BaseException):
    """SIGINT or SIGTERM outside the event loop (set-up, report, -sp): unwinds with clean-up."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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
        owner = owner_of(name)
        if owner and psutil.pid_exists(owner):
            raise UsageError(f"shared memory key {plan.settings.smkey:#x} is in use by "
                             f"torque-async pid {owner}: wait for it or choose another -smkey")
        raise UsageError(f"a killed run (pid {owner}) left shared memory /dev/shm/{name}: "
                         f"remove it with -freeSharedMemory") from None


def spec_for(plan: Plan, proc: Proc, segment: str, linesize: int) -> WorkerSpec:
    return WorkerSpec(segment, proc, plan.settings.seed, linesize, plan.slow,
                      calibrate=not plan.settings.baseline)


def run(plan: Plan, linesize: int,
        meet: Callable[[Callable[[], bool]], str] | None = None) -> Outcome:
    """The run; `meet` (several hosts, see cluster.py) is called once every test here is set up
    and before their release, with a function that tells whether this run was stopped; it
    returns '' or why the run cannot start."""
    procs = plan.procs()
    results = open_segment(plan, len(procs))
    try:
        if plan.settings.sp and KINDS[procs[0].group.action].runs_in == WORKER:
            spec = spec_for(plan, procs[0], results.shm.name.lstrip("/"), linesize)
            resolve(WORKER_MAIN)(spec, threading.Barrier(1), threading.Lock(), in_process=True)
            return Outcome(results.snapshot(), failures(procs, results, {}))
        return uvloop.run(Supervisor(plan, procs, results, linesize, meet).run())
    finally:
        results.header["stop"] = 1
        results.shm.unlink()
        results.release()


def failures(procs, results: Results, exitcodes: dict[int, int | None]) -> tuple[str, ...]:
    """A line for every process that did not finish well, saying why."""
    lines = []
    for proc, rec in zip(procs, results.snapshot()):
        code = exitcodes.get(proc.row, 0)
        if rec.error:
            lines.append(f"{describe(proc)} failed: {rec.error}")
        elif code is not None and code < 0:
            lines.append(f"{describe(proc)} died: {signal.Signals(-code).name}")
        elif rec.state in (READY, RUNNING, MEASURED) or code:
            lines.append(f"{describe(proc)} stopped while {STATE_NAMES[rec.state]} "
                         f"(exit code {code})")
    return tuple(lines)


class Supervisor:
    def __init__(self, plan: Plan, procs, results: Results, linesize: int, meet=None):
        self.plan, self.procs, self.results, self.linesize = plan, procs, results, linesize
        self.meet = meet
        self.ctx = mp.get_context("spawn")
        self.workers = [p for p in procs if KINDS[p.group.action].runs_in == WORKER]
        self.loop_side = LoopSide(plan, [p for p in procs if KINDS[p.group.action].runs_in == LOOP],
                                  results, linesize, self.abort)
        self.barrier = self.ctx.Barrier(len(self.workers) + 1)
        self.calibration_lock = self.ctx.Lock()     # spinWait measures its idle rate alone
        self.children: dict[int, mp.process.BaseProcess] = {}
        self.exitcodes: dict[int, int | None] = {}
        self.failed = asyncio.Event()
        self.problems: tuple[str, ...] = ()
        self.interrupted = 0

    async def run(self) -> Outcome:
        self.loop = loop = asyncio.get_running_loop()
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:                   # a signal stops the run like a failure does
            loop.add_signal_handler(sig, self.interrupt, sig)
        ticker = None
        try:
            self.spawn()
            ended = [self.watch(loop, row, child) for row, child in self.children.items()]
            await self.loop_side.setup()
            if self.plan.settings.g:
                await self.unless_failed(self.key_pressed())
            ticker = progress.start(self.plan, self.procs, self.results, sys.stderr)
            await self.unless_failed(loop.run_in_executor(None, self.pass_barrier))
            if not self.failed.is_set():
                await asyncio.gather(self.loop_side.run(), *ended)
        finally:
            await progress.stop(ticker)
            self.stop()
            await self.loop_side.close()
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)
        return Outcome(self.results.snapshot(), self.problems
                       + failures(self.procs, self.results, self.exitcodes), self.interrupted)

    async def unless_failed(self, step) -> None:
        """Wait for a step of the set-up, or for the run to be stopped, whichever comes first."""
        failed = asyncio.ensure_future(self.failed.wait())
        step = asyncio.ensure_future(step)
        await asyncio.wait([step, failed], return_when=asyncio.FIRST_COMPLETED)
        failed.cancel()
        if not step.done():
            step.cancel()

    def interrupt(self, signum: int) -> None:
        self.interrupted = signum
        self.abort()

    def spawn(self) -> None:
        segment = self.results.shm.name.lstrip("/")
        for proc in self.workers:
            local = proc.group.local
            parent_cpus = os.sched_getaffinity(0)
            if local.affinityParent is not None:
                os.sched_setaffinity(0, {local.affinityParent})
            child = self.ctx.Process(target=resolve(WORKER_PROCESS), name=f"torque-async {describe(proc)}",
                                     args=(spec_for(self.plan, proc, segment, self.linesize),
                                           self.barrier, self.calibration_lock))
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
            done.set_result(child.exitcode)
        loop.add_reader(child.sentinel, exited)
        return done

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
        self.barrier.abort()
        self.failed.set()

    def stop(self) -> None:
        """Stop every worker: the stop flag first, then SIGKILL after a grace period."""
        self.results.header["stop"] = 1
        self.barrier.abort()
        for child in self.children.values():
            child.join(STOP_GRACE)
            if child.exitcode is None:
                child.kill()
                child.join()
        self.exitcodes.update((row, c.exitcode) for row, c in self.children.items())
