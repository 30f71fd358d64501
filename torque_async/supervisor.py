"""A run once its workers are launched: the event loop that sets up the loop tests, meets the
workers at the barrier, supervises every test (their sentinels, the stop signals, a watchdog)
and stops them at the end (see orchestrator.py, which imports this module after the launch: the
event loop's modules load while the workers set up)."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from threading import BrokenBarrierError
from typing import Callable

import psutil
import uvloop

from . import progress
from .deadlines import SETUP_TIMEOUT, STOP_GRACE, WATCH_EVERY, WATCHDOG_S
from .kind_api.api import TestError
from .kind_api.rows import mark_failed
from .kinds import KINDS, LOOP
from .loop import LoopSide
from .outcome import Outcome
from .plan import Plan
from .processes import Workers, describe, ended
from .results import DONE, MEASURED, NEW, READY, RUNNING, STATE_NAMES, STOP_SIGNALS, Results
from .streams.schedule import Geometry


def supervise(plan: Plan, results: Results, linesize: int, workers: Workers, meet,
              caught: list[int]) -> Outcome:
    """The launched run on its event loop, to its end (orchestrator.launched); `caught`: the
    stop signals that came before the loop had its handlers for them."""
    return uvloop.run(Supervisor(plan, results, linesize, workers, meet).run(caught))


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
    def __init__(self, plan: Plan, results: Results, linesize: int, workers: Workers, meet=None):
        self.plan, self.procs, self.results, self.linesize = plan, plan.procs(), results, linesize
        self.workers, self.meet = workers, meet
        self.children, self.barrier = workers.children, workers.barrier
        loop_procs = [p for p in self.procs if KINDS[p.group.action].runs_in == LOOP]
        self.loop_side = LoopSide(plan, loop_procs, results, linesize, self.abort)
        self.exitcodes: dict[int, int | None] = {}
        self.failed = asyncio.Event()
        self.problems: tuple[str, ...] = ()
        self.interrupted = 0           # the first stop signal
        self.testing = False           # the barrier released the tests

    async def run(self, caught: list[int]) -> Outcome:
        self.loop = loop = asyncio.get_running_loop()
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in STOP_SIGNALS:                   # a signal stops the run like a failure does
            loop.add_signal_handler(sig, self.interrupt, sig)
        for sig in caught[:1]:                     # one came before the loop ran
            self.interrupt(sig)
        ticker = watchdog = None
        try:
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
            self.exitcodes.update(self.workers.stop(self.results))
            await self.loop_side.close()
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)
        failed, cut = ended(self.procs, self.results, self.exitcodes, self.workers.killed,
                            self.interrupted)
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
        self.interrupted = self.interrupted or signum
        self.abort()

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
        while self.workers.sems:
            if all(rows["pid"][r] or c.exitcode is not None for r, c in self.children.items()):
                self.workers.forget()
                self.results.header["sems"] = b""
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
        self.results.stop()
        self.failed.set()              # before the barrier breaks: pass_barrier reads it
        self.workers.break_barrier()
