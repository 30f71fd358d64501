"""The file tests (-r -w -rand -rmw -rw -scan -scanfile -aio -files) as loop tests.

One class serves every file action; the action's Spec (actions.py) says where its transfers go
and what they do. A test keeps `depth` transfers outstanding (-aio N, else 1) as that many lanes:
each lane takes the next transfer number k, looks up (file, offset, write) in the layout, issues
it through the engine and records issue-to-completion latency in the Meter, so k's place never
depends on timing. A test that mixes reads and writes (-rand/-aio/-files with -percR, -rw)
also counts and times them apart (Meter.split); so does -rmw, each transfer's read (issue to
completion) and write (issue to completion, after the modify). Per transfer k:

    read          read the place into the lane's buffer; then -extraRead* reads the bytes after
                  it (r), -touch/-touch4K read one word / one word per 4 KiB of the data
    write         stamp the buffer with the place, write it
    rmw           read, add 1 to the first byte of every sector, write it back
    -T            the lane waits that long before its next transfer

On io_uring a test whose transfers are plain (one I/O each: not -rmw, no -extraRead*, no cache
drop) and that has no -T runs no lanes: the engine drives its transfers in batches through the
same claim, record and check (batch.py; the group block says "I/O path = ...").

Set-up (not timed) resolves and opens the files, writes scratch files, allocates one buffer
area for all lanes and registers it with the engine. check() (not timed) reads the files back:
each lane's last buffer must match the file where nothing wrote after it, and a scratch file
must hold, at every place written, its stamp (or -rmw's increments).
"""
from __future__ import annotations

import itertools
import mmap
import os
import stat
import threading

import numpy as np

from torque_async.kind_api.api import VALUES, TestContext, TestError
from torque_async.kind_api.buffers import Buffers
from torque_async.timer import SLICE_NS

from ..meter import EXTRA, MEASURED, STOP
from . import actions, batch, data, scratch, tree
from .engine import choose, open_engine
from .engine_api import NAMES, now
from .files import block_size, choose_mode, made_note, open_file
from .layout import BLOCK, MASK, SHIFT, Cursor, Layout

CHUNK = 8 << 20                    # check(): bytes of a scratch file compared at once


class FileTest:
    proves, unproved = VALUES, ("its check reads back each lane's last transfer and what the "
                                "test wrote where, not how many transfers it made")

    def __init__(self, ctx: TestContext):
        self.ctx, self.local = ctx, ctx.local
        self.spec = actions.SPECS[ctx.group.action]
        self.depth = actions.depth(ctx.group)
        self.size = self.local.size
        self.extra_bytes = actions.extra_bytes(self.spec, self.local)
        self.transfer_bytes = self.size
        self.system_bytes = self.size * (2 if self.spec.rmw else 1) + self.extra_bytes
        self.writes = actions.writes(self.spec, self.local)
        self.mixed = self.writes and actions.reads(self.spec, self.local) and not self.spec.rmw
        self.engine_name, self.engine_note = choose(ctx.settings.engine,
                                                    self.depth == 1 and ctx.loop_tests == 1)
        self.info = ""
        self.paths: list[str] = []
        self.fds: list[int] = []
        self.plain: dict[int, int] = {}              # check(): buffered descriptors by file
        self.scratch: str | None = None              # the scratch file's name in its directory
        self.dirs: tree.Dirs | None = None
        self.engine = None
        self.buffers: Buffers | None = None
        self.ids: list[int] = []
        self.error: BaseException | None = None
        self.single = self.batched = self.direct = False     # set-up: see batch.py
        self.made = ""                                        # a -f file set-up made: its note
        self.grows: tuple[bool, int] | None = None            # its (existed, bytes needed)

    # set-up --------------------------------------------------------------------------------
    async def setup(self) -> None:
        local = self.local
        try:
            self.largest = await (self.tree() if self.spec.source == "tree" else self.one_file())
        except ValueError as e:            # a -files tree's layout: no transfer fits
            raise TestError(f"-{self.ctx.group.action}: {e}") from None
        mode = choose_mode(local, (self.size, local.offset, self.layout.spacing,
                                   self.extra_bytes), self.align, self.paths[0])
        for i, path in enumerate(self.paths):
            fd, mode = open_file(path, self.writes, self.writes and self.spec.source == "list",
                                 mode, self.opener(i), self.ctx.settings.writeDevices,
                                 self.ctx.pins)
            self.fds.append(fd)
        if self.grows is not None:         # a -f file to write: made, or grown by the writes
            existed, need = self.grows     # (its size read from what was opened)
            self.made = made_note(self.paths[0], os.lseek(self.fds[0], 0, os.SEEK_END)
                                  if existed else None, need)
        self.drop, self.direct = mode.drop, mode.direct
        self.allocate(local.wire or self.spec.wire)
        engine = NAMES[self.engine_name] + (f" ({self.engine_note})" if self.engine_note else "")
        self.single = not (self.spec.rmw or self.extra_bytes or self.drop)  # one I/O a transfer
        # the one choice point: the engine drives plain transfers in batches (io/batch.py)
        self.batched = self.single and not local.T and getattr(self.engine, "batches", False)
        if not self.batched:
            self.engine.ready(self.depth)              # its lanes' threads, if it has them
        self.info = "\n".join((f"I/O engine = {engine}", mode.note) +
                               ((batch.NOTE,) if self.batched else ()) +
                               ((self.made,) if self.made else ()))
        self.at = Cursor(self.layout)
        self.at.lists(0)                   # the first block now: made after the release it
                                           # would hold the loop, delaying the other tests

    async def tree(self) -> int:
        """-files: the tree under -dir (made first with -cfiles); returns its largest file."""
        ctx, local, count = self.ctx, self.local, self.ctx.group.args[0]
        limit = actions.tree_limit(local)
        if local.cfiles:
            await tree.make(local.dir, count, limit, self.size)
        try:
            sizes = tree.sizes(local.dir, count, limit, self.size)
        except ValueError as e:
            raise TestError(f"-files: {e}" + ("" if isinstance(e, tree.Unsafe) else
                                              ": add -cfiles to make it")) from None
        self.paths, self.shown = [tree.path(local.dir, i) for i in range(count)], local.dir
        found = tree.manifest(local.dir)
        self.dirs = tree.Dirs(local.dir, ids=tree.made_ids(local.dir, found) if self.writes
                              else None, token=(found or {}).get("token"))  # (reads harm none)
        self.align = block_size(self.paths[0])
        self.layout = actions.layout(ctx.group, ctx.row, ctx.settings.seed, None, sizes)
        return max(sizes)

    async def one_file(self) -> int:
        """The file the user named, or a scratch file written for the test; returns its size."""
        ctx = self.ctx
        named = actions.user_file(ctx.settings, ctx.group, ctx.proc, ctx.row)
        size = actions.file_size(named) if named else None
        self.align = block_size(named or ".")        # a scratch file's directory is in "."
        self.layout = actions.layout(ctx.group, ctx.row, ctx.settings.seed, size,
                                     align=self.align)
        need = self.layout.span + self.extra_bytes      # a named file holds it: plancheck
        if named is not None and self.writes:
            self.grows = os.path.lexists(named), need
        if named is None:
            named, fd = scratch.create(f"test{ctx.row}.dat")
            self.scratch = f"test{ctx.row}.dat"
            try:
                await scratch.write_pattern(fd, need, path=named, opener=self.opener(0))
            finally:
                os.close(fd)
            size = need
        self.paths = [named]
        self.shown = self.paths[0]
        return max(size, need if self.writes else 0)

    def opener(self, i: int):
        """How file i is opened: relative to its directory (a scratch or tree file), or by the
        path the user named."""
        if self.scratch:
            return lambda flags: scratch.reopen(self.scratch, flags)
        if self.dirs:
            return lambda flags: self.dirs.open(i, flags)
        return None

    def allocate(self, wire: bool) -> None:
        """One page-aligned area with a slot per lane for each role it needs: reads, writes
        (apart, so a write never carries what a read left), extra reads; -m adds a byte."""
        d, local = self.depth, self.local
        roles = actions.roles(self.spec, local)
        lengths = [n for _, n in roles for _ in range(d)]
        skew = 1 if local.m else 0
        strides = [-(-(n + skew) // mmap.PAGESIZE) * mmap.PAGESIZE for n in lengths]
        self.buffers = Buffers(wire)
        area = self.buffers.new(sum(strides))
        starts = np.cumsum([0, *strides[:-1]]) + skew
        self.arrays = [area[s:s + n] for s, n in zip(starts, lengths)]
        self.views = [memoryview(a) for a in self.arrays]
        self.engine = open_engine(self.engine_name)
        self.ids = self.engine.register(self.views)
        used = [role for role, _ in roles]
        self.slot = {role: d * used.index(role) for role in used}
        self.slot.setdefault("write", self.slot.get("read"))   # -rmw writes back what it read
        self.slot.setdefault("read", self.slot["write"])        # (-w reads nothing)
        if "write" in used:
            for a in self.arrays[self.slot["write"]:self.slot["write"] + d]:
                a[:] = data.FILL
        words = [a[:a.size // 8 * 8].view(np.uint64) if a.size >= 8 else a for a in self.arrays]
        self.touched = [w[::512] if local.touch4K else w[:1] for w in words]

    # the measured run -------------------------------------------------------------------------
    async def run(self, meter) -> None:
        meter.row["file"], meter.row["file_bytes"] = os.fsencode(self.shown), self.largest
        self.meter, self.lock = meter, threading.Lock()
        self.take = itertools.count().__next__       # transfer numbers, taken in claim()
        self.next, self.extra = 1 << 62, 0                   # next: see lane()
        self.until = self.upto = self.before = 0             # the Meter's, as decide() saw them
        self.stop = meter.stop
        self.last = [-1] * self.depth
        self.published = False
        self.rmw_at = [(0, 0)] * self.depth        # -rmw: each lane's read done, write issued
        if self.mixed or self.spec.rmw:
            meter.split()
        self.record = meter.record_rw if self.mixed else meter.record_rmw if self.spec.rmw \
            else meter.record
        self.t_last = meter.ramp()
        if self.batched:
            await batch.drive(self)
        else:
            await self.engine.drive([self.lane(j) for j in range(self.depth)])
        if not self.published:                       # stopped early: publish what was measured
            if not meter.start:                      # in its -ramp: each transfer made, 0 to
                meter.ramped = self.next             # next - 1, was the ramp's
            self.finish(max(self.t_last, meter.start or meter.begin()))
        meter.publish_extra(self.extra)
        if self.error is not None:
            raise self.error

    def finish(self, t: int) -> None:
        self.meter.end(t)
        self.meter.publish(self.transfer_bytes, self.system_bytes)
        self.published = True

    def claim(self) -> tuple[int, int]:
        """The next transfer number and what it is (RAMP, MEASURED, EXTRA or STOP), decided in
        the order the numbers are taken (the engine runs claims one at a time), so the measured
        transfers are consecutive numbers. The numbers below `until` are measured whatever
        the time (the Meter's count, with no deadline): no clock read, no call (batch.py
        makes this first case inline, and under -t the one before the deadline, with its
        batch's clock read; it calls decide for the rest)."""
        k = self.take()
        if k < self.until and not self.stop[0]:    # (a failed test's is 0)
            return k, MEASURED
        return k, self.decide(k)

    def decide(self, k: int) -> int:
        """claim()'s other cases, as the Meter says (a failed test stops); the last measured
        transfer, done already, ends the measured interval before any past it."""
        if self.error is not None:
            return STOP
        meter = self.meter
        what = meter.claim(k, now(), self.measured_all)
        self.until, self.upto, self.before = meter.until, meter.upto, meter.before
        return what

    def measured_all(self) -> None:
        if self.meter.count == self.meter.total and not self.published:
            self.finish(self.t_last)

    def recorded(self, latency: int, t: int, *parts) -> None:
        """A measured transfer completed at t (parts: its write flag or -rmw's read and write
        times, as self.record takes them); the last of them ends the measured interval. A
        sample and the end take the latest completion so far, t_last: the threads engine's lanes
        record in turn under a lock, each with its own clock read, so a later one can carry an
        earlier time (a sample would then end before it began). batch.py
        does the same inline (its t never falls: one clock read per batch, in order)."""
        if t > self.t_last:
            self.t_last = t
        if self.record(latency, self.t_last, *parts) == self.meter.total:
            self.finish(self.t_last)

    def lane_buffers(self, j: int) -> tuple:
        """Lane (or slot) j's read and write buffers (engine ids), the stamper of its write
        buffer, and the words -touch/-touch4K read of its read buffer (None without them)."""
        slot, touched = self.slot, self.local.touch or self.local.touch4K
        return (self.ids[slot["read"] + j], self.ids[slot["write"] + j],
                data.stamper(self.views[slot["write"] + j]),
                self.touched[slot["read"] + j] if touched else None)

    async def lane(self, j: int) -> None:
        """One outstanding transfer at a time, until every measured one is done (and, under
        -slow, while another test still measures). The conditions that end a lane never turn
        back, so once one lane stops at transfer k every lane stops at a later one: the
        transfers made are exactly 0 .. k-1 for the smallest such k (self.next)."""
        claim, done = self.engine.serial(self.claim), self.engine.serial(self.recorded)
        mixed, rmw_at = self.mixed, self.rmw_at if self.spec.rmw else None
        submit, fds, throttle = self.engine.submit, self.fds, self.local.T * 1000
        rbuf, wbuf, stamp, touch = self.lane_buffers(j)
        plain, stamps, last = self.single, self.writes and not self.spec.rmw, self.last
        block, k, t, extra = -1, -1, self.t_last, 0
        f, offset, write = 0, 0, False
        try:
            while True:
                k, what = claim()
                if what == STOP:
                    break
                b, i = k >> SHIFT, k & MASK
                if b != block:
                    block, (files, offsets, writes) = b, self.at.lists(b)
                f, offset, write = files[i], offsets[i], writes[i]
                if write and stamps:
                    stamp(f, offset)
                t0 = now()
                t = await (submit(write, fds[f], wbuf if write else rbuf, offset) if plain else
                           self.move(j, f, offset, write))
                if what == MEASURED:
                    done(t - t0, t, write) if mixed else \
                        done(t - t0, t, rmw_at[j][0] - t0, t - rmw_at[j][1]) if rmw_at else \
                        done(t - t0, t)
                elif what == EXTRA:
                    extra += 1
                last[j] = k
                if touch is not None and not write:
                    touch.sum()                       # the processor reads the data
                if throttle:
                    await self.pause(t + throttle)
        except Exception as e:  # noqa: BLE001 - the first failure ends every lane, then run raises
            self.failed(e, f, offset, write)
        self.ended(k, extra)

    def failed(self, e: Exception, f: int, offset: int, write: bool) -> None:
        """A transfer (of file f at offset) failed: the first failure ends the test. An OSError
        (ENOSPC, EIO, short) is named by its file, place and errno."""
        if isinstance(e, OSError):
            what = "write" if write else "read"
            e = TestError(f"{what} of {self.size} bytes at byte {offset} of "
                          f"{self.paths[f]}: {e.strerror or e}")
        with self.lock:
            self.error = self.error or e
            self.until = self.upto = 0     # every later claim asks decide(), which stops

    def ended(self, k: int, extra: int) -> None:
        """A lane (or slot) stopped at transfer k, having made `extra` unmeasured ones (-slow)."""
        with self.lock:
            self.next = min(self.next, k)
            self.extra += extra

    async def pause(self, until: int) -> None:
        """-T: the engine's pause until `until`, in slices that look at the stop flag."""
        pause, stop = self.engine.pause, self.meter.stop
        while until - now() > SLICE_NS:
            if stop[0]:
                return
            await pause(now() + SLICE_NS)
        await pause(until)

    async def move(self, j: int, f: int, offset: int, write: bool) -> int:
        """A transfer of more than one I/O: -rmw, -extraRead*, or dropping it from the cache."""
        fd, submit, slot = self.fds[f], self.engine.submit, self.slot
        if self.spec.rmw:
            t_read = await submit(False, fd, self.ids[slot["read"] + j], offset)
            data.modify(self.arrays[slot["read"] + j])
            write, self.rmw_at[j] = True, (t_read, now())
        t = await submit(write, fd, self.ids[slot["write" if write else "read"] + j], offset)
        if self.extra_bytes and not write:
            t = await submit(False, fd, self.ids[slot["extra"] + j], offset + self.size)
        if self.drop:
            os.posix_fadvise(fd, offset, self.size + self.extra_bytes, os.POSIX_FADV_DONTNEED)
        return t

    # after the run ----------------------------------------------------------------------------
    async def check(self) -> None:
        history = History(self.layout, self.next, {self.at(k)[:2] for k in self.last if k >= 0},
                          self.spec.rmw)
        self.check_lanes(history)
        if self.scratch:
            self.check_scratch(history)

    def check_lanes(self, history: "History") -> None:
        """Each lane's last data must be in the file, unless something else wrote there since."""
        for j, k in enumerate(self.last):
            if k < 0:
                continue
            f, offset, write = self.at(k)
            if stat.S_ISCHR(os.fstat(self.fds[f]).st_mode):
                continue                              # a character device keeps no data
            write, place = write or self.spec.rmw, (f, offset)
            if history.last[place] != k if write else place in history.written:
                continue                              # another transfer changed it since
            regions = [(self.arrays[self.slot["write" if write else "read"] + j], offset)]
            if self.extra_bytes and not write:
                regions.append((self.arrays[self.slot["extra"] + j], offset + self.size))
            for buffer, at in regions:
                disk = os.pread(self.fds_plain(f), buffer.size, at)
                if disk != buffer.tobytes():
                    what = "wrote" if write else "read"
                    raise TestError(f"data check: transfer {k} {what} {buffer.size} bytes at byte "
                                    f"{at} of {self.paths[f]}, but the file holds other data there")

    def fds_plain(self, f: int) -> int:
        """A buffered descriptor of file f for checking (O_DIRECT wants aligned reads)."""
        if f not in self.plain:
            self.plain[f] = os.open(f"/proc/self/fd/{self.fds[f]}", os.O_RDONLY | os.O_CLOEXEC)
        return self.plain[f]

    def check_scratch(self, history: "History") -> None:
        """Every place of the scratch file the test wrote (or -rmw modified) holds what it
        wrote there: its stamp (so a write that went elsewhere is missed at its own place) or
        the pattern changed as often as it was. Proportional to what the test touched, not to
        the file's size; runs of adjacent places are read CHUNK bytes at a time."""
        places = np.array(sorted(history.count), dtype=np.int64)
        counts = [history.count[p] for p in places.tolist()]
        size, fd = self.size, self.fds_plain(0)
        first = 0
        while first < places.size:
            last = first                          # places[first..last]: one run, one read
            while last + 1 < places.size and places[last + 1] < places[last] + size + CHUNK \
                    and places[last + 1] + size - places[first] <= CHUNK:
                last += 1
            start, end = int(places[first]), int(places[last]) + size
            expect = data.pattern(start, end - start).copy()
            for p, v in zip(places[first:last + 1].tolist(), counts[first:last + 1]):
                block = data.modify(data.pattern(p, size).copy(), v) if self.spec.rmw \
                    else data.written(0, p, size)
                expect[p - start:p - start + size] = block
            got = np.frombuffer(os.pread(fd, end - start, start), np.uint8)
            bad = np.flatnonzero(got != expect)
            if bad.size:
                raise TestError(f"data check: {self.paths[0]} differs from what the test wrote "
                                f"at {bad.size} bytes from byte {start + int(bad[0])} on")
            first = last + 1

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.forget(self.ids)
            self.engine.close()
            self.engine = None
        if self.buffers is not None:                 # the views first: a viewed map stays
            self.arrays = self.views = self.touched = []
            self.buffers.close()
            self.buffers = None
        for fd in [*self.fds, *self.plain.values()]:
            os.close(fd)
        self.fds, self.plain = [], {}
        if self.dirs is not None:
            self.dirs.close()
            self.dirs = None
        if self.scratch:
            scratch.release(self.scratch)
            self.scratch = None


class History:
    """What the executed transfers 0..count-1 did: the places written, how often each was
    written (-rmw: modified, every transfer), and the last transfer that touched each place of
    `watch`."""

    def __init__(self, layout: Layout, count: int, watch: set[tuple[int, int]], rmw: bool):
        self.written: set[tuple[int, int]] = set()
        self.count: dict[int, int] = {}              # file 0's places only: scratch files
        self.last: dict[tuple[int, int], int] = {}
        keys = np.array([f << 48 | o for f, o in watch], dtype=np.int64)
        for b in range(-(-count // BLOCK)):
            files, offsets, writes = layout.block(b)
            n = min(BLOCK, count - b * BLOCK)
            files, offsets, writes = files[:n], offsets[:n], writes[:n] | rmw
            self.tally(offsets[writes], files[writes])
            hit = np.flatnonzero(np.isin(files.astype(np.int64) << 48 | offsets, keys))
            for i in hit.tolist():
                self.last[(int(files[i]), int(offsets[i]))] = b * BLOCK + i

    def tally(self, offsets: np.ndarray, files: np.ndarray) -> None:
        self.written.update(zip(files.tolist(), offsets.tolist()))
        zero = offsets[files == 0]
        places, counts = np.unique(zero, return_counts=True)
        for p, c in zip(places.tolist(), counts.tolist()):
            self.count[p] = self.count.get(p, 0) + c
