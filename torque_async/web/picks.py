"""Which file each request of a -web client reads: uniform, or zipf by popularity.

zipf follows fio's file_service_type=zipf:theta over the N files of the tree: the file of rank r
(1..N) is picked with probability r^-theta / sum_k k^-theta, for any theta > 0 (N is finite, so
theta <= 1 is a law too). Ranks map to files through a permutation seeded by -seed and the group,
so the hot set is the same files for every client of the group and for every run with that seed.
Picks are drawn by numpy in blocks (one call per BLOCK requests, none per request).
"""
from __future__ import annotations

import numpy as np

BLOCK = 4096


class Popularity:
    """What a group's clients share: the rank -> file map and the cumulative law (zipf)."""

    def __init__(self, files: int, theta: float | None, seed: int, group: int):
        self.files = files
        self.order = np.random.default_rng([seed, group, 0x7A6970]).permutation(files)
        self.cdf = None
        if theta is not None:
            weights = np.arange(1, files + 1, dtype=np.float64) ** -theta
            self.cdf = np.cumsum(weights) / weights.sum()

    def share(self, hottest: int) -> float:
        """The share of picks the law gives its `hottest` files."""
        if self.cdf is None:
            return min(hottest, self.files) / self.files
        return float(self.cdf[min(hottest, self.files) - 1])


class Picker:
    """One client's sequence of picked files (indices into the tree), drawn from its rng."""

    def __init__(self, popularity: Popularity, rng: np.random.Generator):
        self.popularity, self.rng = popularity, rng

    def block(self, count: int = BLOCK) -> list[int]:
        """The next `count` picks."""
        pop = self.popularity
        if pop.cdf is None:
            return self.rng.integers(0, pop.files, count).tolist()
        ranks = np.searchsorted(pop.cdf, self.rng.random(count), side="right")
        return pop.order[np.minimum(ranks, pop.files - 1)].tolist()


def generators(rng: np.random.Generator) -> tuple[np.random.Generator, np.random.Generator]:
    """A client's two independent sequences, from its rng: the picks, and the append sizes."""
    sizes = np.random.default_rng(int(rng.integers(2**63)))
    return rng, sizes
