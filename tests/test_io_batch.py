"""io_uring's batches: a plain file test's transfers driven by the engine, no lane each
(torque_async/io/batch.py): exact counts, data checks, errors, -slow, and who takes which path."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torque_async.io import batch, engine as engines, filetest as filetests, ring as rings, uring
from torque_async.results import MAX_SAMPLES
from torque_async.stats import merge

from conftest import ENV, needs_uring, run, table

pytestmark = needs_uring
from test_io_run import no_scratch_left, pattern_file

KB = 1024


def engine_log(monkeypatch, change=lambda write, fd, offset: (write, fd, offset),
               seen=lambda slot, t: None, cls=uring.UringEngine) -> list:
    """Every transfer the batches hand the engine (`cls`), (write, offset), in the order
    claimed; `change` may alter each before the engine prepares it; `seen(slot, t)` is told of
    each completion before the test takes it. Only the tests' own slots (batch.drive's) are
    logged, not set-up's calibration's."""
    log, real = [], cls.slots

    def slots(self, done, reads, writes, direct=False):
        if not done.__qualname__.startswith("drive."):
            return real(self, done, reads, writes, direct)

        def logged(slot, res, t, at):
            seen(slot, t)
            place = done(slot, res, t, at)
            if place is None:
                return None
            log.append((place[0], place[2]))
            return change(*place)
        return real(self, logged, reads, writes, direct)
    monkeypatch.setattr(cls, "slots", slots)
    return log


def counted_exactly(rec, total: int) -> None:
    assert rec.transfers == rec.lat_count == sum(n for _, n in rec.hist) == total
    assert 0 < rec.lat_min <= rec.lat_sum // rec.lat_count <= rec.lat_max


@pytest.mark.parametrize("argv", [[], ["-ramp", "0.05"], ["-p", "2", "-sample", "0"]])
def test_batches_make_exactly_the_measured_transfers_and_check_each_slot(key, monkeypatch,
                                                                          argv):
    pattern_file(Path("cached.dat"), 256 * KB)
    log = engine_log(monkeypatch)
    out = run(key, "-engine", "uring", "-fbc", "-f", "cached.dat", "-f", "cached.dat",
              "-n", "700", "-i", "3", "-KB", "4", "-mfileKB", "256", *argv, "-aio", "8")
    assert not out.failures                        # check(): every slot's last read is the file's
    for rec in out.records:
        assert batch.NOTE in rec.info
        counted_exactly(rec, 2100)
        assert "-sample" not in argv or \
            [k for _, k in rec.samples] == list(range(1, MAX_SAMPLES + 1))
    # every transfer went through the batches: measured, ramp, one per slot claimed at the end
    made = sum(r.transfers + r.ramp_transfers + r.extra_transfers for r in out.records)
    assert len(log) == made
    assert "-ramp" not in argv or out.records[0].ramp_transfers > 0


@pytest.mark.parametrize("argv", [["-n", "700"], ["-n", "700", "-ramp", "0.05"],
                                  ["-p", "2", "-n", "700", "-sample", "0"]])
def test_sync_batches_make_exactly_the_measured_transfers_and_check_them(key, monkeypatch,
                                                                         argv):
    """-engine sync (what auto gives a lone depth-1 test) drives plain transfers through the
    same batches: exact counts, -ramp, samples and the data check as on io_uring."""
    pattern_file(Path("cached.dat"), 256 * KB)
    log = engine_log(monkeypatch, cls=engines.SyncEngine)
    out = run(key, "-engine", "sync", "-fbc", "-f", "cached.dat", "-f", "cached.dat",
              "-i", "3", "-KB", "4", "-mfileKB", "256", *argv, "-rand")
    assert not out.failures
    for rec in out.records:
        assert batch.NOTE in rec.info and "I/O engine = sync" in rec.info
        counted_exactly(rec, 2100)
        assert "-sample" not in argv or \
            [k for _, k in rec.samples] == list(range(1, MAX_SAMPLES + 1))
    made = sum(r.transfers + r.ramp_transfers + r.extra_transfers for r in out.records)
    assert len(log) == made                        # one slot a test: no claim left at the end
    assert "-ramp" not in argv or out.records[0].ramp_transfers > 0


def test_the_transfers_submitted_together_share_their_start_whichever_test_made_them(
        key, monkeypatch):
    """A transfer starts at the clock read just before the io_uring_enter that submits it: two
    tests' cached reads answered in one batch are submitted together and start together (a
    start read per transfer as it was prepared favoured the test whose slots came later)."""
    pattern_file(Path("cached.dat"), 256 * KB)
    submits, starts, real = [], [], rings.Ring.submit

    def submit(ring, wait=0):
        submits.append(ring)
        return real(ring, wait)
    monkeypatch.setattr(rings.Ring, "submit", submit)
    engine_log(monkeypatch, seen=lambda slot, t: t and starts.append((slot.t0, slot.done)))
    out = run(key, "-engine", "uring", "-fbc", "-f", "cached.dat", "-f", "cached.dat",
              "-n", "700", "-i", "3", "-KB", "4", "-mfileKB", "256", "-p", "2", "-aio", "8")
    assert not out.failures
    assert len(submits) < len(starts) // 4         # the cached reads went in batches
    tests = {}
    for t0, test in starts:
        tests.setdefault(t0, set()).add(test)
    assert len(tests) <= len(submits)              # one start per submit, not per transfer
    assert any(len(both) == 2 for both in tests.values())


@pytest.mark.parametrize("engine,depth", [("uring", 16), ("sync", 1)])
def test_under_t_the_latencies_are_the_transfers_counted(key, monkeypatch, engine, depth):
    """And the claims before the deadline are decided inline from the batch's clock read (the
    Meter was asked, a call chain of six, for every transfer: -t ran 10-20% slower than -n)."""
    asked, real = [], filetests.FileTest.decide

    def decide(test, k):
        asked.append(k)
        return real(test, k)
    monkeypatch.setattr(filetests.FileTest, "decide", decide)
    pattern_file(Path("cached.dat"), 256 * KB)
    out = run(key, "-engine", engine, "-fbc", "-f", "cached.dat", "-t", "0.3", "-KB", "4",
              "-mfileKB", "256", "-aio", str(depth))
    assert not out.failures
    (rec,) = out.records
    assert batch.NOTE in rec.info and rec.transfers > 1000
    counted_exactly(rec, rec.transfers)
    assert rec.finish - rec.start >= 0.29e9                # measured up to the deadline
    assert len(asked) <= 3 * depth                         # the start's and the end's claims


def test_mixed_reads_and_writes_are_counted_apart_as_claimed(key, monkeypatch):
    log = engine_log(monkeypatch)
    out = run(key, "-engine", "uring", "-n", "600", "-i", "1", "-KB", "4", "-mfileKB", "128",
              "-percR", "60", "-aio", "8")
    assert not out.failures                        # the scratch file holds every stamp
    (rec,) = out.records
    assert batch.NOTE in rec.info
    counted_exactly(rec, 600)
    reads, writes = rec.rw
    assert merge(rec.rw) == rec.lat
    assert writes.count == sum(w for w, _ in log[:600]) and reads.count == 600 - writes.count
    assert 0 < writes.count < 600
    assert no_scratch_left()


def test_the_tests_starting_together_submit_their_first_transfers_together(key, monkeypatch):
    """Each test submitted its first transfers as it started, so the first test's waited for
    every later test's start (-p 64: 34-35 ms): one submit for all, one start time."""
    pattern_file(Path("cached.dat"), 256 * KB)
    first = {}
    engine_log(monkeypatch, seen=lambda slot, t: t and first.setdefault(id(slot), slot.t0))
    files = [x for _ in range(8) for x in ("-f", "cached.dat")]
    out = run(key, "-engine", "uring", "-fbc", *files, "-n", "64", "-i", "1", "-KB", "4",
              "-mfileKB", "256", "-p", "8", "-rand")
    assert not out.failures and len(out.records) == 8
    assert len(first) == 8 and len(set(first.values())) == 1 and 0 not in first.values()


def test_a_planted_wrong_offset_is_caught_by_the_data_check(key, monkeypatch):
    pattern_file(Path("pattern.dat"), 256 * KB)
    engine_log(monkeypatch, lambda write, fd, offset: (write, fd, max(offset - 4096, 0)))
    out = run(key, "-engine", "uring", "-fbc", "-f", "pattern.dat", "-n", "64", "-i", "1",
              "-KB", "4", "-mfileKB", "256", "-aio", "4")
    assert len(out.failures) == 1 and "read 4096 bytes at byte" in out.failures[0]


def test_a_failed_transfer_in_a_batch_ends_the_test_naming_its_file_and_place(key,
                                                                              monkeypatch):
    pattern_file(Path("cached.dat"), 256 * KB)
    bad = []

    def failing(write, fd, offset):
        if len(log) == 40:                         # one transfer of a batch: a closed descriptor
            bad.append(offset)
            fd = 1 << 20
        return write, fd, offset
    log = engine_log(monkeypatch, failing)
    out = run(key, "-engine", "uring", "-fbc", "-f", "cached.dat", "-n", "5000", "-i", "1",
              "-KB", "4", "-mfileKB", "256", "-aio", "8")
    (failure,) = out.failures
    assert f"read of 4096 bytes at byte {bad[0]} of cached.dat: Bad file descriptor" in failure
    assert len(log) < 5000                         # it ended the test


@pytest.mark.parametrize("engine,cls", [("uring", uring.UringEngine),
                                        ("sync", engines.SyncEngine)])
def test_a_short_transfer_ends_the_test_naming_its_place_once(key, monkeypatch, engine, cls):
    """A read past the end returns 0 bytes: the failure names the file and the place, once
    (the engine's own text said 'at byte' again)."""
    pattern_file(Path("cached.dat"), 256 * KB)
    engine_log(monkeypatch, lambda write, fd, offset: (write, fd, 256 * KB), cls=cls)
    out = run(key, "-engine", engine, "-fbc", "-f", "cached.dat", "-n", "64", "-i", "1",
              "-KB", "4", "-mfileKB", "256", "-aio", "1")
    (failure,) = out.failures
    assert failure.endswith(f"read of 4096 bytes at byte {256 * KB} of cached.dat: only read 0 "
                            f"of 4096 bytes (past the end of the file?)")
    assert failure.count("at byte") == 1


def test_slow_keeps_the_batches_going_and_counts_the_extra_transfers(key):
    out = run(key, "-slow", "-engine", "uring", "-n", "16", "-i", "1", "-KB", "4",
              "-mfileKB", "64", "-percR", "50", "-aio", "4",
              "-memStreams", "r", "1", "64", "10", "0", "0.5", "1")
    assert not out.failures                        # the check accounts for every write made
    aio, _ = out.records
    assert batch.NOTE in aio.info
    counted_exactly(aio, 16)
    assert aio.extra_transfers > 0
    assert no_scratch_left()


@pytest.mark.parametrize("argv", [["-rmw"], ["-T", "100", "-aio", "2"],
                                  ["-p", "2", "-extraReadKB", "4", "-r"]])
def test_what_is_not_plain_runs_as_lanes(key, monkeypatch, argv):
    log = engine_log(monkeypatch)
    out = run(key, "-engine", "uring", "-n", "20", "-i", "1", "-KB", "4", *argv)
    assert not out.failures
    for rec in out.records:
        assert batch.NOTE not in rec.info and rec.transfers == rec.lat_count == 20
    assert log == []                               # no transfer through the batches


def test_completions_left_for_the_loop_s_next_turn_are_answered(key):
    """At most BATCH completions are answered at once and the loop gets its turn after one
    batch (YIELD_NS 0 here): the rest, for which the ring's fd stays readable, are answered at
    the loop's next turn; left unanswered, the last transfers never completed and the run hung."""
    pattern_file(Path("cached.dat"), 256 * KB)
    code = ("import sys; from torque_async.io import uring; uring.BATCH, uring.YIELD_NS = 3, 0; "
            "from torque_async.launch import main; sys.argv[0] = 'torque-async'; main()")
    r = subprocess.run([sys.executable, "-c", code, "-smkey", key, "-nh", "-engine", "uring",
                        "-fbc", "-f", "cached.dat", "-n", "500", "-i", "1", "-KB", "4",
                        "-mfileKB", "256", "-aio", "16"],
                       capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stderr
    assert table(r.stdout)[0][4] == "500"                       # Xfers: every one answered
