#!/usr/bin/env python3
"""Soak: many consecutive short runs mixing every test family; after each, nothing may be left.

    python3 tools/soak.py [--runs 200] [--workdir DIR]

After every run it checks that no process it started is alive, no results segment is left in
/dev/shm, no scratch file or directory is left in the working directory, and at the end that the
machine's used memory did not grow (median of the last 20 runs against the first 20).
"""
from __future__ import annotations

import argparse
import glob
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIXES = [     # short runs, each a different mix of families
    "-n 8 -MB 1 -i 2 -bcopy -n 8 -MB 1 -i 2 -Striad -n 16 -KB 256 -spinWait",
    "-p 2 -n 8 -MB 1 -i 2 -load -n 8 -MB 1 -store -n 8 -MB 1 -ls",
    "-n 16 -i 1 -V 6 -n 8 -MB 1 -bzero",
    "-memStreams rwr 2 256 50 0 0.3 4 -n 8 -MB 1 -Scopy",
    "-streams wr 2 128 20 0 0.3 2 -n 8 -MB 1 -Sadd",
    "-cyclic 1000 -n 50 -i 1 -n 8 -MB 1 -Sscale",
    "-n 64 -KB 64 -r -n 64 -KB 64 -w -n 8 -MB 1 -bzero",
    "-n 256 -KB 4 -mfileMB 4 -percR 70 -rand -KB 4 -n 256 -mfileMB 4 -aio 8",
    "-n 32 -KB 64 -rmw -n 32 -KB 64 -rw -n 16 -KB 256 -spinWait",
    "-cfiles -dir tree -mfileKB 64 -KB 4 -n 200 -percR 90 -files 50",
]
LEFTOVER = ("torque-async-scratch.*",)


KEY = 0x50A4
TOKEN = f"torque-soak-{os.getpid()}"     # in the environment of every process a run starts


def leftovers(workdir: str) -> list[str]:
    found = glob.glob(f"/dev/shm/torque-async-{KEY:x}")
    for pattern in LEFTOVER:
        found += glob.glob(os.path.join(workdir, pattern))
    return found


def ours_alive() -> list[psutil.Process]:
    """Processes left from the runs: they carry this soak's token in their environment."""
    alive = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("TORQUE_SOAK") == TOKEN:
                alive.append(p)
        except (psutil.Error, OSError):
            pass
    return alive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--workdir", default=None, help="where the runs start (default: a temp dir)")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="torque-soak-")
    env = {**os.environ, "PYTHONPATH": ROOT, "TORQUE_SOAK": TOKEN}
    used, failures, began = [], 0, time.monotonic()
    for n, mix in zip(range(args.runs), itertools.cycle(MIXES)):
        cmd = [sys.executable, "-m", "torque_async", "-smkey", hex(KEY), "-noProgress",
               *mix.split()]
        run = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                             timeout=300)
        children = ours_alive()
        left = leftovers(workdir)
        used.append(psutil.virtual_memory().used)
        bad = run.returncode != 0 or children or left
        failures += bool(bad)
        print(f"{n:4d} rc={run.returncode} {time.monotonic() - began:7.1f}s {mix}"
              + (f"\n     LEFT: {left} {children} {run.stderr.strip()[-300:]}" if bad else ""),
              flush=True)
    if len(used) >= 40:
        growth = statistics.median(used[-20:]) - statistics.median(used[:20])
        print(f"used memory: first 20 runs {statistics.median(used[:20]) / 2**20:.0f} MiB, "
              f"last 20 {statistics.median(used[-20:]) / 2**20:.0f} MiB, "
              f"growth {growth / 2**20:+.0f} MiB")
        failures += growth > 256 * 2**20
    print(f"{args.runs} runs, {failures} with a failure or a leftover")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
