"""The measuring side every test shares: one Meter per test process, bound to its results row.

A test calls `begin()` at its first measured transfer, `record(latency, end)` once per completed
transfer (a list store into the latency Summary's batch and one shared-memory counter: no
allocation), `end()` after its last measured one, then runs unmeasured transfers while
`keep_going()` says so (-slow). `publish()` writes the figures into the row.
"""
from __future__ import annotations

import time

import numpy as np

from .results import MAX_SAMPLES, MEASURED, Results
from .stats import Summary

now = time.monotonic_ns


def word(a: np.ndarray) -> memoryview:
    """A one-element int64 array as a memoryview (indexing it costs half of numpy's)."""
    return memoryview(a).cast("B").cast("q")


class Meter:
    __slots__ = ("row", "live", "stop", "states", "waiting", "every", "next_sample",
                 "nsamples", "stamps", "lat", "count", "start", "finish")

    def __init__(self, results: Results, row: int, sample: int | None, slow: bool):
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
        self.count = self.start = self.finish = 0

    def begin(self) -> int:
        """The measured interval starts: also the row's "released" phase mark."""
        self.start = t = now()
        self.row["phase"][0, 2] = t
        return t

    def record(self, latency: int, t_end: int) -> int:
        """One measured transfer completed at t_end after `latency` ns; returns how many have."""
        self.lat.add(latency)
        self.count = k = self.count + 1
        self.live[0] = k
        if k == self.next_sample and self.nsamples < MAX_SAMPLES:
            i = 2 * self.nsamples
            self.stamps[i] = t_end
            self.stamps[i + 1] = k
            self.nsamples += 1
            self.next_sample += self.every
        return k

    @property
    def stopped(self) -> bool:
        return bool(self.stop[0])

    def end(self, t_end: int) -> None:
        self.finish = t_end

    def keep_going(self) -> bool:
        """-slow: true while some other test is still measuring (and nobody stopped the run).
        States only move forward, so the rows that reached MEASURED are dropped from `waiting`
        for good: one scalar read per call, no array."""
        waiting, states = self.waiting, self.states
        while waiting and states[waiting[-1]] >= MEASURED:
            waiting.pop()
        return bool(waiting) and not self.stop[0]

    def publish(self, transfer_bytes: int, system_bytes: int, ops_per_transfer: int = 0) -> None:
        """Write the measured figures into the row and mark it measured."""
        r, lat, k = self.row, self.lat.settle(), self.count
        r["start"], r["finish"] = self.start, self.finish
        r["bytes"], r["sys_bytes"] = k * transfer_bytes, k * system_bytes
        r["lat_min"], r["lat_max"], r["lat_sum"], r["lat_count"] = lat.lo, lat.hi, lat.total, k
        r["hist"][0] = lat.hist
        r["nsamples"] = n = self.nsamples
        r["samples"][0, :n] = np.reshape(self.stamps[:2 * n], (n, 2))
        r["ops"] = k * ops_per_transfer
        r["phase"][0, 3] = self.finish
        r["state"] = MEASURED

    def publish_extra(self, extra: int) -> None:
        self.row["extra_transfers"] = extra
