"""capacity under mpiexec (the mpi extra's MPICH): rank 0 searches and every rank runs each
point together; one table, one answer, every rank's tests in each run's document; a stop or
bad input ends every rank. The search's exchanges, with a fake job; then real small jobs (their
criterion, late<1.01, holds for any run that moved frames: the wiring, not the machine's
capacity, which a loaded machine would change)."""
from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from conftest import CMD, ENV, never_alive, segment_held, wait_for_rows
from torque_async import capacity, cmdline, varied
from torque_async.capacity import Setup
from torque_async.criteria import Criterion
from torque_async.results import segment_name
from torque_async.search import Rule, Search

MPIEXEC = str(Path(sysconfig.get_path("scripts")) / "mpiexec")   # the mpich wheel's
HOST = socket.gethostname()
HELD = Criterion("held", "held")
STREAMS = ["-frame", "64x64", "-pixfmt", "rgba8", "-fps", "100", "-memStreams", "w", "2", "0",
           "0", "0"]


def mpiexec(n: int, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([MPIEXEC, "-n", str(n), *CMD, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **{"env": ENV, **popen})


def left(paths: list[Path], timeout: float = 15) -> list[Path]:
    """The paths still there after `timeout` s (each rank's guard removes what MPI_Abort
    left, after the rank ended)."""
    deadline = time.monotonic() + timeout
    while (there := [p for p in paths if p.exists()]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return there


# -- the exchanges, with a fake job ------------------------------------------------------------

class FakeJob:
    """A rank of a job: share() answers rank 0's steps in turn (another rank) or notes what
    rank 0 sent; collect() notes what this rank told and answers every rank's."""

    def __init__(self, rank: int, steps=(), told=()):
        self.rank, self.size, self.together = rank, 2, False
        self.steps, self.told = iter(steps), list(told)
        self.sent, self.collected = [], []

    def share(self, what=None):
        self.sent.append(what)
        return next(self.steps) if self.rank else what

    def collect(self, mine, *, stopped=0):
        assert stopped == mine                  # (a rank's own stop: see Cluster.settle)
        self.collected.append(mine)
        return [mine, *self.told] if not self.rank else None


def job_doc(value: int, missed_on: set[int]) -> dict:
    """A whole job's results document at -p value: value streams on each of 2 ranks, those of
    the ranks in `missed_on` MISSED."""
    def stream(rank):
        verdict = "MISSED" if rank in missed_on else "HELD"
        return {"verdict": verdict, "sub0": {"sub": "0 write t0", "frames": 20,
                                             "late": 3 * (verdict == "MISSED"), "dropped": 0,
                                             "lateness_max": 4000, "verdict": verdict}}
    return {"failures": [], "tests": [
        {"proc": rank * value + k, "group": 0, "rank": rank, "host": "h", "streams": stream(rank),
         "table": {"bw": 1.0}, "record": None} for rank in (0, 1) for k in range(value)]}


def test_a_stream_that_misses_on_rank_1_only_fails_the_point():
    """The job's document is judged: rank 1's streams miss from -p 4 on, rank 0's never."""
    argv = STREAMS + ["3", "1"]
    plan = cmdline.parse(argv)
    lay, knob = varied.layout(argv), varied.knob(plan, 0, "procs")
    setup = Setup(knob, (HELD,), Rule(1, 1), (), {}, {})
    runs = []

    def quiet(tokens, name):
        value = int(tokens[tokens.index("-p") + 1])
        runs.append(value)
        return 0, job_doc(value, {1} if value >= 4 else set()), 0.1, ""
    s = Search(1, 1, 16, Rule(1, 1))
    assert capacity.explore(s, capacity.runner(setup, lay, quiet), "-p", lambda line: None) == 0
    assert runs == [1, 2, 4, 3]
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (3, 4)
    said = capacity.summary(setup, s, 0)
    assert said[1] == "4 failed: round 1: stream proc 4 (group 0, rank 1 on h) MISSED " \
                      "(0 write t0: 3 lost, 0 dropped of 20 frames, lateness max 4.0 us)"


def test_rank_0_sends_each_run_and_a_stop_on_another_rank_ends_the_search(tmp_path):
    job = FakeJob(0)
    ran = []

    def quiet(tokens, name):
        ran.append(tokens)
        return 0, {"tests": []}, 0.1, ""
    run = capacity.led(job, quiet, str(tmp_path))
    assert run(["-w"], "run1.json")[0] == 0
    job.told = [signal.SIGINT]                     # rank 1 was stopped in its run
    assert run(["-r"], "run2.json")[0] == 128 + signal.SIGINT
    assert job.sent == [("run", ["-w"], "run1.json", str(tmp_path)),
                        ("run", ["-r"], "run2.json", str(tmp_path))]
    assert ran == [["-w"], ["-r"]] and job.collected == [0, 0]
    capacity.STOPS[:] = [signal.SIGTERM]           # noted since: no rank starts another run
    try:
        with pytest.raises(capacity.orchestrator.Interrupted):
            run(["-w"], "run3.json")
    finally:
        capacity.STOPS.clear()
    assert len(job.sent) == 2


def test_another_rank_runs_what_rank_0_sends_until_the_end(tmp_path):
    theirs = tmp_path / "rank0"                    # rank 0's folder, not on this "host"
    steps = [("run", ["-n", "4", "-w"], "run1.json", str(theirs)),
             ("run", ["-n", "8", "-w"], "run2.json", str(theirs)), ("end", 130)]
    job = FakeJob(1, steps)
    seen = []

    def execute(argv):
        seen.append((argv, theirs.is_dir()))
        return 0 if len(seen) == 1 else 128 + signal.SIGINT
    assert capacity.follow(job, execute) == 130
    assert seen == [(["-n", "4", "-w", "-json", str(theirs / "run1.json"), "-noProgress"], True),
                    (["-n", "8", "-w", "-json", str(theirs / "run2.json"), "-noProgress"], True)]
    assert job.collected == [0, signal.SIGINT] and not theirs.exists()


def test_another_rank_on_rank_0_s_host_leaves_rank_0_s_results_file_alone(tmp_path):
    """The plan names rank 0's -json path; on rank 0's host that is rank 0's own file, which
    a slower rank read and removed before rank 0 could (rank 0's point then had no
    document)."""
    theirs = tmp_path / "rank0"
    theirs.mkdir()
    job = FakeJob(1, [("run", ["-w"], "run1.json", str(theirs)), ("end", 0)])

    def execute(argv):
        (theirs / "run1.json").write_text('{"tests": []}')   # rank 0 wrote it meanwhile
        return 0
    assert capacity.follow(job, execute) == 0
    assert (theirs / "run1.json").read_text() == '{"tests": []}'


# -- real jobs -------------------------------------------------------------------------------

def test_a_search_under_mpiexec_runs_each_point_on_every_rank_and_answers_once(key, tmp_path):
    out = tmp_path / "cap.json"
    run = mpiexec(2, "capacity", "--max", "4", "--rounds", "1", "--until", "late<1.01",
                  "--json", str(out), "--",
                  "-smkey", key, "-nh", *STREAMS, "0.2", "1", cwd=tmp_path)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("capacity of group 0 (") and "under mpiexec: 2 ranks" in lines[0]
    assert lines[1] == "-p,passed,late<1.01: late share,verdict"
    assert [ln.split(", ")[:2] for ln in lines[2:5]] == [["1", "1/1"], ["2", "1/1"],
                                                           ["4", "1/1"]]
    assert sum(ln.startswith("capacity: ") for ln in lines) == 1      # from rank 0 only
    assert "capacity: at least 4 (passed 1/1): the --max reached" in stdout
    assert stderr.count("capacity: -p ") == 3
    doc = json.loads(out.read_text())
    assert doc["ranks"] == 2 and [p["value"] for p in doc["points"]] == [1, 2, 4]
    for p in doc["points"]:
        (r,) = p["rounds"]
        ranks = [t["rank"] for t in r["run"]["tests"]]
        assert ranks == [0] * p["value"] + [1] * p["value"]     # each rank ran this point
        assert [x["rank"] for x in r["run"]["cluster"]["ranks"]] == [0, 1]
    assert not any(Path("/dev/shm", segment_name(int(key, 16) + k)).exists() for k in range(2))


def test_a_stop_to_the_job_ends_every_rank_with_the_points_so_far(key, tmp_path):
    run = mpiexec(2, "capacity", "--max", "64", "--rounds", "1", "--until", "late<1.01", "--",
                  "-smkey", key, "-nh", *STREAMS, "3", "1", cwd=tmp_path,
                  env={**ENV, "TMPDIR": str(tmp_path)})
    for line in run.stderr:                        # the second point is next
        if line.startswith("capacity: -p 2 "):
            break
    assert len(list(tmp_path.glob("torque-async-capacity.*"))) == 2     # each rank's own
    began = time.monotonic()
    run.send_signal(signal.SIGINT)                 # mpiexec passes it to every rank
    stdout, stderr = run.communicate(timeout=60)
    assert time.monotonic() - began < 30
    assert run.returncode == 128 + signal.SIGINT, (stdout, stderr)
    assert "\n1, 1/1, " in stdout and "\n2, " not in stdout
    assert stdout.count("capacity: interrupted by SIGINT after 1 run: so far 1 passed") == 1
    segments = [Path("/dev/shm", segment_name(int(key, 16) + k)) for k in range(2)]
    assert not left([*segments, *tmp_path.glob("torque-async-*")])   # scratch, the folders


@pytest.mark.parametrize("args, line", [
    (["--max", "2", "--until", "p99<1s", "--", "-p", "4", "-n", "4", "-MB", "1", "-Striad"],
     "torque-async: error: capacity: --max 2 is below the start, -p 4 (the plan's; --min sets "
     "another)"),
    (["--json", "/proc/cap.json", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     None)])
def test_bad_input_under_mpiexec_ends_every_rank_with_exit_2(key, args, line):
    k = args.index("--") + 1
    run = mpiexec(2, "capacity", *args[:k], "-smkey", key, *args[k:])
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 2 and stdout == "", stderr
    said = sorted(stderr.splitlines(), key=len)     # (the ranks' lines in either order)
    assert len(said) == 2 and "Traceback" not in stderr            # one line from each rank
    if line:
        assert said == [line, line]
    else:                                           # rank 0 checks the file it writes
        assert said[0] == "torque-async: error: capacity: --json /proc/cap.json is in /proc, " \
                          "not a file (a run writes a new file there; '-' is standard output)"
        assert said[1] == f"torque-async: error: rank 0 on {HOST} refused the plan: " + \
            said[0].removeprefix("torque-async: error: ")


def test_each_rank_s_tree_is_made_once_and_reused_under_mpiexec(key, tmp_path):
    """-cfiles with the default -dir: each rank makes its own tree (as a plain run under
    mpiexec) at the first point; the later points run without -cfiles, on every rank."""
    out = tmp_path / "cap.json"
    run = mpiexec(2, "capacity", "--until", "p99<100s", "--max", "2", "--rounds", "1", "--json",
                  str(out), "--", "-smkey", key, "-nh", "-cfiles", "-webFiles", "20", "-t",
                  "0.2", "-web", cwd=tmp_path)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    points = json.loads(out.read_text())["points"]
    assert all(p["rounds"][0]["run"] for p in points), (
        [(p["value"], p["rounds"][0]["why"]) for p in points], stderr)
    commands = [p["rounds"][0]["run"]["command"] for p in points]
    assert len(commands) == 2 and "-cfiles" in commands[0] and "-cfiles" not in commands[1]
    assert all({t["rank"] for t in p["rounds"][0]["run"]["tests"]} == {0, 1} for p in points)
    assert sorted(p.name.rsplit(".", 1)[1] for p in tmp_path.glob("filestest.*")) == ["r0", "r1"]


def test_keep_under_mpiexec_measures_the_load_alone_on_every_rank_and_sums_it(key, tmp_path):
    out = tmp_path / "cap.json"
    run = mpiexec(2, "capacity", "--max", "2", "--rounds", "1", "--until", "late<1.01",
                  "--keep", "Striad bw>0.001", "--json", str(out), "--", "-smkey", key, "-nh",
                  *STREAMS, "0.2", "1", "-n", "4", "-MB", "1", "-Striad", cwd=tmp_path)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    assert stderr.count("capacity: group 1 alone, for --keep Striad bw>0.001") == 1
    doc = json.loads(out.read_text())
    alone = doc["alone"]["1"]
    assert [(t["rank"], t["group"]) for t in alone["run"]["tests"]] == [(0, 0), (1, 0)]
    assert alone["bw"] == pytest.approx(sum(t["table"]["bw"] for t in alone["run"]["tests"]))
    for p in doc["points"]:
        (r,) = p["rounds"]
        striad = [t for t in r["run"]["tests"] if t["group"] == 1]
        assert sorted(t["rank"] for t in striad) == [0, 1]
        assert r["load"] == [pytest.approx(sum(t["table"]["bw"] for t in striad))]
        assert r["figures"][1] == pytest.approx(r["load"][0] / alone["bw"])


def stopped_in_the_second_point(key: str, tmp_path: Path, rank: int):
    """A search with -rankTimeout 2 whose `rank` alone gets SIGINT in its second point's run
    (its 2 streams running: a stop in its set-up ends every rank at once, by design);
    (the job, that rank's results segment)."""
    from torque_async.results import RUNNING, owner_of
    run = mpiexec(2, "capacity", "--max", "64", "--rounds", "1", "--until", "late<1.01", "--",
                  "-smkey", key, "-nh", "-rankTimeout", "2", *STREAMS, "3", "1", cwd=tmp_path,
                  env={**ENV, "TMPDIR": str(tmp_path)})
    for line in run.stderr:                        # the second point is next
        if line.startswith("capacity: -p 2 "):
            break
    segment = Path("/dev/shm", segment_name(int(key, 16) + rank))
    deadline = time.monotonic() + 30
    while owner_of(segment.name) is None:          # the rank's run has made its segment
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.05)
    wait_for_rows(int(key, 16) + rank, 2, RUNNING)
    os.kill(owner_of(segment.name), signal.SIGINT)
    return run, segment


def test_a_stop_to_one_rank_alone_ends_the_job_within_rank_timeout_and_says_why(key, tmp_path):
    """Rank 1 stopped in its run while rank 0's runs on: rank 0 finds it missing at the run's
    gathering after -rankTimeout and ends every rank (as a plain run under mpiexec), saying so
    though its run's stderr was being kept; nothing is left."""
    run, rank1 = stopped_in_the_second_point(key, tmp_path, 1)
    began = time.monotonic()
    stdout, stderr = run.communicate(timeout=60)
    assert time.monotonic() - began < 30
    assert run.returncode == 1, (stdout, stderr)
    assert f"rank 1 on {HOST}: interrupted by SIGINT" in stderr and "Traceback" not in stderr
    assert f"torque-async: rank 0 on {HOST}: rank 1 on {HOST} did not end its run within 2 s" \
        in stderr or f"rank 0 on {HOST} did not end its step" in stderr, stderr
    assert not left([rank1, Path("/dev/shm", segment_name(int(key, 16))),
                     *tmp_path.glob("torque-async-*")])    # segments, scratch, the folders


def test_a_rank_s_guard_removes_the_folders_it_was_given_unless_the_rank_ended_well(tmp_path):
    for told, kept in ((b"", False), (b"done", True)):
        folder = tmp_path / f"torque-async-capacity.{len(told)}"
        folder.mkdir()
        (folder / "run1.json.err").write_text("said")
        guard = subprocess.run([sys.executable, "-m", "torque_async.cleanup_guard",
                                str(never_alive()), segment_name(0x5C11),
                                str(tmp_path / "torque-async-scratch.1.h.r1"), "--", str(folder)],
                               input=told, env=ENV, timeout=60)
        assert guard.returncode == 0 and folder.exists() == kept


def test_a_stream_stalled_on_rank_1_alone_fails_the_point_and_is_named(key, tmp_path):
    """The real job: rank 1's stream worker stopped for 2 s (SIGSTOP), far past its 0.6 s
    buffer (60 frames at 100 fps), while rank 0's runs on: the job's point fails on held,
    and the reason names rank 1's stream."""
    from conftest import wait_for_rows
    from torque_async.results import RUNNING
    out = tmp_path / "cap.json"
    run = mpiexec(2, "capacity", "--max", "1", "--rounds", "1", "--json", str(out), "--",
                  "-smkey", key, "-nh", *STREAMS[:-4], "60", "0", "0", "0", "3", "2",
                  cwd=tmp_path)
    (pid,) = wait_for_rows(int(key, 16) + 1, 1, RUNNING)["pid"]      # rank 1's stream worker
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(2)                              # the stall itself, not a wait for anything
    finally:
        os.kill(pid, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    (point,) = json.loads(out.read_text())["points"]
    streams = {t["rank"]: t["streams"] for t in point["rounds"][0]["run"]["tests"]}
    assert streams[1]["verdict"] == "MISSED"
    assert streams[1]["sub0"]["late"] >= 100, streams[1]  # 2 s at 100 fps, less the buffer
    assert streams[0]["sub0"]["late"] < streams[1]["sub0"]["late"]
    assert "capacity: none: 1, the smallest value (--min, else 1), failed (passed 0/1)" in stdout
    if streams[0]["verdict"] == "HELD":            # (a loaded machine may make rank 0 miss too:
        assert f"\n1 failed: round 1: stream proc 1 (group 0, rank 1 on {HOST}) MISSED " \
               f"(0 write t0: " in stdout        # the reason then names the first, rank 0's)


def test_a_run_refused_on_one_rank_alone_ends_the_job_at_once_with_exit_2(key, tmp_path):
    """Rank 1's segment key (-smkey + 1) held by a live process: rank 1's run refuses it
    while rank 0's waits in the run's barrier. The job ends at once (not after the set-up
    timeout, with exit 1 and 'rank 0 did not end its step'), exit 2, the line said once:
    MPICH's MPI_Abort returned, and the rank went on to say it again."""
    held = int(key, 16) + 1
    with segment_held(held) as proc:
        run = mpiexec(2, "capacity", "--max", "2", "--rounds", "1", "--until", "late<1.01",
                      "--", "-smkey", key, "-nh", *STREAMS, "0.2", "1", cwd=tmp_path,
                      env={**ENV, "TMPDIR": str(tmp_path)})
        began = time.monotonic()
        stdout, stderr = run.communicate(timeout=120)
        assert time.monotonic() - began < 25, stderr           # (the set-up timeout is 30 s)
        assert (run.returncode, stdout) == (2, ""), stderr
        line = f"torque-async: error: shared memory key {held:#x} is in use by pid {proc.pid}, " \
               f"still running: wait for it or choose another -smkey"
        assert stderr.count(line) == 1 and "did not end" not in stderr, stderr
    assert not left([Path("/dev/shm", segment_name(int(key, 16))), *tmp_path.glob("torque-async-*")])


def test_a_command_that_differs_by_rank_is_refused_in_words_a_user_typed(key):
    """Each rank's --until from its environment: the refusal names the option that differs
    as typed (it showed a Python tuple and the words None and False)."""
    run = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", 'exec "$@" --until "p99<$((PMI_RANK + '
                          '1))s" -- -smkey ' + key + ' -n 4 -MB 1 -Striad', "sh", *CMD,
                          "capacity", "--max", "2", "--rounds", "1"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    said = f"torque-async: error: rank 1 on {HOST} has another plan than rank 0 (every rank " \
           f"runs one plan): rank 0 has 'capacity --group 0 --vary procs --until p99<1s --max " \
           f"2 --rounds 1', rank 1 on {HOST} 'capacity --group 0 --vary procs --until p99<2s " \
           f"--max 2 --rounds 1'"
    assert run.stderr.splitlines() == [said, said]


def test_a_stop_to_rank_0_alone_ends_the_job_with_its_status_and_says_so(key, tmp_path):
    """Rank 0 stopped in its run while rank 1's runs on: rank 0 waited -rankTimeout for
    rank 1, then named it as 'stopped or hung?' and ended the job with exit 1; it now says its
    own stop reached it alone and the job ends 128 + the signal, as a plain run's would."""
    run, rank0 = stopped_in_the_second_point(key, tmp_path, 0)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGINT, (stdout, stderr)
    assert f"torque-async: rank 0 on {HOST}: rank 1 on {HOST} did not end its step within 2 s " \
           f"of this rank's (-rankTimeout), which was stopped: the stop reached it alone" \
        in stderr and "stopped or hung" not in stderr, stderr
    assert not left([rank0, Path("/dev/shm", segment_name(int(key, 16) + 1)),
                     *tmp_path.glob("torque-async-*")])


@pytest.mark.parametrize("bad, said", [
    (["--rounds", "x"], "capacity: Invalid value for '--rounds': 'x' is not a valid integer "
                        "range. (--help for help)"),
    (["--until", "p99<fast"], None)])
def test_a_command_line_refused_on_one_rank_before_mpi_started_ends_every_rank(key, bad, said):
    """Rank 1's capacity options refused before MPI's start (click's or capacity's own check):
    rank 0 waited in MPI's start for ever; rank 1 now joins the job to say so, and every
    rank ends with exit 2, rank 0 naming rank 1's refusal."""
    plan = ["--", "-smkey", key, "-nh", *STREAMS, "0.2", "1"]
    run = subprocess.run([MPIEXEC, "-n", "2", "sh", "-c", 'if [ "$PMI_RANK" = 1 ]; then exec "$@" '
                          + shlex.join(bad + plan) + '; else exec "$@" ' + shlex.join(plan)
                          + '; fi', "sh", *CMD, "capacity", "--max", "2",
                          "--rounds", "1", "--until", "late<1.01"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 2, run.stderr
    own = next(line for line in lines if "another plan" not in line)
    assert said is None or own == f"torque-async: error: {said}"
    assert any(line.startswith(f"torque-async: error: rank 1 on {HOST} has another plan than "
                               f"rank 0") and f"'refused its command line: {own[21:]}'" in line
               for line in lines), run.stderr
