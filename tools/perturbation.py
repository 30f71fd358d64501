#!/usr/bin/env python3
"""Does the progress line change what a test measures? Runs the same test with and without,
interleaved (ABBA order, so drift cancels), and prints the median bandwidth of each, the noise
(spread of the runs without) and the median ratio with/without.

    python3 tools/perturbation.py progress [--runs 12] [-- TORQUE ARGS]

stderr is a pseudo-terminal in both runs, with -noProgress in the runs without.  The bandwidth
is the run's total (the BW: line), read from -json.  What -sample costs: tools/sample_cost.py.
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
DEFAULT_ARGS = ["-n", "256", "-i", "10", "-MB", "4", "-bzero"]


def run(args: list[str]) -> float:
    """One run's total bandwidth (MB/s), its stderr on a pseudo-terminal."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "run.json")
        key = f"{0xB000 + os.getpid() % 0x1000:#x}"
        cmd = [sys.executable, "-m", "torque_async", "-smkey", key, "-json", str(out), *args]
        master, slave = pty.openpty()
        drain = threading.Thread(target=read_all, args=(master,))
        drain.start()
        proc = subprocess.run(cmd, env=ENV, cwd=tmp, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        drain.join()
        if proc.returncode:
            sys.exit(f"torque-async failed ({proc.returncode}): {' '.join(cmd)}")
        return json.loads(out.read_text())["bandwidth"]["total"]


def read_all(fd: int) -> None:
    """Keep the terminal's buffer empty until every process holding it has exited."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def spread(values: list[float]) -> float:
    """Half the interquartile range relative to the median, in percent."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return 50 * (q3 - q1) / statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("progress",))
    ap.add_argument("--runs", type=int, default=12, help="pairs of runs (default 12)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    opts = ap.parse_args(argv[:cut])
    args = argv[cut + 1:] or DEFAULT_ARGS
    plain = ["-noProgress", *args]
    without, with_, ratios = [], [], []
    for k in range(opts.runs):
        first_plain = k % 4 in (0, 3)                 # ABBA: A B B A A B B A ...
        pair = {}
        for is_plain in (first_plain, not first_plain):
            pair[is_plain] = run(plain if is_plain else args)
        without.append(pair[True])
        with_.append(pair[False])
        ratios.append(pair[False] / pair[True])
        print(f"pair {k + 1}: without {pair[True]:.0f} MB/s, with {pair[False]:.0f} MB/s",
              file=sys.stderr)
    print(f"torque-async {' '.join(args)}: {opts.what}, {opts.runs} interleaved pairs")
    print(f"without: median {statistics.median(without):.0f} MB/s, spread +-{spread(without):.1f}%")
    print(f"with:    median {statistics.median(with_):.0f} MB/s, spread +-{spread(with_):.1f}%")
    print(f"with/without: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
