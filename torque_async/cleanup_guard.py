"""The clean-up guard of one MPI rank: `python -m torque_async.cleanup_guard PID SEGMENT DIR`.

MPI ends the other ranks of a job with SIGKILL to their process groups when one rank dies or
calls MPI_Abort, so a rank cannot clean up after itself then. The guard runs in its own
session, waits for its rank's end (EOF on stdin) and, unless the rank said "done", kills what
is left of the rank's process group (its workers), removes the rank's results segment (if the
rank made it) and its scratch directory.
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import sys

from .results import free_segment, owner_of


def clean(pid: int, segment: str, scratch_dir: str) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)         # a rank started by mpiexec leads its own group
    except (ProcessLookupError, PermissionError):     # not a group leader: no group of its own
        pass
    if owner_of(segment) == pid:
        free_segment(segment)
    for made in glob.glob(f"{glob.escape(scratch_dir)}.*"):    # scratch.directory() + mkdtemp's
        shutil.rmtree(made, ignore_errors=True)                # random suffix (a link: refused)


def main(argv: list[str]) -> None:
    pid, segment, scratch_dir = int(argv[0]), argv[1], argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # a Ctrl-C meant for the run
    if sys.stdin.buffer.read() != b"done":
        clean(pid, segment, scratch_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
