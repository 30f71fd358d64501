"""torque-async compare --interleave N "PLAN A" "PLAN B": two plans run alternately, A B A B ...
N times each, then compared as two -repeat runs would be (compare.py).

Alternating puts a drift of the machine (a neighbour's load, a cache or a disk warming up) on
both sides alike; N runs of A and then N of B put all of it on one side, where it reads as the
change. Each run is its own torque-async command (a fresh process, set-up and scratch files),
writing -json into a private directory (mkdtemp) that is removed afterwards; its report is not
shown, a line on stderr says which run is under way.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any, Callable

from . import export
from .options import ASKING, OPTIONS

REFUSED = ("-json", "-csv", "-repeat", "-baseline")    # what interleaving itself decides
NO_RESULTS = tuple(sorted(f"-{name}" for name, o in OPTIONS.items() if o.field in ASKING)) + \
    ("-child", "-g")       # a plan that writes no results (-quit, -help ...) or waits for Enter


class InterleaveError(Exception):
    """A plan that cannot be interleaved, or a run that failed: one line, and the exit status
    (2 bad input, 1 a run failed, 128 + n a signal stopped it)."""
    def __init__(self, line: str, code: int):
        super().__init__(line)
        self.code = code


def plan_args(text: str) -> list[str]:
    """A plan's command line as the shell would split it, refused where it names what
    --interleave decides (-json, -csv, -repeat, -baseline) or does not parse (before any run,
    so a bad plan B does not cost plan A's first run)."""
    try:
        args = shlex.split(text)
    except ValueError as e:
        raise InterleaveError(f"compare --interleave: {text!r}: {e}", 2) from None
    named = [a for a in args if a in REFUSED]
    if named:
        raise InterleaveError(f"compare --interleave: {text!r}: {named[0]} is --interleave's "
                              f"to decide (each run writes its own -json; N runs of each plan "
                              f"are the repetitions)", 2)
    named = [a for a in args if a in NO_RESULTS]
    if named:
        raise InterleaveError(f"compare --interleave: {text!r}: {named[0]} makes a run that "
                              f"measures nothing to compare", 2)
    return args


def checked(plans: dict[str, list[str]]) -> None:
    """Each plan's own check (-quit: its options, config, files and resources) before any
    run, so a bad plan B is refused as bad input (exit 2) before plan A has run."""
    for label, args in plans.items():
        proc = subprocess.run([sys.executable, "-m", "torque_async", *args, "-quit"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            last = last.removeprefix("torque-async: error: ")
            raise InterleaveError(f"compare --interleave: plan {label} "
                                  f"({shlex.join(args)!r}) is refused: {last}", 2)


def order(times: int) -> list[tuple[str, int]]:
    """The runs in the order they run: ('A', 0), ('B', 0), ('A', 1), ('B', 1), ..."""
    return [(label, k) for k in range(times) for label in "AB"]


def series(times: int, run_one: Callable[[str, int], dict[str, Any]]) \
        -> tuple[dict[str, Any], dict[str, Any]]:
    """A's and B's documents, each holding its `times` runs as -repeat repetitions; `run_one`
    (label, k) runs one and returns its results document."""
    docs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for label, k in order(times):
        docs[label].append(run_one(label, k))
    return repeated(docs["A"]), repeated(docs["B"])


def repeated(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Single runs of one plan as one -repeat document: the first's, every run's tests its
    repetitions, every run's failures and tests cut short."""
    first = docs[0]
    runs = [{"tests": d["tests"]} for d in docs]
    return {**first, "repeats": {"count": len(docs), "runs": runs, "summary": []},
            "command": f"{first['command']} (interleaved: {len(docs)} runs)",
            "failures": [f for d in docs for f in d.get("failures") or ()],
            "cut_short": [c for d in docs for c in d.get("cut_short") or ()],
            "interrupted": next((d["interrupted"] for d in docs if d.get("interrupted")), None)}


def runner(plans: dict[str, list[str]], times: int, where: str,
           say: Callable[[str], None]) -> Callable[[str, int], dict[str, Any]]:
    """run_one for series(): plan `label` as its own torque-async command, its -json in
    `where`; a run that did not end well raises InterleaveError."""
    def run_one(label: str, k: int) -> dict[str, Any]:
        path = os.path.join(where, f"{label}{k}.json")
        proc = subprocess.Popen([sys.executable, "-m", "torque_async", *plans[label],
                                 "-json", path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            say(f"compare --interleave: run {k + 1} of {times} of {label}: "
                f"torque-async {shlex.join(plans[label])}")
            _, err = proc.communicate()
        finally:                              # (a signal here: the run ends with us)
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        if proc.returncode:
            last = (err.strip().splitlines() or ["no message"])[-1]
            code = 128 - proc.returncode if proc.returncode < 0 else \
                proc.returncode if proc.returncode > 128 else 1
            raise InterleaveError(f"compare --interleave: run {k + 1} of {label} ended with "
                                  f"exit {proc.returncode}: {last}", code)
        return {**export.load(path), "command": shlex.join(plans[label])}   # (less -json)
    return run_one


class Stopped(Exception):
    """A signal (SIGINT, SIGTERM, SIGHUP) while the runs went on."""


def stop(signum: int, frame) -> None:
    raise Stopped(signum)


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(plan_a: str, plan_b: str, times: int, say: Callable[[str], None]) \
        -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the two plans alternately `times` times each; their -repeat documents. A signal
    ends the run under way (runner: terminated) and the series, exit 128 + n."""
    plans = {"A": plan_args(plan_a), "B": plan_args(plan_b)}
    where = tempfile.mkdtemp(prefix="torque-async-interleave.")
    before = {s: signal.signal(s, stop) for s in STOPS}
    try:
        checked(plans)
        return series(times, runner(plans, times, where, say))
    except Stopped as e:
        name = signal.Signals(e.args[0]).name
        raise InterleaveError(f"compare --interleave: interrupted by {name}: nothing "
                              f"compared", 128 + e.args[0]) from None
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        shutil.rmtree(where, ignore_errors=True)
