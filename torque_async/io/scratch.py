"""Scratch files: what a file test works on when the user named no file.

They live in one directory per run, torque-async-scratch.PID in the working directory (the disk
a user runs from is the disk under test), made on first use and removed when its last user is
done; an exit hook removes it too if a run ends any other way. Files are written in full with
the data pattern before the test (a sparse or fallocated file would read from no disk at all),
flushed, and dropped from the page cache.
"""
from __future__ import annotations

import atexit
import os
import shutil

import aiofiles
import aiofiles.os
import psutil

from torque_async.testing.api import TestError

from .data import pattern

CHUNK = 8 << 20
_dir: str | None = None
_users = 0


PREFIX = "torque-async-scratch."
TAG = ""                           # under mpiexec: ".HOST.rRANK" (a directory shared by hosts)


def directory() -> str:
    return os.path.abspath(f"{PREFIX}{os.getpid()}{TAG}")


def leftovers(where: str = ".") -> list[str]:
    """Scratch directories in `where` whose run is gone (a run killed with SIGKILL); a rank's
    (tagged by host and rank) is its clean-up guard's to remove."""
    found = []
    for name in sorted(os.listdir(where)):
        pid = name[len(PREFIX):]
        if name.startswith(PREFIX) and pid.isdigit() and not psutil.pid_exists(int(pid)):
            found.append(os.path.abspath(os.path.join(where, name)))
    return found


def path(name: str) -> str:
    """A scratch file's path; its user counts until release(). The directory is made on
    first use."""
    global _dir, _users
    if _dir is None:
        try:
            os.makedirs(directory(), exist_ok=True)
        except OSError as e:
            raise TestError(f"cannot make the scratch directory {directory()}: {e.strerror} "
                            f"(run from a writable directory, or name files with -f)") from None
        _dir = directory()
    _users += 1
    return os.path.join(_dir, name)


def release() -> None:
    """One user of the scratch directory is done; the last one removes it."""
    global _users
    _users -= 1
    if not _users:
        remove()


@atexit.register
def remove() -> None:
    """Remove the scratch directory and all in it (also at exit, however the run ended)."""
    global _dir
    if _dir is not None:
        shutil.rmtree(_dir, ignore_errors=True)
        _dir = None


async def write_pattern(path: str, size: int, tag: int = 0) -> None:
    """Write `size` bytes of the data pattern to `path` (created or overwritten), flushed to
    the device and dropped from the page cache. Not timed."""
    async with aiofiles.open(path, "wb") as fh:
        for at in range(0, size, CHUNK):
            await fh.write(pattern(at, min(CHUNK, size - at), tag))
        await fh.flush()
        fd = fh.fileno()
        await aiofiles.os.wrap(os.fdatasync)(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
