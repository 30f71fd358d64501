#!/usr/bin/env python3
"""The capacity search against a by-hand sweep: how many streams hold, and at what cost.

For each workload (files: 1080p60 uyvy422 -streams writers on scratch files; memory: 4K60
uyvy422 -memStreams copies), `torque-async capacity --until held --rounds R --max M` runs once
(its answer, runs and seconds), then the sweep a user writes by hand: every N from 1 to M,
R rounds each, N passing when every stream HELD in every round (the same rule). Each run is
`seconds` long (the streams' runTime).

    python3 tools/bench_capacity.py [--seconds 1] [--rounds 3] [--max 8] [--workloads files,memory]
                                    [--lateUs 0]

--lateUs gives the streams a tolerance: a frame is late only that many us past its deadline.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {"files": "-fps 60 -frame 1920x1080 -pixfmt uyvy422 -streams w 2 0 0 0 {s} 256",
             "memory": "-fps 60 -frame 3840x2160 -pixfmt uyvy422 -memStreams w 2 0 0 0 {s} 64"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CMD = [sys.executable, "-m", "torque_async"]


def held(path: str) -> bool:
    doc = json.loads(Path(path).read_text())
    return not doc["failures"] and all(t["streams"]["verdict"] == "HELD" for t in doc["tests"])


def search(plan: list[str], rounds: int, top: int, folder: str) -> tuple[str, int, float]:
    out = os.path.join(folder, "cap.json")
    began = time.monotonic()
    done = subprocess.run([*CMD, "capacity", "--rounds", str(rounds), "--max", str(top),
                           "--json", out, "--", *plan], env=ENV, capture_output=True, text=True)
    seconds = time.monotonic() - began
    if done.returncode:
        sys.exit(f"capacity: exit {done.returncode}: {done.stderr.strip()}")
    doc = json.loads(Path(out).read_text())
    runs = sum(len(p["rounds"]) for p in doc["points"])
    answer = next(ln for ln in done.stdout.splitlines() if ln.startswith("capacity: "))
    return answer.split(";")[0], runs, seconds


def sweep(plan: list[str], rounds: int, top: int, folder: str) -> tuple[str, int, float]:
    out, found, runs = os.path.join(folder, "run.json"), [], 0
    began = time.monotonic()
    for n in range(1, top + 1):
        passed = 0
        for _ in range(rounds):
            subprocess.run([*CMD, "-p", str(n), *plan, "-json", out], env=ENV,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs += 1
            passed += held(out)
        found.append(f"{n}:{passed}/{rounds}")
    seconds = time.monotonic() - began
    best = max((int(f.split(":")[0]) for f in found if f.endswith(f"{rounds}/{rounds}")),
               default=0)
    return f"largest N held {rounds}/{rounds}: {best} ({' '.join(found)})", runs, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max", type=int, default=8)
    ap.add_argument("--workloads", default="files,memory")
    ap.add_argument("--smkey", default="0x40c4")
    ap.add_argument("--lateUs", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name in a.workloads.split(","):
            plan = ["-smkey", a.smkey, "-lateUs", str(a.lateUs),
                    *WORKLOADS[name].format(s=a.seconds).split()]
            for how, fn in (("capacity", search), ("sweep", sweep)):
                answer, runs, seconds = fn(plan, a.rounds, a.max, folder)
                print(f"{name}, {how}: {answer}; {runs} runs, {seconds:.0f} s", flush=True)


if __name__ == "__main__":
    main()
