"""Where a stream's frames live and how one transfer moves: memory, or a file through `submit`.

Both stores hold `tracks` regions of `slots` frames; `move(kind, track, slot, frame)` reads slot
into frame or writes frame into slot, and is the only way the streams touch their data.

THE SEAM. File transfers go through `submit(kind, fd, buffer, offset)`, the one function the
file streams call to move one transfer: here a positioned read or write (os.preadv/os.pwritev)
in the loop's thread pool. The I/O engine of torque_async.io replaces it in this one place.
"""
from __future__ import annotations

import asyncio
import os

import numpy as np

from workers.api import TestError
from workers.buffers import Buffers

from ..io import scratch
from .schedule import READ

DIRECT_ALIGN = 4096               # O_DIRECT wants buffers, offsets and sizes of whole blocks


async def submit(kind: str, fd: int, buffer: np.ndarray, offset: int) -> int:
    """Move one transfer between `buffer` and the file at `offset`; returns the bytes moved."""
    call = os.preadv if kind == READ else os.pwritev
    return await asyncio.get_running_loop().run_in_executor(None, call, fd, [buffer], offset)


class MemoryTracks:
    """-memStreams: the tracks are one page-aligned buffer; a transfer is a memory copy."""

    def __init__(self, buffers: Buffers, tracks: int, slots: int, size: int):
        self.data = buffers.new(tracks * slots * size).reshape(tracks, slots, size)
        self.where = "memory"

    async def move(self, kind: str, track: int, slot: int, frame: np.ndarray) -> None:
        if kind == READ:
            np.copyto(frame, self.data[track, slot])
        else:
            np.copyto(self.data[track, slot], frame)

    def close(self) -> None:
        pass


class FileTracks:
    """-streams: the tracks lie one after another in one file, a user's (-f) or a scratch file
    in the run's scratch directory (torque_async.io.scratch), pre-sized and removed at close.
    Without -fbc the file is opened O_DIRECT where the file system and the transfer size allow
    it (buffered otherwise, and said so)."""

    def __init__(self, path: str | None, tracks: int, slots: int, size: int, cached: bool,
                 row: int):
        self.size, self.slots = size, slots
        self.scratch = path is None           # a file of the run's scratch directory
        if path is None:
            path = scratch.path(f"stream{row}.dat")
        self.path = path
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self.fd, self.direct = -1, False
        if not cached and size % DIRECT_ALIGN == 0:
            try:
                self.fd, self.direct = os.open(path, flags | os.O_DIRECT, 0o644), True
            except OSError:
                pass
        if self.fd < 0:
            self.fd = os.open(path, flags, 0o644)
        need = tracks * slots * size
        try:
            if os.fstat(self.fd).st_size < need:
                os.posix_fallocate(self.fd, 0, need)
        except OSError as e:
            self.close()
            raise TestError(f"cannot size stream file {path} to {need} bytes: {e.strerror}") from None
        cache = "O_DIRECT" if self.direct else "buffered" + ("" if cached else ", O_DIRECT refused")
        self.where = f"{'scratch ' if self.scratch else ''}{path} ({cache})"

    def offset(self, track: int, slot: int) -> int:
        return (track * self.slots + slot) * self.size

    async def move(self, kind: str, track: int, slot: int, frame: np.ndarray) -> None:
        moved = await submit(kind, self.fd, frame, self.offset(track, slot))
        if moved != frame.nbytes:
            what = "read" if kind == READ else "wrote"
            raise TestError(f"stream file {self.path}: {what} {moved} of {frame.nbytes} bytes "
                            f"at offset {self.offset(track, slot)}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.scratch:
            os.unlink(self.path)
            scratch.release()
            self.scratch = False
