#!/usr/bin/env python3
"""How many 1080p60 streams hold on this machine, on memory and on files, and their lateness
against -cyclic and cyclictest in the same run.

For each place (memory: -memStreams, files: -streams on scratch files through the I/O engine)
and each count N of a doubling ladder, one run of torque-async starts N camera writers of
1920x1080 uyvy422 frames (4 147 200 bytes) at 60 fps for --seconds, beside a -cyclic 1000
worker, while cyclictest (-i 1000, SCHED_OTHER) runs next to the whole run. Each rung is
repeated --rounds times; N holds when every stream of the median round held (HELD: no frame
late, none dropped). Printed per rung and round: streams held, the worst stream lateness p99
(us), -cyclic's p99 and cyclictest's p99 (us); then per place the largest N that held.

    python3 tools/bench_streams.py [--seconds 2] [--rounds 3] [--max 32] [--places memory,files]

A rung that misses ends its place's ladder. TORQUE="..." runs another torque-async command.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAME = ["-fps", "60", "-frame", "1920x1080", "-pixfmt", "uyvy422"]
ACTIONS = {"memory": "-memStreams", "files": "-streams"}


def command() -> list[str]:
    return os.environ.get("TORQUE", f"{sys.executable} -m torque_async").split()


def cyclictest(seconds: float) -> subprocess.Popen | None:
    if not shutil.which("cyclictest"):
        return None
    loops = int(seconds * 1000)
    return subprocess.Popen(["cyclictest", "-q", "-i", "1000", "-l", str(loops), "-h", "20000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def cyclictest_p99(out: str) -> float:
    """The smallest whole-us lateness 99% of cyclictest's wake-ups did not exceed."""
    hist = {int(m[1]): int(m[2]) for m in re.finditer(r"^(\d+)\s+(\d+)", out, re.M)}
    overflows = int(m[1]) if (m := re.search(r"# Histogram Overflows: (\d+)", out)) else 0
    total, seen = sum(hist.values()) + overflows, 0
    for us in sorted(hist):
        seen += hist[us]
        if seen >= 0.99 * total:
            return float(us)
    return float("inf")


def one_run(place: str, n: int, seconds: float, key: int) -> dict:
    """One torque-async run of n streams beside -cyclic, cyclictest beside it."""
    with tempfile.TemporaryDirectory(dir=ROOT) as where:
        out = Path(where) / "r.json"
        ct = cyclictest(seconds + 1.5)
        run = subprocess.run([*command(), "-smkey", str(key), "-json", str(out), "-p", str(n),
                              *FRAME, ACTIONS[place], "w", "2", "0", "0", "0", str(seconds), "64",
                              "-cyclic", "1000"], cwd=where, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        ct_out = ct.communicate()[0] if ct else ""
        if run.returncode:
            sys.exit(f"torque-async exited {run.returncode}: {run.stderr.strip()}")
        doc = json.loads(out.read_text())
    streams = [t["streams"] for t in doc["tests"] if t.get("streams")]
    cyclic = next(t for t in doc["tests"] if t["action"] == "cyclic")
    return {"held": sum(s["verdict"] == "HELD" for s in streams), "n": n,
            "p99_us": max(s["sub0"]["lateness_p99_us"] for s in streams),
            "cyclic_p99_us": cyclic["latency"]["p99"] / 1000 if cyclic["latency"] else None,
            "cyclictest_p99_us": cyclictest_p99(ct_out) if ct else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max", type=int, default=32)
    ap.add_argument("--places", default="memory,files")
    a = ap.parse_args()
    key = 0x7B500
    print(f"command: {' '.join(command())}; cpus {os.cpu_count()}; "
          f"load {os.getloadavg()[0]:.1f}; cyclictest: {shutil.which('cyclictest') or 'absent'}")
    for place in a.places.split(","):
        best, n = 0, 1
        while n <= a.max:
            runs = []
            for _ in range(a.rounds):
                key += 1
                runs.append(one_run(place, n, a.seconds, key))
                r = runs[-1]
                print(f"{place} N={n}: held {r['held']}/{n}, stream p99 {r['p99_us']:.1f} us, "
                      f"-cyclic p99 {r['cyclic_p99_us']} us, cyclictest p99 "
                      f"{r['cyclictest_p99_us']} us", flush=True)
            if statistics.median(r["held"] for r in runs) < n:
                break
            best, n = n, 2 * n
        print(f"{place}: largest N of 1080p60 uyvy422 writers that held (median of "
              f"{a.rounds} rounds): {best}", flush=True)


if __name__ == "__main__":
    main()
