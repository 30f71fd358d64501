"""Several ranks under mpiexec (the mpi extra's MPICH): one report from rank 0, clocks put on
rank 0's, every rank ended and cleaned up when one fails; nothing of it without a launcher."""
from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import psutil
import pytest

from torque_async import cluster, export, report, report_cluster
from torque_async.cluster import Cluster, Pong, offset_of, shift
from torque_async.report_cluster import ClusterRun, Rank
from torque_async.results import READY, RUNNING, owner_of, segment_name
from torque_async.io import identity

from conftest import (CMD, ENV, REPO, assert_one_clean_line, left_behind, mapped_by,
                      never_alive, shm_now, start, still_left, table, wait_for_rows)

MPIEXEC = str(Path(sysconfig.get_path("scripts")) / "mpiexec")   # the mpich wheel's
HOST = socket.gethostname()
LONG = ["-n", "16", "-i", "1000000", "-KB", "256", "-bzero", "-spinWait"]
CLUSTER_HEADER = report.TABLE_HEADER + ",Host,Rank"


def mpiexec(n: int, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([MPIEXEC, "-n", str(n), *CMD, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, **popen)


def finished(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def gone(paths: list[Path], timeout: float = 15) -> bool:
    """Whether every path disappears within `timeout` (a rank's guard removes them after the
    rank is killed)."""
    deadline = time.monotonic() + timeout
    while any(p.exists() for p in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- clock offsets, as pure functions with a fake exchange ---------------------------------

class FakeComm:
    """Rank 0 of `size` ranks: each recv of a pong answers the remote's clock reading; rank r
    runs on kernels[r] (by default each rank on a kernel of its own)."""

    def __init__(self, size: int, remote: list[int], kernels: list[str] | None = None):
        self.size, self.remote = size, iter(remote)
        self.kernels = kernels or [f"kernel {r}" for r in range(size)]
        self.pinged: list[int] = []

    def Get_rank(self):
        return 0

    def Get_size(self):
        return self.size

    def allgather(self, value):
        return [(value[0], kernel) for kernel in self.kernels]

    def send(self, obj, dest, tag):
        self.pinged.append(dest)

    def recv(self, source, tag):
        return next(self.remote)


OFFSET = 7_000_000_000            # the remote's CLOCK_MONOTONIC is 7 s ahead of rank 0's


def fake_exchange(delays: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Rank 0's clock readings (sent, back per round) and the remote's answers, for the given
    (there, back) delays in ns."""
    local, remote, now = [], [], 1_000_000
    for there, back in delays:
        local += [now, now + there + back]
        remote.append(now + there + OFFSET)
        now += there + back + 1000
    return local, remote


def test_the_offset_comes_from_the_shortest_round_trip_and_is_exact_to_half_of_it():
    delays = [(50_000, 3_000_000), (400, 400), (9_000, 10), (10, 10)] + [(5000, 5000)] * 12
    local, remote = fake_exchange(delays)
    rank0 = Cluster(FakeComm(2, remote), clock=iter(local).__next__)
    assert rank0.offsets() == [(0, 0), (OFFSET, 10)]
    lopsided = [Pong(0, 5 + OFFSET, 20)]         # 5 ns there, 15 back: off by 5, within 10
    offset, uncertainty = offset_of(lopsided)
    assert uncertainty == 10 and offset != OFFSET and abs(offset - OFFSET) <= uncertainty


def test_ranks_on_rank_0_s_kernel_share_its_clock_exactly_and_are_not_pinged():
    local, remote = fake_exchange([(10, 10)] * cluster.PING_ROUNDS)
    comm = FakeComm(3, remote, kernels=["k0", "k0", "k2"])
    rank0 = Cluster(comm, clock=iter(local).__next__)
    assert rank0.offsets() == [(0, 0), (0, 0), (OFFSET, 10)]
    assert set(comm.pinged) == {2}
    plan, run = two_ranks()
    shared = ClusterRun((replace(run.ranks[0], uncertainty=0),
                         replace(run.ranks[1], offset=0, uncertainty=0, shares_clock=True)), plan)
    lines = shared.lines(0)
    assert "Start skew between ranks (first to last release): 2999.9 us" in lines
    assert "Clocks: every rank runs on rank 0's kernel and reads its CLOCK_MONOTONIC " \
           "(offsets 0, exact)" in lines
    assert report_cluster.skew_lines([replace(shared, ranks=tuple(
        replace(r, records=run.ranks[0].records) for r in shared.ranks))]) == [
        "Start skew between ranks in each repetition (us): 0.0"]     # exact: no uncertainty
    third = Rank(2, "c", 12, 40, 2000, (), False)
    mixed = ClusterRun(shared.ranks + (third,), plan)
    assert any(ln.startswith("Clock offsets to rank 0 measured to within 2.0 us (largest "
                             "offset 0.0 us); ranks 0 1 run on rank 0's kernel")
               for ln in mixed.lines(0))


def record(start: int, finish: int, **fields):
    from torque_async.results import Record
    base = dict(row=0, state=4, pid=1, transfers=100, bytes=100 << 20, sys_bytes=100 << 20,
                extra_transfers=0, lat_min=0, lat_max=0, lat_sum=0, lat_count=0, hist=(),
                samples=(), phase=(0,) * 5, ops=0, ref_rate=0.0, transfer_bytes=1 << 20,
                file="", info="", error="")
    return Record(start=start, finish=finish, **{**base, **fields})


def test_shift_puts_every_time_on_rank_0_s_clock_and_keeps_unset_times_unset():
    rec = record(OFFSET + 10, OFFSET + 50, samples=((OFFSET + 30, 5),),
                 phase=(OFFSET + 1, OFFSET + 9, OFFSET + 10, 0, 0), launched=OFFSET - 7)
    moved = shift(rec, OFFSET)
    assert (moved.start, moved.finish, moved.samples, moved.launched) == (10, 50, ((30, 5),), -7)
    assert moved.phase == (1, 9, 10, 0, 0)


class Meeting(FakeComm):
    """Rank 0 of 3 at the barrier: its arrivals `probed` (matchable while it polls), then
    `late` ones (read only by a blocking recv); the barrier `passes` or never does."""

    def __init__(self, probed: list[int], late: list[int], passes: bool):
        super().__init__(3, [])
        self.probed, self.late, self.passes = probed, late, passes

    def isend(self, obj, dest, tag):
        return type("Done", (), {"wait": lambda self: None})()

    def Ibarrier(self):
        return type("Barrier", (), {"Test": lambda _: self.passes})()

    def improbe(self, tag):
        probed = self.probed
        return probed and type("Msg", (), {"recv": lambda self: probed.pop()})() or None

    def recv(self, tag):
        return self.late.pop()


def test_a_rank_that_never_sets_up_is_named_after_the_timeout():
    ticks = iter(range(0, 10 ** 12, 10 ** 9))           # one second per look at the clock
    rank0 = Cluster(Meeting([2, 0], [], passes=False), clock=ticks.__next__)
    assert rank0.meet(lambda: False, timeout=3) == f"rank 1 on {HOST} did not set up within 3 s"
    assert Cluster(Meeting([2, 0], [], passes=False), clock=ticks.__next__).meet(
        lambda: True, timeout=3) == ""


def test_a_rank_that_never_ends_its_checks_is_named_and_every_rank_ends(capsys):
    """The ranks learn each other's verdict on their plans after a deadline'd meeting: a rank
    stopped in its checks (a tree, the disks) is named by rank 0, which ends the job (exit 1),
    rather than leaving every rank waiting for its verdict for ever."""
    ticks = iter(range(0, 10 ** 15, 10 ** 9))           # one second per look at the clock
    comm = Meeting([2, 0], [], passes=False)

    def abort(code):
        raise SystemExit(code)                          # MPI_Abort ends this rank here
    comm.Abort = abort
    checked = []
    with pytest.raises(SystemExit) as e:
        Cluster(comm, clock=ticks.__next__).agree(lambda: checked.append(True))
    assert e.value.code == 1 and checked == [True]
    assert capsys.readouterr().err.splitlines() == [
        f"torque-async: rank 0 on {HOST}: rank 1 on {HOST} did not finish checking its plan "
        f"within {cluster.SETUP_TIMEOUT:.0f} s (stopped or hung?)",
        f"torque-async: rank 0 on {HOST}: ending every rank"]


def test_rank_0_reads_every_arrival_even_one_matched_only_after_the_barrier():
    """MPI orders no point-to-point message against a collective: an arrival may be matchable
    only once the barrier passed. Left unread, it fails MPI_Finalize (MPICH then leaves its
    /dev/shm file)."""
    comm = Meeting([0], [1, 2], passes=True)
    assert Cluster(comm, clock=iter(range(10 ** 6)).__next__).meet(lambda: False) == ""
    assert comm.late == [] and comm.probed == []


# -- the cluster report, from gathered records ---------------------------------------------

def two_ranks():
    from torque_async.cmdline import parse
    plan = parse(["-p", "2", "-n", "8", "-KB", "64", "-bzero"])
    ranks = (Rank(0, "a", 10, 0, 1000, (record(100, 1_100_000_000),
                                        record(200, 1_000_000_200, row=1))),
             Rank(1, "b", 11, 5, 3000, (record(3_000_000, 2_003_000_000),
                                        record(3_000_000, 1_003_000_000, row=1))))
    return plan, ClusterRun(ranks, plan)


def test_the_cluster_report_names_hosts_and_ranks_and_totals_the_ranks(capsys):
    plan, run = two_ranks()
    from torque_async import sysinfo
    lines = report.render(plan, run.records, run.procs, sysinfo.collect(), "now", cluster=run)
    rows = table("\n".join(lines), CLUSTER_HEADER)
    assert [(r[0], r[-2], r[-1]) for r in rows] == [("0", "a", "0"), ("1", "a", "0"),
                                                     ("2", "b", "1"), ("3", "b", "1")]
    per_test = [100 / (r.elapsed / 1e9) for r in run.records]      # 100 MB each
    host_a = next(ln for ln in lines if ln.startswith("Host a: rank 0; 2 tests"))
    assert host_a.endswith(f"Total {sum(per_test[:2]):.0f} MB/s")
    span = 400 / 2.0029999                # every byte over the first start to the last finish
    assert (f"Cluster total: {sum(per_test):.0f} MB/s (every test on every host: the sum of "
            f"their rates, the BW: line's Total); IOR's aggregate, every byte over the span from "
            f"the first start to the last finish: {span:.0f} MB/s") in lines
    ranks = [sum(per_test[:2]), sum(per_test[2:])]                     # 190.9 and 150
    assert (f"Group 0 (Bzero): sum of rates {sum(per_test):.0f} MB/s; IOR's aggregate "
            f"{span:.0f} MB/s; per rank min {min(ranks):.0f}, max {max(ranks):.0f}, mean "
            f"{sum(ranks) / 2:.0f}, stddev {abs(ranks[0] - ranks[1]) / 2:.0f} MB/s") in lines
    assert "Start skew between ranks (first to last release): 2999.9 us" in lines
    assert any(ln.startswith("Clock offsets to rank 0 measured to within 3.0 us") for ln in lines)


def test_each_rank_s_event_loop_is_named_with_its_own_pid_and_the_busiest_with_its_rank():
    from torque_async import sysinfo
    from torque_async.cmdline import parse
    plan = parse(["-p", "2", "-n", "8", "-KB", "64", "-r"])
    ms = 1_000_000

    def loop(pid: int, busy_ms: int):
        return tuple(record(0, 1000 * ms, row=row, pid=pid, cpu_user=busy_ms * ms)
                     for row in range(2))
    run = ClusterRun((Rank(0, HOST, 3590, 0, 0, loop(3590, 60), True),
                      Rank(1, HOST, 3591, 0, 0, loop(3591, 300), True)), plan)
    lines = report.render(plan, run.records, run.procs, sysinfo.collect(), "now", cluster=run)
    assert [ln for ln in lines if ln.startswith("PID ")] == [
        "PID 3590 is rank 0's torque-async: its 2 processes of the group run as coroutines on "
        "its own event loop",
        "PID 3591 is rank 1's torque-async: its 2 processes of the group run as coroutines on "
        "its own event loop"]
    assert "Event loops: 2, one per rank; the busiest, rank 1's: busy 30% of proc 2's " \
           "measured 1000 ms (its thread's CPU time; it ran SCHED_OTHER)" in lines
    doc = export.document(plan, run.records, run.procs, sysinfo.collect(), "now")
    doc = json.loads(export.json_text(report_cluster.document([run], doc)))
    jsonschema.validate(doc, export.schema())
    assert {k: doc["event_loop"][k] for k in ("proc", "rank", "loops")} == \
        {"proc": 2, "rank": 1, "loops": 2}
    alone = report.render(plan, run.ranks[0].records, plan.procs(), sysinfo.collect(), "now")
    assert "PID 3590 is torque-async itself: its 2 processes run as coroutines on one event " \
           "loop" in alone


def test_tests_that_did_not_overlap_only_across_ranks_name_the_start_skew():
    from torque_async.cmdline import parse
    plan = parse(["-p", "2", "-n", "8", "-KB", "64", "-bzero"])
    ms = 1_000_000
    apart = ClusterRun((Rank(0, "a", 10, 0, 1000, (record(1 * ms, 5 * ms),
                                                   record(1 * ms, 6 * ms, row=1))),
                        Rank(1, "b", 11, 0, 1000, (record(9 * ms, 12 * ms),
                                                   record(9 * ms, 13 * ms, row=1)))), plan)
    line = report.overlap_line(plan, apart.records, 0, apart)
    assert line.startswith("Warning: the measured intervals did not all overlap; each rank's "
                           "own tests ran together, but the ranks started 8000.0 us apart")
    alone = ClusterRun((apart.ranks[0], Rank(1, "b", 11, 0, 1000, (
        record(9 * ms, 10 * ms), record(11 * ms, 13 * ms, row=1)))), plan)  # rank 1's own too
    line = report.overlap_line(plan, alone.records, 0, alone)
    assert "did not all overlap" in line and "start skew" not in line


def test_the_overlap_line_labels_every_rank_s_tests_that_ran_unmeasured():
    """Under mpiexec the line read 'proc 0 (Zero) 4 ms, proc 2 4 ms': rank 1's rows (2, 3) are
    not the plan's, so they had no label; every rank's processes label them now."""
    from torque_async.cmdline import parse
    plan = parse(["-p", "2", "-n", "8", "-KB", "64", "-bzero"])
    ms = 1_000_000
    ranks = tuple(Rank(k, "a", 10 + k, 0, 1000, (
        record(1 * ms, 5 * ms, ran=(1 * ms, 9 * ms)),
        record(1 * ms, 9 * ms, row=1, ran=(1 * ms, 9 * ms)))) for k in (0, 1))
    run = ClusterRun(ranks, plan)
    label = report.test_label(plan.groups[0])
    line = report.overlap_line(plan, run.records, 0, run, run.procs)
    assert f"unmeasured in it: proc 0 ({label}) 4 ms, proc 2 ({label}) 4 ms;" in line, line


def test_the_cluster_json_has_hosts_and_ranks_and_validates():
    plan, run = two_ranks()
    from torque_async import sysinfo
    doc = export.document(plan, run.records, run.procs, sysinfo.collect(), "now")
    doc = json.loads(export.json_text(report_cluster.document([run], doc)))
    jsonschema.validate(doc, export.schema())
    assert [(t["host"], t["rank"]) for t in doc["tests"]] == [("a", 0), ("a", 0), ("b", 1),
                                                              ("b", 1)]
    assert doc["cluster"]["start_skew_ns"] == 3_000_000 - 100
    assert [r["offset_ns"] for r in doc["cluster"]["ranks"]] == [0, 5]
    csv_head = export.csv_text(doc).splitlines()[:2]
    assert "host" in csv_head[0].split(",") and ",a,0," in csv_head[1]


# -- without a launcher, and bad input under one -------------------------------------------

def test_without_a_launcher_mpi4py_is_never_imported(tmp_path):
    env = {k: v for k, v in ENV.items() if k not in cluster.LAUNCHER_RANK}
    code = ("import sys; from torque_async import cli; "
            "code = cli.execute(['-smkey', '0x7930', '-nh', '-n', '4', '-KB', '64', '-bzero']); "
            "print('mpi4py' in sys.modules, code)")
    out = subprocess.run([*CMD[:1], "-c", code], capture_output=True, text=True, env=env,
                         timeout=120).stdout
    assert out.splitlines()[-1] == "False 0"


def under_launcher(*args: str, env_extra: dict[str, str] | None = None, cwd=None):
    env = {**ENV, "PMI_RANK": "0", "PMI_SIZE": "2", **(env_extra or {})}
    done = subprocess.run([*CMD, *args], capture_output=True, text=True, env=env, timeout=60,
                          cwd=cwd)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("args", [("-child", "0", "-p", "2"), ("-sp",), ("-g",)])
def test_child_sp_and_g_are_refused_under_a_launcher(args):
    code, out, err = under_launcher("-smkey", "0x7931", *args, "-n", "4", "-KB", "64", "-bzero")
    assert_one_clean_line(code, out, err, "cannot run under an MPI launcher")


def test_a_rank_checks_its_own_tree_and_refuses_what_mpiexec_cannot_run_by_quit_too(tmp_path):
    """The checks see the rank's plan (its default -dir is filestest.HOST.rRANK): they looked at
    filestest, so a rank's tree was never reused, and an output inside it was not refused (the
    results replaced a tree file). -quit refuses what mpiexec cannot run, as the run does."""
    mine = f"filestest.{HOST}.r0"
    tree = ["-n", "4", "-KB", "4", "-mfileKB", "16", "-files", "5"]
    done = subprocess.run([*CMD, "-smkey", "0x7934", "-nh", "-cfiles", "-dir", mine, *tree],
                          capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    code, out, err = under_launcher("-smkey", "0x7934", "-quit", *tree, cwd=tmp_path)
    assert (code, err) == (0, "") and f"dir='{mine}'" in out
    code, out, err = under_launcher("-smkey", "0x7934", "-quit", "-json",
                                    f"{mine}/000/f0000001", *tree, cwd=tmp_path)
    assert_one_clean_line(code, out, err, f"{mine}/000/f0000001 is inside the -files tree")
    code, out, err = under_launcher("-smkey", "0x7934", "-quit", "-sp", *tree, cwd=tmp_path)
    assert_one_clean_line(code, out, err, "-sp runs one test in this process: it cannot run")
    code, out, err = under_launcher("-smkey", "0x7934", "-quit", "-dir", "site", "-cfiles",
                                    "-web", cwd=tmp_path)
    assert_one_clean_line(code, out, err, "-cfiles with a -dir of your own under mpiexec: every "
                                          "rank would write the same tree")


def test_two_ranks_serve_one_site_and_share_its_log(tmp_path):
    """mpiexec -n 2 ... -dir site -web: both ranks' clients read the one tree (made once,
    before), append to its one log, and the log is gone at the end."""
    web = ["-dir", str(tmp_path / "site"), "-webFiles", "40", "-p", "3", "-n", "200", "-i", "1",
           "-appendEvery", "2"]
    done = subprocess.run([*CMD, "-smkey", "0x7936", "-nh", *web[:4], "-cfiles", "-n", "1",
                           "-web"], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    code, out, err = finished(mpiexec(2, "-smkey", "0x7937", "-nh", "-json",
                                      str(tmp_path / "out.json"), *web, "-web"))
    assert code == 0, err
    s = json.loads((tmp_path / "out.json").read_text())["plan"]["groups"][0]["web"]
    assert s["clients"] == 6 and s["measured"] == 2 * 3 * 200
    assert s["ops"]["append"]["count"] == 2 * 3 * 100
    assert s["log_bytes"] >= s["appended_bytes"] > 0 and not s["log_kept"]
    assert not (tmp_path / "site" / "torque-web.log").exists()
    assert "Event loops: 2, one per rank" in out


@pytest.mark.parametrize("quit", [["-quit"], []])
def test_a_plan_one_rank_refuses_ends_every_rank_at_once_in_one_line_each(tmp_path, quit):
    """Each rank checks its own plan: rank 1 refused an output inside its own tree and left,
    and rank 0, which had none to refuse, waited in MPI's start for ever."""
    tree = ["-n", "4", "-KB", "4", "-mfileKB", "16", "-files", "5"]
    for k in range(2):
        done = subprocess.run([*CMD, "-smkey", "0x7935", "-nh", "-cfiles", "-dir",
                               f"filestest.{HOST}.r{k}", *tree], capture_output=True, text=True,
                              env=ENV, cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
    inside = f"filestest.{HOST}.r1/out.json"
    run = mpiexec(2, "-smkey", "0x7935", *quit, "-json", inside, *tree, cwd=tmp_path)
    everyone = psutil.Process(run.pid)
    try:
        code, out, err = finished(run, timeout=60)
    finally:                           # (hung: its ranks spun on, 2 CPUs' worth, for hours)
        for proc in [*everyone.children(recursive=True), everyone] if run.poll() is None else ():
            proc.kill()
    own = f"torque-async: error: -json {inside} is inside the -files tree filestest.{HOST}.r1"
    told = f"torque-async: error: rank 1 on {HOST} refused the plan: -json {inside} is inside"
    lines = err.splitlines()
    assert (code, out, len(lines)) == (2, "", 2), err
    assert sorted(ln.split(":", 3)[1] for ln in lines) == [" error"] * 2
    assert any(ln.startswith(own) for ln in lines) and any(ln.startswith(told) for ln in lines)
    assert not (tmp_path / inside).exists()


def test_bad_input_under_mpiexec_is_one_line_from_every_rank():
    code, out, err = finished(mpiexec(3, "-smkey", "0x7933", "-sp", "-n", "4", "-KB", "64",
                                      "-bzero"))
    line = ("torque-async: error: -sp runs one test in this process: it cannot run under an MPI "
            "launcher (mpiexec)")
    assert (code, out, err) == (2, "", (line + "\n") * 3)


def test_a_launcher_without_mpi4py_is_one_line(tmp_path):
    shadow = tmp_path / "shadow" / "mpi4py"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no mpi4py here')\n")
    code, out, err = under_launcher("-smkey", "0x7932", "-n", "4", "-KB", "64", "-bzero",
                                    env_extra={"PYTHONPATH": f"{shadow.parent}:{REPO}"})
    assert_one_clean_line(code, out, err, f"(rank 0 on {HOST}) but mpi4py is not installed")


# -- real ranks under mpiexec --------------------------------------------------------------

def test_two_ranks_give_one_report_with_every_rank_s_rows(tmp_path):
    code, out, err = finished(mpiexec(2, "-smkey", "0x7940", "-nh", "-json", "run.json",
                                      "-p", "2", "-n", "16", "-KB", "64", "-bzero"))
    assert code == 0, err
    rows = table(out, CLUSTER_HEADER)
    assert [(r[0], r[-2], r[-1]) for r in rows] == [(str(i), HOST, str(i // 2))
                                                     for i in range(4)]
    assert len({r[4] for r in rows}) == 1 and int(rows[0][4]) > 0     # the same plan each
    assert len({r[10] for r in rows}) == 4                            # four processes
    assert out.count(CLUSTER_HEADER) == 1 and "Cluster: 2 ranks on 1 host" in out
    doc = export.load(str(tmp_path / "run.json"))
    jsonschema.validate(doc, export.schema())
    assert [t["rank"] for t in doc["tests"]] == [0, 0, 1, 1]
    assert doc["bandwidth"]["total"] == pytest.approx(sum(t["sys_bw"] for t in doc["tests"]))
    assert f"Cluster total: {doc['bandwidth']['total']:.0f} MB/s" in out
    total = doc["cluster"]["aggregates"]["total"]
    assert total["sum_of_rates"] == pytest.approx(doc["bandwidth"]["total"])
    assert 0 < total["span_rate"] <= total["sum_of_rates"] * 1.0001   # one span holds them all


def test_three_ranks_each_use_their_own_scratch_files_and_leave_none(tmp_path):
    key, before = 0x7950, shm_now()
    code, out, err = finished(mpiexec(3, "-smkey", hex(key), "-nh", "-n", "16", "-KB", "4",
                                      "-mfileMB", "1", "-r"))
    assert (code, err) == (0, "")         # no note: MPI_Finalize found nothing left unmatched
    assert shm_now() <= before            # MPICH's own file too (the guard's after Finalize)
    rows = table(out, CLUSTER_HEADER)
    assert [r[-1] for r in rows] == ["0", "1", "2"]
    dirs = [Path(r[9]).parent.name for r in rows]
    assert [d.split(".")[-3:-1] for d in dirs] == [[HOST, f"r{k}"] for k in range(3)]  # .RANDOM
    assert not list(tmp_path.glob("torque-async-scratch.*"))
    assert not any(Path("/dev/shm", segment_name(key + k)).exists() for k in range(3))


@pytest.mark.parametrize("sig, target, series", [
    (signal.SIGKILL, "rank", ()), (signal.SIGINT, "rank", ()), (signal.SIGINT, "mpiexec", ()),
    (signal.SIGINT, "rank", ("-repeat", "2")), (signal.SIGINT, "rank 0", ())])
def test_a_killed_or_interrupted_rank_ends_every_rank_and_nothing_is_left(tmp_path, sig, target,
                                                                          series):
    key = 0x7960 + sig * 2 + 0x20 * bool(series) + 0x40 * (target == "mpiexec") + \
        0x80 * (target == "rank 0")                                 # -repeat:
    before = shm_now()                                              # stopped in its first run
    run = mpiexec(2, "-smkey", hex(key), "-nh", *series, "-n", "64", "-KB", "4", "-mfileMB", "1",
                  "-i", "1000000", "-r", *LONG)
    for k in range(2):
        wait_for_rows(key + k, 3, RUNNING)
    owners = [psutil.Process(owner_of(segment_name(key + k))) for k in range(2)]
    scratch = list(tmp_path.glob("torque-async-scratch.*"))
    servers = [d for o in owners                        # the workers' servers' socket dirs
               for d in Path(tempfile.gettempdir()).glob(f"torque-async-forkserver.{o.pid}.*")]
    assert len(scratch) == 2 and len(servers) == 2
    mpis = [Path(p) for o in owners for p in mapped_by(o.pid)
            if not Path(p).name.startswith("torque-async")]
    assert mpis, "MPICH made no file of its own in /dev/shm: this test would prove nothing"
    everyone = owners + [c for o in owners for c in o.children(recursive=True)]
    began = time.monotonic()
    # rank 0 alone: its report's survey of every host (a collective) waited for rank 1, which
    # ran on: the job hung
    {"mpiexec": run, "rank": owners[1], "rank 0": owners[0]}[target].send_signal(sig)
    code, out, err = finished(run, timeout=60)
    assert time.monotonic() - began < 30
    assert code == (130 if sig == signal.SIGINT else 9), err
    if target.startswith("rank") and sig == signal.SIGINT:   # (its MPI_Abort may end mpiexec
        rank = 0 if target == "rank 0" else 1                 # first)
        assert not err or f"torque-async: rank {rank} on {HOST}: interrupted by SIGINT" in err, err
    elif target == "mpiexec":          # each rank gets it; the first to abort speaks, though
        assert not err or re.search(   # mpiexec, itself interrupted, may end before passing it on
            rf"torque-async: rank [01] on {HOST}: interrupted by SIGINT", err), err
    _, alive = psutil.wait_procs(everyone, timeout=15)
    assert not alive, "a rank or a test process outlived the run"
    assert gone([Path("/dev/shm", segment_name(key + k)) for k in range(2)] + mpis)
    assert gone(scratch) and gone(servers)
    assert not still_left(before)


def test_a_rank_interrupted_in_its_set_up_ends_every_rank_at_once(tmp_path):
    """Rank 1 stopped while it writes its scratch file: it never reaches the MPI set-up
    barrier, and rank 0 must not wait there for the set-up timeout (300 s)."""
    key, before = 0x79E0, shm_now()
    run = mpiexec(2, "-smkey", hex(key), "-nh", "-n", "64", "-KB", "64", "-mfileMB", "3000",
                  "-rand", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("torque-async-scratch.*/test0.dat"))) < 2:   # both writing
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.02)
    scratch = list(tmp_path.glob("torque-async-scratch.*"))
    began = time.monotonic()
    psutil.Process(owner_of(segment_name(key + 1))).send_signal(signal.SIGINT)
    code, out, err = finished(run, timeout=60)
    assert time.monotonic() - began < 30 and code == 130, err
    assert not err or f"torque-async: rank 1 on {HOST}: interrupted by SIGINT" in err, err
    assert gone(scratch) and gone([Path("/dev/shm", segment_name(key + k)) for k in range(2)])
    assert not still_left(before)


def test_a_rank_s_guard_removes_only_the_mpi_files_it_was_given_while_they_are_the_same(
        tmp_path):
    from torque_async import cleanup_guard
    ours, theirs = tmp_path / "mpich_shm_1_0", tmp_path / "mpich_shm_2_0"
    ours.write_text("x")
    theirs.write_text("x")
    given = [(ours.stat().st_ino, str(ours)), (theirs.stat().st_ino, str(theirs))]
    (tmp_path / "new").write_text("another job's, made since")
    os.replace(tmp_path / "new", theirs)              # the same name, another inode
    assert theirs.stat().st_ino != given[1][0]
    cleanup_guard.clean(never_alive(), segment_name(0x79f0), str(tmp_path / "none"), given)
    assert not ours.exists() and theirs.exists()


def test_a_rank_that_ended_mpi_has_its_guard_remove_only_the_mpi_files_left(tmp_path):
    mine, other = tmp_path / "mpich_shm_1_0", tmp_path / "mpich_shm_2_0"
    mine.write_text("x")
    other.write_text("x")
    scratch_dir = tmp_path / "torque-async-scratch.1.h.r0"
    Path(f"{scratch_dir}.abc").mkdir()
    guard = subprocess.run([sys.executable, "-m", "torque_async.cleanup_guard", str(never_alive()),
                            segment_name(0x79f1), str(scratch_dir), str(mine.stat().st_ino),
                            str(mine), str(other.stat().st_ino + 1), str(other)],
                           input=b"done", env=ENV, timeout=60)
    assert guard.returncode == 0
    assert not mine.exists() and other.exists() and Path(f"{scratch_dir}.abc").exists()


def test_mpi_files_are_the_dev_shm_files_mapped_and_not_removed(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 rw-s 00000000 00:1a 42                         /dev/shm/mpich_shm_ab_0\n"
        "7f10-7f20 rw-s 00000000 00:1a 43                         /dev/shm/ucx_shm_1 (deleted)\n"
        "7f20-7f30 r-xp 00000000 08:01 44                         /usr/lib/libmpi.so.12\n"
        "7f30-7f40 rw-p 00000000 00:00 0 \n"
        "7f40-7f50 rw-s 00000000 00:1a 42                         /dev/shm/mpich_shm_ab_0\n")
    assert cluster.mpi_files(str(maps)) == [(42, "/dev/shm/mpich_shm_ab_0")]


def dead_segment(key: int) -> int:
    """A segment as a killed run leaves it; its owner's pid."""
    from torque_async.results import Results
    dead = never_alive(key % 64)
    res = Results.create(segment_name(key), 1)
    res.header["owner"] = dead
    res.release()
    return dead


def test_free_shared_memory_under_mpiexec_frees_every_rank_s_segment_and_scratch(tmp_path):
    key = 0x7990
    pids = [dead_segment(key + k) for k in range(2)]
    left = [tmp_path / f"torque-async-scratch.{pids[k]}.{HOST}.r{k}.abc{k}" for k in range(2)]
    alone = tmp_path / f"torque-async-scratch.{pids[0]}.zz9"     # a run without mpiexec: not
    for d in (*left, alone):                                     # a rank's to judge
        d.mkdir()
        identity.mark_dir(str(d))                                # (as a run marks its own)
    code, out, err = finished(mpiexec(2, "-smkey", hex(key), "-freeSharedMemory"))
    assert code == 0, err
    assert sorted(out.splitlines()) == sorted(
        [f"rank {k} on {HOST}: removed /dev/shm/{segment_name(key + k)} (created by pid "
         f"{pids[k]})" for k in range(2)]
        + [f"rank {k} on {HOST}: removed the scratch directory {d} of a run that is gone"
           for k, d in enumerate(left)])
    assert not any(Path("/dev/shm", segment_name(key + k)).exists() for k in range(2))
    assert not any(d.exists() for d in left) and alone.exists()


def test_free_shared_memory_under_mpiexec_refuses_a_rank_s_live_segment():
    key = 0x79a0
    dead = dead_segment(key)
    live = start("-smkey", hex(key + 1), "-g", "-n", "4", "-i", "1", "-KB", "64", "-bzero",
                 stdin=subprocess.PIPE)
    wait_for_rows(key + 1, 1, READY)
    code, out, err = finished(mpiexec(2, "-smkey", hex(key), "-freeSharedMemory"))
    assert code == 2
    assert out.splitlines() == [f"rank 0 on {HOST}: removed /dev/shm/{segment_name(key)} "
                                f"(created by pid {dead})"]
    assert (f"torque-async: error: rank 1 on {HOST}: shared memory key {key + 1:#x} is in use "
            f"by pid {live.pid}, still running: -freeSharedMemory removes only what a killed "
            f"run left") in err
    assert Path("/dev/shm", segment_name(key + 1)).exists()
    live.communicate("\n", timeout=120)
    assert live.returncode == 0


def test_plot_names_each_test_s_rank_and_its_host_when_hosts_differ():
    plan, run = two_ranks()
    from torque_async import plot, sysinfo
    plain = export.document(plan, run.records, run.procs, sysinfo.collect(), "now")
    doc = json.loads(export.json_text(report_cluster.document([run], plain)))
    kind = doc["tests"][2]["kind"]
    assert [plot.name(doc, t) for t in doc["tests"]][1:3] == [
        f"proc 1 {kind} (rank 0 on a)", f"proc 2 {kind} (rank 1 on b)"]
    one_host = ClusterRun(tuple(replace(r, host="a") for r in run.ranks), plan)
    doc = json.loads(export.json_text(report_cluster.document([one_host], plain)))
    assert plot.name(doc, doc["tests"][2]) == f"proc 2 {kind} (rank 1)"
    assert plot.name(plain, plain["tests"][2]) == f"proc 2 {kind}"


def test_compare_matches_a_cluster_run_s_tests_rank_by_rank():
    plan, run = two_ranks()
    from torque_async import compare, sysinfo
    doc = export.document(plan, run.records, run.procs, sysinfo.collect(), "now")
    doc = json.loads(export.json_text(report_cluster.document([run], doc)))
    found = compare.compare(doc, doc)
    assert not found.only_a and not found.only_b
    names = {c.test for c in found.changes}
    assert {n for n in names if "rank 1 on b" in n} and {n for n in names if "rank 0 on a" in n}
    assert all(c.pct == 0 for c in found.changes)
    alone = json.loads(export.json_text(export.document(plan, run.ranks[0].records,
                                                        plan.procs(), sysinfo.collect(), "now")))
    one = compare.compare(doc, alone)           # a one-host run: rank 0's tests, matched
    assert {c.test for c in one.changes if c.role != compare.TOTAL} == \
        {n for n in names if "rank 0 on a" in n} and all(c.pct == 0 for c in one.changes)
    assert one.only_a and all("rank 1 on b" in n for n in one.only_a)
    assert "note: A is a cluster run (2 ranks, mpiexec), B is not: tests are matched by rank, " \
           "a one-host run's tests as rank 0's" in compare.provenance(doc, alone)
    four = {**doc, "cluster": {**doc["cluster"], "ranks": doc["cluster"]["ranks"] * 2}}
    assert any(ln.startswith("note: A is a cluster run (2 ranks, mpiexec), B is a cluster run "
                             "(4 ranks, mpiexec)") for ln in compare.provenance(doc, four))
    assert not any("rank" in ln for ln in compare.provenance(alone, alone))


# -- several runs (-repeat, -baseline) and every host's machine ----------------------------

def test_survey_keeps_one_machine_per_host_and_rank_0_s_sysctl_names_the_others():
    from torque_async import sysinfo
    here = sysinfo.collect()
    other = replace(here, hostname="h1", mem_mb=here.mem_mb * 2)

    class Hosts(Meeting):
        def allgather(self, value):
            return [("h0", "k0"), ("h1", "k1"), ("h0", "k0")]

        def gather(self, value, root):
            assert value is not None                      # rank 0 is its host's first
            return [value, (other, ["l1"]), None]         # rank 2 shares h0: sends nothing

    rank0 = Cluster(Hosts([0, 1, 2], [], passes=True))
    rank0.host = "h0"
    assert rank0.survey(here, ["l0"]) == ["l0", "", "--- host h1 (ranks 1) ---", "l1"]
    assert rank0.machines == {"h0": here, "h1": other}


def two_hosts_with_machines(model_b: str):
    from torque_async import sysinfo
    plan, run = two_ranks()
    a = replace(sysinfo.collect(), hostname="a")
    b = replace(a, hostname="b", ethernet="02:00:00:00:00:01", cpu_model=model_b)
    return plan, replace(run, machines={"a": a, "b": b})


def test_a_host_whose_machine_differs_is_named_with_the_header_lines_that_differ():
    plan, run = two_hosts_with_machines("Other CPU 9000")
    lines = run.lines(0)
    assert "Host b: machine differs from rank 0's (the header's): hw.model: Other CPU 9000" \
        in lines
    assert not [ln for ln in lines if ln.startswith("Host a: machine")]
    plan, same = two_hosts_with_machines(run.machines["a"].cpu_model)
    assert "Host b: machine as rank 0's (the header's)" in same.lines(0)   # name and MAC aside


def test_every_host_s_machine_is_in_the_json_and_compare_notes_different_ones():
    from torque_async import compare
    plan, run = two_hosts_with_machines("Other CPU 9000")
    doc = export.document(plan, run.records, run.procs, run.machines["a"], "now")
    doc = json.loads(export.json_text(report_cluster.document([run], doc)))
    jsonschema.validate(doc, export.schema())
    hosts = doc["cluster"]["hosts"]
    assert [(h["host"], h["ranks"], h["system"]["cpu_model"]) for h in hosts] == \
        [("a", [0], run.machines["a"].cpu_model), ("b", [1], "Other CPU 9000")]
    alone = json.loads(json.dumps(doc))
    alone["cluster"]["hosts"] = alone["cluster"]["hosts"][:1]     # host a only
    assert compare.provenance(doc, doc) == []
    note = compare.provenance(alone, doc)[0]
    assert note.startswith("note: different machines:") and "b Other CPU 9000" in note


def test_each_rank_s_tests_get_their_own_figures_alone(monkeypatch):
    """-baseline on two ranks: the gathered runs alone hold rank 0's records of a group then
    rank 1's; each test of the whole plan gets its own rank's figure alone."""
    from torque_async import cmdline, orchestrator, runs
    from torque_async.units import MB
    from test_report import record as rec

    class TwoRanks:
        rank, size, meet = 0, 2, None

        def gather(self, outcome, plan):             # rank 1 did 10 times the transfers
            k = len(outcome.records)
            theirs = tuple(replace(r, row=k + r.row, transfers=10 * r.transfers)
                           for r in outcome.records)
            return replace(outcome, records=outcome.records + theirs)

    def fake_run(plan, linesize, meet=None):
        return orchestrator.Outcome(tuple(rec(p.row, 0, 10 ** 9, 100 * (p.group.index + 1), MB)
                                          for p in plan.procs()), ())
    monkeypatch.setattr(runs.orchestrator, "run", fake_run)
    plan = cmdline.parse("-baseline -n 8 -load -p 2 -n 4 -bzero".split())
    done = runs.run(plan, 64, TwoRanks())
    procs = tuple(replace(p, row=r * 3 + p.row) for r in range(2) for p in plan.procs())
    assert [a["iops"] for a in done.alone_figures(procs)] == [100, 200, 200, 1000, 2000, 2000]


def block(out: str, header: str) -> list[list[str]]:
    return table(out, header + ",Host,Rank")


@pytest.mark.parametrize("ranks, key, plan", [
    (2, 0x7a00, ["-baseline", "-p", "2", "-n", "16", "-KB", "64", "-bzero",
                 "-n", "16", "-KB", "64", "-load"]),
    (3, 0x7a08, ["-p", "1", "-n", "16", "-KB", "64", "-bzero"])])
def test_repeat_and_baseline_run_every_phase_on_every_rank(tmp_path, ranks, key, plan):
    code, out, err = finished(mpiexec(ranks, "-smkey", hex(key), "-nh", "-json", "run.json",
                                      "-repeat", "2", *plan), timeout=240)
    assert code == 0, err
    doc = export.load(str(tmp_path / "run.json"))
    jsonschema.validate(doc, export.schema())
    per_rank = len(doc["tests"]) // ranks
    every = [str(p // per_rank) for p in range(per_rank * ranks)]        # rank of each proc
    assert [r[-1] for r in table(out, CLUSTER_HEADER)] == every
    repeated = block(out, report.REPEAT_HEADER)
    assert sorted({(r[0], r[-1]) for r in repeated}, key=lambda x: int(x[0])) == \
        [(str(p), rank) for p, rank in enumerate(every)]
    assert doc["repeats"]["count"] == 2
    skews = [r["cluster"]["start_skew_ns"] / 1000 for r in doc["repeats"]["runs"]]
    said = next(ln for ln in out.splitlines() if ln.startswith("Start skew between ranks in each"))
    assert [v.split()[0] for v in said.split(": ")[1].split(", ")] == [f"{v:.1f}" for v in skews]
    for run in doc["repeats"]["runs"]:                   # each repetition: every rank's tests
        assert [t["rank"] for t in run["tests"]] == [int(r) for r in every]
        assert run["bandwidth"]["total"] == pytest.approx(sum(t["sys_bw"] for t in run["tests"]))
        assert [r["rank"] for r in run["cluster"]["ranks"]] == list(range(ranks))
        assert run["cluster"]["ranks"][0]["offset_ns"] == 0
    assert doc["cluster"]["hosts"] == [{"host": HOST, "ranks": list(range(ranks)),
                                        "system": doc["system"]}]
    totals = [ln for ln in out.splitlines() if ln.startswith("Cluster total:")]
    bw = out.split("BW:, ")[1].split("\n")[0].split(", ")[-1]     # the medians' sum
    assert totals == [f"Cluster total: {bw} MB/s (every test on every host: the sum of their "
                      f"rates, the median of 2 repetitions, as the BW: line's Total)"]
    if "-baseline" in plan:
        found = block(out, report.BASELINE_HEADER)
        assert {(r[0], r[1], r[-1]) for r in found} == \
            {(str(p), "Bzero" if p % per_rank < 2 else "Load", rank)
             for p, rank in enumerate(every)}
        assert all(t["alone"]["bw"] > 0 for t in doc["tests"])          # alone on every rank
        assert {c["proc"] for c in doc["baseline"]["changes"]} == set(range(len(every)))
    else:
        assert "Alone vs together" not in out and doc["baseline"] is None
    from torque_async import compare, plot
    found = compare.compare(doc, doc)
    assert not found.only_a and len({c.test for c in found.changes}) == len(every) + 1
    assert plot.render(doc, str(tmp_path / "run.png")) and (tmp_path / "run.png").stat().st_size


def test_only_rank_0_writes_sysctl_current(tmp_path):
    dirs = [tmp_path / "zero", tmp_path / "one"]
    for d in dirs:
        d.mkdir()
    args = [*CMD, "-smkey", "0x7a18", "-nh", "-bo", "-n", "16", "-KB", "64", "-bzero"]
    done = subprocess.run([MPIEXEC, "-n", "1", "-wdir", str(dirs[0]), *args, ":",
                           "-n", "1", "-wdir", str(dirs[1]), *args],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [d.name for d in dirs if (d / "sysctl.current").exists()] == ["zero"]
    lines = (dirs[0] / "sysctl.current").read_text().splitlines()
    assert f"hostname: {HOST}" in lines and not [ln for ln in lines if ln.startswith("--- host")]


# -- one plan, and no rank waited for for ever -------------------------------------------------

class Agreeing(FakeComm):
    """Rank `rank` of as many ranks as `plans` (each rank's -quit lines): the digests and lines
    every rank sends, gathered at once."""

    def __init__(self, plans: list[list[str]], rank: int = 0):
        super().__init__(len(plans), [])
        self.plans, self.rank = plans, rank

    def Get_rank(self):
        return self.rank

    def Iallgather(self, mine, every):
        import hashlib
        import numpy as np
        for r, lines in enumerate(self.plans):
            every[r] = np.frombuffer(hashlib.sha256("\n".join(lines).encode()).digest(), np.uint8)
        return type("Done", (), {"Test": lambda _: True})()

    def allgather(self, value):
        if isinstance(value, list):
            return self.plans
        return super().allgather(value)


def plan_of(*args: str) -> list[str]:
    from torque_async import cmdline, helptext
    return cluster.plan_digest_lines(helptext.plan_lines(cmdline.parse(list(args))))


def test_every_rank_runs_rank_0_s_plan_and_one_with_another_is_named_with_the_difference():
    same = plan_of("-n", "40", "-MB", "4", "-bcopy")
    assert same == plan_of("-n", "0x28", "-MB", "4", "-bcopy", "-seed", "7")   # typed apart
    Cluster(Agreeing([same, same, same])).same_plan(same)          # agreed: nothing raised
    other = plan_of("-n", "40", "-MB", "1", "-load", "-n", "10", "-MB", "1", "-bzero")
    for rank in (0, 2):                   # every rank says it, the one that differs too
        job = Cluster(Agreeing([same, same, other], rank))
        with pytest.raises(cluster.UsageError) as e:
            job.same_plan([same, same, other][rank])
        assert str(e.value) == (
            f"rank 2 on {HOST} has another plan than rank 0 (every rank runs one plan): rank 0 "
            f"has 'test processes: 1 in 1 groups (-fast)', rank 2 on {HOST} 'test processes: "
            f"2 in 2 groups (-slow)'")
        assert job.together               # every rank refused together: no MPI_Abort


def outcome_of_a_run():
    from torque_async.orchestrator import Outcome
    return Outcome(records=(), failures=())


def test_a_rank_that_does_not_end_its_run_within_rank_timeout_is_named_and_every_rank_ends(
        capsys):
    """At once: a rank that never came may yet come to a later collective (capacity's next
    step) and pair with the wrong one."""
    from torque_async import cmdline
    plan = cmdline.parse(["-rankTimeout", "4", "-n", "8", "-KB", "64", "-bzero"])
    ticks = iter(range(0, 10 ** 12, 10 ** 9))           # one second per look at the clock
    comm = Meeting([2, 0], [], passes=False)

    def abort(code):
        raise SystemExit(code)                          # MPI_Abort ends this rank here
    comm.Abort = abort
    job = Cluster(comm, clock=ticks.__next__)
    job.timeout = plan.settings.rankTimeout
    with pytest.raises(SystemExit) as e:
        job.gather(outcome_of_a_run(), plan)
    assert e.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"torque-async: rank 0 on {HOST}: rank 1 on {HOST} did not end its run within 4 s of "
        f"this rank's (-rankTimeout): stopped or hung?",
        f"torque-async: rank 0 on {HOST}: ending every rank"]


def test_a_rank_other_than_0_names_rank_0_when_it_does_not_come_and_says_nothing():
    class Rank1(Meeting):
        def Get_rank(self):
            return 1
    ticks = iter(range(0, 10 ** 12, 10 ** 9))
    job = Cluster(Rank1([], [], passes=False), clock=ticks.__next__)
    assert job.assemble(4, lambda: False, "end its run") == (
        f"rank 0 on {HOST} did not end its run, or name who did not, within 9 s of this "
        f"rank's (-rankTimeout): stopped or hung?")


def test_each_meeting_s_arrivals_have_a_tag_of_their_own():
    """A rank may send the next meeting's arrival before rank 0 has read all of this one's:
    with one tag, rank 0 took it for this meeting's and waited for ever at the next."""
    tags = []

    class Tagged(Meeting):
        def isend(self, obj, dest, tag):
            tags.append(tag)
            return super().isend(obj, dest, tag)
    comm = Tagged([0, 1, 2], [], passes=True)
    job = Cluster(comm, clock=iter(range(10 ** 6)).__next__)
    assert job.meet(lambda: False) == ""
    comm.probed = [0, 1, 2]
    assert job.assemble(5, lambda: False, "end its run") == ""
    assert len(set(tags)) == 2


def test_ranks_with_different_plans_are_refused_in_one_line_each_before_any_set_up(tmp_path):
    run = subprocess.run([MPIEXEC, "-n", "2", *CMD, "-smkey", "0x7a40", "-nh", "-n", "40",
                          "-MB", "4", "-bcopy", ":", "-n", "1", *CMD, "-smkey", "0x7a40", "-nh",
                          "-n", "40", "-MB", "1", "-load", "-n", "10", "-MB", "1", "-bzero"],
                         capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)
    lines = run.stderr.splitlines()
    assert (run.returncode, run.stdout, len(lines)) == (2, "", 3), run.stderr
    assert all(ln.startswith(f"torque-async: error: rank 2 on {HOST} has another plan than "
                             f"rank 0") for ln in lines)
    assert not list(tmp_path.iterdir())                 # nothing was set up


def test_a_stopped_rank_is_named_after_rank_timeout_and_the_job_ends_leaving_nothing(tmp_path):
    key, before = 0x7a50, shm_now()
    run = mpiexec(2, "-smkey", hex(key), "-nh", "-rankTimeout", "2", "-t", "3", "-n", "4",
                  "-i", "100000000", "-MB", "1", "-bcopy", cwd=tmp_path)
    for k in range(2):
        wait_for_rows(key + k, 1, RUNNING)
    stopped = psutil.Process(owner_of(segment_name(key + 1)))
    everyone = [stopped, *stopped.children(recursive=True)]
    stopped.suspend()
    try:
        code, out, err = finished(run, timeout=60)
    finally:
        stopped.resume() if stopped.is_running() else None
    assert code == 1, err
    assert (f"torque-async: rank 0 on {HOST}: rank 1 on {HOST} did not end its run within 2 s "
            f"of this rank's (-rankTimeout): stopped or hung?") in err
    _, alive = psutil.wait_procs(everyone, timeout=15)
    assert not alive
    assert gone([Path("/dev/shm", segment_name(key + k)) for k in range(2)])
    assert not still_left(before)                                  # MPI's files too
    assert not list(tmp_path.glob("torque-async-scratch.*"))


def test_a_command_line_refused_on_one_rank_alone_ends_every_rank_with_exit_2():
    """An option only rank 1 was given (its environment's) is refused before MPI starts:
    rank 0 waited in MPI's start for ever; rank 1 now joins the job to tell it, and rank 0
    refuses the job in one line that names rank 1 and its reason."""
    run = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", 'if [ "$PMI_RANK" = 1 ]; then exec '
                          '"$@" -bogus; else exec "$@"; fi', "sh", *CMD, "-smkey", "0x7a40",
                          "-nh", "-n", "4", "-MB", "1", "-Striad"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    assert sorted(run.stderr.splitlines()) == [
        "torque-async: error: rank 1 on " + HOST + " has another plan than rank 0 (every rank "
        "runs one plan): rank 0 has 'globals: nh=True, smkey=0x7a40', rank 1 on " + HOST +
        " 'refused its command line: unknown option -bogus'",
        "torque-async: error: unknown option -bogus"]


def server_dirs() -> set[Path]:
    """The workers' servers' socket directories in the suite's temp dir (workstart.PREFIX)."""
    return set(Path(tempfile.gettempdir()).glob("torque-async-forkserver.*"))


def ours_left(before_shm: set[str], before_dirs: set[Path], timeout: float = 15) -> set[str]:
    """What a job left since `before_*` (once it left nothing, or after `timeout` s: a watcher
    cleans as its rank dies): /dev/shm files no live process maps, and servers' directories of
    commands no longer alive."""
    deadline = time.monotonic() + timeout
    while True:
        dead = {str(d) for d in server_dirs() - before_dirs
                if not psutil.pid_exists(int(d.name.split(".")[1]))}
        left = left_behind(before_shm) | dead
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


FAILS_BEFORE_MPI = ['if [ "$PMI_RANK" = 1 ]; then echo "rank 1: no numpy here" >&2; exit 2; '
                    'else exec "$@"; fi', "sh", *CMD]


def test_a_rank_that_fails_before_mpi_starts_ends_the_job_within_rank_timeout():
    """Rank 1 fails before it starts MPI (numpy that cannot load under its ulimit -v): rank 0
    waited in MPI's start for ever, where no signal's handler runs. It now ends after
    -rankTimeout, saying why, and leaves neither MPI's files nor its workers' server's."""
    before_shm, before_dirs = shm_now(), server_dirs()
    began = time.monotonic()
    run = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", *FAILS_BEFORE_MPI, "-rankTimeout",
                          "2", "-smkey", "0x7a60", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    assert time.monotonic() - began < 30 and run.returncode != 0 and "BW:" not in run.stdout
    assert "rank 1: no numpy here" in run.stderr
    assert f"torque-async: rank 0 on {HOST}: not every rank started MPI within 2 s " \
        "(-rankTimeout): a rank that failed before it started MPI" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert not ours_left(before_shm, before_dirs)


def in_mpi_start(run: subprocess.Popen) -> psutil.Process:
    """The rank of mpiexec `run` that has started MPI (mpi4py's library mapped: its start waits
    there for a rank that never comes, or has not come yet)."""
    def started(p: psutil.Process) -> bool:
        try:
            return "torque_async" in " ".join(p.cmdline()) and "mpi4py" in {
                Path(m.path).parts[-2] for m in p.memory_maps() if len(Path(m.path).parts) > 1}
        except psutil.Error:                     # (gone meanwhile: a wrapper's sleep)
            return False
    deadline = time.monotonic() + 60
    while not (ranks := [p for p in psutil.Process(run.pid).children(recursive=True)
                         if started(p)]):
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.05)
    return ranks[0]


def start_watcher(rank: psutil.Process) -> psutil.Process:
    """The watcher of a rank in MPI's start (cluster.start_watch): its child, a session leader,
    once it has read the rank's maps twice since now (so once since MPI mapped its files: it
    removes only those it saw)."""
    watcher, = [p for p in rank.children() if os.getsid(p.pid) == p.pid]
    reads = {watcher.io_counters().read_chars}
    deadline = time.monotonic() + 15
    while len(reads) < 3:
        assert time.monotonic() < deadline
        reads.add(watcher.io_counters().read_chars)
        time.sleep(0.01)
    return watcher


def test_a_stop_while_mpi_starts_ends_the_rank_at_once_and_leaves_nothing():
    """Ctrl-C to mpiexec while rank 0 waits in MPI's start for a rank that never comes: the
    run's handlers cannot run in MPI's C code, so the stop used to be held until the start
    returned (never); the rank's watcher now sees it pending, reads the files the rank maps,
    ends it and removes them (a stop just after MPI made its file left it behind)."""
    before_shm, before_dirs = shm_now(), server_dirs()
    run = subprocess.Popen([MPIEXEC, "-n", "2", "sh", "-c", *FAILS_BEFORE_MPI, "-rankTimeout",
                            "600", "-smkey", "0x7a62", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    rank0 = [in_mpi_start(run)]
    start_watcher(rank0[0])
    began = time.monotonic()
    run.send_signal(signal.SIGINT)
    code, out, err = finished(run, timeout=60)
    assert time.monotonic() - began < 10 and code != 0, err
    assert f"torque-async: rank 0 on {HOST}: interrupted by SIGINT as MPI started; ending " \
        "this rank" in err and "not every rank started MPI" not in err and "Traceback" not in err
    _, alive = psutil.wait_procs(rank0, timeout=15)
    assert not alive
    assert not ours_left(before_shm, before_dirs)


def test_an_mpi_library_that_cannot_load_is_one_line_naming_why(tmp_path):
    """mpi4py found but its MPI library not loadable (ulimit -v on that rank: 'failed to map
    segment'): a RuntimeError whose traceback was the rank's whole answer."""
    fake = tmp_path / "mpi4py"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "MPI.py").write_text(
        'raise RuntimeError("cannot load MPI library\\n/x/libmpi.so: file too short\\n'
        '/x/libmpi.so.12: failed to map segment from shared object\\n'
        '/x/libmpi.so.40: cannot open shared object file: No such file or directory")')
    run = subprocess.run([*CMD, "-nh", "-n", "4", "-MB", "1", "-Striad"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path,
                         env={**ENV, "PMI_RANK": "1", "PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert_one_clean_line(run.returncode, run.stdout, run.stderr,
                          f"rank 1 on {HOST}: mpi4py cannot load the MPI library (/x/libmpi."
                          "so.12: failed to map segment from shared object): check the MPI "
                          "installation there, and ulimit -v")


def test_a_stop_to_a_rank_and_its_start_watcher_alike_still_leaves_nothing():
    """A stop sent to every process of the command (pkill -f torque_async, kill of what ps
    shows: the watcher is the rank's fork) in MPI's start: the watcher, which alone removes
    what the killed rank left, died of it too and left MPI's files and the workers' server's
    directory behind. It ignores the stop signals: the rank ends, and it cleans up."""
    before_shm, before_dirs = shm_now(), server_dirs()
    run = subprocess.Popen([MPIEXEC, "-n", "2", "sh", "-c", *FAILS_BEFORE_MPI, "-rankTimeout",
                            "600", "-smkey", "0x7a64", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    rank0 = in_mpi_start(run)
    assert mapped_by(rank0.pid)                       # (MPI's files, for the watcher to remove)
    watcher = start_watcher(rank0)
    for p in (watcher, rank0):
        p.send_signal(signal.SIGTERM)
    code, _, err = finished(run, timeout=60)
    assert code != 0 and "Traceback" not in err
    _, alive = psutil.wait_procs([rank0, watcher], timeout=15)
    assert not alive
    assert not ours_left(before_shm, before_dirs)


def test_a_start_watcher_killed_leaves_the_rank_to_start_and_run(tmp_path):
    """The watcher SIGKILLed (by hand, or the OOM killer) while rank 0 waits in MPI's start for
    a rank still starting: rank 0's word to it, a pipe no one read, failed the rank ('running
    the plan: Broken pipe', exit 1, MPI started), and the job hung. The run goes on."""
    go = tmp_path / "go"
    slow = [f'if [ "$PMI_RANK" = 1 ]; then while [ ! -e {go} ]; do sleep 0.05; done; fi; '
            'exec "$@"', "sh", *CMD]
    run = subprocess.Popen([MPIEXEC, "-n", "2", "sh", "-c", *slow, "-rankTimeout", "600",
                            "-smkey", "0x7a66", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        watcher = start_watcher(in_mpi_start(run))
        watcher.kill()
        deadline = time.monotonic() + 15             # (its parent, in MPI's start, reaps it
        while watcher.status() != psutil.STATUS_ZOMBIE:      # only after)
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        go.touch()                                   # rank 1 starts (whatever happened)
    code, out, err = finished(run, timeout=120)
    assert code == 0 and "BW:" in out and "error" not in err, err


def test_a_sigquit_in_mpi_s_start_dumps_no_core(tmp_path):
    """SIGQUIT (Ctrl-\\, which mpiexec passes on) in MPI's start, where the stop signals had
    their default action: its default dumped the rank's core (tens of MB) into the user's
    directory where core dumps are on. Blocked there, it never acts: the watcher ends the
    rank."""
    def cores_on():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.getrlimit(resource.RLIMIT_CORE)[1],) * 2)
    before_shm, before_dirs = shm_now(), server_dirs()
    run = subprocess.Popen([MPIEXEC, "-n", "2", "sh", "-c", *FAILS_BEFORE_MPI, "-rankTimeout",
                            "600", "-smkey", "0x7a68", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                           cwd=tmp_path, preexec_fn=cores_on)
    rank0 = in_mpi_start(run)
    start_watcher(rank0)
    run.send_signal(signal.SIGQUIT)
    code, _, err = finished(run, timeout=60)
    assert code != 0 and "Traceback" not in err
    _, alive = psutil.wait_procs([rank0], timeout=15)
    assert not alive and not list(tmp_path.iterdir())
    assert not ours_left(before_shm, before_dirs)


def test_a_start_watcher_with_no_one_to_read_its_line_still_ends_its_rank():
    """Rank 0's stderr a pipe whose reader is gone (its launcher's proxy killed) while it waits
    in MPI's start for a rank that never comes: the watcher's line failed (EPIPE) and it exited
    without ending the rank, left spinning in MPI's start for ever, a CPU's worth. It ends."""
    deaf = ['if [ "$PMI_RANK" = 1 ]; then exit 2; fi; "$@" 2>&1 | true', "sh", *CMD]
    run = subprocess.Popen([MPIEXEC, "-n", "2", "sh", "-c", *deaf, "-rankTimeout", "2",
                            "-smkey", "0x7a6a", "-nh", "-n", "4", "-MB", "1", "-Striad"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    rank0 = in_mpi_start(run)
    try:
        _, alive = psutil.wait_procs([rank0], timeout=60)
        assert not alive
        finished(run, timeout=60)
    finally:
        with contextlib.suppress(psutil.Error):      # (not left spinning, whatever happened)
            rank0.kill()


def test_ranks_started_with_sigchld_ignored_run():
    """A launcher (or a daemon before it) that leaves SIGCHLD ignored: the kernel reaps the
    start's watcher itself, and the rank's wait for it failed every rank ('running the plan:
    No child processes'), where a run without mpiexec runs."""
    ignoring = ["-c", "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                "os.execv(sys.argv[1], sys.argv[1:])", *CMD]
    run = subprocess.run([MPIEXEC, "-n", "2", sys.executable, *ignoring, "-smkey", "0x7a6c",
                          "-nh", "-n", "4", "-MB", "1", "-Striad"], capture_output=True,
                         text=True, env=ENV, timeout=120)
    assert run.returncode == 0 and "BW:" in run.stdout and "error" not in run.stderr, run.stderr
