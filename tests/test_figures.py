"""The figures a fio user trusts: group summaries from merged histograms, reads and writes apart,
time zero at the barrier's release, CPU over the measured interval, and resolution flags."""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace

import jsonschema
import numpy as np

from torque_async import cmdline, export, report
from torque_async.meter import cpu_interval, thread_usage
from torque_async.stats import Stats, Summary, bucket_range, bucket, merge

from conftest import run, run_cli, table
from test_report import INFO, MS, record

VALIDATOR = jsonschema.Draft202012Validator(export.schema())


def stats_of(values) -> Stats:
    s = Summary()
    for v in values:
        s.add(int(v))
    return s.stats()


def with_latency(rec, values, **kw):
    lat = stats_of(values)
    return replace(rec, lat_count=lat.count, lat_min=lat.lo, lat_max=lat.hi, lat_sum=lat.total,
                   hist=lat.hist, **kw)


def near(got: int, want: float) -> bool:
    lo, hi = bucket_range(bucket(int(want)))
    return abs(got - want) <= hi - lo + 1


def test_a_group_s_percentiles_come_from_the_merged_histogram_not_an_average():
    plan = cmdline.parse("-p 3 -n 10 -load".split())
    rng = np.random.default_rng(3)
    # three processes far apart: the average of their p99s is nobody's p99
    values = [rng.integers(1000, 2000, 500), rng.integers(10_000, 20_000, 500),
              rng.integers(1_000_000, 3_000_000, 20)]
    recs = tuple(with_latency(record(i, 0, 1000 * MS, len(v), 4096), v)
                 for i, v in enumerate(values))
    figures = report.group_figures(recs)
    every = np.concatenate(values)
    lat = figures["all"]["latency"]
    assert figures["all"]["transfers"] == every.size and lat["max"] == every.max()
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)):
        assert near(lat[name], np.percentile(every, 100 * q, method="inverted_cdf")), name
    averaged = np.mean([stats_of(v).percentile(0.99) for v in values])
    assert not near(lat["p99"], averaged)
    assert figures["all"]["iops"] == sum(len(v) for v in values)     # 1 s each: summed rates
    (line,) = report.summary_lines(plan, recs, plan.procs())
    assert line.startswith("group 0 (-load, 3 processes): 1020 IO/s, 4.0 MB/s; latency (us) p50 ")
    assert ", p99.99 " in line and line.endswith(f", max {every.max() / 1000:.1f}")


def test_reads_and_writes_get_their_own_lines_and_one_process_no_total():
    plan = cmdline.parse("-percR 50 -rand -p 2 -load".split())
    reads, writes = stats_of([1000] * 30), stats_of([90_000] * 10)
    mixed = record(0, 0, 500 * MS, 40, 4096, rw=(reads, writes), **{
        k: v for k, v in zip(("lat_count", "lat_min", "lat_max", "lat_sum", "hist"),
                             (lambda m: (m.count, m.lo, m.hi, m.total, m.hist))(
                                 merge([reads, writes])))})
    loads = (record(1, 0, 1000 * MS, 10, 4096), record(2, 0, 1000 * MS, 30, 4096))
    lines = report.summary_lines(plan, (mixed, *loads), plan.procs())
    assert lines == [
        "group 0 (-rand, 1 process) reads: 60 IO/s, 0.2 MB/s; latency (us) p50 1.0, p90 1.0, "
        "p99 1.0, p99.9 1.0, p99.99 1.0, max 1.0",
        "group 0 (-rand, 1 process) writes: 20 IO/s, 0.1 MB/s; latency (us) p50 90.0, p90 90.0, "
        "p99 90.0, p99.9 90.0, p99.99 90.0, max 90.0",
        "group 1 (-load, 2 processes): 40 IO/s, 0.2 MB/s"]                # no latency kept
    dead = replace(loads[0], start=0, finish=0, bytes=0, sys_bytes=0)   # its live count only
    assert report.summary_lines(plan, (mixed, dead, loads[1]), plan.procs())[-1] == \
        "group 1 (-load, 2 processes, 1 measured): 30 IO/s, 0.1 MB/s"   # (the survivor's)
    rw = report.rw_figures(mixed)
    assert (rw["reads"]["transfers"], rw["writes"]["bytes"]) == (30, 10 * 4096)


def test_time_zero_is_the_release_not_the_earliest_start():
    recs = (record(0, 7, 10 * MS, 1, 4096, phase=(MS, 2 * MS, 5 * MS, 0, 0)),
            record(1, 9, 10 * MS, 1, 4096, phase=(MS, 3 * MS, 6 * MS, 0, 0)))
    assert report.time_zero(recs) == 5 * MS
    assert [report.table_row(r, p, 5 * MS).start_ms for r, p in
            zip(recs, cmdline.parse("-p 2 -load".split()).procs())] == [2, 4]


def test_an_interval_too_short_or_a_costly_harness_is_flagged_on_the_test_s_line():
    plan = cmdline.parse("-p 3 -load".split())
    fine = record(0, 0, 1000 * MS, 1000, 4096, harness_ns=200)        # 1 ms per transfer
    short = record(1, 0, 4 * MS, 1000, 4096, harness_ns=200)           # 4 us per transfer
    costly = record(2, 0, 1000 * MS, 1_000_000, 4096, harness_ns=300)   # 1 us per transfer
    assert [list(report.resolution_flags(r)) for r in (fine, short, costly)] == \
        [[], ["short"], ["harness"]]
    lines = report.render(plan, (fine, short, costly), plan.procs(), INFO, "today")
    at = lines.index(report.TABLE_HEADER)
    assert lines[at + 4:at + 6] == [
        "proc 1: measured for 4.0 ms (< 100 ms): its figures are not resolved",
        "proc 2: the harness's own cost, 0.30 us per transfer, is 30% of a transfer's 1.00 us: "
        "its figures are not resolved"]
    doc = export.document(plan, (fine, short, costly), plan.procs(), INFO, "today")
    assert [t["flags"] for t in doc["tests"]] == [[], ["short"], ["harness"]]


def test_a_busy_loop_says_it_limited_the_loop_tests():
    plan = cmdline.parse("-r -p 2 -load".split())
    busy = record(0, 0, 1000 * MS, 10, 4096, cpu_user=900 * MS, cpu_sys=50 * MS)
    idle = replace(busy, cpu_user=100 * MS, cpu_sys=0)
    loads = (record(1, 0, 1000 * MS, 10, 4096), record(2, 0, 1000 * MS, 10, 4096))
    assert report.loop_line((busy, *loads), plan.procs()) == (
        "Event loop: busy 95% of proc 0's measured 1000 ms (its thread's CPU time; it ran "
        "SCHED_OTHER): the loop tests were limited by torque-async, not by the system")
    assert report.loop_line((idle, *loads), plan.procs()).endswith(
        "(its thread's CPU time; it ran SCHED_OTHER)")
    short = replace(busy, finish=busy.start + 2 * MS, cpu_user=2 * MS + MS // 5, cpu_sys=0)
    assert report.loop_line((short, *loads), plan.procs()) == (         # 110%: a tick's error
        "Event loop: busy 110% of proc 0's measured 2 ms (its thread's CPU time; it ran "
        "SCHED_OTHER): not resolved (< 100 ms)")
    web = cmdline.parse("-n 8 -load -dir /srv -p 2 -web".split())      # its rows are hidden
    clients = (replace(loads[0], row=0), replace(busy, row=1), replace(idle, row=2))
    assert report.loop_line(clients, web.procs()) == (
        "Event loop: busy 95% of proc 1's measured 1000 ms (a client of Web group 1; its "
        "thread's CPU time; it ran SCHED_OTHER): the loop tests were limited by torque-async, "
        "not by the system; more loops serve more -web requests: run it under mpiexec -n K on "
        "this host (each rank a loop of its own, all serving one -dir)")
    assert "mpiexec" not in report.loop_line((busy, *loads), plan.procs())   # no -web
    # under mpiexec -n 2 (a loop per rank), it said to run it under mpiexec
    ranked = (*clients, replace(loads[0], row=3, pid=801), replace(busy, row=4, pid=801),
              replace(idle, row=5, pid=801))
    assert report.loop_line(ranked, web.procs() * 2, lambda row: row // 3).endswith(
        "not by the system; more loops serve more -web requests: more than 2 ranks "
        "(mpiexec -n K), where the hosts have CPUs to spare")
    cpu = report.cpu_lines((replace(busy, cpu_wait=30 * MS), *loads), plan.procs())
    assert cpu[2] == "0, 900.0, 50.0, 95, 3, 0, 0, loop, Read" and cpu[3].endswith("process, Load")
    assert report.cpu_lines(loads, plan.procs())[2].startswith("1, 0.0, 0.0, 0, NA, ")  # unknown


def test_cpu_and_wait_past_the_measured_interval_are_named_approximate():
    """One thread cannot both run and wait, but the kernel's counters overlapped: 8 memory
    tests on 2 CPUs read CPU% 25 + wait% 76-79 of 170-470 ms intervals, unsaid."""
    plan = cmdline.parse("-p 3 -load".split())
    over = record(0, 0, 400 * MS, 10, 4096, cpu_user=100 * MS, cpu_wait=320 * MS)     # 105%
    fits = record(1, 0, 400 * MS, 10, 4096, cpu_user=100 * MS, cpu_wait=290 * MS)     # 97.5%
    more = replace(over, row=2, cpu_wait=340 * MS)                                    # 110%
    lines = report.cpu_lines((over, fits, more), plan.procs())
    assert lines[-1] == ("procs 0, 2: CPU% + wait% = 105-110% of the measured interval: the "
                         "kernel counted some time both as CPU and as a wait for one, so "
                         "CPU% and wait% are approximate by the excess")
    short = replace(over, finish=over.start + MS // 10, cpu_user=MS // 4, cpu_wait=0)   # 250%
    assert report.cpu_lines((short,), plan.procs())[-1].startswith("0, ")   # not resolved: no
    assert report.cpu_lines((fits,), plan.procs())[-1].startswith("1, 100.0, 0.0, 25, 72")


def spin_cpu(ns: int) -> None:
    t = time.thread_time_ns()
    while time.thread_time_ns() - t < ns:
        pass


def test_the_loop_s_cpu_is_its_own_thread_s_whichever_thread_reads_it():
    usage = thread_usage()                 # the loop's thread: this one
    before, read = usage(), []

    def lane():                            # a lane's thread burns CPU, then reads the loop's
        spin_cpu(60 * MS)
        read.append(usage())
    other = threading.Thread(target=lane)
    other.start()
    other.join()
    assert sum(cpu_interval(before, read[0])[:2]) < 30 * MS      # not the lane's 60 ms
    spin_cpu(60 * MS)
    user, system, vol, invol, wait = cpu_interval(before, usage()).tolist()
    assert user + system >= 60 * MS and min(user, system, vol, invol) >= 0
    assert wait >= 0                                            # (Linux's schedstat)


def test_tests_that_outnumber_the_cpus_say_how_long_they_waited_for_one(key):
    """N + 1 spinners on N CPUs: together about one interval runnable but not running (each
    runs N/(N+1) of it); the baseline's 'waited for a CPU' is this, measured, where it was
    guessed from a lower CPU share (a disk test waiting for its disk read as one)."""
    cpus = len(os.sched_getaffinity(0))
    out = run(key, "-p", str(cpus + 1), "-t", "0.5", "-n", "1000000000", "-spinWait")
    assert not out.failures
    interval = max(r.elapsed for r in out.records)
    assert all(0 <= r.cpu_wait <= r.elapsed for r in out.records)
    assert sum(r.cpu_wait for r in out.records) > 0.3 * interval


def test_the_loop_s_own_reading_and_another_thread_s_count_alike_so_either_may_follow():
    """The loop thread asks getrusage, another thread reads /proc: the same counters in the
    same units, so readings taken in turn never go back, whichever thread took each."""
    usage = thread_usage()
    spin_cpu(30 * MS)
    readings = [usage()]
    for _ in range(3):
        other = threading.Thread(target=lambda: readings.append(usage()))
        other.start()
        other.join()
        spin_cpu(15 * MS)
        readings.append(usage())
    for a, b in zip(readings, readings[1:]):
        assert (b >= a).all(), (a, b)
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    user, system, cpu = readings[-1][:3]
    assert 75 * MS // tick - 2 <= user + system <= cpu // tick + 2      # ticks, not us or ns


def test_a_real_run_starts_after_the_release_and_measures_cpu_and_reads_and_writes(tmp_path):
    argv = ("-checkpoint", "-p", "2", "-n", "40", "-i", "2", "-KB", "4", "-mfileKB", "256",
            "-percR", "50", "-rand", "-n", "30", "-i", "2", "-KB", "64", "-bzero")
    out = run("0x7D101", *argv)
    plan = cmdline.parse(list(argv))
    assert not out.failures
    recs = out.records
    t0 = report.time_zero(recs)
    assert max(r.phase[1] for r in recs) <= t0           # released after everyone was set up
    assert all(t0 <= r.phase[2] <= r.start < r.finish for r in recs)
    for r in recs:                                        # -checkpoint: the wait ends there
        steps = report.phase_durations(r)
        assert steps["barrier wait"] == (r.phase[2] - r.phase[1]) / 1e6
    for r in recs:
        cpu = r.cpu_user + r.cpu_sys
        assert 0 < cpu <= r.elapsed + 20 * MS and r.harness_ns > 0  # one thread at a time
    rand = recs[:2]
    for r in rand:
        reads, writes = r.rw
        assert reads.count + writes.count == r.transfers == 80 and merge(r.rw) == r.lat
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    VALIDATOR.validate(json.loads(json.dumps(doc)))
    summary = doc["plan"]["groups"][0]["summary"]
    assert summary["all"]["transfers"] == 160 == \
        summary["reads"]["transfers"] + summary["writes"]["transfers"]
    assert doc["tests"][0]["cpu"]["of"] == "loop" and doc["tests"][2]["cpu"]["of"] == "process"
    assert doc["event_loop"]["proc"] in (0, 1)
    lines = report.render(plan, recs, plan.procs(), INFO, "today")
    assert sum(ln.startswith("group 0 (-rand, 2 processes)") for ln in lines) == 3
    assert any(ln.startswith("Event loop: busy ") for ln in lines)


def test_a_stream_finishes_when_its_last_period_ends_having_waited_for_it():
    """Memory frames complete long before their period ends. A paced stream's measured time is
    its frames' periods: it waits out the last one, so Finish is a time that passed (it once
    was the end of the last period without the wait, in the future of the last transfer; then
    the last completion, which read a one-stage stream a little above its rate)."""
    r = run_cli("-smkey", "0x7D102", "-json", "run.json", "-sample", "0", "-memStreams", "r",
                "0", "64", "10", "0", "0.2", "2")
    assert r.returncode == 0, r.stderr
    (test,) = json.loads(open("run.json").read())["tests"]
    rec = test["record"]
    last = rec["samples"][-1]
    assert last[1] == rec["transfers"] == 32 and last[0] < rec["finish"]   # samples: its
    stamps = [t for t, _ in rec["samples"]]                     # completions, none before its
    assert all(rec["start"] + k * 6_250_000 <= t for k, t in enumerate(stamps))     # period
    if stamps[-1] < rec["start"] + 32 * 6_250_000:     # the last frame in its period: the
        assert rec["finish"] - rec["start"] == 32 * 6_250_000   # span is 32 periods, exact
    else:                                               # late (a loaded machine): it ends
        assert rec["finish"] >= stamps[-1]              # at the last completion
    (row,) = table(r.stdout)
    assert int(row[1]) <= int(row[2]) and float(row[5]) <= 10.0   # never above its rate
