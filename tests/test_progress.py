"""The progress line: only on a terminal, never with -noProgress, at most 4 refreshes a second,
each group's share of its measured transfers, erased at the end."""
from __future__ import annotations

import asyncio
import io
import os
import pty
from dataclasses import replace

import numpy as np

from torque_async import cmdline, progress
from torque_async.results import READY, ROW, RUNNING

from conftest import run_cli, start, table

PLAN = cmdline.parse("-p 2 -n 50 -i 2 -bzero -n 10 -i 1 -load".split())


class Terminal(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class FakeResults:
    def __init__(self, transfers, states):
        self.rows = np.zeros(len(transfers), ROW)
        self.rows["transfers"], self.rows["state"] = transfers, states


def test_wanted_only_on_a_terminal_and_without_noprogress():
    quiet = replace(PLAN.settings, noProgress=True)
    assert progress.should_show(PLAN.settings, Terminal(True))
    assert not progress.should_show(PLAN.settings, Terminal(False))
    assert not progress.should_show(quiet, Terminal(True))


def test_the_line_gives_each_group_s_share_of_its_measured_transfers():
    procs = PLAN.procs()
    assert progress.line(procs, [50, 100, 0], [RUNNING] * 3, 1_500_000_000) == \
        "torque-async 1.5 s: 0:Bzero 75% 1:Load 0%"
    assert progress.line(procs, [0, 0, 0], [READY] * 3, 200_000_000) == \
        "torque-async 0.2 s: setting up"


def test_streams_count_their_frames_and_cyclic_its_own_wake_ups():
    procs = cmdline.parse("-memStreams rw 2 64 6.25 0 1 1 -n 10 -i 2 -cyclic 1000".split()).procs()
    # rw: two sub-streams of 100 frames (6.25 MiB/s of 64 KB for 1 s); -cyclic: 10 x 2 wake-ups
    assert progress.line(procs, [50, 30], [RUNNING] * 2, 2 * 10**9) == \
        "torque-async 2.0 s: 0:MemStreams 25% 1:Cyclic 100%"


def test_a_timed_group_shows_the_share_of_its_time():
    procs = cmdline.parse("-t 5 -p 2 -bzero -n 10 -i 1 -load".split()).procs()
    assert progress.line(procs, [50, 70, 5], [RUNNING] * 3, 2 * 10**9, 10**9) == \
        "torque-async 2.0 s, about 4 s left: 0:Bzero 20% 1:Load 50%"


def test_the_time_left_is_the_slowest_group_s_at_its_rate_so_far():
    assert progress.time_left([0.5, 0.25, 1.0], 2 * 10**9) == 6.0       # 25% in 2 s: 6 s more
    assert progress.time_left([0.5, 0.0], 2 * 10**9) is None           # no rate yet
    assert progress.time_left([0.5], 0) is None
    procs = PLAN.procs()
    assert progress.line(procs, [25, 25, 5], [RUNNING] * 3, 3 * 10**9, 10**9) == \
        "torque-async 3.0 s, about 3 s left: 0:Bzero 25% 1:Load 50%"


def test_show_refreshes_at_most_4_times_a_second_and_erases_its_line():
    stream, waits, ticks = Terminal(True), [], iter(range(0, 10**10, 500_000_000))
    results = FakeResults([10, 20, 10], [RUNNING] * 3)

    async def main():
        third = asyncio.Event()

        async def sleep(seconds):
            waits.append(seconds)
            if len(waits) == 3:
                third.set()
                await asyncio.Event().wait()          # the third wait lasts until cancelled
        task = asyncio.ensure_future(progress.show(PLAN.procs(), results, stream, sleep,
                                                   lambda: next(ticks)))
        await third.wait()
        await progress.stop(task)
        return task

    task = asyncio.run(main())
    assert task.cancelled() and waits == [progress.INTERVAL] * 3 and progress.INTERVAL >= 0.25
    E = progress.ERASE
    assert stream.getvalue() == (f"{E}torque-async 0.5 s: 0:Bzero 15% 1:Load 100%"
                                 f"{E}torque-async 1.0 s, about 3 s left: 0:Bzero 15% 1:Load 100%"
                                 f"{E}")           # 15% in the 0.5 s since it was seen running


def test_start_gives_no_task_when_stderr_is_not_a_terminal():
    async def main():
        results = FakeResults([0, 0, 0], [READY] * 3)
        off = progress.start(PLAN, PLAN.procs(), results, Terminal(False))
        on = progress.start(PLAN, PLAN.procs(), results, Terminal(True))
        await progress.stop(on)
        return off, on
    off, on = asyncio.run(main())
    assert off is None and on is not None and on.cancelled()


def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run the command with stderr on a pseudo-terminal: (exit code, stdout, the terminal)."""
    master, slave = pty.openpty()
    proc = start(*args, stderr=slave)
    os.close(slave)
    seen = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:                  # EIO: every process holding the terminal has exited
            break
        if not data:
            break
        seen.append(data)
    os.close(master)
    out = proc.stdout.read()
    return proc.wait(), out, b"".join(seen).decode()


SLOW = ("-n", "6", "-i", "1", "-KB", "4", "-T", "100000", "-bzero")   # 0.6 s of testing


def test_a_terminal_shows_the_line_and_noprogress_or_a_pipe_do_not():
    code, out, tty = on_a_terminal("-smkey", "0x7801", *SLOW)
    assert code == 0 and table(out)[0][4] == "6"
    assert f"{progress.ERASE}torque-async " in tty and " 0:Bzero " in tty
    assert tty.endswith(progress.ERASE)
    code, out, tty = on_a_terminal("-smkey", "0x7802", "-noProgress", *SLOW)
    assert code == 0 and tty == ""
    piped = run_cli("-smkey", "0x7803", *SLOW)
    assert piped.returncode == 0 and piped.stderr == ""
