"""Running a plan more than once: -repeat's repetitions and -baseline's runs of each group alone.

Every run is one orchestrator.run: its own results segment, spawned workers, set-up, barrier and
measured window (set-up is not shared between runs: each makes its scratch files and buffers
again). With -baseline each group first runs alone, as many times as -repeat says, then the
whole plan does; the first failure or interrupt ends the series.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import figures, orchestrator
from .orchestrator import Outcome
from .plan import Group, Plan, Proc
from .results import Record


@dataclass(frozen=True)
class Runs:
    plan: Plan
    together: tuple[Outcome, ...]               # the repetitions of the whole plan
    alone: tuple[tuple[Outcome, ...], ...] = ()  # -baseline: each group's runs alone, in order
    failures: tuple[str, ...] = ()               # every run's failures, each saying which run
    interrupted: int = 0

    @property
    def first(self) -> Outcome | None:
        return self.complete[0] if self.together else None

    @property
    def complete(self) -> tuple[Outcome, ...]:
        """The repetitions that ran to their end (none failed, nothing interrupted them); the
        first when none did (its report says what went wrong)."""
        return tuple(o for o in self.together if not (o.failures or o.interrupted)) \
            or self.together[:1]

    def per_test(self, procs: tuple[Proc, ...]) -> list[list[dict[str, float | None]]]:
        """Each test's (in plan order) main figures in each complete repetition."""
        return [[figures.main_figures(o.records[i], p) for o in self.complete]
                for i, p in enumerate(procs)]

    def alone_figures(self, procs: tuple[Proc, ...]) -> list[dict[str, float | None]]:
        """-baseline: each test's main figures alone (medians over the repetitions), in the
        order of the whole plan's processes."""
        out = []
        for group, outcomes in zip(self.plan.groups, self.alone):
            mine = alone_plan(self.plan, group).procs()
            for k in range(len(mine)):
                out.append(figures.medians([figures.main_figures(o.records[k], mine[k])
                                            for o in outcomes]))
        assert len(out) == len(procs)
        return out


def alone_plan(plan: Plan, group: Group) -> Plan:
    """The plan with only this group (same options, same seed)."""
    return replace(plan, groups=(group,))


def series(plan: Plan, linesize: int, times: int, name: str, meet=None) \
        -> tuple[list[Outcome], list[str]]:
    """Run the plan `times` times, stopping at a failure or an interrupt; the outcomes and the
    failures, each line saying which run (`name` and the repetition)."""
    outcomes, lines = [], []
    for k in range(times):
        outcome = orchestrator.run(plan, linesize, meet)
        outcomes.append(outcome)
        which = ", ".join(filter(None, (name, times > 1 and f"repetition {k + 1} of {times}")))
        lines += [f"{which}: {f}" if which else f for f in outcome.failures]
        if outcome.failures or outcome.interrupted:
            break
    return outcomes, lines


def run(plan: Plan, linesize: int, meet=None) -> Runs:
    """-baseline's alone runs (if asked), then the plan's -repeat repetitions; `meet`: see
    orchestrator.run (under mpiexec, which runs the plan once: cluster.refuse)."""
    times, alone, failures = plan.settings.repeat, [], []
    if plan.settings.baseline:
        for group in plan.groups:
            outcomes, lines = series(alone_plan(plan, group), linesize, times,
                                     f"group {group.index} alone (-baseline)")
            alone.append(tuple(outcomes))
            failures += lines
            if lines or outcomes[-1].interrupted:
                return Runs(plan, (), tuple(alone), tuple(failures), outcomes[-1].interrupted)
    together, lines = series(plan, linesize, times, "", meet)
    return Runs(plan, tuple(together), tuple(alone), tuple(failures + lines),
                together[-1].interrupted)


def with_alone_rates(records: tuple[Record, ...], alone: list[dict[str, float | None]]) \
        -> tuple[Record, ...]:
    """-baseline: spinWait's idle loop rate is its rate in its run alone (the baseline), which
    replaces the short calibration it makes before the start without -baseline."""
    return tuple(replace(r, ref_rate=a["loops_per_s"]) if a["loops_per_s"] else r
                 for r, a in zip(records, alone))
