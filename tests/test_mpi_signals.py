"""Under an MPI launcher: the MPI library's start leaves the stop signals to the run."""
from __future__ import annotations

import os
import signal
import sys
import types

from torque_async import cluster, orchestrator


class OneRank:
    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def allgather(self, mine):
        return [mine]


def test_the_mpi_library_s_start_leaves_the_stop_signals_to_the_run(monkeypatch):
    """UCX (the mpich wheel's ch4:ucx) took SIGHUP as its debug signal once MPI started: a
    rank's SIGHUP was swallowed and 'UCX DEBUG' lines landed in the report. Its start here
    (a stand-in for mpi4py's import) sees UCX_DEBUG_SIGNO=0 and takes SIGHUP as UCX does; the
    run's handler is back after it. A UCX_DEBUG_SIGNO the user set is kept."""
    seen = []

    class MPI4PY(types.ModuleType):
        def __getattr__(self, name):               # `from mpi4py import MPI`: MPI_Init
            if name != "MPI":
                raise AttributeError(name)
            seen.append(os.environ.get("UCX_DEBUG_SIGNO"))
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            return types.SimpleNamespace(COMM_WORLD=OneRank())
    monkeypatch.setitem(sys.modules, "mpi4py", MPI4PY("mpi4py"))
    monkeypatch.setattr(cluster, "_job", None)
    monkeypatch.delenv("UCX_DEBUG_SIGNO", raising=False)
    before = signal.signal(signal.SIGHUP, orchestrator.raise_interrupted)
    try:
        assert cluster.start(0).size == 1
        assert signal.getsignal(signal.SIGHUP) is orchestrator.raise_interrupted
        job = cluster._job
        assert cluster.start(0) is job and seen == ["0"]     # MPI starts once a process
        monkeypatch.setattr(cluster, "_job", None)
        monkeypatch.setenv("UCX_DEBUG_SIGNO", "SIGUSR2")
        cluster.start(0)
    finally:
        signal.signal(signal.SIGHUP, before)
    assert seen == ["0", "SIGUSR2"]
