#!/usr/bin/env python3
"""Wake-up lateness of a paced stream against cyclictest, on this machine, in one invocation.

Each round runs, one after the other (interleaved, so slow drifts of the machine hit all alike):

  cyclictest   cyclictest -i INTERVAL -l LOOPS (SCHED_OTHER, clock_nanosleep), its histogram
  stream       a -memStreams w stream of 4 KB frames every INTERVAL on uvloop and the precise
               timer (timerfd): lateness of each transfer's start against its release time
  call_at      the same pacing with uvloop's own loop.call_at (the millisecond timer it replaces)
  cyclic       the -cyclic worker's measurement (CyclicTest.measure: clock_nanosleep from Python)

Every figure is whole microseconds (as cyclictest counts) through the same p99 function. The
target: stream p99 <= 2 x cyclictest p99 on an idle machine. Prints each round, then per
method the median p99 over rounds with its spread, and the stream / cyclictest ratio.

    python3 tools/bench_timer.py [--interval 1000] [--loops 5000] [--rounds 3]

cyclictest comes from Debian's rt-tests, installed here (as root, with apt-get) when missing.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from torque_async import cmdline                          # noqa: E402
from torque_async.meter import Limit, Meter, now          # noqa: E402
from torque_async.results import Results, segment_name    # noqa: E402
from torque_async.streams.stream import MemStreamTest     # noqa: E402
from torque_async.kind_api.api import TestContext                       # noqa: E402
from workers.cyclic import CyclicTest                     # noqa: E402

HIST_US = 20_000                   # cyclictest's histogram range; beyond it, overflows
FRAME_KB = 4


def p99(hist: np.ndarray, overflows: int = 0) -> float:
    """The smallest whole-us lateness that 99% of wake-ups did not exceed (inf: past the range)."""
    cum = np.cumsum(hist)
    i = int(np.searchsorted(cum, 0.99 * (cum[-1] + overflows)))
    return float(i) if i < len(hist) else float("inf")


def histogram(lateness_ns) -> np.ndarray:
    us = np.asarray(lateness_ns) // 1000
    return np.bincount(np.clip(us, 0, HIST_US), minlength=HIST_US + 1)


def cyclictest(interval: int, loops: int) -> tuple[np.ndarray, int]:
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["cyclictest", "-q", "-i", str(interval), "-l", str(loops),
                        "-h", str(HIST_US), f"--histfile={out.name}"], check=True,
                       stdout=subprocess.DEVNULL)
        text = out.read()
    hist = np.zeros(HIST_US + 1, np.int64)
    for us, count in re.findall(r"^(\d+)\s+(\d+)$", text, re.M):
        hist[int(us)] = int(count)
    overflows = re.search(r"# Histogram Overflows: (\d+)", text)
    return hist, int(overflows.group(1)) if overflows else 0


def stream(interval: int, loops: int) -> np.ndarray:
    """Start lateness of the transfers of a real -memStreams w stream (the engine and timer),
    from the pipeline's trace."""
    bw = Fraction(FRAME_KB * 1024 * 10**6, interval) / (1 << 20)          # MB/s
    plan = cmdline.parse(["-memStreams", "w", "0", str(FRAME_KB), str(float(bw)), "0",
                          str(loops * interval / 1e6), "1"])
    proc = plan.procs()[0]
    test = MemStreamTest(TestContext(proc.group, 0, 0, np.random.default_rng(0), 64))
    test.trace = []
    results = Results.create(segment_name(0x7B00 + os.getpid() % 0x100), 1)

    async def run():
        await test.setup()
        try:
            await test.run(Meter(results, 0, None, slow=False))
        finally:
            await test.close()
    try:
        uvloop.run(run())
    finally:
        results.shm.unlink()
        results.release()
    release = test.pipeline.pacer.release
    return np.array([t0 - release(k) for _, k, t0, _ in test.trace])


def call_at(interval: int, loops: int) -> np.ndarray:
    async def run():
        loop = asyncio.get_running_loop()
        late, start = [], now() + interval * 1000
        for k in range(loops):
            deadline = start + k * interval * 1000
            woke = loop.create_future()
            loop.call_at(deadline / 1e9, woke.set_result, None)
            await woke
            late.append(now() - deadline)
        return np.array(late)
    return uvloop.run(run())


class KeepingMeter(Meter):
    """The real Meter that also keeps each wake-up's lateness (the bench's histogram)."""
    __slots__ = ("late",)

    def record(self, latency: int, t_end: int) -> int:
        self.late.append(latency)
        return super().record(latency, t_end)


def cyclic(interval: int, loops: int) -> np.ndarray:
    """Lateness of `loops` wake-ups of the -cyclic worker's own measure (CyclicTest.measure,
    the garbage collector off, the overrun skip) on the real Meter, keeping each one."""
    proc = cmdline.parse(["-n", str(loops), "-i", "1", "-cyclic", str(interval)]).procs()[0]
    test = CyclicTest(TestContext(proc.group, 0, 0, np.random.default_rng(0), 64))
    results = Results.create(segment_name(0x7C00 + os.getpid() % 0x100), 1)
    try:
        meter = KeepingMeter(results, 0, None, slow=False, limit=Limit.of(proc.group.local))
        meter.late = []
        test.measure(meter, proc.group.local)
        return np.array(meter.late)
    finally:
        results.shm.unlink()
        results.release()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval", type=int, default=1000, help="us between wake-ups")
    ap.add_argument("--loops", type=int, default=5000, help="wake-ups per method and round")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if not shutil.which("cyclictest"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "rt-tests"], check=True,
                       stdout=subprocess.DEVNULL)
    print(f"interval {a.interval} us, {a.loops} wake-ups per method and round, "
          f"{a.rounds} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    methods = {"cyclictest": lambda: cyclictest(a.interval, a.loops),
               "stream": lambda: (histogram(stream(a.interval, a.loops)), 0),
               "call_at": lambda: (histogram(call_at(a.interval, a.loops)), 0),
               "cyclic": lambda: (histogram(cyclic(a.interval, a.loops)), 0)}
    p99s: dict[str, list[float]] = {m: [] for m in methods}
    for r in range(a.rounds):
        line = []
        for name, measure in methods.items():
            hist, over = measure()
            n = hist.sum() + over
            avg = (hist * np.arange(len(hist))).sum() / max(hist.sum(), 1)
            p99s[name].append(p99(hist, over))
            line.append(f"{name} p99 {p99s[name][-1]:.0f} avg {avg:.0f} (n {n})")
        print(f"round {r}: " + "; ".join(line), flush=True)
    print("p99 lateness (us): median [min .. max] over rounds")
    for name, values in p99s.items():
        print(f"  {name:10s} {statistics.median(values):7.0f} [{min(values):.0f} .. "
              f"{max(values):.0f}]")
    ratios = [s / c for s, c in zip(p99s["stream"], p99s["cyclictest"]) if c]
    if ratios:
        print(f"stream / cyclictest p99: median {statistics.median(ratios):.2f} "
              f"[{min(ratios):.2f} .. {max(ratios):.2f}] (target <= 2 on an idle machine)")


if __name__ == "__main__":
    main()
