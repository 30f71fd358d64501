"""What the file tests put in files, so that every byte they wrote can be checked afterwards.

Files torque-async creates (scratch files, the -files tree) hold `pattern`: the 64-bit
little-endian word at byte x (x a multiple of 8) is x ^ (tag << 48), tag = the file's number,
so a block read from the wrong place or the wrong file does not match. A write transfer writes
`written(file, offset, size)`: FILL bytes, the first 8 replaced by the stamp of the place, so a
write that went elsewhere or never happened is found. -rmw adds 1 to the first byte of every
512-byte sector of what it read (`modify`), so after v visits those bytes are up by v mod 256.
"""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

FILL = 0x5A
WRITE_MARK = 0x5752 << 48          # "WR"
SECTOR = 512
STAMP = struct.Struct("<Q")        # the stamp: a little-endian 64-bit word


def pattern(offset: int, length: int, tag: int = 0) -> np.ndarray:
    """The bytes [offset, offset + length) of a file torque-async created (uint8)."""
    first = offset // 8
    words = np.arange(first, -(-(offset + length) // 8), dtype=np.uint64) * np.uint64(8)
    if tag:
        words ^= np.uint64(tag << 48)
    skip = offset - first * 8
    return words.view(np.uint8)[skip:skip + length]


_STEP = np.arange(1 << 17, dtype=np.uint64) * np.uint64(8)    # 1 MB of offsets 0, 8, 16, ...


def fill(words: np.ndarray, offset: int, tag: int = 0) -> None:
    """`pattern` made in place, allocating nothing: the uint64 `words` get the words from byte
    `offset` (a multiple of 8) on."""
    step = len(_STEP)
    for i in range(0, len(words), step):
        part = words[i:i + step]
        np.add(_STEP[:len(part)], np.uint64(offset + 8 * i), out=part)
    if tag:
        np.bitwise_xor(words, np.uint64(tag << 48), out=words)


def stamper(buffer) -> Callable[[int, int], None]:
    """stamp(file, offset): puts the stamp of the place `offset` of file number `file` in the
    first 8 bytes of `buffer` (all of it when shorter). Allocates nothing when it has 8."""
    view, pack = memoryview(buffer), STAMP.pack_into
    if len(view) >= 8:
        return lambda file, offset: pack(view, 0, WRITE_MARK ^ file << 40 ^ offset)
    whole = bytearray(8)
    full = stamper(whole)

    def short(file: int, offset: int) -> None:
        full(file, offset)
        view[:] = whole[:len(view)]
    return short


def written(file: int, offset: int, size: int) -> np.ndarray:
    """The bytes a write transfer of `size` bytes leaves at `offset`."""
    out = np.full(size, FILL, np.uint8)
    stamper(out)(file, offset)
    return out


def modify(block: np.ndarray, times: int = 1) -> np.ndarray:
    """-rmw's change, in place: the first byte of every sector up by `times` (mod 256)."""
    block[::SECTOR] += np.uint8(times % 256)
    return block
