#!/usr/bin/env python3
"""What the data checks' per-transfer stamps cost each memory and STREAM kernel, in place.

    python3 tools/stamp_cost.py                      # -n 64, 1 MiB chunks, 15 rounds
    python3 tools/stamp_cost.py --mb 0.0625 --rounds 31 --kernels bzero Scopy

For each kernel one test is built (as a worker builds it); then, in rounds, a pass over all n
chunks by its transfer() (the stamp included) and a pass by the same kernel without the stamp
alternate (who goes first alternates too), on the same buffers. The table gives the median ns
of the thread's CPU time a transfer takes each way (a shared machine's waits for a CPU left
out), the stamp's share of the stamped transfer (the medians' difference over the stamped
median) and the spread of the rounds' paired differences over it. Scale and Triad take their
scalar per transfer instead of a stamp: their plain pass uses the constant. The last column
times what the check adds alone (the stamp's store, load's + 1, the scalar's sum) over 20000
calls, in cache, less an empty call's: its floor, resolved where the paired passes'
differences drown in a shared machine's noise.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from bench_memory import KERNELS, build_test, locals_for      # puts the repository on sys.path

from workers import stream_kernels

MiB = 1 << 20


def unstamped(test):
    """transfer(k) without what the data check adds (the kernel as it was)."""
    n, views, scalar = test.n, test._views, stream_kernels.SCALAR
    return {
        "bcopy": lambda k: np.copyto(*views[k % n]),
        "bzero": lambda k: test.zero(k % n),
        "load": lambda k: int(test.load(k % n)),
        "store": lambda k: test.store(k % n),
        "ls": lambda k: (int(test.load(k % n)), test.store(k % n)),
        "Scopy": lambda k: test.copy(k % n),
        "Sscale": lambda k: np.multiply(views[k % n][2], scalar, out=views[k % n][1]),
        "Sadd": lambda k: np.add(views[k % n][0], views[k % n][1], out=views[k % n][2]),
        "Striad": lambda k: test.run(k % n),
    }[test.action]


def extra(test):
    """What the data check adds to transfer k, alone (the kernel left out)."""
    n, stamp, scalar = test.n, test.stamp, stream_kernels.SCALAR
    if test.action in ("Sscale", "Striad"):
        return lambda k: scalar + k
    if test.action == "load":
        return lambda k: k + 1
    if test.action == "ls":
        return lambda k: (k + 1, stamp.__setitem__(k % n, k))
    return lambda k: stamp.__setitem__(k % n, k)


def alone_ns(run, times: int = 20000) -> float:
    """CPU ns per call of run(k) alone, less an empty call's (the best of 5 loops each)."""
    def loop(f):
        t = time.thread_time_ns()
        for k in range(times):
            f(k)
        return time.thread_time_ns() - t
    return max(0.0, (min(loop(run) for _ in range(5)) - min(loop(lambda k: k) for _ in range(5)))
               / times)


def pass_ns(transfer, n: int, first: int) -> float:
    """CPU ns per transfer over a pass of transfers first .. first + n - 1 (the thread's CPU
    time: on a shared machine the time it waited for a CPU is left out, its memory stalls not)."""
    t = time.thread_time_ns()
    for k in range(first, first + n):
        transfer(k)
    return (time.thread_time_ns() - t) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=64, help="chunks")
    parser.add_argument("--mb", type=float, default=1, help="transfer size in MiB")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--kernels", nargs="+", default=KERNELS, choices=KERNELS)
    args = parser.parse_args()
    size = int(args.mb * MiB)
    print(f"# stamp_cost.py -n {args.n} --mb {args.mb} --rounds {args.rounds}: ns per transfer")
    print("| kernel | stamped | plain | stamp share median | rounds' share min-max | "
          "the stamp alone (ns, share) |")
    print("|---|---:|---:|---:|---:|---:|")
    for kernel in args.kernels:
        test = build_test(kernel, locals_for(args.n, size, 1, 64))
        plain, k = unstamped(test), 0
        stamped_ns, plain_ns = [], []
        for r in range(args.rounds + 1):
            got = {}
            for name in (("s", "p") if r % 2 else ("p", "s")):
                got[name] = pass_ns(test.transfer if name == "s" else plain, args.n, k)
                k += args.n
            if r:                                   # round 0 warms up
                stamped_ns.append(got["s"])
                plain_ns.append(got["p"])
        own = alone_ns(extra(test))
        test.close()
        s, p = statistics.median(stamped_ns), statistics.median(plain_ns)
        shares = [100 * (a - b) / s for a, b in zip(stamped_ns, plain_ns)]
        print(f"| {kernel} | {s:.0f} | {p:.0f} | {100 * (s - p) / s:+.2f}% | "
              f"{min(shares):+.1f}% .. {max(shares):+.1f}% | {own:.0f} ({100 * own / s:.2f}%) |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
