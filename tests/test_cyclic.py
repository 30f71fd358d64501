"""-cyclic: wake-up lateness beside a memory load, as the orchestrator runs it."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from torque_async import cmdline, orchestrator
from workers import cyclic

from conftest import run_cli


def test_cyclic_beside_a_memory_load_reports_plausible_figures_and_a_whole_histogram():
    plan = cmdline.parse("-smkey 0x7A301 -n 200 -i 1 -cyclic 1000 "
                         "-n 32 -MB 1 -i 20 -bzero".split())
    outcome = orchestrator.run(plan, 64)
    assert not outcome.failures
    cyc, load = outcome.records
    assert 0 <= cyc.lat_min <= cyc.last_lat <= cyc.lat_max
    # one wake-up per interval at most, and (with -slow) for as long as the load measured
    assert 200 <= cyc.lat_count <= cyc.elapsed // 1_000_000 + 1
    assert cyc.finish >= load.finish and cyc.start <= load.start + 50_000_000
    assert not cyc.subs and cyc.transfer_bytes == 0


def cyclic_lines(*args: str) -> list[tuple[int, ...]]:
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    out = []
    for line in (ln for ln in r.stdout.splitlines() if ln.startswith("T: ")):
        m = re.fullmatch(r"T: \d \(\d+\) I:500 C: (\d+) Min: (\d+) Act: (\d+) Avg: (\d+) "
                         r"Max: (\d+) p99: (\d+) \(us\)", line)
        out.append(tuple(map(int, m.groups())))
    return out


def test_cyclic_wakes_n_x_i_times_and_prints_cyclictests_line():
    fast = cyclic_lines("-smkey", "0x7A302", "-fast", "-p", "2", "-n", "50", "-i", "2",
                        "-cyclic", "500")
    assert [f[0] for f in fast] == [100, 100]


def test_under_slow_the_shorter_cyclic_test_goes_on_until_the_longer_one_has_measured():
    two = "-n 50 -i 2 -cyclic 500 -n 200 -i 2 -cyclic 500"
    short, long = orchestrator.run(cmdline.parse(f"-smkey 0x7A303 -fast {two}".split()),
                                   64).records
    assert (short.lat_count, long.lat_count) == (100, 400)
    short, long = orchestrator.run(cmdline.parse(f"-smkey 0x7A303 -slow {two}".split()),
                                   64).records
    assert long.lat_count == 400 and short.lat_count > 200
    assert short.finish >= long.finish - 500_000        # it saw the other one done at its wake


@pytest.mark.parametrize("over", [3_200_000, 3_000_000])
def test_a_wake_up_that_overruns_skips_the_deadlines_it_missed(monkeypatch, over):
    # wake-up 2 of deadlines every 1 ms comes `over` late: at 5.2 ms (or exactly 5 ms, a
    # deadline not still ahead); the next deadline is 6 ms
    clock, asked, lates = [0], [], []

    def sleep(deadline, stop):
        asked.append(deadline)
        clock[0] = deadline + (over if len(asked) == 2 else 1000)
        return True
    monkeypatch.setattr(cyclic, "now", lambda: clock[0])
    ctx = SimpleNamespace(group=SimpleNamespace(args=(1000,)),
                          local=SimpleNamespace(n=5, i=1, t=None, ramp=None))
    test = cyclic.CyclicTest(ctx)
    test.sleep = sleep
    meter = SimpleNamespace(stop=[0], record=lambda late, t: lates.append(late))
    assert test.wake(meter, 0, lambda k, t: k < 5) == 8_001_000
    assert asked == [1_000_000, 2_000_000, 6_000_000, 7_000_000, 8_000_000]
    assert lates == [1000, over, 1000, 1000, 1000] and test.last == 1000


def test_cyclic_interval_is_checked():
    r = run_cli("-cyclic", "0")
    assert r.returncode == 2 and "-cyclic usec: 0 is out of range" in r.stderr
