"""How io_uring submits O_DIRECT transfers (torque_async/io/uring.py): in groups while a batch of
completions is answered, the group chosen by set-up's calibration (UringEngine.calibrate), which
reads the tests' files and writes nothing."""
from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from torque_async.io import batch, ring as rings, uring

from conftest import needs_uring, run
from test_io_run import direct_allowed, pattern_file

pytestmark = needs_uring
KB = 1024
needs_direct = pytest.mark.skipif(not direct_allowed(os.environ["TMPDIR"]),
                                  reason="the suite's directory refuses O_DIRECT")


def submitted(monkeypatch) -> list[int]:
    """How many SQEs each io_uring_enter that submits hands the kernel, in order."""
    sizes, real = [], rings.Ring.submit

    def submit(ring, wait=0):
        n = (ring.tail - ring.u32[ring.sq_head]) & rings.WRAP
        if n:
            sizes.append(n)
        return real(ring, wait)
    monkeypatch.setattr(rings.Ring, "submit", submit)
    return sizes


@pytest.mark.parametrize("group,expected", [(0, [8]), (2, [2, 3, 3]), (4, [5, 3])])
def test_o_direct_transfers_go_in_groups_while_the_batch_is_answered(monkeypatch, group,
                                                                    expected):
    """A batch of 8 completions, 6 of them O_DIRECT slots': the O_DIRECT transfers are submitted
    `group` at a time as they are prepared (the others with whichever submit comes next), and
    each slot starts at the clock read of its own submit."""
    pattern_file(Path("f.dat"), 64 * KB)
    fd = os.open("f.dat", os.O_RDONLY)
    direct = [True, True, False, True, True, False, True, True]

    async def main():
        engine = uring.UringEngine.shared()
        engine.group = group
        ids = engine.register([memoryview(bytearray(4 * KB)) for _ in direct])
        left, finished = [len(direct)], asyncio.get_running_loop().create_future()

        def done(slot, res, t, at):
            if t == 0:                                     # the batch below
                return False, fd, slot.j * 4 * KB
            assert res == 4 * KB
            left[0] -= 1
            if not left[0]:
                finished.set_result(None)
            return None
        slots = [slot for d, i in zip(direct, ids) for slot in engine.slots(done, [i], [i], d)]
        for j, slot in enumerate(slots):
            slot.j = j
        sizes.clear()
        engine.serve(engine.starts(slots), 0, True)
        counts = list(sizes)
        await finished
        await engine.forget(ids)
        engine.close()
        return counts, [slot.t0 for slot in slots]
    sizes = submitted(monkeypatch)
    try:
        counts, starts = asyncio.run(main())
    finally:
        os.close(fd)
    assert counts == expected
    assert 0 not in starts and len(set(starts)) == len(expected)
    assert starts == sorted(starts)                     # in the order they were submitted


@pytest.mark.parametrize("rates,best,group", [
    ({0: [10, 12, 11], 2: [40, 45, 42], 1: [44, 38, 40]}, {0: 12, 2: 45, 1: 44}, 2),
    ({0: [10, 12, 11], 2: [30, 45, 20], 1: [44, 10, 40]}, {0: 12, 2: 45, 1: 44}, 2),
    ({0: [6450, 6100, 5900], 2: [6000, 14000, 6200], 1: [14400, 9000, 6300]},
     {0: 6450, 2: 14000, 1: 14400}, 1),
    ({0: [100, 60, 30], 2: [90, 65, 31], 1: [120, 70, 29]}, {0: 100, 2: 90, 1: 120}, 0),
    ({0: [19502, 19510, 19505], 2: [19514, 19500, 19508], 1: [19509, 19511, 19503]},
     {0: 19510, 2: 19514, 1: 19511}, 0)])
def test_calibration_keeps_the_group_that_beat_whole_batches_in_every_round(rates, best, group):
    """Every group is tried in turn, CALIBRATION_ROUNDS times; the best trial of each is
    reported; a group as large as the reads in flight is not tried (it is the batch's). The
    group kept is the best of those whose trial beat whole batches' in the same round, every
    round, however much its own trials spread (the disk drifts between rounds: 6-14k reads/s
    in one slow hour had kept whole batches at 6.4k beside 1 at a time at 14.4k); a best trial
    that lost a round, or none that wins, keeps whole batches."""
    tried = []

    async def trial(self, sources, ids, claims, stopped):
        tried.append(self.group)
        return 1000, rates[self.group][tried.count(self.group) - 1]

    async def main():
        engine = uring.UringEngine.shared()
        engine.trial = trial.__get__(engine)
        source = uring.Source(None, 4 * KB, 4, [0], ["f"], lambda k: (0, 0))
        best = await engine.calibrate([source], lambda: False)
        group = engine.group
        engine.close()
        return best, group
    said, chose = asyncio.run(main())
    assert tried == [0, 2, 1] * uring.CALIBRATION_ROUNDS               # 4 = the depth: left out
    assert said == (best, "") and chose == group


@pytest.mark.parametrize("depth,size,completed,why", [
    (8, 4 << 20, 1000, "32 MB in flight, over the 16 MB a calibration reads at once"),
    (64, 4 * KB, 127, "a 20 ms trial completed 127 reads, under 2 times the 64 in flight")])
def test_no_choice_is_made_where_a_trial_cannot_measure_one(depth, size, completed, why):
    """Too many bytes in flight (each trial waits for them all: 256 MiB of 64 MiB reads took
    6.5 s of set-up) or too few completions in a trial (4096 reads in flight completed none in
    20 ms, and one stray trial chose a way 25-35% slower): whole batches, and why."""
    tried = []

    async def trial(self, sources, ids, claims, stopped):
        tried.append(self.group)
        return completed, 1e6

    async def main():
        engine = uring.UringEngine.shared()
        engine.trial = trial.__get__(engine)
        source = uring.Source(None, size, depth, [0], ["f"], lambda k: (0, 0))
        said = await engine.calibrate([source], lambda: False)
        group = engine.group
        engine.close()
        return said, group
    said, group = asyncio.run(main())
    assert said == ({}, why) and group == 0
    assert len(tried) == (0 if size > KB * KB else 1)


def test_a_stopped_calibration_keeps_the_batch_and_gives_back_what_it_took(monkeypatch):
    """A stop during the calibration ends it after the trial in flight: no group is chosen, and
    its buffers and SQEs are given back."""
    pattern_file(Path("f.dat"), 64 * KB)
    fd = os.open("f.dat", os.O_RDONLY)

    async def main():
        engine = uring.UringEngine.shared()
        free, trials = len(engine.ring.free), []
        real = engine.trial

        async def trial(*args):
            trials.append(await real(*args))
            return trials[-1]
        engine.trial = trial
        source = uring.Source(None, 4 * KB, 8, [fd], ["f.dat"], lambda k: (0, k % 16 * 4 * KB))
        best = await engine.calibrate([source], lambda: len(trials) == 2)
        state = best, engine.group, len(trials), engine.iovecs, len(engine.ring.free) == free
        engine.close()
        return state
    try:
        best, group, trials, iovecs, given_back = asyncio.run(main())
    finally:
        os.close(fd)
    assert (best, group, trials, iovecs, given_back) == (({}, ""), 0, 2, {}, True)


def test_a_trial_cancelled_while_its_reads_complete_ends_without_an_error(monkeypatch):
    """A stop cancels set-up while a trial's last reads are in flight: they complete before
    hold() has taken the slots' done away, and the last one found the trial's future cancelled
    (InvalidStateError in the engine's reader, the rest of its batch unanswered)."""
    pattern_file(Path("f.dat"), 64 * KB)
    fd = os.open("f.dat", os.O_RDONLY)
    errors = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(
            context))
        engine = uring.UringEngine.shared()

        async def hold(slots, finished):       # the cancellation, before hold() sees it
            engine.start(slots)
            finished.cancel()
            while engine.waiting:               # the reads run to the trial's end
                await asyncio.sleep(0.001)
            await finished
        engine.hold = hold
        source = uring.Source(None, 4 * KB, 8, [fd], ["f.dat"], lambda k: (0, k % 16 * 4 * KB))
        with pytest.raises(asyncio.CancelledError):
            await engine.trial([source], dict(zip([4 * KB], engine.register(
                [memoryview(bytearray(4 * KB))]))), [iter(range(10 ** 9))], lambda: False)
        engine.close()
    try:
        asyncio.run(main())
    finally:
        os.close(fd)
    assert errors == []


@needs_direct
@pytest.mark.parametrize("writes", [False, True])
def test_set_up_chooses_the_submits_of_o_direct_tests_and_leaves_their_data(key, writes):
    """-p 3 O_DIRECT tests on io_uring choose one group together, named in each one's info with
    every group's rate; the named file read is not changed, and a write test's data check (its
    buffers and its scratch file) still holds."""
    pattern_file(Path("f.dat"), 1024 * KB)
    before = hashlib.sha256(Path("f.dat").read_bytes()).digest()
    files = ["-percR", "0", "-mfileKB", "256"] if writes else \
        ["-f", "f.dat"] * 3 + ["-mfileKB", "1024"]
    out = run(key, "-engine", "uring", *files, "-p", "3", "-KB", "4", "-n", "200", "-i", "2",
              "-aio", "2")
    assert not out.failures
    lines = {line for rec in out.records for line in rec.info.splitlines()
             if line.startswith("O_DIRECT submits = ")}
    assert len(lines) == 1 and len(out.records) == 3
    (line,) = lines
    chosen = line.split(" = ")[1].split(",")[0].split(" (")[0]
    assert chosen in {uring.submits(g) for g in uring.GROUPS}
    if "(not calibrated: a " in line:          # a loaded machine's trial made too few reads:
        assert "reads, under" in line          # said so, the default kept
    else:
        rates, took = line.split(f", {uring.TRIALS} ")[1].split(" reads/s (set-up's ")
        took = took.removesuffix(" ms)")
        assert 0 < int(took) < 60_000
        assert [part.rsplit(" ", 1)[0] for part in rates.split(", ")] == \
            [uring.submits(g) for g in uring.GROUPS]                       # 6 in flight:
        for rec in out.records:                                    # every group tried
            assert rec.phase[1] - rec.phase[0] < int(took) * 1e6   # its own set-up, not the
                                                                   # loop's choosing (>= 240 ms)
    assert hashlib.sha256(Path("f.dat").read_bytes()).digest() == before
    for rec in out.records:
        assert rec.transfers == 400


@needs_direct
def test_a_calibration_read_that_fails_names_its_file_and_place(key, monkeypatch):
    """A read past the end (a place moved there) fails the test it read for, in one line that
    says it was in set-up."""
    pattern_file(Path("f.dat"), 64 * KB)
    real = batch.place

    def past_the_end(test):
        at = real(test)
        return lambda k: (at(k)[0], 1 << 30)
    monkeypatch.setattr(batch, "place", past_the_end)
    out = run(key, "-engine", "uring", "-f", "f.dat", "-f", "f.dat", "-p", "2", "-KB", "4",
              "-n", "100", "-i", "1", "-rand")
    (failure,), (other,) = out.failures, out.unfinished   # the other test stopped with the
    assert other.endswith("not started: the run was stopped")   # run: not a second failure
    assert {failure[:6], other[:6]} == {"test 0", "test 1"}
    assert "f.dat: calibrating the O_DIRECT submissions, a read at byte 1073741824: only read " \
        "0 of 4096 bytes (past the end of the file?)" in failure and "set-up: " in failure


@needs_direct
def test_the_calibration_reads_the_places_of_each_test_in_its_order(key, monkeypatch):
    """Sequential tests are calibrated on sequential places (the disk merges those), random ones
    on random ones: each read is its test's transfer CALIBRATION_FROM + k, in claim order."""
    pattern_file(Path("f.dat"), 1024 * KB)
    seen, real = {}, uring.UringEngine.trial

    async def trial(self, sources, ids, claims, stopped):
        for source in sources:
            seen.setdefault(id(source.owner), [source.place(k) for k in range(64)])
        return await real(self, sources, ids, claims, stopped)
    monkeypatch.setattr(uring.UringEngine, "trial", trial)
    out = run(key, "-engine", "uring", "-f", "f.dat", "-mfileKB", "1024", "-KB", "4",
              "-n", "256", "-i", "1", "-aio", "8", "-f", "f.dat", "-mfileKB", "1024", "-KB", "4",
              "-n", "256", "-i", "1", "-rand")
    assert not out.failures and len(seen) == 2
    seq, rand = seen.values()
    start = batch.CALIBRATION_FROM % 256
    assert seq == [(0, (start + k) % 256 * 4 * KB) for k in range(64)]
    assert len({offset for _, offset in rand}) > 48 and rand != sorted(rand)


@needs_direct
def test_a_test_that_writes_past_its_file_s_end_is_calibrated_within_it(key):
    """A write-only -aio on a file shorter than its places (it extends it as it runs): its
    calibration read past the end and failed the test at set-up, where -engine threads ran it."""
    for size, calibrated in ((1024 * KB, True), (4 * KB, False), (0, False)):   # (less than a
        pattern_file(Path("w.dat"), size)                    # transfer: nothing to read there)
        out = run(key, "-engine", "uring", "-f", "w.dat", "-KB", "64", "-n", "200", "-i", "1",
                  "-percR", "0", "-aio", "16")
        assert not out.failures and out.records[0].transfers == 200, size
        assert ("O_DIRECT submits = " in out.records[0].info) == calibrated
        assert Path("w.dat").stat().st_size > 1024 * KB
