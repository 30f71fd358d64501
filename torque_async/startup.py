"""When the command began, on the results' clock (CLOCK_MONOTONIC): the report's start-up
figure runs from it to the start barrier's release."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")   # /proc's start times count these


@dataclass(frozen=True)
class Began:
    ns: int                        # CLOCK_MONOTONIC ns
    resolution_ns: int             # the true start is up to this much later than ns


def process_start() -> Began:
    """When this process started: /proc/self/stat's start time, clock ticks since boot on
    CLOCK_BOOTTIME (so known to one tick), moved onto CLOCK_MONOTONIC."""
    with open("/proc/self/stat", "rb") as f:
        ticks = int(f.read().rsplit(b")", 1)[1].split()[19])     # field 22, starttime
    boot_ahead = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - time.monotonic_ns()
    return Began(ticks * TICK_NS - boot_ahead, TICK_NS)


def now() -> Began:
    """A command run from inside another program (execute()) begins when it is called."""
    return Began(time.monotonic_ns(), 0)
