#!/usr/bin/env python3
"""-web against fio on the same tree: requests/s, p99 per request, CPU per request.

    python3 tools/bench_web.py [--dir DIR] [--files 1000] [--clients 8] [--zipf 1.1]
                               [--seconds 2] [--rounds 5]

The tree is made once by torque-async (-cfiles) with fixed-size files (16 KB): fio cannot read
files of different sizes whole in one request, but with bs = the file size each of its reads is
one whole file. fio: one job (one thread, as -web's clients share the loop's thread) over the
tree's files (opendir=DIR/files), rw=read, file_service_type=zipf:theta, openfiles=clients:
it opens a file, reads it, closes it and picks the next. torque-async: -web with as many clients,
-webOpen clients, the same theta and transfer size, and about as many requests as fio made in
the same round; the log appends are off (-appendEvery past the requests), as fio has none.
Each round runs fio then torque-async, so each ratio compares neighbours in time on this noisy
machine; the table gives medians and the ratio's spread (min-max).

Per request: fio's p99 is of its read completion latency (clat: it does not time the open and
close); torque-async's of the whole request (open to close) and of its read alone. CPU per
request: fio's usr+sys over its reads; torque-async's marginal cost, the CPU time of the run
less that of the same command with one request per client, over the requests made.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import REPO, children_cpu, ensure_fio, fio_cpu, runtime, spread  # noqa: E402

SIZE_KB = 16
TARGET = 0.8                       # requests/s at least this share of fio's


def torque(root: Path, args, n: int, key: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "torque_async", "-smkey", hex(key), "-nh", "-fast",
            "-dir", str(root), "-webFiles", str(args.files), "-webSizes", "fixed",
            "-webMeanKB", str(SIZE_KB), "-KB", str(SIZE_KB), "-p", str(args.clients),
            "-webOpen", str(args.clients), "-zipf", str(args.zipf), "-appendEvery", str(1 << 30),
            "-n", str(n), "-i", "1", *extra, "-web"]


def run_torque(root: Path, args, n: int, key: int) -> dict:
    """The group summary, and the marginal CPU seconds per request."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def once(count: int) -> tuple[dict, float]:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "run.json")
            before = children_cpu()
            r = subprocess.run([*torque(root, args, count, key), "-json", str(out)],
                               capture_output=True, text=True, env=env)
            if r.returncode:
                sys.exit(f"bench_web: torque-async failed:\n{r.stdout}{r.stderr}")
            doc = json.loads(out.read_text())
            made = sum(t["record"]["transfers"] + t["record"]["extra_transfers"]
                       for t in doc["tests"])
            return doc["plan"]["groups"][0]["web"], children_cpu() - before, made
    summary, cpu, made = once(n)
    _, base, _ = once(1)
    return {"rps": summary["requests_per_s"], "p99": summary["request"]["p99"],
            "read_p99": summary["ops"]["read"]["p99"],
            "cpu": (cpu - base) / max(made - args.clients, 1)}


def run_fio(fio: str, root: Path, args) -> dict:
    out = subprocess.run([fio, "--name=web", f"--opendir={root / 'files'}", "--rw=read",
                          f"--bs={SIZE_KB}k", "--ioengine=psync", "--invalidate=0",
                          f"--file_service_type=zipf:{args.zipf}",
                          f"--openfiles={args.clients}", "--time_based",
                          runtime(args.seconds), "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    ios = max(job["read"]["total_ios"], 1)
    return {"rps": job["read"]["iops"], "ios": ios,
            "p99": job["read"]["clat_ns"]["percentile"]["99.000000"],
            "cpu": fio_cpu(job) / ios}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", help="where the tree goes (the disk under test)")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    fio = ensure_fio()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_web.") as tmp:
        root = Path(tmp, "site")
        subprocess.run(torque(root, args, 1, 0x7C00, ("-cfiles",)), check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        version = subprocess.run([fio, "--version"], text=True, capture_output=True).stdout
        print(f"# {' '.join(sys.argv)}\n# tree {root}: {args.files} files of {SIZE_KB} KB, "
              f"{args.clients} clients, zipf {args.zipf:g}, {args.rounds} rounds of "
              f"{args.seconds:g} s, {version.strip()}")
        f_runs, t_runs = [], []
        for r in range(args.rounds):
            f_runs.append(run_fio(fio, root, args))
            n = max(f_runs[-1]["ios"] // args.clients, 16)     # about as long as fio ran
            t_runs.append(run_torque(root, args, n, 0x7C01 + r))
        med = lambda runs, k: statistics.median(x[k] for x in runs)   # noqa: E731
        ratios = [t["rps"] / f["rps"] for f, t in zip(f_runs, t_runs)]
        print("| | requests/s | p99 per request | p99 per read | CPU per request |")
        print("|---|---|---|---|---|")
        print(f"| fio | {med(f_runs, 'rps'):.0f} | (not timed) | {med(f_runs, 'p99') / 1e3:.1f} us "
              f"| {med(f_runs, 'cpu') * 1e6:.1f} us |")
        print(f"| torque-async -web | {med(t_runs, 'rps'):.0f} | {med(t_runs, 'p99') / 1e3:.1f} us "
              f"| {med(t_runs, 'read_p99') / 1e3:.1f} us | {med(t_runs, 'cpu') * 1e6:.1f} us |")
        print(f"\nrequests/s ratio torque-async / fio: median [min-max] {spread(ratios)} "
              f"(target >= {TARGET})")


if __name__ == "__main__":
    main()
