"""-web: each test process is one client on the event loop, requesting whole files.

A request picks a file (picks.py), opens it (relative to the tree's directory descriptor,
O_NOFOLLOW), reads it whole in transfer-size reads into the client's buffer, and closes it;
every -appendEvery-th request of a client then appends a size drawn uniformly in
[1, -appendKB] to the tree's log (O_APPEND). A client makes n x i measured requests, or those
before -t's deadline, after -ramp's unmeasured ones (the Meter decides, as for file lanes).

How a request reaches the kernel is the engine's (engine_for: -engine, auto as for the file
tests):

    uring    its open, reads and close are one chain of linked io_uring entries (the open into
             a direct descriptor of the ring's table where the kernel has them, else an
             ordinary descriptor: the open alone, then the reads linked to the close), in
             flight in the kernel while the loop runs the other clients; the chains of every
             client that the same batch of completions woke go in one submit. The reads are
             hard-linked, so a chain whose read fails still closes its file. In the common
             case (direct descriptors, no -T nor -webOpen, every file in one chain) a client is
             a state machine, chained(): its chain owns its SQEs and the engine calls answered()
             once it completes, which counts the request and sends the next (no coroutine per
             request). Else it is a lane the engine steps, or, under -webOpen, a coroutine
             awaiting its chain's future (the cap is an asyncio semaphore). An operation's
             latency runs from the completion before it (the submit, for the open) to its
             own, both as the loop's batches of completions saw them: the operations add up to
             the request. Entries completed in one batch share its clock read, so the split of
             a request with two such entries is not known: none of its operations is recorded,
             and it is counted in `unsplit` (timed()). A warm tree's chains complete whole in
             their submit: none is split.
    threads  each client is a thread of its own that makes its requests one after another
             (serve(): claim, open, reads, close, append, each timed there), counting into its
             own Tally (no lock: a lock the threads share becomes a convoy at the
             interpreter's lock): N requests in flight where io_uring cannot open files, and
             no turn of the loop per request.
    sync     blocking calls on the loop's thread, timed apart: one request at a time. A client
             gives the loop a turn once it has run TURN_NS (between requests, or between the
             reads of a large file, which it then holds open while others run).

-T makes a client wait that long after each read (a slow reader), holding its file (its
request then goes in a chain per read). -webOpen N caps the files the group's clients hold
open at once (a client waits for a slot before it opens; the wait is not part of the request's
latency). The group counts the files held open and the requests in flight (most at once, and
summed over their time) and the process's CPU from its first counted request.

The clients of a group share one Site: the tree (made by the first client's set-up under
-cfiles, or checked), the log, the popularity law and the cap. Reads are buffered (the page
cache), as filebench's webserver reads. The log is made by the run if it is missing, emptied
at its set-up, and removed at its end unless -keepLog.
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import stat
import sys
import threading
import time
from collections import deque
from time import process_time_ns

import numpy as np

from torque_async.kind_api.api import TestContext, TestError

from ..inputs import kind
from ..cluster import launcher_rank
from ..io import ring as rings
from ..io.engine import choose
from ..io.engine_api import now
from ..io.uring import PIECE, Gauge, chains, file_slots
from ..meter import EXTRA, MEASURED, RAMP, STOP
from ..results import WEB_LOAD, WEB_OPS
from ..stats import Summary
from ..units import KB
from . import disk, site
from .picks import BLOCK, Picker, Popularity, generators

TURN_NS = 100_000                  # a client gives the loop a turn when it has run this long
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK   # (a FIFO put in
                                  # the tree mid-run: opened and read without waiting, refused)
RING_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC   # (io_uring hands back EAGAIN for a
                                                        # read of a file opened O_NONBLOCK)
_sites: dict[int, "Site"] = {}                   # by group index: the clients' shared state


def changed(rootfd: int, name: str, got: int) -> str:
    """What a file of the tree that did not read as its size is now, in words."""
    try:
        mode = os.stat(name, dir_fd=rootfd, follow_symlinks=False).st_mode
    except OSError as e:
        return f"is gone ({e.strerror})"
    return f"held {got} bytes" if stat.S_ISREG(mode) else f"is {kind(mode)} now"


class Tally:
    """What clients counted: requests, bytes read and appended past -ramp (measured or not),
    the requests' time (in flight) and the files' (held open) summed over them; bytes written
    to the log, -ramp's too."""
    __slots__ = ("requests", "read", "appended", "flight_ns", "open_ns", "written")

    def __init__(self):
        self.requests = self.read = self.appended = self.flight_ns = self.open_ns = 0
        self.written = 0


class Census:
    """A Gauge for holders on several threads, with no lock: each up() adds a token to a deque
    (one atomic step under the interpreter's lock) and notes the count it then saw, a count
    that held at that instant; `most` is the largest any thread saw."""
    __slots__ = ("held", "seen")

    def __init__(self):
        self.held: deque = deque()
        self.seen: dict[int, int] = {}             # by thread: the most it saw

    def up(self) -> None:
        held = self.held
        held.append(None)
        n, me = len(held), threading.get_ident()
        if n > self.seen.get(me, 0):
            self.seen[me] = n

    def down(self) -> None:
        self.held.pop()

    @property
    def now(self) -> int:
        return len(self.held)

    @property
    def most(self) -> int:
        return max(self.seen.values(), default=0)   # (C's loop: no thread adds a key in it)


class Site:
    """What the clients of one -web group share. Each client counts into a Tally (the group's
    one, or under the threads engine its own, so that its thread takes no lock to count); the
    group's figures are their sums."""

    def __init__(self, tree: site.Tree, log: int, popularity: Popularity, cap: int,
                 threaded: bool = False):
        self.tree, self.log, self.popularity = tree, log, popularity
        self.sizes, self.largest = tree.sizes.tolist(), int(tree.sizes.max())
        self.figures = tree.figures()
        self.gate = asyncio.Semaphore(cap) if cap else None
        self.threaded = threaded                    # the threads engine's clients
        gauge = Census if threaded else Gauge
        self.files, self.flight = gauge(), gauge()  # files held open, requests in flight
        self.tallies = [] if threaded else [Tally()]
        self.cpu0 = 0                               # the process's CPU at the first request
        self.disk = disk.device_of(tree.fd)         # the tree's block device, or why none
        self.device = self.disk.device
        self.queue0: tuple[int, int] | None = None  # its weighted ms doing I/O then, and when
        self.lock = threading.Lock()                # begin()'s, which several threads may ask
        self.slots = threading.BoundedSemaphore(cap) if cap else None   # -webOpen's, theirs
        self.names: ctypes.Array | None = None     # the ring's: every name, NUL-ended
        self.starts: list[int] = []
        self.log_start = os.fstat(log).st_size
        self.users = self.finished = 0               # clients set up, and done running

    def tally(self) -> Tally:
        """The Tally a client counts into: the group's, or a new one of its own (threads)."""
        if not self.threaded:
            return self.tallies[0]
        self.tallies.append(Tally())
        return self.tallies[-1]

    def summed(self, name: str) -> int:
        return sum(getattr(t, name) for t in self.tallies)

    requests = property(lambda self: self.summed("requests"))
    read = property(lambda self: self.summed("read"))
    appended = property(lambda self: self.summed("appended"))
    written = property(lambda self: self.summed("written"))
    flight_ns = property(lambda self: self.summed("flight_ns"))
    open_ns = property(lambda self: self.summed("open_ns"))

    @classmethod
    async def of(cls, ctx: TestContext, threaded: bool = False) -> "Site":
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
                                      local.webOpen, threaded)
        shared = _sites[group.index]
        shared.users += 1
        return shared

    @property
    def direct(self) -> bool:
        """Whether the ring opens the files into direct descriptors (uring.chains())."""
        return chains()[0] == "direct"

    def name_address(self, f: int) -> int:
        """The address of file f's name, NUL-ended, for the ring's open (every name laid out
        once, on first use)."""
        if self.names is None:
            encoded = [os.fsencode(name) + b"\0" for name in self.tree.names]
            self.names = ctypes.create_string_buffer(b"".join(encoded))
            base = ctypes.addressof(self.names)
            self.starts = (base + np.cumsum([0] + [len(e) for e in encoded[:-1]])).tolist()
        return self.starts[f]

    def let_go(self, fd: int) -> None:
        """Close fd (if it was opened): one file fewer held open."""
        try:
            if fd >= 0:
                os.close(fd)
        finally:
            self.files.down()

    def begin(self) -> None:
        """The first request past -ramp: the process's CPU and the device's queue start."""
        with self.lock:
            if self.cpu0:                      # (another client's thread was first)
                return
            self.cpu0 = process_time_ns()
        weighted = disk.weighted_ms(self.device) if self.device else None
        if weighted is not None:
            self.queue0 = (weighted, now())

    def load(self, log_bytes: int = -1) -> tuple[int, ...]:
        """results.WEB_LOAD as it stands now."""
        queue = (-1, 0)
        if self.queue0 is not None:
            weighted = disk.weighted_ms(self.device)
            if weighted is not None:
                queue = (weighted - self.queue0[0], now() - self.queue0[1])
        return (self.open_ns, self.flight_ns, self.flight.most,
                process_time_ns() - self.cpu0 if self.cpu0 else 0, log_bytes, *queue)

    def check_log(self) -> None:
        """The log grew by exactly what the clients appended; under mpiexec, where every rank's
        clients append to one site's log, by at least what this rank's did."""
        grown = os.fstat(self.log).st_size - self.log_start
        shared = launcher_rank() is not None
        if grown < self.written or (grown != self.written and not shared):
            raise TestError(f"-web: the log {self.tree.root}/{site.LOG} grew by {grown} bytes, "
                            f"but {'this rank' + chr(39) + 's' if shared else 'the'} clients "
                            f"appended {self.written}")

    def release(self, group: int, keep_log: bool) -> None:
        """The last client closes the tree and the log, and removes the log (torque-async
        made it) unless `keep_log`."""
        self.users -= 1
        if not self.users:
            try:
                if not keep_log:
                    remove_log(self.tree, self.log)
            finally:
                os.close(self.log)
                self.tree.close()
                del _sites[group]


def remove_log(tree: site.Tree, log: int) -> None:
    """Unlink the tree's log, if its name still is the file `log` opened (gone already: under
    mpiexec another rank that shares the site's log was first)."""
    with contextlib.suppress(FileNotFoundError):
        named = os.stat(site.LOG, dir_fd=tree.fd, follow_symlinks=False)
        held = os.fstat(log)
        if (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            os.unlink(site.LOG, dir_fd=tree.fd)


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
    proves, unproved = 0, ("its check is that the log grew by the bytes appended: neither the "
                           "data read nor the requests counted")

    def __init__(self, ctx: TestContext):
        self.ctx, self.local = ctx, ctx.local
        self.transfer_bytes = self.system_bytes = self.local.size   # the read size (TS)
        self.info = ""
        self.site: Site | None = None
        self.ops = [Summary() for _ in WEB_OPS]
        self.engine_name, self.engine_note = engine_for(ctx)
        self.engine = self.chain = None
        self.buf, self.slot = -1, -1
        self.unsplit = 0               # measured requests whose split into operations is unknown
        self.served: asyncio.Future | None = None   # the threads engine's: its thread's end
        self.halt = False                            # its thread ends after its request

    async def setup(self) -> None:
        self.site = await Site.of(self.ctx, self.engine_name == "threads")
        self.tally = self.site.tally()
        self.buffer = bytearray(self.local.size)
        self.iov = [memoryview(self.buffer)]
        picks, sizes = generators(self.ctx.rng)
        self.picker = Picker(self.site.popularity, picks)
        self.first = self.picker.block()              # drawn before the start, untimed
        self.append_sizes = sizes
        self.append_data = memoryview(b"L" * (self.local.appendKB * KB))
        tree, local = self.site.tree, self.local
        if self.engine_name == "uring":
            from ..io.uring import UringEngine
            self.engine = UringEngine.shared()
            self.buf = self.engine.register(self.iov)[0]
            self.chain = self.engine.chain(self.buf, self.site.files)
            self.addr = self.engine.address(self.buf)
            self.site.name_address(0)                  # every name laid out, untimed
            if self.site.direct:
                self.slot = self.engine.take_file()
                if self.slot < 0:
                    raise TestError(f"-web: the ring's table of direct descriptors is full "
                                    f"({file_slots()}): fewer clients on this loop (-p)")
        picks = f"zipf {local.zipf:g}" if local.zipf is not None else "uniform"
        cap = f"at most {local.webOpen} open" if local.webOpen else "no cap on open files"
        self.info = "\n".join((
            f"web tree = {tree.root}: {tree.law.text()}, {'made' if tree.made else 'reused'}; "
            f"its disk: {self.site.disk.name}",
            f"web requests = whole files, {picks} picks, {cap}; 1 B..{local.appendKB} KB "
            f"appended every {local.appendEvery}; {HOW[self.engine_name]}"
            + (f" ({self.engine_note})" if self.engine_note else "") + ", buffered"))

    async def run(self, meter) -> None:
        if self.engine_name == "threads":
            await self.threaded(meter)                  # a thread of the client's own
        elif self.engine_name == "uring" and self.site.gate is None:
            if self.chained_ok():
                await self.chained(meter)               # a plain function per completion
            else:
                await self.engine.drive([self.requests(meter)])   # a lane, stepped by the engine
        else:
            await self.requests(meter)

    def starting(self, meter) -> None:
        """Ready the client's requests (requests(), chained() and threaded())."""
        shared = self.site
        meter.row["file"], meter.row["file_bytes"] = os.fsencode(shared.tree.root), shared.largest
        self.meter, self.published, self.until = meter, False, 0
        self.picks, self.at, self.lengths, self.used = self.first, 0, [], 0
        self.read = self.appended = self.extra = self.k = 0
        self.t = self.turn = meter.ramp()

    def claim(self) -> tuple[int, int]:
        """The next request: what it is (the Meter's RAMP, MEASURED, EXTRA; STOP: no more) and
        the file it reads; the measured ones are published once past them."""
        k = self.k
        what = MEASURED if k < self.until and not self.meter.stop[0] else self.decide(k)
        if what == STOP:
            return what, -1
        if what != MEASURED and self.meter.start and not self.published:
            self.finish(self.t, self.read, self.appended)   # t: the last measured one's end
        at = self.at
        if at == BLOCK:
            self.picks, at = self.picker.block(), 0
        self.at = at + 1
        return what, self.picks[at]

    def completed(self, what: int, f: int, got: int, t0: int, t: int, paused: int,
                  held: int) -> None:
        """Request f (`what` the Meter's) read `got` bytes from t0 to t, `paused` of it in -T's
        waits, holding its file `held`: checked whole, counted for the group past -ramp, the
        client's append due after it made, and recorded where measured."""
        shared, tally = self.site, self.tally
        if got != shared.sizes[f]:
            tree = shared.tree
            raise TestError(f"-web: {tree.root}/{tree.names[f]} "
                            f"{changed(tree.fd, tree.names[f], got)}, not {shared.sizes[f]}: "
                            f"the tree changed under the test")
        self.k = k = self.k + 1
        self.t = t
        if what != RAMP:
            if not shared.cpu0:
                shared.begin()
            tally.requests += 1
            tally.read += got
            tally.flight_ns += t - t0 - paused
            tally.open_ns += held
        if k % self.local.appendEvery == 0:
            self.append(what)
        if what == MEASURED:
            self.read += got
            self.meter.record(t - t0 - paused, t)       # the request's own time
        elif what == EXTRA:
            self.extra += 1

    def append(self, what: int) -> None:
        """Append a size drawn in [1, -appendKB] to the log, timed apart."""
        shared, most = self.site, self.local.appendKB * KB
        if self.used == len(self.lengths):
            self.lengths, self.used = self.append_sizes.integers(1, most + 1, BLOCK).tolist(), 0
        length = self.lengths[self.used]
        self.used += 1
        t2 = now()
        try:
            if os.write(shared.log, self.append_data[:length]) != length:
                raise TestError(f"-web: a short append to {shared.tree.root}/{site.LOG}")
        except OSError as e:
            raise TestError(f"-web: appending to {shared.tree.root}/{site.LOG}: "
                            f"{e.strerror}") from None
        t3 = now()
        tally = self.tally
        tally.written += length
        if what != RAMP:
            tally.appended += length
        if what == MEASURED:
            self.ops[3].add(t3 - t2)
            self.appended += length

    def stopped(self) -> None:
        """No more requests: publish what was measured if a stop came first, and the extra."""
        if not self.published:
            self.finish(self.t if self.meter.start else self.meter.begin(), self.read,
                        self.appended)
        self.meter.publish_extra(self.extra)

    async def requests(self, meter) -> None:
        """The client's requests, each through fetch(), until the Meter says stop."""
        self.starting(meter)
        shared = self.site
        gate, flight = shared.gate, shared.flight
        fetch = self.ring_fetch if self.engine_name == "uring" else self.sync_fetch
        turns = self.engine_name == "sync"
        while True:
            what, f = self.claim()
            if what == STOP:
                break
            if gate is not None:
                await gate.acquire()
            flight.up()
            try:
                got, t0, t, paused, held = await fetch(f, what == MEASURED)
            except BlockingIOError:            # a FIFO with a writer and nothing to read
                got, t0, t, paused, held = -1, 0, 0, 0, 0
            finally:
                flight.down()
                if gate is not None:
                    gate.release()
            self.completed(what, f, got, t0, t, paused, held)
            if turns and t - self.turn > TURN_NS:     # the next client's turn
                await asyncio.sleep(0)
                self.turn = now()
        self.stopped()

    async def threaded(self, meter) -> None:
        """-engine threads: the client's requests made by a thread of its own (serve()), so N
        clients have N requests in flight with no turn of the loop between them; the loop
        waits for the thread's end. Cancelled (a stop), it tells the thread to end after its
        request and waits for that (close() too, if cancelled again meanwhile)."""
        self.starting(meter)
        loop = asyncio.get_running_loop()
        self.served = done = loop.create_future()

        def body() -> None:
            error = None
            try:
                self.serve()
            except BaseException as e:  # noqa: BLE001 - the loop's run() raises it
                error = e
            try:
                loop.call_soon_threadsafe(settle, done, error)
            except RuntimeError:                 # the loop is gone: nobody waits
                pass
        threading.Thread(target=body, name="torque-async web", daemon=True).start()
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            self.halt = True
            await asyncio.wait([done])         # its request: no thread writes past the stop
            raise

    def serve(self) -> None:
        """The threads engine's client, on its own thread: claim, request (blocking(), each
        operation timed), count, until the Meter says stop or the loop's run() was cancelled.
        It takes no lock: it counts into its own Tally, Meter and Summaries, and the group's
        gauges are Censuses."""
        shared = self.site
        slots, flight = shared.slots, shared.flight
        while not self.halt:
            what, f = self.claim()
            if what == STOP:
                break
            if slots is not None:
                slots.acquire()
            flight.up()
            try:
                got, t0, t, paused, times = self.blocking(f)
            except BlockingIOError:            # a FIFO with a writer and nothing to read
                got, t0, t, paused, times = -1, 0, 0, 0, []
            finally:
                flight.down()
                if slots is not None:
                    slots.release()
            if what == MEASURED and times:
                self.timed(times)
            self.completed(what, f, got, t0, t, paused, t - t0)
        self.stopped()

    def chained_ok(self) -> bool:
        """Whether chained() can serve this client: direct descriptors, no -T, every file of
        the tree read in one chain, and SQEs of its own from the ring (own())."""
        shared, chunk = self.site, self.local.size
        most = max(1, -(-shared.largest // chunk))
        if not shared.direct or self.local.T or most > PIECE - 2:
            return False
        self.reads = [max(1, -(-size // chunk)) for size in shared.sizes]
        fixed = rings.SQE_IO_HARDLINK | rings.SQE_FIXED_FILE
        slot, addr = self.slot, self.addr
        return self.engine.own(self.chain, [
            (rings.OP_OPENAT, rings.SQE_IO_LINK, shared.tree.fd, 0, 0, 0, OPEN_DIRECT, slot + 1),
            *[(rings.OP_READ, fixed, slot, addr, chunk, j * chunk, 0, 0) for j in range(most)],
            self.closing(True, slot, -1)])

    async def chained(self, meter) -> None:
        """The client's requests as a state machine, not a coroutine (the common case: a
        coroutine's wake-up and awaits cost more than the rest of a request's Python): the
        engine calls answered() when a request's chain has completed, which counts it and sends
        the next (its SQEs are the client's own, only the open's name rewritten), in the same
        pass over the batch of completions."""
        self.starting(meter)
        self.finished = asyncio.get_running_loop().create_future()
        self.chain.done = self.answered
        self.site.flight.up()
        try:
            self.send()
            await self.finished
        finally:
            self.chain.done = None             # (cancelled: a chain in flight ends unanswered)
            self.site.flight.down()

    def send(self) -> None:
        """Claim the next request and send its chain, or publish and end chained()."""
        what, f = self.claim()
        if what == STOP:
            self.stopped()
            self.finished.set_result(None)
            return
        self.what, self.f = what, f
        self.engine.again(self.chain, self.site.starts[f], self.reads[f])

    def answered(self, chain, t: int, got: int) -> None:
        """The engine's call once the chain of request self.f has completed at t: count it
        (each operation's latency where its split is resolved), then send the next. got >= 0:
        every entry completed in that one batch, none failing, its reads `got` bytes (the
        entries' own results and times are not written); else they are in chain.res and .at."""
        try:
            what = self.what
            if got >= 0:                       # (a warm tree's: the chain ran in its submit)
                if what == MEASURED:
                    self.unsplit += 1
                self.completed(what, self.f, got, chain.t0, t, 0, 0)
                self.send()
                return
            res, at = chain.res, chain.at
            if min(res) < 0:
                raise self.refused(self.f, res)
            got = res[1] if len(res) == 3 else sum(res[1:-1])
            if what == MEASURED:
                self.timed([b - a for a, b in zip([chain.t0, *at], at)])
            self.completed(what, self.f, got, chain.t0, t, 0, t - at[0])
            self.send()
        except BaseException as e:  # noqa: BLE001 - the client ends with it
            if not self.finished.done():
                self.finished.set_exception(e)

    def refused(self, f: int, res: list[int]) -> TestError:
        """What a request's chain whose entries `res` (its open, reads, close) failed says."""
        error = next(r for r in res if r < 0 and r != CANCELLED)
        what = "opening" if res[0] < 0 else "closing" if error == res[-1] else "reading"
        tree = self.site.tree
        return TestError(f"-web: {what} {tree.root}/{tree.names[f]}: {os.strerror(-error)}")

    async def sync_fetch(self, f: int, measured: bool) -> tuple[int, int, int, int, int]:
        """Request file f with blocking calls on the loop's thread, each timed apart (-engine
        sync): (bytes read, its start, its end, the pauses in it, how long it held the file
        open). It gives the loop a turn between reads past TURN_NS (holding the file open)."""
        shared, local = self.site, self.local
        so, sr, sc = (s.add for s in self.ops[:3])
        size, chunk, iov, throttle = shared.sizes[f], local.size, self.iov, local.T / 1e6
        got, paused, fd = 0, 0, -1
        shared.files.up()
        try:
            t0 = now()
            fd = os.open(shared.tree.names[f], OPEN_FLAGS, dir_fd=shared.tree.fd)
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
                elif tb - self.turn > TURN_NS:
                    await asyncio.sleep(0)
                else:
                    continue
                ta = self.turn = now()
                paused += ta - tb
                if last:
                    break
        finally:
            shared.let_go(fd)
        t = now()
        if measured:
            so(t1 - t0)
            sc(t - ta)
        return got, t0, t, paused, t - t0

    def blocking(self, f: int) -> tuple[int, int, int, int, list[int]]:
        """serve()'s request of file f on the client's thread, as sync_fetch's (-T a sleep of
        the thread): (bytes read, its start, its end, the pauses in it, each operation's time:
        the open, each read, the close)."""
        shared, local = self.site, self.local
        size, chunk, iov, throttle = shared.sizes[f], local.size, self.iov, local.T / 1e6
        got, paused, fd, times = 0, 0, -1, []
        shared.files.up()
        try:
            t0 = now()
            fd = os.open(shared.tree.names[f], OPEN_FLAGS, dir_fd=shared.tree.fd)
            ta = now()
            times.append(ta - t0)
            while True:
                n = os.readv(fd, iov)
                tb = now()
                times.append(tb - ta)
                ta, got = tb, got + n
                last = n < chunk or got >= size
                if throttle:
                    time.sleep(throttle)
                    ta = now()
                    paused += ta - tb
                if last:
                    break
        finally:
            shared.let_go(fd)
        t = now()
        times.append(t - ta)
        return got, t0, t, paused, times

    async def ring_fetch(self, f: int, measured: bool) -> tuple[int, int, int, int, int]:
        """Request file f through the ring: its open, reads and close as linked entries of one
        chain (pieces(): more where the file needs more reads than a chain holds, or -T pauses
        between them), in flight in the kernel while the loop runs the other clients. An
        operation's latency runs from the completion of the entry before it (the chain's
        submit, for the first) to its own, as the loop's batches of completions saw them: the
        operations add up to the request."""
        shared, engine, chain = self.site, self.engine, self.chain
        size, chunk = shared.sizes[f], self.local.size
        reads = max(1, -(-size // chunk))
        direct, slot, addr = shared.direct, self.slot, self.addr
        throttle = self.local.T * 1000                  # ns
        if direct and not throttle and reads <= PIECE - 2:     # the common case, at once
            done = await engine.whole(chain, shared.tree.fd, shared.starts[f], OPEN_DIRECT,
                                      slot, addr, chunk, reads)
            res, at = done.res, done.at
            if min(res) >= 0:
                if measured:
                    self.timed([b - a for a, b in zip([done.t0, *at], at)])
                return sum(res[1:-1]), done.t0, at[-1], 0, at[-1] - at[0]
            raise self.refused(f, res)
        fixed = rings.SQE_FIXED_FILE
        link, hard = rings.SQE_IO_LINK, rings.SQE_IO_HARDLINK
        name = shared.name_address(f)
        lats: list[int] = []                           # open, each read, close
        got, paused, fd, opened, t_open = 0, 0, -1, False, 0
        t0 = prev = 0                  # the request's start, and the end of its time so far
        k, pausing = 0, False          # reads submitted; whether a -T pause came before
        try:
            while True:
                ops: list[tuple] = []
                if not opened:                         # the open, then (direct) the reads
                    ops.append((rings.OP_OPENAT, link if direct else 0, shared.tree.fd,
                                name, 0, 0, OPEN_DIRECT if direct else RING_OPEN,
                                slot + 1 if direct else 0))
                if opened or direct:
                    most = (1 if throttle else PIECE - 2) + len(ops)
                    while k < reads and len(ops) < most:
                        ops.append((rings.OP_READ, hard | (fixed if direct else 0),
                                    slot if direct else fd, addr, chunk, k * chunk, 0, 0))
                        k += 1
                    if k == reads and (not throttle or not ops):
                        ops.append(self.closing(direct, slot, fd))
                last = ops[-1]                         # a chain ends at its last entry: no
                ops[-1] = (last[0], last[1] & ~(link | hard), *last[2:])   # link past it
                chain.open_i = 0 if not opened else -1
                chain.close_i = len(ops) - 1 if last[0] == rings.OP_CLOSE else -1
                done = await engine.request(chain, ops)
                if not t0:
                    t0 = prev = done.t0
                elif pausing:
                    paused += done.t0 - prev
                    prev = done.t0
                read_now, error = False, None
                for op, r, t in zip(ops, done.res, done.at):
                    lats.append(t - prev)
                    prev = t
                    if r < 0 and error is None and r != CANCELLED:
                        error = (op[0], r)
                    if op[0] == rings.OP_OPENAT:
                        if r >= 0:
                            opened, t_open, fd = True, t, r
                    elif op[0] == rings.OP_READ:
                        got += max(r, 0)
                        read_now = True
                    elif r != CANCELLED:               # its descriptor is closed (or was
                        opened = False                 # never open: its open failed)
                if error is not None:
                    if opened:                         # the chain failed before its close
                        opened = False
                        await self.close_after(direct, slot, fd)
                    raise TestError(f"-web: {DOING[error[0]]} {shared.tree.root}/"
                                    f"{shared.tree.names[f]}: {os.strerror(-error[1])}")
                if not opened:
                    break
                pausing = bool(throttle) and read_now
                if pausing:                            # a slow reader, holding its file
                    await self.pause(prev + throttle)
        except (Exception, asyncio.CancelledError):
            if opened:                 # stopped between its chains (a lane closed by its
                await self.close_after(direct, slot, fd)   # drive() cannot await: the ring's
            raise                      # close closes its direct descriptors)
        if measured:
            self.timed(lats)
        return got, t0, prev, paused, prev - t_open

    def timed(self, lats: list[int]) -> None:
        """A measured request's operations: its open, each read, its close (ns), each from the
        end of the one before (the first from the request's start). Where one of them is 0 its
        completion was seen with the one before (one batch of completions, one clock read):
        the request's split is not resolved, so none of its figures is recorded (a 0 and a
        neighbour carrying its time would be no measurement); it is counted in `unsplit`."""
        if min(lats) <= 0:
            self.unsplit += 1
            return
        opened, read, closed = (s.add for s in self.ops[:3])
        opened(lats[0])
        for lat in lats[1:-1]:
            read(lat)
        closed(lats[-1])

    def closing(self, direct: bool, slot: int, fd: int) -> tuple:
        """The close entry of a request's chain: its direct descriptor's, or its fd's."""
        return (rings.OP_CLOSE, 0, 0 if direct else fd, 0, 0, 0, 0, slot + 1 if direct else 0)

    async def close_after(self, direct: bool, slot: int, fd: int) -> None:
        """Close a file whose chain failed before its close (its open had succeeded)."""
        chain = self.chain
        chain.open_i, chain.close_i = -1, 0
        await self.engine.request(chain, [self.closing(direct, slot, fd)])

    async def pause(self, until: int) -> None:
        """-T's wait: the engine's timeout for a lane, the loop's timer otherwise."""
        if self.site.gate is None:
            await self.engine.pause(until)
        else:
            await asyncio.sleep(max(0, until - now()) / 1e9)

    def decide(self, k: int) -> int:
        """What request k is when the count alone cannot say, as the Meter says (as for the
        file lanes): part of -ramp, measured, or past the measured ones."""
        what = self.meter.claim(k, now())
        self.until = self.meter.until
        return what

    def finish(self, t: int, read: int, appended: int) -> None:
        """Publish the measured requests: their bytes and each operation's latency."""
        meter, shared = self.meter, self.site
        meter.end(t)
        meter.publish(self.transfer_bytes, self.system_bytes)
        r = meter.row
        r["bytes"], r["sys_bytes"] = read, read + appended
        r["nops"] = len(WEB_OPS)
        for i, s in enumerate(self.ops):
            s.settle()
            r["op_count"][0, i], r["op_min"][0, i], r["op_max"][0, i] = s.count, s.lo, s.hi
            r["op_sum"][0, i], r["op_hist"][0, i] = s.total, s.hist
        r["size_law"][0] = shared.figures
        r["unsplit"] = self.unsplit
        r["most_open"] = shared.files.most
        r["group_work"][0] = (shared.requests, shared.read, shared.appended)
        r["web_load"][0] = shared.load()
        self.published = True

    async def check(self) -> None:
        """The log grew by exactly the bytes appended (checked by the group's last client, which
        also notes the log's size at the end)."""
        shared = self.site
        shared.finished += 1
        row = self.meter.row
        row["most_open"] = shared.files.most
        if shared.finished == shared.users:
            shared.check_log()
            row["web_load"][0, WEB_LOAD.index("log_bytes")] = os.fstat(shared.log).st_size

    async def close(self) -> None:
        if self.served is not None:             # the client's thread uses the site until
            self.halt = True                    # it ends (after the request it is making)
            await asyncio.wait([self.served])
            self.served = None
        if self.engine is not None:
            await self.engine.forget([self.buf])    # waits for a chain still in flight
            if self.chain.sqes:
                self.engine.disown(self.chain)
            if self.slot >= 0:
                self.engine.give_file(self.slot)
            self.engine.close()
            self.engine = None
        if self.site is not None:
            self.site.release(self.ctx.group.index, self.local.keepLog)
            self.site = None


HOW = {"sync": "blocking calls on the loop thread (-engine sync)",
       "threads": "each client a thread of its own (threads engine)",
       "uring": "open, reads and close as one linked io_uring chain (io_uring engine)"}
OPEN_DIRECT = os.O_RDONLY | os.O_NOFOLLOW          # (a direct descriptor takes no O_CLOEXEC)


def engine_for(ctx: TestContext) -> tuple[str, str]:
    """The engine -web's clients use, and a note on why where it is not the one asked for:
    -engine's choice, auto's as for the file tests (sync for one client alone on the loop);
    where the ring cannot open files (uring.chains()), threads."""
    name, note = choose(ctx.settings.engine, ctx.loop_tests == 1)
    if name == "uring":
        from ..io.uring import chains
        how, why = chains()
        if not how:
            return "threads", f"io_uring cannot serve requests here: {why}"
    return name, note


def settle(future: asyncio.Future, error: BaseException | None) -> None:
    """The end of a client's thread, on the loop: its future done, or failed with its error."""
    if not future.done():
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


DOING = {rings.OP_OPENAT: "opening", rings.OP_READ: "reading", rings.OP_CLOSE: "closing"}
CANCELLED = -errno.ECANCELED                       # an entry after one that failed
