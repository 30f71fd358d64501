"""io_uring itself, nothing between: the rings mapped from the kernel, its system calls made
through ctypes (no liburing: no compiled package, so nothing built for another CPU's
instructions).

Only what the I/O engine uses: read and write at an address, absolute timeouts, a no-op, and
-web's open and close (`chain` writes linked SQEs; `register_files` a table of direct
descriptors);
the ring's fd polls readable while completions wait (the loop watches it). The SQ array's
indirection lets a transfer's owner keep an SQE of its own (`take`): its fields are written once
and only the file offset changes from one transfer to the next (`write` writes an SQE whole,
`offsets[i]` is its offset); any other transfer borrows one until it is submitted (`borrowed_sqe`).
`queue(i)` puts SQE i next in the submission queue (`queue_all` a list of them, in one write),
`submit()` hands the kernel what is queued (one io_uring_enter), `completions(most)` reads the
CQEs that arrived and moves the head past them.

The rings are read and written from Python without memory barriers: x86-64 keeps stores in
order and loads in order, which is all io_uring asks (liburing itself compiles its barriers to
nothing but the compiler's there); `unusable()` refuses other processors.
"""
from __future__ import annotations

import array
import ctypes
import errno
import mmap
import os
import platform
import struct

SETUP, ENTER, REGISTER = 425, 426, 427         # the same numbers on every architecture but alpha
OP_NOP, OP_TIMEOUT, OP_OPENAT, OP_CLOSE, OP_READ, OP_WRITE = 0, 11, 18, 19, 22, 23
OP_ASYNC_CANCEL, CANCEL_ALL = 14, 1            # cancel every request of a user_data (5.19)
SQE_FIXED_FILE, SQE_IO_LINK, SQE_IO_HARDLINK = 1, 4, 8   # sqe flags: fd is a direct descriptor;
                                               # the next SQE waits for this one (and is
                                               # cancelled if it fails, unless HARDLINK)
REGISTER_FILES = 2                             # a table of direct descriptors (-1: an empty one)
REGISTER_IOWQ_MAX_WORKERS = 19                 # io-wq's caps on its workers (Linux 5.15)
ENTER_GETEVENTS = 1
SETUP_COOP_TASKRUN = 1 << 8                    # Linux 5.19: completions wait for the task's next
                                               # entry into the kernel, not an interrupt (fio's
                                               # io_uring engine sets it too)
FEAT_SINGLE_MMAP, FEAT_NODROP = 1, 2
SQ_CQ_OVERFLOW = 2                             # sq flags: completions wait in the kernel's list
TIMEOUT_ABS = 1
OFF_SQ_RING, OFF_SQES = 0, 0x10000000
# struct io_uring_params: 10 u32 (entries, flags, features, ...), then io_sqring_offsets and
# io_cqring_offsets, each 8 u32 and a u64
PARAMS = struct.Struct("<10I8IQ8IQ")
# struct io_uring_sqe: opcode, flags, ioprio, fd, off, addr, len, rw_flags, user_data, buf_index,
# personality, splice_fd_in, addr3, pad
SQE = struct.Struct("<BBHiQQIIQHHiQQ")
CQE = struct.Struct("<QiI")                    # struct io_uring_cqe: user_data, res, flags
WRAP = 0xFFFFFFFF                              # heads and tails are u32 that wrap

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long               # no argtypes: each is a C int or a pointer;
                                               # declared ones would be converted on every call


def unusable() -> str | None:
    """Why this processor cannot drive the rings from Python, or None."""
    machine = platform.machine()
    if machine != "x86_64":
        return f"the ring is driven without memory barriers, which only x86-64 allows ({machine})"
    return None


def check(result: int, call: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{call}: {os.strerror(err)}")
    return result


class Ring:
    """One io_uring of `entries` SQEs (a power of two) and twice as many CQEs."""

    def __init__(self, entries: int):
        for flags in (SETUP_COOP_TASKRUN, 0):      # EINVAL: a kernel older than the flag
            params = ctypes.create_string_buffer(PARAMS.size)
            struct.pack_into("<I", params, 8, flags)
            fd = _syscall(SETUP, entries, params)
            if fd >= 0 or ctypes.get_errno() != errno.EINVAL:
                break
        self.fd = check(fd, "io_uring_setup")
        try:
            p = PARAMS.unpack(params.raw)
            features = p[5]
            if features & (FEAT_SINGLE_MMAP | FEAT_NODROP) != FEAT_SINGLE_MMAP | FEAT_NODROP:
                raise OSError(errno.ENOSYS, "io_uring_setup: this kernel's io_uring is older "
                              "than Linux 5.5 (no single mapping, completions may be dropped)")
            self.entries, cq_entries = p[0], p[1]
            sq_head, sq_tail, sq_mask, _, sq_flags, _, sq_array = p[10:17]
            cq_head, cq_tail, cq_mask, _, _, cqes = p[19:25]
            size = max(sq_array + 4 * self.entries, cqes + 16 * cq_entries)
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE,
                                 offset=OFF_SQ_RING)
            self.sqe_map = mmap.mmap(self.fd, SQE.size * self.entries,
                                     mmap.MAP_SHARED | mmap.MAP_POPULATE, offset=OFF_SQES)
        except BaseException:
            os.close(self.fd)
            raise
        self.u32 = u32 = memoryview(self.map).cast("I")
        self.sq_head, self.sq_tail, self.sq_flags = sq_head >> 2, sq_tail >> 2, sq_flags >> 2
        self.sq_mask, self.sq_array = u32[sq_mask >> 2], sq_array >> 2
        self.cq_head, self.cq_tail, self.cq_mask = cq_head >> 2, cq_tail >> 2, u32[cq_mask >> 2]
        self.cq_entries, self.cqes = cq_entries, memoryview(self.map)[cqes:cqes + 16 * cq_entries]
        self.tail = u32[self.sq_tail]
        fields = memoryview(self.sqe_map).cast("Q")
        self.offsets = fields[1::8]                   # each SQE's file offset,
        self.addrs, self.user_data = fields[2::8], fields[4::8]   # address and user_data
        self.free = list(range(self.entries - 1, -1, -1))
        self.lent: list[int] = []
        self.prep = SQE.pack_into
        self.enter = _syscall

    def take(self) -> int:
        """An SQE of the caller's own until it gives it back, or -1: half of them are kept for
        borrowed_sqe()."""
        return self.free.pop() if len(self.free) > self.entries // 2 else -1

    def give_back(self, i: int) -> None:
        self.free.append(i)

    def borrowed_sqe(self) -> int:
        """An SQE for one transfer: it comes back by itself once a submit has handed the kernel
        everything queued (submitting now when none is left)."""
        if not self.free:
            self.submit()
            if not self.free:
                raise OSError(errno.EBUSY, "io_uring: every SQE is queued and the kernel takes "
                              "no more before completions are read")
        i = self.free.pop()
        self.lent.append(i)
        return i

    def write(self, i: int, op: int, fd: int, addr: int, length: int, offset: int,
              user_data: int, rw_flags: int = 0) -> None:
        """Write SQE i whole."""
        self.prep(self.sqe_map, i << 6, op, 0, 0, fd, offset, addr, length, rw_flags,
                  user_data, 0, 0, 0, 0, 0)

    def chain(self, i: int, op: int, flags: int, fd: int, addr: int, length: int, offset: int,
              user_data: int, rw_flags: int = 0, file_index: int = 0) -> None:
        """Write SQE i whole, with its flags (IOSQE_*) and file_index (an open's or a close's
        direct descriptor, plus one; 0: none)."""
        self.prep(self.sqe_map, i << 6, op, flags, 0, fd, offset, addr, length, rw_flags,
                  user_data, 0, 0, file_index, 0, 0)

    def register_files(self, count: int) -> None:
        """A table of `count` direct descriptors, every one empty."""
        table = (ctypes.c_int * count)(*([-1] * count))
        check(self.enter(REGISTER, self.fd, REGISTER_FILES, table, count), "io_uring_register")

    def iowq_workers(self, bounded: int, unbounded: int = 0) -> tuple[int, int]:
        """Cap the workers io-wq runs for this ring's operations that block (bounded: those on
        regular files and block devices, an open whose path is not cached; unbounded: the
        rest); 0 leaves a cap as it is. Returns the caps before. OSError where the kernel has
        no such call (EINVAL: before 5.15)."""
        caps = (ctypes.c_uint32 * 2)(bounded, unbounded)
        check(self.enter(REGISTER, self.fd, REGISTER_IOWQ_MAX_WORKERS, caps, 2),
              "io_uring_register(IORING_REGISTER_IOWQ_MAX_WORKERS)")
        return caps[0], caps[1]

    def queue(self, i: int) -> None:
        """Put SQE i next in the submission queue (the kernel sees it at the next submit). The
        queue cannot overflow: it has a place for every SQE, and one is queued at most once
        before a submit takes it (an owner's after its completion, a lent one until a submit
        has taken everything)."""
        tail = self.tail
        self.u32[self.sq_array + (tail & self.sq_mask)] = i
        self.tail = (tail + 1) & WRAP

    def queue_all(self, sqes: list[int]) -> None:
        """queue() each of `sqes` in turn, in one write of the submission queue's entries, and
        empty the list."""
        n, tail, base = len(sqes), self.tail, self.sq_array
        start = tail & self.sq_mask
        first = min(n, self.entries - start)          # the queue wraps past its last entry
        self.u32[base + start:base + start + first] = array.array("I", sqes[:first])
        if first < n:
            self.u32[base:base + n - first] = array.array("I", sqes[first:])
        self.tail = (tail + n) & WRAP
        sqes.clear()

    def submit(self, wait: int = 0) -> int:
        """Hand the kernel every SQE queued (and with `wait`, return once that many completions
        are there); returns how many stay queued: those it could not take yet (EBUSY, EAGAIN:
        its completions must be read first) wait for the next submit."""
        u32 = self.u32
        u32[self.sq_tail] = tail = self.tail
        n = (tail - u32[self.sq_head]) & WRAP
        while True:
            r = self.enter(ENTER, self.fd, n, wait, ENTER_GETEVENTS if wait else 0, None, 0)
            if r >= 0:
                left = (tail - u32[self.sq_head]) & WRAP
                if self.lent and not left:
                    self.free += self.lent
                    self.lent.clear()
                return left
            err = ctypes.get_errno()
            if err in (errno.EBUSY, errno.EAGAIN):
                return n
            if err != errno.EINTR:
                raise OSError(err, f"io_uring_enter: {os.strerror(err)}")

    def completions(self, most: int = WRAP) -> list[tuple[int, int, int]]:
        """(user_data, result, flags) of the completions that have arrived, at most `most`,
        read as they lie in the CQ (no Python per completion) and the head moved past them;
        those the CQ had no room for (kept in the kernel's list) are fetched once it has."""
        u32, cqes, size = self.u32, self.cqes, self.cq_entries
        done: list[tuple[int, int, int]] = []
        while True:
            head = u32[self.cq_head]
            n = min((u32[self.cq_tail] - head) & WRAP, most - len(done))
            start = head & self.cq_mask
            done += CQE.iter_unpack(cqes[start << 4:min(start + n, size) << 4])
            if start + n > size:                  # the CQ wraps past its last entry
                done += CQE.iter_unpack(cqes[:start + n - size << 4])
            u32[self.cq_head] = (head + n) & WRAP
            if len(done) == most or not u32[self.sq_flags] & SQ_CQ_OVERFLOW:
                return done
            check(self.enter(ENTER, self.fd, 0, 0, ENTER_GETEVENTS, None, 0), "io_uring_enter")

    def raw(self, most: int) -> bytes:
        """completions(), as the CQEs' bytes (16 each, in order: for numpy to take apart)."""
        u32, cqes, size = self.u32, self.cqes, self.cq_entries
        done = b""
        while True:
            head = u32[self.cq_head]
            n = min((u32[self.cq_tail] - head) & WRAP, most - len(done) // 16)
            start = head & self.cq_mask
            done += cqes[start << 4:min(start + n, size) << 4]
            if start + n > size:
                done += cqes[:start + n - size << 4]
            u32[self.cq_head] = (head + n) & WRAP
            if len(done) == most * 16 or not u32[self.sq_flags] & SQ_CQ_OVERFLOW:
                return done
            check(self.enter(ENTER, self.fd, 0, 0, ENTER_GETEVENTS, None, 0), "io_uring_enter")

    def ready(self) -> int:
        """How many completions are in the CQ now, not yet read."""
        return (self.u32[self.cq_tail] - self.u32[self.cq_head]) & WRAP

    def pending(self) -> bool:
        """Whether completions wait to be read (in the CQ or the kernel's list)."""
        return self.u32[self.cq_tail] != self.u32[self.cq_head] or \
            bool(self.u32[self.sq_flags] & SQ_CQ_OVERFLOW)

    def close(self) -> None:
        for view in (self.offsets, self.addrs, self.user_data, self.cqes, self.u32):
            view.release()
        self.map.close()
        self.sqe_map.close()
        os.close(self.fd)


def address(view: memoryview) -> tuple[int, object]:
    """The address of a writable buffer and the export that keeps it mapped while the kernel
    may use it (the caller holds it until then)."""
    held = (ctypes.c_char * len(view)).from_buffer(view)
    return ctypes.addressof(held), held
