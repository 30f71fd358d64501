"""-spinWait: keep a processor busy generating random numbers; no bandwidth.

One transfer generates transfer-size / 8 random doubles (rounded down; a transfer holds one at
least) from the process's own generator, in
fills of one small preallocated block that stays in cache (so the test moves no memory); one
loop is one random number. The driver measures the loop rate alone before the start
(its kind declares calibration; with -baseline the test's run alone gives that figure instead)
and under load, so the report can say how much of an idle CPU the test kept.
"""
from __future__ import annotations

import numpy as np

from torque_async.kind_api.api import TestContext, TestError
from torque_async.kind_api.buffers import Buffers

BLOCK = 16384                      # random numbers per fill (128 KiB: stays in L2)


class SpinTest:
    transfer_bytes = 0
    system_bytes = 0

    def __init__(self, ctx: TestContext):
        self.rng = ctx.rng
        self.buffers = Buffers(ctx.local.wire)
        numbers = ctx.local.size // 8      # (at least one: validate.whole_words)
        self.block = self.buffers.new(min(numbers, BLOCK) * 8, np.float64)
        self.fills, rest = divmod(numbers, len(self.block))
        self.rest = self.block[:rest] if rest else None          # the last, partial fill
        self.ops_per_transfer = numbers
        self.info = f"{numbers} random number{'s' * (numbers != 1)} per transfer" + \
            (f" ({ctx.local.size}-byte transfers rounded down to whole 8-byte doubles)"
             if ctx.local.size % 8 else "")

    def transfer(self, k: int) -> None:
        for _ in range(self.fills):
            self.rng.random(out=self.block)
        if self.rest is not None:
            self.rng.random(out=self.rest)

    def check(self) -> None:
        # Doubles in [0, 1) with a plausible mean (of enough of them to tell): the loop really
        # generated numbers.
        if not (0.0 <= self.block.min() and self.block.max() < 1.0
                and (len(self.block) < 1000 or abs(self.block.mean() - 0.5) < 0.05)):
            raise TestError("spinWait: the random block does not hold uniform numbers")

    def close(self) -> None:
        self.buffers.close()
