"""The io_uring backend, through the liburing package: one ring for every file test on the loop.

Each registered buffer gets an Iovec built once; a transfer is io_uring_prep_readv/writev of it.
The engine steps the lanes itself, not as asyncio tasks: a lane's `await submit(...)` prepares
the transfer and suspends the lane's coroutine at a bare yield (no future, no task wake-up).
Each lane keeps one Waiter, reused for every transfer (its key is the SQE's user_data), rather
than a new entry per transfer. When the eventfd the loop watches fires,
the reader takes every queued completion in one pass (one advance), reads the clock once for
the batch and sends that time into each completion's lane, which runs on to its next submit;
cached reads complete inside that batch's own submission, so the reader answers batch after
batch while there are more, giving the loop a turn every YIELD_NS. A lane takes its start
time just before its submit: a transfer's latency runs from there to the clock read of the
batch that returned it. A transfer is submitted

    at once            the default (one io_uring_enter each): the device starts on it sooner
    with its batch     buffered transfers whose lanes were woken by one batch of completions:
                       submitted together once all of them have prepared theirs (cached reads
                       complete inside io_uring_enter: one system call for the batch); their
                       latency includes the preparing of the batch's later transfers

(tools/bench_io.py compares the choices). A test may instead hand the engine `slots`: Waiters
whose completions the reader passes to a plain function, done(slot, res, t), no coroutine
(io/batch.py: the file tests' plain transfers); it returns the slot's next transfer, which the
reader prepares at once, so a batch of completions is answered and submitted again in one pass;
a slot's transfer starts (Slot.t0) at the clock read just before the io_uring_enter that
submits it, which the slots submitted together share (their latency leaves out the preparing).
`transfer` is the same transfer for an ordinary coroutine (a paced stream): its Waiter holds a
future instead of a lane, and the same reader resolves it with the batch's completion time. A
test's buffers are forgotten only when none of its transfers is in flight, so the kernel never
writes into memory given back.
"""
from __future__ import annotations

import asyncio
import errno
import functools
import itertools
import os
import signal
import types
from typing import Coroutine

from .engine import NAMES, YIELD_NS, now, short

DISABLED = "/proc/sys/kernel/io_uring_disabled"
ENTRIES = 1024                     # submission queue; completions in flight may exceed it


def unavailable() -> str | None:
    """Why io_uring cannot be used here, or None when it can."""
    try:
        import liburing
    except ImportError:
        return "no liburing package"
    try:
        with open(DISABLED) as fh:
            setting = fh.read().strip()
    except OSError:
        setting = "0"
    if setting == "2":
        return f"{DISABLED} = 2"
    return probe(liburing)


@functools.cache
def probe(liburing) -> str | None:
    """Why a ring cannot be made, or None; tried once per process, first in a forked child: a
    liburing build whose machine code this CPU lacks (its wheels use AVX-512) kills the process
    that runs it with SIGILL, which must not be the command's."""
    pid = os.fork()
    if not pid:
        try:
            trial(liburing)
        finally:
            os._exit(0)                  # whatever it raised: only a signal's death matters
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"the liburing package's code does not run on this CPU " \
               f"({signal.Signals(os.WTERMSIG(status)).name} in a trial ring)"
    ring = liburing.Ring()
    try:
        liburing.io_uring_queue_init(2, ring)
    except OSError as e:
        return f"io_uring_setup: {e.strerror}"
    liburing.io_uring_queue_exit(ring)
    return None


def trial(L) -> None:
    """A ring through the engine's own calls: one no-op submitted and its completion read."""
    ring, cqe = L.Ring(), L.Cqe()
    L.io_uring_queue_init(2, ring)
    L.io_uring_prep_nop(L.io_uring_get_sqe(ring))
    L.io_uring_submit(ring)
    L.io_uring_cq_advance(ring, sum(1 for _ in L.CqeIter(ring, cqe)))
    L.io_uring_queue_exit(ring)


class Crew:
    """The lanes of one drive() call: how many still run, and the future drive() awaits."""
    __slots__ = ("left", "finished")

    def __init__(self, left: int, finished: asyncio.Future):
        self.left, self.finished = left, finished


class Waiter:
    """Who waits for the transfer in flight under `key` (its user_data): a lane of `crew`, or a
    future of transfer()'s (crew None), or nobody (both None: its drive() was cancelled), and
    what was asked. A lane keeps one Waiter, reused for each of its transfers (one at a time).
    A Slot's completions go to its `done` instead (see slots())."""
    __slots__ = ("lane", "crew", "key", "want", "buf", "buffered", "write", "what", "done")

    def __init__(self, lane, crew: Crew | None, key: int):
        self.lane, self.crew, self.key = lane, crew, key
        self.want, self.buf, self.buffered, self.write, self.what = 0, -1, False, False, 0
        self.done = None


class Slot(Waiter):
    """One transfer outstanding of a batch driver: done(slot, res, t) gets each completion
    (res: the kernel's result). Its read and write buffers are fixed (`iovecs`, of one length,
    `want`; `buf` is the read one's id, which is what forget() looks for); j, k, kind and f
    are the driver's own (which slot, the transfer number, what it is, its file); t0 is the
    engine's: the clock read just before the io_uring_enter that submitted its transfer."""
    __slots__ = ("iovecs", "j", "k", "kind", "t0", "f")

    def __init__(self, key: int, j: int, done, read: tuple, write: tuple, buf: int):
        super().__init__(None, None, key)
        (riov, self.want, self.buffered, _), (wiov, wlen, _, _) = read, write
        if wlen != self.want:
            raise ValueError(f"a slot's buffers differ in length: {self.want} and {wlen}")
        self.iovecs, self.done, self.buf = (riov, wiov), done, buf
        self.j, self.k, self.kind, self.t0, self.f = j, -1, 0, 0, 0


class UringEngine:
    name = NAMES["uring"]
    batches = True                     # slots() and hold(): see io/batch.py
    _shared: "UringEngine | None" = None

    @classmethod
    def shared(cls) -> "UringEngine":
        """The loop's ring, made on first use; every test that uses it closes it once."""
        if cls._shared is None or cls._shared.loop is not asyncio.get_running_loop():
            cls._shared = cls()
        cls._shared.users += 1
        return cls._shared

    def __init__(self):
        import liburing as L
        self.L = L
        self.get_sqe, self.submit_all = L.io_uring_get_sqe, L.io_uring_submit
        self.preps = (L.io_uring_prep_readv, L.io_uring_prep_writev)
        self.loop = asyncio.get_running_loop()
        self.ring = L.Ring()
        L.io_uring_queue_init(ENTRIES, self.ring)
        self.efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        L.io_uring_register_eventfd(self.ring, self.efd)
        self.loop.add_reader(self.efd, self.reap)
        self.cqe = L.Cqe()
        self.holding, self.held = False, 0
        self.users = 0
        self.iovecs: dict[int, tuple] = {}     # id -> (Iovec, length, buffered, its view)
        self.ids = itertools.count()
        self.keys = itertools.count()
        self.current: Waiter | None = None     # the lane being stepped
        self.waiting: dict[int, Waiter] = {}   # user_data -> who waits for it

    def register(self, views: list[memoryview], buffered: bool = False) -> list[int]:
        ids = [next(self.ids) for _ in views]
        for i, view in zip(ids, views):
            self.iovecs[i] = (self.L.Iovec([view]), len(view), buffered, view)
        return ids

    serial = staticmethod(lambda fn: fn)     # every lane runs on the loop

    @types.coroutine
    def submit(self, write: bool, fd: int, buf: int, offset: int):
        self.prepare(self.current or self.lane(), write, fd, buf, offset)
        return (yield)                 # to the engine, which sends the completion's time

    def transfer(self, write: bool, fd: int, buf: int, offset: int) -> asyncio.Future:
        """A future of the transfer's completion time, for a coroutine that is not a lane."""
        future = self.loop.create_future()
        self.prepare(Waiter(future, None, next(self.keys)), write, fd, buf, offset)
        return future

    def prepare(self, waiter: Waiter, write: bool, fd: int, buf: int, offset: int) -> None:
        iovec, length, buffered, _ = self.iovecs[buf]
        sqe = self.get_sqe(self.ring)
        self.preps[write](sqe, fd, iovec, offset)
        waiter.want, waiter.buf, waiter.buffered, waiter.write, waiter.what = \
            length, buf, buffered, write, offset
        self.issue(sqe, waiter)

    @types.coroutine
    def pause(self, until: int):
        L, waiter = self.L, self.lane()
        ts = L.timespec(0)
        ts.sec, ts.nsec = divmod(until, 1_000_000_000)
        sqe = L.io_uring_get_sqe(self.ring)
        L.io_uring_prep_timeout(sqe, ts, 0, L.IORING_TIMEOUT_ABS)     # CLOCK_MONOTONIC
        waiter.want, waiter.buf, waiter.buffered, waiter.what = -errno.ETIME, -1, False, ts
        self.issue(sqe, waiter)
        yield

    def lane(self) -> Waiter:
        """The lane being stepped: only lanes that drive() runs await submit and pause."""
        if self.current is None:
            raise RuntimeError("io_uring transfers are awaited only by lanes that drive() runs")
        return self.current

    def issue(self, sqe, waiter: Waiter) -> None:
        """Queue sqe, its completion to go to `waiter`."""
        sqe.user_data = key = waiter.key
        self.waiting[key] = waiter
        if self.holding:
            self.held += 1
        else:
            self.submit_all(self.ring)

    async def drive(self, lanes: list[Coroutine]) -> None:
        crew = Crew(len(lanes), self.loop.create_future())
        for lane in lanes:
            self.step(Waiter(lane, crew, next(self.keys)), None, None)
        try:
            await crew.finished
        except asyncio.CancelledError:             # close the lanes; the ring still holds their
            for lane in lanes:                     # transfers: reap() drops them, forget()
                lane.close()                       # waits for them
            for waiter in self.waiting.values():
                if waiter.crew is crew:
                    waiter.lane = waiter.crew = None
            raise

    def slots(self, done, reads: list[int], writes: list[int]) -> list[Slot]:
        """A Slot for each pair of registered buffers (reads[j], writes[j]), its completions to
        go to done(slot, res, t), which returns the slot's next transfer (write, fd, offset) or
        None (the slot ends); the caller start()s them and awaits hold()."""
        return [Slot(next(self.keys), j, done, self.iovecs[r], self.iovecs[w], r)
                for j, (r, w) in enumerate(zip(reads, writes))]

    def start(self, slots: list[Slot]) -> None:
        """Queue each slot's first transfer: done(slot, slot.want, 0) says which (a slot's done
        tells this call from a completion by its own state)."""
        self.serve([(slot, slot.want) for slot in slots], 0, False)

    async def hold(self, slots: list[Slot], finished: asyncio.Future) -> None:
        """Await `finished`, which the slots' done() resolves; cancelled, the slots' transfers
        still in the ring are dropped by reap() (forget() waits for them)."""
        try:
            await finished
        except asyncio.CancelledError:
            for slot in slots:
                slot.done = None
            raise

    def step(self, waiter: Waiter, value, error: BaseException | None) -> None:
        """Run a lane from where it waits to its next transfer (or its end)."""
        self.current, lane, crew = waiter, waiter.lane, waiter.crew
        try:
            awaited = lane.send(value) if error is None else lane.throw(error)
            if awaited is None:
                return
            lane.close()
            raise RuntimeError(f"a lane awaited {awaited!r}: lanes await only the engine")
        except StopIteration:
            pass
        except BaseException as e:  # noqa: BLE001 - a lane that fails ends its drive() with it
            if not crew.finished.done():
                crew.finished.set_exception(e)
        finally:
            self.current = None
        crew.left -= 1
        if not crew.left and not crew.finished.done():
            crew.finished.set_result(None)

    def reap(self) -> None:
        """The eventfd fired: answer the completions queued, batch after batch while each
        batch's submission completed more at once (cached reads complete inside io_uring_enter:
        answered here, not after a trip through the loop), giving the loop a turn at least
        every YIELD_NS."""
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass
        t = self.answer()
        turn = t + YIELD_NS
        while t and t < turn:
            t = self.answer()

    def answer(self) -> int:
        """Take every completion queued (one pass, then one advance), take the clock once for
        the batch and hand each completion to its waiter; returns that time (0: none)."""
        cqe, pop, batch, buffered = self.cqe, self.waiting.pop, [], 0
        for _ in self.L.CqeIter(self.ring, cqe):
            entry = cqe[0]
            try:
                res = entry.res
            except OSError as e:           # liburing raises for a negative result
                res = -e.errno
            waiter = pop(entry.user_data)
            buffered += waiter.buffered
            batch.append((waiter, res))
        if not batch:
            return 0
        self.L.io_uring_cq_advance(self.ring, len(batch))
        t = now()
        self.serve(batch, t, buffered > 1)
        return t

    def serve(self, batch: list[tuple[Waiter, int]], t: int, together: bool) -> None:
        """Hand each (waiter, result) of a batch completed at t to its waiter: a Slot's done()
        returns its next transfer, (write, fd, offset) or None, which is queued here; a lane
        runs on to its next submit; a future is resolved. `together`: what they queue is
        submitted once, after the batch is answered, else each at once; a Slot's t0 is the
        clock read just before its submit."""
        self.holding, step = together, self.step
        get_sqe, ring, preps, waiting = self.get_sqe, self.ring, self.preps, self.waiting
        held: list[Slot] = []              # slots whose transfers go with the batch's submit
        for waiter, res in batch:
            done = waiter.done
            if done is not None:           # a Slot
                place = done(waiter, res, t)
                if place is not None:
                    write, fd, offset = place
                    sqe = get_sqe(ring)
                    preps[write](sqe, fd, waiter.iovecs[write], offset)
                    waiter.write, waiter.what = write, offset
                    sqe.user_data = key = waiter.key
                    waiting[key] = waiter
                    if together:
                        held.append(waiter)
                    else:
                        waiter.t0 = now()
                        self.submit_all(ring)
                continue
            if res == waiter.want:
                if waiter.crew is not None:
                    step(waiter, t, None)
                    continue
                error = None
            else:
                error = OSError(-res, os.strerror(-res)) if res < 0 else \
                    short(waiter.write, waiter.what, res, waiter.want)
            lane = waiter.lane
            if lane is None:               # its drive() was cancelled
                continue
            if waiter.crew is not None:
                step(waiter, None, error)
            elif not lane.done():          # transfer()'s future, its awaiter not cancelled
                if error is None:
                    lane.set_result(t)
                else:
                    lane.set_exception(error)
        self.holding = False
        if self.held or held:
            self.held, t0 = 0, now()
            self.submit_all(ring)
            for slot in held:
                slot.t0 = t0

    async def forget(self, ids: list[int]) -> None:
        mine = set(ids)
        while any(w.buf in mine for w in self.waiting.values()):
            await asyncio.sleep(0.001)     # in flight: the reader takes them
        for i in ids:
            del self.iovecs[i]

    def close(self) -> None:
        self.users -= 1
        if self.users:
            return
        UringEngine._shared = None
        self.loop.remove_reader(self.efd)
        self.L.io_uring_queue_exit(self.ring)
        os.close(self.efd)
