#!/usr/bin/env python3
"""What time-stamping every transfer (-sample 0, -vl 3) costs a memory test, measured in one
process (no spawn noise): the real timed loop (workers.entry.measure) over a real -bzero test,
sampled and not, interleaved and repeated; prints the median bandwidth of each, their spread
and the median ratio of pairs.

    python3 tools/sample_cost.py [--runs 40] [-- TORQUE LOCALS AND ONE MEMORY ACTION]

The default, -n 1024 -i 1 -KB 64 -bzero, stamps all of its 1024 small transfers: the worst case.
"""
from __future__ import annotations

import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torque_async import cmdline                          # noqa: E402
from torque_async.kinds import KINDS                      # noqa: E402
from torque_async.meter import Meter                      # noqa: E402
from torque_async.results import Results                  # noqa: E402
from workers.api import TestContext                       # noqa: E402
from workers.entry import measure                         # noqa: E402

DEFAULT = ["-n", "1024", "-i", "1", "-KB", "64", "-bzero"]


def bandwidth(test, group, res: Results, sample: int | None) -> float:
    """MB/s of one timed loop of the test, sampled every sample+1 transfers (None: not)."""
    local = replace(group.local, sample=sample)
    meter = Meter(res, 0, sample, False)
    measure(test, meter, local)
    rec = res.snapshot()[0]
    return rec.bytes / 2**20 / (rec.elapsed / 1e9)


def main() -> None:
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv[:cut] else 40
    (group,) = cmdline.parse(argv[cut + 1:] or DEFAULT).groups
    test = KINDS[group.action].load()(TestContext(group, 0, 0, np.random.default_rng(0), 64))
    res = Results.create(f"torque-async-sample-cost-{os.getpid():x}", 1)
    try:
        bandwidth(test, group, res, None)                 # warm caches and code paths
        plain, stamped = [], []
        for k in range(runs):
            order = (None, 0) if k % 2 == 0 else (0, None)
            got = {s: bandwidth(test, group, res, s) for s in order}
            plain.append(got[None])
            stamped.append(got[0])
    finally:
        test.close()
        res.release()
        res.shm.unlink()
    ratios = [s / p for s, p in zip(stamped, plain)]
    q = lambda v: statistics.quantiles(v, n=4)            # noqa: E731
    print(f"{group.text}: {runs} interleaved pairs, in one process")
    for name, values in (("not sampled", plain), ("-sample 0", stamped)):
        lo, _, hi = q(values)
        print(f"{name:12s} median {statistics.median(values):8.0f} MB/s, "
              f"interquartile {lo:.0f}..{hi:.0f}")
    lo, _, hi = q(ratios)
    print(f"sampled/not: median {statistics.median(ratios):.3f}, interquartile {lo:.3f}..{hi:.3f}")


if __name__ == "__main__":
    main()
