"""The report of a run on several ranks (mpiexec; see cluster.py): pure functions of what rank 0
gathered. The records of every rank, already on rank 0's clock, are numbered on from one rank
to the next (rank 0's tests first); the table gains Host and Rank columns; each host gets a
block of its own totals (and, where its machine differs from rank 0's, the header lines that
differ); the start skew and the clock-offset uncertainty are stated.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from . import report
from .plan import Plan, Proc
from .results import Record
from .sysinfo import SysInfo, header_lines
from .units import NS_PER_MS, mb_per_s


@dataclass(frozen=True)
class Rank:
    """What one rank ran and where, its records already on rank 0's clock."""
    rank: int
    host: str
    pid: int
    offset: int                   # ns: its CLOCK_MONOTONIC minus rank 0's
    uncertainty: int              # ns: how far the offset may be off
    records: tuple[Record, ...]
    shares_clock: bool = False    # on rank 0's kernel: offset 0, exact (not measured)

    @property
    def release(self) -> int:
        """Its time zero (its tests' release) on rank 0's clock; 0 if none measured."""
        return report.time_zero(self.records)


@dataclass(frozen=True)
class ClusterRun:
    """What report.render needs of a cluster run: `columns`, `where(row)` and `lines(t0)`."""
    ranks: tuple[Rank, ...]
    plan: Plan                         # rank 0's (every rank runs the same plan)
    machines: dict[str, SysInfo] = field(default_factory=dict)   # each host's, rank 0's first
    columns = ",Host,Rank"             # the table's extra columns

    @property
    def plan_procs(self) -> tuple[Proc, ...]:
        """One rank's processes."""
        return self.plan.procs()

    @property
    def records(self) -> tuple[Record, ...]:
        k = len(self.plan_procs)
        return tuple(replace(rec, row=r.rank * k + rec.row) for r in self.ranks for rec in r.records)

    @property
    def procs(self) -> tuple[Proc, ...]:
        k = len(self.plan_procs)
        return tuple(replace(p, row=r.rank * k + p.row) for r in self.ranks for p in self.plan_procs)

    def rank_of(self, row: int) -> Rank:
        return self.ranks[row // len(self.plan_procs)]

    def where(self, row: int) -> str:
        """The table's Host and Rank columns of a row."""
        r = self.rank_of(row)
        return f", {r.host}, {r.rank}"

    def hosts(self) -> dict[str, list[Rank]]:
        out: dict[str, list[Rank]] = {}
        for r in self.ranks:
            out.setdefault(r.host, []).append(r)
        return out

    @property
    def skew(self) -> int:
        """ns between the first and the last rank's release, on rank 0's clock."""
        releases = [r.release for r in self.ranks if r.release]
        return max(releases) - min(releases) if releases else 0

    @property
    def uncertainty(self) -> int:
        return max(r.uncertainty for r in self.ranks)

    @property
    def skew_resolved(self) -> bool:
        """Whether the start skew exceeds the clock-offset uncertainty (always, with none)."""
        return self.skew > self.uncertainty or not self.uncertainty

    def skew_advice(self) -> str:
        """Why the tests of all ranks did not overlap when each rank's own did: the ranks'
        start skew ('' when a rank's own tests did not overlap either)."""
        windows = [report.overlap_window(r.records) for r in self.ranks]
        if any(w and w[1] <= w[0] for w in windows):
            return ""
        return (f"each rank's own tests ran together, but the ranks started "
                f"{self.skew / 1000:.1f} us apart (start skew) and a rank's tests ended before "
                f"another rank's began: run longer tests (-n, -i) than the skew")

    def lines(self, t0: int, repetitions=()) -> list[str]:
        return cluster_lines(self, t0, repetitions)


def host_lines(run: ClusterRun, t0: int) -> list[str]:
    """One block per host: its ranks, its bandwidth per kind and total, its overlap window."""
    lines = []
    procs = run.procs
    for host, ranks in run.hosts().items():
        recs = [rec for r in ranks for rec in r.records]
        mine = [procs[i] for r in ranks for i in range(r.rank * len(run.plan_procs),
                                                      (r.rank + 1) * len(run.plan_procs))]
        kinds = report.group_bandwidths(run.plan, recs, mine)
        lines.append(f"Host {host}: rank{'s' * (len(ranks) > 1)} "
                     f"{' '.join(str(r.rank) for r in ranks)}; {len(recs)} tests; BW "
                     + ", ".join(f"{k} {v:.0f}" for k, v in kinds.items())
                     + f", Total {sum(kinds.values()):.0f} MB/s")
        window = report.overlap_window(recs)
        if window and window[1] > window[0]:
            lines.append(f"Host {host}: its {window[2]} tests ran together from "
                         f"{(window[0] - t0) // NS_PER_MS} ms to {(window[1] - t0) // NS_PER_MS} ms")
        lines += machine_lines(run, host)
    return lines


NAMED = ("hostname:", "Ethernet Address:")     # header lines that differ from host to host


def machine_lines(run: ClusterRun, host: str) -> list[str]:
    """How a host's machine compares with rank 0's (the report's header): the header lines that
    differ, its name and Ethernet address aside; none for rank 0's host (or none known)."""
    home = run.ranks[0].host
    if host == home or not {host, home} <= run.machines.keys():
        return []
    ours = header_lines(run.machines[home])
    differ = [theirs for mine, theirs in zip(ours, header_lines(run.machines[host]))
              if mine != theirs and not theirs.startswith(NAMED)]
    return [f"Host {host}: machine differs from rank 0's (the header's): {'; '.join(differ)}"
            if differ else f"Host {host}: machine as rank 0's (the header's)"]


def cluster_lines(run: ClusterRun, t0: int, repetitions=()) -> list[str]:
    """The cluster's block: ranks and hosts, the start skew, the clock offsets, every host,
    each group's aggregates, and the one total (of several `repetitions`, the BW: line's)."""
    resolved = "" if run.skew_resolved else ": within the clock-offset uncertainty, not resolved"
    hosts = len(run.hosts())
    several = len(repetitions) > 1
    return [f"Cluster: {len(run.ranks)} ranks on {hosts} host{'s' * (hosts > 1)}; "
            f"times on rank 0's clock" + ("; the blocks below are repetition 1's" * several),
            f"Start skew between ranks (first to last release): {run.skew / 1000:.1f} us{resolved}",
            clock_line(run),
            *host_lines(run, t0),
            *aggregate_lines(run),
            total_line(run, repetitions)]


def total_line(run: ClusterRun, repetitions=()) -> str:
    """The one total: the sum of every test's rate (torque's rule, the BW: line's Total: of
    several repetitions their median), beside IOR's aggregate of the run it comes from."""
    if len(repetitions) > 1:
        total = report.median_bandwidths(run.plan, repetitions, run.procs)[1]
        return (f"Cluster total: {total:.0f} MB/s (every test on every host: the sum of their "
                f"rates, the median of {len(repetitions)} repetitions, as the BW: line's Total)")
    total = sum(report.group_bandwidths(run.plan, run.records, run.procs).values())
    return (f"Cluster total: {total:.0f} MB/s (every test on every host: the sum of their "
            f"rates, the BW: line's Total); IOR's aggregate, every byte over the span from the "
            f"first start to the last finish: {span_rate(run.records):.0f} MB/s")


def span_rate(records) -> float:
    """IOR's aggregate: the bytes of every measured test over the span from the first start to
    the last finish, MB/s (each test's own rate covers only its own interval)."""
    timed = [r for r in records if r.finish > r.start]
    return mb_per_s(sum(r.sys_bytes for r in timed),
                    max(r.finish for r in timed) - min(r.start for r in timed)) if timed else 0.0


def aggregates(run: ClusterRun) -> list[dict[str, Any]]:
    """Per group: the sum of its tests' rates (torque's rule) and IOR's aggregate (its bytes
    over its span), the spread of its figure over the ranks (each rank's sum of rates) and,
    for a group timed by -t, the fewest and most transfers of a rank (IOR's stonewall figure:
    how unequal the ranks' shares of the work were), MB/s."""
    out = []
    for group, label in zip(run.plan.groups, report.group_labels(run.plan)):
        mine = [rec for rec, proc in zip(run.records, run.procs)
                if proc.group.index == group.index]
        per_rank: dict[int, list[Record]] = {}
        for rec in mine:
            per_rank.setdefault(run.rank_of(rec.row).rank, []).append(rec)
        rates = [sum(mb_per_s(r.sys_bytes, r.elapsed) for r in recs) for recs in per_rank.values()]
        counts = [sum(r.transfers for r in recs) for recs in per_rank.values()]
        out.append({"group": group.index, "label": label, "sum_of_rates": sum(rates),
                    "span_rate": span_rate(mine),
                    "per_rank": {"min": min(rates), "max": max(rates),
                                 "mean": statistics.mean(rates),
                                 "stddev": statistics.pstdev(rates)},
                    "transfers_per_rank": {"min": min(counts), "max": max(counts)}
                    if group.local.t is not None else None})
    return out


def aggregate_lines(run: ClusterRun) -> list[str]:
    """aggregates(), a line each (and one more for a group timed by -t)."""
    lines = []
    for g, group in zip(aggregates(run), run.plan.groups):
        each = g["per_rank"]
        lines.append(f"Group {g['group']} ({g['label']}): sum of rates {g['sum_of_rates']:.0f} "
                     f"MB/s; IOR's aggregate {g['span_rate']:.0f} MB/s; per rank min "
                     f"{each['min']:.0f}, max {each['max']:.0f}, mean {each['mean']:.0f}, "
                     f"stddev {each['stddev']:.0f} MB/s")
        if g["transfers_per_rank"]:
            lines.append(f"Group {g['group']} ({g['label']}) in its -t {group.local.t:g} s: "
                         f"transfers per rank min {g['transfers_per_rank']['min']}, max "
                         f"{g['transfers_per_rank']['max']} (stonewall)")
    return lines


def clock_line(run: ClusterRun) -> str:
    """How the ranks' clocks were put on rank 0's: shared (its kernel, offset 0 exactly) or
    measured by ping-pong."""
    shared = [r.rank for r in run.ranks if r.shares_clock or not r.rank]
    if len(shared) == len(run.ranks):
        return ("Clocks: every rank runs on rank 0's kernel and reads its CLOCK_MONOTONIC "
                "(offsets 0, exact)")
    also = f"; ranks {' '.join(map(str, shared))} run on rank 0's kernel and share its clock " \
           f"(offset 0, exact)" if len(shared) > 1 else ""
    return (f"Clock offsets to rank 0 measured to within {run.uncertainty / 1000:.1f} us "
            f"(largest offset {max(abs(r.offset) for r in run.ranks) / 1000:.1f} us){also}")


def skew_lines(runs: list[ClusterRun]) -> list[str]:
    """-repeat under mpiexec: the start skew of each repetition (its clock offsets were measured
    after it), flagged where below the clock-offset uncertainty."""
    return ["Start skew between ranks in each repetition (us): " + ", ".join(
        f"{r.skew / 1000:.1f}" + ("" if r.skew_resolved else " (not resolved)")
        for r in runs)]


def ranks_entry(run: ClusterRun, t0: int) -> dict[str, Any]:
    """One run's start skew and every rank's clock offset and release."""
    return {"start_skew_ns": run.skew, "offset_uncertainty_ns": run.uncertainty,
            "aggregates": {"groups": aggregates(run), "total": {
                "sum_of_rates": sum(report.group_bandwidths(run.plan, run.records,
                                                            run.procs).values()),
                "span_rate": span_rate(run.records)}},
            "ranks": [{"rank": r.rank, "host": r.host, "pid": r.pid, "offset_ns": r.offset,
                       "uncertainty_ns": r.uncertainty,
                       "shares_clock": r.shares_clock or not r.rank,
                       "release_ns": r.release - t0 if r.release else None} for r in run.ranks]}


def event_loop(run: ClusterRun) -> dict[str, Any] | None:
    """The busiest of the ranks' event loops (each rank runs its own)."""
    return report.loop_busy(run.records, run.procs, report.rank_of(run))


def document(runs: list[ClusterRun], doc: dict[str, Any]) -> dict[str, Any]:
    """The -json document of a cluster run (`runs`: each complete repetition's, the first
    the document's top level): each test's host and rank, every repetition's too; each
    repetition's ranks (their offsets were measured after it); every host's machine."""
    first = runs[0]

    def placed(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**t, "host": first.rank_of(t["proc"]).host,
                 "rank": first.rank_of(t["proc"]).rank} for t in tests]
    repeats = doc["repeats"] and {**doc["repeats"], "runs": [
        {**entry, "tests": placed(entry["tests"]), "event_loop": event_loop(run),
         "cluster": ranks_entry(run, entry["time_zero_ns"])}
        for entry, run in zip(doc["repeats"]["runs"], runs)]}
    hosts = [{"host": host, "ranks": [r.rank for r in ranks],
              "system": asdict(first.machines[host]) if host in first.machines else None}
             for host, ranks in first.hosts().items()]
    return {**doc, "tests": placed(doc["tests"]), "repeats": repeats,
            "event_loop": event_loop(first),
            "cluster": {**ranks_entry(first, doc["time_zero_ns"]), "hosts": hosts}}
