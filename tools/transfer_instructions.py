#!/usr/bin/env python3
"""User-space instructions per transfer of torque-async's file path, counted by valgrind's
callgrind: a figure a noisy VM does not move (two runs of the same code differ by about 1%,
where wall-clock rates of the same run differ by 30%), for telling whether a change to the
per-transfer path made it cheaper.

    python3 tools/transfer_instructions.py FILE [--procs 16] [--direct] [--counts 5000 15000]
                                                [--repo PATH]

It runs `-p PROCS -KB 4 -rand` over FILE (only read; -fbc, the file read into the page cache
first, unless --direct) under callgrind twice, at the two -n counts, and divides the
difference of the main process's instruction totals by the difference of the transfers: the
set-up, the same in both, cancels. The engine's turn to the loop every YIELD_NS is switched
off (a run under callgrind is 50 times slower, so it took 50 times as many turns, and the
totals then varied by 10%). --repo: count another checkout (a worktree of an older commit)
with the same tool. Needs valgrind (apt-get install valgrind); the kernel's share of a
transfer is not counted (see bench_io's CPU per transfer for that).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_io import warm      # tools/ is the script's path

REPO = Path(__file__).resolve().parents[1]
RUNNER = ("import runpy, sys; from torque_async.io import uring; uring.YIELD_NS = 1 << 62; "
          "sys.argv[0] = 'torque-async'; runpy.run_module('torque_async', run_name='__main__')")


def instructions(repo: Path, path: str, procs: int, direct: bool, count: int, key: int) -> int:
    """The instruction total of torque-async's main process (the loop) for one run."""
    with tempfile.TemporaryDirectory() as tmp:
        files = [x for _ in range(procs) for x in ("-f", path)]
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p",
               "--trace-children=yes", sys.executable, "-c", RUNNER, "-smkey", hex(key), "-nh",
               *files, "-p", str(procs), "-n", str(count), "-i", "1", "-mfileMB",
               str(max(1, os.stat(path).st_size >> 20)), *([] if direct else ["-fbc"]),
               "-KB", "4", "-rand"]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=repo,  # (-c: the current
                           env={**os.environ, "PYTHONPATH": str(repo)})  # directory comes first)
        if r.returncode:
            sys.exit("transfer_instructions: the run failed:\n"
                     f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
        for out in Path(tmp).glob("cg.*"):
            text = out.read_text(errors="replace")
            if "cmd:" in text and "-smkey" in text.split("cmd:", 1)[1].split("\n", 1)[0]:
                return int(text.split("\ntotals: ", 1)[1].split()[0])
    sys.exit("transfer_instructions: no callgrind output for torque-async's main process")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--direct", action="store_true", help="O_DIRECT (no -fbc)")
    ap.add_argument("--counts", type=int, nargs=2, default=(5000, 15000), metavar=("LOW", "HIGH"))
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to count")
    ap.add_argument("--key", type=lambda v: int(v, 0), default=0x7C00)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("transfer_instructions: valgrind is not installed (apt-get install valgrind)")
    if not os.path.isfile(args.file):
        sys.exit(f"transfer_instructions: {args.file} is not a regular file")
    args.file = os.path.abspath(args.file)
    low, high = args.counts
    if not 0 < low < high:
        sys.exit("transfer_instructions: --counts LOW HIGH with 0 < LOW < HIGH")
    totals = []
    for count in (low, high):
        if not args.direct:
            warm(Path(args.file))
        totals.append(instructions(args.repo, args.file, args.procs, args.direct, count,
                                   args.key))
    per = (totals[1] - totals[0]) / ((high - low) * args.procs)
    print(f"# {' '.join(sys.argv)}\n# {args.repo}: -p {args.procs} -KB 4 -rand"
          f"{'' if args.direct else ' -fbc'}, -n {low} and {high}: totals {totals[0]} and "
          f"{totals[1]}\n{per:.0f} instructions per transfer (user space, the loop's process)")


if __name__ == "__main__":
    main()
