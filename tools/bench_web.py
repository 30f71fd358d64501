#!/usr/bin/env python3
"""-web against fio on the same tree, the same work: requests/s and CPU per request.

    python3 tools/bench_web.py [--dir DIR] [--files 1000] [--clients 8,100] [--zipf 1.1]
                               [--seconds 1] [--rounds 3] [--floor]
    python3 tools/bench_web.py --cold [--dir DIR] [--files 100000] [--clients 64]
                               [--seconds 2] [--rounds 3]          (as root)

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
    -web threads   the same with -engine threads (each client a thread of its own)
    ring floor     (--floor) tools/web_floor.py: N chains through the same ring with nothing
                   else, uniform picks: the least a Python loop pays a request there

so each ratio compares neighbours in time on this noisy machine; the table gives medians and
the ratio's spread (min-max) against the faster fio. CPU per request: fio's usr+sys over its
reads (every job's); torque-async's as its report says it (the process's CPU from the group's
first request to its last client's end, over the requests made).

--cold: the page cache, dentries and inodes are dropped (sync; echo 3 > /proc/sys/vm/drop_caches:
root only) before each side's run, picks are uniform over a tree large enough that few files are
read twice (100000 files of 16 KB: 1.6 GB), and each round runs in turn:

    fio N jobs     numjobs=N (threads), each over its own share of the tree's files (every N-th
                   of them, shuffled once), file_service_type=sequential, openfiles=1, psync: an
                   open, one whole-file read and a close per file, no file read twice; fio's
                   opendir with N jobs would give each job every file (N x 100000 of fio's file
                   records: its shared memory pool runs out and it aborts), and its random file
                   picks over 100000 files cost it milliseconds each
    -web           N clients, io_uring chains (auto), uniform picks
    -web threads   the same with -engine threads
    -web sync      the same with -engine sync

Each side's device queue: torque-async's as its report gives it (the tree's device's weighted
I/O time over its requests' span); fio's from /proc/diskstats sampled every 20 ms around its run,
over the span its jobs ran (the end of its run, less its runtime). Both sides' set-up stats
every file (torque-async's checks of the tree, fio's file sizes), so their dentries and inodes
are cached again when the requests start: the opens find their names; the data is cold.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_io import REPO, ensure_fio, fio_cpu, runtime, spread  # noqa: E402

sys.path.insert(0, str(REPO))
from torque_async.web import disk  # noqa: E402

SIZE_KB = 16
DROP = "/proc/sys/vm/drop_caches"
SAMPLE_S = 0.02                    # --cold: how often fio's side reads /proc/diskstats


def torque(root: Path, args, clients: int, n: int, key: int,
           extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "torque_async", "-smkey", hex(key), "-nh", "-fast",
            "-dir", str(root), "-webFiles", str(args.files), "-webSizes", "fixed",
            "-webMeanKB", str(SIZE_KB), "-KB", str(SIZE_KB), "-p", str(clients),
            *(("-zipf", str(args.zipf)) if args.zipf else ()), "-appendEvery", str(1 << 30),
            *(("-t", str(args.seconds)) if args.cold else ("-n", str(n), "-i", "1")), *extra,
            "-web"]


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
            "cpu": s["cpu_ns_per_request"] / 1e9, "flight": s["mean_in_flight"],
            "queue": s["device_queue"]}


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


def drop_caches(sample: list[Path]) -> int:
    """Write back, then drop the page cache, dentries and inodes (every file's, root only);
    returns how many pages of the `sample` files are still in the page cache (mincore)."""
    os.sync()
    with open(DROP, "w") as fh:
        fh.write("3")
    return cached_pages(sample)


def cached_pages(paths: list[Path]) -> int:
    """The pages of the files that are in the page cache: mincore() over each file mapped
    (privately: mapping reads nothing, and the pages are never written)."""
    libc = ctypes.CDLL(None, use_errno=True)
    cached = 0
    for path in paths:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if not size:
                continue
            area = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY)
            pages = -(-size // mmap.PAGESIZE)
            vec = (ctypes.c_ubyte * pages)()
            held = ctypes.c_char.from_buffer(area)
            if libc.mincore(ctypes.c_void_p(ctypes.addressof(held)), ctypes.c_size_t(size),
                            vec):
                sys.exit(f"bench_web: mincore: {os.strerror(ctypes.get_errno())}")
            cached += sum(v & 1 for v in vec)
            del held
            area.close()
    return cached


class Sampler:
    """(time, weighted ms doing I/O) of a device every SAMPLE_S while running, to tell its
    mean queue over any span inside."""

    def __init__(self, device: tuple[int, int]):
        self.device, self.samples, self.stop = device, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.time(), disk.weighted_ms(self.device)))
            time.sleep(SAMPLE_S)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def queue(self, start: float, end: float) -> float:
        """The mean queue from the last sample at or before start to the first at or after
        end."""
        t0, w0 = max((x for x in self.samples if x[0] <= start), default=self.samples[0])
        t1, w1 = min((x for x in self.samples if x[0] >= end), default=self.samples[-1])
        return (w1 - w0) / 1000 / (t1 - t0) if t1 > t0 else 0.0


def cold_job(root: Path, args, jobs: int, out: Path) -> Path:
    """A fio job file: `jobs` jobs, each over every jobs-th file of the tree (shuffled once),
    each file read once, whole (fio takes a value of at most 4096 characters: a job's names go
    in several filename= lines, which add up)."""
    files = root / "files"
    names = sorted(str(Path(d, f).relative_to(files)) for d, _, fs in os.walk(files) for f in fs)
    random.Random(1).shuffle(names)
    lines = ["[global]", f"directory={files}", "rw=read", f"bs={SIZE_KB}k", "ioengine=psync",
             "invalidate=0", "file_service_type=sequential", "openfiles=1", "thread",
             "group_reporting", "time_based", runtime(args.seconds)[2:]]
    for j in range(jobs):
        mine = names[j::jobs]
        lines.append(f"[web{j}]")
        lines += [f"filename={':'.join(mine[k:k + 100])}" for k in range(0, len(mine), 100)]
    out.write_text("\n".join(lines) + "\n")
    return out


def run_fio_cold(fio: str, job: Path, device: tuple[int, int], jobs: int) -> dict:
    with Sampler(device) as sampler:
        out = subprocess.run([fio, str(job), "--output-format=json"], capture_output=True,
                             text=True, check=True).stdout
    whole = json.loads(out[out.index("{"):])
    run = whole["jobs"][0]
    end = whole["timestamp_ms"] / 1000
    ios = max(run["read"]["total_ios"], 1)
    return {"rps": run["read"]["iops"], "ios": ios, "p99": run["read"]["clat_ns"]["percentile"]
            ["99.000000"], "cpu": fio_cpu(run) / ios,
            "queue": sampler.queue(end - run["job_runtime"] / jobs / 1000, end)}


def cold(fio: str, root: Path, args, version: str) -> None:
    """The cold tree's rounds: each side after the caches are dropped."""
    place = disk.device_of(os.open(root, os.O_RDONLY))
    if place.device is None:
        sys.exit(f"bench_web: --cold needs the tree on one block device: {place.name}")
    clients = int(args.clients)
    job = cold_job(root, args, clients, root.parent / "cold.fio")
    files = sorted(Path(d, f) for d, _, fs in os.walk(root / "files") for f in fs)
    sample = random.Random(2).sample(files, min(1000, len(files)))
    left = []                          # the sample's pages cached after each drop
    print(f"# {' '.join(sys.argv)}\n# tree {root} on {place.name}: {args.files} files of "
          f"{SIZE_KB} KB, uniform picks, caches dropped before each side, {args.rounds} "
          f"interleaved rounds of {args.seconds:g} s, {version.strip()}; load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    sides: dict[str, list[dict]] = {f"fio {clients} jobs": [], "-web (io_uring)": [],
                                    "-web -engine threads": [], "-web -engine sync": []}
    for r in range(args.rounds):
        left.append(drop_caches(sample))
        sides[f"fio {clients} jobs"].append(run_fio_cold(fio, job, place.device, clients))
        for k, (side, engine) in enumerate((("-web (io_uring)", "auto"),
                                            ("-web -engine threads", "threads"),
                                            ("-web -engine sync", "sync"))):
            left.append(drop_caches(sample))
            sides[side].append(run_torque(root, args, clients, 0, 0x7C21 + 16 * k + r, engine))
    print(f"# load average {os.getloadavg()[0]:.1f} at the end; after each drop, "
          f"{len(sample)} of the tree's files held at most {max(left)} of their "
          f"{len(sample) * -(-SIZE_KB * 1024 // mmap.PAGESIZE)} pages in the page cache "
          f"(mincore)")
    print("| clients | side | requests/s | device queue | p99 (us) | CPU per request (us) |")
    print("|---|---|---|---|---|---|")
    for side, runs in sides.items():
        print(f"| {clients} | {side} | {spread([x['rps'] for x in runs], 0)} | "
              f"{spread([x['queue'] or 0.0 for x in runs])} | "
              f"{statistics.median(x['p99'] for x in runs) / 1e3:.0f} | "
              f"{statistics.median(x['cpu'] for x in runs) * 1e6:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", help="where the tree goes (the disk under test)")
    ap.add_argument("--files", type=int, help="files in the tree (1000; --cold: 100000)")
    ap.add_argument("--clients", help="numbers of clients, comma-separated (8,100; --cold: "
                    "one number, 64)")
    ap.add_argument("--zipf", type=float, help="theta of the picks (1.1; --cold: uniform)")
    ap.add_argument("--seconds", type=float, help="each side's run (1; --cold: 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--floor", action="store_true", help="add tools/web_floor.py's side")
    ap.add_argument("--cold", action="store_true", help="drop the caches before each side "
                    "(root), 64 clients against fio with 64 jobs, each side's device queue")
    args = ap.parse_args()
    for name, warm, cold_value in (("files", 1000, 100000), ("clients", "8,100", "64"),
                                   ("zipf", 1.1, 0.0), ("seconds", 1.0, 2.0)):
        if getattr(args, name) is None:
            setattr(args, name, cold_value if args.cold else warm)
    if args.cold and not os.access(DROP, os.W_OK):
        sys.exit(f"bench_web: --cold drops the page cache ({DROP}), which needs root: run it "
                 f"as root, or leave --cold out")
    if args.cold and not args.clients.isdigit():
        sys.exit(f"bench_web: --cold takes one number of clients, not {args.clients}")
    fio = ensure_fio()
    counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_web.") as tmp:
        root = Path(tmp, "site")
        subprocess.run(torque(root, args, 1, 1, 0x7C00, ("-cfiles",)), check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        version = subprocess.run([fio, "--version"], text=True, capture_output=True).stdout
        if args.cold:
            cold(fio, root, args, version)
            return
        print(f"# {' '.join(sys.argv)}\n# tree {root}: {args.files} files of {SIZE_KB} KB "
              f"(warm), zipf {args.zipf:g}, {args.rounds} interleaved rounds of "
              f"{args.seconds:g} s, {version.strip()}; load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        print("| clients | side | requests/s | p99 (us) | CPU per request (us) | "
              "ratio to the faster fio |")
        print("|---|---|---|---|---|---|")
        for clients in counts:
            sides: dict[str, list[dict]] = {"fio 1 job": [], f"fio {clients} threads": [],
                                            "-web": [], "-web -engine sync": [],
                                            "-web -engine threads": []}
            for r in range(args.rounds):
                one = run_fio(fio, root, args, clients, False)
                sides["fio 1 job"].append(one)
                sides[f"fio {clients} threads"].append(run_fio(fio, root, args, clients, True))
                n = max(one["ios"] // clients, 16)         # about as long as fio ran
                sides["-web"].append(run_torque(root, args, clients, n, 0x7C01 + r, "auto"))
                sides["-web -engine sync"].append(run_torque(root, args, clients, n,
                                                             0x7C11 + r, "sync"))
                sides["-web -engine threads"].append(run_torque(root, args, clients, n,
                                                                0x7C31 + r, "threads"))
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
        print(f"# load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
