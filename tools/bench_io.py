#!/usr/bin/env python3
"""torque-async's file tests against fio, side by side on the same file, in one invocation.

    python3 tools/bench_io.py [--dir DIR] [--size-mb 1024] [--seconds 3] [--rounds 5]
                              [--engines auto,uring,threads] [--only NAME] [--key 0x7B00]

For each workload and round, fio and torque-async (each engine) run one after the other on the
same file, so each ratio compares neighbours in time on this noisy machine; the table gives the
median ratio over the rounds and its spread (min-max). Bandwidth is MiB/s of transfer bytes:
fio's bw_bytes, torque-async's tests' bandwidths summed, from its -json results (under -slow,
each process over its own interval, all of them overlapping). CPU per transfer: fio's usr+sys over its I/Os; torque-async's marginal
cost, the CPU time of the run less that of the same command with one transfer per process,
over every transfer it made (measured and the unmeasured ones -slow adds). Random workloads draw
new places every run on both sides (fio --randrepeat=0; torque-async without -seed), so neither
finds the previous run's blocks in a cache below the file system (a VM's host cache).

fio is installed with apt-get when missing (as root).

What it chose in the io_uring engine (torque_async/io/uring.py): the transfers that one batch of
completions prepared are submitted together (one io_uring_enter: cached reads complete inside
it), O_DIRECT ones too (half the loop's CPU per transfer at the same or a
better rate than one io_uring_enter each); a transfer alone in its batch goes at once.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MB = 1 << 20


@dataclass(frozen=True)
class Workload:
    name: str
    target: float
    fio: tuple[str, ...]          # fio options beyond file, runtime
    torque: tuple[str, ...]       # torque-async's local options and action
    sequential: bool = False      # passes over the file (-n: the file's size, -i: passes)
    procs: int = 1                # torque-async test processes (each one transfer outstanding)
    warm: bool = False            # read the file into the page cache first


WORKLOADS = [
    Workload("seq read 1 MiB O_DIRECT QD1", 0.95,
             ("--rw=read", "--bs=1M", "--direct=1", "--ioengine=psync"), ("-MB", "1", "-r"),
             sequential=True),
    Workload("seq write 1 MiB O_DIRECT QD1", 0.95,
             ("--rw=write", "--bs=1M", "--direct=1", "--ioengine=psync"), ("-MB", "1", "-w"),
             sequential=True),
    Workload("4 KiB random read O_DIRECT QD1", 0.9,
             ("--rw=randread", "--randrepeat=0", "--bs=4k", "--direct=1", "--ioengine=psync"),
             ("-KB", "4", "-rand")),
    Workload("4 KiB random read O_DIRECT QD16", 0.9,
             ("--rw=randread", "--randrepeat=0", "--bs=4k", "--direct=1", "--ioengine=io_uring",
              "--iodepth=16"),
             ("-KB", "4", "-rand"), procs=16),
    Workload("4 KiB random read buffered, warm, QD16", 0.75,
             ("--rw=randread", "--randrepeat=0", "--bs=4k", "--direct=0", "--invalidate=0",
              "--ioengine=io_uring", "--iodepth=16"), ("-fbc", "-KB", "4", "-rand"), procs=16, warm=True),
]


def ensure_fio() -> str:
    fio = shutil.which("fio")
    if fio is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "fio"], check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ,
                                                       "DEBIAN_FRONTEND": "noninteractive"})
        fio = shutil.which("fio")
    if fio is None:
        sys.exit("bench_io: fio is not installed (apt-get install fio)")
    return fio


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def fio_cpu(job: dict) -> float:
    """The CPU seconds a fio job used while it ran: usr_cpu and sys_cpu are percentages of its
    job_runtime (ms); its 'elapsed' is the whole job's wall time rounded up to whole seconds (3
    for a 2-second run), which made fio's CPU per transfer 1.5 times too high here."""
    return (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000


def runtime(seconds: float) -> str:
    """fio's --runtime for `seconds` (in ms: fio reads a bare 0.5 as 0, and then runs untimed)."""
    return f"--runtime={round(seconds * 1000)}ms"


def run_fio(fio: str, w: Workload, path: Path, seconds: float) -> tuple[float, float, int]:
    """(MiB/s, CPU seconds per transfer, transfers)."""
    out = subprocess.run([fio, "--name=bench", f"--filename={path}", *w.fio, "--time_based",
                          runtime(seconds), "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["write" if "write" in w.fio[0] else "read"]
    return side["bw_bytes"] / MB, fio_cpu(job) / max(side["total_ios"], 1), side["total_ios"]


def torque_cmd(w: Workload, path: Path, engine: str, n: int, i: int, key: int) -> list[str]:
    """Every process on the same file; -mfile the whole file (random places span it)."""
    files = [x for _ in range(w.procs) for x in ("-f", str(path))]
    return [sys.executable, "-m", "torque_async", "-smkey", hex(key), "-engine", engine, "-nh",
            *files, "-p", str(w.procs), "-n", str(n), "-i", str(i),
            "-mfileMB", str(path.stat().st_size // MB), *w.torque]


def run_torque(w: Workload, path: Path, engine: str, n: int, i: int,
               key: int) -> tuple[float, float]:
    """(MiB/s, marginal CPU seconds per transfer), from the run's -json results: the tests'
    transfer bandwidths summed, and every transfer made (-slow's unmeasured ones too)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def once(count: int, iterations: int) -> tuple[list[dict], float]:
        with tempfile.TemporaryDirectory() as tmp:
            results = Path(tmp, "run.json")
            before = children_cpu()
            r = subprocess.run([*torque_cmd(w, path, engine, count, iterations, key),
                                "-json", str(results)], capture_output=True, text=True, env=env)
            if r.returncode:
                sys.exit(f"bench_io: torque-async failed:\n{r.stdout}{r.stderr}")
            return json.loads(results.read_text())["tests"], children_cpu() - before
    tests, cpu = once(n, i)
    _, base = once(1, 1)
    transfers = sum(t["record"]["transfers"] + t["record"]["extra_transfers"] for t in tests)
    return sum(t["table"]["bw"] for t in tests), (cpu - base) / max(transfers - w.procs, 1)


def make_file(directory: Path, size_mb: int) -> Path:
    path = directory / "bench_io.dat"
    if not path.exists() or path.stat().st_size != size_mb * MB:
        with open(path, "wb") as fh:
            block = os.urandom(MB)
            for _ in range(size_mb):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
    return path


def warm(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(8 * MB):
            pass


def spread(values: list[float], digits: int = 2) -> str:
    median, lo, hi = statistics.median(values), min(values), max(values)
    return f"{median:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def directory(path: str) -> str:
    """argparse's check of --dir: a directory that exists."""
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is not a directory (make it first)")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", type=directory,
                    help="where the test file goes (the disk under test)")
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--engines", default="auto,uring,threads",
                    help="auto: what a user gets (sync for a lone QD1 test, else io_uring)")
    ap.add_argument("--only", default="", help="run the workloads whose name contains this")
    ap.add_argument("--key", type=lambda v: int(v, 0), default=0x7B00,
                    help="-smkey of round 0 (round r: KEY + r); another key beside another run")
    args = ap.parse_args()
    fio = ensure_fio()
    engines = args.engines.split(",")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_io.") as tmp:
        path = make_file(Path(tmp), args.size_mb)
        version = subprocess.run([fio, "--version"], text=True, capture_output=True).stdout
        print(f"# {' '.join(sys.argv)}\n# file {path} ({args.size_mb} MiB), {args.rounds} rounds "
              f"of {args.seconds:g} s, {version.strip()}")
        rows = []
        for w in WORKLOADS:
            if args.only not in w.name:
                continue
            ratios = {e: [] for e in engines}
            bw = {e: [] for e in ["fio", *engines]}
            cpu = {e: [] for e in ["fio", *engines]}
            for r in range(args.rounds):
                if w.warm:
                    warm(path)
                f_bw, f_cpu, f_ios = run_fio(fio, w, path, args.seconds)
                bw["fio"].append(f_bw)
                cpu["fio"].append(f_cpu)
                n, i = max(f_ios // w.procs, 16), 1          # about as long as fio ran
                if w.sequential:            # passes over the file, as fio makes
                    n, i = min(n, args.size_mb), -(-n // args.size_mb)
                for e in engines:
                    if w.warm:
                        warm(path)
                    t_bw, t_cpu = run_torque(w, path, e, n, i, args.key + r)
                    bw[e].append(t_bw)
                    cpu[e].append(t_cpu)
                    ratios[e].append(t_bw / f_bw)
            for e in engines:
                met = "met" if statistics.median(ratios[e]) >= w.target else "MISSED"
                rows.append((w.name, e, statistics.median(bw["fio"]), statistics.median(bw[e]),
                             spread(ratios[e]), f">= {w.target} {met}",
                             statistics.median(cpu[e]) * 1e6, statistics.median(cpu["fio"]) * 1e6))
        print("| workload | engine | fio MiB/s | torque-async MiB/s | ratio median [min-max] | "
              "target | CPU/transfer torque-async | CPU/transfer fio |")
        print("|---|---|---|---|---|---|---|---|")
        for name, e, f, t, ratio, target, tc, fc in rows:
            print(f"| {name} | {e} | {f:.0f} | {t:.0f} | {ratio} | {target} | {tc:.1f} us | "
                  f"{fc:.1f} us |")


if __name__ == "__main__":
    main()
