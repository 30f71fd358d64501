#!/usr/bin/env python3
"""torque-async's memory and STREAM kernels against a C reference of the same kernels.

    python3 tools/bench_memory.py                    # -n 64 -MB 4: 256 MiB per array
    python3 tools/bench_memory.py --rounds 7 --kernels load store
    python3 tools/bench_memory.py --cli              # time the torque-async command instead

For Striad a second row compares it with STREAM's own Triad loop over the same arrays, whole
(one pass a transfer: tools/cref/memkernels.c STREAMtriad), as STREAM itself counts.
tools/cref/memkernels.c is compiled here with `gcc -O3 -march=native` into a temporary
directory.  For every kernel the Python side and the C side run alternately, `--rounds` times
each (who goes first alternates too, so a drift in the machine's speed hits both alike), each
run in a fresh process, and the table gives the median MiB/s of transfer bytes, the min-max
spread, the ratio of the medians (the target applies to it) and the ratio of the best runs
(on a shared, noisy machine: the least disturbed run of each side).  Both sides do the same
thing: n chunks of size bytes per buffer, transfer k on chunk k mod n, n x iterations
transfers under one timer, the same stride and byte accounting, data checked after timing.
Target (ratio of medians): 0.95 for every kernel (issue 18).

The Python side by default builds the test class in a fresh interpreter and times it with the
worker's own timed loop (tools/timed_loop.py: workers.timed.measure, its clock reads and
latency records included).  --same-process loads the
C reference as a shared library instead and alternates both sides in one process, each on its
own buffers made by the same test class: quicker alternation, so less exposed to a noisy
neighbour than separate processes (data checked for the Python side).  --cli runs this
checkout's command (`python3 -m torque_async` from the repository root)
`-nh -smkey K -p 1 -n N -i I -MB S -KERNEL` (-B when S is not whole MiB; K is `--key`, a key
of its own by default, beside another torque-async run) and reads
BW(MB/s), the sixth column of its table.

What depends on the machine is chosen by the kernels themselves at set-up, untimed
(MemoryTest.choose in workers/memory.py; the group block and the JSON's `info` name it): bzero's
fill or libc memset, the loads' np.dot (the sum in a general register, as C's `s += p[i]`) or
np.add.reduce (a vector register), the stores' fill, np.copyto or np.bitwise_or, Copy's vector
a|0 or memmove, and Triad's block size (s * c into a scratch block: into a's own block was ~25%
slower).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

from timed_loop import bandwidth, scratch_results     # first: puts the repository on sys.path

from torque_async import sysinfo
from torque_async.kinds import KINDS
from torque_async.options import Locals
from torque_async.kind_api.api import TestContext

ROOT = Path(__file__).resolve().parent.parent
CREF = ROOT / "tools" / "cref" / "memkernels.c"
KERNELS = ("bcopy", "bzero", "load", "store", "ls", "Scopy", "Sscale", "Sadd", "Striad")
TARGET = 0.95                   # every kernel: at least 0.95x its C reference
MiB = 1 << 20
CFLAGS = "-O3 -march=native"


def build_test(kernel: str, local):
    """`kernel`'s test class, constructed as a worker constructs it."""
    group = types.SimpleNamespace(action=kernel, args=(), local=local)
    ctx = TestContext(group=group, proc=0, row=0, rng=np.random.default_rng(0),
                      linesize=local.stride)
    return KINDS[kernel].load()(ctx)


def locals_for(n: int, size: int, iterations: int, stride: int):
    """The test's options: n x iterations transfers of size bytes, pattern -bt 0."""
    return Locals(n=n, i=iterations, size=size, stride=stride, bt=0)


def python_rate(kernel: str, n: int, size: int, iterations: int, stride: int) -> float:
    """Build the test in this (fresh) process, time n x iterations transfers, check."""
    local = locals_for(n, size, iterations, stride)
    test = build_test(kernel, local)
    with scratch_results() as res:
        rate = bandwidth(test, local, res)
    test.check()
    test.close()
    return rate


def same_process(library: Path, kernel, n, size, iterations, stride, rounds):
    """Python and C alternating in this process, each on its own buffers made by the same
    test class (so both have the same allocation, pattern and pages): (ours, theirs, and for
    Striad STREAM's own Triad over the C side's arrays)."""
    lib = ctypes.CDLL(str(library))
    lib.memkernels_run.restype = ctypes.c_double
    lib.memkernels_run.argtypes = (ctypes.c_char_p, *[ctypes.c_size_t] * 3,
                                   *[ctypes.c_void_p] * 3, ctypes.c_size_t)
    local = locals_for(n, size, iterations, stride)
    ours_test, their_test = (build_test(kernel, local) for _ in range(2))
    names = {"bcopy": ("src", "dst")}.get(kernel, ("a", "b", "c") if kernel[0] == "S" else ("buf",))
    pointers = [getattr(their_test, x).ctypes.data for x in names] + [None] * (3 - len(names))
    total, nbytes = n * iterations, their_test.transfer_bytes

    def c_rate(name: str, transfers: int) -> float:     # STREAMtriad: a pass of all n chunks
        seconds = lib.memkernels_run(name.encode(), n, nbytes, stride, *pointers, transfers)
        return total * nbytes / MiB / seconds

    ours, theirs, plain = [], [], []
    with scratch_results() as res:
        for r in range(rounds):
            for side in (("py", "c") if r % 2 == 0 else ("c", "py")):
                if side == "py":
                    ours.append(bandwidth(ours_test, local, res))
                else:
                    theirs.append(c_rate(kernel, total))
                    if kernel == "Striad":
                        plain.append(c_rate("STREAMtriad", iterations))
    ours_test.check()
    for test in (ours_test, their_test):
        test.close()
    return ours, theirs, plain


def run_python(kernel, n, size, iterations, stride) -> float:
    command = [sys.executable, __file__, "--python-worker", kernel, str(n), str(size),
               str(iterations), str(stride)]
    out = subprocess.run(command, check=False, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"python {kernel} failed:\n{out.stderr}")
    return float(out.stdout.split()[0])


def run_cli(kernel, n, size, iterations, stride, explicit_stride, key) -> float:
    command = [sys.executable, "-m", "torque_async", "-nh", "-smkey", hex(key), "-p", "1",
               "-n", str(n), "-i", str(iterations)]
    command += ["-MB", str(size // MiB)] if size % MiB == 0 else ["-B", str(size)]
    if explicit_stride:
        command += ["-stride", str(stride)]
    out = subprocess.run(command + [f"-{kernel}"], check=False, capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode:
        raise RuntimeError(f"{' '.join(command)} -{kernel} failed:\n{out.stdout}{out.stderr}")
    for line in out.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 6 and fields[0].isdigit():     # proc,Start,Finish,Diff,Xfers,BW(MB/s)
            return float(fields[5])
    raise RuntimeError(f"no result row in the output of {' '.join(command)} -{kernel}:\n"
                       f"{out.stdout}")


def run_c(binary, kernel, n, size, iterations, stride) -> float:
    out = subprocess.run([str(binary), kernel, str(n), str(size), str(iterations), str(stride)],
                         check=False, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"C {kernel} failed:\n{out.stdout}{out.stderr}")
    return float(out.stdout.split()[0])


def compile_reference(directory: str, cflags: str, shared: bool = False) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        sys.exit("bench_memory: needs gcc to build the C reference")
    binary = Path(directory) / ("memkernels.so" if shared else "memkernels")
    extra = ["-shared", "-fPIC"] if shared else []
    subprocess.run([gcc, *cflags.split(), *extra, "-o", str(binary), str(CREF)], check=True)
    return binary


def summary(rates: list[float]) -> str:
    return f"{statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=64, help="transfers per iteration (chunks)")
    parser.add_argument("--mb", type=float, default=4, help="transfer size in MiB")
    parser.add_argument("-i", "--iterations", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each side per kernel")
    parser.add_argument("--stride", type=int, default=None, help="load/store stride (bytes)")
    parser.add_argument("--kernels", nargs="+", default=KERNELS, choices=KERNELS)
    parser.add_argument("--cli", action="store_true", help="time the torque-async command")
    parser.add_argument("--key", type=lambda v: int(v, 0), default=0x7B40,
                        help="--cli: the command's -smkey (its own by default, beside another "
                             "run)")
    parser.add_argument("--same-process", action="store_true",
                        help="alternate Python and C (as a shared library) in one process")
    parser.add_argument("--cflags", default=CFLAGS, help=f"C reference flags ({CFLAGS})")
    parser.add_argument("--python-worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.python_worker:
        kernel, *numbers = args.python_worker
        print(python_rate(kernel, *map(int, numbers)))
        return 0

    size = int(args.mb * MiB)
    stride = args.stride or sysinfo.cache_line()
    if args.cli and args.same_process:
        parser.error("--cli and --same-process exclude each other")
    side = "torque-async CLI" if args.cli else "torque-async"
    mode = ("C: separate processes" if not args.same_process else
            "Python and C in one process, own buffers each")
    print(f"# {shlex.join([Path(sys.argv[0]).name] + (argv or sys.argv[1:]))}")
    print(f"# n={args.n} size={size} B working set={args.n * size / MiB:.0f} MiB per array "
          f"iterations={args.iterations} stride={stride} rounds={args.rounds} "
          f"cpus={os.cpu_count()} cflags={args.cflags}; {mode}")
    print()
    print(f"| kernel | {side} MiB/s median (min-max) | C MiB/s median (min-max) | ratio | "
          "best/best | target (ratio) |")
    print("|---|---:|---:|---:|---:|---|")
    shortfall = 0
    with tempfile.TemporaryDirectory(prefix="bench_memory.") as tmp:
        binary = compile_reference(tmp, args.cflags, shared=args.same_process)
        for kernel in args.kernels:
            ours: list[float] = []
            theirs: list[float] = []
            plain: list[float] = []     # Striad: STREAM's own Triad over the same arrays
            if args.same_process:
                ours, theirs, plain = same_process(binary, kernel, args.n, size, args.iterations,
                                                   stride, args.rounds)
            for r in range(0 if args.same_process else args.rounds):
                for side_is_ours in ((True, False) if r % 2 == 0 else (False, True)):
                    if not side_is_ours:
                        theirs.append(run_c(binary, kernel, args.n, size, args.iterations, stride))
                    elif args.cli:
                        ours.append(run_cli(kernel, args.n, size, args.iterations, stride,
                                            args.stride, args.key))
                    else:
                        ours.append(run_python(kernel, args.n, size, args.iterations, stride))
                    if not side_is_ours and kernel == "Striad":
                        plain.append(run_c(binary, "STREAMtriad", args.n, size, args.iterations,
                                           stride))
            ratio = statistics.median(ours) / statistics.median(theirs)
            target = TARGET
            met = ratio >= target
            shortfall += not met
            best = max(ours) / max(theirs)      # what each side does when nothing disturbs it
            print(f"| {kernel} | {summary(ours)} | {summary(theirs)} | {ratio:.3f} | {best:.3f} | "
                  f">= {target} {'met' if met else 'MISSED'} |", flush=True)
            if plain:                   # STREAM's own Triad loop over the same arrays, whole
                ratio = statistics.median(ours) / statistics.median(plain)
                print(f"| Striad vs C STREAM Triad (whole arrays) | {summary(ours)} | "
                      f"{summary(plain)} | {ratio:.3f} | {max(ours) / max(plain):.3f} | "
                      f"(reference) |", flush=True)
    return 1 if shortfall else 0


if __name__ == "__main__":
    sys.exit(main())
