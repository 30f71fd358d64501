"""-cyclic: wake-up lateness beside a memory load, as the orchestrator runs it."""
from __future__ import annotations

import re

from torque_async import cmdline, orchestrator, report
from torque_async.results import bucket

from conftest import run_cli


def test_cyclic_beside_a_memory_load_reports_plausible_figures_and_a_whole_histogram():
    plan = cmdline.parse("-smkey 0x7A301 -n 200 -i 1 -cyclic 1000 "
                         "-n 32 -MB 1 -i 20 -bzero".split())
    outcome = orchestrator.run(plan, 64)
    assert not outcome.failures
    cyc, load = outcome.records
    assert cyc.lat_count == cyc.transfers and sum(cyc.hist) == cyc.lat_count
    assert 0 <= cyc.lat_min <= cyc.lat_sum // cyc.lat_count <= cyc.lat_max
    assert cyc.lat_min <= cyc.last_lat <= cyc.lat_max
    assert cyc.hist[bucket(cyc.lat_max)] >= 1 and cyc.hist[bucket(cyc.lat_min)] >= 1
    assert report.percentile(cyc, 0.99) <= cyc.lat_max
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
        count, lo, act, avg, hi, p99 = figures = tuple(map(int, m.groups()))
        assert lo <= avg <= hi and lo <= act <= hi and p99 <= hi
        out.append(figures)
    return out


def test_cyclic_wakes_n_x_i_times_and_prints_cyclictests_line():
    fast = cyclic_lines("-smkey", "0x7A302", "-fast", "-p", "2", "-n", "50", "-i", "2",
                        "-cyclic", "500")
    assert [f[0] for f in fast] == [100, 100]
    slow = cyclic_lines("-smkey", "0x7A302", "-p", "2", "-n", "50", "-i", "2", "-cyclic", "500")
    assert len(slow) == 2 and all(f[0] >= 100 for f in slow)   # each covers the other's run


def test_cyclic_interval_is_checked():
    r = run_cli("-cyclic", "0")
    assert r.returncode == 2 and "-cyclic usec: 0 is out of range" in r.stderr
