"""-web: each test process is one client coroutine on the event loop, requesting whole files.

A request picks a file (picks.py), opens it (relative to the tree's directory descriptor,
O_NOFOLLOW), reads it whole in transfer-size reads into the client's buffer, and closes it;
every -appendEvery-th request of a client then appends a size drawn uniformly in
[1, -appendKB] to the tree's log (O_APPEND). A client makes n x i measured requests, or those
before -t's deadline, after -ramp's unmeasured ones (the Meter decides, as for file lanes). Each is a blocking system call on the loop's thread
(as -engine sync), timed apart: open, every read, close, append; the Meter records the request
(open to close). A client gives the loop a turn once it has run TURN_NS (between requests, or
between the reads of a large file, which it then holds open while others run), so the clients
progress together: their measured intervals cover the same time, and -slow's unmeasured
requests are about a round of turns at the end; -T makes a client wait that
long after each read (a slow reader), holding its file. -webOpen N caps the files the group's
clients hold open at once (a client waits for a slot before it opens; the wait is not part of
the request's latency, which runs from the open to the end of the close).

The clients of a group share one Site: the tree (made by the first client's set-up under
-cfiles, or checked), the log, the popularity law and the cap. Reads are buffered (the page
cache), as filebench's webserver reads.
"""
from __future__ import annotations

import asyncio
import os
import stat
import sys


from torque_async.testing.api import TestContext, TestError

from ..inputs import kind
from ..io.engine import now
from ..meter import EXTRA, MEASURED, RAMP, STOP
from ..results import WEB_OPS
from ..stats import Summary
from ..units import KB
from . import site
from .picks import BLOCK, Picker, Popularity, generators

TURN_NS = 100_000                  # a client gives the loop a turn when it has run this long
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK   # (a FIFO put in
                                  # the tree mid-run: opened and read without waiting, refused)
_sites: dict[int, "Site"] = {}                   # by group index: the clients' shared state


def changed(rootfd: int, name: str, got: int) -> str:
    """What a file of the tree that did not read as its size is now, in words."""
    try:
        mode = os.stat(name, dir_fd=rootfd, follow_symlinks=False).st_mode
    except OSError as e:
        return f"is gone ({e.strerror})"
    return f"held {got} bytes" if stat.S_ISREG(mode) else f"is {kind(mode)} now"


class Site:
    """What the clients of one -web group share."""

    def __init__(self, tree: site.Tree, log: int, popularity: Popularity, cap: int):
        self.tree, self.log, self.popularity = tree, log, popularity
        self.sizes, self.largest = tree.sizes.tolist(), int(tree.sizes.max())
        self.figures = tree.figures()
        self.gate = asyncio.Semaphore(cap) if cap else None
        self.open = self.most = 0                    # files held open now, and at most
        self.log_start = os.fstat(log).st_size
        self.requests = self.read = self.appended = 0   # by every client past -ramp, measured
                                                        # or not
        self.written = 0                             # appended to the log, -ramp's too
        self.users = self.finished = 0               # clients set up, and done running

    @classmethod
    async def of(cls, ctx: TestContext) -> "Site":
        group = ctx.group
        if group.index not in _sites:
            local, law = ctx.local, site.Law.of(ctx.local)
            try:
                made = local.cfiles and await site.make(local.dir, law, Progress(ctx.settings))
                tree = site.open_tree(local.dir, law, bool(made))
            except ValueError as e:
                raise TestError(f"-web: {e}" + ("" if local.cfiles else
                                                ": add -cfiles to make it (once; it stays)"))
            except OSError as e:
                raise TestError(f"-web: the tree in {local.dir}: "
                                f"{e.filename or ''} {e.strerror or e}".strip()) from None
            try:
                log = site.open_log(tree)
            except (OSError, ValueError) as e:
                tree.close()
                raise TestError(f"-web: the log in {local.dir}: {getattr(e, 'strerror', e)}")
            _sites[group.index] = cls(tree, log, Popularity(law.files, local.zipf,
                                                            ctx.settings.seed, group.index),
                                      local.webOpen)
        shared = _sites[group.index]
        shared.users += 1
        return shared

    def check_log(self) -> None:
        """The log grew by exactly what the clients appended."""
        grown = os.fstat(self.log).st_size - self.log_start
        if grown != self.written:
            raise TestError(f"-web: the log {self.tree.root}/{site.LOG} grew by {grown} bytes, "
                            f"but the clients appended {self.written}")

    def release(self, group: int) -> None:
        self.users -= 1
        if not self.users:
            os.close(self.log)
            self.tree.close()
            del _sites[group]


class Progress:
    """The making of a tree, on a terminal's stderr (as the progress line: never into a file)."""

    def __init__(self, settings):
        self.shown = not settings.noProgress and sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.shown:
            sys.stderr.write(f"\r\x1b[Kmaking the -web tree: {done}/{total} files"
                             + ("\r\x1b[K" if done == total else ""))
            sys.stderr.flush()


class WebTest:
    def __init__(self, ctx: TestContext):
        self.ctx, self.local = ctx, ctx.local
        self.transfer_bytes = self.system_bytes = self.local.size   # the read size (TS)
        self.info = ""
        self.site: Site | None = None
        self.ops = [Summary() for _ in WEB_OPS]

    async def setup(self) -> None:
        self.site = await Site.of(self.ctx)
        self.buffer = bytearray(self.local.size)
        self.iov = [memoryview(self.buffer)]
        picks, sizes = generators(self.ctx.rng)
        self.picker = Picker(self.site.popularity, picks)
        self.first = self.picker.block()              # drawn before the start, untimed
        self.append_sizes = sizes
        self.append_data = memoryview(b"L" * (self.local.appendKB * KB))
        tree, local = self.site.tree, self.local
        picks = f"zipf {local.zipf:g}" if local.zipf is not None else "uniform"
        cap = f"at most {local.webOpen} open" if local.webOpen else "no cap on open files"
        self.info = "\n".join((
            f"web tree = {tree.root}: {tree.law.text()}, {'made' if tree.made else 'reused'}",
            f"web requests = whole files, {picks} picks, {cap}; 1 B..{local.appendKB} KB "
            f"appended every {local.appendEvery}; blocking calls on the loop thread, buffered"))

    async def run(self, meter) -> None:
        shared, local = self.site, self.local
        tree = shared.tree
        meter.row["file"], meter.row["file_bytes"] = os.fsencode(tree.root), shared.largest
        self.meter, self.published, self.until = meter, False, 0
        names, sizes, rootfd, log = tree.names, shared.sizes, tree.fd, shared.log
        iov, chunk, gate = self.iov, local.size, shared.gate
        so, sr, sc, sa = (s.add for s in self.ops)
        record, stop = meter.record, meter.stop
        every, throttle = local.appendEvery, local.T / 1e6
        data, most = self.append_data, local.appendKB * KB
        picks, at = self.first, 0
        lengths, used = [], 0
        read, appended, extra = 0, 0, 0
        t = turn = meter.ramp()
        k = 0
        while True:
            what = MEASURED if k < self.until and not stop[0] else self.decide(k)
            if what == STOP:
                break
            if what != MEASURED and meter.start and not self.published:
                self.finish(t, read, appended)     # t: the end of the last measured request
            measured = what == MEASURED
            if at == BLOCK:
                picks, at = self.picker.block(), 0
            f = picks[at]
            at += 1
            if gate is not None:
                await gate.acquire()
            shared.open += 1
            if shared.open > shared.most:
                shared.most = shared.open
            fd, got, size, paused = -1, 0, sizes[f], 0     # paused: -T and other clients' turns
            try:
                t0 = now()
                fd = os.open(names[f], OPEN_FLAGS, dir_fd=rootfd)
                ta = t1 = now()
                while True:
                    n = os.readv(fd, iov)
                    tb = now()
                    if measured:
                        sr(tb - ta)
                    ta, got = tb, got + n
                    last = n < chunk or got >= size
                    if throttle:               # a slow reader: after every read, the last
                        await asyncio.sleep(throttle)   # too, holding its file (a file read
                    elif last:                 # in one read was never throttled)
                        break
                    elif tb - turn > TURN_NS:
                        await asyncio.sleep(0)
                    else:
                        continue
                    ta = turn = now()
                    paused += ta - tb
                    if last:
                        break
            except BlockingIOError:
                got = -1                   # a FIFO with a writer and nothing to read
            finally:
                if fd >= 0:
                    os.close(fd)
                shared.open -= 1
                if gate is not None:
                    gate.release()
            t = now()
            if got != size:
                raise TestError(f"-web: {tree.root}/{names[f]} {changed(rootfd, names[f], got)}"
                                f", not {size}: the tree changed under the test")
            k += 1
            if what != RAMP:
                shared.requests += 1
                shared.read += got
            if k % every == 0:
                if used == len(lengths):
                    lengths, used = self.append_sizes.integers(1, most + 1, BLOCK).tolist(), 0
                length = lengths[used]
                used += 1
                t2 = now()
                try:
                    if os.write(log, data[:length]) != length:
                        raise TestError(f"-web: a short append to {tree.root}/{site.LOG}")
                except OSError as e:
                    raise TestError(f"-web: appending to {tree.root}/{site.LOG}: "
                                    f"{e.strerror}") from None
                t3 = now()
                shared.written += length
                if what != RAMP:
                    shared.appended += length
                if measured:
                    sa(t3 - t2)
                    appended += length
            if measured:
                so(t1 - t0)
                sc(t - ta)
                read += got
                record(t - t0 - paused, t)                # the request's own time
            elif what == EXTRA:
                extra += 1
            if t - turn > TURN_NS:                   # the next client's turn
                await asyncio.sleep(0)
                turn = now()
        if not self.published:               # stopped early: publish what was measured
            self.finish(t if meter.start else meter.begin(), read, appended)
        meter.publish_extra(extra)

    def decide(self, k: int) -> int:
        """What request k is when the count alone cannot say, as the Meter says (as for the
        file lanes): part of -ramp, measured, or past the measured ones."""
        what = self.meter.claim(k, now())
        self.until = self.meter.until
        return what

    def finish(self, t: int, read: int, appended: int) -> None:
        """Publish the measured requests: their bytes and each operation's latency."""
        meter = self.meter
        meter.end(t)
        meter.publish(self.transfer_bytes, self.system_bytes)
        r = meter.row
        r["bytes"], r["sys_bytes"] = read, read + appended
        r["nops"] = len(WEB_OPS)
        for i, s in enumerate(self.ops):
            s.settle()
            r["op_count"][0, i], r["op_min"][0, i], r["op_max"][0, i] = s.count, s.lo, s.hi
            r["op_sum"][0, i], r["op_hist"][0, i] = s.total, s.hist
        r["size_law"][0] = self.site.figures
        r["most_open"] = self.site.most
        r["group_work"][0] = (self.site.requests, self.site.read, self.site.appended)
        self.published = True

    async def check(self) -> None:
        """The log grew by exactly the bytes appended (checked by the group's last client)."""
        shared = self.site
        shared.finished += 1
        self.meter.row["most_open"] = shared.most
        if shared.finished == shared.users:
            shared.check_log()

    async def close(self) -> None:
        if self.site is not None:
            self.site.release(self.ctx.group.index)
            self.site = None
