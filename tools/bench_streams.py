#!/usr/bin/env python3
"""How many 1080p60 streams hold on this machine, on memory and on files, and their lateness
against -cyclic and cyclictest in the same run; optionally against a reference build.

For each place (memory: -memStreams, files: -streams on scratch files) and each count N of a
doubling ladder, one run of torque-async starts N camera writers of 1920x1080 uyvy422 frames
(4 147 200 bytes = sizeKB 4050, at 60 fps = bwMBs 237.3046875: positional arguments, so an
older build runs the same streams) for --seconds, beside a -cyclic 1000 worker, while
cyclictest (-i 1000, SCHED_OTHER) runs next to the whole run. With --reference CMD the same
rung runs on that command too (e.g. the installed torque-async: the build before the I/O
engine carried the file streams), interleaved round by round so the machine's drifts hit both.
Per rung and command: streams held in each round (HELD: no frame late, none dropped), the median
over rounds of the worst stream's lateness p99 (us) and of -cyclic's and cyclictest's p99 (us);
then per place and command the largest N whose median round held every stream, and the
largest N held in every round.

--buffers 0,3 and --rtprio 0,50 run each rung under each pair (-bufferFrames B; -rtprio P, 0:
without), interleaved round by round as the commands are; --beside adds actions that run
beside the streams the whole time (e.g. "-Striad": the Triad measures its transfers, then
keeps running unmeasured until the streams end).

--pipeline makes each of the N a three-stage pipeline of wired streams (-from): a capture
writer (w), a process stage (rw -from 0) and a playout (r -from 1), each -p N; a pipeline held
when all three of its stages held (their own frames: what a stage inherited from the one
before is the upstream's miss, counted there).

    python3 tools/bench_streams.py [--seconds 2] [--rounds 3] [--max 8] [--places memory,files]
                                   [--reference torque-async] [--buffers 0,3] [--rtprio 0,50]
                                   [--beside=-Striad] [--pipeline]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STREAM = ["w", "2", "4050", "237.3046875", "0"]      # then runTime and mfileMB
STAGES = (("w", None), ("rw", 0), ("r", 1))          # --pipeline: label, the group it reads
ACTIONS = {"memory": "-memStreams", "files": "-streams"}
THIS = f"{sys.executable} -m torque_async"


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


def p99_us(sparse: list[list[int]]) -> float:
    """The upper bound of the bucket holding the 99th percentile of a sparse histogram (us):
    [top, count] pairs (schema 1-2) or [lo, hi, count] (3)."""
    total, seen = sum(b[-1] for b in sparse), 0
    for *_, top, n in sparse:
        seen += n
        if seen >= 0.99 * total:
            return top / 1000
    return 0.0


def streams(place: str, n: int, seconds: float, local: list[str], pipeline: bool) -> list[str]:
    """The streams' groups: n writers, or n three-stage pipelines (groups 0-2)."""
    tail = [str(seconds), "64"]
    if not pipeline:
        return ["-p", str(n), *local, ACTIONS[place], *STREAM, *tail]
    return [t for label, source in STAGES for t in
            ["-p", str(n), *local, *(["-from", str(source)] if source is not None else []),
             ACTIONS[place], label, *STREAM[1:], *tail]]


def held(tests: list[dict], pipeline: bool) -> int:
    """Streams whose every sub-stream held, or pipelines whose every stage did."""
    ok: dict[tuple[int, int], bool] = {}
    for t in tests:
        if t["record"].get("subs"):
            whole = all(s["late"] == 0 and s.get("dropped", 0) == 0 for s in t["record"]["subs"])
            key = (0, t["index"]) if pipeline else (t["group"], t["index"])
            ok[key] = ok.get(key, True) and whole
    return sum(ok.values())


def one_run(cmd: str, place: str, n: int, seconds: float, key: int, opts=(),
            pipeline: bool = False) -> dict:
    """One torque-async run of n streams (or pipelines) beside -cyclic, cyclictest beside it;
    `opts`: more options and actions (-bufferFrames, -rtprio, --beside's)."""
    with tempfile.TemporaryDirectory(dir=ROOT) as where:
        out = Path(where) / "r.json"
        ct = cyclictest(seconds + 1.5)
        env = {**os.environ, "PYTHONPATH": str(ROOT)} if cmd == THIS else None
        run = subprocess.run([*cmd.split(), "-smkey", str(key), "-json", str(out), *opts[0],
                              *streams(place, n, seconds, opts[1], pipeline),
                              "-cyclic", "1000", *opts[2]],
                             cwd=where, capture_output=True, text=True, env=env)
        ct_out = ct.communicate()[0] if ct else ""
        if run.returncode:
            sys.exit(f"torque-async exited {run.returncode}: {run.stderr.strip()}")
        doc = json.loads(out.read_text())
    subs = [t["record"]["subs"][0] for t in doc["tests"] if t["record"].get("subs")]
    cyclic = next(t for t in doc["tests"] if t["action"] == "cyclic")
    return {"held": held(doc["tests"], pipeline),
            "p99_us": max(p99_us(s["hist"]) for s in subs),
            "cyclic_p99_us": cyclic["latency"]["p99"] / 1000 if cyclic["latency"] else math.nan,
            "cyclictest_p99_us": cyclictest_p99(ct_out) if ct else math.nan}


def variant(buffer: str, rtprio: str) -> str:
    """A command's label's options part: ' [-bufferFrames 3 -rtprio 50]' ('' for neither)."""
    opts = [*(["-bufferFrames", buffer] if buffer != "0" else []),
            *(["-rtprio", rtprio] if rtprio != "0" else [])]
    return f" [{' '.join(opts)}]" if opts else ""


def base(label: str) -> str:
    return label.split(" [")[0]


def options(label: str, beside: list[str]) -> tuple[list[str], list[str], list[str]]:
    """A label's (globals, stream locals, actions beside) for one_run."""
    opts = label.partition(" [")[2].rstrip("]").split()
    pairs = dict(zip(opts[::2], opts[1::2]))
    return ((["-rtprio", pairs["-rtprio"]] if "-rtprio" in pairs else []),
            (["-bufferFrames", pairs["-bufferFrames"]] if "-bufferFrames" in pairs else []),
            beside)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max", type=int, default=8)
    ap.add_argument("--places", default="memory,files")
    ap.add_argument("--reference", help="another torque-async command to measure alike")
    ap.add_argument("--buffers", default="0", help="-bufferFrames values, comma-separated")
    ap.add_argument("--rtprio", default="0", help="-rtprio values, comma-separated (0: without)")
    ap.add_argument("--beside", default="", help="actions beside the streams, e.g. -Striad")
    ap.add_argument("--pipeline", action="store_true",
                    help="N three-stage pipelines (capture w, process rw, playout r, wired)")
    a = ap.parse_args()
    commands = [f"{cmd}{variant(b, p)}" for cmd in [THIS, *([a.reference] if a.reference else [])]
                for b in a.buffers.split(",") for p in a.rtprio.split(",")]
    extra = a.beside.split()
    key = 0x7B500
    print(f"cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; cyclictest: "
          f"{shutil.which('cyclictest') or 'absent'}; {a.rounds} rounds of {a.seconds} s")
    for place in a.places.split(","):
        best = {cmd: 0 for cmd in commands}
        every = dict(best)
        n = 1
        while n <= a.max:
            runs: dict[str, list[dict]] = {cmd: [] for cmd in commands}
            for _ in range(a.rounds):
                for cmd in commands:
                    key += 1
                    runs[cmd].append(one_run(base(cmd), place, n, a.seconds, key,
                                             options(cmd, extra), a.pipeline))
            for cmd, rs in runs.items():
                med = {f: statistics.median(r[f] for r in rs) for f in
                       ("p99_us", "cyclic_p99_us", "cyclictest_p99_us")}
                print(f"{place} N={n} [{cmd}]: held {[r['held'] for r in rs]} of {n}; median p99 "
                      f"(us): streams {med['p99_us']:.0f}, -cyclic {med['cyclic_p99_us']:.0f}, "
                      f"cyclictest {med['cyclictest_p99_us']:.0f}", flush=True)
                if statistics.median(r["held"] for r in rs) == n and best[cmd] == n // 2:
                    best[cmd] = n
                if min(r["held"] for r in rs) == n and every[cmd] == n // 2:
                    every[cmd] = n
            n *= 2
        for cmd in commands:
            what = "three-stage pipelines" if a.pipeline else "writers"
            print(f"{place} [{cmd}]: largest N of 1080p60 uyvy422 {what} that held: {best[cmd]} "
                  f"(median round), {every[cmd]} (every round)")


if __name__ == "__main__":
    main()
