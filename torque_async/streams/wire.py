"""Wired stages (-from G): a stream's first read reads the track an earlier group's stream writes.

Process i of the reading group reads the written track of process i of group G (the groups have
as many processes), in G's tracks (its memory or its file), frame k from slot k mod G's slots.
Read k starts only once G's write of frame k completed (G's writer's Progress, shared on the one
event loop: no threads); the lateness that waiting causes is the upstream's (pipeline.py: what
a frame would not have had with a writer that held is inherited). The writer never waits for a
reader: one that began frame k + slots (or a later frame of that slot, when it dropped that
one) before read k completed overwrote it (lapped), and that frame is lost for the reader, its
own loss. A frame G dropped (-dropLate) is dropped by the
reader too, as the upstream's. The reading stream runs one period behind the writer's stage:
its first frame is released (the writer's pipeline stage + 1) periods after its own startTime,
plus the writer's own such delay when the writer is wired too, counted from the writer's own
start (its `begun`, when it began first: StreamTest.run), not from the reader's wake-up.

A writer publishes itself at set-up and withdraws at close; the reader finds it at its own
set-up (the loop sets tests up in plan order, so an earlier group is there first).
"""
from __future__ import annotations

from dataclasses import dataclass

from torque_async.kind_api.api import TestError

from ..errors import UsageError
from .frames import WRITTEN, header_of
from .schedule import READ, WRITE, Geometry, LABELS

_WRITERS: dict[tuple[int, int], object] = {}     # (group, process) -> its StreamTest


def publish(group: int, proc: int, test) -> None:
    _WRITERS[group, proc] = test


def withdraw(group: int, proc: int, test) -> None:
    if _WRITERS.get((group, proc)) is test:
        del _WRITERS[group, proc]


def writer_of(label: str) -> int:
    """The sub-stream that writes a label's output (-1: none)."""
    return next((i for i, op in enumerate(LABELS[label]) if op.kind == WRITE), -1)


def borrows(group) -> bool:
    """A wired r: it has no tracks of its own (no memory, no file), it reads its writer's."""
    return group.local.from_group is not None and len(LABELS[group.args[0]]) == 1


@dataclass(frozen=True)
class Wire:
    """The reading side of a wire: the writer's tracks, track and slots, its writer sub-stream's
    Progress (done, started), the frames it dropped, its Frames, the delay (ns) before the
    reader's first frame (after its startTime), and the writer's StreamTest (its `begun` and
    `lag`: the reader's schedule starts from the writer's)."""
    group: int
    tracks: object
    track: int
    slots: int
    progress: object
    dropped: set
    frames: object
    delay: int
    writer: object = None

    @classmethod
    def to(cls, group: int, proc: int, period) -> "Wire":
        test = _WRITERS.get((group, proc))
        if test is None:
            raise TestError(f"-from {group}: process {proc} of group {group}, which this stream "
                            f"reads, is not set up in this run")
        writer = test.stages[test.writer]          # one period behind the writer's stage,
        behind = test.wire.delay if test.wire else 0    # itself behind its own writer
        return cls(group, test.tracks, writer.op.track, test.geometry.slots, test.output,
                   test.frames.dropped[writer.index], test.frames,
                   behind + round((writer.stage + 1) * period), test)

    def received(self, stage, k: int, frame) -> bool:
        """Check read k of the wired sub-stream: True when the writer lapped it (began a later
        frame of the same slot, k + slots or after, that it did not drop, before the read
        completed: lost), else it must hold the writer's frame k (a gate that failed is an
        error)."""
        if any(j not in self.dropped for j in range(k + self.slots, self.progress.started,
                                                     self.slots)):
            return True
        want = WRITTEN | self.track, k
        if header_of(frame) != want:
            tag, number = header_of(frame)
            raise TestError(f"stream {stage.name} (-from {self.group}): transfer {k} (slot "
                            f"{k % self.slots} of group {self.group}'s track {self.track}) "
                            f"found frame {tag:#x}/{number} instead of {want[0]:#x}/{k}")
        return False


class Borrowed:
    """The tracks of a wired r, which has none of its own (it reads only its writer's): the
    writer's name, file and note (its engine and cache mode, which the reads go through),
    nothing to fill, flush or close."""
    scratch = ""

    def __init__(self, tracks):
        self.where, self.path, self.note = tracks.where, getattr(tracks, "path", ""), tracks.note

    async def flush(self) -> None:
        pass

    async def forget(self) -> None:
        pass

    def close(self) -> None:
        pass


def check(plan, group) -> None:
    """Usage errors of -from G before a stream group: one line each."""
    g = group.local.from_group
    if g is None:
        return
    name = f"-from {g} -{group.action} {group.args[0]}"
    if LABELS[group.args[0]][0].kind != READ:
        raise UsageError(f"{name}: a wired stream reads first (r, rw, rwr, rrw); "
                         f"{group.args[0]} writes first")
    if g == group.index:
        raise UsageError(f"{name}: group {g} is this stream itself; name an earlier group")
    if g >= len(plan.groups):
        raise UsageError(f"{name}: there is no group {g} (groups 0..{len(plan.groups) - 1})")
    if g > group.index:
        raise UsageError(f"{name}: group {g} comes later; a stage reads only an earlier group "
                         f"(a later one would deadlock)")
    up = plan.groups[g]
    if up.action != group.action:
        raise UsageError(f"{name}: group {g} is -{up.action}; a -{group.action} stream reads "
                         f"only another -{group.action} group")
    if writer_of(up.args[0]) < 0:
        raise UsageError(f"{name}: group {g} (-{up.action} {up.args[0]}) writes nothing")
    if up.local.p != group.local.p:
        raise UsageError(f"{name}: group {g} runs -p {up.local.p}, this one -p "
                         f"{group.local.p}: process i reads process i's track, give both the "
                         f"same -p")
    alone = "-baseline runs each group alone" if plan.settings.baseline else \
        "-child runs one process" if plan.settings.child is not None else ""
    if alone:
        raise UsageError(f"{name}: {alone}; a wired stage needs its writer in the same run")
    differ = [f"-{o}" for o in ("fbc", "m") if group.action == "streams" and
              getattr(group.local, o) != getattr(up.local, o)]
    if differ:
        verb = "differ" if len(differ) > 1 else "differs"
        raise UsageError(f"{name}: {' and '.join(differ)} {verb} from group {g}'s: the stage "
                         f"reads group {g}'s file as group {g} opened it, give both the same")
    mine, theirs = Geometry.of(group.args, group.local), Geometry.of(up.args, up.local)
    if mine.size != theirs.size or mine.period != theirs.period:
        raise UsageError(f"{name}: frames of {mine.size} bytes every "
                         f"{float(mine.period) / 1e6:.3f} ms, group {g}'s of {theirs.size} "
                         f"bytes every {float(theirs.period) / 1e6:.3f} ms: a stage reads its "
                         f"writer's frames at its rate, give both the same")
    if theirs.slots < 2:
        raise UsageError(f"{name}: group {g}'s track holds 1 frame (its runTime or mfile): its "
                         f"next frame overwrites each one while this stage, a period behind, "
                         f"reads it; give group {g} room for 2 frames")
    if mine.frames > theirs.frames:
        raise UsageError(f"{name}: {mine.frames} frames, group {g} writes {theirs.frames}: "
                         f"a stage reads no more frames than its writer writes (lower its "
                         f"runTime)")
