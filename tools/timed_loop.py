"""The worker's own timed loop for the tools that time a test class in their process: each run
goes through workers.timed.measure and a Meter on a scratch results segment, so a tool measures
what a torque-async run measures (two clock reads and a record per transfer included)."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torque_async.meter import Limit, Meter               # noqa: E402
from torque_async.results import Results                  # noqa: E402
from workers.timed import measure                          # noqa: E402


@contextlib.contextmanager
def scratch_results():
    """A one-row results segment of this process, removed on leaving."""
    res = Results.create(f"torque-async-tool-{os.getpid():x}", 1)
    try:
        yield res
    finally:
        res.release()
        res.shm.unlink()


def bandwidth(test, local, res: Results, sample: int | None = None, first: int = 0) -> float:
    """MiB/s of transfer bytes over one timed loop of local.n x local.i transfers, sampled
    every sample+1 transfers (None: not), numbered on from `first` (the transfers run before:
    test.check is then given first + n x i)."""
    measure(test, Meter(res, 0, sample, False, Limit.of(local)), local, first=first)
    rec = res.snapshot()[0]
    return rec.bytes / 2**20 / (rec.elapsed / 1e9)
