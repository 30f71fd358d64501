"""The interface every spawned-process test implements, and what it is given.

A test class is constructed in its worker process (set-up: allocate, initialise, warm up; never
timed), then `transfer(k)` is called for k = 0, 1, 2, ... between the timer's start and stop
(unmeasured before it during -ramp, and past n x i or -t while -slow keeps it busy), then `check()` validates the data after
timing and `close()` frees what it holds. The driver (workers/entry.py) owns the clock, the
latency statistics, the samples and the results row; a test only moves data.

A worker test's `check(transfers)` is given how many times the driver called transfer() (its
calibration, -ramp, measured and -slow transfers: what the results claim), and fails when the
data do not show that many. What a passed check proves (`proves`: VALUES, COUNT) and why not
the rest (`unproved`) go into the row (`checked`, `unproved`) and the JSON's `check`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from torque_async.kinds import KINDS
from torque_async.results import CHECKED, COUNT, VALUES   # noqa: F401 - what a check proves


class TestError(Exception):
    """A test found wrong data or could not set up: the message names what and why."""


@dataclass(frozen=True)
class TestContext:
    group: Any                # torque_async.plan.Group: .action, .args, .local (the group's options)
    proc: int                 # process index inside the group (0 .. p-1)
    row: int                  # this process's row in the results array (its global number)
    rng: np.random.Generator  # seeded from -seed and the row: every random choice comes from here
    linesize: int             # cache line size in bytes (-linesize or the machine's)
    settings: Any = None      # options.Globals of the run (loop tests: -f files, -engine, -seed)
    loop_tests: int = 0       # loop tests: how many tests share the event loop, this one included
    pins: Any = None          # loop tests: Plan.pins (-f path -> who the file is), or None

    @property
    def local(self):
        return self.group.local


def make_test(proc, seed: int, linesize: int, settings: Any = None, loop_tests: int = 0,
              pins: Any = None):
    """Build the test of `proc` (a torque_async.plan.Proc), worker or loop test alike: its rng
    comes from (-seed, row), so -seed reproduces a run whichever side runs the test."""
    ctx = TestContext(proc.group, proc.index, proc.row, np.random.default_rng([seed, proc.row]),
                      proc.group.local.linesize or linesize, settings, loop_tests, pins)
    return KINDS[proc.group.action].load()(ctx)


@dataclass(frozen=True)
class WorkerSpec:
    segment: str
    proc: Any                     # torque_async.plan.Proc
    seed: int
    linesize: int                 # the machine's; make_test prefers the group's -linesize
    slow: bool
    calibrate: bool = True        # spinWait measures its idle rate before the start (not
                                  # with -baseline: its run alone is that figure)
    launched: int = 0             # CLOCK_MONOTONIC ns just before its process was started
    cpus: frozenset[int] | None = None   # the command's CPUs at its launch: the worker's, as
                                         # a spawned child inherits them (a forked one may not)
    parent: int = 0               # the pid it is started as the child of (it ends if that is gone)


class WorkerTest(Protocol):
    transfer_bytes: int   # bytes one transfer reports in BW(MB/s)
    system_bytes: int     # bytes one transfer moves through the system (the BW: line)
    info: str             # one line about the set-up for the report ('' for none)
    proves: int           # what check() proves when it passes: VALUES | COUNT, or less
    unproved: str         # why it does not prove the rest ('' when it proves both)

    def transfer(self, k: int) -> None: ...
    def check(self, transfers: int) -> None: ...
    def close(self) -> None: ...
