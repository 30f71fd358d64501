"""What one run ends with: its records, what failed, what a stop cut short."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .results import Record


@dataclass(frozen=True)
class Outcome:
    records: tuple[Record, ...]
    failures: tuple[str, ...]      # one line per test process that failed, by name
    interrupted: int = 0           # the signal (SIGINT, SIGTERM, SIGHUP) that stopped the run
    unfinished: tuple[str, ...] = ()   # the tests a stop (a signal, a failure) cut short
    cluster: Any = None            # under mpiexec, rank 0's: every rank's run, whose records these
                                   # are (report_cluster.ClusterRun; cluster.Cluster.gather)
