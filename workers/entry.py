"""A spawned test process's main: attach the results, pin, set up, meet the barrier, measure,
record. What the driver does for a test follows its kind's declared needs (torque_async.kinds).

The barrier is passed twice: once when every party is set up (a calibrating test then
measures its idle loop rate, one process at a time, while everything else waits), and once to
start: its release is time zero for everyone: each party stamps its way out ("released"; the
earliest stamp is the release, see report.time_zero). The timed loops are in workers/timed.py.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from threading import BrokenBarrierError

from torque_async.kinds import CALIBRATION, KINDS, OWN_LOOP
from torque_async.meter import Limit, Meter, harness_cost, word
from torque_async.results import ABORTED, DONE, RUNNING, STOP_SIGNALS, Results
from torque_async.kind_api.api import WorkerSpec, make_test
from torque_async.kind_api.rows import mark_closed, mark_failed, mark_ready, mark_spawned
from torque_async.timer import wait_until
from workers.timed import idle_rate, measure

PR_SET_PDEATHSIG = 1


def process_main(spec: WorkerSpec, barrier, calibration_lock) -> None:
    """A spawned worker's target: its exit status tells the orchestrator how it went."""
    sys.exit(main(spec, barrier, calibration_lock))


def main(spec: WorkerSpec, barrier, calibration_lock, in_process: bool = False) -> int:
    """Run one test process; returns its exit status (0 ok, 1 failed)."""
    if not in_process:
        for sig in STOP_SIGNALS:       # the orchestrator ends the run: they reach it alone
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)   # blocked since its start
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # with its parent's end
        if os.getppid() != spec.parent:    # which came before that: nothing would end it
            return 1
    results = Results.attach(spec.segment)
    row = results.row(spec.proc.row)
    mark_spawned(row, spec.launched)
    test = None
    needs = KINDS[spec.proc.group.action].needs
    try:
        pin(spec)
        test = make_test(spec.proc, spec.seed, spec.linesize)
        row["harness_ns"] = harness_cost()
        mark_ready(row, test)
        barrier.wait()
        if CALIBRATION in needs and spec.calibrate:
            with calibration_lock:
                row["ref_rate"] = idle_rate(test)
        barrier.wait()
        row["phase"][0, 2] = time.monotonic_ns()
        row["state"] = RUNNING
        local = spec.proc.group.local
        meter = Meter(results, spec.proc.row, local.sample, spec.slow, Limit.of(local))
        if OWN_LOOP in needs:            # a test that times itself (-cyclic: lateness)
            test.measure(meter, local)
        else:
            measure(test, meter, local, test.ops_per_transfer if CALIBRATION in needs else 0)
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
        if sleep_end:                        # until the time, or the run's stop
            stop = word(results.header["stop"].reshape(1))
            wait_until(time.monotonic_ns() + round(sleep_end * 1e9), stop)
            del stop
        results.release()


def pin(spec: WorkerSpec) -> None:
    local = spec.proc.group.local
    if spec.cpus:                        # the command's at launch (-affinityParent), inherited
        os.sched_setaffinity(0, spec.cpus)
    if local.affinityNumber is not None:
        os.sched_setaffinity(0, {local.affinityNumber})
    elif local.affinityNumberDiff is not None:
        os.sched_setaffinity(0, {local.affinityNumberDiff + spec.proc.index})


if __name__ == "__main__":       # pragma: no cover - workers are started by the orchestrator
    sys.exit("workers.entry is started by torque-async, not by hand")
