"""The data a stream moves, so that tests (and check()) can see that it really flows.

A frame starts with a 16-byte header of two 64-bit words, (tag, number): source frames put in
a track before the start carry (SOURCE | track, slot); every frame a write sub-stream writes
carries (WRITTEN | track, k). A write makes its frame from its inputs:

    inputs  write k                                    labels
    none    the track's camera pattern                 w, wr
    one     the frame read, inverted in place          rw, rwr (the change written back)
    two     the two frames read, XORed together        rrw (two cameras combined)

Each read checks the header it got (a read-back must find the frame written for the same k,
a source read the source frame or what the in-place write of the pass before left), so a
dependency or slot-reuse gate that failed is caught at the transfer. check() then compares
whole frames (header and body) of the last frames written against what they must hold. A frame
dropped (-dropLate) was never written: its slot still holds the last frame written there.
A wired stream's first read (-from) gets its writer's frames, not source frames (wire.py
checks them): its track is no source, and a write made from it is made from the writer's frame,
or, when the writer lapped that read, from whichever later frame it found (unknown: unchecked).
"""
from __future__ import annotations

import numpy as np

from torque_async.kind_api.api import TestError
from torque_async.kind_api.buffers import Buffers

from .schedule import READ, Geometry, Stage

SOURCE = 0x5352_4300_0000_0000      # "SRC"
WRITTEN = 0x5752_4900_0000_0000     # "WRI"
HEADER = 16                         # bytes
CHECK_FRAMES = 16                   # frames check() compares per written track


def stamp(frame: np.ndarray, tag: int, number: int) -> None:
    header = frame[:HEADER].view(np.uint64)
    header[0], header[1] = tag, number


def header_of(frame: np.ndarray) -> tuple[int, int]:
    tag, number = frame[:HEADER].view(np.uint64)
    return int(tag), int(number)


class Frames:
    """Frame buffers of one stream's sub-streams and the rules above."""

    def __init__(self, geometry: Geometry, stages: tuple[Stage, ...], buffers: Buffers,
                 rng: np.random.Generator, sourced: bool, wired=None):
        size = geometry.size
        self.wired = wired          # -from: the writer's Frames, which sub-stream 0 reads
        self.slots, self.stages = geometry.slots, stages
        self.patterns = [rng.integers(0, 256, size, np.uint8) for _ in range(geometry.tracks)]
        self.sourced = sourced      # source tracks hold our source frames (not a user's file)
        self.writer = {s.op.track: s.index for s in stages if s.op.kind != READ}
        self.dropped: list[set[int]] = [set() for _ in stages]     # frames each one skipped
        self.lapped: set[int] = set()   # frames whose wired read found a later frame
        self.rings: list[list[np.ndarray]] = []     # the frames each sub-stream moves in turn
        for s in stages:
            if s.op.kind != READ and len(s.op.deps) == 1:
                ring = self.rings[s.op.deps[0]]         # an in-place write: its input's frames
            else:                                       # a read keeps lookahead + 1 frames
                depth = geometry.lookahead + 1 if s.op.kind == READ and s.consumers else 1
                ring = [buffers.new(size) for _ in range(depth)]
                for frame in ring:
                    frame.fill(0)               # touched in set-up, as the tracks are
                if s.op.kind != READ and not s.op.deps:
                    ring[0][:] = self.patterns[s.op.track]      # the camera's picture
            self.rings.append(ring)

    def source_tracks(self) -> list[int]:
        """Tracks read before anything writes them: filled with source frames in set-up."""
        return sorted({s.op.track for s in self.stages if s.op.kind == READ and not s.op.deps
                       and not (self.wired and s.index == 0)})

    def source_frame(self, frame: np.ndarray, track: int, slot: int) -> None:
        """Frame `slot` of source track `track`, made in `frame`."""
        np.copyto(frame, self.patterns[track])
        stamp(frame, SOURCE | track, slot)

    def prepare(self, stage: Stage, k: int) -> np.ndarray:
        """The buffer transfer k of `stage` moves; for a write, its frame made from its inputs."""
        ring = self.rings[stage.index]
        frame = ring[k % len(ring)]
        if stage.op.kind == READ:
            return frame
        deps = stage.op.deps
        if len(deps) == 1:
            np.invert(frame, out=frame)
        elif len(deps) == 2:
            a, b = (self.rings[d][k % len(self.rings[d])] for d in deps)
            np.bitwise_xor(a, b, out=frame)
        stamp(frame, WRITTEN | stage.op.track, k)
        return frame

    def expected(self, stage: Stage, k: int) -> tuple[int, int] | None:
        """The header read k of `stage` must find (None: a user's data, unknown)."""
        track, slot = stage.op.track, k % self.slots
        if stage.op.deps:
            return WRITTEN | track, k
        if track in self.writer:
            before = self.last_written(self.writer[track], k - self.slots)
            if before >= 0:
                return WRITTEN | track, before
        return (SOURCE | track, slot) if self.sourced else None

    def last_written(self, writer: int, k: int) -> int:
        """The last frame at most k of its slot that `writer` did not drop (-1: none)."""
        while k >= 0 and k in self.dropped[writer]:
            k -= self.slots
        return k

    def received(self, stage: Stage, k: int, frame: np.ndarray) -> None:
        want = self.expected(stage, k)
        if want is not None and header_of(frame) != want:
            got = header_of(frame)
            raise TestError(f"stream {stage.name}: transfer {k} (slot {k % self.slots}) found "
                            f"frame {got[0]:#x}/{got[1]} instead of {want[0]:#x}/{want[1]}")

    def body(self, writer: Stage, k: int, inputs: list[np.ndarray]) -> np.ndarray | None:
        """What frame k of `writer` must hold, given the source frames of its slot (None when
        an input is a user's data, or the wired read of frame k was lapped: the frame was made
        from whichever frame the read found)."""
        deps = writer.op.deps
        if k in self.lapped:
            return None
        if not deps:
            frame = self.patterns[writer.op.track].copy()
        elif len(deps) == 2:
            frame = inputs[0] ^ inputs[1]
        elif self.wired:                               # in place on the writer's frame k
            frame = self.wired.output(k)
            if frame is None:
                return None
            np.invert(frame, out=frame)
        elif self.sourced:
            passes = sum(j not in self.dropped[writer.index]       # in-place writes to this
                         for j in range(k % self.slots, k + 1, self.slots))   # slot so far
            frame = np.empty_like(self.patterns[writer.op.track])
            self.source_frame(frame, writer.op.track, k % self.slots)
            if passes % 2:
                np.invert(frame, out=frame)
        else:
            return None
        stamp(frame, WRITTEN | writer.op.track, k)
        return frame

    def output(self, k: int) -> np.ndarray | None:
        """Frame k of this stream's write, where the frames alone say it (a stream wired to it
        checks what it made of it); None where it needs what a track held."""
        writer = next(s for s in self.stages if s.op.kind != READ)
        return None if len(writer.op.deps) == 2 else self.body(writer, k, [])
