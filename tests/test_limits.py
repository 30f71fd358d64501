"""Limits are checked with the plan (and by -quit): memory, free space and open files give exit 2
and one line before anything is written."""
from __future__ import annotations

import errno
import os
import resource
import threading
from collections import namedtuple

import pytest

from torque_async import cmdline, limits, results, units
from torque_async.results import HEADER, MAX_SEMS, ROW, SHM_DIR
from torque_async.units import GB, KB, MB

from conftest import assert_one_clean_line, execute, run_cli, table

Memory = namedtuple("Memory", "available")
Space = namedtuple("Space", "f_bavail f_frsize f_favail f_files f_flag",
                   defaults=(1 << 20, 1 << 20, 0))


@pytest.mark.parametrize("quit", [[], ["-quit"]])
def test_file_buffers_count_as_memory(capsys, key, quit):
    assert_one_clean_line(*execute(capsys, "-smkey", key, *quit, "-MB", "64", "-aio", "1024"),
                          "the tests need 64.0 GB of memory")
    assert os.listdir() == []                                # nothing written


def test_offset_counts_as_memory_of_every_array(capsys, key, monkeypatch):
    """A memory or STREAM test's arrays each start -offset bytes in, and set-up fills those
    bytes too: -offsetMB 30000 -bcopy mapped 60 GB while -quit said it fit."""
    for argv, arrays in ((["-bcopy"], 2), (["-Striad"], 3), (["-load"], 1)):
        plan = cmdline.parse(["-offsetMB", "100", "-n", "16", "-MB", "4", *argv])
        assert limits.memory_of(plan, plan.procs()[0]) == \
            arrays * (100 * MB + 16 * 4 * MB) + limits.WORKER_BYTES
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: Memory(16 * GB))
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-quit", "-offsetMB", "30000", "-n",
                                   "16", "-MB", "4", "-bcopy"),
                          "the tests need 58.8 GB of memory (buffers, images and 1 worker process) "
                          "but only 16 GB")


def test_video_images_and_worker_processes_count_as_memory(capsys, key, monkeypatch):
    plan = cmdline.parse(["-IH", "16384", "-IW", "16384", "-p", "2", "-V", "1"])
    image = 16384 * 16384 * 4
    assert [limits.memory_of(plan, p) for p in plan.procs()] == \
        [limits.VIDEO_IMAGES * image + limits.VIDEO_WORKER_BYTES] * 2
    spin = cmdline.parse(["-spinWait"])
    assert limits.memory_of(spin, spin.procs()[0]) == limits.WORKER_BYTES
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: Memory(16 * GB))
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-IH", "16384", "-IW", "16384",
                                   "-p", "2", "-V", "1"),
                          "(buffers, images and 2 worker processes) but only 16 GB")


@pytest.mark.parametrize("argv,what", [
    (["-n", "64", "-KB", "64", "-w"], "4 MB (scratch files)"),
    (["-dir", "t", "-cfiles", "-mfileMB", "1", "-KB", "64", "-files", "10"], "(-cfiles)"),
    (["-streams", "w", "1", "64", "8", "0", "1", "4"], "(scratch files)"),
    # each of 100 x 10 requests may append up to 16 KB: a full disk failed it mid-run
    (["-dir", "w", "-cfiles", "-webFiles", "3", "-n", "100", "-appendEvery", "1", "-web"],
     "up to 15.7 MB (-cfiles and -web's appends)"),
])
def test_free_space_is_checked_before_anything_is_written(capsys, key, monkeypatch, argv, what):
    monkeypatch.setattr(limits.os, "statvfs", lambda path: Space(256, 4096))     # 1 MB free
    code, out, err = execute(capsys, "-smkey", key, *argv)
    assert_one_clean_line(code, out, err, "the run writes ")
    assert what in err and "which has 1 MB free" in err
    assert os.listdir() == []


def test_free_space_message_names_what_and_where(capsys, key, monkeypatch):
    monkeypatch.setattr(limits.os, "statvfs", lambda path: Space(256, 4096))
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-n", "64", "-KB", "64", "-w"),
                          f"the run writes 4 MB (scratch files) on the file system of "
                          f"{os.getcwd()}, which has 1 MB free")


@pytest.mark.parametrize("argv,files", [
    (["-dir", "t", "-cfiles", "-mfileKB", "64", "-KB", "4", "-files", "2500"], 2500 + 2 + 2),
    (["-dir", "w", "-cfiles", "-webFiles", "3000", "-n", "2", "-web"], None),
])
def test_inodes_are_checked_before_anything_is_written(capsys, key, monkeypatch, argv, files):
    monkeypatch.setattr(limits.os, "statvfs", lambda path: Space(1 << 30, 4096, 50))
    code, out, err = execute(capsys, "-smkey", key, *argv)
    assert_one_clean_line(code, out, err, "files and directories (-cfiles) on the file system "
                                          f"of {os.getcwd()}, which has room for 50 more (inodes)")
    assert files is None or f"makes {files} files" in err
    assert os.listdir() == []
    monkeypatch.setattr(limits.os, "statvfs", lambda path: Space(1 << 30, 4096, 50, 0))
    code, _, err = execute(capsys, "-smkey", key, "-quit", *argv)    # no count kept (btrfs)
    assert code == 0, err


def test_open_files_are_counted_and_the_soft_limit_raised(capsys, key, monkeypatch):
    raised = []
    monkeypatch.setattr(resource, "setrlimit", lambda what, pair: raised.append(pair))
    argv = ["-smkey", key, "-quit", "-dir", "t", "-cfiles", "-mfileKB", "8", "-KB", "4",
            "-files", "2000"]
    monkeypatch.setattr(resource, "getrlimit", lambda what: (1024, 1024))
    assert_one_clean_line(*execute(capsys, *argv), "the run holds about 4070 files open at once "
                          "(-files opens every file of its tree) but the limit is 1024")
    monkeypatch.setattr(resource, "getrlimit", lambda what: (1024, 4096))
    code, _, err = execute(capsys, *argv)
    assert code == 0 and raised == [(4096, 4096)], err
    assert os.listdir() == []


def test_a_scratch_layout_that_cannot_fit_is_refused_with_the_plan(capsys, key):
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-offsetKB", "8", "-mfileKB", "8",
                                   "-KB", "4", "-rand"),
                          "-rand: no 4096-byte transfer fits between byte 8192 and the file's "
                          "end at byte 8192")
    assert os.listdir() == []


def test_outstanding_transfers_hold_no_files_of_their_own(capsys, key, monkeypatch):
    """-aio's depth is transfers in flight, not descriptors: 24 tests of depth 1024 on one file
    each hold 2 (it was counted 1024 each and refused, blaming -files)."""
    monkeypatch.setattr(resource, "getrlimit", lambda what: (1024, 1024))
    code, _, err = execute(capsys, "-smkey", key, "-quit", "-KB", "4", "-mfileKB", "64",
                           "-n", "16", "-p", "24", "-aio", "1024")
    assert code == 0, err
    argv = ["-smkey", key, "-quit", "-KB", "4", "-mfileKB", "64", "-n", "16", "-p", "200", "-r"]
    assert_one_clean_line(*execute(capsys, *argv), "(each file test holds its files open, "
                          "twice while it checks them) but the limit is 1024 (ulimit -n): raise "
                          "it or lower -p or the files given")


def test_sizes_in_messages_are_not_rounded_to_nothing():
    assert [units.amount(n) for n in (0, 1000, 2044 * KB, MB, 1536 * KB, 250 * MB, 3 * GB // 2)] \
        == ["0 bytes", "1000 bytes", "2044 KB", "1 MB", "1536 KB", "250 MB", "1536 MB"]


def only_shm(free_pages: int):
    """os.statvfs where /dev/shm has `free_pages` pages free (no tmpfs to fill here)."""
    real = os.statvfs
    return lambda path: Space(free_pages, 4096) if path == SHM_DIR else real(path)


def test_shared_memory_for_the_results_is_checked_with_the_plan(capsys, key, monkeypatch):
    """A segment larger than /dev/shm's free space is made (sparse), and the first write past
    the space killed the run with SIGBUS (exit 135, semaphores left)."""
    monkeypatch.setattr(limits.os, "statvfs", only_shm(256))                # 1 MB free
    need = units.amount(limits.shared_memory_bytes(cmdline.parse(["-p", "64", "-bzero"])))
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-quit", "-p", "64", "-n", "4", "-KB",
                                   "4", "-bzero"),
                          f"the run's results need {need} of shared memory in /dev/shm (64 test processes, "
                          f"{units.amount(ROW.itemsize)} each) but it has 1 MB free")
    code, _, err = execute(capsys, "-smkey", key, "-quit", "-p", "2", "-n", "4", "-KB", "4",
                           "-bzero")
    assert code == 0, err


def test_shared_memory_counts_every_row_and_the_semaphores():
    plan = cmdline.parse(["-p", "3", "-bzero", "-p", "2", "-load"])
    pages = -(-(HEADER.itemsize + 5 * ROW.itemsize) // 4096) + MAX_SEMS + 1
    assert limits.shared_memory_bytes(plan) == pages * 4096


STRIAD = ["-quit", "-p", "2", "-n", "64", "-MB", "4", "-Striad"]     # 768 MB a process


def as_limit(size: int):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (size, size))


def test_the_address_space_limit_is_checked_with_the_plan(tmp_path):
    """ulimit -v 400M passed -quit, then the set-up failed in the workers."""
    done = run_cli("-smkey", "0x7701", *STRIAD, cwd=tmp_path, preexec_fn=as_limit(400 * MB))
    assert_one_clean_line(done.returncode, done.stdout, done.stderr,
                          "the worker of test 0 needs ")
    assert "ulimit -v allows 400 MB: raise it, or lower -n" in done.stderr
    assert "(768 MB of buffers beside its start-up " in done.stderr
    done = run_cli("-smkey", "0x7701", "-n", "4", "-MB", "4", "-Striad", cwd=tmp_path,
                   preexec_fn=as_limit(400 * MB))
    assert done.returncode == 0, done.stderr


def test_loop_tests_count_against_the_command_s_own_address_space(capsys, key, monkeypatch):
    monkeypatch.setattr(limits, "address_limit", lambda: 200 * MB)
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-quit", "-n", "8", "-MB", "32",
                                   "-aio", "8", "-mfileMB", "256", "-rand"),
                          "the command needs ")


def test_an_address_space_too_small_for_numpy_is_one_line(tmp_path):
    """OpenBLAS ended the command with a line of its own, or a MemoryError traceback."""
    done = run_cli("-smkey", "0x7702", "-n", "4", "-KB", "4", "-bzero", cwd=tmp_path,
                   preexec_fn=as_limit(100 * MB))
    assert_one_clean_line(done.returncode, done.stdout, done.stderr,
                          "ulimit -v allows 100 MB of address space, too little for the "
                          "command and numpy to load (")
    assert done.stderr.endswith("): raise it\n") and os.listdir(tmp_path) == []


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_the_memory_cgroup_s_limit_is_checked_with_the_plan(capsys, key, monkeypatch, tmp_path,
                                                           version):
    """A 400 MB memory cgroup passed -quit, then its OOM killer ended the workers."""
    job = tmp_path / "fs" / ("memory" if version == "v1" else "") / "job"
    job.mkdir(parents=True)
    (tmp_path / "cgroup").write_text("0::/job\n" if version == "v2" else
                                     "4:memory:/job\n0::/\n")
    limit, usage = ("memory.max", "memory.current") if version == "v2" else \
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
    (job / limit).write_text(f"{400 * MB}\n")
    (job / usage).write_text(f"{100 * MB}\n")
    monkeypatch.setattr(limits, "PROC_CGROUP", str(tmp_path / "cgroup"))
    monkeypatch.setattr(limits, "CGROUP_FS", str(tmp_path / "fs"))
    monkeypatch.setattr(limits.psutil, "virtual_memory", lambda: Memory(16 * GB))
    assert_one_clean_line(*execute(capsys, "-smkey", key, *STRIAD),
                          f"but only 300 MB is left in the memory cgroup {job / limit} "
                          f"(memory.max): lower -n")
    (job / limit).write_text("max\n" if version == "v2" else "9223372036854771712\n")
    code, _, err = execute(capsys, "-smkey", key, *STRIAD)
    assert code == 0, err


def test_a_new_f_file_a_test_writes_is_checked_for_free_space(capsys, key, monkeypatch):
    """It filled its file system (a 64 MB tmpfs), and the file was kept."""
    monkeypatch.setattr(limits.os, "statvfs", lambda path: Space(256, 4096))    # 1 MB free
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-f", "new.dat", "-n", "8", "-MB",
                                   "1", "-w"),
                          "the run writes 8 MB (-f files) on the file system of ")
    assert os.listdir() == []
    with open("old.dat", "wb") as f:                   # already as large: it does not grow
        f.truncate(8 * MB)
    code, _, err = execute(capsys, "-smkey", key, "-quit", "-f", "old.dat", "-n", "8", "-MB",
                           "1", "-w")
    assert code == 0, err


def nofile(soft: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                      (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


@pytest.mark.parametrize("soft", [10, 12, 14])
def test_a_low_soft_open_files_limit_under_a_high_hard_one_is_raised(tmp_path, soft):
    """The workers' server, started before the plan's check raised the limit, failed with
    'AssertionError: Len is 2 but msg[0] is 5'."""
    done = run_cli("-smkey", hex(0x7703 + soft), "-p", "2", "-n", "4", "-KB", "4", "-bzero",
                   cwd=tmp_path, preexec_fn=nofile(soft))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert [row[8] for row in table(done.stdout)] == ["Bzero", "Bzero"]


def test_the_open_files_a_memory_only_run_holds_are_explained_as_its_own(capsys, key,
                                                                        monkeypatch):
    """It said 'each file test holds its files open' of a run with no file test."""
    monkeypatch.setattr(resource, "getrlimit", lambda what: (40, 40))
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-quit", "-p", "3", "-bzero"),
                          "the run holds about 82 files open at once (64 for the command "
                          "itself and 6 for each of its 3 worker processes) but the limit is 40 "
                          "(ulimit -n): raise it or lower -p")


def test_a_segment_that_finds_dev_shm_full_after_the_check_is_one_line(capsys, key,
                                                                       monkeypatch):
    """(Filled between the check and the run.) Its pages are allocated as it is made: the
    first write past the free space killed the run with SIGBUS."""
    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(results.os, "posix_fallocate", full)
    code, out, err = execute(capsys, "-smkey", key, "-n", "4", "-KB", "4", "-bzero")
    name = results.segment_name(int(key, 16))
    assert (code, out, err) == (1, "", f"torque-async: error: running the plan: /dev/shm/{name}: "
                                       f"No space left on device\n")
    assert not [n for n in os.listdir("/dev/shm") if name in n]


def test_a_thread_that_cannot_start_is_one_line(capsys, key, monkeypatch):
    """(A rank under ulimit -v whose MPI library's threads took the room: the run's barrier
    thread cannot start.) A traceback of RuntimeError('can't start new thread') was the
    answer."""
    started = threading.Thread.start

    def no_room(thread):
        if thread.name.startswith("torque-async barrier"):
            raise RuntimeError("can't start new thread")
        started(thread)
    monkeypatch.setattr(threading.Thread, "start", no_room)
    code, out, err = execute(capsys, "-smkey", key, "-n", "4", "-KB", "4", "-bzero")
    assert (code, out, err) == (1, "", "torque-async: error: running the plan: a thread could "
                                       "not start (no room for its stack: ulimit -v?)\n")
    assert not [n for n in os.listdir("/dev/shm") if results.segment_name(int(key, 16)) in n]
