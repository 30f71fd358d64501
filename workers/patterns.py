"""Memory test patterns: how -bp1/-bp2, -bt, -btr and -bpkey initialise a buffer.

A buffer is seen as 64-bit words (a bus cycle each).  -bt says how pattern 1 and pattern 2
alternate, as a percentage of bit toggling between consecutive words:

    0    1,1,1,1,...                 (pattern 1 every cycle: no toggling)
    50   1,1,2,2,1,1,2,2,...         (pairs: every other cycle toggles)
    75   1,2,1,2,2,1,2,1,...         (6 toggles in 8 cycles)
    100  1,2,1,2,...                 (every cycle toggles)
    101  walking one: word i = 1 << (i % 64), easy to recognise on a logic analyser
    102  random words from the test's generator

-btr fills with random words whatever -bt says.  With -bpkey 1 (the default) the first word
of each buffer is the key 0xDECAFBAD00000000 | row, so a logic analyser can find where a
test's buffer starts and whose it is.  Filling is vectorised: a block of the pattern is made
once and copied over the buffer; random words are drawn in blocks so a large buffer
never needs a second buffer's worth of temporaries.
"""
from __future__ import annotations

import numpy as np

KEY = 0xDECAFBAD00000000
MASK64 = (1 << 64) - 1

# -bt value -> one period, as indexes into (pattern 1, pattern 2)
PERIODS = {
    0: (0,),
    50: (0, 0, 1, 1),
    75: (0, 1, 0, 1, 1, 0, 1, 0),
    100: (0, 1),
}
WALKING_ONE = 101
RANDOM = 102
RANDOM_BLOCK = 1 << 16          # words drawn per call when filling with random numbers
COPY_BLOCK = 1 << 15            # words of a deterministic pattern made once, then copied
FILL_ROWS = 64                  # COPY_BLOCKs copied a call (16 MiB): a stop signal is handled
                                # between calls, even when -sp fills in the command's process
                                # (a multiple of every period)


def key(row: int) -> int:
    """The -bpkey word that starts every buffer of test `row`."""
    return KEY | (row & 0xFFFFFFFF)


def period(local) -> np.ndarray | None:
    """One period of the deterministic pattern `local` asks for; None for random words."""
    bt = local.bt
    if local.btr or bt == RANDOM:
        return None
    if bt == WALKING_ONE:
        return np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
    patterns = np.array([local.bp1 & MASK64, local.bp2 & MASK64], dtype=np.uint64)
    return patterns[list(PERIODS[bt])]


def fill(buf_u64: np.ndarray, local, rng: np.random.Generator, row: int, *,
         invert: bool = False) -> None:
    """Initialise `buf_u64` (a contiguous uint64 array) as `local`'s pattern options say.

    `invert` stores the complement of the pattern (the key stays as it is): a copy's
    destination starts unlike its source, so a copy that never happened cannot pass a check.
    Each word is written once: a block of the pattern (complemented if asked) is made, then
    copied over the buffer, so the fill runs at memory speed.
    """
    if buf_u64.dtype != np.uint64 or not buf_u64.flags.c_contiguous or buf_u64.ndim != 1:
        raise ValueError("fill wants a contiguous one-dimensional uint64 array")
    words = buf_u64.size
    cycle = period(local)
    if cycle is None:
        for start in range(0, words, RANDOM_BLOCK):
            part = buf_u64[start:start + RANDOM_BLOCK]
            part[...] = rng.integers(0, 1 << 64, size=part.size, dtype=np.uint64)
            if invert:
                np.invert(part, out=part)
    else:
        block = np.tile(~cycle if invert else cycle, COPY_BLOCK // cycle.size)
        whole = words - words % COPY_BLOCK
        rows = buf_u64[:whole].reshape(-1, COPY_BLOCK)
        for r in range(0, len(rows), FILL_ROWS):
            rows[r:r + FILL_ROWS] = block
        buf_u64[whole:] = block[:words - whole]
    if words and local.bpkey:
        buf_u64[0] = key(row)
