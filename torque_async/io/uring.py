"""The io_uring backend: one ring for every file test on the loop (ring.py: the kernel's rings,
mapped, and its system calls; no liburing).

A registered buffer is its address and length, its export held until forget(); a transfer is a
read or write at that address. The engine steps the lanes itself, not as asyncio tasks: a
lane's `await submit(...)` prepares the transfer and suspends the lane's coroutine at a bare
yield (no future, no task wake-up). Each lane keeps one Waiter, reused for every transfer (its
key is the SQE's user_data), rather than a new entry per transfer. When the ring's fd, which
the loop watches, is readable, the reader takes every queued completion in one pass (one
advance), reads the clock once for the batch and sends that time into each completion's lane,
which runs on to its next submit; cached reads complete inside that batch's own submission,
so the reader answers batch after batch while there are more, giving the loop a turn every
YIELD_NS. A lane takes its start time just before its submit: a transfer's latency runs from
there to the clock read of the batch that returned it. A transfer is submitted

    at once            alone in its batch of completions (or the test's first)
    with its batch     the transfers that one batch of completions prepared: submitted together
                       once all of them have (one io_uring_enter for the batch; cached reads
                       complete inside it); a lane's latency includes the preparing of the
                       batch's later transfers, a slot's does not (below)

(tools/bench_io.py says why), but O_DIRECT transfers of slots go in groups of `group` while
the rest of the batch is prepared, where set-up found that faster (calibrate(): a disk whose
queue would otherwise wait for the whole batch's preparing; every such submit costs a system
call). A test may instead hand the engine `slots`: Waiters whose completions the reader passes
to a plain function, done(slot, res, t, at), no coroutine (io/batch.py: the file tests' plain
transfers); it returns the slot's next transfer, which the reader prepares
at once, so a batch of completions is answered and submitted again in one pass.
A slot owns an SQE while the ring has them to spare: its fields stay written, and a transfer to
the same file in the same direction only changes its offset. A slot's transfer starts (Slot.t0)
at the clock read just before the io_uring_enter that submits it, which the slots submitted
together share (their latency leaves out the preparing). `transfer` is the same transfer for an
ordinary coroutine (a paced stream): its Waiter holds a future instead of a lane, and the same
reader resolves it with the batch's completion time. A test's buffers are forgotten only when
none of its transfers is in flight, so the kernel never writes into memory given back.

`request(chain, ops)` submits linked SQEs as one Chain (a -web request: open, reads, close):
queued at once, submitted with every other chain queued in the same turn of the loop (or with
the batch of completions being answered), and awaited whole: a lane is stepped, any other
coroutine's future resolved, once the last of its entries has completed; each entry's result
and the clock read of the batch that returned it are the chain's (`res`, `at`). A chain may
instead own() its SQEs (a -web client's: only the open's name changes from one request to the
next) and be answered by a plain function, done(chain, t, got), sent again() from there: where
the batch is large, answer_owned() takes it apart with numpy, and a chain that completed whole in
it is answered once with the bytes it read, no Python per entry.
"""
from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import itertools
import mmap
import os
import resource
import types
from typing import Callable, Coroutine, NamedTuple

import numpy as np

from . import ring as rings
from ..units import amount
from .engine_api import NAMES, YIELD_NS, now, short

DISABLED = "/proc/sys/kernel/io_uring_disabled"
ENTRIES = 4096                     # SQEs; completions in flight may exceed it
FORGET_POLL = 0.001                # s: forget()'s first look again for transfers in flight
RETRY = 0.001                      # s: a submit the kernel refused for now (EBUSY, EAGAIN) is
                                   # tried again this much later, in case nothing is in flight
                                   # whose completion would bring the next one
BATCH = 1024                       # completions answered at most at once: thousands answered
                                   # together would hold the loop (and a signal) too long
OPS = (rings.OP_READ, rings.OP_WRITE)
GROUPS = (0, 4, 2, 1)              # O_DIRECT slot transfers a submit while a batch is answered
                                   # (0: the batch's all, once it is answered): calibrate() times
                                   # each; fio submits each one (iodepth_batch_submit=1)
CALIBRATION_NS = 20_000_000        # one calibration trial (a group's reads at every depth)
CALIBRATION_ROUNDS = 3             # trials of every group, in turn (the best of each counts)
CALIBRATION_BYTES = 16 << 20       # most bytes in flight a calibration reads (each trial's
                                   # end drains them: large reads in flight lengthen set-up)
CHAIN = 1 << 62                    # a chain's entries' user_data: CHAIN | its number << 8 | entry
PIECE = 64                         # most SQEs of one chain (a request of more goes in pieces)
OWN, LAST = 1 << 61, 0x80          # user_data: an own()ed chain's entries; its last one's
NUMPY_CQES = 64                    # fewest completions answer_owned() takes apart with numpy
CQE_FIELDS = np.dtype([("key", "<u8"), ("res", "<i4"), ("flags", "<u4")])   # a CQE, for numpy
TRIAL_READS = 2                    # a trial's completions must reach this many times the reads in
                                   # flight (a deep queue may complete none in a short trial)


def unavailable() -> str | None:
    """Why io_uring cannot be used here, or None when it can."""
    why = rings.unusable()
    if why:
        return why
    try:
        with open(DISABLED) as fh:
            setting = fh.read().strip()
    except OSError:
        setting = "0"
    if setting == "2":
        return f"{DISABLED} = 2"
    return probe()


@functools.cache
def probe() -> str | None:
    """Why a ring cannot be made and used, or None; tried once per process: a byte read from a
    pipe through a ring of the engine's own calls."""
    try:
        trial()
    except OSError as e:
        return e.strerror or str(e)
    return None


def trial() -> None:
    ring = rings.Ring(2)
    r, w = os.pipe()
    try:
        os.write(w, b"x")
        got = bytearray(1)
        addr, held = rings.address(memoryview(got))
        i = ring.borrowed_sqe()
        ring.write(i, rings.OP_READ, r, addr, 1, 0, 7)
        ring.queue(i)
        ring.submit(wait=1)
        done = ring.completions()
        del held
        if done != [(7, 1, 0)] or got != b"x":
            raise OSError(errno.EIO, f"a trial read through the ring returned {done}")
    finally:
        os.close(r)
        os.close(w)
        ring.close()


@functools.cache
def chains() -> tuple[str, str]:
    """How a -web request's open and close go through a ring here: "direct" (openat into a
    direct descriptor, linked to its reads and close), "fd" (an ordinary descriptor: the open
    alone, then the reads linked to the close), or "" and why neither can (then -web uses
    threads). Tried once per process on a ring of its own, opening "/"."""
    why = unavailable()
    if why:
        return "", why
    name = ctypes.create_string_buffer(b"/")
    flags = os.O_RDONLY | os.O_DIRECTORY           # (a direct open refuses O_CLOEXEC: it makes
    ring = rings.Ring(4)                           # no descriptor of the process's)
    try:
        try:
            ring.register_files(1)
            done = run_chain(ring, [(rings.OP_OPENAT, rings.SQE_IO_LINK, AT_FDCWD,
                                     ctypes.addressof(name), 0, 0, flags, 1),
                                    (rings.OP_CLOSE, 0, 0, 0, 0, 0, 0, 1)])
            if done == [0, 0]:
                return "direct", ""
        except OSError:
            pass
        done = run_chain(ring, [(rings.OP_OPENAT, 0, AT_FDCWD, ctypes.addressof(name), 0, 0,
                                 flags, 0)])
        if done[0] < 0:
            return "", f"io_uring cannot open files here ({os.strerror(-done[0])})"
        done = run_chain(ring, [(rings.OP_CLOSE, 0, done[0], 0, 0, 0, 0, 0)])
        if done[0] < 0:
            return "", f"io_uring cannot close files here ({os.strerror(-done[0])})"
        return "fd", "this kernel's io_uring opens no direct descriptors"
    except OSError as e:
        return "", e.strerror or str(e)
    finally:
        ring.close()


AT_FDCWD = -100


def run_chain(ring: rings.Ring, ops: list[tuple]) -> list[int]:
    """Submit `ops` (as Chain's) linked, wait for them and return their results in order."""
    for j, op in enumerate(ops):
        i = ring.borrowed_sqe()
        ring.chain(i, op[0], op[1], op[2], op[3], op[4], op[5], j, op[6], op[7])
        ring.queue(i)
    ring.submit(wait=len(ops))
    return [res for _, res, _ in sorted(ring.completions())]


def file_slots() -> int:
    """The direct descriptors a ring's table holds: as many SQEs as the ring has, at most the
    process's descriptor limit (the kernel refuses a larger table)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ENTRIES if soft == resource.RLIM_INFINITY else min(ENTRIES, soft)


class Gauge:
    """How many of something are held now, and the most at once (as the loop sees them)."""
    __slots__ = ("now", "most")

    def __init__(self):
        self.now = self.most = 0

    def up(self) -> None:
        self.now += 1
        if self.now > self.most:
            self.most = self.now

    def down(self) -> None:
        self.now -= 1


class Chain:
    """One request's linked SQEs (or a piece of them) in flight: each entry's result and the
    clock read of the batch of completions that returned it (`res`, `at`), from t0, the clock
    read just before the io_uring_enter that submitted them. It is awaited by the lane that
    submitted it (`waiter`) or through `future`; `buf` is the registered buffer its reads fill
    (forget() waits for it). The entry `open_i` and the entry `close_i` count the files held
    open in `files` as the loop sees their completions (a cancelled close closed nothing)."""
    __slots__ = ("key", "waiter", "future", "res", "at", "left", "t0", "buf", "files",
                 "open_i", "close_i", "done", "sqes", "order")

    def __init__(self, key: int, buf: int, files: Gauge):
        self.key, self.buf, self.files = key, buf, files
        self.waiter: Waiter | None = None
        self.future: asyncio.Future | None = None
        self.done: Callable[[Chain, int, int], None] | None = None   # own(): done(chain, t,
                                           # got) once it completes (answer_owned())
        self.sqes: list[int] = []          # own(): its SQEs (the open, each read, the close)
        self.order: list[int] = []         # those of its next request, in the chain's order
        self.res: list[int] = []
        self.at: list[int] = []
        self.left = self.t0 = 0
        self.open_i = self.close_i = -1


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
    __slots__ = ("lane", "crew", "key", "want", "buf", "write", "what", "done", "sqe")

    def __init__(self, lane, crew: Crew | None, key: int):
        self.lane, self.crew, self.key = lane, crew, key
        self.want, self.buf, self.write, self.what = 0, -1, False, 0
        self.done, self.sqe = None, -1         # sqe: the SQE it owns (a Slot's), or -1


class Slot(Waiter):
    """One transfer outstanding of a batch driver: done(slot, res, t, at) gets each completion
    (res: the kernel's result). Its read and write buffers are fixed (`bufs`: their address
    and length, `want`; `buf` is the read one's id, which is what forget() looks for); j, k,
    kind and f are the driver's own (which slot, the transfer number, what it is, its file);
    t0 is the engine's: the clock read just before the io_uring_enter that submitted its
    transfer; fd is the file its SQE was last written for; finished is the future its hold()
    awaits, which a done() that raises fails."""
    __slots__ = ("bufs", "j", "k", "kind", "t0", "f", "fd", "direct", "finished")

    def __init__(self, key: int, j: int, done, read: tuple, write: tuple, buf: int, sqe: int,
                 direct: bool):
        super().__init__(None, None, key)
        self.direct = direct               # its files are open with O_DIRECT (grouped submits)
        (raddr, self.want, _), (waddr, wlen, _) = read, write
        if wlen != self.want:
            raise ValueError(f"a slot's buffers differ in length: {self.want} and {wlen}")
        self.bufs, self.done, self.buf, self.sqe = (raddr, waddr), done, buf, sqe
        self.j, self.k, self.kind, self.t0, self.f, self.fd = j, -1, 0, 0, 0, -1
        self.finished: asyncio.Future | None = None


class Source(NamedTuple):
    """What calibrate() reads of one test (`owner`): its transfer size and depth, its files
    (descriptors and names), and place(k), the (file index, offset) its k-th read goes to."""
    owner: object
    size: int
    depth: int
    fds: list[int]
    paths: list[str]
    place: Callable[[int], tuple[int, int]]


class Misread(Exception):
    """A calibration read failed: `error` names its file and place, `owner` its Source's."""

    def __init__(self, owner: object, error: OSError):
        super().__init__(error)
        self.owner, self.error = owner, error


def pick(best: dict[int, float], rates: list[float]) -> int:
    """The group whose trial beat whole batches' in every round, the best of them at its best;
    whole batches (the fewest system calls) where none did. Paired by round: a round's trials
    run back to back, so a disk that drifts from round to round moves both alike (unpaired,
    the spread of a group's own trials would decide the pick). A group no faster wins every
    round by chance (1 in 8 for each): it then costs only system calls. `rates`: every trial's, round after round of one trial of
    each group in best's order, whole batches first."""
    order = list(best)
    if 0 not in order:
        return 0
    n = len(order)
    whole = rates[order.index(0)::n]
    wins = [g for i, g in enumerate(order)
            if g and all(r > w for r, w in zip(rates[i::n], whole))]
    return max(wins, key=best.__getitem__, default=0)


TRIALS = "the best trial of each way here:"     # the O_DIRECT submits line's, before the rates


def submits(group: int) -> str:
    """How a GROUPS entry submits, in words."""
    return f"{group} at a time" if group else "whole batches"


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
        self.loop = asyncio.get_running_loop()
        self.ring = rings.Ring(ENTRIES)
        self.loop.add_reader(self.ring.fd, self.reap)   # readable while completions wait
        self.holding, self.held = False, 0
        self.retry: asyncio.TimerHandle | None = None
        self.starting: list[Slot] = []         # started this turn, not yet submitted
        self.group = 0                         # GROUPS: O_DIRECT slots' submits (calibrate)
        self.flush: asyncio.Handle | None = None
        self.users = 0
        self.iovecs: dict[int, tuple] = {}     # id -> (address, length, its export)
        self.ids = itertools.count()
        self.keys = itertools.count()
        self.current: Waiter | None = None     # the lane being stepped
        self.waiting: dict[int, Waiter] = {}   # user_data -> who waits for it
        self.chains: dict[int, Chain] = {}     # user_data >> 8 -> a chain in flight
        self.queued: list[Chain] = []          # chains queued, not yet submitted
        self.owned: list[int] = []             # own()ed chains' SQEs, queued at the next push
        self.early = (0, 0)                    # completions in the CQ at clock read t (taken())
        self.owners: dict[Gauge, int] = {}     # own()ed chains, by the gauge of their files
        self.own_chains: list[Chain | None] = []   # each own()ed chain at its place (its key
        self.own_free: list[int] = []              # says which), and the places free
        self.chain_flush: asyncio.Handle | None = None
        self.files: list[int] | None = None    # direct descriptors free (None: no table yet)
        self.table = 0                         # the direct descriptors it holds
        self.workers: int | None = 0           # io-wq's cap on blocking opens (cover(); 0:
                                               # not asked yet)

    def register(self, views: list[memoryview]) -> list[int]:
        ids = [next(self.ids) for _ in views]
        for i, view in zip(ids, views):
            addr, held = rings.address(view)
            self.iovecs[i] = (addr, len(view), held)
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

    def chain(self, buf: int, files: Gauge) -> Chain:
        """A Chain for a coroutine's requests, one at a time (its reads fill registered
        buffer `buf`)."""
        return Chain(CHAIN | next(self.keys) << 8, buf, files)

    def address(self, buf: int) -> int:
        return self.iovecs[buf][0]

    def take_file(self) -> int:
        """A direct descriptor of the ring's table (registered on first use), or -1 when the
        table has none left (file_slots() of them)."""
        if self.files is None:
            self.table = file_slots()
            self.ring.register_files(self.table)
            self.files = list(range(self.table - 1, -1, -1))
        if not self.files:
            return -1
        self.cover(self.table - len(self.files) + 1)
        return self.files.pop()

    def cover(self, opens: int) -> None:
        """Let io-wq run `opens` blocking opens at once, one a client: an open whose path is
        not cached waits for the disk on one of io-wq's bounded workers, whose default cap,
        min(SQEs, 4 x CPUs), would hold the clients' opens (and the disk's queue) to that
        many. Raised by doubling, on first need; `workers` None: this kernel cannot (before
        5.15), and the cap stays its own."""
        if self.workers is None or opens <= self.workers:
            return
        try:
            if not self.workers:               # the kernel's cap (a 0 changes nothing)
                self.workers = self.ring.iowq_workers(0)[0]
            if opens > self.workers:
                want = min(max(opens, 2 * self.workers), self.table)
                self.ring.iowq_workers(want)
                self.workers = want
        except OSError:
            self.workers = None

    def give_file(self, i: int) -> None:
        self.files.append(i)

    @types.coroutine
    def request(self, chain: Chain, ops: list[tuple]):
        """Submit `ops`, each (opcode, IOSQE flags, fd, address, length, offset, op flags,
        file_index), as `chain`'s linked entries (at most PIECE); returns the chain once every
        entry has completed."""
        sqes, write, key = self.lend_chain(chain, len(ops)), self.ring.chain, chain.key
        for j, (i, (op, flags, fd, addr, length, offset, op_flags, index)) in \
                enumerate(zip(sqes, ops)):
            write(i, op, flags, fd, addr, length, offset, key | j, op_flags, index)
        self.send_chain(chain, sqes)
        if chain.waiter is not None:
            return (yield)             # to the engine, which steps the lane with the chain
        return (yield from chain.future)

    @types.coroutine
    def whole(self, chain: Chain, dirfd: int, name: int, flags: int, slot: int, addr: int,
              chunk: int, reads: int):
        """request()'s common case, written straight into the SQEs: open `name` (an address)
        under `dirfd` into direct descriptor `slot`, `reads` reads of `chunk` bytes at `addr`
        from offsets 0, chunk, ..., and its close (at most PIECE entries in all)."""
        n = reads + 2
        sqes = self.lend_chain(chain, n)
        chain.open_i, chain.close_i = 0, n - 1
        key, prep, area = chain.key, self.ring.prep, self.ring.sqe_map
        prep(area, sqes[0] << 6, rings.OP_OPENAT, rings.SQE_IO_LINK, 0, dirfd, 0, name, 0,
             flags, key, 0, 0, slot + 1, 0, 0)
        flag = rings.SQE_IO_HARDLINK | rings.SQE_FIXED_FILE
        for j in range(1, reads + 1):
            prep(area, sqes[j] << 6, rings.OP_READ, flag, 0, slot, (j - 1) * chunk, addr, chunk,
                 0, key | j, 0, 0, 0, 0, 0)
        prep(area, sqes[-1] << 6, rings.OP_CLOSE, 0, 0, 0, 0, 0, 0, 0, key | n - 1, 0, 0,
             slot + 1, 0, 0)
        self.send_chain(chain, sqes)
        if chain.waiter is not None:
            return (yield)
        return (yield from chain.future)

    def lend_chain(self, chain: Chain, n: int) -> list[int]:
        """Ready `chain` for n entries, awaited by the lane being stepped or else a future, and
        lend it n SQEs, as borrowed_sqe() lends them. A chain goes to the kernel whole: never
        split by the submit that borrowed_sqe() makes when none is left."""
        ring = self.ring
        if len(ring.free) < n:
            self.push()
            if len(ring.free) < n:
                raise OSError(errno.EBUSY, "io_uring: no room in the ring for a request's "
                              "chain before completions are read")
        current = chain.waiter = self.current
        chain.future = None if current is not None else self.loop.create_future()
        chain.left, chain.res, chain.at = n, [0] * n, [0] * n
        free = ring.free
        sqes = free[-n:]
        del free[-n:]
        ring.lent += sqes
        return sqes

    def own(self, chain: Chain, ops: list[tuple]) -> bool:
        """Give `chain` SQEs of its own, written once with `ops` (as request()'s: its open,
        each read its files may need, its close): a plain function, chain.done(chain, t, got),
        then answers each of its requests (no coroutine), and again() sends the next. False
        (none taken) where the ring keeps too few to spare (Ring.take)."""
        ring = self.ring
        sqes = [ring.take() for _ in ops]
        if -1 in sqes:
            for i in sqes:
                if i >= 0:
                    ring.give_back(i)
            return False
        free = self.own_free
        if not free:
            free.append(len(self.own_chains))
            self.own_chains.append(None)
        n = free.pop()
        chain.key = CHAIN | OWN | n << 8       # n: its place in own_chains
        self.own_chains[n] = chain
        for j, (i, (op, flags, fd, addr, length, offset, op_flags, index)) in \
                enumerate(zip(sqes, ops)):
            ring.chain(i, op, flags, fd, addr, length, offset, chain.key | j, op_flags, index)
        chain.sqes, chain.order = sqes, []
        self.owners[chain.files] = self.owners.get(chain.files, 0) + 1
        return True

    def again(self, chain: Chain, name: int, reads: int) -> None:
        """Send an own()ed chain again: its open of `name` (an address), its first `reads`
        reads and its close; queued with the batch being answered, or this turn's chains."""
        if len(chain.order) != reads + 2:      # its close is entry reads + 1
            sqes = chain.sqes
            chain.order = sqes[:reads + 1] + sqes[-1:]
            self.ring.user_data[sqes[-1]] = chain.key | LAST | reads + 1
            chain.res, chain.at = [0] * (reads + 2), [0] * (reads + 2)
            chain.open_i, chain.close_i = 0, reads + 1
        self.ring.addrs[chain.sqes[0]] = name
        chain.left = reads + 2
        self.owned += chain.order
        self.enqueued(chain)

    def disown(self, chain: Chain) -> None:
        """Give back an own()ed chain's SQEs (it is not in flight: forget() waited)."""
        for i in chain.sqes:
            self.ring.give_back(i)
        chain.sqes, chain.done = [], None
        n = (chain.key >> 8) & 0xFFFF
        self.own_chains[n] = None
        self.own_free.append(n)
        self.owners[chain.files] -= 1
        if not self.owners[chain.files]:
            del self.owners[chain.files]

    def send_chain(self, chain: Chain, sqes: list[int]) -> None:
        """Queue the chain's SQEs: submitted with the batch of completions being answered, or
        with every chain queued in this turn of the loop."""
        self.ring.queue_all(sqes)
        self.enqueued(chain)

    def enqueued(self, chain: Chain) -> None:
        """A chain's SQEs are queued (or own()ed ones due at the next push)."""
        self.chains[chain.key >> 8] = chain
        self.queued.append(chain)
        if self.holding:
            self.held += 1
        elif self.chain_flush is None:
            self.chain_flush = self.loop.call_soon(self.chains_due)

    def chains_due(self) -> None:
        self.chain_flush = None
        if self.queued:
            self.push()

    def prepare(self, waiter: Waiter, write: bool, fd: int, buf: int, offset: int) -> None:
        addr, length, _ = self.iovecs[buf]
        waiter.want, waiter.buf, waiter.write, waiter.what = length, buf, write, offset
        self.issue(waiter, OPS[write], fd, addr, length, offset)

    @types.coroutine
    def pause(self, until: int):
        waiter = self.lane()
        ts = (ctypes.c_int64 * 2)(*divmod(until, 1_000_000_000))      # CLOCK_MONOTONIC
        waiter.want, waiter.buf, waiter.what = -errno.ETIME, -1, ts
        self.issue(waiter, rings.OP_TIMEOUT, -1, ctypes.addressof(ts), 1, 0, rings.TIMEOUT_ABS)
        yield

    def lane(self) -> Waiter:
        """The lane being stepped: only lanes that drive() runs await submit and pause."""
        if self.current is None:
            raise RuntimeError("io_uring transfers are awaited only by lanes that drive() runs")
        return self.current

    def issue(self, waiter: Waiter, op: int, fd: int, addr: int, length: int, offset: int,
              flags: int = 0) -> None:
        """Queue the transfer in an SQE lent until it is submitted, its completion to go to
        `waiter`."""
        ring = self.ring
        i = ring.borrowed_sqe()
        ring.write(i, op, fd, addr, length, offset, waiter.key, flags)
        self.waiting[waiter.key] = waiter
        ring.queue(i)
        if self.holding:
            self.held += 1
        else:
            self.push()

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
            for chain in self.chains.values():
                if chain.waiter is not None and chain.waiter.crew is crew:
                    chain.waiter = None
            raise

    def slots(self, done, reads: list[int], writes: list[int], direct: bool = False) -> list[Slot]:
        """A Slot for each pair of registered buffers (reads[j], writes[j]), its completions to
        go to done(slot, res, t, t), which returns the slot's next transfer (write, fd, offset) or
        None (the slot ends); the caller awaits hold() for them. `direct`: its files
        are open with O_DIRECT."""
        return [Slot(next(self.keys), j, done, self.iovecs[r], self.iovecs[w], r,
                     self.ring.take(), direct)
                for j, (r, w) in enumerate(zip(reads, writes))]

    def start(self, slots: list[Slot]) -> None:
        """Queue each slot's first transfer: done(slot, slot.want, 0, 0) says which (a slot's done
        tells this call from a completion by its own state). They go with the first transfers
        of every test started in this turn of the loop, in one submit: a submit of each
        test's own as it started would put its first transfer ahead of the later tests' start."""
        self.serve(self.starts(slots), 0, True, starting=True)

    def starts(self, slots: list[Slot]) -> list[tuple[int, int, int]]:
        """The slots as completions of their `want` bytes, for serve() to hand them their first
        transfer."""
        self.waiting.update((slot.key, slot) for slot in slots)
        return [(slot.key, slot.want, 0) for slot in slots]

    async def hold(self, slots: list[Slot], finished: asyncio.Future) -> None:
        """Start the slots and await `finished`, which their done() resolves (or fails, by
        raising: serve() ends that slot); cancelled or failed, the slots' transfers still in
        the ring are dropped by reap() (forget() waits for them)."""
        for slot in slots:
            slot.finished = finished
        self.start(slots)
        try:
            await finished
        except BaseException:
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
        """The ring's fd is readable (completions wait: the kernel's poll says so for as long
        as they do, no eventfd to read): answer the completions queued, batch after batch while
        each batch's submission completed more at once (cached reads complete inside
        io_uring_enter: answered here, not after a trip through the loop), giving the loop a
        turn at least every YIELD_NS; it calls again for what is left."""
        t = self.answer()
        turn = t + YIELD_NS
        while t and t < turn:
            t = self.answer()

    def answer(self) -> int:
        """Take every completion queued (one pass, then one advance), take the clock once for
        the batch and hand each completion to its waiter; returns that time (0: none)."""
        if len(self.owners) == 1:
            return self.answer_owned()
        batch, t = self.taken(self.ring.completions, len)
        if batch:
            self.serve(batch, t, len(batch) > 1)
        return t

    def taken(self, take: Callable[[int], list | bytes], count: Callable[[object], int]):
        """The next batch of completions, take(most)'s (count() says how many it holds), and
        the clock read that stamps them: 0 where none came. Those that were in the CQ already at
        the last clock read (a batch stops at BATCH) keep it: each was posted before it, and a
        later read would add the loop's time over the batch before to their latency and part
        a chain's entries that completed together. The others get a new one, read after the
        CQ's tail was."""
        left, t = self.early
        if left:
            batch = take(min(left, BATCH))
            self.early = (left - count(batch), t)
            return batch, t
        batch = take(BATCH)
        if not batch:
            return batch, 0
        left = self.ring.ready()
        t = now()
        self.early = (left, t)
        return batch, t

    def answer_owned(self) -> int:
        """answer() where own()ed chains are in flight (their files one Gauge's): the batch is
        taken apart with numpy, so an own()ed chain whose every entry completed in this batch,
        none failing, costs no Python per entry: its files count in the gauge in the order the
        kernel posted the completions, its reads' bytes are summed, and its done(chain, t, got)
        is called once. Every other completion goes through serve()."""
        raw, t = self.taken(self.ring.raw, lambda raw: len(raw) // rings.CQE.size)
        if not raw:
            return 0
        if len(raw) < NUMPY_CQES * rings.CQE.size:         # numpy's own cost would outweigh it
            batch = list(rings.CQE.iter_unpack(raw))
            self.serve(batch, t, len(batch) > 1)
            return t
        cq = np.frombuffer(raw, CQE_FIELDS)
        key, res = cq["key"], cq["res"]
        own = (key & OWN) != 0
        place, entry = (key >> 8) & 0xFFFF, key & 0xFF
        seen = np.zeros((3, len(self.own_chains)), bool)   # its open, its last, a failure
        seen[0, place[own & (entry == 0)]] = True
        seen[1, place[own & (entry >= LAST)]] = True
        failed = own & (res < 0)
        if failed.any():
            seen[2, place[failed]] = True
        whole = seen[0] & seen[1] & ~seen[2]
        if own.all():
            mine = whole[place]
        else:                                  # (another test's completions among them)
            mine = own.copy()
            mine[own] = whole[place[own]]
        if mine.any():
            files, = self.owners
            ends = entry[mine]
            steps = (ends == 0).astype(np.int64) - (ends >= LAST)
            most = files.now + int(np.cumsum(steps).max())
            if most > files.most:
                files.most = most
            got = np.bincount(place[mine], weights=res[mine], minlength=whole.size)
            chains, owned = self.chains, self.own_chains
            self.holding = True
            for n, g in zip(np.flatnonzero(whole).tolist(), got[whole].astype(np.int64).tolist()):
                chain = owned[n]
                del chains[chain.key >> 8]
                if chain.done is not None:     # (None: its client was cancelled meanwhile)
                    chain.done(chain, t, g)
            cq = cq[~mine] if not mine.all() else cq[:0]
        self.serve(cq.tolist(), t, True)
        return t

    def serve(self, batch: list[tuple[int, int, int]], t: int, together: bool,
              starting: bool = False) -> None:
        """Hand each completion (key, result, flags) of a batch completed at t to its waiter,
        which `waiting` holds under the key until then (a Slot's for as long as it lives, the
        same key for each of its transfers): a Slot's done() returns its next
        transfer, (write, fd, offset) or None, which is queued here; a lane runs on to its next
        submit; a future is resolved. `together`: what they queue is submitted once, after the
        batch is answered (`starting`: with every test's that starts in this turn of the loop),
        else each at once; a Slot's t0 is the clock read just before its submit."""
        self.holding, step, ring = together, self.step, self.ring
        waiting, offsets, write_sqe, queue = self.waiting, ring.offsets, ring.write, ring.queue_all
        held: list[Slot] = []              # slots whose transfers go with the batch's submit
        sqes: list[int] = []               # their SQEs, queued before anything else uses the
                                           # ring (borrowed_sqe() may submit; a lane may borrow)
        group, due = 0 if starting else self.group, 0      # due: O_DIRECT ones among them
        chains, cancelled = self.chains, -errno.ECANCELED
        for key, res, _ in batch:
            if key >= CHAIN:               # an entry of a chain
                chain = chains[key >> 8]
                i = key & 0x7F
                chain.res[i], chain.at[i] = res, t
                if i == chain.open_i:
                    if res >= 0:
                        files = chain.files
                        files.now += 1
                        if files.now > files.most:
                            files.most = files.now
                elif i == chain.close_i and res != cancelled:
                    chain.files.now -= 1
                chain.left -= 1
                if chain.left:
                    continue
                del chains[key >> 8]
                if sqes:
                    queue(sqes)
                if chain.done is not None:
                    chain.done(chain, t, -1)
                    continue
                lane = chain.waiter
                if lane is not None:
                    step(lane, chain, None)
                elif chain.future is not None and not chain.future.done():
                    chain.future.set_result(chain)
                continue
            waiter = waiting[key]
            done = waiter.done
            if done is not None:           # a Slot
                try:
                    place = done(waiter, res, t, t)
                except Exception as e:  # noqa: BLE001 - a bug: the slot ends, its hold() raises
                    place = None           # it, and the rest of the batch is answered
                    if not waiter.finished.done():
                        waiter.finished.set_exception(e)
                if place is None:
                    del waiting[key]
                    self.release(waiter)
                    continue
                write, fd, offset = place
                i = waiter.sqe
                if i < 0:                  # it owns none: one lent until its submit
                    queue(sqes)
                    i, waiter.fd = ring.borrowed_sqe(), -1
                if write == waiter.write and fd == waiter.fd:
                    offsets[i] = offset
                else:
                    write_sqe(i, OPS[write], fd, waiter.bufs[write], waiter.want, offset,
                              waiter.key)
                    waiter.write, waiter.fd = write, fd
                waiter.what = offset
                sqes.append(i)
                if together:
                    held.append(waiter)
                    if group and waiter.direct:
                        due += 1
                        if due == group:   # to the disk now, while the rest are prepared
                            self.held = due = 0
                            queue(sqes)
                            self.push(held)
                            held = []
                else:
                    queue(sqes)
                    waiter.t0 = now()
                    self.push()
                continue
            del waiting[key]
            if sqes:
                queue(sqes)
            if res == waiter.want:
                if waiter.crew is not None:
                    step(waiter, t, None)
                    continue
                error = None
            else:
                error = OSError(-res, os.strerror(-res)) if res < 0 else \
                    short(waiter.write, waiter.what, res, waiter.want)
            lane = waiter.lane
            if lane is None:               # its drive() or hold() was cancelled
                self.release(waiter)
                continue
            if waiter.crew is not None:
                step(waiter, None, error)
            elif not lane.done():          # transfer()'s future, its awaiter not cancelled
                if error is None:
                    lane.set_result(t)
                else:
                    lane.set_exception(error)
        queue(sqes)
        self.holding = False
        if starting:                       # the tests starting in this turn of the loop: one
            self.starting += held          # submit for all, next turn (started), or sooner
            if self.flush is None:         # by whoever submits first
                self.flush = self.loop.call_soon(self.started)
        elif self.held or held:
            self.held = 0
            self.push(held)

    async def calibrate(self, sources: list["Source"],
                        stopped: Callable[[], bool]) -> tuple[dict[int, float], str]:
        """Set-up, untimed: choose `group` for the O_DIRECT slots of `sources` (one per test).
        A trial reads each test's places in its order (place(k): where the order puts the disk's
        seeks and merges) at its depth, every test at once, into a buffer of its own (the tests'
        buffers, and their files' contents, stay as they are), for CALIBRATION_NS;
        CALIBRATION_ROUNDS rounds of one trial of each of GROUPS (those below the reads in
        flight) in turn; `group` becomes pick()'s: one that beat whole batches in every round, or
        whole batches. Returns each group's best rate (reads a second) and, where none was chosen
        (`group` stays 0), why: more than CALIBRATION_BYTES in flight (a trial then waits long
        for its last reads, and so few complete in one that it measures nothing), or a trial
        that completed fewer than TRIAL_READS times the reads in flight; ({}, "") when stopped
        or with one group to try."""
        flight = sum(source.depth for source in sources)
        flight_bytes = sum(source.depth * source.size for source in sources)
        groups = [g for g in GROUPS if g < flight]
        if len(groups) < 2:
            return {}, ""
        if flight_bytes > CALIBRATION_BYTES:
            return {}, f"{amount(flight_bytes)} in flight, over the {amount(CALIBRATION_BYTES)} a " \
                "calibration reads at once"
        sizes = sorted({source.size for source in sources})
        areas = [mmap.mmap(-1, size) for size in sizes]
        ids = dict(zip(sizes, self.register([memoryview(area) for area in areas])))
        claims = [itertools.count() for _ in sources]     # each test's reads, in its order
        best: dict[int, float] = {}
        rates: list[float] = []                           # every trial's, in turn
        try:
            for _ in range(CALIBRATION_ROUNDS):
                for group in groups:
                    self.group = group
                    count, rate = await self.trial(sources, ids, claims, stopped)
                    if stopped():
                        best.clear()
                        return best, ""
                    if count < TRIAL_READS * flight:
                        best.clear()
                        return best, f"a {CALIBRATION_NS // 1_000_000} ms trial completed " \
                            f"{count} reads, under {TRIAL_READS} times the {flight} in flight"
                    best[group] = max(best.get(group, 0.0), rate)
                    rates.append(rate)
        finally:
            self.group = pick(best, rates)
            await self.forget(list(ids.values()))
            for area in areas:
                area.close()
        return best, ""

    async def trial(self, sources: list["Source"], ids: dict[int, int],
                    claims: list[itertools.count],
                    stopped: Callable[[], bool]) -> tuple[int, float]:
        """One calibration trial at the current `group`: the reads that completed in it, and
        their rate a second; a read that failed is raised, naming its file and place."""
        finished, failed = self.loop.create_future(), []
        left, count, end = sum(source.depth for source in sources), 0, 0

        def reader(source: Source, claim: itertools.count):
            def done(slot: Slot, res: int, t: int, at: int) -> tuple[bool, int, int] | None:
                nonlocal left, count
                if t and res != slot.want:
                    failed.append((source, slot, res))
                else:
                    count += 0 < t <= end
                if at < end and not failed and not stopped():
                    f, offset = source.place(next(claim))
                    return False, source.fds[f], offset
                left -= 1
                if not left and not finished.done():   # (cancelled: hold() has not yet
                    finished.set_result(None)          # taken the slots' done away)
                return None
            return done
        slots = [slot for source, claim in zip(sources, claims)
                 for slot in self.slots(reader(source, claim), [ids[source.size]] * source.depth,
                                        [ids[source.size]] * source.depth, direct=True)]
        start = now()
        end = start + CALIBRATION_NS
        await self.hold(slots, finished)
        if failed:
            source, slot, res = failed[0]
            e = OSError(-res, os.strerror(-res)) if res < 0 else \
                short(False, slot.what, res, slot.want)
            raise Misread(source.owner, OSError(
                e.errno, f"calibrating the O_DIRECT submissions, a read at byte {slot.what}: "
                f"{e.strerror}", source.paths[source.fds.index(slot.fd)]))
        return count, count * 1e9 / max(1, end - start)

    def started(self) -> None:
        self.flush = None
        if self.starting:
            self.push()

    def push(self, held: list[Slot] = ()) -> None:
        """Submit what is queued: the slots among it (`held`, and those started this turn) and
        the chains start at the clock read just before; what the kernel refused for now goes
        again retry_later()."""
        if self.owned:
            self.ring.queue_all(self.owned)
        t0 = now() if held or self.starting or self.queued else 0
        left = self.ring.submit()
        if t0:
            for slot in (*held, *self.starting, *self.queued):
                slot.t0 = t0
            self.starting, self.queued = [], []
        if left:
            self.retry_later()

    def retry_later(self) -> None:
        """Submit again RETRY from now: a completion's batch would submit what is left too,
        but none may be in flight."""
        if self.retry is None:
            self.retry = self.loop.call_later(RETRY, self.retry_now)

    def retry_now(self) -> None:
        self.retry = None
        self.push()

    def release(self, waiter: Waiter) -> None:
        """A waiter done with the ring gives back the SQE it owns."""
        if waiter.sqe >= 0:
            self.ring.give_back(waiter.sqe)
            waiter.sqe = -1

    def ready(self, count: int) -> None:
        """The engine steps its lanes itself, on the loop: nothing to start."""

    def cancel(self, chain: Chain) -> None:
        """Cancel the entries of a chain whose coroutine no longer awaits it (a stop cancelled
        it): one that never completes by itself, a read of a FIFO put in a -web tree that waits
        for a writer, would hold forget() for ever. The cancels are a chain of their own,
        awaited by nobody."""
        n = len(chain.res)
        cancels = self.chain(-1, chain.files)
        sqes = self.lend_chain(cancels, n)
        for j, i in enumerate(sqes):
            last = LAST if chain.sqes and j == n - 1 else 0      # (an own()ed chain's close)
            self.ring.chain(i, rings.OP_ASYNC_CANCEL, 0, -1, chain.key | last | j, 0, 0,
                            cancels.key | j, rings.CANCEL_ALL)
        self.send_chain(cancels, sqes)

    async def forget(self, ids: list[int]) -> None:
        mine, wait = set(ids), FORGET_POLL
        for chain in [c for c in self.chains.values() if c.buf in mine]:
            self.cancel(chain)             # (its test is done with it: nobody reads its result)
        while any(w.buf in mine for w in self.waiting.values()) or \
                any(c.buf in mine for c in self.chains.values()):
            await asyncio.sleep(wait)      # in flight: the reader takes them (each look scans
            wait = min(2 * wait, 0.05)     # every transfer in flight: tests forgetting at
                                           # once looked often enough to slow the reader)
        for i in ids:
            del self.iovecs[i]

    def close(self) -> None:
        self.users -= 1
        if self.users:
            return
        UringEngine._shared = None
        for pending in (self.retry, self.flush, self.chain_flush):
            if pending is not None:
                pending.cancel()
        self.loop.remove_reader(self.ring.fd)
        self.ring.close()
