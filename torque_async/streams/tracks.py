"""Where a stream's frames live and how one transfer moves: memory, or a file through `submit`.

Both stores hold `tracks` regions of `slots` frames; `move(kind, track, slot, frame)` reads slot
into frame or writes frame into slot, returns the transfer's completion time (meter.now), and is
the only way the streams touch their data.

THE SEAM. File transfers go through `submit`, the one function the file streams call to move one
transfer: a positioned read or write (os.preadv/os.pwritev) in the loop's thread pool, timed in
that thread right after the transfer (as the I/O engines time theirs), so the completion time
leaves out the hand-back to the loop. The engines of torque_async.io do not plug in here as they
are: their submit takes registered buffer ids, and the io_uring engine runs its lanes itself,
which may await only its submit and pause (io/uring.py). Running the streams on an engine would
take registering the frame buffers, making each sub-stream an engine lane, and turning the
pipeline's gates and the precise timer's sleeps into engine waits.
"""
from __future__ import annotations

import asyncio
import os

import numpy as np

from torque_async.testing.api import TestError
from torque_async.testing.buffers import Buffers

from ..io import scratch
from ..io.files import block_size, choose_mode, open_file
from ..meter import now
from .schedule import READ


def transfer(kind: str, fd: int, buffer: np.ndarray, offset: int, drop: bool) -> tuple[int, int]:
    """One positioned read or write: (bytes moved, completion time). With `drop` the range then
    leaves the page cache (not timed)."""
    moved = (os.preadv if kind == READ else os.pwritev)(fd, [buffer], offset)
    t = now()
    if drop:
        os.posix_fadvise(fd, offset, buffer.nbytes, os.POSIX_FADV_DONTNEED)
    return moved, t


async def submit(kind: str, fd: int, buffer: np.ndarray, offset: int,
                 drop: bool = False) -> tuple[int, int]:
    """Move one transfer between `buffer` and the file at `offset` in the loop's thread pool;
    returns the bytes moved and the completion time."""
    return await asyncio.get_running_loop().run_in_executor(None, transfer, kind, fd, buffer,
                                                            offset, drop)


class MemoryTracks:
    """-memStreams: the tracks are one page-aligned buffer; a transfer is a memory copy."""

    def __init__(self, buffers: Buffers, tracks: int, slots: int, size: int):
        self.data = buffers.new(tracks * slots * size).reshape(tracks, slots, size)
        self.where, self.note = "memory", ""

    async def move(self, kind: str, track: int, slot: int, frame: np.ndarray) -> int:
        if kind == READ:
            np.copyto(frame, self.data[track, slot])
        else:
            np.copyto(self.data[track, slot], frame)
        return now()

    async def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class FileTracks:
    """-streams: the tracks lie one after another in one file, a user's (-f) or a scratch file
    in the run's scratch directory (torque_async.io.scratch), pre-sized and removed at close.
    It is opened as the file tests open theirs (io/files.py): without -fbc O_DIRECT where the
    file system and the transfer size allow it, else buffered with each transfer's range
    dropped from the page cache; `note` says which."""

    def __init__(self, path: str | None, tracks: int, slots: int, size: int, local, row: int):
        self.size, self.slots = size, slots
        self.scratch = ""                     # its name in the run's scratch directory
        opener = None
        if path is None:
            path, fd = scratch.create(f"stream{row}.dat")
            os.close(fd)
            self.scratch = os.path.basename(path)
            opener = lambda flags: scratch.reopen(self.scratch, flags)     # noqa: E731
        self.path, self.fd = path, -1
        try:
            mode = choose_mode(local, (size,), block_size(path), path)
            self.fd, mode = open_file(path, True, True, mode, opener)
            need = tracks * slots * size
            if os.fstat(self.fd).st_size < need:
                try:
                    os.posix_fallocate(self.fd, 0, need)
                except OSError as e:
                    raise TestError(f"cannot size stream file {path} to {need} bytes: "
                                    f"{e.strerror}") from None
        except BaseException:
            self.close()
            raise
        self.direct, self.drop, self.note = mode.direct, mode.drop, mode.note
        self.where = f"{'scratch ' if self.scratch else ''}{path}"

    def offset(self, track: int, slot: int) -> int:
        return (track * self.slots + slot) * self.size

    async def move(self, kind: str, track: int, slot: int, frame: np.ndarray) -> int:
        try:
            moved, t = await submit(kind, self.fd, frame, self.offset(track, slot), self.drop)
        except OSError as e:                              # the row names the phase and the file
            raise OSError(e.errno, e.strerror, self.path) from None
        if moved != frame.nbytes:
            what = "read" if kind == READ else "wrote"
            raise TestError(f"stream file {self.path}: {what} {moved} of {frame.nbytes} bytes "
                            f"at offset {self.offset(track, slot)}")
        return t

    async def flush(self) -> None:
        """What set-up wrote reaches the device and leaves the page cache (as
        scratch.write_pattern leaves its files)."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, os.fdatasync, self.fd)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.scratch:
            scratch.release(self.scratch)
            self.scratch = ""
