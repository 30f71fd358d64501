"""Limits are checked with the plan (and by -quit): memory, free space and open files give exit 2
and one line before anything is written."""
from __future__ import annotations

import os
import resource
from collections import namedtuple

import pytest

from torque_async import cmdline, limits, units
from torque_async.units import GB, KB, MB

from conftest import assert_one_clean_line, execute

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
