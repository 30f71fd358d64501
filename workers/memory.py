"""Memory tests: -bcopy, -bzero, -load, -store, -ls.

Every buffer holds `local.n` chunks of `local.size` bytes (the working set), from -offset bytes on; transfer k works
on chunk k mod n, so a working set larger than the caches makes every transfer go to memory.
Set-up (not timed) allocates each buffer once as an anonymous mmap (page-aligned, advised
MADV_HUGEPAGE, the same as tools/cref/memkernels.c), wires it with mlock under -wire, and
touches it by filling it with the -bp/-bt pattern.  A transfer is one numpy call per buffer on
views made at set-up: nothing is allocated while the clock runs.

    action  transfer k (chunk j = k mod n)                    system bytes per transfer
    bcopy   dst[j] = src[j] (memmove)                          2 x size (read + write)
    bzero   buf[j] = 0 (memset)                                1 x size
    load    acc += sum of one 64-bit word per stride of buf[j] 1 x size
    store   one 64-bit word per stride of buf[j] = value       1 x size
    ls      load burst over buf[j], then store burst over it   2 x size

The stride is -stride, or the cache line size: with the default every word loaded or stored
is a different line, so the whole chunk crosses the memory bus.  With a stride above the line
size only the lines holding a word do, so load, store and ls count words x line size system
bytes per pass instead of size.  The value stored is the complement of pattern 1, so every bit
toggles against a -bt 0 background.

The loads are summed as np.dot(words, ones) with `ones` a stride-0 view of a single 1
(numpy's integer dot loop keeps the sum in a general register and wraps at 64 bits; why not
np.add.reduce: tools/bench_memory.py).
"""
from __future__ import annotations

from typing import NoReturn

import numpy as np

from workers import patterns
from torque_async.testing.buffers import Buffers
from torque_async.testing.api import TestContext, TestError

class MemoryTest:
    """What every memory and STREAM test shares: n chunks of size bytes per buffer, bytes
    accounting, pattern-filled buffers, and how many chunks the transfers so far have touched
    (the driver calls transfer(k) for k = 0, 1, 2, ...; each call counts itself in `transfers`)."""

    action = ""
    traffic = 1                 # system bytes per transfer byte
    arrays = ("buf",)           # the attributes that hold the test's arrays
    unit = 1                    # the chunk size is rounded down to whole units of this many bytes

    def __init__(self, ctx: TestContext):
        local = ctx.local
        self.n, self.size = local.n, local.size // self.unit * self.unit
        self.offset = local.offset          # the working set starts this far into each buffer
        self.transfer_bytes = self.size
        self.system_bytes = self.traffic * self.size
        self.transfers = 0
        self.info = ""
        self._ctx = ctx
        self._buffers = Buffers(local.wire)
        self._views: list = []  # per chunk: what transfer() hands to numpy

    def buffer(self, *, invert: bool = False) -> np.ndarray:
        """A new buffer of -offset + n x size bytes filled with the test's pattern (uint8)."""
        buf = self._buffers.new(self.offset + self.n * self.size)
        words = buf[:buf.size // 8 * 8].view(np.uint64)
        patterns.fill(words, self._ctx.local, self._ctx.rng, self._ctx.row, invert=invert)
        return buf

    def chunks(self, buf: np.ndarray) -> list[np.ndarray]:
        """The n chunks of the working set, from -offset on."""
        at = self.offset
        return [buf[at + j * self.size:at + (j + 1) * self.size] for j in range(self.n)]

    def passes(self) -> list[int]:
        """How many transfers have worked on each chunk."""
        whole, part = divmod(self.transfers, self.n)
        return [whole + (j < part) for j in range(self.n)]

    def touched(self) -> int:
        """Chunks 0 .. touched()-1 have been worked on."""
        return min(self.transfers, self.n)

    def fail(self, what: str) -> NoReturn:
        raise TestError(f"{self.action}: {what}")

    def close(self) -> None:
        self._views = []
        for name in self.arrays:
            setattr(self, name, None)
        self._buffers.close()


class BcopyTest(MemoryTest):
    """dst chunk = src chunk; the destination starts as the pattern's complement."""

    action, traffic, arrays = "bcopy", 2, ("src", "dst")

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        self.src = self.buffer()
        self.dst = self.buffer(invert=True)
        self._views = list(zip(self.chunks(self.dst), self.chunks(self.src), strict=True))

    def transfer(self, k: int) -> None:
        self.transfers += 1
        np.copyto(*self._views[k % self.n])

    def check(self) -> None:
        for j, (dst, src) in enumerate(self._views[:self.touched()]):
            if not np.array_equal(dst, src):
                i = int(np.argmax(dst != src))
                self.fail(f"destination byte {j * self.size + i} (chunk {j}) is {dst[i]:#04x}, "
                          f"the source holds {src[i]:#04x}")


class BzeroTest(MemoryTest):
    """buf chunk = 0."""

    action = "bzero"

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        self.buf = self.buffer()
        self._views = self.chunks(self.buf)

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self._views[k % self.n].fill(0)

    def check(self) -> None:
        for j, chunk in enumerate(self._views[:self.touched()]):
            if chunk.any():
                i = int(np.flatnonzero(chunk)[0])
                self.fail(f"byte {j * self.size + i} (chunk {j}) is {chunk[i]:#04x} after zeroing")


class StridedTest(MemoryTest):
    """load, store, ls: one 64-bit word per stride of a chunk, as strided uint64 views."""

    loads = stores = False

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        local = ctx.local
        self.stride = local.stride if local.stride is not None else ctx.linesize
        if self.size < 8:
            self.fail(f"a transfer of {self.size} bytes holds no 64-bit word")
        self.words = (self.size - 8) // self.stride + 1       # words per chunk
        # only the lines holding a word cross the bus (a stride above the line skips lines)
        self.system_bytes = self.traffic * min(self.size, self.words * ctx.linesize)
        self.value = np.uint64(~local.bp1 & patterns.MASK64)
        self.buf = self.buffer()
        self._views = [np.ndarray((self.words,), np.uint64, self.buf,
                                  self.offset + j * self.size, (self.stride,))
                       for j in range(self.n)]
        # what the pattern puts in the words each chunk loads, taken before any transfer
        self._pattern_sums = [int(np.add.reduce(w)) for w in self._views] if self.loads else []
        self.acc = 0                # every load adds its chunk's sum (a uint64) into it
        self._ones = np.broadcast_to(np.uint64(1), (self.words,))   # stride 0: one word
        self.info = f"stride {self.stride} bytes"

    def transfer(self, k: int) -> None:
        self.transfers += 1
        words = self._views[k % self.n]
        if self.loads:
            self.acc += int(np.dot(words, self._ones))
        if self.stores:
            words.fill(self.value)

    def expected_acc(self) -> int:
        """The sum the pattern implies: a chunk's first pass reads the pattern; under ls every
        later pass reads back the value the previous pass stored (sums wrap at 64 bits)."""
        total = 0
        again = int(self.value) * self.words & patterns.MASK64 if self.stores else None
        for first, passes in zip(self._pattern_sums, self.passes(), strict=True):
            if passes:
                total += first + (passes - 1) * (first if again is None else again)
        return total

    def check(self) -> None:
        if self.loads and self.acc != self.expected_acc():
            self.fail(f"the loads summed to {self.acc:#x}, the pattern implies "
                      f"{self.expected_acc():#x}")
        if self.stores:
            for j, words in enumerate(self._views[:self.touched()]):
                if not (words == self.value).all():
                    i = int(np.argmax(words != self.value))
                    self.fail(f"word at byte {j * self.size + i * self.stride} (chunk {j}) holds "
                              f"{int(words[i]):#018x}, {int(self.value):#018x} was stored")


class LoadTest(StridedTest):
    action, loads = "load", True


class StoreTest(StridedTest):
    action, stores = "store", True


class LsTest(StridedTest):
    action, traffic, loads, stores = "ls", 2, True, True
