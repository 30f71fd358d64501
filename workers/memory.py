"""Memory tests: -bcopy, -bzero, -load, -store, -ls.

Every buffer holds `local.n` chunks of `local.size` bytes (the working set), from -offset bytes on; transfer k works
on chunk k mod n, so a working set larger than the caches makes every transfer go to memory.
Set-up (not timed) allocates each buffer once as an anonymous mmap (page-aligned, advised
MADV_HUGEPAGE, the same as tools/cref/memkernels.c), wires it with mlock under -wire, and
touches it by filling it with the -bp/-bt pattern.  A transfer is one numpy (or libc) call per
buffer on views made at set-up: nothing is allocated while the clock runs.

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

How a kernel is run where several numpy or libc calls do the same work is the machine's
choice: set-up times each variant (MemoryTest.choose, untimed, over enough chunks that the
test's arrays together exceed twice the largest cache, so every pass goes to memory as the
run's do), keeps the fastest, puts back what the timing passes wrote, and the group block (and
the JSON's `info`) says what was chosen:

    bzero   ndarray.fill(0), or libc's memset through ctypes
    load    np.dot(words, ones), `ones` a stride-0 view of a single 1 (the sum stays in a
            general register and wraps at 64 bits), or np.add.reduce(words)
    store   ndarray.fill(value), np.copyto(words, value), or np.bitwise_or(value, 0, out=words)
            (numpy's ufunc loop: two L1 loads and an or a store per word)
    ls      its load and its store each chosen as above
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, NoReturn

import numpy as np

from torque_async import sysinfo
from workers import patterns, timed
from torque_async.kind_api.buffers import Buffers
from torque_async.kind_api.api import TestContext, TestError

CALIBRATION_CACHES = 2          # a calibration pass covers at least this many largest caches
_memset = ctypes.CDLL(None).memset
_memset.argtypes, _memset.restype = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t), None

class MemoryTest:
    """What every memory and STREAM test shares: n chunks of size bytes per buffer, bytes
    accounting, pattern-filled buffers, and how many chunks the transfers so far have touched
    (the driver calls transfer(k) for k = 0, 1, 2, ...; each call counts itself in `transfers`)."""

    action = ""
    traffic = 1                 # system bytes per transfer byte
    arrays = ("buf",)           # the attributes that hold the test's arrays
    kernels: tuple = ()         # those that hold kernels choose() made (they view the arrays)
    unit = 1                    # the chunk size is rounded down to whole units of this many bytes

    def __init__(self, ctx: TestContext):
        local = ctx.local
        self.n, self.size = local.n, local.size // self.unit * self.unit
        self.offset = local.offset          # the working set starts this far into each buffer
        self.transfer_bytes = self.size
        self.system_bytes = self.traffic * self.size
        self.transfers = 0
        self.info = "" if self.size == local.size else \
            f"transfers of {local.size} bytes move {self.size} (whole {self.unit}-byte words)"
        self.chosen: dict[str, str] = {}    # what set-up chose (choose): what -> variant
        self._ctx = ctx
        self._buffers = Buffers(local.wire)
        self._views: list = []  # per chunk: what transfer() hands to numpy

    def buffer(self, *, invert: bool = False) -> np.ndarray:
        """A new buffer of -offset + n x size bytes filled with the test's pattern (uint8)."""
        buf = self._buffers.new(self.offset + self.n * self.size)
        self.fill(buf, invert=invert)
        return buf

    def fill(self, buf: np.ndarray, *, invert: bool = False) -> None:
        """Fill buf's whole words with the test's pattern (a prefix of a buffer gets the words a
        fill of the whole buffer puts there: the pattern starts at word 0)."""
        words = buf[:buf.size // 8 * 8].view(np.uint64)
        patterns.fill(words, self._ctx.local, self._ctx.rng, self._ctx.row, invert=invert)

    def calibration_chunks(self) -> int:
        """Chunks a calibration pass covers: enough that the lines it touches in the test's
        arrays hold CALIBRATION_CACHES x the largest cache (so it runs from memory), at most n.
        A chunk's lines: its size, or fewer under a -stride above the line (system_bytes)."""
        largest = max(sysinfo.cache_sizes().values(), default=1024) << 10
        touched = self.system_bytes // self.traffic
        need = -(-CALIBRATION_CACHES * largest // (len(self.arrays) * touched))
        return max(1, min(self.n, need))

    def choose(self, what: str, candidates: dict[str, Any],
               make: Callable[[Any, int], Callable[[int], Any]]) -> Callable[[int], Any]:
        """Set-up, untimed: make(value, chunks) is a kernel of chunk j (j < chunks) for each
        candidate; time passes of each over calibration_chunks() chunks (pass_ns) in
        timed.CALIBRATION_PASSES rounds of one pass of every candidate (a neighbour's burst then
        slows one pass of each, not every pass of one), keep the one with the fastest pass, put
        back what the passes wrote (reset), note the choice in `info` and in `chosen`, and
        return the chosen kernel made for all n chunks. A lone candidate is kept untimed, and
        said to be the only one."""
        if len(candidates) == 1:
            (name, value), = candidates.items()
            return self.keep(what, name, f"{what} {name} (the only one here)",
                             make(value, self.n))
        span = self.calibration_chunks()

        def sweep(kernel):
            return lambda: [kernel(j) for j in range(span)]

        sweeps = {name: sweep(make(value, span)) for name, value in candidates.items()}
        next(iter(sweeps.values()))()                   # untimed: warms caches and the TLB
        took: dict[str, int] = {}
        for _ in range(timed.CALIBRATION_PASSES):
            for name, run in sweeps.items():
                ns = self.pass_ns(name, run)
                took[name] = min(took.get(name, ns), ns)
        name = min(took, key=took.get)
        self.reset(span)
        return self.keep(what, name, f"{what} {name}, the fastest here of {', '.join(took)}",
                         make(candidates[name], self.n))

    def keep(self, what: str, name: str, note: str, kernel):
        """choose()'s end: the choice in `chosen` and in `info`; returns the kernel."""
        self.chosen[what] = name
        self.info = "; ".join(filter(None, (self.info, note)))
        return kernel

    def pass_ns(self, name: str, run: Callable[[], Any]) -> int:
        """How long run() (one calibration pass of candidate `name`) takes, in ns."""
        return timed.pass_ns(run)

    def reset(self, chunks: int) -> None:
        """Put back the pattern a calibration over chunks 0 .. chunks-1 overwrote in `buf`."""
        end = min(self.buf.size, -(-(self.offset + chunks * self.size) // 8) * 8)
        self.fill(self.buf[:end])

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
        for name in self.arrays + self.kernels:
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

    action, kernels = "bzero", ("zero",)

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        self.buf = self.buffer()
        self._views = views = self.chunks(self.buf)
        at, size = self.buf.ctypes.data + self.offset, self.size
        self.zero = self.choose("zeroed by", {
            "fill": lambda j: views[j].fill(0),
            "memset": lambda j: _memset(at + j * size, 0, size)}, lambda way, _span: way)

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self.zero(k % self.n)

    def check(self) -> None:
        for j, chunk in enumerate(self._views[:self.touched()]):
            if chunk.any():
                i = int(np.flatnonzero(chunk)[0])
                self.fail(f"byte {j * self.size + i} (chunk {j}) is {chunk[i]:#04x} after zeroing")


class StridedTest(MemoryTest):
    """load, store, ls: one 64-bit word per stride of a chunk, as strided uint64 views."""

    loads = stores = False
    kernels = ("load", "store")

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
        self.acc = 0                # every load adds its chunk's sum (a uint64) into it
        self.info = f"stride {self.stride} bytes"
        views, value = self._views, self.value
        ones, zeros, values = (np.broadcast_to(np.uint64(x), (self.words,))  # stride 0: one word
                               for x in (1, 0, value))
        if self.loads:
            self.load = self.choose("loads by", {
                "np.dot": lambda j: np.dot(views[j], ones),
                "np.add.reduce": lambda j: np.add.reduce(views[j])}, lambda way, _span: way)
        if self.stores:
            self.store = self.choose("stores by", {
                "fill": lambda j: views[j].fill(value),
                "np.copyto": lambda j: np.copyto(views[j], value),
                "np.bitwise_or": lambda j: np.bitwise_or(values, zeros, out=views[j])},
                lambda way, _span: way)
        # what the pattern puts in the words each chunk loads, taken before any transfer
        self._pattern_sums = [int(np.add.reduce(w)) for w in self._views] if self.loads else []

    def transfer(self, k: int) -> None:
        self.transfers += 1
        j = k % self.n
        if self.loads:
            self.acc += int(self.load(j))
        if self.stores:
            self.store(j)

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
