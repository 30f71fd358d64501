"""The report is pure: known records in, the man page's lines out."""
from __future__ import annotations

import signal
from dataclasses import replace

from torque_async import cmdline, export, report
from torque_async.io import uring
from torque_async.results import DONE, Record
from torque_async.stats import Summary
from torque_async.sysinfo import SysInfo
from torque_async.units import MB

MS = 1_000_000
INFO = SysInfo("host", "x86_64", "CPU", "00:03:93:c6:73:12", 1000, 32, 32, 32, 256, 0, 1024,
               1, 1, "6.1")


def hist_of(*values: int) -> tuple[tuple[int, int], ...]:
    """The sparse histogram of these values."""
    s = Summary()
    for v in values:
        s.add(v)
    return s.stats().hist


def record(row, start_ms, finish_ns_after, transfers, size, sys_factor=1, pid=700, **kw):
    base = dict(row=row, state=DONE, pid=pid, start=start_ms * MS,
                finish=start_ms * MS + finish_ns_after, transfers=transfers,
                bytes=transfers * size, sys_bytes=transfers * size * sys_factor,
                extra_transfers=0, lat_min=0, lat_max=0, lat_sum=0, lat_count=0,
                hist=(), samples=(), phase=(0,) * 5, ops=0, ref_rate=0.0,
                transfer_bytes=size, file="", info="", error="")
    return replace(Record(**base), **kw)


def man_page_example():
    plan = cmdline.parse("-p 2 -n 8 -i 10 -MB 4 -load -seed 1".split())
    # The man page's two loads: 80 x 4 MB in 902 ms and in 890 ms, starting 64 ms apart.
    recs = (record(0, 1000, 902 * MS + 400_000, 80, 4 * MB, pid=707),
            record(1, 1064, 890 * MS, 80, 4 * MB, pid=708))
    return plan, recs


def test_the_configuration_file_line_says_when_the_command_line_named_the_tests(tmp_path):
    """The config's actions run only when the command line has none: the line named the file
    as if its tests had run."""
    (tmp_path / "Torque.config").write_text("-seed 7\n-n 4 -bzero\n")
    for argv, said in ((["-n", "8", "-load"], " (its global options: the command line named the "
                        "tests)"), ([], "")):
        plan = cmdline.parse(argv, cwd=str(tmp_path))
        assert plan.settings.seed == 7
        lines = report.group_lines(plan, plan.groups[0], (), plan.procs())
        assert f"configuration file = {tmp_path / 'Torque.config'}{said}" in lines


def test_a_sequential_test_says_when_its_mfile_cap_is_beyond_what_its_n_transfers_reach():
    """-KB 4 -mfileMB 64 -aio 16 made a 0.25 MB file (-n 64 transfers), unsaid: fio's `size`,
    which -mfileMB stands for in its hints, is the file's size."""
    plan = cmdline.parse("-KB 4 -mfileMB 64 -aio 16 -n 16 -KB 4 -mfileMB 64 -rand "
                         "-n 20000 -KB 4 -mfileMB 64 -r -n 64 -KB 4 -r".split())
    said = [[ln for ln in report.group_lines(plan, g, (), plan.procs()) if "-mfile*" in ln]
            for g in plan.groups]
    assert said == [["-mfile* = 64 MBytes is a maximum: this sequential test's -n 64 transfers "
                     "reach 0.25 MBytes of it (raise -n for more)"], [], [], []]


def test_a_web_group_calls_its_size_the_read_size():
    """'transaction size = 1M' read as a request's size; a request reads a whole file."""
    plan = cmdline.parse("-dir /srv -KB 64 -web".split())
    lines = report.group_lines(plan, plan.groups[0], (), plan.procs())
    assert lines[0] == ("read size = 65536 (64K), (64K): each request reads its file whole, in "
                        "reads of up to this")


def test_table_row_has_the_man_pages_numbers():
    plan, recs = man_page_example()
    procs = plan.procs()
    t0 = report.time_zero(recs)
    rows = [report.table_row(r, p, t0).text() for r, p in zip(recs, procs)]
    assert rows[0] == "0, 0, 902, 902, 80, 354.6, 4096, 88, Load, NA, 707"
    assert rows[1] == "1, 64, 954, 890, 80, 359.6, 4096, 89, Load, NA, 708"


def test_354_8_for_80_transfers_of_4_mb_in_902_ms():
    rec = record(0, 0, 902 * MS, 80, 4 * MB)
    assert f"{report.table_row(rec, _proc(), 0).bw:.1f}" == "354.8"


def _proc():
    return cmdline.parse(["-load"]).procs()[0]


def test_bw_line_sums_system_bandwidth_per_group_and_counts_bcopy_twice():
    plan = cmdline.parse("-p 2 -load -bcopy".split())
    recs = (record(0, 0, 1000 * MS, 100, MB), record(1, 0, 1000 * MS, 50, MB),
            record(2, 0, 500 * MS, 10, MB, sys_factor=2))
    lines = report.bw_lines(plan, (recs,), plan.procs())
    assert lines[0] == "BW, Load, Bcopy, Total"
    assert lines[1] == "BW:, 150, 40, 190"
    assert lines[-1] == "190: Total Bandwidth Consumed (MBytes/sec)"


def test_bw_line_has_a_column_per_group_in_plan_order_and_tells_groups_of_one_kind_apart():
    plan = cmdline.parse("-load -bcopy -load".split())
    recs = (record(0, 0, 1000 * MS, 100, MB), record(1, 0, 1000 * MS, 50, MB),
            record(2, 0, 1000 * MS, 10, MB))
    lines = report.bw_lines(plan, (recs,), plan.procs())
    assert lines[:2] == ["BW, Load#0, Bcopy, Load#2, Total", "BW:, 100, 50, 10, 160"]
    none_ran = report.bw_lines(plan, ((replace(recs[0], transfers=0, bytes=0, sys_bytes=0),
                                       *recs[1:]),), plan.procs())
    assert none_ran[0] == lines[0]               # a test that measured nothing keeps its column


def test_bw_line_of_several_repetitions_gives_each_columns_median_and_the_totals():
    """-repeat: the BW: line was the first repetition's, and under -bo it was all there was."""
    plan = cmdline.parse("-repeat 3 -load -bcopy".split())
    reps = [(record(0, 0, 1000 * MS, load, MB), record(1, 0, 1000 * MS, bcopy, MB))
            for load, bcopy in ((100, 10), (300, 40), (200, 5))]
    lines = report.bw_lines(plan, reps, plan.procs())
    assert lines[1] == "BW:, 200, 10, 210"     # the columns add up (the totals' median: 205)
    assert lines[-1] == "210: Total Bandwidth Consumed (MBytes/sec): each group's the median " \
                        "of 3 repetitions, the Total their sum"
    text = report.render(plan, reps[0], plan.procs(), INFO, "today", repetitions=tuple(reps))
    assert "BW:, 200, 10, 210" in text
    bo = replace(plan, settings=replace(plan.settings, bo=True))
    assert report.render(bo, reps[0], plan.procs(), INFO, "today",
                         repetitions=tuple(reps))[1] == "BW:, 200, 10, 210"
    resolved = (record(0, 0, 1000 * MS, 100, MB), record(1, 0, 1000 * MS, 10, MB))
    brief = (record(0, 0, 50 * MS, 5, MB), record(1, 0, 1000 * MS, 10, MB))   # proc 0: 50 ms
    bo_text = report.render(bo, resolved, plan.procs(), INFO, "today",
                            repetitions=(resolved, brief, brief))
    assert "proc 0: not resolved in 2 of 3 repetitions: its medians are not resolved" in bo_text
    assert not any("measured for" in ln for ln in bo_text)      # not the first repetition's
    entry = export.repeats_entry(plan, reps, plan.procs())       # the JSON has the line too
    assert entry["bandwidth"] == {"groups": {"Load": 200.0, "Bcopy": 10.0}, "total": 210.0}


def test_render_has_header_group_block_table_and_bw_and_honours_nh_and_bo():
    plan, recs = man_page_example()
    lines = report.render(plan, recs, plan.procs(), INFO, "today")
    text = "\n".join(lines)
    for expected in ("torque-async -p 2 -n 8 -i 10 -MB 4 -load -seed 1", "today",
                     "Ethernet Address: 00:03:93:c6:73:12", "We waited for 2 processes",
                     "transaction size = 4194304 (4096K), (4M)", "number of transactions = 8",
                     "Bytes Transferred = 320 MBytes/process", "Number of processes = 2",
                     "Number of iterations = 10", "-p 2 -n 8 -i 10 -MB 4 -load",
                     report.TABLE_HEADER, "BW:, 714, 714",
                     "All 2 tests ran together from 64 ms to 902 ms (838 ms)"):
        assert expected in text
    assert text.index("Ethernet") < text.index(report.TABLE_HEADER) < text.index("BW:")
    nh = report.render(replace(plan, settings=replace(plan.settings, nh=True)), recs,
                       plan.procs(), INFO, "today")
    assert nh[0] == report.TABLE_HEADER and "Ethernet" not in "\n".join(nh)
    bo = report.render(replace(plan, settings=replace(plan.settings, bo=True)), recs,
                       plan.procs(), INFO, "today")
    assert bo == ["BW, Load, Total", "BW:, 714, 714", "",
                  "714: Total Bandwidth Consumed (MBytes/sec)"]


def test_bandwidth_only_still_says_what_is_not_whole():
    """-bo kept the BW lines alone: an unresolved figure, an interruption and a failure went
    unsaid (a spreadsheet of `-nh -bo | grep BW:` runs collected them as exact)."""
    plan = cmdline.parse("-bo -n 8 -MB 4 -load".split())
    short = (record(0, 0, 4 * MS, 8, 4 * MB),)
    lines = report.render(plan, short, plan.procs(), INFO, "today", ("test 0 failed: x",),
                          signal.SIGINT, unfinished=("test 0 stopped while running",))
    assert lines == ["BW, Load, Total", "BW:, 8000, 8000", "",
                     "8000: Total Bandwidth Consumed (MBytes/sec)", "",
                     "proc 0: measured for 4.0 ms (< 100 ms): its figures are not resolved", "",
                     "INTERRUPTED by SIGINT: the figures cover the transfers measured before it",
                     "test 0 stopped while running", "",
                     "INCOMPLETE: some tests failed", "test 0 failed: x"]


def test_overlap_warns_when_measured_intervals_do_not_meet_with_advice_for_the_plan():
    recs = (record(0, 0, 10 * MS, 1, MB), record(1, 20, 10 * MS, 1, MB))
    fast = report.overlap_line(cmdline.parse("-fast -load -load".split()), recs, 0)
    slow = report.overlap_line(cmdline.parse("-load -load".split()), recs, 0)
    assert fast.startswith("Warning: the measured intervals did not") and "drop -fast" in fast
    assert "-fast" not in slow and "finished before another began measuring" in slow


def test_fast_names_a_test_that_measured_mostly_after_the_others_stopped():
    """Under -fast a Triad measured 89% of its time alone, and the Total added its bandwidth to
    the others' as if all had run together."""
    recs = (record(0, 0, 900 * MS, 1, MB), record(1, 0, 100 * MS, 1, MB),
            record(2, 0, 150 * MS, 1, MB))
    fast = cmdline.parse("-fast -load -load -load".split())
    assert report.mostly_alone_lines(fast, recs) == [
        "proc 0: 89% of its measured time was outside it (-fast: the others were not running), "
        "so its figures are mostly its own alone"]
    assert report.mostly_alone_lines(cmdline.parse("-load -load -load".split()), recs) == []
    lines = report.render(fast, recs, fast.procs(), INFO, "today")
    at = lines.index("All 3 tests ran together from 0 ms to 100 ms (100 ms)")
    assert lines[at + 1].startswith("proc 0: 89% of its measured time was outside it")


def test_diff_is_finish_minus_start_as_printed_and_video_tests_are_numbered():
    plan = cmdline.parse("-n 4 -V 7".split())
    rec = record(0, 0, 40 * MS, 4, MB, start=MS - 1, finish=41 * MS)   # 0.999.. to 41 ms
    row = report.table_row(rec, plan.procs()[0], 0)
    assert (row.start_ms, row.finish_ms, row.diff_ms, row.test) == (0, 41, 41, "Video7")
    assert report.group_labels(plan) == ["Video7"]


def test_latency_percentiles_come_from_the_histogram():
    lats = [1000] * 98 + [50_000, 2_000_000]
    rec = record(0, 0, MS, 100, MB, hist=hist_of(*lats), lat_min=1000, lat_max=2_000_000,
                 lat_sum=sum(lats), lat_count=100)
    assert 1000 <= rec.lat.percentile(0.5) <= 1000 * 1.016    # within one bucket
    assert 50_000 <= rec.lat.percentile(0.99) <= 50_000 * 1.016
    assert 2_000_000 / 1.016 <= rec.lat.percentile(0.999) <= 2_000_000
    line = report.latency_lines((rec,), (_proc(),))[2]
    assert line.startswith("0, 1.0, 21.5, 1.0, ") and line.endswith(", 2000.0, 2000.0, Load")


def test_percentiles_a_count_cannot_hold_are_named_not_measured_tails():
    """p99.9 of 3 transfers printed as if measured (249.2, the max's neighbour): a percentile q
    needs 1 / (1 - q) transfers for one to lie above it."""
    def rec(row, n):
        lats = [1000 + i for i in range(n)]
        return record(row, 0, MS, n, MB, hist=hist_of(*lats), lat_min=1000, lat_max=lats[-1],
                      lat_sum=sum(lats), lat_count=n)
    rows = (rec(0, 3), rec(1, 200), rec(2, 1000), rec(3, 20000), rec(4, 5))
    procs = tuple(_proc() for _ in rows)
    assert report.latency_lines(rows, procs)[-1] == (
        "Tails not measured (procs 0, 4 from p90 up; proc 1 from p99.9 up; proc 2 from "
        "p99.99): a percentile q needs 1 / (1 - q) transfers (p90: 10, p99: 100, p99.9: 1000, "
        "p99.99: 10000), and with fewer it is an interpolation near the max")
    assert report.latency_lines(rows[3:4], procs[:1])[-1].startswith("3, ")    # no note


def test_spin_line_states_the_share_of_the_idle_rate_kept():
    rec = record(0, 0, 1000 * MS, 10, 0, ops=50_000_000, ref_rate=100e6)
    (line,) = report.spin_lines((rec,))
    assert "50.00 Mloops/s under load, 100.00 Mloops/s alone: 50.0%" in line


def test_the_group_block_of_loop_tests_says_their_pid_is_torque_async_s_own():
    plan = cmdline.parse("-p 2 -r -p 2 -load".split())
    recs = tuple(record(i, 0, 10 * MS, 1, MB, pid=700 if i < 2 else 800 + i) for i in range(4))
    reading, loading = (report.group_lines(plan, g, recs, plan.procs()) for g in plan.groups)
    assert "PID 700 is torque-async itself: its 2 processes run as coroutines on one event " \
           "loop" in reading
    assert not any(ln.startswith("PID") for ln in loading)
    plan = cmdline.parse("-p 3 -r".split())              # a stop in set-up: one started
    recs = (record(0, 0, 10 * MS, 1, MB, pid=700), *(record(i, 0, 0, 0, MB, pid=0)
                                                     for i in (1, 2)))
    assert "PID 700 is torque-async itself: its 1 process runs as coroutines on one event loop " \
           "(2 of its 3 never launched)" in report.group_lines(plan, plan.groups[0], recs,
                                                               plan.procs())


def test_a_figure_that_does_not_apply_leaves_no_blank_line_in_its_block():
    plan = cmdline.parse("-p 2 -n 8 -i 10 -MB 4 -checkpoint -load".split())
    phase = (990 * MS, 995 * MS, 1000 * MS, 1900 * MS, 1910 * MS)
    recs = tuple(replace(r, phase=phase) for r in man_page_example()[1])
    lines = report.render(plan, recs, plan.procs(), INFO, "today", began=None)   # -baseline's
    at = next(i for i, ln in enumerate(lines) if ln.startswith("All 2 tests ran together"))
    assert lines[at + 1].startswith("checkpoint proc 0 (ms since the start)")
    assert all(a or b for a, b in zip(lines, lines[1:]))                 # never two blanks


def test_kernel_choices_are_labelled_by_process_when_they_differ():
    same = (record(0, 0, MS, 1, MB, info="4 x 1 bytes; Triad in blocks of 1M bytes"),
            record(1, 0, MS, 1, MB, info="4 x 1 bytes; Triad in blocks of 1M bytes"))
    assert report.info_lines(same) == ["4 x 1 bytes; Triad in blocks of 1M bytes"]
    apart = (same[0], replace(same[1], info="4 x 1 bytes; Triad in blocks of 4M bytes"))
    assert report.info_lines(apart) == ["proc 0: 4 x 1 bytes; Triad in blocks of 1M bytes",
                                        "proc 1: 4 x 1 bytes; Triad in blocks of 4M bytes"]


def test_choices_that_differ_between_repetitions_or_alone_and_together_are_said():
    procs = cmdline.parse("-p 2 -Striad".split()).procs()
    one, four = "Triad in blocks of 1M bytes", "Triad in blocks of 4M bytes"
    reps = [(record(0, 0, MS, 1, MB, info=one), record(1, 0, MS, 1, MB, info=one)),
            (record(0, 0, MS, 1, MB, info=four), record(1, 0, MS, 1, MB, info=one))]
    assert report.choice_lines(reps, None, procs) == [
        f"proc 0: set-up chose differently in each repetition: 1: {one} | 2: {four}"]
    (line,) = report.choice_lines(reps[:1], [[reps[0][0]], [reps[1][0]]], procs)
    assert line == (f"proc 1: its set-up chose {four} alone (-baseline), {one} together: the "
                    f"change may be partly that choice's, not only contention")
    both = "16 x 4 bytes per array; Triad in blocks of {}, the fastest here of 16K bytes, 1M bytes"
    (line,) = report.choice_lines([(record(0, 0, MS, 1, MB, info=both.format("16K bytes")),)],
                                  [[record(0, 0, MS, 1, MB, info=both.format("1M bytes"))]],
                                  procs[:1])
    assert line.startswith("proc 0: its set-up chose Triad in blocks of 1M bytes alone "
                           "(-baseline), Triad in blocks of 16K bytes together: ")
    assert report.choice_lines(reps[:1], [[reps[0][0]], [reps[0][1]]], procs) == []


def test_a_choice_alone_against_together_counts_every_repetition():
    """-repeat 3 -baseline: the line said 'np.add.reduce alone, np.dot together' from the first
    repetition only, when two of the three together chose as the runs alone."""
    procs = cmdline.parse("-load".split()).procs()
    add, dot = "loads by np.add.reduce", "loads by np.dot"
    together = [(record(0, 0, MS, 1, MB, info=info),) for info in (dot, add, add)]
    alone = [[record(0, 0, MS, 1, MB, info=add) for _ in range(3)]]
    (line,) = [ln for ln in report.choice_lines(together, alone, procs) if "alone" in ln]
    assert line == (f"proc 0: its set-up chose {add} (in 3 of 3) alone (-baseline), {add} (in 2 "
                    f"of 3) | {dot} (in 1 of 3) together: the change may be partly that "
                    f"choice's, not only contention")
    same = [(record(0, 0, MS, 1, MB, info=add),)] * 3
    assert report.choice_lines(same, alone, procs) == []


def test_a_choice_made_again_at_other_rates_is_not_a_different_choice():
    """The O_DIRECT submits line carries the rates its calibration measured, which differ in
    every run: only the choice counts, between repetitions and alone against together."""
    procs = cmdline.parse("-p 2 -KB 4 -rand".split()).procs()
    line = "I/O engine = io_uring\nO_DIRECT submits = {}, " + uring.TRIALS + \
           " whole batches {}k, 4 at a time {}k reads/s (set-up's {} ms)"
    runs = [line.format("4 at a time", 48.9, 62.7, 243),
            line.format("4 at a time", 50.1, 61.0, 250),
            line.format("whole batches", 61.0, 60.2, 247)]
    reps = [tuple(record(p, 0, MS, 1, MB, info=info) for p in range(2)) for info in runs]
    assert report.choice_lines(reps[:2], [[r] for r in reps[1]], procs) == []
    assert report.choice_lines(reps[1:], None, procs) == [   # one line for the procs it fits
        "procs 0-1: set-up chose differently in each repetition: 1: I/O engine = io_uring; "
        "O_DIRECT submits = 4 at a time | 2: I/O engine = io_uring; O_DIRECT submits = whole "
        "batches"]
    (alone,) = report.choice_lines(reps[:1], [[r] for r in reps[2]], procs)
    assert alone.startswith("procs 0-1: its set-up chose O_DIRECT submits = whole batches "
                            "alone (-baseline), O_DIRECT submits = 4 at a time together: ")


def test_a_file_made_in_one_run_is_no_choice_of_its_set_up():
    """-repeat and -baseline read the first run's 'made by this run' note as a kernel choice:
    'set-up chose differently in each repetition', and a garbled -baseline line."""
    procs = cmdline.parse("-f x.dat -n 4 -KB 4 -w".split()).procs()
    first = "I/O engine = sync\n-f file x.dat: made by this run (there was none), and kept"
    reps = [(record(0, 0, MS, 1, MB, info=info),) for info in (first, "I/O engine = sync")]
    assert report.choice_lines(reps, [[reps[1][0]]], procs) == []
    assert report.choice_lines(reps[1:], [[reps[0][0]]], procs) == []


def test_a_file_the_run_made_is_said_without_the_group_block_too():
    """-nh and -bo drop the group block, and with it the only word that the run made or grew
    the user's -f file."""
    plan = cmdline.parse("-p 2 -f x.dat -n 4 -KB 4 -w".split())
    made = "-f file x.dat: made by this run (there was none), and kept"
    recs = tuple(record(i, 0, 200 * MS, 4, 4096, info=f"I/O engine = sync\n{made}")
                 for i in range(2))
    for setting in ("nh", "bo"):
        quiet = replace(plan, settings=replace(plan.settings, **{setting: True}))
        text = report.render(quiet, recs, plan.procs(), INFO, "today")
        assert text.count(made) == 1, setting                       # once, not per process
    assert report.render(plan, recs, plan.procs(), INFO, "today").count(made) == 1   # its block


def test_procs_are_named_in_runs():
    assert [report.procs_named(rows) for rows in ([3], [1, 2, 3], [0, 2, 3, 7])] == \
        ["proc 3", "procs 1-3", "procs 0, 2-3, 7"]


def test_a_later_repetition_s_interruption_closes_the_report_even_bandwidth_only():
    """-repeat 3 stopped in its third: said in the middle of the report, and not at all under
    -bo (the exit status alone said it)."""
    for bo in (False, True):
        plan = cmdline.parse(f"{'-bo ' * bo}-repeat 3 -n 8 -i 200 -MB 4 -load".split())
        lines = report.render(plan, (record(0, 0, 900 * MS, 1600, 4 * MB),), plan.procs(), INFO,
                              "today", (), signal.SIGINT,
                              unfinished=("repetition 3 of 3: test 0 stopped while running",),
                              complete=2)
        assert lines[-2:] == ["INTERRUPTED by SIGINT after 2 complete repetitions: the figures "
                              "are theirs", "repetition 3 of 3: test 0 stopped while running"]
        failed = report.render(plan, (record(0, 0, 900 * MS, 1600, 4 * MB),), plan.procs(),
                               INFO, "today", ("repetition 2 of 3: test 0 died: SIGKILL",),
                               complete=1)
        assert failed[-2:] == ["INCOMPLETE: some tests failed (after 1 complete repetition: the "
                               "figures are theirs)", "repetition 2 of 3: test 0 died: SIGKILL"]


def test_checkpoint_prints_no_times_for_a_run_that_never_started():
    plan = cmdline.parse("-checkpoint -n 4 -r".split())
    spawned = replace(record(0, 0, 0, 0, 4096), phase=(6484855 * MS, 0, 0, 0, 6487664 * MS))
    assert report.checkpoint_lines((spawned,), plan.procs(), 0) == []     # no time zero
    started = report.checkpoint_lines((spawned,), plan.procs(), 6484000 * MS)
    assert started[0].startswith("checkpoint proc 0 (ms since the start): spawned 855.0")
