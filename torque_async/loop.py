"""The event-loop side: the I/O tests (files, async I/O, streams) as coroutines on the one loop.

A loop test is constructed with a TestContext, prepares everything untimed in `setup()` (before
the barrier), measures in `run(meter)` (its n x i transfers between meter.begin() and
meter.end(), then meter.publish(), then unmeasured transfers while meter.keep_going()), checks
its data in `check()` and releases what it holds in `close()`. A failing test writes its error
into its row and stops the run, exactly as a failing worker does.
"""
from __future__ import annotations

import asyncio
import os
import time
from typing import Awaitable, Callable, Protocol

import numpy as np

from .kinds import KINDS
from .meter import Meter
from .plan import Plan, Proc
from .results import DONE, FAILED, READY, RUNNING, Results
from workers.api import TestContext
from workers.entry import describe


class LoopTest(Protocol):
    transfer_bytes: int
    system_bytes: int
    info: str

    async def setup(self) -> None: ...
    async def run(self, meter: Meter) -> None: ...
    async def check(self) -> None: ...
    async def close(self) -> None: ...


class LoopSide:
    def __init__(self, plan: Plan, procs: list[Proc], results: Results, linesize: int,
                 on_failure: Callable[[], None]):
        self.plan, self.results, self.on_failure = plan, results, on_failure
        self.procs, self.linesize = procs, linesize
        self.tests: list[tuple[Proc, LoopTest]] = []

    def row(self, proc: Proc):
        return self.results.rows[proc.row:proc.row + 1]

    async def guarded(self, proc: Proc, step: Callable[[], Awaitable[None]]) -> bool:
        """Run one step of a test; a failure is written to its row and stops the run."""
        try:
            await step()
            return True
        except Exception as e:  # noqa: BLE001 - reported by name in the row
            row = self.row(proc)
            row["error"] = describe(e).encode()[:240]
            row["state"] = FAILED
            self.on_failure()
            return False

    def build(self, proc: Proc) -> LoopTest:
        rng = np.random.default_rng([self.plan.settings.seed, proc.row])
        ctx = TestContext(proc.group, proc.index, proc.row, rng,
                          proc.group.local.linesize or self.linesize, self.plan.settings,
                          len(self.procs))
        return KINDS[proc.group.action].load()(ctx)

    async def setup(self) -> bool:
        """Build and set up every loop test; False when one failed (the run is then stopped)."""
        for proc in self.procs:
            row = self.row(proc)
            row["pid"] = os.getpid()
            row["phase"][0, 0] = time.monotonic_ns()
            built: list[LoopTest] = []

            async def make(proc=proc, built=built) -> None:
                built.append(self.build(proc))
                await built[0].setup()
            ok = await self.guarded(proc, make)
            self.tests += [(proc, t) for t in built]
            if not ok:
                return False
            row["transfer_bytes"] = built[0].transfer_bytes
            row["info"] = built[0].info.encode()[:320]
            row["phase"][0, 1] = time.monotonic_ns()
            row["state"] = READY
        return True

    async def run(self) -> None:
        await asyncio.gather(*(self.run_one(proc, test) for proc, test in self.tests))

    async def run_one(self, proc: Proc, test: LoopTest) -> None:
        row = self.row(proc)
        row["state"] = RUNNING
        meter = Meter(self.results, proc.row, proc.group.local.sample, self.plan.slow)
        if await self.guarded(proc, lambda: test.run(meter)) and \
                await self.guarded(proc, test.check):
            row["state"] = DONE

    async def close(self) -> None:
        for proc, test in self.tests:
            await self.guarded(proc, test.close)
            self.row(proc)["phase"][0, 4] = time.monotonic_ns()
