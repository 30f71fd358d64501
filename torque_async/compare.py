"""torque-async compare A.json B.json: what changed between two runs.

Tests are matched by group, kind and process index; each is compared by its bandwidth (MB/s,
the table's BW column), spinWait by its loop rate, and the runs by their total bandwidth (the
BW: line). A change beyond the threshold (percent) is marked; B slower than A beyond it is a
regression.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    name: str
    kind: str
    unit: str
    a: float | None               # None: the test is not in A
    b: float | None

    @property
    def pct(self) -> float | None:
        return None if not self.a or self.b is None else 100 * (self.b - self.a) / self.a

    def slower(self, threshold: float) -> bool:
        """B is slower than A by more than threshold percent (a regression)."""
        return self.pct is not None and self.pct < -threshold

    def faster(self, threshold: float) -> bool:
        return self.pct is not None and self.pct > threshold

    def verdict(self, threshold: float) -> str:
        if self.a is None or self.b is None:
            return f"only in {'B' if self.a is None else 'A'}"
        if self.pct is None:
            return "n/a"
        mark = " slower" if self.slower(threshold) else " faster" if self.faster(threshold) else ""
        return f"{self.pct:+.1f}%{mark}"


def key(test: dict[str, Any]) -> tuple[int, str, int]:
    return test["group"], test["kind"], test["index"]


def figure(test: dict[str, Any] | None) -> tuple[float | None, str]:
    if test is None:
        return None, ""
    if test["spin"]:
        return test["spin"]["loops_per_s"] / 1e6, "Mloops/s"
    return test["table"]["bw"], "MB/s"


def changes(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """Every test of A then every test only B ran, and the total last."""
    in_a = {key(t): t for t in a["tests"]}
    in_b = {key(t): t for t in b["tests"]}
    out = []
    for k in [*in_a, *(k for k in in_b if k not in in_a)]:
        (va, ua), (vb, ub) = figure(in_a.get(k)), figure(in_b.get(k))
        out.append(Change(f"group {k[0]} proc {k[2]}", k[1], ua or ub, va, vb))
    return out + [Change("Total", "all", "MB/s", a["bandwidth"]["total"], b["bandwidth"]["total"])]


STREAM_FIGURES = (("late", "late frames", "d"), ("dropped", "dropped frames", "d"),
                  ("lateness_p99_us", "lateness p99 (us)", ".1f"))


def stream_changes(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, list[str], bool]]:
    """Per sub-stream of a stream in both runs: (name, 'figure A -> B' texts, B is worse)."""
    in_b = {key(t): t for t in b["tests"]}
    out = []
    for test in a["tests"]:
        other = in_b.get(key(test))
        if not (test.get("streams") and other and other.get("streams")):
            continue
        for name, sa in test["streams"].items():
            sb = other["streams"][name]
            if not isinstance(sa, dict) or not sb:
                continue
            texts = [f"{sa['verdict']} -> {sb['verdict']}"]
            texts += [f"{what} {sa[f]:{fmt}} -> {sb[f]:{fmt}}" for f, what, fmt in STREAM_FIGURES]
            worse = any(sb[f] > sa[f] for f, _, _ in STREAM_FIGURES)
            out.append((f"group {test['group']} proc {test['index']} sub {sa['sub']}", texts,
                        worse))
    return out


def stream_lines(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    found = stream_changes(a, b)
    if not found:
        return []
    return ["", "streams, A -> B:", *(", ".join([name, *texts, "worse" if worse else "same or better"])
                                      for name, texts, worse in found)]


def lines(found: list[Change], docs: tuple[dict[str, Any], dict[str, Any]],
          names: tuple[str, str], threshold: float) -> list[str]:
    """The report of `found` = changes(*docs) between the runs read from `names`."""
    out = [f"{label}: {path} ({doc['date']}): torque-async {doc['command']}".rstrip()
           for label, path, doc in zip("AB", names, docs)]
    out += ["", "test, kind, A, B, unit, change"]
    out += [", ".join((c.name, c.kind, *("-" if v is None else f"{v:.1f}" for v in (c.a, c.b)),
                       c.unit, c.verdict(threshold))) for c in found]
    slower = sum(c.slower(threshold) for c in found)
    faster = sum(c.faster(threshold) for c in found)
    return out + stream_lines(*docs) + [
        "", f"changes beyond {threshold:g}% marked: {slower} slower, {faster} faster"]
