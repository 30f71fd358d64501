"""The event-loop side: the I/O tests (files, async I/O, streams) as coroutines on the one loop.

A loop test is constructed with a TestContext, prepares everything untimed in `setup()` (before
the barrier), measures in `run(meter)` (-ramp's unmeasured transfers, then those the Meter's
limit allows between meter.begin() and meter.end(), then meter.publish(), then unmeasured
transfers while meter.keep_going()), checks its data in `check()` and releases what it holds
in `close()`. A failing test writes its error into its row and stops the run, exactly as a
failing worker does.

The loop tests share one thread: -affinityNumber pins that thread (when every loop group that
asks agrees), and -sleepEnd holds a finished test's files open before it is closed.
"""
from __future__ import annotations

import asyncio
import os
from typing import Awaitable, Callable, Protocol

from .io import batch, uring
from .kind_api.api import TestError, make_test
from .kind_api.rows import describe, mark_checked, mark_closed, mark_failed, mark_ready, \
    mark_spawned, note_info
from .meter import Limit, Meter, harness_cost, thread_usage
from .plan import Plan, Proc
from .results import DONE, RUNNING, Results
from .rtprio import RealTime, policy_of
from .validate import loop_cpu


class LoopTest(Protocol):
    transfer_bytes: int
    system_bytes: int
    info: str
    proves: int                    # what a passed check() proves (testing.api: VALUES, COUNT)
    unproved: str                  # and why not the rest

    async def setup(self) -> None: ...
    async def run(self, meter: Meter) -> None: ...
    async def check(self) -> None: ...
    async def close(self) -> None: ...


STOP_POLL = 0.1                    # s: a -sleepEnd wait looks at the stop flag this often


class LoopSide:
    def __init__(self, plan: Plan, procs: list[Proc], results: Results, linesize: int,
                 on_failure: Callable[[], None]):
        self.plan, self.results, self.on_failure = plan, results, on_failure
        self.slow = plan.slow              # (a property over every process: once, not a test)
        self.meters: dict[int, Meter] = {}   # row -> its test's, made at set-up
        self.procs, self.linesize = procs, linesize
        self.tests: list[tuple[Proc, LoopTest]] = []
        self.cpu, self.cpus = loop_cpu(plan), os.sched_getaffinity(0)
        self.realtime: RealTime | None = None        # -rtprio, from the end of set-up

    def row(self, proc: Proc):
        return self.results.row(proc.row)

    async def guarded(self, proc: Proc, step: Callable[..., Awaitable[None]], *args) -> bool:
        """Run one step of a test; a failure is written to its row and stops the run."""
        try:
            await step(*args)
            return True
        except Exception as e:  # noqa: BLE001 - reported by name in the row
            mark_failed(self.row(proc), e)
            self.on_failure()
            return False

    async def build(self, proc: Proc) -> None:
        self.tests.append((proc, make_test(proc, self.plan.settings.seed, self.linesize,
                                           self.plan.settings, len(self.procs),
                                           self.plan.pins)))

    async def setup(self) -> None:
        """Build and set up every loop test, in order, until one fails (which stops the run)."""
        if self.cpu is not None and self.procs:
            os.sched_setaffinity(0, {self.cpu})      # this thread; threads made later inherit it
        cost = harness_cost() if self.procs else 0
        usage = thread_usage()                       # the loop's CPU over a test's interval
        for proc in self.procs:
            row = self.row(proc)
            mark_spawned(row)
            row["harness_ns"] = cost
            if not await self.guarded(proc, self.build, proc):
                return
            test = self.tests[-1][1]            # built: close() releases it from here on
            if not await self.guarded(proc, test.setup):
                return
            self.meters[proc.row] = Meter(self.results, proc.row, proc.group.local.sample,
                                          self.slow, Limit.of(proc.group.local), usage)
            mark_ready(row, test)                # (its Meter is made in set-up: made at its
                                                 # start, it would delay the tests' release)
        await self.calibrate()
        self.real_time()

    def real_time(self) -> None:
        """-rtprio: this thread SCHED_FIFO, the process locked, once the tests are set up (the
        plan's check found both allowed; a refusal now fails the first test, by name)."""
        priority = self.plan.settings.rtprio
        if priority is None or not self.tests:
            return
        try:
            self.realtime = RealTime(priority)
        except OSError as e:
            mark_failed(self.row(self.tests[0][0]), TestError(f"-rtprio {priority}: {e}"))
            self.on_failure()

    async def calibrate(self) -> None:
        """The tests that share a choice of the engine's make it together, once all are set up
        (io/batch.py), their info saying what was chosen and how long choosing took (the tests'
        own set-up times leave it out: it is the loop's)."""
        procs = {id(test): proc for proc, test in self.tests}
        try:
            chose = await batch.calibrate([test for _, test in self.tests],
                                          lambda: bool(self.results.header["stop"]))
        except uring.Misread as e:             # in its set-up, though the test was ready
            mark_failed(self.row(procs[id(e.owner)]), TestError(describe(e.error)))
            self.on_failure()
            return
        for test in chose:
            note_info(self.row(procs[id(test)]), test)

    async def run(self) -> None:
        await asyncio.gather(*(self.run_one(proc, test) for proc, test in self.tests))

    async def run_one(self, proc: Proc, test: LoopTest) -> None:
        row, meter = self.row(proc), self.meters[proc.row]
        row["state"], row["sched"] = RUNNING, policy_of()     # the loop's, as it runs the test
        # a run stopped (a signal, a failure) skips the data checks: they read back every
        # lane's place and can take seconds; the report says the run did not finish anyway
        if not await self.guarded(proc, lambda: test.run(meter)):
            return
        if not self.results.header["stop"]:
            if not await self.guarded(proc, test.check):
                return
            mark_checked(row, test)
        row["state"] = DONE
        await self.sleep_end(proc.group.local.sleepEnd)

    async def sleep_end(self, seconds: float) -> None:
        """-sleepEnd: the test stays open that long after it is done, or until the run stops."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0 and not self.results.header["stop"]:
            await asyncio.sleep(min(STOP_POLL, left))

    async def close(self) -> None:
        for proc, test in self.tests:
            await self.guarded(proc, test.close)
            mark_closed(self.row(proc))
        if self.cpu is not None and self.procs:
            os.sched_setaffinity(0, self.cpus)
        if self.realtime is not None:
            self.realtime.restore()
            self.realtime = None
