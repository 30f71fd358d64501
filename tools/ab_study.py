#!/usr/bin/env python3
"""A/B study: does compare find a planted change? For each planted change, K pairs of runs
(the plan, and the plan with the change), each run with -repeat 5, compared; prints each
pair's findings and the detection rate (pairs that flag a change, out of K).

    python3 tools/ab_study.py [--pairs 3] [--repeat 5] [--only throttle|fbc|hog]

Planted changes, on the A/A study's plan (tools/aa_study.py):
- throttle: -T 10 on the -bcopy group (10 us added to every transfer): compared with --match
  position, as -T makes it another test;
- fbc: -fbc on the -rand group (the buffer cache on, where the plan reads with O_DIRECT);
- hog: a CPU spinner of another program running beside B's runs (one busy process).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time

from aa_study import PLAN, compare, flagged, run, said_text

CHANGES = {
    "throttle": ("-t 0.3 -KB 64 -T 10 -bcopy -t 0.3 -KB 4 -mfileMB 8 -rand".split(), "position"),
    "fbc": ("-t 0.3 -KB 64 -bcopy -t 0.3 -KB 4 -mfileMB 8 -fbc -rand".split(), "identity"),
    "hog": (PLAN, "identity"),
}
HOG = "while True: pass"


def pair(name: str, k: int, repeat: int, where: str) -> tuple[list[str], int]:
    """One pair of the planted change `name`: its compare's flagged findings (flagged())."""
    plan, match = CHANGES[name]
    docs = {}
    for side in (("A", "B") if k % 2 == 0 else ("B", "A")):
        hog = subprocess.Popen([sys.executable, "-c", HOG]) if side == "B" and name == "hog" \
            else None
        try:
            docs[side] = run(PLAN if side == "A" else plan, repeat, where, f"{name}{k}{side}")
        finally:
            if hog:
                hog.kill()
                hog.wait()
    return flagged(compare.compare(docs["A"], docs["B"], match))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", choices=sorted(CHANGES))
    a = ap.parse_args()
    where = tempfile.mkdtemp(prefix="ab-study-")
    rates, began = [], time.monotonic()
    try:
        for name in [a.only] if a.only else CHANGES:
            found = 0
            for k in range(a.pairs):
                said, unsure = pair(name, k, a.repeat, where)
                found += bool(said)
                print(f"{name} pair {k + 1}: {said_text(said, unsure)}", flush=True)
            rates.append(f"{name} {found} of {a.pairs}")
    finally:
        shutil.rmtree(where, ignore_errors=True)
    print(f"plan: {' '.join(PLAN)} (-repeat {a.repeat})")
    print(f"detected: {'; '.join(rates)}; {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
