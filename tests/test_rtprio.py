"""-rtprio N: the event loop's thread at SCHED_FIFO N with the process locked, refused in one
line without the privilege; the report says the policy the loop ran under and which missed
streams were starved of the loop's thread."""
from __future__ import annotations

import json
import os
import threading

import pytest

from torque_async import cmdline, report, rtprio, validate

from conftest import run_cli
from test_report import MS, record
from test_streams_report import sub

STREAM = "-memStreams w 0 64 62.5 0 0.2 1".split()


def allowed(priority: int) -> bool:
    return not rtprio.fifo_refusal(priority) and rtprio.may_lock()


def test_the_loop_runs_its_tests_at_sched_fifo_and_the_row_records_it():
    done = run_cli("-rtprio", "30", "-smkey", "0x7A41", "-json", "-", "-nh", *STREAM)
    if not allowed(30):                 # an unprivileged machine: the plan's refusal instead
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("torque-async: error: -rtprio 30: ")
        return
    assert done.returncode == 0, done.stderr
    (test,) = json.loads(done.stdout)["tests"]
    assert test["record"]["sched"] == [os.SCHED_FIFO, 30]
    plain = run_cli("-smkey", "0x7A42", "-json", "-", "-nh", *STREAM)
    assert json.loads(plain.stdout)["tests"][0]["record"]["sched"] == [os.SCHED_OTHER, 0]


def test_real_time_sets_the_calling_threads_policy_and_restore_gives_it_back():
    if not allowed(10):              # (an unprivileged machine: the refusal tests cover it)
        assert os.geteuid() != 0
        return
    seen = []

    def loop_thread():
        rt = rtprio.RealTime(10)
        seen.append(rtprio.policy_of())
        with open(f"/proc/self/task/{threading.get_native_id()}/sched") as fh:
            seen.append(next(ln for ln in fh if ln.startswith("policy")).split()[-1])
        rt.restore()
        seen.append(rtprio.policy_of())
    thread = threading.Thread(target=loop_thread)
    thread.start()
    thread.join()
    assert seen == [(os.SCHED_FIFO, 10), str(os.SCHED_FIFO), (os.SCHED_OTHER, 0)]
    assert rtprio.policy_of() == (os.SCHED_OTHER, 0)        # the caller's own was never changed


def test_rtprio_is_refused_in_one_line_without_the_privilege(monkeypatch):
    plan = cmdline.parse(["-rtprio", "50", *STREAM])

    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(rtprio.os, "sched_setscheduler", refuse)
    with pytest.raises(cmdline.UsageError) as e:
        validate.check(plan)
    assert str(e.value) == ("-rtprio 50: the kernel refuses SCHED_FIFO here (Operation not "
                            "permitted): run as root, or give CAP_SYS_NICE or an RLIMIT_RTPRIO "
                            "of 50")
    monkeypatch.undo()
    monkeypatch.setattr(rtprio, "fifo_refusal", lambda priority: "")
    monkeypatch.setattr(rtprio, "may_lock", lambda: False)
    with pytest.raises(cmdline.UsageError, match=r"^-rtprio 50: mlockall is not allowed here "):
        validate.check(plan)


@pytest.mark.parametrize("args, said", [
    (["-rtprio", "0", *STREAM], "-rtprio N: 0 is out of range (1..99)"),
    (["-rtprio", "100", *STREAM], "-rtprio N: 100 is out of range (1..99)"),
    (["-rtprio", "5", "-load"], "-rtprio 5: no test of the plan runs on the event loop"),
])
def test_bad_rtprio_is_one_line_and_exit_2(args, said):
    done = run_cli("-quit", *args)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert said in done.stderr


def starved(wait_ms: int, busy_ms: int, sched=(0, 0), late=(5000,)):
    """A 1 s stream whose loop thread waited wait_ms and ran busy_ms of it."""
    return record(0, 0, 1000 * MS, 100, 64 * 1024, subs=(sub(100, list(late)),),
                  cpu_user=busy_ms * MS, cpu_sys=0, cpu_wait=wait_ms * MS, sched=sched)


def test_a_missed_stream_whose_loop_waited_for_a_cpu_says_the_misses_are_torque_asyncs():
    procs = cmdline.parse(STREAM).procs()
    assert report.starved_lines((starved(400, 100),), procs) == [
        "proc 0: the loop's thread waited for a CPU 40% of the time: the misses are "
        "torque-async's, try -rtprio"]
    assert report.starved_lines((starved(400, 100, (os.SCHED_FIFO, 50)),), procs) == [
        "proc 0: the loop's thread waited for a CPU 40% of the time (even at SCHED_FIFO 50): "
        "the misses are torque-async's"]
    assert report.starved_lines((starved(10, 950),), procs) == [
        "proc 0: the loop's thread was busy 95% of the time: the misses are torque-async's "
        "(it runs every loop test)"]
    assert report.starved_lines((starved(50, 100),), procs) == []        # its own misses
    assert report.starved_lines((starved(400, 100, late=()),), procs) == []     # it held
    fifo = report.loop_line((starved(0, 100, (os.SCHED_FIFO, 50)),), procs)
    assert fifo.endswith("(its thread's CPU time; it ran SCHED_FIFO 50)")
    assert report.loop_line((starved(0, 100),), procs).endswith("it ran SCHED_OTHER)")
