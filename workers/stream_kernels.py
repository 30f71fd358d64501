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

Triad needs s * c somewhere: it runs over the chunk in blocks, computing s * c into a scratch
block made at set-up (it stays in cache), then b + scratch into a.  Memory sees what C's single
loop makes it see (read b, read c, write a) and nothing is allocated.  The best block size
depends on the machine's caches, so set-up times the candidates and keeps the fastest.
Copy is a bit-exact copy on uint64 views, by numpy's SIMD loop (a | 0) or by glibc's memmove
(np.copyto), whichever set-up measures faster on this machine.

check() validates every element of every array as STREAM's checkSTREAMresults does: relative
error against the expected value within 1e-13 (NaN fails).
"""
from __future__ import annotations

import functools
import time

import numpy as np

from torque_async import sysinfo
from torque_async.units import human
from torque_async.testing.api import TestContext, TestError
from workers.memory import MemoryTest

SCALAR = 3.0
ZERO = np.uint64(0)
EPSILON = 1e-13                 # checkSTREAMresults' epsilon for double
INITIAL = {"a": 1.0, "b": 2.0, "c": 0.5}
CHECK_BLOCK = 1 << 20           # elements compared per step in check()
CALIBRATION_PASSES = 3          # passes timed per kernel variant at set-up (best kept)


def best_ns(run) -> int:
    """The fastest of CALIBRATION_PASSES calls of run() (set-up: choosing a kernel variant)."""
    best = None
    for _ in range(CALIBRATION_PASSES):
        t = time.perf_counter_ns()
        run()
        t = time.perf_counter_ns() - t
        best = t if best is None else min(best, t)
    return best


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
        self.info = f"{self.n} x {self.size} bytes per array"
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
# loop or glibc's memmove), so set-up times both on the first chunk and keeps the faster.
COPIES = {"vector a|0": lambda a, c: np.bitwise_or(a, ZERO, out=c),
          "memmove": lambda a, c: np.copyto(c, a)}


class Scopy(StreamKernel):
    """c = a, bit for bit, on the arrays' uint64 views, by the faster of COPIES here."""

    action, output = "Scopy", "c"

    def __init__(self, ctx: TestContext):
        super().__init__(ctx)
        a, c = self._views[0]
        timed = {name: best_ns(lambda: copy(a, c)) for name, copy in COPIES.items()}
        self.way = min(timed, key=timed.get)
        self.copy = COPIES[self.way]
        self.c[:self.m] = INITIAL["c"]            # chunk 0 as if never run: check() expects it
        self.info += f"; Copy by {self.way}, the faster here of {' and '.join(timed)}"

    def kernel_views(self, a, b, c):
        return a.view(np.uint64), c.view(np.uint64)

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self.copy(*self._views[k % self.n])

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
    """a = b + s * c in blocks: s * c into a scratch block that stays in cache, then b + scratch
    into a. The block size is the machine's: set-up times one pass over the first chunk for each
    candidate (BLOCK_CANDIDATES, untimed) and keeps the fastest; the group block says which."""

    action, output, traffic = "Striad", "a", 3

    def __init__(self, ctx: TestContext):
        self.step = 1 << 62                        # one block a chunk, until calibrated
        super().__init__(ctx)
        timed = {step: self.pass_ns(step) for step in self.candidates()}
        self.step = min(timed, key=timed.get)
        self.a[:self.m] = INITIAL["a"]            # chunk 0 as if never run: check() expects it
        self._views = [self.kernel_views(*(x[j * self.m:(j + 1) * self.m]
                                           for x in (self.a, self.b, self.c)))
                       for j in range(self.n)]
        self.info += (f"; Triad in blocks of {human(self.step * 8)} bytes, the fastest here of "
                      + " ".join(human(step * 8) for step in timed))

    def candidates(self) -> list[int]:
        """Block sizes (doubles) worth timing: fractions of L1d and L2, and the whole chunk."""
        l1, l2 = sysinfo.cache_sizes().get("1Data", 32) << 10, l2_bytes()
        fits = {l1 // 16, l2 // 32, l2 // 16, l2 // 8, l2 // 4}
        return sorted({max(1, min(self.m, b)) for b in fits} | {self.m})

    def pass_ns(self, step: int) -> int:
        """The best pass over chunk 0 in blocks of `step` doubles."""
        self.step = step
        views = self.kernel_views(self.a[:self.m], self.b[:self.m], self.c[:self.m])
        return best_ns(lambda: self.blocks(views))

    @functools.cached_property
    def scratch(self) -> np.ndarray:
        """Room for s * c of the largest block any candidate uses (the whole chunk at most)."""
        return np.empty(self.m, np.float64)

    def kernel_views(self, a, b, c):
        step = self.step
        return [(a[i:i + step], b[i:i + step], c[i:i + step], self.scratch[:min(step, a.size - i)])
                for i in range(0, a.size, step)]

    def transfer(self, k: int) -> None:
        self.transfers += 1
        self.blocks(self._views[k % self.n])

    @staticmethod
    def blocks(views) -> None:
        multiply, add = np.multiply, np.add
        for a, b, c, scratch in views:
            multiply(c, SCALAR, scratch)
            add(b, scratch, a)

    def expected(self):
        return INITIAL["b"] + SCALAR * INITIAL["c"]
