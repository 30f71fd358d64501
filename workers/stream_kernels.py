"""STREAM tests: -Scopy, -Sscale, -Sadd, -Striad (McCalpin's kernels on float64 arrays).

Arrays a, b and c each hold `local.n` chunks of `local.size` bytes (rounded down to whole
doubles); transfer k runs the kernel on chunk k mod n.  Bytes are counted as STREAM counts
them: a transfer reports `size` bytes, and moves 2 x size (Copy, Scale: one array read, one
written) or 3 x size (Add, Triad: two read, one written) through the system.

The arrays start as a = 1.0, b = 2.0, c = 0.5 and each test runs only its own kernel.  A
kernel repeated over a chunk would write the same values, so each transfer k leaves its number
in what it writes, and the check recomputes every chunk from the last transfer the claimed
count puts on it: Scale and Triad take s = 3.5 + k as their scalar (one per transfer, as
cheap as a constant; never one that writes the initial value back); Copy and Add first set the chunk's first element of a to k, which the kernel
carries into the output (one element written to a line the kernel reads next):

    Copy   c = a          c: 0.5 -> 1.0      (first element of the chunk: k)
    Scale  b = s * c      b: 2.0 -> s * 0.5  (s = 3.5 + k)
    Add    c = a + b      c: 0.5 -> 3.0      (first element of the chunk: k + 2)
    Triad  a = b + s * c  a: 1.0 -> 2 + s * 0.5

Triad needs s * c somewhere: it runs over the chunk in blocks that stay in cache, one of two
ways: s * c into a scratch block made at set-up, then b + scratch into a; or s * c into a's
block, then a += b.  Memory sees what C's single loop makes it see (read b, read c, write a)
and nothing is allocated.  The best block size and way depend on the machine (its caches, how
its memory serves one stream or two at once: on a Zen 3 VM the scratch way, on a Xeon VM the
other, by 0.88-1.13), so set-up times the block sizes (the scratch way), then both ways at
the block kept, and keeps the fastest.
Copy is a bit-exact copy on uint64 views, by numpy's SIMD loop (a | 0) or by glibc's memmove
(np.copyto), whichever set-up measures faster on this machine.  Both choices are
MemoryTest.choose's (workers/memory.py): timed from memory, untimed, and named in the group
block.

check(transfers) validates every element of every array as STREAM's checkSTREAMresults does:
relative error against the expected value within 1e-13 (NaN fails); a transfer skipped or a
count made up leaves another k, so other values, in some chunk.
"""
from __future__ import annotations

import functools

import numpy as np

from torque_async import sysinfo
from torque_async.units import human
from torque_async.kind_api.api import TestContext, TestError
from workers.memory import MemoryTest

SCALAR = 3.5                    # transfer k's scalar is SCALAR + k: Scale's b (1.75 + k / 2)
                                # and Triad's a never come back to their initial values
ZERO = np.uint64(0)
EPSILON = 1e-13                 # checkSTREAMresults' epsilon for double
INITIAL = {"a": 1.0, "b": 2.0, "c": 0.5}
CHECK_BLOCK = 1 << 20           # elements compared per step in check()


def l2_bytes() -> int:
    """Size of CPU 0's level 2 cache in bytes (1 MiB when sysfs does not say)."""
    return sysinfo.cache_sizes().get("2Unified", 1024) << 10


class StreamKernel(MemoryTest):
    """One STREAM kernel over n chunks of a, b and c."""

    output = ""                 # the array the kernel writes
    stamped = ""                # the input whose chunk's first element transfer k sets to k
    traffic = 2                 # arrays moved per transfer (STREAM's byte count)
    arrays = ("a", "b", "c")
    unit = 8                    # doubles

    def __init__(self, ctx: TestContext):
        if ctx.local.size < 8:
            self.fail(f"needs transfers of at least 8 bytes, not {ctx.local.size}")
        super().__init__(ctx)
        self.m = m = self.size // 8                         # doubles per chunk
        self.info = "; ".join(filter(None, (self.info, f"{self.n} x {self.size} bytes per array")))
        for name in self.arrays:                            # -offset bytes, then the arrays
            array = self._buffers.new(self.offset + self.n * self.size)[self.offset:]
            array = array.view(np.float64)                  # (unaligned for an odd -offset)
            array.fill(INITIAL[name])                       # touches every page
            setattr(self, name, array)
        self._views = [self.kernel_views(*(x[j * m:(j + 1) * m] for x in (self.a, self.b, self.c)))
                       for j in range(self.n)]
        self.stamp = getattr(self, self.stamped)[::m] if self.stamped else None

    def kernel_views(self, a, b, c):
        """What transfer() needs for one chunk (made once, at set-up)."""
        return a, b, c

    def reset(self, chunks: int) -> None:
        """The output's first chunks as set up (a calibration wrote them; check() expects it)."""
        getattr(self, self.output)[:chunks * self.m] = INITIAL[self.output]

    def expected(self, k: np.ndarray) -> np.ndarray:
        """What transfer k (an array of them) leaves in its output chunk (the others keep
        INITIAL, but for the stamps)."""
        raise NotImplementedError

    def expected_first(self, k: np.ndarray) -> np.ndarray:
        """What transfer k leaves in its output chunk's first element."""
        return self.expected(k)

    def check(self, transfers: int) -> None:
        k = self.last(transfers).astype(np.float64)
        for name in self.arrays:
            first, rest = np.full(self.n, INITIAL[name]), np.full(self.n, INITIAL[name])
            if name == self.output:
                first[:k.size], rest[:k.size] = self.expected_first(k), self.expected(k)
            elif name == self.stamped:
                first[:k.size] = k
            self._check_chunks(name, getattr(self, name), first, rest, transfers)

    def _check_chunks(self, name: str, array: np.ndarray, first, rest, transfers: int):
        """Each chunk j of array holds first[j], then rest[j], within EPSILON relative error
        (NaN fails too), CHECK_BLOCK elements at a time."""
        for lo in range(0, array.size, CHECK_BLOCK):
            part = array[lo:lo + CHECK_BLOCK]
            at = np.arange(lo, lo + part.size)
            chunk = at // self.m
            want = np.where(at % self.m == 0, first[chunk], rest[chunk])
            bad = ~(np.abs(part - want) <= EPSILON * np.abs(want))
            if bad.any():
                i = int(np.argmax(bad))
                value, got = float(want[i]), float(part[i])
                error = abs(got - value) / abs(value) if value else abs(got)
                raise TestError(
                    f"{self.action}: {name}[{lo + i}] = {got!r}, expected {value!r} after "
                    f"{transfers} transfers (relative error {error:.3g} > {EPSILON})")


# Copy's ways of copying doubles bit for bit; which is faster depends on the machine (a vector
# loop or glibc's memmove): set-up chooses (MemoryTest.choose).
COPIES = {"vector a|0": lambda a, c: np.bitwise_or(a, ZERO, out=c),
          "memmove": lambda a, c: np.copyto(c, a)}


class Scopy(StreamKernel):
    """c = a, bit for bit, on the arrays' uint64 views, by the fastest of COPIES here."""

    action, output, stamped, kernels = "Scopy", "c", "a", ("copy",)

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        views = self._views
        self.copy = self.choose("Copy by", COPIES,
                                lambda copy, _span: lambda j: copy(*views[j]))

    def kernel_views(self, a, b, c):
        return a.view(np.uint64), c.view(np.uint64)

    def transfer(self, k: int) -> None:
        j = k % self.n
        self.stamp[j] = k                   # the copy carries it into c
        self.copy(j)

    def expected(self, k):
        return np.full(k.size, INITIAL["a"])

    def expected_first(self, k):
        return k


class Sscale(StreamKernel):
    action, output = "Sscale", "b"

    def transfer(self, k: int) -> None:
        _a, b, c = self._views[k % self.n]
        np.multiply(c, SCALAR + k, out=b)

    def expected(self, k):
        return (SCALAR + k) * INITIAL["c"]


class Sadd(StreamKernel):
    action, output, stamped, traffic = "Sadd", "c", "a", 3

    def transfer(self, k: int) -> None:
        j = k % self.n
        self.stamp[j] = k                   # the sum carries it into c
        a, b, c = self._views[j]
        np.add(a, b, out=c)

    def expected(self, k):
        return np.full(k.size, INITIAL["a"] + INITIAL["b"])

    def expected_first(self, k):
        return k + INITIAL["b"]


class Striad(StreamKernel):
    """a = b + s * c in blocks that stay in cache: set-up times the block sizes (candidates(),
    by MemoryTest.choose, the scratch way), then the WAYS at the block size kept, and keeps the
    fastest of each; the group block says which."""

    action, output, traffic, kernels = "Striad", "a", 3, ("run", "block_views")

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        self.choose("Triad blocks (sized the scratch way) of",
                    {f"{human(step * 8)} bytes": step for step in self.candidates()},
                    lambda step, chunks: self.blocked(scratched, step, chunks))
        step = self.step
        self.run = self.choose("Triad by", WAYS,
                               lambda way, chunks: self.blocked(way, step, chunks))

    def candidates(self) -> list[int]:
        """Block sizes (doubles) worth timing: fractions of L1d and L2, and the whole chunk."""
        l1, l2 = sysinfo.cache_sizes().get("1Data", 32) << 10, l2_bytes()
        fits = {l1 // 16, l2 // 32, l2 // 16, l2 // 8, l2 // 4}
        return sorted({max(1, min(self.m, b)) for b in fits} | {self.m})

    def blocked(self, way, step: int, chunks: int):
        """The kernel of chunk j < chunks by `way` (one of WAYS) in blocks of `step` doubles;
        `step` and `block_views` keep the last one made (choose makes the chosen one last)."""
        self.step = step
        self.block_views = views = [self.split(step, *chunk) for chunk in self._views[:chunks]]
        return lambda j, s=SCALAR: way(views[j], s)

    @functools.cached_property
    def scratch(self) -> np.ndarray:
        """Room for s * c of the largest block any candidate uses (the whole chunk at most)."""
        return np.empty(self.m, np.float64)

    def split(self, step: int, a, b, c) -> list:
        """One chunk's blocks of `step` doubles, each with the scratch it uses."""
        return [(a[i:i + step], b[i:i + step], c[i:i + step], self.scratch[:min(step, a.size - i)])
                for i in range(0, a.size, step)]

    def transfer(self, k: int) -> None:
        self.run(k % self.n, SCALAR + k)

    def expected(self, k):
        return INITIAL["b"] + (SCALAR + k) * INITIAL["c"]


def scratched(views, s: float = SCALAR) -> None:
    """Triad's blocks: s * c into the scratch block, then b + scratch into a."""
    multiply, add = np.multiply, np.add
    for a, b, c, scratch in views:
        multiply(c, s, scratch)
        add(b, scratch, a)


def in_place(views, s: float = SCALAR) -> None:
    """Triad's blocks: s * c into a's block, then a += b (the same a, bit for bit)."""
    multiply, add = np.multiply, np.add
    for a, b, c, _scratch in views:
        multiply(c, s, a)
        add(a, b, a)


WAYS = {"s * c into scratch then b + scratch": scratched, "s * c into a then a += b": in_place}
