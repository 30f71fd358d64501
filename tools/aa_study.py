#!/usr/bin/env python3
"""A/A study: how often compare cries wolf. K pairs of runs of one plan, each run with
-repeat 5, each pair compared; prints each pair's flagged findings and the false-positive rate
(pairs that flag any figure, out of K; the target is at most 5%).

    python3 tools/aa_study.py [--pairs 5] [--repeat 5] [PLAN ...]

Both runs of a pair run the same plan, so every significant finding is a false positive. The
runs of a pair alternate their order (A first, then B first), in a private scratch directory.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from torque_async import compare  # noqa: E402

PLAN = "-t 0.3 -KB 64 -bcopy -t 0.3 -KB 4 -mfileMB 8 -rand".split()   # >= 100 ms: resolved
SMKEY = "0x7A5A"                   # its own shared-memory key (not a running default's)


def run(args: list[str], repeat: int, where: str, name: str) -> dict:
    """One torque-async -repeat run of `args` in `where`; its results document."""
    path = os.path.join(where, f"{name}.json")
    done = subprocess.run([sys.executable, "-m", "torque_async", "-smkey", SMKEY, "-nh",
                           "-noProgress", "-repeat", str(repeat), "-json", path, *args],
                          cwd=where, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        sys.exit(f"torque-async {' '.join(args)} failed: {done.stderr.strip()}")
    with open(path) as f:
        return json.load(f)


def flagged(found: compare.Comparison) -> tuple[list[str], int]:
    """The findings a compare counts as significant (worse or better, any size), and how many
    findings it could not count (not resolved, or not finished)."""
    said = [f"{c.test} {c.figure} {c.pct:+.1f}%" if c.pct is not None else
            f"{c.test} {c.figure}" for c in found.changes if c.counted]
    return said, sum(c.role == compare.FINDING and bool(c.unresolved or c.unfinished)
                     for c in found.changes)


def said_text(said: list[str], unsure: int) -> str:
    return f"flagged {len(said)}" + (f": {'; '.join(said)}" if said else "") + \
        (f" ({unsure} findings not resolved: never counted)" if unsure else "")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def cvs(doc: dict) -> list[float]:
    """Each test's bandwidth CV (%) over the run's repetitions."""
    reps = compare.repetitions(doc)
    out = []
    for i in range(len(reps[0])):
        bw = [rep[i]["figures"]["bw"] for rep in reps if rep[i]["figures"].get("bw")]
        if len(bw) > 1:
            out.append(100 * statistics.stdev(bw) / statistics.fmean(bw))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("plan", nargs="*", default=PLAN)
    a = ap.parse_args()
    where = tempfile.mkdtemp(prefix="aa-study-")
    hits, family, cv, began = 0, [], [], time.monotonic()
    try:
        for k in range(a.pairs):
            order = ("A", "B") if k % 2 == 0 else ("B", "A")
            docs = {name: run(a.plan, a.repeat, where, name) for name in order}
            found = compare.compare(docs["A"], docs["B"])
            said, unsure = flagged(found)
            hits += bool(said)
            family.append(found.family)
            cv += cvs(docs["A"]) + cvs(docs["B"])
            print(f"pair {k + 1}: family {found.family}, {said_text(said, unsure)}", flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    print(f"plan: {' '.join(a.plan)} (-repeat {a.repeat})")
    print(f"bandwidth CV within a run: {spread(cv)} %")
    print(f"false positives: {hits} of {a.pairs} pairs ({100 * hits / a.pairs:.0f}%) flagged any "
          f"figure (Holm over a family of {spread(family)} findings); "
          f"{time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
