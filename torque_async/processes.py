"""A run's worker processes: each one's spec, their launch, their stop, and how each ended."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import semaphores, workstart
from .deadlines import STOP_GRACE
from .kind_api.api import WorkerSpec
from .kinds import KINDS, WORKER, WORKER_PROCESS, resolve
from .plan import Plan, Proc
from .results import (ABORTED, DONE, MEASURED, NEW, READY, RUNNING, STATE_NAMES, Results,
                      signals_held)


def describe(proc: Proc) -> str:
    g = proc.group
    return f"test {proc.row} (-{g.action}{' ' + ' '.join(map(str, g.args)) if g.args else ''}, " \
           f"group {g.index}, process {proc.index})"


def spec_for(plan: Plan, proc: Proc, segment: str, linesize: int,
             cpus: set[int] | None = None, parent: int = 0) -> WorkerSpec:
    """A worker's spec, stamped now: made just before its process is started."""
    return WorkerSpec(segment, proc, plan.settings.seed, linesize, plan.slow,
                      calibrate=not plan.settings.baseline, launched=time.monotonic_ns(),
                      cpus=frozenset(cpus) if cpus else None, parent=parent)


def ended(procs, results: Results, exitcodes: dict[int, int | None], killed: set[int],
          interrupted: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """How every process that did not finish well ended, saying why: (the failures, the tests a
    stop cut short). A test the run's stop ended is a failure only when no signal stopped the
    run; one whose measured part the stop ended before its limit (not `whole`: a signal's stop
    or a failure's) was cut short, as was one that never started beside a failure."""
    failed, cut, unstarted = [], [], []
    until = "the stop" if interrupted else "a failure stopped the run"
    for proc, rec in zip(procs, results.snapshot()):
        code, was_killed = exitcodes.get(proc.row, 0), proc.row in killed
        if rec.error:
            failed.append(f"{describe(proc)} failed: {rec.error}")
        elif rec.state in (NEW, READY, ABORTED) and (interrupted or was_killed or not code):
            unstarted.append(f"{describe(proc)} not started: the run was "
                             f"{'interrupted' if interrupted else 'stopped'}")
        elif rec.state == DONE and was_killed:
            continue                     # its part was over: killed while it exited
        elif rec.state == DONE and rec.transfers and not rec.whole:
            cut.append(f"{describe(proc)} stopped while running: measured until {until}")
        elif rec.state == DONE and not rec.whole:
            ramp = rec.ramp_transfers
            cut.append(f"{describe(proc)} stopped before it measured anything"
                       + (f" ({ramp} unmeasured transfers of its -ramp)" if ramp else ""))
        elif was_killed:
            (cut if interrupted else failed).append(
                f"{describe(proc)} did not stop within {STOP_GRACE} s of the stop: killed "
                f"while {STATE_NAMES[rec.state]}")
        elif code is not None and code < 0:
            failed.append(f"{describe(proc)} died: {signal.Signals(-code).name}")
        elif rec.state in (RUNNING, MEASURED) and interrupted:
            cut.append(f"{describe(proc)} stopped while {STATE_NAMES[rec.state]}")
        elif rec.state in (READY, RUNNING, MEASURED) or code:
            failed.append(f"{describe(proc)} stopped while {STATE_NAMES[rec.state]} "
                          f"(exit code {code})")
    (cut if interrupted or failed else failed).extend(unstarted)   # (alone: nothing else
    return tuple(failed), tuple(cut)                               # says why they did not)


@dataclass
class Workers:
    """A run's worker processes (by row) and what they meet at: the start barrier and the lock
    that lets spinWait measure its idle rate alone (named semaphores, `sems` their names)."""
    barrier: Any
    calibration_lock: Any
    sems: tuple[str, ...]
    children: dict[int, mp.process.BaseProcess] = field(default_factory=dict)
    killed: set[int] = field(default_factory=set)
    broken: bool = False           # the barrier's abort was started

    @classmethod
    def meeting(cls, plan: Plan, results: Results) -> Workers:
        """None launched yet; their barrier and lock made, their names in the segment's header."""
        parties = sum(KINDS[p.group.action].runs_in == WORKER for p in plan.procs()) + 1
        (barrier, lock), sems = semaphores.made_by(
            lambda: (workstart.FORKED.Barrier(parties), workstart.FORKED.Lock()))
        results.header["sems"][:len(sems)] = [n.encode() for n in sems]
        return cls(barrier, lock, sems)

    def launch(self, plan: Plan, results: Results, linesize: int) -> None:
        """Start the plan's workers (workstart.py: forked from the server, or -execChild's new
        interpreters), each on the CPUs the command has at its launch (-affinityParent's)."""
        segment = results.shm.name.lstrip("/")
        with signals_held():
            workstart.start_server(plan)
            for proc in plan.procs():
                if KINDS[proc.group.action].runs_in == WORKER:
                    self.children[proc.row] = self.start(plan, proc, segment, linesize)

    def start(self, plan: Plan, proc: Proc, segment: str, linesize: int):
        local = proc.group.local
        parent_cpus = os.sched_getaffinity(0)
        if local.affinityParent is not None:
            os.sched_setaffinity(0, {local.affinityParent})
        spec = spec_for(plan, proc, segment, linesize, os.sched_getaffinity(0),
                        workstart.parent(local))
        child = workstart.context(local).Process(
            target=resolve(WORKER_PROCESS), name=f"torque-async {describe(proc)}",
            args=(spec, self.barrier, self.calibration_lock))
        child.start()
        if local.affinityParent is not None and not local.noResetParentAffinity:
            os.sched_setaffinity(0, parent_cpus)
        return child

    def break_barrier(self) -> None:
        """Abort the barrier, once, on a thread of its own: a multiprocessing Barrier's abort
        waits for every party waiting at it to wake, and one that died there never does (the
        loop, blocked, could then be stopped by no signal)."""
        if not self.broken:
            self.broken = True
            threading.Thread(target=self.barrier.abort, daemon=True,
                             name="torque-async barrier abort").start()

    def stop(self, results: Results) -> dict[int, int | None]:
        """Stop every worker: the stop flag first, then SIGKILL to those still running
        STOP_GRACE after it; one that never started testing has nothing to lose: at once. Their
        semaphores' names go; their exit codes, by row."""
        results.stop()
        self.break_barrier()
        deadline = time.monotonic() + STOP_GRACE
        states = results.rows["state"]
        for row, child in self.children.items():
            if states[row] not in (NEW, READY, ABORTED):
                child.join(max(0.0, deadline - time.monotonic()))
            if child.exitcode is None:
                child.kill()
                child.join()
                self.killed.add(row)
        self.forget()
        return {row: c.exitcode for row, c in self.children.items()}

    def forget(self) -> None:
        """Remove the semaphores' names (once every worker has opened them, or at the end)."""
        semaphores.forget(self.sems)
        self.sems = ()
