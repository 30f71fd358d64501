"""A spawned test process: attach the results, pin, set up, meet the barrier, measure, record.

The barrier is passed twice: once when every party is set up (spinWait then measures its idle
loop rate, one process at a time, while everything else waits), and once to start: its release
is time zero for everyone: each party stamps its way out ("released"; the earliest stamp is the
release, see report.time_zero). The measuring loop reads the clock around each transfer; the
Meter keeps the statistics and writes the row when the measured part ends.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from threading import BrokenBarrierError

import numpy as np

from torque_async.plan import Proc
from torque_async.meter import Limit, Meter, harness_cost
from torque_async.results import ABORTED, DONE, RUNNING, Results
from torque_async.testing.api import WorkerSpec, make_test
from torque_async.testing.rows import mark_closed, mark_failed, mark_ready, mark_spawned
from torque_async.timer import wait_until

CALIBRATION_NS = 250_000_000       # how long spinWait measures its idle loop rate
PR_SET_PDEATHSIG = 1


def process_main(spec: WorkerSpec, barrier, calibration_lock) -> None:
    """A spawned worker's target: its exit status tells the orchestrator how it went."""
    sys.exit(main(spec, barrier, calibration_lock))


def main(spec: WorkerSpec, barrier, calibration_lock, in_process: bool = False) -> int:
    """Run one test process; returns its exit status (0 ok, 1 failed)."""
    if not in_process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the orchestrator ends the run
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    results = Results.attach(spec.segment)
    row = results.row(spec.proc.row)
    mark_spawned(row)
    test = None
    try:
        pin(spec.proc)
        test = make_test(spec.proc, spec.seed, spec.linesize)
        row["harness_ns"] = harness_cost()
        mark_ready(row, test)
        barrier.wait()
        if getattr(test, "calibrate", False) and spec.calibrate:
            with calibration_lock:
                row["ref_rate"] = idle_rate(test)
        barrier.wait()
        row["phase"][0, 2] = time.monotonic_ns()
        row["state"] = RUNNING
        local = spec.proc.group.local
        meter = Meter(results, spec.proc.row, local.sample, spec.slow, Limit.of(local))
        if hasattr(test, "measure"):     # a test that times itself (-cyclic: lateness)
            test.measure(meter, local)
        else:
            measure(test, meter, local)
        test.check()
        row["state"] = DONE
        return 0
    except BrokenBarrierError:
        row["state"] = ABORTED
        return 1
    except Exception as e:  # noqa: BLE001 - every failure is reported in the row, by name
        mark_failed(row, e)
        return 1
    finally:
        if test is not None:
            test.close()
        mark_closed(row)
        del row
        sleep_end = spec.proc.group.local.sleepEnd
        results.release()
        if sleep_end:
            time.sleep(sleep_end)


def pin(proc: Proc) -> None:
    local = proc.group.local
    if local.affinityNumber is not None:
        os.sched_setaffinity(0, {local.affinityNumber})
    elif local.affinityNumberDiff is not None:
        os.sched_setaffinity(0, {local.affinityNumberDiff + proc.index})


def idle_rate(test) -> float:
    """Loops per second of a calibrating test running alone (the lops reference)."""
    now = time.monotonic_ns
    k, t0 = 0, now()
    while now() - t0 < CALIBRATION_NS:
        test.transfer(k)
        k += 1
    return k * test.ops_per_transfer / ((now() - t0) / 1e9)


def measure(test, meter: Meter, local) -> None:
    """The timed loop: -ramp's unmeasured transfers, then the measured ones while the Meter's
    limit (n x i, or -t) allows, then (-slow) unmeasured ones until every test is done."""
    throttle = local.T * 1000
    transfer, record, more, stop = test.transfer, meter.record, meter.more, meter.stop
    now = time.monotonic_ns
    k, t = 0, meter.ramp()
    while meter.ramping(t):
        transfer(k)
        k += 1
        t = now()
    meter.ramped, base = k, k
    t = meter.begin()                 # the measured interval: begin .. the last transfer's end
    sure = base + meter.certain       # measured whatever the time: more() need not be asked
    while (k < sure or more(k - base, t)) and not stop[0]:
        t0 = now()                    # a transfer's latency is its own call, nothing around it
        transfer(k)
        t = now()
        record(t - t0, t)
        k += 1
        if throttle:
            t = wait_until(t + throttle)
    meter.end(t)
    meter.publish(test.transfer_bytes, test.system_bytes, getattr(test, "ops_per_transfer", 0))
    extra = 0
    while meter.keep_going():
        transfer(k + extra)
        extra += 1
    meter.publish_extra(extra)


if __name__ == "__main__":       # pragma: no cover - workers are started by the orchestrator
    sys.exit("workers.entry is started by torque-async, not by hand")
