#!/usr/bin/env python3
"""-web against fio on the same tree, the same work: requests/s and CPU per request.

    python3 tools/bench_web.py [--dir DIR] [--files 1000] [--clients 8,100] [--zipf 1.1]
                               [--seconds 1] [--rounds 3] [--floor]

The tree is made once by torque-async (-cfiles) with fixed-size files (16 KB), warm in the page
cache: fio cannot read files of different sizes whole in one request, but with bs = the file
size each of its reads is one whole file, so every request of every side is an open, one 16 KB
read and a close. For each number of clients N, a round runs in turn:

    fio 1 job      one thread over the tree's files (opendir=DIR/files), psync,
                   file_service_type=zipf:theta, openfiles=N: it opens a file, reads it, closes it
                   and picks the next, N files open at once
    fio N threads  numjobs=N threads, each as above with openfiles=1 (N requests at once)
    -web           torque-async -web with N clients, auto engine (io_uring chains where the
                   kernel has them), the same theta and transfer size, about as many requests
                   as fio's one job made; no log appends (-appendEvery past the requests)
    -web sync      the same with -engine sync (blocking calls on the loop's thread)
    ring floor     (--floor) tools/web_floor.py: N chains through the same ring with nothing
                   else, uniform picks: the least a Python loop pays a request there

so each ratio compares neighbours in time on this noisy machine; the table gives medians and
the ratio's spread (min-max) against the faster fio. CPU per request: fio's usr+sys over its
reads (every job's); torque-async's as its report says it (the process's CPU from the group's
first request to its last client's end, over the requests made).
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
from bench_io import REPO, ensure_fio, fio_cpu, runtime, spread  # noqa: E402

SIZE_KB = 16


def torque(root: Path, args, clients: int, n: int, key: int,
           extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "torque_async", "-smkey", hex(key), "-nh", "-fast",
            "-dir", str(root), "-webFiles", str(args.files), "-webSizes", "fixed",
            "-webMeanKB", str(SIZE_KB), "-KB", str(SIZE_KB), "-p", str(clients),
            "-zipf", str(args.zipf), "-appendEvery", str(1 << 30),
            "-n", str(n), "-i", "1", *extra, "-web"]


def run_torque(root: Path, args, clients: int, n: int, key: int, engine: str) -> dict:
    """Requests/s, p99 per request, CPU per request (s) from the group's summary."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "run.json")
        r = subprocess.run([*torque(root, args, clients, n, key, ("-engine", engine)),
                            "-json", str(out)], capture_output=True, text=True, env=env)
        if r.returncode:
            sys.exit(f"bench_web: torque-async failed:\n{r.stdout}{r.stderr}")
        s = json.loads(out.read_text())["plan"]["groups"][0]["web"]
    return {"rps": s["requests_per_s"], "p99": s["request"]["p99"],
            "cpu": s["cpu_ns_per_request"] / 1e9, "flight": s["mean_in_flight"]}


def run_fio(fio: str, root: Path, args, clients: int, threads: bool) -> dict:
    jobs = ["--numjobs", str(clients), "--thread", "--group_reporting", "--openfiles=1"] \
        if threads else [f"--openfiles={clients}"]
    out = subprocess.run([fio, "--name=web", f"--opendir={root / 'files'}", "--rw=read",
                          f"--bs={SIZE_KB}k", "--ioengine=psync", "--invalidate=0",
                          f"--file_service_type=zipf:{args.zipf}", *jobs, "--time_based",
                          runtime(args.seconds), "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    ios = max(job["read"]["total_ios"], 1)
    return {"rps": job["read"]["iops"], "ios": ios, "p99": job["read"]["clat_ns"]["percentile"]
            ["99.000000"], "cpu": fio_cpu(job) / ios}


def run_floor(root: Path, args, clients: int) -> dict:
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("web_floor.py")),
                          str(root), str(clients), "--seconds", str(args.seconds)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", help="where the tree goes (the disk under test)")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--clients", default="8,100", help="numbers of clients, comma-separated")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--floor", action="store_true", help="add tools/web_floor.py's side")
    args = ap.parse_args()
    fio = ensure_fio()
    counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_web.") as tmp:
        root = Path(tmp, "site")
        subprocess.run(torque(root, args, 1, 1, 0x7C00, ("-cfiles",)), check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        version = subprocess.run([fio, "--version"], text=True, capture_output=True).stdout
        print(f"# {' '.join(sys.argv)}\n# tree {root}: {args.files} files of {SIZE_KB} KB "
              f"(warm), zipf {args.zipf:g}, {args.rounds} interleaved rounds of "
              f"{args.seconds:g} s, {version.strip()}")
        print("| clients | side | requests/s | p99 (us) | CPU per request (us) | "
              "ratio to the faster fio |")
        print("|---|---|---|---|---|---|")
        for clients in counts:
            sides: dict[str, list[dict]] = {"fio 1 job": [], f"fio {clients} threads": [],
                                            "-web": [], "-web -engine sync": []}
            for r in range(args.rounds):
                one = run_fio(fio, root, args, clients, False)
                sides["fio 1 job"].append(one)
                sides[f"fio {clients} threads"].append(run_fio(fio, root, args, clients, True))
                n = max(one["ios"] // clients, 16)         # about as long as fio ran
                sides["-web"].append(run_torque(root, args, clients, n, 0x7C01 + r, "auto"))
                sides["-web -engine sync"].append(run_torque(root, args, clients, n,
                                                             0x7C11 + r, "sync"))
                if args.floor:
                    sides.setdefault("ring floor", []).append(run_floor(root, args, clients))
            fios = list(sides)[:2]
            faster = [max(sides[f][r]["rps"] for f in fios) for r in range(args.rounds)]
            for side, runs in sides.items():
                med = lambda k: statistics.median(x[k] for x in runs)   # noqa: E731
                ratio = spread([x["rps"] / f for x, f in zip(runs, faster)])
                p99 = "-" if side == "ring floor" else f"{med('p99') / 1e3:.1f}"
                print(f"| {clients} | {side} | {med('rps'):.0f} | {p99} | "
                      f"{med('cpu') * 1e6:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
