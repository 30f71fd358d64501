"""The I/O engines: which one a test uses (choose, open_engine) and the threads and sync
backends. engine_api.py holds the interface these and uring.py implement. The backends:

    uring    io_uring (ring.py, our own): one ring for every test on the loop, answered when
             the ring's fd, which the loop watches, is readable; the engine steps the lanes
             itself (uring.py);
             transfer() is a future on the same ring, resolved by the same completion reader.
             It also has `batches`: slots whose completions a plain function answers with the
             next transfer (a file test's plain transfers, io/batch.py), no lane each
    threads  one plain thread per lane, each running its lane's blocking loop and timing its own
             transfers (os.preadv/pwritev); serial() puts a lock around what lanes share;
             transfer() runs in a thread of the engine's own, one per transfer in flight (a
             stream keeps one per sub-stream). The fallback where io_uring is unavailable.
    sync     the lanes run on the loop, each transfer a blocking call; the loop gets a turn every
             millisecond. Lowest overhead at one outstanding transfer; it cannot keep more.
             transfer() blocks the loop too. It has `batches` too: its slots' transfers are
             made in turn by one plain loop (hold()), no lane each
"""
from __future__ import annotations

import asyncio
import errno
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Coroutine

from ..timer import wait_until
from .engine_api import NAMES, YIELD_NS, Engine, now, short

NEAR_NS = 2_000_000                # sync -T waits on the loop until this near (its timers are
                                   # coarse: ~1 ms), then blocks to the end
IN_FLIGHT = 64                     # threads engine: transfer() calls in flight without queueing
STARTS = 64                        # threads engine: lane threads started between loop turns


def choose(requested: str, alone: bool) -> tuple[str, str]:
    """The engine to use for -engine `requested`, and a note on what auto chose and why.
    `alone`: the test's one transfer outstanding is all the loop has to do."""
    if requested != "auto":
        return requested, ""
    if alone:                      # blocking calls cost the least, and nothing waits for the loop
        return "sync", "auto: the only transfer outstanding on the loop"
    from .uring import unavailable
    why = unavailable()
    return ("threads", f"io_uring unavailable: {why}") if why else ("uring", "")


def open_engine(name: str) -> Engine:
    if name == "uring":
        from .uring import UringEngine
        return UringEngine.shared()
    return ThreadEngine() if name == "threads" else SyncEngine()


class Slot:
    """One transfer outstanding of a batch driver (io/batch.py) on the sync engine: the fields
    the driver reads and keeps (as uring.Slot's), its buffers as iovec lists (`bufs`: read,
    write); t0 is the clock read just before the blocking call that made its transfer."""
    __slots__ = ("done", "bufs", "want", "write", "what", "j", "k", "kind", "t0", "f")

    def __init__(self, j: int, done, read: tuple[list, int], write: tuple[list, int]):
        (riov, self.want), (wiov, wlen) = read, write
        if wlen != self.want:
            raise ValueError(f"a slot's buffers differ in length: {self.want} and {wlen}")
        self.done, self.bufs, self.write, self.what = done, (riov, wiov), False, 0
        self.j, self.k, self.kind, self.t0, self.f = j, -1, 0, 0, 0


class SyncEngine:
    """Blocking transfers on the loop's own thread; the lanes are tasks taking turns."""
    name = NAMES["sync"]
    yields = True
    batches = True                     # slots() and hold(): see io/batch.py

    def __init__(self):
        self.views: list[tuple[list[memoryview], int]] = []    # (the iovec list, its length)
        self.turn = now()
        self.places: list[tuple[Slot, tuple | None]] = []      # start(): each slot's first

    def register(self, views: list[memoryview]) -> list[int]:
        self.views += [([view], len(view)) for view in views]
        return list(range(len(self.views) - len(views), len(self.views)))

    def blocking(self, write: bool, fd: int, buf: int, offset: int) -> int:
        """One transfer on the calling thread; its completion time."""
        iov, length = self.views[buf]
        done = (os.pwritev if write else os.preadv)(fd, iov, offset)
        t = now()
        if done != length:
            raise short(write, offset, done, length)
        return t

    async def transfer(self, write: bool, fd: int, buf: int, offset: int) -> int:
        return self.blocking(write, fd, buf, offset)

    async def submit(self, write: bool, fd: int, buf: int, offset: int) -> int:
        t = self.blocking(write, fd, buf, offset)
        if self.yields and t - self.turn > YIELD_NS:
            await asyncio.sleep(0)
            self.turn = now()          # (as hold's)
        return t

    async def pause(self, until: int) -> None:
        early = until - now() - NEAR_NS
        if early > 0:
            await asyncio.sleep(early / 1e9)
        wait_until(until)

    serial = staticmethod(lambda fn: fn)     # lanes on the loop never run anything at once

    async def drive(self, lanes: list[Coroutine]) -> None:
        await asyncio.gather(*lanes)

    def slots(self, done, reads: list[int], writes: list[int], direct: bool = False) -> list[Slot]:
        """A Slot for each pair of registered buffers (reads[j], writes[j]): done(slot, res, t,
        at) gets each transfer's result and returns the slot's next transfer (write, fd, offset) or
        None (the slot ends); the caller awaits hold() for them. (`direct` changes nothing here:
        each call is a transfer's own.)"""
        return [Slot(j, done, self.views[r], self.views[w]) for j, (r, w) in
                enumerate(zip(reads, writes))]

    def start(self, slots: list[Slot]) -> None:
        """Each slot's first transfer: done(slot, slot.want, 0, 0) says which (as io_uring's)."""
        self.places = [(slot, slot.done(slot, slot.want, 0, 0)) for slot in slots]

    async def hold(self, slots: list[Slot], finished: asyncio.Future) -> None:
        """Start the slots, then make their transfers, one blocking call each, the slots in turn,
        until each has ended (then `finished`, which their done() resolves, is done; a done()
        that raises, raises here); the loop gets a turn every YIELD_NS, and first (a stream due
        at the start waited for the first slice). A transfer's latency runs from the clock read
        just before its call to the one just after."""
        self.start(slots)
        await asyncio.sleep(0)
        places, turn = [p for p in self.places if p[1] is not None], now()
        calls = (os.preadv, os.pwritev)
        while places:
            ended = False
            for i, (slot, (write, fd, offset)) in enumerate(places):
                slot.write, slot.what = write, offset
                slot.t0 = now()
                try:
                    done = calls[write](fd, slot.bufs[write], offset)
                except OSError as e:       # as io_uring says it: done() names file and place
                    done = -(e.errno or errno.EIO)
                t = at = now()
                if t - turn > YIELD_NS:            # the turn before the next claim: claimed
                    await asyncio.sleep(0)         # first, a transfer under -t started past
                    at = turn = now()              # the deadline the others' slices crossed
                place = slot.done(slot, done, t, at)   # (the slice counts from the turn's end)
                if place is None:
                    ended = True
                places[i] = (slot, place)
            if ended:
                places = [p for p in places if p[1] is not None]
        await finished

    def ready(self, count: int) -> None:
        """Lanes run on the loop: nothing to start (ThreadEngine starts their threads)."""

    async def forget(self, ids: list[int]) -> None:
        pass

    def close(self) -> None:
        self.views.clear()


class ThreadEngine(SyncEngine):
    """Each lane in its own thread: a blocking loop that times its own transfers."""
    name = NAMES["threads"]
    yields = batches = False

    def __init__(self):
        super().__init__()
        self.threads: list[tuple[threading.Thread, queue.SimpleQueue]] = []   # and its lanes
        self.lock = threading.Lock()
        # transfer()'s threads: the pool reuses an idle one or starts one more, so a transfer
        # queues only past IN_FLIGHT at once (a stream keeps at most one per sub-stream)
        self.pool = ThreadPoolExecutor(IN_FLIGHT, "torque-async transfer")

    async def transfer(self, write: bool, fd: int, buf: int, offset: int) -> int:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.blocking, write,
                                                                fd, buf, offset)

    async def pause(self, until: int) -> None:
        wait_until(until)              # the lane's own thread: blocking holds up nothing else

    def serial(self, fn: Callable) -> Callable:
        """fn under one lock: the lanes' threads run it one at a time."""
        lock = self.lock

        def locked(*args):
            with lock:
                return fn(*args)
        return locked

    def ready(self, count: int) -> None:
        """Start `count` lane threads now (set-up), each to run the lane drive() hands it:
        started by drive(), after the release, they would delay the test's start."""
        while len(self.threads) < count:
            self.spawn()

    def spawn(self) -> None:
        jobs: queue.SimpleQueue = queue.SimpleQueue()
        t = threading.Thread(target=self.serve, args=(jobs,), daemon=True,
                             name=f"torque-async lane {len(self.threads)}")
        t.start()
        self.threads.append((t, jobs))

    @staticmethod
    def serve(jobs: queue.SimpleQueue) -> None:
        """A lane thread: run each lane handed to it (its own: one lane a thread at a time),
        once `go` is set, until a None."""
        while (job := jobs.get()) is not None:
            lane, go, ended = job
            error = None
            go.wait()
            try:
                while True:            # a lane awaits only blocking calls: it never suspends
                    lane.send(None)
            except StopIteration:
                pass
            except BaseException as e:  # noqa: BLE001 - handed to drive(), which raises it
                error = e
            ended(error)

    async def drive(self, lanes: list[Coroutine]) -> None:
        loop = asyncio.get_running_loop()
        finished = loop.create_future()
        left = [len(lanes)]

        def one_less(error: BaseException | None) -> None:
            left[0] -= 1
            if finished.done():
                return
            if error is not None:      # a lane that fails ends its drive() with it
                finished.set_exception(error)
            elif not left[0]:
                finished.set_result(None)

        def ended(error: BaseException | None) -> None:
            loop.call_soon_threadsafe(one_less, error)
        # every lane is handed out before any runs: a thread's start waits for the GIL, which
        # lanes already running would hold (thousands of lanes would start slowly); threads
        # not started at set-up (ready) start here, the loop getting a turn between starts,
        # for a signal or a cancel
        go, handed = threading.Event(), 0
        try:
            for i, lane in enumerate(lanes):
                started = i >= len(self.threads)
                if started:
                    self.spawn()
                self.threads[i][1].put((lane, go, ended))
                handed += 1
                if started and i % STARTS == STARTS - 1:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            for lane in lanes[handed:]:
                lane.close()
            raise
        finally:
            go.set()                   # cancelled: the handed lanes end at the stop flag
        await finished

    async def forget(self, ids: list[int]) -> None:
        for _, jobs in self.threads:
            jobs.put(None)
        for t, _ in self.threads:      # lanes stop at the stop flag: this is short
            t.join()
        self.threads.clear()
        self.pool.shutdown()
