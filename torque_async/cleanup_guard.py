"""The clean-up guard of one MPI rank:
`python -m torque_async.cleanup_guard PID SEGMENT DIR [INODE FILE]... [-- FOLDER...]`.

MPI ends the other ranks of a job with SIGKILL to their process groups when one rank dies or
calls MPI_Abort, so a rank cannot clean up after itself then. The guard runs in its own
session, waits for its rank's end (EOF on stdin) and, unless the rank said "done" (after
MPI_Finalize: then it only removes the MPI files below, which MPICH sometimes leaves), kills what
is left of the rank's process group (its workers and their server), removes the rank's results
segment (if the rank made it), its scratch directory, its workers' server's socket directory,
and the MPI library's own files in /dev/shm that the rank had mapped (MPICH's
mpich_shm_JOB_NODE, which only MPI_Finalize removes): each FILE only while it is still the file
of that INODE, so another job's file of the same name is never touched; and each FOLDER of the
rank's own (capacity's private folders).
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import sys

from .results import NotASegment, free_segment, owner_of
from .workstart import PREFIX, base


def clean(pid: int, segment: str, scratch_dir: str, mpi_files: list[tuple[int, str]],
          folders: list[str] = ()) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)         # a rank started by mpiexec leads its own group
    except (ProcessLookupError, PermissionError):     # not a group leader: no group of its own
        pass
    try:
        if owner_of(segment) == pid:
            free_segment(segment)
    except NotASegment:                        # not the rank's: left alone
        pass
    left(pid, [*glob.glob(f"{glob.escape(scratch_dir)}.*"), *folders], mpi_files)  # scratch.
                                                 # directory() + mkdtemp's suffix (a link: refused)


def left(pid: int, made: list[str], mpi_files: list[tuple[int, str]]) -> None:
    """What process `pid`, killed, left: the folders it `made`, its workers' server's socket
    directory, its MPI library's files (remove_mpi_files)."""
    server = os.path.join(base(pid), f"{PREFIX}{pid}")                  # workstart.py's
    for folder in [*made, *glob.glob(f"{glob.escape(server)}.*")]:
        shutil.rmtree(folder, ignore_errors=True)
    remove_mpi_files(mpi_files)


def remove_mpi_files(mpi_files: list[tuple[int, str]]) -> None:
    """Each FILE still of its INODE: the rank's MPI job's own, left behind."""
    for inode, path in mpi_files:
        try:
            if os.lstat(path).st_ino == inode:
                os.unlink(path)
        except FileNotFoundError:          # another rank's guard on this host was first
            pass


def main(argv: list[str]) -> None:
    pid, segment, scratch_dir, *rest = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # a Ctrl-C meant for the run
    end = rest.index("--") if "--" in rest else len(rest)
    pairs, folders = rest[:end], rest[end + 1:]
    mpi_files = [(int(inode), path) for inode, path in zip(pairs[::2], pairs[1::2])]
    if sys.stdin.buffer.read() != b"done":
        clean(int(pid), segment, scratch_dir, mpi_files, folders)
    else:                        # the rank ended MPI (MPI_Finalize), which may leave the file
        remove_mpi_files(mpi_files)


if __name__ == "__main__":
    main(sys.argv[1:])
