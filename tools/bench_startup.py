#!/usr/bin/env python3
"""Start-up: from the command's start to the start barrier's release, against the bare cost of
the same number of spawned interpreters that import numpy, interleaved in one invocation
(torque-async's workers are forks of a server that imported numpy once, see
torque_async/workstart.py; the reference is what spawning them would cost at least).

    python3 tools/bench_startup.py [--rounds 5] [--before DIR] [-- PLAN ...]
                                                  (default PLAN: -p 4 -n 64 -MB 4 -bcopy)

Each round runs, in alternating order:
  torque     `python3 -m torque_async -nh -noProgress PLAN -json F`: the time from just before
             the command's process is started to its barrier's release (the JSON's time_zero_ns;
             both CLOCK_MONOTONIC), and from the JSON's stamps where the time went: the parent
             until it started its first worker, the workers' start (their "launched" to
             "spawned" stamps: a fork of the server; with -execChild an interpreter and its
             imports), their set-up (arrays made and filled), and the wait for the last;
  reference  this script as a parent that spawns as many processes as the plan has workers,
             each importing numpy and meeting the parent at a barrier: the same time span for
             the least a Python plan of spawned numpy workers can cost here;
  forked     the same, its workers forked from a forkserver that imported numpy (started
             first thing, as torque-async starts its own): the least for forked workers;
  pass       `python3 -c pass`: one interpreter's start and exit (site and .pth files included);
  before     with --before DIR: torque with the code of another checkout (an older commit).
Prints every round, then the median [min-max] of each, the ratios of each round's figures
(torque / reference; with --before also torque / before), and the load average before and
after.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import forkserver
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLAN = "-p 4 -n 64 -MB 4 -bcopy".split()


def torque(plan: list[str], where: str, key: int, code: Path = REPO) -> dict[str, float]:
    """Seconds from the command's start to the release, and the breakdown from its stamps
    (the torque_async of checkout `code`)."""
    out = os.path.join(where, "startup.json")
    began = time.monotonic_ns()
    done = subprocess.run([sys.executable, "-m", "torque_async", "-nh", "-noProgress",
                           "-smkey", hex(key), *plan, "-json", out], cwd=where,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(code)})
    if done.returncode:
        sys.exit(f"torque-async {' '.join(plan)} failed: {done.stderr.strip()}")
    doc = json.loads(Path(out).read_text())
    t0 = doc["time_zero_ns"]
    marks = [t["record"] for t in doc["tests"] if t["record"].get("launched")]
    parts = {"total": (t0 - began) / 1e9}
    if marks:                      # the stamps this checkout records (none before them)
        first = min(r["launched"] for r in marks)
        parts.update(parent=(first - began) / 1e9,
                     start=statistics.median(r["phase"]["spawned"] - r["launched"]
                                               for r in marks) / 1e9,
                     setup=statistics.median(r["phase"]["set_up"] - r["phase"]["spawned"]
                                             for r in marks) / 1e9,
                     last_ready=(max(r["phase"]["set_up"] for r in marks) - began) / 1e9)
    return parts


def numpy_at_barrier(barrier) -> None:
    """A reference worker: import numpy, then meet the parent."""
    import numpy  # noqa: F401 - its import is what is measured
    barrier.wait()


def reference_parent(workers: int, method: str) -> None:
    """The reference's parent: start the workers (spawned, or forked from a forkserver that
    imported numpy, started first thing), meet them, print the release's stamp."""
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["numpy"])
        forkserver.ensure_running()
    barrier = ctx.Barrier(workers + 1)
    procs = [ctx.Process(target=numpy_at_barrier, args=(barrier,)) for _ in range(workers)]
    for p in procs:
        p.start()
    barrier.wait()
    print(time.monotonic_ns(), flush=True)
    for p in procs:
        p.join()


def reference(workers: int, method: str = "spawn") -> dict[str, float]:
    began = time.monotonic_ns()
    done = subprocess.run([sys.executable, __file__, "--reference-parent", str(workers), method],
                          capture_output=True, text=True, check=True)
    return {"total": (int(done.stdout.split()[0]) - began) / 1e9}


def bare_interpreter() -> dict[str, float]:
    began = time.monotonic_ns()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return {"total": (time.monotonic_ns() - began) / 1e9}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def workers_of(plan: list[str]) -> int:
    """The plan's -p (one group), as the reference's number of workers."""
    return int(plan[plan.index("-p") + 1]) if "-p" in plan else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before", type=Path, help="another checkout's root, run the same way")
    ap.add_argument("--reference-parent", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("plan", nargs="*", default=PLAN)
    a = ap.parse_args()
    if a.reference_parent:
        return reference_parent(int(a.reference_parent[0]), a.reference_parent[1])
    load = os.getloadavg()
    where = tempfile.mkdtemp(prefix="bench-startup-")
    key = 0x5A0000 + os.getpid() % 0xFFFF
    runs = {"torque": lambda: torque(a.plan, where, key),
            "reference": lambda: reference(workers_of(a.plan)),
            "forked": lambda: reference(workers_of(a.plan), "forkserver"), "pass": bare_interpreter}
    if a.before:
        runs["before"] = lambda: torque(a.plan, where, key, a.before.resolve())
    got: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    for r in range(a.rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for name in order:
            got[name].append(runs[name]())
        print(f"round {r + 1}: " + ", ".join(f"{n} {got[n][-1]['total']:.3f} s" for n in runs))
    for name in ("startup.json", "sysctl.txt"):
        Path(where, name).unlink(missing_ok=True)
    os.rmdir(where) if not os.listdir(where) else None
    print(f"plan: {' '.join(a.plan)} ({a.rounds} rounds; load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs)")
    for name, rounds in got.items():
        print(f"{name:9s} {spread([x['total'] for x in rounds])} s")
    pairs = [("torque", ref) for ref in ("reference", "forked")]
    if a.before:                       # each round's pair ran side by side: the change itself
        pairs += [("before", "reference"), ("before", "forked"), ("torque", "before")]
    for name, ref in pairs:
        ratios = [t["total"] / r["total"] for t, r in zip(got[name], got[ref])]
        print(f"{name} / {ref}: {spread(ratios)}")
    parts = [k for k in got["torque"][0] if k != "total"]
    if parts:
        print("torque, where the time went (s, median [min-max]): " + "; ".join(
            f"{k} {spread([x[k] for x in got['torque']])}" for k in parts))


if __name__ == "__main__":
    main()
