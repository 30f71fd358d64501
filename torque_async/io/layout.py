"""Where every transfer of a file test goes: transfer k -> (file, offset, read or write).

A Layout is a pure function of the plan, the seed and the sizes of the files: the same command
with the same -seed makes the same sequence, whatever the engine and however the transfers
interleave. It is computed a block of BLOCK transfers at a time (vectorised, random access: block
b draws from its own generator seeded with (seed, row, b)), so a test of any length costs a few
blocks of memory.

Places lie on a lattice: offset + j x spacing (spacing = transfer size + -vector), none ending
past `limit` (the maximum file size). The orders:

    seq     j = k mod n; past the limit the lattice wraps to 0, not to the offset (r w rw rmw aio)
    random  j uniform over the lattice (rand)
    scan    n places evenly spread over [offset, limit), aligned down to `align` (scan scanfile)
    tree    a uniform file, then a uniform transfer-size-aligned place in it (files)

and the operations: read, write, alternate (odd transfers write: rw) or mix (each a write with
probability (100 - percR) / 100: rand, aio, files).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 4096
SHIFT = BLOCK.bit_length() - 1     # transfer k is in block k >> SHIFT, at k & MASK
MASK = BLOCK - 1
assert BLOCK == 1 << SHIFT
ORDERS = ("seq", "random", "scan", "tree")
OPS = ("read", "write", "alternate", "mix")


@dataclass(frozen=True)
class Layout:
    order: str
    ops: str
    size: int                     # transfer size
    n: int                        # transfers per iteration
    limit: int                    # no transfer ends past this byte (the maximum file size)
    key: tuple[int, int]          # (seed, row): the random choices of this test
    offset: int = 0
    spacing: int = 0              # seq/random: lattice step (>= size); scan: computed
    percR: int = 100
    align: int = 512              # scan: places are multiples of this
    sizes: tuple[int, ...] = ()   # tree: the size of every file

    def __post_init__(self):
        assert self.order in ORDERS and self.ops in OPS, (self.order, self.ops)
        spacing = self.spacing or self.size
        if self.order == "scan":
            step = (self.limit - self.offset - self.size) // max(self.n - 1, 1)
            spacing = step // self.align * self.align if self.n > 1 else self.size
        object.__setattr__(self, "spacing", spacing)
        if self.order != "tree" and (spacing < 1 or self.places() < 1):
            what = f"{self.n} {self.size}-byte transfers do not fit" if self.order == "scan" \
                else f"no {self.size}-byte transfer fits"
            raise ValueError(f"{what} between byte {self.offset} and the file's end at byte "
                             f"{self.limit} (-mfile*, or the file's size)")

    def places(self) -> int:
        """Lattice places from the offset that fit under the limit."""
        return max((self.limit - self.offset - self.size) // self.spacing + 1, 0)

    @property
    def span(self) -> int:
        """The end of the furthest byte any transfer touches: what a file must hold."""
        if self.order == "tree":
            return max(self.sizes)
        used = self.places() if self.order == "random" else min(self.n, self.places())
        if self.order == "seq" and self.n > self.places():
            return self.limit                                # it wraps: the whole max size
        return self.offset + (used - 1) * self.spacing + self.size

    def block(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(file index int32, offset int64, write bool) of transfers b*BLOCK .. (b+1)*BLOCK-1."""
        k = np.arange(b * BLOCK, (b + 1) * BLOCK, dtype=np.int64)
        rng = np.random.default_rng([*self.key, b])
        files = np.zeros(BLOCK, np.int32)
        if self.order == "tree":
            files = rng.integers(0, len(self.sizes), BLOCK).astype(np.int32)
            fits = np.asarray(self.sizes, np.int64)[files] // self.size
            offsets = rng.integers(0, fits) * self.size
        elif self.order == "random":
            offsets = self.offset + rng.integers(0, self.places(), BLOCK) * self.spacing
        else:
            offsets = self.seq(k % self.n)
        if self.ops == "mix":
            writes = rng.integers(0, 100, BLOCK) >= self.percR
        elif self.ops == "alternate":
            writes = (k & 1).astype(bool)
        else:
            writes = np.full(BLOCK, self.ops == "write")
        return files, offsets, writes

    def seq(self, j: np.ndarray) -> np.ndarray:
        """Place of the j-th transfer of an iteration: on from the offset, then wrapping to 0."""
        if self.order == "scan":
            return self.offset + j * self.spacing
        first = self.places()
        wrapped = (self.limit - self.size) // self.spacing + 1
        return np.where(j < first, self.offset + j * self.spacing,
                        (j - first) % wrapped * self.spacing)


class Cursor:
    """Transfer k's (file, offset, write) from a layout, a few blocks cached as Python lists."""

    def __init__(self, layout: Layout, keep: int = 4):
        self.layout, self.keep = layout, keep
        self.cache: dict[int, tuple[list, list, list]] = {}

    def __call__(self, k: int) -> tuple[int, int, bool]:
        b, i = divmod(k, BLOCK)
        files, offsets, writes = self.lists(b)
        return files[i], offsets[i], writes[i]

    def lists(self, b: int) -> tuple[list, list, list]:
        """Block b as (files, offsets, writes) lists."""
        blk = self.cache.get(b)
        if blk is None:
            if len(self.cache) >= self.keep:                 # threads may race here: no harm
                self.cache.pop(min(self.cache), None)
            blk = self.cache[b] = tuple(a.tolist() for a in self.layout.block(b))
        return blk
