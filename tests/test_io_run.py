"""The file tests end to end: every action on small files, data read back, seeds, safety."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from torque_async import cmdline, report
from torque_async.io import (actions, batch, data, filetest as filetests, identity, scratch,
                             tree, uring)
from torque_async.io.layout import BLOCK, Cursor, Layout
from torque_async.results import PHASES
from torque_async.kind_api import api
from torque_async.stats import merge

from conftest import AUTO, NO_URING, needs_uring, execute, run, run_cli, table
from test_report import record

KB = 1024
ENGINES = [pytest.param("uring", marks=needs_uring), "threads"]


def pattern_file(path: Path, size: int) -> bytes:
    content = data.pattern(0, size).tobytes()
    path.write_bytes(content)
    return content


def no_scratch_left() -> bool:
    """After the run's removals (a thread's, behind the report), nothing of its scratch."""
    scratch.settle()
    return not list(Path.cwd().glob("torque-async-scratch.*"))


class Recorder:
    """An engine that logs every transfer (file, offset, write), the most ever in flight and the
    threads that issued them. It wraps submit, so its tests run as lanes (not io_uring's
    batches, which prepare transfers without it: see the batch tests in test_io_batch.py)."""
    batches = False

    def __init__(self, inner, log: list, peak: list, threads: set):
        self.inner, self.log, self.peak, self.threads = inner, log, peak, threads
        self.lock, self.busy = threading.Lock(), 0
        self.meeting: threading.Barrier | None = None   # the first transfers wait for each other

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def submit(self, write, fd, buf, offset):
        with self.lock:
            self.log.append((os.readlink(f"/proc/self/fd/{fd}"), offset, write))
            self.busy += 1
            self.peak[0] = max(self.peak[0], self.busy)
            self.threads.add(threading.get_ident())
            meet = self.meeting and len(self.log) <= self.meeting.parties
        if meet:                        # blocks this lane's thread until all parties are in flight
            self.meeting.wait()
        try:
            return await self.inner.submit(write, fd, buf, offset)
        finally:
            with self.lock:
                self.busy -= 1


@pytest.fixture
def recorded(monkeypatch):
    log, peak, threads = [], [0], set()
    real = filetests.open_engine
    monkeypatch.setattr(filetests, "open_engine",
                        lambda name: Recorder(real(name), log, peak, threads))
    return log, peak, threads


def meeting_of(parties: int, monkeypatch) -> None:
    """The threads engine's first `parties` transfers each wait until all are in flight: an
    engine that runs fewer lanes at once breaks the barrier (after 60 s) instead of passing."""
    make = filetests.open_engine

    def open_meeting(name):
        engine = make(name)
        engine.meeting = threading.Barrier(parties, timeout=60)
        return engine
    monkeypatch.setattr(filetests, "open_engine", open_meeting)


ACTIONS = {                                       # argv, system bytes per transfer byte
    "r": (["-extraReadKB", "4", "-touch4K", "-r"], 1.25),
    "w": (["-vectorKB", "4", "-offsetKB", "8", "-w"], 1),
    "rand": (["-mfileKB", "256", "-percR", "60", "-rand"], 1),
    "rmw": (["-rmw"], 2),
    "rw": (["-touch", "-rw"], 1),
    "aio": (["-percR", "50", "-aio", "4"], 1),
    "scan": (["-scan", "big.dat"], 1),
    "scanfile": (["-scanfile", "big.dat"], 1),
    "files": (["-cfiles", "-mfileKB", "64", "-percR", "70", "-files", "30"], 1),
}


MIXED = ("rand", "rw", "aio", "files")           # they read and write


RUNS = [pytest.param(e, a, marks=[needs_uring] * (e == "uring"))
        for e in ("uring", "threads", "sync") for a in ACTIONS
        if (e, a) != ("sync", "aio")]             # refused: see test_plan_errors


@pytest.mark.parametrize("engine,action", RUNS)
def test_every_action_runs_checks_its_data_and_cleans_up(key, engine, action):
    pattern_file(Path("big.dat"), 1 << 20)
    argv, factor = ACTIONS[action]
    out = run(key, "-engine", engine, "-n", "24", "-i", "2", "-KB", "16", "-sample", "0", *argv)
    assert not out.failures
    (rec,) = out.records
    assert rec.ok and rec.pid == os.getpid()
    assert rec.transfers == rec.lat_count == sum(n for _, n in rec.hist) == len(rec.samples) == 48
    assert rec.lat_min <= rec.lat_sum // rec.lat_count <= rec.lat_max
    if action in MIXED:             # reads and writes apart, together the whole: same histogram
        reads, writes = rec.rw
        assert merge(rec.rw) == rec.lat and reads.count and writes.count
        assert action != "rw" or reads.count == writes.count == 24     # -rw alternates
    elif action == "rmw":           # each transfer a read and a write, each timed alone
        reads, writes = rec.rw
        assert reads.count == writes.count == 48 and reads.total + writes.total <= rec.lat_sum
    else:
        assert rec.rw == ()
    assert rec.bytes == 48 * 16 * KB and rec.sys_bytes == 48 * 16 * KB * factor
    assert [k for _, k in rec.samples] == list(range(1, 49))
    shown = {"scan": "big.dat", "scanfile": "big.dat", "files": "filestest"}.get(
        action, "torque-async-scratch.")
    assert shown in rec.file
    assert no_scratch_left()


@pytest.mark.parametrize("engine", ENGINES + ["sync"])
def test_a_test_unmaps_its_buffers_when_it_closes(key, engine, monkeypatch):
    closed = []

    class Watched(filetests.Buffers):
        def close(self):
            maps = list(self._maps)
            super().close()
            closed.append([m.closed for m in maps])
    monkeypatch.setattr(filetests, "Buffers", Watched)
    assert not run(key, "-engine", engine, "-n", "8", "-i", "1", "-KB", "4", "-touch",
                   "-rw").failures
    assert closed == [[True]]


@pytest.mark.parametrize("engine", ENGINES)
def test_what_w_wrote_reads_back_in_place(key, engine, tmp_path):
    target = tmp_path / "user.dat"
    before = pattern_file(target, 256 * KB)
    out = run(key, "-f", str(target), "-engine", engine, "-n", "5", "-i", "1", "-KB", "8",
              "-offsetKB", "16", "-vectorKB", "24", "-w")
    assert not out.failures
    after = np.frombuffer(target.read_bytes(), np.uint8)
    places = [16 * KB + j * 32 * KB for j in range(5)]
    expect = np.frombuffer(before, np.uint8).copy()
    for p in places:
        expect[p:p + 8 * KB] = data.written(0, p, 8 * KB)
    assert np.array_equal(after, expect)


def test_w_makes_a_named_file_that_does_not_exist_yet_and_says_so(key, tmp_path):
    """It made (and kept) the user's -f file unsaid."""
    target = tmp_path / "new.dat"
    out = run(key, "-f", str(target), "-n", "3", "-i", "1", "-KB", "4", "-w")
    assert not out.failures
    assert np.array_equal(np.frombuffer(target.read_bytes(), np.uint8),
                          np.concatenate([data.written(0, p, 4 * KB) for p in (0, 4096, 8192)]))
    made = f"-f file {target}: made by this run (there was none), and kept"
    assert out.records[0].info.splitlines()[-1] == made
    again = run(key, "-f", str(target), "-n", "3", "-i", "1", "-KB", "4", "-w")
    assert "-f file" not in again.records[0].info
    longer = run(key, "-f", str(target), "-n", "4", "-i", "1", "-KB", "4", "-w")
    assert longer.records[0].info.splitlines()[-1] == \
        f"-f file {target}: grown from 12288 to 16384 bytes by this run, and kept so"


def test_a_stream_says_when_it_made_or_grew_its_named_file(tmp_path):
    from torque_async.streams.tracks import FileTracks
    local = cmdline.parse("-fbc -streams r 0 64 1 0 1 1".split()).groups[0].local
    path = tmp_path / "cam.dat"
    for size, said in ((64 * KB, [f"-f file {path}: made by this run (there was none), and "
                                  "kept"]),
                       (128 * KB, [f"-f file {path}: grown from 131072 to 262144 bytes by this "
                                   "run, and kept so"]),
                       (128 * KB, [])):
        async def note(size=size) -> str:
            tracks = FileTracks(str(path), 2, 1, size, local, 0)  # 2 tracks of 1 frame
            try:
                return tracks.note
            finally:
                tracks.close()
        assert asyncio.run(note()).splitlines()[2:] == said


def test_a_stream_sizes_a_device_by_its_end_not_its_st_size(tmp_path, monkeypatch):
    """A block device's st_size is 0: its tracks were 'grown' (posix_fallocate: 'No such
    device'). Here the file stands in for a device (its fstat says one, st_size 0); the
    loop-device test in test_streams_run.py runs the real one where the machine has one."""
    from torque_async.streams.tracks import FileTracks
    local = cmdline.parse("-fbc -streams r 0 64 1 0 1 1".split()).groups[0].local
    path = tmp_path / "dev"
    path.write_bytes(bytes(128 * KB))
    real, ino = os.fstat, os.stat(path).st_ino

    def as_device(fd):
        st = real(fd)
        return os.stat_result((stat.S_IFBLK | 0o660, *st[1:6], 0, *st[7:])) \
            if st.st_ino == ino else st
    monkeypatch.setattr(os, "fstat", as_device)

    async def note(size: int) -> str:
        tracks = FileTracks(str(path), 2, 1, size, local, 0, writes=False)   # 2 tracks, 1 frame
        try:
            return tracks.note
        finally:
            tracks.close()
    assert len(asyncio.run(note(64 * KB)).splitlines()) == 2       # holds them: no note
    with pytest.raises(api.TestError, match=f"stream device {path} holds 131072 bytes, not the "
                                        f"262144 its tracks need"):
        asyncio.run(note(128 * KB))
    assert path.stat().st_size == 128 * KB


def test_a_write_shorter_than_its_stamp_writes_the_stamp_s_first_bytes(key, tmp_path):
    target = tmp_path / "new.dat"
    assert not run(key, "-f", str(target), "-n", "3", "-i", "1", "-B", "5", "-w").failures
    stamps = [data.written(0, p, 8)[:5] for p in (0, 5, 10)]
    assert target.read_bytes() == np.concatenate(stamps).tobytes()


def test_a_layout_that_cannot_fit_is_refused_before_the_run(capsys, key, tmp_path):
    code, out, err = execute(capsys, "-smkey", key, "-f", str(tmp_path / "new.dat"),
                             "-percR", "0", "-KB", "4", "-rand")
    assert code == 2 and out == ""
    assert err == ("torque-async: error: -rand: no 4096-byte transfer fits between byte 0 and "
                   "the file's end at byte 0 (-mfile*, or the file's size)\n")


def test_an_unwritable_working_directory_is_reported(key, monkeypatch):
    def refuse(path, mode=0o777, *, dir_fd=None):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(os, "mkdir", refuse)
    (failure,) = run(key, "-n", "2", "-KB", "4", "-r").failures
    assert "cannot make the scratch directory" in failure and "Permission denied" in failure


@pytest.mark.parametrize("engine", ENGINES)
def test_rmw_leaves_the_modified_pattern(key, engine, tmp_path):
    target = tmp_path / "user.dat"
    pattern_file(target, 64 * KB)
    assert not run(key, "-f", str(target), "-engine", engine, "-n", "4", "-i", "3", "-KB", "4",
                   "-rmw").failures
    after = np.frombuffer(target.read_bytes(), np.uint8)
    assert np.array_equal(after[:16 * KB], data.modify(data.pattern(0, 16 * KB).copy(), 3))
    assert np.array_equal(after[16 * KB:], data.pattern(16 * KB, 48 * KB))


@pytest.mark.parametrize("argv", [["-mfileKB", "512", "-percR", "50", "-rand"],
                                  ["-cfiles", "-mfileKB", "32", "-percR", "50", "-files", "20"]])
def test_the_seed_fixes_every_file_offset_and_direction(key, recorded, argv):
    log, _, _ = recorded
    runs = {}
    ring = "uring" if NO_URING is None else "sync"
    for name, seed, engine in (("a", "7", ring), ("b", "7", "threads"), ("c", "8", ring)):
        log.clear()
        assert not run(key, "-seed", seed, "-engine", engine, "-n", "200", "-i", "1", "-KB", "4",
                       *argv).failures
        runs[name] = [(os.path.basename(p), o, w) for p, o, w in log]   # the scratch dir is random
    assert runs["a"] == runs["b"] != runs["c"]
    plan = cmdline.parse(["-seed", "7", "-n", "200", "-KB", "4", *argv])
    group = plan.groups[0]
    if group.action == "files":
        sizes = tree.sizes("filestest", 20, actions.tree_limit(group.local), group.local.size)
        lay = actions.layout(group, 0, 7, None, sizes)
        paths = [tree.names(i)[1] for i in range(20)]
    else:
        lay = actions.layout(group, 0, 7, None)
        paths = [runs["a"][0][0]]
    at = Cursor(lay)
    assert runs["a"] == [(paths[f], o, w) for f, o, w in map(at, range(200))]
    assert {w for _, _, w in runs["a"]} == {True, False}


@pytest.mark.parametrize("engine", ENGINES)
def test_aio_keeps_n_transfers_outstanding(key, recorded, engine, monkeypatch):
    log, peak, threads = recorded
    if engine == "threads":        # 8 blocking threads: the first 8 transfers meet in flight
        meeting_of(8, monkeypatch)
    assert not run(key, "-engine", engine, "-n", "256", "-i", "1", "-KB", "4", "-aio",
                   "8").failures
    assert peak[0] == 8            # uring: the ring gets all 8 before a completion is answered
    assert len(threads) == (8 if engine == "threads" else 1)
    offsets = sorted(o for _, o, _ in log)
    assert offsets == [k * 4 * KB for k in range(256)]


def tree_snapshot(root: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_size, hashlib.md5(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_files_touches_only_its_tree(key):
    Path("neighbour.dat").write_bytes(b"keep me" * 1000)
    Path("filestest").mkdir()
    Path("filestest/notes.txt").write_text("mine")
    argv = ["-allowForeign", "-n", "300", "-i", "1", "-KB", "4", "-mfileKB", "32", "-percR", "0", "-dir",
            "filestest"]
    assert not run(key, "-cfiles", *argv, "-files", "40").failures
    made = tree_snapshot(Path.cwd())
    assert made["neighbour.dat"][1] == hashlib.md5(b"keep me" * 1000).hexdigest()
    assert made["filestest/notes.txt"][0] == 4
    assert not run(key, *argv, "-files", "40").failures       # the tree stays; writes in it
    again = tree_snapshot(Path.cwd())
    changed = {p for p in made if made[p] != again[p]}
    assert changed and all(p.startswith("filestest/0") for p in changed)
    assert set(again) == set(made) and all(again[p][0] == made[p][0] for p in made)


def test_files_without_a_complete_tree_says_to_add_cfiles(capsys, key):
    code, _, err = execute(capsys, "-smkey", key, "-files", "5")
    assert code == 2 and "there is no -files tree in filestest: add -cfiles" in err
    assert not run(key, "-cfiles", "-n", "4", "-files", "5").failures
    os.unlink("filestest/000/f0000003")
    code, _, err = execute(capsys, "-smkey", key, "-files", "5")
    assert code == 2 and "f0000003 is missing: add -cfiles" in err
    code, _, err = execute(capsys, "-smkey", key, "-files", "9")
    assert code == 2 and "has 5 files, not 9" in err


def test_cfiles_and_the_tests_write_no_file_the_tree_did_not_make(capsys, key):
    """A file named as a tree file is the tree's only when torque-async made it there (the
    manifest keeps who each one is: inode and birth time): -cfiles rewrote a user's file at
    000/f0000002 (no tree there yet) to the pattern, and a -percR 50 run wrote into a file the
    user had put in a tree file's place, by a move or by delete and copy (ext4 hands the freed
    inode number straight back). Refused with the plan now, and by set-up again."""
    Path("filestest/000").mkdir(parents=True)
    Path("filestest/000/f0000002").write_text("my draft")
    argv = ["-n", "20", "-i", "1", "-KB", "4", "-mfileKB", "32", "-percR", "50"]
    code, _, err = execute(capsys, "-smkey", key, "-cfiles", *argv, "-files", "5")
    assert code == 2 and "f0000002 exists, and torque-async did not make it (there is no " \
        "torque-files.json it wrote)" in err
    assert Path("filestest/000/f0000002").read_text() == "my draft"
    with pytest.raises(OSError, match="f0000002 exists"):      # set-up's own check
        asyncio.run(tree.make("filestest", 5, 32 * KB, 4 * KB))
    os.unlink("filestest/000/f0000002")
    assert not run(key, "-cfiles", *argv, "-files", "5").failures
    made = json.loads(Path("filestest/torque-files.json").read_text())
    dirfd = os.open("filestest/000", os.O_RDONLY)
    assert made["complete"] and [tuple(m) for m in made["made"]] == \
        [identity.of(dirfd, f"f000000{i}") for i in range(5)]
    assert not Path("filestest", tree.JOURNAL).exists()
    assert not run(key, *argv, "-files", "5").failures        # its own, written by the test
    Path("mine").write_bytes(Path("filestest/000/f0000001").read_bytes())   # same size, yours
    os.replace("mine", "filestest/000/f0000001")
    data = Path("filestest/000/f0000003").read_bytes()
    os.unlink("filestest/000/f0000003")
    Path("filestest/000/f0000003").write_bytes(data)           # (the same inode number, often)
    for cfiles in ([], ["-cfiles"]):
        code, _, err = execute(capsys, "-smkey", key, *cfiles, *argv, "-files", "5")
        assert code == 2 and "f0000001 was replaced since torque-async made it" in err
    os.unlink("filestest/000/f0000001")
    code, _, err = execute(capsys, "-smkey", key, *argv, "-files", "5")
    assert code == 2 and "f0000003 was replaced since torque-async made it" in err
    os.close(dirfd)
    for edited in ({**made, "sizes": None}, {**made, "complete": "no"}, {**made, "made": 5}):
        Path("filestest/torque-files.json").write_text(json.dumps(edited))   # by hand: a
        for cfiles in ([], ["-cfiles"]):                                      # traceback
            code, _, err = execute(capsys, "-smkey", key, *cfiles, *argv, "-files", "5")
            assert code == 2 and "filestest/torque-files.json is not a manifest torque-async " \
                "wrote, and it is where the tree keeps its own: move it away" in err


def test_a_fifo_planted_as_the_journal_after_the_check_neither_hangs_nor_is_written():
    Path("filestest/000").mkdir(parents=True)
    os.mkfifo("filestest/torque-files.journal")
    failed: list[BaseException] = []

    def make() -> None:
        try:
            asyncio.run(tree.make("filestest", 3, 32 * KB, 4 * KB))
        except OSError as e:
            failed.append(e)
    maker = threading.Thread(target=make, daemon=True)
    maker.start()
    maker.join(30)                     # (its open waited for a reader for ever)
    assert not maker.is_alive() and "torque-files.journal" in str(failed[0])
    assert stat.S_ISFIFO(os.lstat("filestest/torque-files.journal").st_mode)


def test_a_file_moved_into_a_tree_after_the_plan_s_check_is_refused_when_opened(key):
    """-repeat 2 and -baseline checked the tree once, with the plan: a file moved in during the
    first repetition was opened and written by the second. Set-up opens each file through its
    identity; a test that only reads may use a copy of a tree (its files are others)."""
    argv = ["-n", "4", "-KB", "4", "-mfileKB", "32", "-files", "4"]
    assert not run(key, "-cfiles", *argv).failures
    victim = Path("filestest/000/f0000003")
    Path("mine").write_bytes(b"P" * victim.stat().st_size)
    dirs = tree.Dirs("filestest", ids=tree.made_ids("filestest", tree.manifest("filestest")))
    os.replace("mine", victim)                         # after the plan's check, before set-up
    with pytest.raises(OSError, match="is not the file torque-async made there"):
        dirs.open(3, os.O_RDWR)
    os.close(dirs.open(2, os.O_RDWR))                  # its own
    dirs.close()
    with pytest.raises(cmdline.UsageError, match="f0000003 was replaced since"):
        run(key, "-percR", "50", *argv)                # a later run's plan refuses it
    assert victim.read_bytes() == b"P" * victim.stat().st_size
    shutil.copytree("filestest", "copy", copy_function=shutil.copy2)
    assert not run(key, "-dir", "copy", "-percR", "100", *argv[:-2], "-files", "3").failures


def test_an_interrupted_cfiles_knows_every_file_it_made_and_no_other(capsys, key, monkeypatch):
    """A -cfiles stopped part way left files it could not vouch for (-1 for each in the
    manifest), and the next -cfiles overwrote a file put in one's place; the journal names each
    file as it is created, so the next -cfiles finishes the tree and refuses a stranger."""
    async def failing(fd, size, tag, *_):
        if tag == 3:
            raise OSError(28, "No space left on device")
        os.write(fd, b"x" * size)
    with monkeypatch.context() as patched:
        patched.setattr(tree, "write_pattern", failing)
        with pytest.raises(OSError, match="No space"):
            asyncio.run(tree.make("filestest", 5, 32 * KB, 4 * KB))
    assert json.loads(Path("filestest/torque-files.json").read_text())["complete"] is False
    assert len(Path("filestest", tree.JOURNAL).read_text().splitlines()) == 5   # all created
    with pytest.raises(ValueError, match="incomplete"):
        tree.sizes("filestest", 5, 32 * KB, 4 * KB)
    os.unlink("filestest/000/f0000001")               # its own, gone: made again
    data = Path("filestest/000/f0000004").read_bytes()
    os.unlink("filestest/000/f0000004")
    Path("filestest/000/f0000004").write_bytes(data)  # a stranger in a file's place
    argv = ["-cfiles", "-n", "8", "-KB", "4", "-mfileKB", "32", "-files", "5"]
    code, _, err = execute(capsys, "-smkey", key, *argv)
    assert code == 2 and "f0000004 was replaced since torque-async made it" in err
    os.unlink("filestest/000/f0000004")
    assert not run(key, *argv).failures               # its own files: the next one finishes it
    assert len(tree.sizes("filestest", 5, 32 * KB, 4 * KB)) == 5
    assert not Path("filestest", tree.JOURNAL).exists()


@pytest.mark.parametrize("argv,writes", [
    (["-r"], False), (["-extraReadKB", "4", "-r"], False), (["-percR", "100", "-rand"], False),
    (["-w"], True), (["-mfileKB", "64", "-percR", "50", "-rand"], True), (["-rmw"], True),
    (["-rw"], True), (["-percR", "0", "-aio", "4"], True)])
def test_a_user_named_file_survives_every_test(key, argv, writes, tmp_path):
    target = tmp_path / "mine.dat"
    before = pattern_file(target, 512 * KB)
    assert not run(key, "-f", str(target), "-n", "16", "-i", "1", "-KB", "4", *argv).failures
    assert target.exists() and target.stat().st_size == 512 * KB
    after = target.read_bytes()
    assert after[64 * KB:] == before[64 * KB:]          # nothing past the 16 x 4 KB it was told
    assert (after[:64 * KB] != before[:64 * KB]) == writes
    assert no_scratch_left()


def direct_allowed(directory: str) -> bool:
    try:
        os.close(os.open(os.path.join(directory, "probe"), os.O_CREAT | os.O_RDWR | os.O_DIRECT))
        return True
    except OSError:
        return False
    finally:
        Path(directory, "probe").unlink(missing_ok=True)


def test_on_tmpfs_the_header_says_what_became_of_o_direct(capsys, key, monkeypatch):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        monkeypatch.chdir(shm)
        code, out, err = execute(capsys, "-smkey", key, "-n", "16", "-KB", "4", "-i", "2", "-rw")
        assert code == 0, err
        assert os.listdir(shm) == ["sysctl.current"]           # no scratch left
        direct = direct_allowed(shm)               # Linux 6.6 and later accept O_DIRECT on tmpfs
    assert ("File buffer cache = off (O_DIRECT; tmpfs: the files are in memory)" if direct else
            "File buffer cache = off: buffered + fadvise DONTNEED (O_DIRECT refused on tmpfs)") \
        in out


def test_a_file_system_refusing_o_direct_gets_buffered_io_and_dontneed(capsys, key, monkeypatch):
    real_open, dropped = os.open, []

    def no_direct(path, flags, *args, **kw):
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, *args, **kw)
    monkeypatch.setattr(os, "open", no_direct)
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, at, n, how: dropped.append((at, n, how)))
    code, out, err = execute(capsys, "-smkey", key, "-n", "16", "-KB", "4", "-i", "2", "-rw")
    assert code == 0, err
    assert "File buffer cache = off: buffered + fadvise DONTNEED (O_DIRECT refused on " in out
    assert [(at, n) for at, n, _ in dropped[-32:]] == [(k % 16 * 4 * KB, 4 * KB) for k in range(32)]
    assert {how for _, _, how in dropped} == {os.POSIX_FADV_DONTNEED}


@pytest.mark.parametrize("argv,line", [
    (["-m", "-w"], "File buffer cache = off: buffered + fadvise DONTNEED (-m misaligns the "
                   "buffers)"),
    (["-B", "1000", "-rw"], "(1000 is not a multiple of 512)"),
    (["-fbc", "-r"], "File buffer cache = on (-fbc)"),
    (["-r"], "File buffer cache = off (O_DIRECT)"),
])
def test_the_group_block_says_how_the_cache_was_kept_out(capsys, key, argv, line):
    code, out, err = execute(capsys, "-smkey", key, "-n", "8", "-i", "1", *argv)
    assert code == 0, err
    assert line in out and "Largest File Size = " in out


@pytest.mark.parametrize("argv,engine", [
    (["-r"], "sync (auto: the only transfer outstanding on the loop)"),
    (["-aio", "4"], AUTO),
    (["-p", "2", "-r"], AUTO),
    (["-r", "-streams", "r", "1", "4", "10", "0", "1", "1"], AUTO),
])
def test_auto_blocks_only_for_the_loops_one_transfer_outstanding(capsys, key, argv, engine):
    code, out, err = execute(capsys, "-smkey", key, "-n", "8", "-i", "1", *argv)
    assert code == 0, err
    assert f"I/O engine = {engine}\n" in out


def test_auto_says_why_it_fell_back_to_threads(capsys, key, monkeypatch, tmp_path):
    disabled = tmp_path / "io_uring_disabled"
    disabled.write_text("2")
    monkeypatch.setattr(uring, "DISABLED", str(disabled))
    code, out, err = execute(capsys, "-smkey", key, "-n", "8", "-KB", "4", "-aio", "2")
    assert code == 0, err
    assert f"I/O engine = threads (io_uring unavailable: {disabled} = 2)" in out
    code, _, err = execute(capsys, "-smkey", key, "-engine", "uring", "-r")
    assert code == 2 and f"-engine uring: io_uring cannot be used here: {disabled} = 2" in err


@pytest.mark.parametrize("argv,message", [
    (["-f", "a.dat", "-s", "3", "-r"], "-r: process 0 (proc 0) needs file 3 of the -f list, "
                                       "which has 1"),
    (["-f", "a.dat", "-n", "8", "-load", "-r"], "needs file 1 of the -f list"),
    (["-scan", "nothing.dat"], "-scan: nothing.dat does not exist"),
    (["-f", ".", "-r"], "-r: . is a directory, not a file"),
    (["-f", "gone.dat", "-rand"], "gone.dat does not exist (the test reads it)"),
    (["-KB", "8", "-mfileKB", "4", "-rand"], "maximum file size (4096 bytes) is smaller"),
    (["-extraReadKB", "4", "-w"], "-extraReadKB does not apply to -w; it applies to -r"),
    (["-vectorKB", "4", "-scanfile", "a.dat"], "-vectorKB does not apply to -scanfile"),
    (["-engine", "sync", "-aio", "4"], "-engine sync runs one transfer at a time"),
    (["-f", "a.dat", "-KB", "64", "-n", "8", "-r"],
     "-r: a.dat holds 4096 bytes but the test reads up to byte 524288"),
])
def test_plan_errors_are_one_line_and_exit_2(capsys, key, argv, message):
    Path("a.dat").write_bytes(b"z" * 4096)
    code, out, err = execute(capsys, "-smkey", key, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_writing_to_a_device_needs_confirmation(capsys, key):
    code, _, err = execute(capsys, "-smkey", key, "-f", "/dev/zero", "-w")
    assert code == 2 and "-w would write to the character device /dev/zero" in err
    code, _, err = execute(capsys, "-smkey", key, "-f", "/dev/zero", "-writeDevices", "-n", "2",
                           "-KB", "4", "-w")
    assert code == 0, err


class Tamper(Recorder):
    """Loses the third write (says it is done, moves nothing), puts it at another place, or
    reads one place too early."""

    def __init__(self, inner, how):
        super().__init__(inner, [], [0], set())
        self.how = how

    async def submit(self, write, fd, buf, offset):
        self.log.append(write)
        if self.how == "lose" and write and self.log.count(True) == 3:
            return filetests.now()
        if self.how == "misread" and not write and offset:
            offset -= 4096
        if self.how == "misplace" and write and self.log.count(True) == 3:
            offset = (offset + 37 * 4096) % (1 << 20)
        return await self.inner.submit(write, fd, buf, offset)


@pytest.mark.parametrize("how,argv,message", [
    ("lose", ["-w"], "differs from what the test wrote"),
    ("lose", ["-rmw"], "differs from what the test wrote"),
    ("misread", ["-r"], "read 4096 bytes at byte"),
    ("misplace", ["-seed", "1", "-percR", "0", "-mfileMB", "1", "-rand"],   # -seed: no later
     "differs from what the test wrote"),               # write at the lost one's place hides it
])
def test_the_data_check_catches_lost_writes_and_misplaced_reads(key, monkeypatch, how, argv,
                                                                 message):
    real = filetests.open_engine
    monkeypatch.setattr(filetests, "open_engine", lambda name: Tamper(real(name), how))
    out = run(key, "-n", "8", "-i", "1", "-KB", "4", *argv)
    assert len(out.failures) == 1 and message in out.failures[0]
    assert no_scratch_left()


def test_throttle_spaces_the_transfers(key):
    (rec,) = run(key, "-n", "10", "-i", "1", "-KB", "4", "-T", "2000", "-r").records
    assert rec.elapsed >= 9 * 2_000_000


def test_two_readers_beside_a_memory_test_each_on_its_own_file(tmp_path):
    r = run_cli("-smkey", "0x7e01", "-p", "2", "-n", "32", "-KB", "64", "-r",
                "-n", "16", "-MB", "1", "-i", "4", "-Striad")
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert [row[8] for row in rows] == ["Read", "Read", "STriad"]
    assert rows[0][9] != rows[1][9] and "torque-async-scratch" in rows[0][9]
    assert rows[2][9] == "NA" and rows[0][10] == rows[1][10] != rows[2][10]
    assert "Latency per transfer (us)" in r.stdout
    assert not list(tmp_path.glob("torque-async-scratch.*"))


def test_p_gives_process_k_file_s_plus_k(capsys, key):
    for name in ("a.dat", "b.dat", "c.dat"):
        pattern_file(Path(name), 64 * KB)
    code, out, err = execute(capsys, "-smkey", key, "-f", "a.dat", "-f", "b.dat", "-f", "c.dat",
                             "-s", "1", "-p", "2", "-n", "4", "-KB", "4", "-r")
    assert code == 0, err
    assert [row[9] for row in table(out)] == ["b.dat", "c.dat"]


def test_a_failing_test_still_removes_its_scratch_files(key, monkeypatch):
    async def broken(self):
        raise RuntimeError("boom")
    monkeypatch.setattr(filetests.FileTest, "check", broken)
    out = run(key, "-n", "4", "-KB", "4", "-w")
    assert "RuntimeError: boom" in out.failures[0]
    assert no_scratch_left()


def test_the_largest_file_of_a_group_is_reported_once():
    plan = cmdline.parse(["-p", "3", "-n", "8", "-r"])
    recs = [record(i, 0, 1000, 8, 4096, file_bytes=int(mb * (1 << 20)),
                   info="I/O engine = io_uring") for i, mb in enumerate((4, 16, 2.5))]
    lines = report.group_lines(plan, plan.groups[0], recs, plan.procs())
    assert [ln for ln in lines if "Largest" in ln or "engine" in ln] == \
        ["Largest File Size = 16 MBytes", "I/O engine = io_uring"]


@pytest.mark.parametrize("engine", ENGINES)
def test_slow_keeps_writing_and_the_check_accounts_for_every_transfer_made(key, engine):
    out = run(key, "-slow", "-engine", engine, "-n", "16", "-i", "1", "-KB", "4", "-mfileKB", "64",
              "-percR", "50", "-aio", "4", "-memStreams", "r", "1", "64", "10", "0", "0.5", "1")
    assert not out.failures                     # the stream measures for 0.5 s of wall time
    aio, _ = out.records
    assert aio.ok and aio.transfers == 16 and aio.extra_transfers > 0
    assert no_scratch_left()


@needs_uring
def test_batched_cached_reads_record_one_latency_per_measured_transfer(key):
    """Two tests of 16 lanes each on one ring, cached reads answered in batches: each test's
    latencies (count, histogram) are exactly its measured transfers, and every lane's last
    buffer holds the file's data (check())."""
    pattern_file(Path("cached.dat"), 256 * KB)
    out = run(key, "-engine", "uring", "-fbc", "-f", "cached.dat", "-f", "cached.dat",
              "-p", "2", "-n", "1500", "-i", "2", "-KB", "4", "-mfileKB", "256", "-aio", "16")
    assert not out.failures
    for rec in out.records:
        assert rec.transfers == rec.lat_count == 3000
        assert sum(n for _, n in rec.hist) == 3000 and 0 < rec.lat_min <= rec.lat_max


@pytest.mark.parametrize("stopped", [False, True])
def test_a_stopped_run_skips_the_data_check(key, monkeypatch, stopped):
    """A signal or a failure sets the stop flag: the data check (a read of every lane's place,
    seconds with thousands of lanes) is skipped, so the run ends at once."""
    checked, real = [], filetests.FileTest.run

    async def measured(self, meter):
        await real(self, meter)
        if stopped:
            meter.stop[0] = 1          # as the run's signal handler or a failure sets it

    async def check(self):
        checked.append(self.size)
    monkeypatch.setattr(filetests.FileTest, "run", measured)
    monkeypatch.setattr(filetests.FileTest, "check", check)
    assert not run(key, "-n", "8", "-i", "1", "-KB", "4", "-w").failures
    assert checked == ([] if stopped else [4096])


def test_the_first_block_of_each_test_s_layout_is_made_before_the_release(key, monkeypatch):
    """Made at the first claim, after the release, it held the loop 1-2 ms a test: sixteen
    tests started 25 ms apart and the first one's first transfer took as long."""
    made, real = [], Layout.block

    def block(layout, b):
        made.append((b, time.monotonic_ns()))
        return real(layout, b)
    monkeypatch.setattr(Layout, "block", block)
    out = run(key, "-p", "4", "-n", "64", "-i", "1", "-KB", "4", "-mfileKB", "256", "-rand")
    assert not out.failures
    released = min(r.phase[PHASES.index("released")] for r in out.records)
    ended = min(r.finish for r in out.records)
    calibrated = batch.CALIBRATION_FROM // BLOCK                   # set-up's calibration's
    assert [b for b, t in made if t < released and b != calibrated] == [0, 0, 0, 0]
    assert not [b for b, t in made if released <= t < ended]       # none while they ran


def test_threads_lanes_samples_never_go_back_in_time(key):
    """16 lanes in 16 threads record in turn under one lock, each with its own clock read: the
    sample times (and the end) are the latest completion so far, so they never fall (with each
    lane's own time, 644 of 1024 samples of -aio 64 ended before they began)."""
    pattern_file(Path("cached.dat"), 1024 * KB)
    out = run(key, "-engine", "threads", "-fbc", "-f", "cached.dat", "-n", "3000", "-i", "1",
              "-KB", "4", "-mfileKB", "1024", "-sample", "0", "-aio", "16")
    assert not out.failures
    (rec,) = out.records
    times = [t for t, _ in rec.samples]
    assert len(times) == 1024 and [k for _, k in rec.samples] == list(range(1, 1025))
    assert all(a <= b for a, b in zip(times, times[1:]))
    assert times[-1] <= rec.finish
