"""Running a plan more than once: -repeat's repetitions and -baseline's runs of each group alone.

Every run is one orchestrator.run: its own results segment, spawned workers, set-up, barrier and
measured window (set-up is not shared between runs: each makes its scratch files and buffers
again). With -baseline each repetition runs every group alone, then the whole plan together
(ABAB...); the first failure or interrupt ends the series. Under mpiexec each of these
runs is one run of every rank (the ranks meet before it and rank 0 gathers its records after
it: cluster.py), so rank 0's outcomes hold every rank's records.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import figures, orchestrator
from .io import files, identity
from .outcome import Outcome
from .plan import Group, Plan, Proc
from .results import Record


@dataclass(frozen=True)
class Runs:
    plan: Plan
    together: tuple[Outcome, ...]               # the repetitions of the whole plan
    alone: tuple[tuple[Outcome, ...], ...] = ()  # -baseline: each group's runs alone, in order
    failures: tuple[str, ...] = ()               # every run's failures, each saying which run
    interrupted: int = 0
    ranks: int = 1                               # under mpiexec: every outcome holds every rank's
    unfinished: tuple[str, ...] = ()             # the tests a stop cut short, as failures say
    alone_group: int | None = None               # stopped_alone(): the plan's group whose run
                                                 # alone these are

    @property
    def alone_stop(self) -> str:
        """stopped_alone()'s run, in words ('' for any other)."""
        return "" if self.alone_group is None else f"group {self.alone_group} alone (-baseline)"

    @property
    def first(self) -> Outcome | None:
        return self.complete[0] if self.together else None

    @property
    def whole(self) -> tuple[Outcome, ...]:
        """The repetitions that ran to their end (none failed, nothing interrupted them)."""
        return tuple(o for o in self.together if not (o.failures or o.interrupted))

    @property
    def complete(self) -> tuple[Outcome, ...]:
        """The whole repetitions; the first when none was (its report says what went wrong)."""
        return self.whole or self.together[:1]

    def per_test(self, procs: tuple[Proc, ...]) -> list[list[dict[str, float | None]]]:
        """Each test's (in plan order) main figures in each complete repetition."""
        return [[figures.main_figures(o.records[i], p) for o in self.complete]
                for i, p in enumerate(procs)]

    def alone_records(self) -> list[tuple[Proc, list[Record]]]:
        """-baseline: each test's process in its group's plan alone and its records there (one
        per repetition), in the order of the whole plan's processes (rank by rank: each rank's
        records of a group alone follow the previous rank's)."""
        out = []
        for rank in range(self.ranks):
            for group, outcomes in zip(self.plan.groups, self.alone):
                mine = alone_plan(self.plan, group).procs()
                out += [(proc, [o.records[rank * len(mine) + k] for o in outcomes])
                        for k, proc in enumerate(mine)]
        return out

    def stopped_alone(self) -> Runs:
        """-baseline stopped (a signal, a failure) in a group's run alone, before anything ran
        together: that run as one of its own (the group alone, no baseline), so the report and
        -json show what it measured and what cut it short.
        Its group is the plan's group 0 (the lines of the run name it as it ran), and
        `alone_group` the index it has in the plan; the settings keep -baseline, as asked (no
        figures alone: `alone` is empty)."""
        k = len(self.alone) - 1
        return replace(self, plan=alone_plan(self.plan, replace(self.plan.groups[k], index=0)),
                       together=self.alone[-1], alone=(), alone_group=k)

    def alone_runs(self, procs: tuple[Proc, ...]) -> list[list[dict[str, float | None]]]:
        """-baseline: each test's main figures in each of its runs alone, in the order of the
        whole plan's processes."""
        out = [[figures.main_figures(r, proc) for r in recs] for proc, recs in
               self.alone_records()]
        assert len(out) == len(procs)
        return out

    def alone_figures(self, procs: tuple[Proc, ...]) -> list[dict[str, float | None]]:
        """-baseline: each test's main figures alone (medians over the repetitions)."""
        return [figures.medians(runs) for runs in self.alone_runs(procs)]


def alone_plan(plan: Plan, group: Group) -> Plan:
    """The plan with only this group (same options, same seed)."""
    return replace(plan, groups=(group,))


class Pins:
    """Who each -f file is (identity.pin: device, inode and birth time) as the plan's check saw
    it (Plan.pins, validate.py), or as the run that made it left it. Every open for writing of
    an -f file opens only that file (io/files.py: refused at the open, in any run); a repetition
    after the first also refuses, before any of its runs, a file replaced since (read or
    written), so the repetitions before it stay whole. (That check is a single host's: under
    mpiexec a rank that did not run would hold the others at their meeting; each rank's opens
    still check their own files.)"""
    def __init__(self, paths, seen: dict | None = None):
        self.paths, self.seen = tuple(dict.fromkeys(paths)), {} if seen is None else seen

    who = staticmethod(identity.pin)

    def note(self) -> None:
        for path in self.paths:
            if path not in self.seen and (now := self.who(path)) is not None:
                self.seen[path] = now

    def replaced(self) -> list[str]:
        return [f"{files.replaced(path)}; nothing ran"
                for path, was in self.seen.items() if self.who(path) != was]


def once(plan: Plan, linesize: int, name: str, k: int, times: int, job=None,
         pins: Pins | None = None, check: bool = False) -> tuple[Outcome, list[str], list[str]]:
    """Run the plan once, repetition k of `times`: its outcome, failures and the tests cut
    short, each line saying which run (`name` and the repetition). `job` (under mpiexec, a
    cluster.Cluster): every rank's run meets the others' (job.meet) and its records are
    gathered (job.gather). `pins` notes the -f files; with `check` (a repetition's first run,
    after the first repetition) a run whose -f files were replaced since does not run."""
    which = ", ".join(filter(None, (name, times > 1 and f"repetition {k + 1} of {times}")))
    said = f"{which}: " if which else ""
    if pins is not None:
        if check and not job and (gone := pins.replaced()):
            return Outcome((), tuple(gone)), [said + f for f in gone], []
        pins.note()
    outcome = orchestrator.run(plan, linesize, job and job.meet)
    outcome = job.gather(outcome, plan) if job else outcome
    if pins is not None:
        pins.note()
    return outcome, [said + f for f in outcome.failures], [said + f for f in outcome.unfinished]


def stopped(outcome: Outcome) -> bool:
    return bool(outcome.failures or outcome.interrupted)


def series(plan: Plan, linesize: int, times: int, name: str, job=None) \
        -> tuple[list[Outcome], list[str], list[str]]:
    """Run the plan `times` times (once()), stopping at a failure or an interrupt; the
    outcomes, the failures and the tests cut short."""
    outcomes, lines, cut = [], [], []
    pins = Pins(plan.settings.files, plan.pins)
    for k in range(times):
        outcome, said, short = once(plan, linesize, name, k, times, job, pins, k > 0)
        outcomes.append(outcome)
        lines += said
        cut += short
        if stopped(outcome):
            break
    return outcomes, lines, cut


def run(plan: Plan, linesize: int, job=None) -> Runs:
    """The plan's -repeat repetitions; with -baseline each repetition runs every group alone,
    then the plan together (interleaved, ABAB...: a drift of the machine falls on both sides
    alike, not on all of one side). The first failure or interrupt ends the series: stopped in
    a run alone, the repetitions before it are kept whole (their runs alone and together), and
    before any ran together the runs alone are all there is (stopped_alone()). `job`: see
    once() (rank 0's Runs then counts every rank)."""
    times = plan.settings.repeat
    ranks = job.size if job and not job.rank else 1
    if not plan.settings.baseline:
        together, lines, cut = series(plan, linesize, times, "", job)
        return Runs(plan, tuple(together), (), tuple(lines), together[-1].interrupted, ranks,
                    tuple(cut))
    alone: list[list[Outcome]] = [[] for _ in plan.groups]
    together, failures, unfinished = [], [], []
    pins = Pins(plan.settings.files, plan.pins)
    for k in range(times):
        for group, mine in zip(plan.groups, alone):
            outcome, lines, cut = once(alone_plan(plan, group), linesize,
                                       f"group {group.index} alone (-baseline)", k, times, job,
                                       pins, k > 0 and group is plan.groups[0])
            mine.append(outcome)
            failures += lines
            unfinished += cut
            if stopped(outcome):
                kept = [tuple(runs[:len(together)] if together else runs) for runs in alone
                        if runs]
                return Runs(plan, tuple(together), tuple(kept), tuple(failures),
                            outcome.interrupted, ranks, tuple(unfinished))
        outcome, lines, cut = once(plan, linesize, "", k, times, job, pins)
        together.append(outcome)
        failures += lines
        unfinished += cut
        if stopped(outcome):
            break
    return Runs(plan, tuple(together), tuple(map(tuple, alone)), tuple(failures),
                together[-1].interrupted, ranks, tuple(unfinished))


def with_alone_rates(records: tuple[Record, ...], alone: list[dict[str, float | None]]) \
        -> tuple[Record, ...]:
    """-baseline: spinWait's idle loop rate is its rate in its run alone (the baseline), which
    replaces the short calibration it makes before the start without -baseline."""
    return tuple(replace(r, ref_rate=a["loops_per_s"]) if a["loops_per_s"] else r
                 for r, a in zip(records, alone))
