"""STREAM tests: -Scopy, -Sscale, -Sadd, -Striad (McCalpin's kernels on float64 arrays).

Arrays a, b and c each hold `local.n` chunks of `local.size` bytes (rounded down to whole
doubles); transfer k runs the kernel on chunk k mod n.  Bytes are counted as STREAM counts
them: a transfer reports `size` bytes, and moves 2 x size (Copy, Scale: one array read, one
written) or 3 x size (Add, Triad: two read, one written) through the system.

The arrays start as a = 1.0, b = 2.0, c = 0.5 and each test runs only its own kernel, so the
kernel is idempotent (repeating it over a chunk writes the same values) and every output
differs from its initial value:

    Copy   c = a          c: 0.5 -> 1.0
    Scale  b = s * c      b: 2.0 -> 1.5      (s = 3.0)
    Add    c = a + b      c: 0.5 -> 3.0
    Triad  a = b + s * c  a: 1.0 -> 3.5

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

check() validates every element of every array as STREAM's checkSTREAMresults does: relative
error against the expected value within 1e-13 (NaN fails).
"""
from __future__ import annotations

import functools

import numpy as np

from torque_async import sysinfo
from torque_async.units import human
from torque_async.kind_api.api import TestContext, TestError
from workers.memory import MemoryTest

SCALAR = 3.0
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

    def kernel_views(self, a, b, c):
        """What transfer() needs for one chunk (made once, at set-up)."""
        return a, b, c

    def reset(self, chunks: int) -> None:
        """The output's first chunks as set up (a calibration wrote them; check() expects it)."""
        getattr(self, self.output)[:chunks * self.m] = INITIAL[self.output]

    def expected(self) -> float:
        """The value the kernel leaves in its output array (the others keep INITIAL)."""
        raise NotImplementedError

    def check(self) -> None:
        touched = self.touched() * self.m
        for name in self.arrays:
            array = getattr(self, name)
            if name == self.output:
                spans = ((0, touched, self.expected()), (touched, array.size, INITIAL[name]))
            else:
                spans = ((0, array.size, INITIAL[name]),)
            for start, stop, value in spans:
                self._check_span(name, array, start, stop, value)

    def _check_span(self, name: str, array: np.ndarray, start: int, stop: int, value: float):
        """array[start:stop] == value within EPSILON relative error (NaN fails too)."""
        for lo in range(start, stop, CHECK_BLOCK):
            part = array[lo:min(stop, lo + CHECK_BLOCK)]
            bad = ~(np.abs(part - value) <= EPSILON * abs(value))
            if bad.any():
                i = lo + int(np.argmax(bad))
                raise TestError(
                    f"{self.action}: {name}[{i}] = {float(array[i])!r}, expected {value!r} "
                    f"(relative error {abs(array[i] - value) / abs(value):.3g} > {EPSILON})")


# Copy's ways of copying doubles bit for bit; which is faster depends on the machine (a vector
# loop or glibc's memmove): set-up chooses (MemoryTest.choose).
COPIES = {"vector a|0": lambda a, c: np.bitwise_or(a, ZERO, out=c),
          "memmove": lambda a, c: np.copyto(c, a)}


class Scopy(StreamKernel):
    """c = a, bit for bit, on the arrays' uint64 views, by the fastest of COPIES here."""

    action, output, kernels = "Scopy", "c", ("copy",)

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        views = self._views
        self.copy = self.choose("Copy by", COPIES,
                                lambda copy, _span: lambda j: copy(*views[j]))

    def kernel_views(self, a, b, c):
        return a.view(np.uint64), c.view(np.uint64)

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self.copy(k % self.n)

    def expected(self):
        return INITIAL["a"]


class Sscale(StreamKernel):
    action, output = "Sscale", "b"

    def transfer(self, k: int) -> None:
        self.transfers += 1
        _a, b, c = self._views[k % self.n]
        np.multiply(c, SCALAR, out=b)

    def expected(self):
        return SCALAR * INITIAL["c"]


class Sadd(StreamKernel):
    action, output, traffic = "Sadd", "c", 3

    def transfer(self, k: int) -> None:
        self.transfers += 1
        a, b, c = self._views[k % self.n]
        np.add(a, b, out=c)

    def expected(self):
        return INITIAL["a"] + INITIAL["b"]


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
        return lambda j: way(views[j])

    @functools.cached_property
    def scratch(self) -> np.ndarray:
        """Room for s * c of the largest block any candidate uses (the whole chunk at most)."""
        return np.empty(self.m, np.float64)

    def split(self, step: int, a, b, c) -> list:
        """One chunk's blocks of `step` doubles, each with the scratch it uses."""
        return [(a[i:i + step], b[i:i + step], c[i:i + step], self.scratch[:min(step, a.size - i)])
                for i in range(0, a.size, step)]

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self.run(k % self.n)

    def expected(self):
        return INITIAL["b"] + SCALAR * INITIAL["c"]


def scratched(views) -> None:
    """Triad's blocks: s * c into the scratch block, then b + scratch into a."""
    multiply, add = np.multiply, np.add
    for a, b, c, scratch in views:
        multiply(c, SCALAR, scratch)
        add(b, scratch, a)


def in_place(views) -> None:
    """Triad's blocks: s * c into a's block, then a += b (the same a, bit for bit)."""
    multiply, add = np.multiply, np.add
    for a, b, c, _scratch in views:
        multiply(c, SCALAR, a)
        add(a, b, a)


WAYS = {"s * c into scratch then b + scratch": scratched, "s * c into a then a += b": in_place}
