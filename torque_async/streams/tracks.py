"""Where a stream's frames live and how one transfer moves: memory, or a file through the I/O engine.

Both stores hold `tracks` regions of `slots` frames; `move(kind, track, slot, frame)` reads slot
into frame or writes frame into slot, returns the transfer's completion time (meter.now), and is
the only way the streams touch their data.

File transfers go through the file tests' I/O engine (torque_async.io.engine, -engine; auto
picks io_uring where available, else threads): `engine.transfer`, the engine's call for an
ordinary coroutine, on the loop's one ring (a future resolved by the completion reader with the
completion time) or, on the threads engine, in a thread of its own per transfer in flight. The
frame buffers are registered with the engine on their first transfer.
"""
from __future__ import annotations

import asyncio
import os
import stat

import numpy as np

from torque_async.kind_api.api import TestError
from torque_async.kind_api.buffers import Buffers

from ..io import scratch
from ..io.engine import choose, open_engine
from ..io.engine_api import NAMES
from ..io.files import block_size, choose_mode, made_note, open_file
from ..meter import now
from .schedule import READ


class MemoryTracks:
    """-memStreams: the tracks are one page-aligned buffer; a transfer is a memory copy."""

    def __init__(self, buffers: Buffers, tracks: int, slots: int, size: int):
        self.data = buffers.new(tracks * slots * size).reshape(tracks, slots, size)
        self.data.fill(0)           # every page touched in set-up: a page's first write in the
        self.where, self.note = "memory", ""    # run would fault and make its frame late

    async def forget(self) -> None:
        pass

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
    dropped from the page cache; `note` says which, and the engine that moves the frames."""

    def __init__(self, path: str | None, tracks: int, slots: int, size: int, local, row: int,
                 engine: str = "auto", writes: bool = True, devices: bool = False,
                 pins: dict | None = None):
        self.size, self.slots = size, slots
        self.engine, self.ids = None, {}     # (address, length) of a frame -> engine buffer id
        self.scratch = ""                     # its name in the run's scratch directory
        opener = None
        if path is None:
            path, fd = scratch.create(f"stream{row}.dat")
            os.close(fd)
            self.scratch = os.path.basename(path)
            opener = lambda flags: scratch.reopen(self.scratch, flags)     # noqa: E731
        self.path, self.fd = path, -1
        existed = bool(self.scratch) or os.path.lexists(path)
        try:
            mode = choose_mode(local, (size,), block_size(path), path)
            writes = writes or bool(self.scratch)        # (a scratch file is filled first)
            self.fd, mode = open_file(path, writes, writes, mode, opener, devices, pins)
            need = tracks * slots * size
            was = os.lseek(self.fd, 0, os.SEEK_END) if existed else None  # (a device's too)
            if (was or 0) < need:
                if stat.S_ISBLK(os.fstat(self.fd).st_mode):
                    raise TestError(f"stream device {path} holds {was} bytes, not the {need} "
                                    f"its tracks need: lower mfile")
                if not writes:            # a stream that only reads opens its file read-only
                    raise TestError(f"stream file {path} holds {was} bytes, not the {need} "
                                    f"its tracks read: lower mfile, or name a larger file")
                try:
                    os.posix_fallocate(self.fd, 0, need)
                except OSError as e:
                    raise TestError(f"cannot size stream file {path} to {need} bytes: "
                                    f"{e.strerror}") from None
        except BaseException:
            self.close()
            raise
        name, why = choose(engine, False)
        self.engine = open_engine(name)
        self.direct, self.drop = mode.direct, mode.drop
        made = "" if self.scratch else made_note(path, was, need)    # (a -f file)
        self.note = f"I/O engine = {NAMES[name]}{f' ({why})' if why else ''}\n{mode.note}" + \
            (f"\n{made}" if made else "")
        self.where = f"{'scratch ' if self.scratch else ''}{path}"

    def offset(self, track: int, slot: int) -> int:
        return (track * self.slots + slot) * self.size

    def buffer(self, frame: np.ndarray) -> int:
        """The engine's id of a frame buffer, registered on its first transfer."""
        where = frame.ctypes.data, frame.nbytes
        if where not in self.ids:
            self.ids[where] = self.engine.register([memoryview(frame)])[0]
        return self.ids[where]

    async def move(self, kind: str, track: int, slot: int, frame: np.ndarray) -> int:
        offset = self.offset(track, slot)
        try:
            t = await self.engine.transfer(kind != READ, self.fd, self.buffer(frame), offset)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None  # the row adds the phase
        if self.drop:                     # not timed: the transfer completed at t
            os.posix_fadvise(self.fd, offset, frame.nbytes, os.POSIX_FADV_DONTNEED)
        return t

    async def flush(self) -> None:
        """What set-up wrote reaches the device and leaves the page cache (as
        scratch.write_pattern leaves its files)."""
        try:
            await asyncio.to_thread(os.fdatasync, self.fd)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    async def forget(self) -> None:
        """Once no transfer of its buffers is in flight, the engine lets them go."""
        if self.engine is not None:
            await self.engine.forget(list(self.ids.values()))
            self.engine.close()
            self.engine = None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.scratch:
            scratch.release(self.scratch)
            self.scratch = ""
