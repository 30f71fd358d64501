"""The report of a run on several ranks (mpiexec; see cluster.py): pure functions of what rank 0
gathered. The records of every rank, already on rank 0's clock, are numbered on from one rank
to the next (rank 0's tests first); the table gains Host and Rank columns; each host gets a
block of its own totals (and, where its machine differs from rank 0's, the header lines that
differ); the start skew and the clock-offset uncertainty are stated.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from . import report
from .plan import Plan, Proc
from .results import Record
from .sysinfo import SysInfo, header_lines
from .units import NS_PER_MS


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

    def lines(self, t0: int) -> list[str]:
        return cluster_lines(self, t0)


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


def cluster_lines(run: ClusterRun, t0: int) -> list[str]:
    """The cluster's block: ranks and hosts, the start skew, the clock offsets, every host."""
    kinds = report.group_bandwidths(run.plan, run.records, run.procs)
    resolved = "" if run.skew_resolved else ": within the clock-offset uncertainty, not resolved"
    hosts = len(run.hosts())
    return [f"Cluster: {len(run.ranks)} ranks on {hosts} host{'s' * (hosts > 1)}; "
            f"times on rank 0's clock",
            f"Start skew between ranks (first to last release): {run.skew / 1000:.1f} us{resolved}",
            clock_line(run),
            *host_lines(run, t0),
            f"Cluster total: {sum(kinds.values()):.0f} MB/s (every test on every host)"]


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
