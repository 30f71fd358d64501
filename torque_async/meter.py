"""The measuring side every test shares: one Meter per test process, bound to its results row.

A test first runs unmeasured transfers while `ramping(t)` says so (-ramp: `ramp()` starts that
clock), calls `begin()` at its first measured transfer, asks `more(k, t)` before each measured
transfer k (0, 1, ...: the limit, n x i transfers or -t's deadline, is decided here and nowhere
else; `certain` of them are due whatever the time), calls `record(latency, end)` once per
completed transfer (a list store into the latency Summary's batch and one shared-memory counter:
no allocation), `end()` after its last measured one, then runs unmeasured transfers while
`keep_going()` says so (-slow). `publish()` writes the figures into the row. A test that mixes
reads and writes calls `split()` first and `record_rw` instead of `record` (-rmw: `record_rmw`):
its reads and writes are then also counted and timed apart. The CPU used over the measured
interval (begin .. end) is the worker process's own (getrusage), or for loop tests the event
loop thread's (thread_usage: begin and end may run on a lane's thread).
"""
from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import results
from .results import MAX_SAMPLES, Results
from .stats import BATCH, Summary

now = time.monotonic_ns
US_PER_TICK = 1_000_000 // os.sysconf("SC_CLK_TCK")     # /proc's CPU times count these
RAMPING, COUNTED, PAST = "ramping", "counted", "past"        # Meter.place
RAMP, MEASURED, EXTRA, STOP = range(4)    # what a claimed transfer is (Meter.claim)
NEVER = 1 << 62                    # a count or a time that is never reached


@dataclass(frozen=True)
class Limit:
    """When a test's measured part ends: after `count` transfers, or (-t) at `runtime_ns` after
    its start, whichever comes first; `ramp_ns` of unmeasured transfers go before (-ramp).
    Under -t the ramp is part of the group's time: it measures for runtime - ramp."""
    count: int = NEVER
    runtime_ns: int = 0            # 0: no deadline
    ramp_ns: int = 0

    @classmethod
    def of(cls, local) -> "Limit":
        """A group's limit from its local options (-n x -i, or -t; -ramp)."""
        ramp = round((local.ramp or 0) * 1e9)
        if local.t is None:
            return cls(local.n * local.i, 0, ramp)
        return cls(NEVER, round(local.t * 1e9) - ramp, ramp)


def word(a: np.ndarray) -> memoryview:
    """A one-element int64 array as a memoryview (indexing it costs half of numpy's)."""
    return memoryview(a).cast("B").cast("q")


class Meter:
    __slots__ = ("row", "live", "stop", "states", "waiting", "every", "next_sample",
                 "nsamples", "stamps", "lat", "count", "start", "finish", "parts", "who",
                 "cpu0", "cpu", "limit", "total", "deadline", "ramp_end", "ramped", "until",
                 "upto", "before")

    def __init__(self, results: Results, row: int, sample: int | None, slow: bool,
                 limit: Limit = Limit(), usage: Callable[[], np.ndarray] | None = None):
        self.row = results.row(row)
        self.live = word(self.row["transfers"])       # memoryviews: cheaper than numpy indexing
        self.stop = word(results.header["stop"].reshape(1))
        self.states = results.rows["state"]
        # -slow: the other rows that may still be measuring (none without -slow)
        self.waiting = [i for i in range(len(self.states)) if i != row] if slow else []
        self.every = sample + 1 if sample is not None else 0
        self.next_sample = self.every or -1
        self.nsamples = 0
        # Preallocated (t, k) pairs, flat: a list slot costs a third of a numpy row write, which
        # matters at -sample 0 (and -vl 3); publish() copies them into the row.
        self.stamps = [0] * (2 * MAX_SAMPLES) if self.every else []
        self.lat = Summary()                          # latency of each measured transfer
        self.count = self.start = self.finish = self.ramped = self.until = 0
        self.upto = self.before = 0                   # see claim()
        self.limit, self.total, self.deadline, self.ramp_end = limit, limit.count, NEVER, 0
        self.parts: tuple[Summary, Summary] | None = None   # reads, writes (split)
        self.who = usage or process_usage
        self.cpu0, self.cpu = np.zeros(6, np.int64), np.zeros(5, np.int64)

    def split(self) -> None:
        """Reads and writes are also counted and timed apart (record_rw)."""
        self.parts = (Summary(), Summary())

    def ramp(self) -> int:
        """-ramp's unmeasured transfers start now; returns the time."""
        t = now()
        self.ramp_end = t + self.limit.ramp_ns
        self.row["ran"][0, 0] = t
        return t

    def ramping(self, t: int) -> bool:
        """True while the ramp lasts at time t (and nobody stopped the run)."""
        return t < self.ramp_end and not self.stop[0]

    def begin(self, at: int | None = None) -> int:
        """The measured interval starts (now: its first transfer follows; or at `at`, a moment
        just past that the test's schedule starts from); -t's deadline counts from here."""
        self.cpu0 = self.who()
        self.start = t = now() if at is None else at
        if not self.row["ran"][0, 0]:               # (a ramp began it)
            self.row["ran"][0, 0] = t
        if self.limit.runtime_ns:
            self.deadline = t + self.limit.runtime_ns
        return t

    @property
    def certain(self) -> int:
        """How many measured transfers are due whatever the time: the count when there is no
        deadline, else none (a lane need not ask more() for those)."""
        return self.total if self.deadline == NEVER else 0

    def place(self, k: int, t: int) -> str:
        """Where transfer k (numbered from the test's first, -ramp's included) falls at time t:
        RAMPING (the ramp still runs), COUNTED (measured; the first starts the measured
        interval, and `ramped` is then the number of the first) or PAST (after the measured
        ones). The file lanes and -web's clients ask it when their count cannot say."""
        if not self.start:
            if self.ramping(t):
                return RAMPING
            self.ramped = k
            self.begin()
        return COUNTED if self.more(k - self.ramped, t) else PAST

    def claim(self, k: int, t: int, past: Callable[[], None] | None = None) -> int:
        """What transfer k is at time t when the count alone cannot say (the file lanes' and
        -web clients' claims): STOP once the stop flag is up, RAMP, MEASURED, or past the
        measured ones (`past()` is told first): EXTRA while -slow keeps the test going, else
        STOP. Below `until` the count alone says MEASURED (no clock read, no call); below
        `upto` a claim at a time before `before` (-t's deadline) is MEASURED too, as more() would
        say (io/batch.py asks them inline with its batch's clock read)."""
        if self.stop[0]:
            return STOP
        where = self.place(k, t)
        if where == RAMPING:
            return RAMP
        self.until = self.ramped + self.certain
        self.upto, self.before = self.ramped + self.total, self.deadline
        if where == COUNTED:
            return MEASURED
        if past is not None:
            past()
        return EXTRA if self.keep_going() else STOP

    def more(self, k: int, t: int) -> bool:
        """Whether measured transfer k (counted from 0 at begin) is due at time t: k below the
        count and t before the deadline. The first k refused under -t becomes the count, so
        every later k is refused too: the measured transfers are exactly 0 .. total-1."""
        if k < self.total and t < self.deadline:
            return True
        self.total = min(self.total, k)
        return False

    def record(self, latency: int, t_end: int) -> int:
        """One measured transfer completed at t_end after `latency` ns; returns how many have.
        The latency goes straight into the Summary's batch (Summary.add, without the call).
        io/batch.py makes its common case (no sample due, the batch not full) inline."""
        lat = self.lat
        i = lat.held
        lat.batch[i] = latency
        lat.held = i + 1
        if i + 1 == BATCH:
            lat.settle()
        self.count = k = self.count + 1
        self.live[0] = k
        if k == self.next_sample and self.nsamples < MAX_SAMPLES:
            self.sample(t_end, k)
            self.next_sample += self.every
        return k

    def sample(self, t: int, k: int) -> None:
        """Store the sample (t, k) in the next preallocated pair (the caller checked room)."""
        i = 2 * self.nsamples
        self.stamps[i], self.stamps[i + 1] = t, k
        self.nsamples += 1

    def stamp(self, t: int) -> None:
        """A last sample at time t of the count so far, where the last one taken is of fewer
        and there is room (a stream's: its last completion, before it waits out its period)."""
        if self.nsamples < MAX_SAMPLES and (not self.nsamples or
                                            self.stamps[2 * self.nsamples - 1] < self.count):
            self.sample(t, self.count)

    def due(self) -> int:
        """The first count whose transfer record() itself must take (a sample, the Summary's
        batch full, the last measured); io/batch.py records those below it inline. Only a
        claim refused under -t lowers it (more(): the count falls), which the caller sees."""
        sample = self.next_sample if 0 < self.next_sample and self.nsamples < MAX_SAMPLES \
            else self.total
        return min(sample, self.total, self.count + BATCH - self.lat.held)

    def record_rw(self, latency: int, t_end: int, write: bool) -> int:
        """record() of a read or a write of a test that mixes them (after split())."""
        self.parts[write].add(latency)
        return self.record(latency, t_end)

    def record_rmw(self, latency: int, t_end: int, read: int, write: int) -> int:
        """record() of a read-modify-write whose read and write took `read` and `write` ns."""
        self.parts[0].add(read)
        self.parts[1].add(write)
        return self.record(latency, t_end)

    @property
    def stopped(self) -> bool:
        return bool(self.stop[0])

    def end(self, t_end: int) -> None:
        self.finish = t_end
        self.cpu = cpu_interval(self.cpu0, self.who())

    def keep_going(self) -> bool:
        """-slow: true while some other test is still measuring (and nobody stopped the run).
        States only move forward, so the rows that reached MEASURED are dropped from `waiting`
        for good: one scalar read per call, no array."""
        waiting, states = self.waiting, self.states
        while waiting and states[waiting[-1]] >= results.MEASURED:
            waiting.pop()
        return bool(waiting) and not self.stop[0]

    def publish(self, transfer_bytes: int, system_bytes: int, ops_per_transfer: int = 0,
                whole: bool | None = None) -> None:
        """Write the measured figures into the row and mark it measured. `whole`: its measured
        part reached its limit, by default the Meter's: the count made (-t: more() refused one
        at the deadline, which made the count), or the deadline passed before the stop."""
        r, lat, k = self.row, self.lat.settle(), self.count
        r["whole"] = k >= self.total or self.stop[0] >= self.deadline if whole is None \
            else whole
        r["start"], r["finish"] = self.start, self.finish
        r["ran"][0, 1] = self.finish                # until publish_extra says later
        r["bytes"], r["sys_bytes"] = k * transfer_bytes, k * system_bytes
        r["lat_min"], r["lat_max"], r["lat_sum"], r["lat_count"] = lat.lo, lat.hi, lat.total, k
        r["hist"][0] = lat.hist
        r["nsamples"] = n = self.nsamples
        r["samples"][0, :n] = np.reshape(self.stamps[:2 * n], (n, 2))
        r["ops"] = k * ops_per_transfer
        r["phase"][0, 3] = self.finish
        r["ramp_transfers"] = self.ramped
        r["cpu_user"], r["cpu_sys"], r["csw_vol"], r["csw_invol"], r["cpu_wait"] = \
            self.cpu.tolist()
        if self.parts:
            r["split"] = 1
            for i, part in enumerate(self.parts):
                part.settle()
                r["rw_count"][0, i], r["rw_min"][0, i], r["rw_max"][0, i], r["rw_sum"][0, i] = \
                    part.count, part.lo, part.hi, part.total
                r["rw_hist"][0, i] = part.hist
        r["state"] = results.MEASURED

    def publish_extra(self, extra: int) -> None:
        """The unmeasured transfers after the measured ones (-slow): `extra` of them, ending now."""
        self.row["extra_transfers"] = extra
        if extra:
            self.row["ran"][0, 1] = now()


def process_usage() -> np.ndarray:
    """This process's user and system CPU, its CPU in all (ns), voluntary and involuntary
    context switches, and how long its main thread (a worker's test) waited for a CPU (the
    counters cpu_interval takes)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    user, system = round(u.ru_utime * 1e9), round(u.ru_stime * 1e9)
    return np.array([user, system, user + system, u.ru_nvcsw, u.ru_nivcsw,
                     waited("/proc/self/schedstat")], np.int64)


def waited(schedstat: str) -> int:
    """ns a thread spent runnable but waiting on a run queue (the kernel's schedstat, as
    perf sched and schedtool read it), -1 where the kernel does not count it."""
    try:
        with open(schedstat, "rb") as fh:
            return int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def thread_usage() -> Callable[[], np.ndarray]:
    """process_usage's counters for the calling thread, readable from any thread: user and
    system in the kernel's ticks, its CPU clock (ns), its context switches. The thread itself
    asks the kernel (getrusage, cheap); another reads /proc (dearer: a loop that starts many
    tests pays it for each). Both are the kernel's same counters, user and system
    rounded down to the ticks /proc counts (getrusage's are whole us), so either reading may
    follow the other."""
    clock = time.pthread_getcpuclockid(threading.get_ident())
    mine = threading.get_native_id()
    task = f"/proc/self/task/{mine}"

    def usage() -> np.ndarray:
        cpu = time.clock_gettime_ns(clock)
        if threading.get_native_id() == mine:
            u = resource.getrusage(resource.RUSAGE_THREAD)
            return np.array([round(u.ru_utime * 1e6) // US_PER_TICK,
                             round(u.ru_stime * 1e6) // US_PER_TICK, cpu, u.ru_nvcsw,
                             u.ru_nivcsw, waited(f"{task}/schedstat")], np.int64)
        with open(f"{task}/stat", "rb") as fh:
            user, system = map(int, fh.read().rsplit(b")", 1)[1].split()[11:13])
        with open(f"{task}/status", "rb") as fh:
            switches = [int(ln.split()[1]) for ln in fh if b"ctxt_switches" in ln]
        return np.array([user, system, cpu, *switches, waited(f"{task}/schedstat")], np.int64)
    return usage


def cpu_interval(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """User and system CPU (ns), voluntary and involuntary context switches, and the wait for
    a CPU (ns, -1 unknown) between two readings: the CPU in all split as the user and system
    counters split."""
    user, system, cpu, vol, invol, wait = (after - before).tolist()
    user_ns = cpu * user // (user + system) if user + system else cpu
    known = min(before[5], after[5]) >= 0
    return np.array([user_ns, cpu - user_ns, vol, invol, wait if known else -1], np.int64)


HARNESS_READINGS = 15              # readings of the harness's cost; their median is taken


def harness_cost(readings: int = HARNESS_READINGS, clock: Callable[[], int] | None = None) -> int:
    """ns the harness spends on one transfer besides the transfer itself: two clock reads and
    a latency store, on a scratch Summary. Each reading times BATCH rounds (one fold of the
    batch among them, as a test's transfers have); the median of `readings` readings is taken,
    so one reading a preemption or a cold cache inflated is not the figure (set-up of every
    run: each repetition takes its own)."""
    clock = clock or now
    lat, live = Summary(), word(np.zeros(1, np.int64))
    got = []
    for _ in range(readings):
        t_first = clock()
        for k in range(BATCH):
            t0 = now()
            t = now()
            lat.add(t - t0)
            live[0] = k
        got.append((clock() - t_first) // BATCH)
    return int(np.median(got))
