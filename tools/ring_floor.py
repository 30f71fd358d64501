#!/usr/bin/env python3
"""The floor of any Python loop on torque-async's ring: 4 KiB random O_DIRECT reads at a depth
(--buffered: through the page cache, the file read into it first), through
torque_async/io/ring.py with nothing else (no event loop, no test, no records), against fio's
io_uring engine on the same file, alternating, each run in a fresh process.

    python3 tools/ring_floor.py FILE [--depth 16] [--seconds 2] [--rounds 5] [--buffered]
                                     [--group N] [--sync] [--torque]

The loop waits in io_uring_enter for one completion (as fio does), reads the CQEs, writes each
slot's next random offset into its own SQE and submits them together (--group N: every N
prepared). --sync: depth 1 without a ring, one blocking os.preadv a read (against fio's psync
engine), what torque-async's `auto` gives a lone depth-1 test. --torque adds torque-async itself
as a third side (`-engine uring -p DEPTH`, or `-engine sync`, `-KB 4 -rand -t SECONDS` on FILE;
its tests' IO/s summed). Where torque-async stays below fio but near this floor, the language's
cost per I/O is the limit there, not torque-async's bookkeeping; where the floor itself reaches
fio, the rest is torque-async's. FILE is only read, never written.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_io import fio_cpu, runtime, spread, warm   # noqa: E402 - tools/ is the script's path
from torque_async.io import ring as rings      # noqa: E402 - after the repository's path

BLOCK = 4096
MAX_DEPTH = 4096                   # reads in flight: the engine's own ring size
REPO = Path(__file__).resolve().parents[1]
TORQUE_KEY = 0x7F10                # --torque's -smkey: its own, beside other runs


def floor(path: str, depth: int, seconds: float, buffered: bool,
          group: int) -> tuple[float, float]:
    """(reads per second, CPU seconds per read) of the minimal loop."""
    fd = os.open(path, os.O_RDONLY | (0 if buffered else os.O_DIRECT))
    blocks = os.fstat(fd).st_size // BLOCK
    ring = rings.Ring(max(8, 1 << (2 * depth - 1).bit_length()))
    area = mmap.mmap(-1, depth * BLOCK)
    addr, held = rings.address(memoryview(area))
    sqes = [ring.take() for _ in range(depth)]
    for j, i in enumerate(sqes):
        ring.write(i, rings.OP_READ, fd, addr + j * BLOCK, BLOCK, 0, j)
    draw, offsets, queue = random.Random().randrange, ring.offsets, ring.queue

    def issue(j: int) -> None:
        offsets[sqes[j]] = draw(blocks) * BLOCK
        queue(sqes[j])
    for j in range(depth):
        issue(j)
    ring.submit()
    done, cpu, start = 0, time.process_time(), time.monotonic()
    end = start + seconds
    group = group or depth
    while time.monotonic() < end:
        ring.enter(rings.ENTER, ring.fd, 0, 1, rings.ENTER_GETEVENTS, None, 0)
        k = 0
        for k, (j, res, _) in enumerate(ring.completions(), 1):
            if res != BLOCK:
                sys.exit(f"ring_floor: a read returned {res}")
            done += 1
            issue(j)
            if k % group == 0:
                ring.submit()
        if k % group:
            ring.submit()
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu
    ring.submit(wait=depth)            # the last reads land before their buffer goes
    ring.completions()
    del held
    ring.close()
    os.close(fd)
    return done / elapsed, cpu / max(done, 1)


def floor_sync(path: str, seconds: float, buffered: bool) -> tuple[float, float]:
    """(reads per second, CPU seconds per read) of the minimal blocking loop at depth 1."""
    fd = os.open(path, os.O_RDONLY | (0 if buffered else os.O_DIRECT))
    blocks = os.fstat(fd).st_size // BLOCK
    iov, draw, read = [mmap.mmap(-1, BLOCK)], random.Random().randrange, os.preadv
    done, cpu, start = 0, time.process_time(), time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        if read(fd, iov, draw(blocks) * BLOCK) != BLOCK:
            sys.exit("ring_floor: a read came back short")
        done += 1
    elapsed, cpu = time.monotonic() - start, time.process_time() - cpu
    os.close(fd)
    return done / elapsed, cpu / max(done, 1)


def fio(path: str, depth: int, seconds: float, buffered: bool,
        sync: bool) -> tuple[float, float]:
    engine = ["--ioengine=psync"] if sync else ["--ioengine=io_uring", f"--iodepth={depth}"]
    out = subprocess.run(["fio", "--name=floor", f"--filename={path}", "--rw=randread",
                          "--randrepeat=0", "--bs=4k", f"--direct={int(not buffered)}",
                          "--invalidate=0", *engine, "--time_based", runtime(seconds),
                          "--readonly", "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    ios = max(job["read"]["total_ios"], 1)
    return job["read"]["iops"], fio_cpu(job) / ios


def torque(args) -> tuple[float, float]:
    """torque-async's own run of the same reads: its tests' IO/s summed (CPU: not taken, see
    tools/bench_io.py for its cost per transfer)."""
    size_mb = os.stat(args.file).st_size // 2**20
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "run.json")
        files = [x for _ in range(args.depth) for x in ("-f", args.file)]
        subprocess.run([sys.executable, "-m", "torque_async", "-nh", "-smkey", hex(TORQUE_KEY),
                        "-json", results, "-engine", "sync" if args.sync else "uring", *files,
                        "-p", str(args.depth), "-t", str(args.seconds), "-mfileMB", str(size_mb),
                        *(["-fbc"] if args.buffered else []), "-KB", "4", "-rand"],
                       capture_output=True, check=True, cwd=tmp,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        tests = json.loads(Path(results).read_text())["tests"]
    return sum(t["table"]["iops"] for t in tests), float("nan")


def bad_input(args) -> str | None:
    """Why these arguments cannot make a fair run, or None."""
    try:
        st = os.stat(args.file)
    except OSError as e:
        return f"{args.file}: {e.strerror}"
    if not stat.S_ISREG(st.st_mode) or st.st_size < BLOCK:
        return f"{args.file}: not a regular file of at least {BLOCK} bytes"
    if not 1 <= args.depth <= MAX_DEPTH:
        return f"--depth {args.depth}: from 1 to {MAX_DEPTH}"
    if not args.seconds >= 0.1:
        return f"--seconds {args.seconds:g}: at least 0.1 (fio's time is in whole ms)"
    if args.rounds < 1:
        return f"--rounds {args.rounds}: at least 1"
    if args.group < 0:
        return f"--group {args.group}: 0 or more"
    if args.sync and (args.depth != 1 or args.group):
        return "--sync is one blocking read at a time: --depth 1, no --group"
    if args.torque and st.st_size < 2**20:
        return f"{args.file}: --torque needs at least 1 MiB (torque-async's -mfileMB)"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="a regular file on the disk under test (only read)")
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--buffered", action="store_true",
                    help="through the page cache, the file read into it before each run")
    ap.add_argument("--group", type=int, default=0,
                    help="submit every GROUP reads prepared (0: all of a batch at once, as "
                         "torque-async's engine does)")
    ap.add_argument("--sync", action="store_true",
                    help="depth 1, one blocking os.preadv a read (against fio's psync)")
    ap.add_argument("--torque", action="store_true",
                    help="torque-async's own run of the same reads as a third side")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(floor_sync(args.file, args.seconds, args.buffered) if args.sync else
                         floor(args.file, args.depth, args.seconds, args.buffered, args.group)))
        return
    if why := bad_input(args):
        print(f"ring_floor: {why}", file=sys.stderr)
        sys.exit(2)
    if shutil.which("fio") is None:
        sys.exit("ring_floor: fio is not installed (apt-get install fio)")
    order = ["fio", "floor", *(["torque-async"] if args.torque else [])]
    sides: dict[str, list[tuple[float, float]]] = {side: [] for side in order}
    for r in range(args.rounds):
        for side in order[r % len(order):] + order[:r % len(order)]:      # each first in turn
            if args.buffered:
                warm(args.file)
            if side == "fio":
                sides[side].append(fio(args.file, args.depth, args.seconds, args.buffered,
                                       args.sync))
            elif side == "torque-async":
                sides[side].append(torque(args))
            else:
                out = subprocess.run([sys.executable, __file__, "--child", args.file, "--depth",
                                      str(args.depth), "--seconds", str(args.seconds),
                                      "--group", str(args.group),
                                      *(["--buffered"] if args.buffered else []),
                                      *(["--sync"] if args.sync else [])],
                                     capture_output=True, text=True, check=True).stdout
                sides[side].append(tuple(json.loads(out)))
    print(f"# {' '.join(sys.argv)}")
    print("| side | reads/s median [min-max] | CPU per read |\n|---|---|---|")
    for side, runs in sides.items():
        rates, cpu = [x for x, _ in runs], statistics.median(c for _, c in runs)
        print(f"| {side} | {statistics.median(rates):.0f} [{min(rates):.0f}-{max(rates):.0f}] | "
              + ("-" if cpu != cpu else f"{cpu * 1e6:.1f} us") + " |")
    print()
    for a, b in (("floor", "fio"), ("torque-async", "fio"), ("torque-async", "floor")):
        if a in sides:
            ratios = [x[0] / y[0] for x, y in zip(sides[a], sides[b])]
            print(f"{a} / {b}, per round: {spread(ratios)}")


if __name__ == "__main__":
    main()
