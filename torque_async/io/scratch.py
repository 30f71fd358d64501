"""Scratch files: what a file test works on when the user named no file.

They live in one directory per run in the working directory (the disk a user runs from is the
disk under test): torque-async-scratch.PID.RANDOM (under mpiexec PID.HOST.rRANK.RANDOM), made
fresh and private (mkdtemp, mode 700) on first use and removed when its last user is done; an
exit hook removes it too if a run ends any other way. Its files are made new (O_CREAT|O_EXCL|O_NOFOLLOW) relative to the directory's
descriptor, so no name planted in the working directory is ever followed. Files are written in
full with the data pattern before the test (a sparse or fallocated file would read from no disk
at all), flushed, and dropped from the page cache.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile

import aiofiles
import aiofiles.os
import psutil

from torque_async.testing.api import TestError

from .data import pattern

CHUNK = 8 << 20
PREFIX = "torque-async-scratch."
NEW = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TAG = ""                           # under mpiexec: ".HOST.rRANK" (a directory shared by hosts)
_dir: str | None = None
_fd = -1                          # the directory's descriptor: files are opened relative to it
_users = 0


def directory() -> str:
    """This run's scratch directory less its random suffix (mkdtemp's): PREFIX PID TAG."""
    return os.path.abspath(f"{PREFIX}{os.getpid()}{TAG}")


def leftovers(where: str = ".", tag: str = "") -> list[str]:
    """Scratch directories in `where` whose run is gone (a run killed with SIGKILL): PID.RANDOM,
    or under mpiexec PID TAG .RANDOM of this host and rank (another host's pids mean nothing
    here; a rank's guard removes its own, see cleanup_guard.py)."""
    mine = re.compile(re.escape(PREFIX) + r"(\d+)" + re.escape(tag) + r"\.[^.]+")
    return [os.path.abspath(os.path.join(where, name)) for name in sorted(os.listdir(where))
            if (found := mine.fullmatch(name)) and not psutil.pid_exists(int(found[1]))]


def create(name: str) -> tuple[str, int]:
    """A new scratch file (path, descriptor open for reading and writing); its user counts until
    release(). The directory is made on first use."""
    global _dir, _fd, _users
    if _dir is None:
        where = directory()
        try:
            made = tempfile.mkdtemp(prefix=f"{os.path.basename(where)}.", dir=os.getcwd())
            _fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise TestError(f"cannot make the scratch directory {where}.*: {e.strerror} "
                            f"(run from a writable directory, or name files with -f)") from None
        _dir = made
    try:
        fd = os.open(name, NEW, 0o600, dir_fd=_fd)
    except OSError as e:
        raise TestError(f"cannot make the scratch file {os.path.join(_dir, name)}: "
                        f"{e.strerror}") from None
    _users += 1
    return os.path.join(_dir, name), fd


def reopen(name: str, flags: int) -> int:
    """Another descriptor of scratch file `name` (e.g. with O_DIRECT), never through a link."""
    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=_fd)


def release(name: str) -> None:
    """One user of the scratch directory is done with its file; the last one removes it."""
    global _users
    if _fd >= 0:
        try:
            os.unlink(name, dir_fd=_fd)
        except FileNotFoundError:
            pass
    _users -= 1
    if not _users:
        remove()


@atexit.register
def remove() -> None:
    """Remove the scratch directory and all in it (also at exit, however the run ended)."""
    global _dir, _fd
    if _dir is not None:
        os.close(_fd)
        shutil.rmtree(_dir, ignore_errors=True)
        _dir, _fd = None, -1


async def write_pattern(fd: int, size: int, tag: int = 0, path: str = "") -> None:
    """Write `size` bytes of the data pattern from the start of the file open on `fd` (a file
    torque-async made or checked: no path is opened here), flushed to the device and dropped
    from the page cache. Not timed. An OSError names `path`."""
    try:
        async with aiofiles.open(fd, "wb", closefd=False) as fh:
            for at in range(0, size, CHUNK):
                await fh.write(pattern(at, min(CHUNK, size - at), tag))
            await fh.flush()
            await aiofiles.os.wrap(os.fdatasync)(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError as e:
        raise OSError(e.errno, f"writing it: {e.strerror}", path) from None
