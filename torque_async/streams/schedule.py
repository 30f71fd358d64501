"""What a stream does and when: its geometry, its sub-streams (the label table) and its clock.

A label is a small pipeline of sub-streams, each a sequence of transfers k = 0, 1, 2, ... on
one track (a region of the stream's file or memory holding `slots` frames; transfer k uses
slot k mod slots, so the stream wraps after mfile MB):

    label  sub-streams (track)           dependencies
    r      read(0)
    w      write(0)
    rw     read(0) write(0)              write k after read k; it writes back what was read, changed
    wr     write(0) read(0)              read k after write k; it must get what was written
    rwr    read(0) write(0) read(0)      read, change and write back, then read back
    rrw    read(0) read(1) write(2)      write k combines reads k of both cameras

Timing. Frame k is released at start + k x period (period = size / bw), computed from k every
time in exact integer arithmetic, so deadlines never drift. A sub-stream at pipeline stage s
(0 without dependencies, else one more than the deepest one it depends on) handles frame k in
the period from release(k + s) to its deadline release(k + s + 1): a pipeline holds its frame
rate when every stage keeps up, however deep it is. A read without dependencies prefetches:
it is released `lookahead` periods early and runs at most `lookahead` frames ahead of the
sub-streams that consume it. A transfer that cannot start on time starts late; none is skipped.

Gates say when transfer k of a sub-stream may start: done[other] >= k + offset for each
(other, offset). Dependencies are offset +1, lookahead -lookahead, and a slot is not reused
before every later sub-stream on the same track has finished with it (offset 1 - slots).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..results import MAX_SUBS
from ..units import KB, MB, NS_PER_S
from .formats import frame_bytes, rate

READ, WRITE = "r", "w"


@dataclass(frozen=True)
class Op:
    kind: str                     # READ or WRITE
    track: int
    deps: tuple[int, ...] = ()    # sub-streams whose transfer k this one's transfer k needs


LABELS: dict[str, tuple[Op, ...]] = {
    "r": (Op(READ, 0),),
    "w": (Op(WRITE, 0),),
    "rw": (Op(READ, 0), Op(WRITE, 0, (0,))),
    "wr": (Op(WRITE, 0), Op(READ, 0, (0,))),
    "rwr": (Op(READ, 0), Op(WRITE, 0, (0,)), Op(READ, 0, (1,))),
    "rrw": (Op(READ, 0), Op(READ, 1), Op(WRITE, 2, (0, 1))),
}
if max(len(ops) for ops in LABELS.values()) > MAX_SUBS:        # python -O keeps a raise
    raise TypeError(f"a stream label has more sub-streams than a results row holds ({MAX_SUBS})")


@dataclass(frozen=True)
class Stage:
    """One sub-stream with everything derived from the label: when it may run, what it gates on."""
    index: int
    op: Op
    stage: int                              # pipeline stage
    lead: int                               # periods released early (prefetching reads)
    consumers: tuple[int, ...]              # sub-streams that depend on this one
    gates: tuple[tuple[int, int], ...]      # (other, offset): done[other] >= k + offset

    @property
    def name(self) -> str:
        return f"{self.index} {'read' if self.op.kind == READ else 'write'} t{self.op.track}"


def stages(label: str, lookahead: int, slots: int) -> tuple[Stage, ...]:
    ops = LABELS[label]
    depth: list[int] = []
    for op in ops:
        depth.append(1 + max(depth[d] for d in op.deps) if op.deps else 0)
    out = []
    for i, op in enumerate(ops):
        consumers = tuple(j for j, o in enumerate(ops) if i in o.deps)
        prefetch = op.kind == READ and not op.deps
        gates = [(d, 1) for d in op.deps]
        if prefetch:
            gates += [(c, -lookahead) for c in consumers]
        gates += [(j, 1 - slots) for j in range(i + 1, len(ops)) if ops[j].track == op.track]
        out.append(Stage(i, op, depth[i], lookahead if prefetch else 0, consumers, tuple(gates)))
    return tuple(out)


@dataclass(frozen=True)
class Geometry:
    """A stream's numbers, from its action arguments (label lookahead sizeKB bwMBs startTime
    runTime mfileMB) and its frame units (-frame, -pixfmt, -fps; see sizing): transfer size,
    the exact period, measured frames, slots per track."""
    label: str
    lookahead: int                # frames a source read may run ahead (at most all of them)
    size: int                     # bytes per transfer
    period: Fraction              # ns per transfer, exact
    start_delay: int              # ns after the barrier
    frames: int                   # measured transfers of each sub-stream
    slots: int                    # frames a track holds before it wraps
    mfile_slots: int              # frames in mfile MB

    @classmethod
    def of(cls, args, local=None) -> "Geometry":
        label, lookahead, _, _, start, run, mfile = args
        size, period = sizing(args, local)
        frames = max(1, math.ceil(decimal(run) * NS_PER_S / period))
        mfile_slots = mfile * MB // size
        return cls(label, min(lookahead, frames), size, period, round(start * NS_PER_S), frames,
                   max(1, min(frames, mfile_slots)), mfile_slots)

    @property
    def fps(self) -> float:
        return float(NS_PER_S / self.period)

    @property
    def bw(self) -> float:
        """The target in MiB/s."""
        return self.size / MB * self.fps

    @property
    def tracks(self) -> int:
        return 1 + max(op.track for op in LABELS[self.label])

    @property
    def track_bytes(self) -> int:
        return self.slots * self.size

    def stages(self) -> tuple[Stage, ...]:
        return stages(self.label, self.lookahead, self.slots)


def frames_text(g: Geometry, local) -> str:
    """'1920x1080 uyvy422 frames of 4147200 bytes at 60.000 fps (237.3 MB/s, every 16.667 ms)':
    what a stream's set-up reports (its info) and -quit shows."""
    frame = (f"{local.frame[0]}x{local.frame[1]} {local.pixfmt} frames of {g.size} bytes"
             if local.frame else f"frames of {g.size // KB} KB")
    return f"{frame} at {g.fps:.3f} fps ({g.bw:.1f} MB/s, every {float(g.period) / 1e6:.3f} ms)"


def plan_lines(group) -> list[str]:
    """-quit's lines of a stream group: its sub-streams, frames, rate and bandwidth, buffer,
    and what a wired one (-from) reads."""
    g, n = Geometry.of(group.args, group.local), group.local.bufferFrames or 0
    source = group.local.from_group
    return [f"  stream: {g.label}, {len(g.stages())} x {g.frames} {frames_text(g, group.local)}"
            f" per sub-stream; buffer {n} frames ({n * float(g.period) / 1e6:.3f} ms)",
            *([f"  {g.stages()[0].name}: reads group {source}'s frames (-from {source}): "
               f"process i reads the track group {source}'s process i writes, one period "
               f"behind its writer"] if source is not None else [])]


def sizing(args, local=None) -> tuple[int, Fraction]:
    """Bytes and ns per frame: from -frame/-pixfmt and -fps where given (sizeKB and bwMBs then
    0), else from sizeKB and bwMBs. ValueError, naming the option, when they do not fit."""
    size_kb, bw = args[2:4]
    frame, pixfmt, fps = (getattr(local, n, None) for n in ("frame", "pixfmt", "fps"))
    if frame or pixfmt:
        if not (frame and pixfmt):
            raise ValueError("-frame WxH and -pixfmt go together: give both")
        units = f"-frame {frame[0]}x{frame[1]} -pixfmt {pixfmt}"
        if size_kb:
            raise ValueError(f"sizeKB {size_kb} and {units} both set the frame size: "
                             f"give sizeKB 0")
        try:
            size = frame_bytes(pixfmt, *frame)
        except ValueError as e:
            raise ValueError(f"-frame {frame[0]}x{frame[1]}: {e}") from None
    elif not size_kb:
        raise ValueError("sizeKB 0 needs -frame WxH and -pixfmt")
    else:
        size = size_kb * KB
    if fps:
        if bw:
            raise ValueError(f"bwMBs {bw:g} and -fps {fps} both set the rate: give bwMBs 0")
        return size, NS_PER_S / rate(fps)
    if not bw:
        raise ValueError("bwMBs 0 needs -fps")
    return size, Fraction(size * NS_PER_S) / (decimal(bw) * MB)


def decimal(x: float) -> Fraction:
    """A parsed argument as the decimal the user typed (0.05, not the binary float near it)."""
    return Fraction(str(x))


class Pacer:
    """Release times of frames from an absolute start, exact: start + floor(k x period)."""
    __slots__ = ("start", "num", "den")

    def __init__(self, start: int, period: Fraction):
        self.start, self.num, self.den = start, period.numerator, period.denominator

    def release(self, k: int) -> int:
        return self.start + k * self.num // self.den
