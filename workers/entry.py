"""A spawned test process: attach the results, pin, set up, meet the barrier, measure, record.

The barrier is passed twice: once when every party is set up (spinWait then measures its idle
loop rate, one process at a time, while everything else waits), and once to start: its release
is time zero for everyone. The measuring loop reads the clock once per transfer and keeps its
statistics in locals; the row is written when the measured part ends.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from dataclasses import dataclass
from threading import BrokenBarrierError

import numpy as np

from torque_async.kinds import KINDS
from torque_async.plan import Proc
from torque_async.results import (ABORTED, DONE, FAILED, HIST_BUCKETS, MAX_SAMPLES, MEASURED,
                                  READY, RUNNING, Results, bucket)
from workers.api import TestContext, TestError

CALIBRATION_NS = 250_000_000       # how long spinWait measures its idle loop rate
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerSpec:
    segment: str
    proc: Proc
    seed: int
    linesize: int
    slow: bool


def main(spec: WorkerSpec, barrier, calibration_lock, in_process: bool = False) -> int:
    """Run one test process; returns its exit status (0 ok, 1 failed)."""
    if not in_process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)       # the orchestrator ends the run
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    results = Results.attach(spec.segment)
    row = results.rows[spec.proc.row:spec.proc.row + 1]     # a view: writes land in the segment
    row["pid"] = os.getpid()
    row["phase"][0, 0] = time.monotonic_ns()
    test = None
    try:
        pin(spec.proc)
        test = build(spec)
        row["transfer_bytes"] = test.transfer_bytes
        row["info"] = test.info.encode()[:160]
        row["phase"][0, 1] = time.monotonic_ns()
        row["state"] = READY
        barrier.wait()
        if getattr(test, "calibrate", False):
            with calibration_lock:
                row["ref_rate"] = idle_rate(test)
        barrier.wait()
        row["state"] = RUNNING
        measure(test, row, results, spec)
        test.check()
        row["state"] = DONE
        return 0
    except BrokenBarrierError:
        row["state"] = ABORTED
        return 1
    except Exception as e:  # noqa: BLE001 - every failure is reported in the row, by name
        row["error"] = describe(e).encode()[:240]
        row["state"] = FAILED
        return 1
    finally:
        if test is not None:
            test.close()
        row["phase"][0, 4] = time.monotonic_ns()
        del row
        sleep_end = spec.proc.group.local.sleepEnd
        results.release()
        if sleep_end and not in_process:
            time.sleep(sleep_end)


def describe(e: Exception) -> str:
    return str(e) if isinstance(e, TestError) else f"{type(e).__name__}: {e}"


def pin(proc: Proc) -> None:
    local = proc.group.local
    if local.affinityNumber is not None:
        os.sched_setaffinity(0, {local.affinityNumber})
    elif local.affinityNumberDiff is not None:
        os.sched_setaffinity(0, {local.affinityNumberDiff + proc.index})


def build(spec: WorkerSpec):
    proc = spec.proc
    rng = np.random.default_rng([spec.seed, proc.row])
    cls = KINDS[proc.group.action].load()
    return cls(TestContext(proc.group, proc.index, proc.row, rng, spec.linesize))


def idle_rate(test) -> float:
    """Loops per second of a calibrating test running alone (the lops reference)."""
    now = time.monotonic_ns
    k, t0 = 0, now()
    while now() - t0 < CALIBRATION_NS:
        test.transfer(k)
        k += 1
    return k * test.ops_per_transfer / ((now() - t0) / 1e9)


def wait_until(deadline: int) -> int:
    """Delay precisely: sleep to within 100 us of the deadline, then spin. Returns the time."""
    now = time.monotonic_ns
    left = deadline - now()
    if left > 200_000:
        time.sleep((left - 100_000) / 1e9)
    t = now()
    while t < deadline:
        t = now()
    return t


def measure(test, row, results: Results, spec: WorkerSpec) -> None:
    """The timed loop: n x i transfers, then (-slow) unmeasured ones until every test is done."""
    local = spec.proc.group.local
    total = local.n * local.i
    every = local.sample + 1 if local.sample is not None else 0
    next_sample, nsamples = (every if every else -1), 0
    samples = row["samples"][0]
    throttle = local.T * 1000
    stop = results.header["stop"].reshape(1)
    live = row["transfers"]
    hist = [0] * HIST_BUCKETS
    lo, hi, tot = 1 << 62, 0, 0
    transfer, now = test.transfer, time.monotonic_ns

    row["phase"][0, 2] = start = t = now()
    k = 0
    while k < total and not stop[0]:
        transfer(k)
        t1 = now()
        lat = t1 - t
        tot += lat
        lo = lat if lat < lo else lo
        hi = lat if lat > hi else hi
        hist[bucket(lat)] += 1
        k += 1
        live[0] = k
        if k == next_sample and nsamples < MAX_SAMPLES:
            samples[nsamples] = (t1, k)
            nsamples += 1
            next_sample += every
        t = wait_until(t1 + throttle) if throttle else t1

    row["start"], row["finish"] = start, t
    row["bytes"], row["sys_bytes"] = k * test.transfer_bytes, k * test.system_bytes
    row["lat_min"], row["lat_max"], row["lat_sum"], row["lat_count"] = lo, hi, tot, k
    row["hist"][0] = hist
    row["nsamples"] = nsamples
    row["ops"] = k * getattr(test, "ops_per_transfer", 0)
    row["phase"][0, 3] = t
    row["state"] = MEASURED
    if not spec.slow:
        return
    states = results.rows["state"]
    extra = 0
    while not stop[0] and (states < MEASURED).any():
        transfer(k + extra)
        extra += 1
    row["extra_transfers"] = extra


if __name__ == "__main__":       # pragma: no cover - workers are started by the orchestrator
    sys.exit("workers.entry is started by torque-async, not by hand")
