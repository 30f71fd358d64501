#!/usr/bin/env python3
"""What time-stamping every transfer (-sample 0, -vl 3) costs a memory test, measured in one
process (no spawn noise): the real timed loop (workers.timed.measure) over a real -bzero test,
sampled and not, interleaved and repeated; prints the median bandwidth of each, their spread
and the median ratio of pairs.

    python3 tools/sample_cost.py [--runs 40] [-- TORQUE LOCALS AND ONE MEMORY ACTION]

The default, -n 1024 -i 1 -KB 64 -bzero, stamps all of its 1024 small transfers: the worst case.
"""
from __future__ import annotations

import statistics
import sys

import numpy as np

from timed_loop import bandwidth, scratch_results     # first: puts the repository on sys.path

from torque_async import cmdline
from torque_async.kinds import KINDS
from torque_async.kind_api.api import TestContext

DEFAULT = ["-n", "1024", "-i", "1", "-KB", "64", "-bzero"]


def main() -> None:
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv[:cut] else 40
    (group,) = cmdline.parse(argv[cut + 1:] or DEFAULT).groups
    test = KINDS[group.action].load()(TestContext(group, 0, 0, np.random.default_rng(0), 64))
    try:
        with scratch_results() as res:
            bandwidth(test, group.local, res)             # warm caches and code paths
            plain, stamped = [], []
            for k in range(runs):
                order = (None, 0) if k % 2 == 0 else (0, None)
                got = {s: bandwidth(test, group.local, res, s) for s in order}
                plain.append(got[None])
                stamped.append(got[0])
    finally:
        test.close()
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
