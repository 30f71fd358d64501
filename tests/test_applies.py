"""Options the man page applies to every test, observed on the tests that run on the event loop
and in -sp: -affinityNumber pins the loop's thread, -sleepEnd holds a finished test open."""
from __future__ import annotations

import os
import time

import pytest

from torque_async import cmdline, validate
from torque_async.io.filetest import FileTest
from torque_async.results import PHASES

from conftest import run

NS = 1_000_000_000
SMALL_READ = ["-n", "4", "-i", "1", "-KB", "4", "-mfileKB", "64", "-r"]


def test_affinity_number_pins_the_event_loop_thread_for_the_test_and_only_then(key, monkeypatch):
    cpu = max(os.sched_getaffinity(0))
    seen = []
    original = FileTest.run

    async def recording(self, meter):
        seen.append(os.sched_getaffinity(0))
        await original(self, meter)
    monkeypatch.setattr(FileTest, "run", recording)
    before = os.sched_getaffinity(0)
    outcome = run(key, "-affinityNumber", str(cpu), *SMALL_READ)
    assert not outcome.failures and seen == [{cpu}]
    assert os.sched_getaffinity(0) == before            # given back after the run
    seen.clear()
    run(key, *SMALL_READ)
    assert seen == [before]                              # without it, nothing is pinned


@pytest.mark.parametrize("argv, message", [
    (["-p", "2", "-affinityNumberDiff", "0", *SMALL_READ], "coroutines on one event loop"),
    (["-affinityNumber", "0", *SMALL_READ, "-affinityNumber", "1", "-n", "2", "-KB", "4",
      "-mfileKB", "64", "-w"], "group 0 pins it to CPU 0, group 1 to CPU 1")])
def test_loop_groups_that_cannot_share_the_loop_thread_are_refused(argv, message):
    with pytest.raises(cmdline.UsageError, match=message):
        validate.check(cmdline.parse(argv))


def test_sleep_end_holds_a_finished_loop_test_open(key):
    rec = run(key, "-sleepEnd", "1", *SMALL_READ).records[0]
    measured, closed = rec.phase[PHASES.index("measured")], rec.phase[PHASES.index("done")]
    assert closed - measured >= NS                       # at least the second asked for
    quick = run(key, *SMALL_READ).records[0]
    assert quick.phase[PHASES.index("done")] - quick.phase[PHASES.index("measured")] < NS


def test_sleep_end_holds_an_sp_run(key):
    began = time.monotonic_ns()
    rec = run(key, "-sp", "-sleepEnd", "1", "-n", "2", "-i", "1", "-KB", "4", "-bzero").records[0]
    assert rec.ok and time.monotonic_ns() - began >= NS
