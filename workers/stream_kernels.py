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

Triad needs s * c somewhere: it runs over the chunk in blocks of half the L2 cache, computing
s * c into a scratch block made at set-up (it stays in L2), then b + scratch into a.  Memory
sees what C's single loop makes it see (read b, read c, write a) and nothing is allocated.
(Computing s * c into a's own block allocates nothing either, but measured ~25% slower here.)
Copy goes through numpy's SIMD loop as a | 0 on uint64 views, a bit-exact copy: np.copyto
would call glibc memmove, ~10% slower than a vector loop on 4 MiB copies on the machine this
was tuned on (the C reference shows the same gap between its bcopy and its Copy).

check() validates every element of every array as STREAM's checkSTREAMresults does: relative
error against the expected value within 1e-13 (NaN fails).
"""
from __future__ import annotations

import functools

import numpy as np

from torque_async import sysinfo
from torque_async.testing.api import TestContext, TestError
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
    buffers = ("a", "b", "c")
    unit = 8                    # doubles

    def __init__(self, ctx: TestContext):
        if ctx.local.size < 8:
            self.fail(f"needs transfers of at least 8 bytes, not {ctx.local.size}")
        super().__init__(ctx)
        self.m = m = self.size // 8                         # doubles per chunk
        self.info = f"{self.n} x {self.size} bytes per array"
        for name in self.buffers:                           # -offset bytes, then the arrays
            array = self._buffers.new(self.offset + self.n * self.size)[self.offset:]
            array = array.view(np.float64)                  # (unaligned for an odd -offset)
            array.fill(INITIAL[name])                       # touches every page
            setattr(self, name, array)
        self._views = [self.kernel_views(*(x[j * m:(j + 1) * m] for x in (self.a, self.b, self.c)))
                       for j in range(self.n)]

    def kernel_views(self, a, b, c):
        """What transfer() needs for one chunk (made once, at set-up)."""
        return a, b, c

    def expected(self) -> float:
        """The value the kernel leaves in its output array (the others keep INITIAL)."""
        raise NotImplementedError

    def check(self) -> None:
        touched = self.touched() * self.m
        for name in self.buffers:
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


class Scopy(StreamKernel):
    """c = a, bit for bit: a | 0 on the arrays' uint64 views (see the module's note)."""

    action, output = "Scopy", "c"

    def kernel_views(self, a, b, c):
        return a.view(np.uint64), c.view(np.uint64)

    def transfer(self, k: int) -> None:
        self.transfers += 1
        a, c = self._views[k % self.n]
        np.bitwise_or(a, ZERO, out=c)

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
    action, output, traffic = "Striad", "a", 3

    @functools.cached_property
    def scratch(self) -> np.ndarray:
        """s * c for one block: half the L2 cache, or the whole chunk if that is smaller."""
        return np.empty(min(self.m, max(1, l2_bytes() // 16)), np.float64)

    def kernel_views(self, a, b, c):
        step = self.scratch.size
        return [(a[i:i + step], b[i:i + step], c[i:i + step], self.scratch[:min(step, a.size - i)])
                for i in range(0, a.size, step)]

    def transfer(self, k: int) -> None:
        self.transfers += 1
        multiply, add = np.multiply, np.add
        for a, b, c, scratch in self._views[k % self.n]:
            multiply(c, SCALAR, scratch)
            add(b, scratch, a)

    def expected(self):
        return INITIAL["b"] + SCALAR * INITIAL["c"]
