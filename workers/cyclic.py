"""-cyclic INTERVAL_US: cyclictest's measurement, run beside the other tests.

A spawned worker sleeps to absolute CLOCK_MONOTONIC deadlines every INTERVAL_US
(clock_nanosleep TIMER_ABSTIME, SCHED_OTHER, as cyclictest without -p) and records each
wake-up's lateness in the Meter: fixed-size statistics (min, max, sum, count, log histogram),
nothing stored per wake-up, the garbage collector off while it measures. The first n x i
wake-ups (or, with -t, those of its time; -ramp's time it only sleeps) are its own
measurement; with -slow (the default beside other tests) it then goes on
measuring until every other test has finished measuring, so it covers their whole run.
A wake-up that overran whole intervals skips them (as cyclictest does): the next deadline is
the first one still ahead. An interval longer than timer.SLICE_NS is slept in slices that look
at the stop flag (the last slice ends at the deadline itself), so a stop never waits for it.
"""
from __future__ import annotations

import gc

from torque_async.meter import Meter, now
from torque_async.timer import Sleeper
from torque_async.kind_api.api import TestContext, TestError

RAMP_SLICE = 100_000_000            # ns: -ramp's sleep looks at the stop flag this often


class CyclicTest:
    transfer_bytes = 0
    system_bytes = 0

    def __init__(self, ctx: TestContext):
        self.interval = ctx.group.args[0] * 1000
        local = ctx.local
        self.wakeups = f"for {local.t - (local.ramp or 0):g} s" if local.t else \
            f"at least {local.n * local.i} wake-ups"
        self.sleep = Sleeper()
        self.meter: Meter | None = None
        self.last = 0                            # the last wake-up's lateness (Act)
        self.info = (f"cyclic: wake-ups every {ctx.group.args[0]} us at absolute deadlines "
                     f"(clock_nanosleep, SCHED_OTHER), {self.wakeups}")

    def measure(self, meter: Meter, local) -> None:
        self.meter = meter
        gc.disable()
        try:
            t = meter.ramp()
            while meter.ramping(t):                      # -ramp: asleep, not measuring
                self.sleep(min(meter.ramp_end, t + RAMP_SLICE))
                t = now()
            t = self.wake(meter, meter.begin(), meter.more)
            meter.end(t)
            meter.publish(0, 0)                          # its own part: others may stop now
            t = self.wake(meter, t, lambda k, t: meter.keep_going())
        finally:
            gc.enable()
        meter.end(t)
        meter.publish(0, 0)
        meter.row["last_lat"] = self.last

    def wake(self, meter: Meter, t: int, more) -> int:
        """Wake every interval from t while more(wake-ups so far, the last wake-up); returns
        the last wake-up."""
        sleep, record, stop, interval = self.sleep, meter.record, meter.stop, self.interval
        deadline = t + interval
        k = 0
        while not stop[0] and more(k, t):
            if not sleep(deadline, stop):        # stopped during a long interval
                break
            t = now()
            self.last = late = t - deadline
            record(late, t)
            k += 1
            deadline += interval
            if deadline <= t:
                deadline += (t - deadline) // interval * interval + interval
        return t

    def check(self) -> None:
        meter = self.meter
        if meter is None or (meter.count == 0 and not meter.stopped):
            raise TestError("-cyclic: no wake-up was measured")
        if meter.lat.lo < 0:
            raise TestError(f"-cyclic: woke {-meter.lat.lo} ns before a deadline")

    def close(self) -> None:
        pass
