"""The capacity search: the largest value that passes, found by doubling then bisection.

Every step runs one round of one point. A new point gets one round; the search leans on what
its rounds so far say (Rule.leaning) and moves on: up by doubling until a point fails (or
--max), down by halving when the start failed, then bisection between the largest point that
passed and the smallest that failed. A point that failed a round --pass may forgive is
settled before the search goes below it (one noisy round would send the bisection down a
whole half). Once the bounds are one apart, the two are revisited, the one with fewer rounds
first (their rounds interleave), until each is decided (Rule.verdict); a revisit that turns a
point over moves the bounds and the bisection goes on. The values are
integers; the passing values are assumed to be the ones below a step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    """A point passes when `need` of its `rounds` rounds pass (--rounds R, --pass k/R)."""
    rounds: int
    need: int

    def verdict(self, passes: list[bool]) -> bool | None:
        """True: passed; False: failed; None: the rounds left could still go either way."""
        if sum(passes) >= self.need:
            return True
        if len(passes) - sum(passes) > self.rounds - self.need:
            return False
        return None

    def leaning(self, passes: list[bool]) -> bool:
        """The verdict, or where the rounds so far point: passes keeping pace with need/rounds."""
        decided = self.verdict(passes)
        return decided if decided is not None else \
            sum(passes) * self.rounds >= self.need * len(passes)


@dataclass
class Point:
    value: int
    rounds: list[Any] = field(default_factory=list)     # each with .passed

    @property
    def passes(self) -> list[bool]:
        return [r.passed for r in self.rounds]


@dataclass
class Search:
    start: int
    floor: int                     # never below (--min, else 1)
    ceiling: int                   # never above (--max)
    rule: Rule
    points: dict[int, Point] = field(default_factory=dict)

    def bounds(self) -> tuple[int | None, int | None]:
        """(largest value leaning to pass below the smallest leaning to fail, that one)."""
        fails = [v for v, p in self.points.items() if not self.rule.leaning(p.passes)]
        hi = min(fails, default=None)
        lo = max((v for v, p in self.points.items()
                  if self.rule.leaning(p.passes) and (hi is None or v < hi)), default=None)
        return lo, hi

    def next(self) -> int | None:
        """The value whose round runs next; None when the search is over."""
        lo, hi = self.bounds()
        if lo is None and hi is None:
            return self.start
        if hi is not None and (lo is None or hi - lo > 1) and hi > self.floor \
                and self.rule.verdict(self.points[hi].passes) is None:
            return hi            # a failed round --pass forgives: settled before going below
        if hi is None and lo < self.ceiling:
            return min(lo * 2, self.ceiling)
        if lo is None and hi > self.floor:
            return max(hi // 2, self.floor)
        if lo is not None and hi is not None and hi - lo > 1:
            return (lo + hi) // 2
        unsettled = [v for v in (lo, hi) if v is not None
                     and self.rule.verdict(self.points[v].passes) is None]
        return min(unsettled, key=lambda v: len(self.points[v].rounds)) if unsettled else None

    def add(self, value: int, result: Any) -> Point:
        point = self.points.setdefault(value, Point(value))
        point.rounds.append(result)
        return point

    def left(self) -> int:
        """Rounds still to run at most, as far as the points so far tell (the estimate of the
        time left): the steps of doubling or halving and of bisection, then the rounds that
        settle the two bounds."""
        lo, hi = self.bounds()
        top = hi if hi is not None else self.ceiling + 1
        bottom = lo if lo is not None else self.floor - 1
        steps = max(top - bottom - 1, 0).bit_length()
        settle = sum(self.rule.rounds - len(self.points[v].rounds)
                     for v in (lo, hi) if v is not None)
        return steps + max(settle, 0) + (0 if lo is not None or hi is not None else 1)

    def answer(self) -> tuple[Point | None, Point | None]:
        """(the largest point that passed, the smallest that failed), by their verdicts."""
        lo, hi = self.bounds()
        return (self.points[lo] if lo is not None else None,
                self.points[hi] if hi is not None else None)
