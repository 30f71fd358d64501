"""The file tests' fast path on io_uring: plain transfers driven by the engine, no lane each.

A plain transfer is one I/O (not -rmw, no -extraRead*, no cache drop) and its test has no -T.
FileTest.setup chooses this path for such a test when its engine has `batches` (io_uring);
everything else runs as lanes (FileTest.lane). The test hands the engine `depth` Slots instead
of a coroutine each: the engine's completion reader calls completed(slot, res, t, at) for every
completion of a batch, which records it (FileTest.recorded, with Meter.record's common case
inline: the latency stored in the Summary's preallocated batch, the count and the shared
counter, for every count below Meter.due(); a due sample, a full batch, the last measured and
a mixed test's record_rw go through the Meter) and at once claims the next transfer number
(FileTest.claim, in order: the measured transfers stay consecutive and exact under -n/-i, -t,
-ramp, -slow and the stop flag), looks up its file, place and direction in the layout's block
lists, stamps a write's buffer and prepares the slot's SQE. The engine submits what a batch
prepared together once the batch is answered, as it does for lanes: no coroutine switch, no
generator, no per-transfer submit call. A failed or short transfer ends the test naming its
file and place (FileTest.failed); each slot's last transfer is kept for the data check
(FileTest.last), when the slot stops.

Timer: a transfer's latency runs from the clock read just before the io_uring_enter that
submits it (the engine's, slot.t0) to the one clock read of the completion batch that returned
it, as fio's clat runs from issue to completion. The transfers prepared while a batch was
answered are submitted by one io_uring_enter and share its clock read, whichever test prepared
them (O_DIRECT ones: in groups, where set-up's calibrate() found that faster); a transfer alone
in its batch is submitted at once, after a clock read of its own.
"""
from __future__ import annotations

import asyncio
import os

from .. import meter as meters
from . import layout, uring
from .engine_api import now, short
from .layout import BLOCK, Cursor

CALIBRATION_FROM = BLOCK << 12     # calibrate() reads a test's places from its transfer this far on

NOTE = "I/O path = the engine's batches (plain transfers, no lane each)"


async def drive(test) -> None:
    """Run a FileTest's transfers on its engine's slots until every slot has stopped."""
    EXTRA, MEASURED, SHIFT, STOP = meters.EXTRA, meters.MEASURED, layout.SHIFT, meters.STOP
    engine = test.engine
    finished = asyncio.get_running_loop().create_future()
    take, decide, record, failed, ended = test.take, test.decide, test.record, test.failed, \
        test.ended
    meter, halt = test.meter, test.stop
    lat, live = meter.lat, meter.live
    lists, fds, last, mixed, stamps = test.at.lists, test.fds, test.last, test.mixed, test.writes
    gear = [test.lane_buffers(j) for j in range(test.depth)]
    stampers = [g[2] for g in gear]
    touches = [g[3] for g in gear]
    touching = any(touch is not None for touch in touches)
    extras = [0] * test.depth
    left = test.depth
    base, files, offsets, writes = -BLOCK, [], [], []      # the block of transfer numbers
                                                            # from base (claims only grow)
    due = 0 if mixed else meter.due()     # counts below it recorded inline (Meter.record's
                                          # common case: no sample, the batch not full)

    def completed(slot, res: int, t: int, at: int) -> tuple[bool, int, int] | None:
        """The engine's reader: slot's transfer completed (res: the kernel's result) in the
        batch whose clock read is t; record it, then claim the slot's next transfer at time `at`
        (t, or later where the engine gave the loop a turn first) and return it, (write, fd,
        offset), for the engine to prepare (None: the slot ends)."""
        nonlocal base, files, offsets, writes, due
        try:
            if res != slot.want:
                raise OSError(-res, os.strerror(-res)) if res < 0 else \
                    short(slot.write, slot.what, res, slot.want)
            kind = slot.kind
            if kind == MEASURED:                  # FileTest.recorded, whose t never falls here
                test.t_last = t
                n = meter.count + 1
                if n < due:                       # Meter.record, inline
                    i = lat.held
                    lat.batch[i], lat.held, meter.count = t - slot.t0, i + 1, n
                    live[0] = n
                else:
                    n = record(t - slot.t0, t, slot.write) if mixed else record(t - slot.t0, t)
                    due = 0 if mixed else meter.due()
                    if n == meter.total:
                        test.finish(t)
            elif kind == EXTRA:
                extras[slot.j] += 1
            if touching and kind != STOP and not slot.write:   # STOP: not a transfer (start())
                touches[slot.j].sum()             # the processor reads the data
            k = take()                            # FileTest.claim, its first cases inline
            if (k < test.until or k < test.upto and at < test.before) and not halt[0]:
                kind = MEASURED                   # (a failed test's until and upto are 0)
            else:
                kind = decide(k)
                due = min(due, meter.total)       # a claim refused under -t lowers the count
            if kind == STOP:
                last[slot.j] = slot.k             # the last transfer it made (-1: none)
                stop(slot, k)
                return None
            slot.k = k
            i = k - base
            if i >= BLOCK:                        # past the block: k's
                base = k >> SHIFT << SHIFT
                files, offsets, writes = lists(k >> SHIFT)
                i = k - base
            slot.f = f = files[i]
            offset, write = offsets[i], writes[i]
            if write and stamps:
                stampers[slot.j](f, offset)
            slot.kind = kind                      # the engine prepares it next and sets
            return write, fds[f], offset          # slot.t0 when it submits it
        except Exception as e:  # noqa: BLE001 - the first failure ends every slot, run raises
            failed(e, slot.f, slot.what, slot.write)
            stop(slot, slot.k)
        return None

    def stop(slot, k: int) -> None:
        """The slot ends at its transfer k (not made); the last slot to end ends drive()."""
        nonlocal left
        ended(k, extras[slot.j])
        left -= 1
        if not left:
            finished.set_result(None)

    r, w = test.slot["read"], test.slot["write"]
    slots = engine.slots(completed, test.ids[r:r + test.depth], test.ids[w:w + test.depth],
                         test.direct)
    for slot in slots:                 # start: as if a non-transfer (STOP) had completed
        slot.kind = STOP
    await engine.hold(slots, finished)


async def calibrate(tests: list, stopped) -> list:
    """Set-up, untimed: the loop's batched O_DIRECT file tests on io_uring, when more than one of
    their transfers can be in flight, choose together how the engine submits them
    (UringEngine.calibrate: each test's own places in its own order, read from CALIBRATION_FROM
    on, far from its first transfers; nothing is written); each one's info says what was
    chosen, or why nothing was. Returns the tests whose info says so (none when stopped or with
    nothing to choose from); a read that failed raises uring.Misread."""
    chosen = [test for test in tests if getattr(test, "batched", False)   # FileTests only
              and test.direct and isinstance(test.engine, uring.UringEngine)
              and all(held(fd, test.size) for fd in test.fds)]   # (one to read in each file)
    if sum(test.depth for test in chosen) < 2:
        return []
    sources = [uring.Source(test, test.size, test.depth, test.fds, test.paths, place(test))
               for test in chosen]
    engine, began = chosen[0].engine, now()    # the loop's one ring
    best, why = await engine.calibrate(sources, stopped)
    took = f"set-up's {(now() - began) / 1e6:.0f} ms"
    if best:
        rates = ", ".join(f"{uring.submits(g)} {per_s(rate)}" for g, rate in best.items())
        tie = "" if best.get(engine.group) == max(best.values()) else \
            " (faster than whole batches in every round)" if engine.group else \
            " (the default: no other way was faster in every round)"
        line = f"O_DIRECT submits = {uring.submits(engine.group)}{tie}, {uring.TRIALS} " \
               f"{rates} reads/s ({took})"
    elif why:
        line = f"O_DIRECT submits = {uring.submits(engine.group)} (not calibrated: {why}; {took})"
    else:
        return []
    for test in chosen:
        test.info += "\n" + line
    return chosen


def per_s(rate: float) -> str:
    """A calibration rate, in thousands from 10000 on."""
    return f"{rate / 1000:.1f}k" if rate >= 10_000 else f"{rate:.0f}"


def held(fd: int, size: int) -> int:
    """The bytes of whole transfers of `size` a file holds now."""
    return os.fstat(fd).st_size // size * size


def place(test):
    """The (file index, offset) of a test's transfer CALIBRATION_FROM + k, as its layout has it
    (its first block made now, not in the first trial, whose time it would take), kept
    within what its file holds now (a transfer at least): a test that writes extends a shorter
    file as it runs, and calibrating it read past the end."""
    cursor = Cursor(test.layout)
    cursor.lists(CALIBRATION_FROM // BLOCK)
    ends = [held(fd, test.size) for fd in test.fds]

    def at(k: int) -> tuple[int, int]:
        f, offset, _ = cursor(CALIBRATION_FROM + k)
        return f, offset % ends[f]
    return at
