#!/usr/bin/env python3
"""What -baseline (and -repeat) cost: wall time of a plan with the option against the same plan
without it, interleaved in one invocation.

    python3 tools/bench_baseline.py [--rounds 3] [--option -baseline] [PLAN ...]

Each round runs `torque-async -nh PLAN` and `torque-async -nh OPTION PLAN` one after the other
(the order alternating between rounds) and times each whole command, start-up and set-up
included; prints every round, then the median [min-max] of each and of the per-round ratio.
-baseline runs the plan k + 1 times for k groups (each group alone, then all together).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLAN = "-n 50 -MB 4 -Striad -n 2000 -KB 4 -mfileMB 64 -rand -cyclic 1000".split()


def wall(args: list[str], where: str) -> float:
    """Seconds the command took, run in `where` with this checkout's code."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "torque_async", "-nh", "-noProgress", *args],
                          cwd=where, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        sys.exit(f"torque-async {' '.join(args)} failed: {done.stderr.strip()}")
    return time.monotonic() - t0


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--option", default="-baseline", help="the option measured, e.g. '-repeat 3'")
    ap.add_argument("plan", nargs="*", default=PLAN)
    a = ap.parse_args()
    option = a.option.split()
    plain, withit = [], []
    where = tempfile.mkdtemp(prefix="bench-baseline-")       # its scratch files and sysctl
    for r in range(a.rounds):
        pair = [(plain, a.plan), (withit, [*option, *a.plan])]
        for out, args in pair if r % 2 == 0 else pair[::-1]:
            out.append(wall(args, where))
        print(f"round {r + 1}: plain {plain[-1]:.2f} s, {a.option} {withit[-1]:.2f} s")
    shutil.rmtree(where, ignore_errors=True)
    ratios = [w / p for w, p in zip(withit, plain)]
    print(f"plan: {' '.join(a.plan)}")
    print(f"plain {spread(plain)} s; {a.option} {spread(withit)} s; ratio {spread(ratios)}")


if __name__ == "__main__":
    main()
