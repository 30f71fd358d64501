"""Scratch files: what a file test works on when the user named no file.

They live in one directory per run in the working directory (the disk a user runs from is the
disk under test): torque-async-scratch.PID.RANDOM (under mpiexec PID.HOST.rRANK.RANDOM), made
fresh and private (mkdtemp, mode 700) on first use and removed when its last user is done; an
exit hook removes it too if a run ends any other way. Its files are made new
(O_CREAT|O_EXCL|O_NOFOLLOW) relative to the directory's descriptor, so no name planted in the
working directory is ever followed. Files are written in full with the data pattern before the
test (a sparse or fallocated file would read from no disk at all), by write_pattern: large
O_DIRECT writes where the file system takes them, several in flight; then flushed and dropped
from the page cache. The writer imports asyncio and aiofiles itself: the command looks for
leftovers() before its workers start, and loads the event loop's modules only after that.
"""
from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import mmap
import os
import re
import shutil
import signal
import tempfile
import threading

import numpy as np
import psutil

from torque_async.results import signals_held
from torque_async.kind_api.api import TestError

from . import identity
from .data import fill

CHUNK = 8 << 20                    # bytes per set-up write
IN_FLIGHT = 4                      # set-up writes in flight on a loop at once
ALIGN = 4096                       # what O_DIRECT writes are a multiple of
PREFIX = "torque-async-scratch."
NEW = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TAG = ""                           # under mpiexec: ".HOST.rRANK" (a directory shared by hosts)
_dir: str | None = None
_fd = -1                          # the directory's descriptor: files are opened relative to it
_users = 0
_removing: list[threading.Thread] = []  # release()'s removals under way
_gone = itertools.count()


def directory() -> str:
    """This run's scratch directory less its random suffix (mkdtemp's): PREFIX PID TAG."""
    return os.path.abspath(f"{PREFIX}{os.getpid()}{TAG}")


def leftovers(where: str = ".", tag: str = "", prefix: str = PREFIX) -> list[str]:
    """Scratch directories in `where` whose run is gone (a run killed with SIGKILL): PID.RANDOM,
    or under mpiexec PID TAG .RANDOM of this host and rank (another host's pids mean nothing
    here; a rank's guard removes its own, see cleanup_guard.py); or other directories named
    the same way after another prefix (the workers' server's, workstart.py). This user's
    only, and only a directory a run marked as its own (identity.mark_dir): never a user's of
a similar name, nor a file."""
    mine = re.compile(re.escape(prefix) + r"(\d+)" + re.escape(tag) + r"\.[^.]+")
    return [path for name in sorted(os.listdir(where))
            if (found := mine.fullmatch(name)) and not psutil.pid_exists(int(found[1]))
            and identity.is_marked_dir(path := os.path.abspath(os.path.join(where, name)))]


def owned(path: str) -> bool:
    """Whether this user made it (another user's, in a shared temp dir, is theirs to free)."""
    try:
        return os.lstat(path).st_uid == os.getuid()
    except OSError:
        return False


def create(name: str) -> tuple[str, int]:
    """A new scratch file (path, descriptor open for reading and writing); its user counts until
    release(). The directory is made on first use."""
    global _dir, _fd, _users
    if _dir is None:
        where = directory()
        try:
            made = tempfile.mkdtemp(prefix=f"{os.path.basename(where)}.", dir=os.getcwd())
            identity.mark_dir(made)
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
    return identity.opened(name, flags | os.O_NOFOLLOW, dir_fd=_fd)


def release(name: str) -> None:
    """One user of the scratch directory is done with its file: a thread removes it, and after
    the last one the directory, while the run winds down and reports (a file system mounted
    with `discard` frees a file's blocks inside unlink, slowly for a large file);
    remove() waits for them."""
    global _users, _dir, _fd
    _users -= 1
    if _fd < 0:                    # remove() came first (a run that ended otherwise)
        return
    gone = f".removed.{next(_gone)}.{name}"       # its name is free at once, for a file
    try:                                            # made next under the same name
        os.rename(name, gone, src_dir_fd=_fd, dst_dir_fd=_fd)
    except FileNotFoundError:
        pass
    where = None
    if not _users:
        where, _dir = _dir, None
    _removing[:] = [job for job in _removing if job.is_alive()]
    job = threading.Thread(target=_unlink, args=(gone, _fd, where, list(_removing)),
                           name="scratch removal", daemon=True)
    if where is not None:
        _fd = -1                   # the job closes it
    _removing.append(job)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:                           # the thread never takes a signal: they all go to the main
        job.start()                # thread, which remove() blocks them in meanwhile
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _unlink(name: str, fd: int, where: str | None, before: list[threading.Thread]) -> None:
    """Remove file `name` of directory descriptor fd; with `where`, the last: once the removals
    before it are done, close fd and remove the directory."""
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    if where is not None:
        for job in before:
            job.join()
        os.close(fd)
        shutil.rmtree(where, ignore_errors=True)


def settle() -> None:
    """Wait for release()'s removals under way (a run's set-up waits for the previous run's:
    their discards would slow its tests)."""
    with signals_held():
        for job in _removing:
            job.join()
        _removing.clear()


@atexit.register
def remove() -> None:
    """Remove the scratch directory and all in it (also at exit, however the run ended), after
    the removals under way. A stop signal meanwhile waits until all is removed (an unlink cannot
    be cut short, and a join cut short lets the process end with the thread's work undone)."""
    global _dir, _fd
    with signals_held():
        settle()
        if _dir is not None:       # in an order that a signal handled between any two
            shutil.rmtree(_dir, ignore_errors=True)       # steps (another thread took it)
            _dir, fd, _fd = None, _fd, -1                 # leaves to a second call
            os.close(fd)


class _Chunks:
    """One event loop's set-up buffers: IN_FLIGHT page-aligned CHUNK-byte maps (O_DIRECT takes
    them; a page is only allocated when first written), handed out in turn, so no more than
    IN_FLIGHT set-up writes are in flight however many files are written at once. They are let
    go when the loop's last writer is done."""
    of_loop: dict = {}

    def __init__(self):
        import asyncio
        self.free: asyncio.Queue = asyncio.Queue()
        for _ in range(IN_FLIGHT):
            self.free.put_nowait(mmap.mmap(-1, CHUNK))
        self.users = 0

    @classmethod
    @contextlib.contextmanager
    def use(cls):
        import asyncio
        loop = asyncio.get_running_loop()
        chunks = cls.of_loop.get(loop) or cls.of_loop.setdefault(loop, cls())
        chunks.users += 1
        try:
            yield chunks
        finally:
            chunks.users -= 1
            if not chunks.users:
                del cls.of_loop[loop]


def _write(fd: int, direct: int, buf: mmap.mmap, at: int, n: int, tag: int) -> None:
    """In an executor thread: the pattern's bytes [at, at + n) made in `buf`, then written, the
    aligned part through `direct` (an O_DIRECT descriptor, -1: none), the rest through `fd`."""
    fill(np.frombuffer(buf, np.uint64, -(-n // 8)), at, tag)
    view, done = memoryview(buf)[:n], 0
    while done < n:
        aligned = (n - done) // ALIGN * ALIGN if direct >= 0 else 0
        try:
            wrote = os.pwrite(direct, view[done:done + aligned], at + done) if aligned else \
                os.pwrite(fd, view[done:], at + done)
        except OSError as e:
            if not aligned or e.errno != errno.EINVAL:
                raise
            direct = -1                  # O_DIRECT refused after all: buffered, then
            continue
        if not wrote:
            raise OSError(errno.EIO, "a write of no bytes")
        done += wrote


async def write_pattern(fd: int, size: int, tag: int = 0, path: str = "", opener=None) -> None:
    """Write `size` bytes of the data pattern from the start of the file open on `fd` (a file
    torque-async made or checked: no path is opened here), flushed to the device and dropped
    from the page cache. Not timed. `opener(flags)` opens the same file again (reopen, a tree's
    Dirs.open): with it the writes are O_DIRECT where the file system takes it (a last part
    that is not a multiple of ALIGN is buffered). CHUNK-byte writes, each made in a reused
    buffer by a thread of the loop's executor (aiofiles' threads) while others are being
    written, up to IN_FLIGHT at once on the loop; a cancel or a failure waits for those in
    flight (no write outlives the call). An OSError names `path`."""
    import asyncio

    import aiofiles.os
    direct, writing, failed = -1, set(), []
    loop = asyncio.get_running_loop()

    def done(future, buf) -> None:
        writing.discard(future)
        chunks.free.put_nowait(buf)
        if not future.cancelled() and future.exception():
            failed.append(future.exception())
    with _Chunks.use() as chunks:
        try:
            if opener and size >= ALIGN:
                try:
                    direct = opener(os.O_WRONLY | os.O_DIRECT)
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        raise
            for at in range(0, size, CHUNK):
                buf = await chunks.free.get()
                if failed:
                    chunks.free.put_nowait(buf)
                    raise failed[0]
                future = loop.run_in_executor(None, _write, fd, direct, buf, at,
                                              min(CHUNK, size - at), tag)
                future.add_done_callback(lambda f, b=buf: done(f, b))
                writing.add(future)
            if writing:
                await asyncio.wait(writing)
            if failed:
                raise failed[0]
            await aiofiles.os.wrap(os.fdatasync)(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as e:
            raise OSError(e.errno, f"writing it: {e.strerror}", path) from None
        finally:
            while writing:      # the writes in flight end first (asyncio.wait never cancels
                try:            # them), even through a second cancel
                    await asyncio.wait(writing)
                except asyncio.CancelledError:
                    pass
            if direct >= 0:
                os.close(direct)
