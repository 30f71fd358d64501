#!/usr/bin/env python3
"""Two MPI ranks on this machine against one: the same torque-async command, alone and under
`mpiexec -n 2`, one after the other in each round, so each ratio compares neighbours in time.

    python3 tools/bench_ranks.py [--rounds 3] [--ranks 2] [-- TORQUE-ASYNC ARGS]

Default command: buffered 4 KiB reads at queue depth 16 on -aio's sequential places, 20000 of
them (78 MiB) in a scratch file per rank (-fbc -KB 4 -n 20000 -mfileMB 256 -aio 16). The figure is the run's total bandwidth (the
BW: line, every rank's tests summed, from -json) and its transfers per second; the table gives
the median over the rounds and the spread (min-max) of each and of the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ["-fbc", "-KB", "4", "-n", "20000", "-mfileMB", "256", "-aio", "16"]


def one(ranks: int, args: list[str], where: str) -> tuple[float, float]:
    """(total MB/s, total transfers/s) of one run on `ranks` ranks (1: no mpiexec)."""
    out = os.path.join(where, f"r{ranks}.json")
    cmd = [sys.executable, "-m", "torque_async", "-smkey", hex(0xBE00 + 16 * ranks), "-nh",
           "-noProgress", "-json", out, *args]
    if ranks > 1:
        cmd = [str(Path(sysconfig.get_path("scripts")) / "mpiexec"), "-n", str(ranks), *cmd]
    subprocess.run(cmd, check=True, cwd=where, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    with open(out, encoding="utf-8") as fh:
        doc = json.load(fh)
    return doc["bandwidth"]["total"], sum(t["table"]["iops"] for t in doc["tests"])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("args", nargs="*", help="torque-async's arguments (after --)")
    opts = ap.parse_args()
    args = opts.args or DEFAULT
    alone, many = [], []
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as where:
        for _ in range(opts.rounds):
            alone.append(one(1, args, where))
            many.append(one(opts.ranks, args, where))
    print(f"torque-async {' '.join(args)}: 1 rank against {opts.ranks} (mpiexec), "
          f"{opts.rounds} rounds, median (min-max)")
    for i, name in enumerate(("MB/s", "transfers/s")):
        a, m = [r[i] for r in alone], [r[i] for r in many]
        print(f"{name}: 1 rank {spread(a)}, {opts.ranks} ranks {spread(m)}, "
              f"ratio {spread([y / x for x, y in zip(a, m)])}")


if __name__ == "__main__":
    main()
