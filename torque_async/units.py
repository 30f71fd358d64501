"""Units: KB, MB and GB are powers of two; bandwidth in MB/s is MiB per second."""
from __future__ import annotations

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def mb_per_s(nbytes: int, ns: int) -> float:
    """Bandwidth of nbytes moved in ns nanoseconds, in MiB/s (0 for an empty interval)."""
    return nbytes / MB / (ns / NS_PER_S) if ns > 0 else 0.0


def per_s(count: int, ns: int) -> float:
    return count / (ns / NS_PER_S) if ns > 0 else 0.0


def human(nbytes: int) -> str:
    """A byte count in the largest unit that divides it: 4194304 -> '4M', 1000 -> '1000'."""
    for unit, size in (("G", GB), ("M", MB), ("K", KB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return str(nbytes)


def amount(nbytes: int) -> str:
    """A size for a message: in a unit it is at least 10 of (or a whole number of), so two
    sizes a message compares never look alike: 2093056 -> '2044 KB', 1 MB -> '1 MB',
    16.2 GB -> '16.2 GB'."""
    for unit, size in (("GB", GB), ("MB", MB), ("KB", KB)):
        if nbytes >= 10 * size or (nbytes >= size and nbytes % size == 0):
            value = nbytes / size
            return f"{value:.0f} {unit}" if value >= 100 or nbytes % size == 0 else \
                f"{value:.1f} {unit}"
    return f"{nbytes} bytes"


def kb_text(nbytes: int) -> str:
    """A transfer size in KB for the table: whole KB as integers, otherwise two decimals."""
    return str(nbytes // KB) if nbytes % KB == 0 else f"{nbytes / KB:.2f}"
