#!/usr/bin/env python3
"""Set-up writes against dd with O_DIRECT, side by side in the same directory, in one invocation.

    python3 tools/bench_setup.py [--dir DIR] [--size-mb 1024] [--rounds 5]

Each round writes a file of --size-mb MiB both ways, one after the other (the order alternates
by round, so a slow drift of the machine hits both alike), each file removed before the next:

  torque-async  the real set-up path: a new scratch file (scratch.create in DIR) written with
                scratch.write_pattern on uvloop, as a file test's set-up writes it (its timer
                covers the pattern, the writes, the fdatasync and the page-cache drop)
  dd            dd if=/dev/zero of=F bs=8M count=N oflag=direct conv=fdatasync, timed by dd
                itself (its time covers the fdatasync too, as torque-async's does)

The table gives each side's MiB/s (median [min-max] over rounds) and the ratio torque-async/dd
per round, median [min-max]; the target is at least 0.8.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_io import directory                             # noqa: E402 - tools/ is the path
from torque_async.io import scratch                        # noqa: E402

MB = 1 << 20
TARGET = 0.8


def torque(size: int) -> float:
    """Seconds write_pattern takes for a new scratch file of `size` bytes (in the cwd)."""
    async def once() -> float:
        path, fd = scratch.create("bench.dat")
        try:
            t = time.perf_counter()
            await scratch.write_pattern(fd, size, 0, path,
                                        lambda flags: scratch.reopen("bench.dat", flags))
            return time.perf_counter() - t
        finally:
            os.close(fd)
            scratch.release("bench.dat")
    return uvloop.run(once())


def dd(size_mb: int) -> float:
    """Seconds dd reports for the same size with O_DIRECT, 8 MiB at a time, then fdatasync."""
    count, rest = divmod(size_mb, 8)
    if rest:
        sys.exit("bench_setup: --size-mb must be a multiple of 8 (dd's 8 MiB blocks)")
    out = subprocess.run(["dd", "if=/dev/zero", "of=dd.dat", "bs=8M", f"count={count}",
                          "oflag=direct", "conv=fdatasync"], capture_output=True, text=True, check=True).stderr
    os.unlink("dd.dat")
    return float(re.search(r"copied, ([0-9.e-]+) s", out).group(1))


def spread(values: list[float], digits: int = 2) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"[{min(values):.{digits}f}-{max(values):.{digits}f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", type=directory,
                    help="where both files go (the disk under test)")
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_setup.") as tmp:
        os.chdir(tmp)
        print(f"# {' '.join(sys.argv)}\n# {args.size_mb} MiB in {tmp}, {args.rounds} rounds, "
              f"load average {os.getloadavg()[0]:.1f}")
        ours, theirs, ratios = [], [], []
        for r in range(args.rounds):
            if r % 2:
                t_ours, t_dd = torque(args.size_mb * MB), dd(args.size_mb)
            else:
                t_dd, t_ours = dd(args.size_mb), torque(args.size_mb * MB)
            ours.append(args.size_mb / t_ours)
            theirs.append(args.size_mb / t_dd)
            ratios.append(t_dd / t_ours)
            print(f"round {r + 1}: torque-async {ours[-1]:.0f} MiB/s, dd {theirs[-1]:.0f} MiB/s, "
                  f"ratio {ratios[-1]:.2f}")
        print("| size | torque-async MiB/s | dd oflag=direct MiB/s | ratio median [min-max] | "
              "target |")
        print("|---|---|---|---|---|")
        print(f"| {args.size_mb} MiB | {spread(ours, 0)} | {spread(theirs, 0)} | "
              f"{spread(ratios)} | >= {TARGET} |")
        os.chdir("/")


if __name__ == "__main__":
    main()
