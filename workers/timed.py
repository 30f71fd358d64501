"""The worker's timed loops: `measure` (n x i transfers between the meter's begin and end,
then unmeasured ones while -slow keeps the test busy) and `idle_rate` (a calibrating test's
loop rate alone, the reference its loops under load are compared with)."""
from __future__ import annotations

import time

from torque_async.meter import Meter
from torque_async.timer import wait_until

CALIBRATION_NS = 250_000_000       # how long a calibrating test measures its idle loop rate


def idle_rate(test) -> float:
    """Ops per second of a calibrating test running alone (the lops reference)."""
    now = time.monotonic_ns
    k, t0 = 0, now()
    while now() - t0 < CALIBRATION_NS:
        test.transfer(k)
        k += 1
    return k * test.ops_per_transfer / ((now() - t0) / 1e9)


def measure(test, meter: Meter, local, ops_per_transfer: int = 0) -> None:
    """The timed loop: n x i transfers, then (-slow) unmeasured ones until every test is done."""
    total, throttle = local.n * local.i, local.T * 1000
    transfer, record, stop, now = test.transfer, meter.record, meter.stop, time.monotonic_ns
    t = meter.begin()                 # the measured interval: begin .. the last transfer's end
    k = 0
    while k < total and not stop[0]:
        t0 = now()                    # a transfer's latency is its own call, nothing around it
        transfer(k)
        t = now()
        record(t - t0, t)
        k += 1
        if throttle:
            t = wait_until(t + throttle, stop)
    meter.end(t)
    meter.publish(test.transfer_bytes, test.system_bytes, ops_per_transfer)
    extra = 0
    while meter.keep_going():
        transfer(k + extra)
        extra += 1
    meter.publish_extra(extra)
