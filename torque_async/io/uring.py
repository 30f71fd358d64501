"""The io_uring backend, through the liburing package: one ring for every file test on the loop.

Each registered buffer gets an Iovec built once; a transfer is io_uring_prep_readv/writev of it.
The kernel signals completions on an eventfd that the loop watches; the reader drains the
completion queue with liburing's iterator and advances it, takes the clock once per batch and
resolves each transfer's future with that time. When a transfer is submitted:

    at once            the default (one io_uring_enter each): the device starts on it sooner
    with its batch     buffered transfers whose lanes were woken by one batch of completions:
                       submitted together once all of them have prepared theirs (cached reads
                       complete inside io_uring_enter: one system call for the batch)
    and waited for     the ring's only lane: submit and wait in one system call, as the sync
                       engine blocks, and the loop gets its turn at least every YIELD_NS

These are what measured best here (tools/bench_io.py). A test's buffers are forgotten only when
none of its transfers is in flight, so the kernel never writes into memory given back.
"""
from __future__ import annotations

import asyncio
import errno
import itertools
import os

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
    ring = liburing.Ring()
    try:
        liburing.io_uring_queue_init(2, ring)
    except OSError as e:
        return f"io_uring_setup: {e.strerror}"
    liburing.io_uring_queue_exit(ring)
    return None


class UringEngine:
    name = NAMES["uring"]
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
        self.loop = asyncio.get_running_loop()
        self.ring = L.Ring()
        L.io_uring_queue_init(ENTRIES, self.ring)
        self.efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        L.io_uring_register_eventfd(self.ring, self.efd)
        self.loop.add_reader(self.efd, self.reap)
        self.cqe = L.Cqe()
        self.holding, self.held = False, 0
        self.lanes = 0                     # lanes of every test, while they run
        self.turn = now()
        self.users = 0
        self.iovecs: dict[int, tuple] = {}     # id -> (Iovec, length, buffered, its view)
        self.ids = itertools.count()
        self.tokens = itertools.count()
        self.waiting: dict[int, tuple] = {}    # user_data -> (future, result wanted, buffer id,
                                               # buffered, (write, offset) or the Timespec)

    def register(self, views: list[memoryview], buffered: bool = False) -> list[int]:
        ids = [next(self.ids) for _ in views]
        for i, view in zip(ids, views):
            self.iovecs[i] = (self.L.Iovec([view]), len(view), buffered, view)
        return ids

    def submit(self, write: bool, fd: int, buf: int, offset: int) -> asyncio.Future:
        L = self.L
        iovec, length, buffered, _ = self.iovecs[buf]
        sqe = L.io_uring_get_sqe(self.ring)
        (L.io_uring_prep_writev if write else L.io_uring_prep_readv)(sqe, fd, iovec, offset)
        return self.issue(sqe, (self.loop.create_future(), length, buf, buffered, (write, offset)))

    def pause(self, until: int) -> asyncio.Future:
        L = self.L
        ts = L.timespec(0)
        ts.sec, ts.nsec = divmod(until, 1_000_000_000)
        sqe = L.io_uring_get_sqe(self.ring)
        L.io_uring_prep_timeout(sqe, ts, 0, L.IORING_TIMEOUT_ABS)     # CLOCK_MONOTONIC
        return self.issue(sqe, (self.loop.create_future(), -errno.ETIME, -1, False, ts))

    def issue(self, sqe, waiter: tuple) -> asyncio.Future:
        token = next(self.tokens)
        sqe.user_data = token
        self.waiting[token] = waiter
        if self.lanes != 1:
            self.enter()
            return waiter[0]
        self.L.io_uring_submit_and_wait(self.ring, 1)      # the ring's only lane
        self.drain()
        return waiter[0] if now() - self.turn < YIELD_NS else self.turn_then(waiter[0])

    async def turn_then(self, done: asyncio.Future) -> int:
        """The loop's turn (every YIELD_NS), then the lone lane's transfer, done already."""
        self.turn = now()
        await asyncio.sleep(0)
        return await done

    def enter(self) -> None:
        """Submit what was prepared, unless a batch of completions is being answered."""
        if self.holding:
            self.held += 1
        else:
            self.L.io_uring_submit(self.ring)

    def flush(self) -> None:
        """The lanes woken by one batch of buffered completions have prepared their next
        transfers: submit them together."""
        self.holding = False
        if self.held:
            self.held = 0
            self.L.io_uring_submit(self.ring)

    def reap(self) -> None:
        """The eventfd fired: resolve every completed transfer with the time it was seen."""
        try:
            os.eventfd_read(self.efd)
        except BlockingIOError:
            pass
        self.drain()

    def drain(self) -> None:
        cqe, waiting, seen, cached, t = self.cqe, self.waiting, 0, 0, now()
        for _ in self.L.CqeIter(self.ring, cqe):
            entry = cqe[0]
            seen += 1
            try:
                res = entry.res
            except OSError as e:           # liburing raises for a negative result
                res = -e.errno
            future, want, _, buffered, what = waiting.pop(entry.user_data)
            cached += buffered
            if future.done():              # its lane was cancelled
                continue
            if res == want:
                future.set_result(t)
            elif res < 0:
                future.set_exception(OSError(-res, os.strerror(-res)))
            else:
                future.set_exception(short(*what, res, want))
        if seen:
            self.L.io_uring_cq_advance(self.ring, seen)
        if cached > 1 and not self.holding:     # the woken lanes run first, then flush
            self.holding = True
            self.loop.call_soon(self.flush)

    async def drive(self, lanes) -> None:
        self.lanes += len(lanes)
        try:
            await asyncio.gather(*lanes)
        finally:
            self.lanes -= len(lanes)

    async def forget(self, ids: list[int]) -> None:
        mine = set(ids)
        while any(w[2] in mine for w in self.waiting.values()):
            await asyncio.sleep(0.001)     # in flight: the reader resolves them
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
