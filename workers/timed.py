"""The worker's timed loops: `measure` (-ramp's unmeasured transfers, then the measured ones
the meter's limit allows between its begin and end, then unmeasured ones while -slow keeps the
test busy), `idle_rate` (a calibrating test's
loop rate alone, the reference its loops under load are compared with) and `pass_ns` (set-up's
untimed timing of a kernel variant's pass, see MemoryTest.choose)."""
from __future__ import annotations

import time

from torque_async.meter import Meter
from torque_async.timer import wait_until

CALIBRATION_NS = 250_000_000       # how long a calibrating test measures its idle loop rate
CALIBRATION_PASSES = 3             # rounds of set-up's timing of kernel variants (the best kept)


def pass_ns(run) -> int:
    """How long one call of run() takes in ns (set-up: timing a kernel variant's pass)."""
    t = time.perf_counter_ns()
    run()
    return time.perf_counter_ns() - t


def idle_rate(test) -> tuple[float, int]:
    """Ops per second of a calibrating test running alone (the lops reference), and the
    transfers it ran (k = 0, 1, ...)."""
    now = time.monotonic_ns
    k, t0 = 0, now()
    while now() - t0 < CALIBRATION_NS:
        test.transfer(k)
        k += 1
    return k * test.ops_per_transfer / ((now() - t0) / 1e9), k


def measure(test, meter: Meter, local, ops_per_transfer: int = 0, first: int = 0) -> int:
    """The timed loop: -ramp's unmeasured transfers, then the measured ones while the Meter's
    limit (n x i, or -t) allows, then (-slow) unmeasured ones until every test is done.
    Transfers are numbered on from `first` (those run before); returns the number after the
    last (first + the transfers it ran), the count test.check() is given."""
    throttle = local.T * 1000
    transfer, record, more, stop = test.transfer, meter.record, meter.more, meter.stop
    now = time.monotonic_ns
    k, t = first, meter.ramp()
    while meter.ramping(t):
        transfer(k)
        k += 1
        t = now()
    meter.ramped, base = k - first, k
    t = last = meter.begin()          # the measured interval: begin .. the last transfer's end
    sure = base + meter.certain       # measured whatever the time: more() need not be asked
    while (k < sure or more(k - base, t)) and not stop[0]:
        t0 = now()                    # a transfer's latency is its own call, nothing around it
        transfer(k)
        t = last = now()
        record(t - t0, t)
        k += 1
        if throttle:                  # between transfers, as a file test's: the last one's
            t = wait_until(t + throttle, stop)    # (cut short by a stop) was counted
    meter.end(last)
    meter.publish(test.transfer_bytes, test.system_bytes, ops_per_transfer)
    extra = 0
    while meter.keep_going():
        transfer(k + extra)
        extra += 1
    meter.publish_extra(extra)
    return k + extra
