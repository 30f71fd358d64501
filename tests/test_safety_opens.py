"""Data safety of every open: what a name holds is looked at on the descriptor before it is used
(a device or FIFO put in a file's place between repetitions, after the plan's check or mid-run is
refused, never written, never waited on); every file torque-async writes in a tree or a site has
an identity it checks (birth time, or its mark where there is none); bookkeeping names, the -web
log, sysctl.current, a plot's picture and scratch directories are replaced or removed only when
torque-async made them. Each test plants the fault without timing (a hook between repetitions,
after a check, or after set-up) and asserts the victim is untouched."""
from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import stat
from pathlib import Path

import pytest

from torque_async import outputs, runs
from torque_async.io import identity, plancheck, scratch, tree
from torque_async.units import KB
from torque_async.web import check as web_check
from torque_async.web import site

from conftest import NO_URING, assert_one_clean_line, execute, never_alive, run_cli

PRECIOUS = b"precious data, not to be touched\n" * 300
WRITE = ["-sp", "-n", "8", "-KB", "4", "-w"]
TREE = ["-dir", "t", "-mfileKB", "16", "-KB", "4", "-n", "8", "-percR", "50"]
SITE = ["-dir", "site", "-webFiles", "20", "-webSizes", "fixed", "-n", "2", "-fast", "-web"]


@pytest.fixture(autouse=True)
def deadline():
    """A hang (an open or a read of a FIFO) fails the test instead of the suite."""
    def hung(signum, frame):
        raise TimeoutError("hung: an open or a read waited")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def plant(path: str, what: str) -> None:
    """Put a FIFO or a device node (/dev/null's: harmless) in path's place, by a rename."""
    temp = f"{path}.new"
    if what == "fifo":
        os.mkfifo(temp)
    else:
        os.mknod(temp, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.replace(temp, path)


def written_inodes(monkeypatch) -> list[int]:
    """The inodes of every file opened for writing from now on (this process: -sp)."""
    seen, real = [], os.open

    def watched(path, flags, *args, **kwargs):
        fd = real(path, flags, *args, **kwargs)
        if flags & (os.O_WRONLY | os.O_RDWR):
            seen.append(os.fstat(fd).st_ino)
        return fd
    monkeypatch.setattr(os, "open", watched)
    return seen


def second_call(monkeypatch, owner, name: str, act, before: int = 1) -> None:
    """Call act() just before the second call of owner.name (the first repetition is over);
    `before`: after that many calls instead of one."""
    real, calls = getattr(owner, name), []

    def call(*args, **kwargs):
        if len(calls) == before:
            act()
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, call)


def after_first_run(monkeypatch, act) -> None:
    """Call act() once the first repetition has ended, as the next one's run starts."""
    second_call(monkeypatch, runs.orchestrator, "run", act)


# 1, 7: a -f file's place taken between repetitions or after the plan's check ---------------
@pytest.mark.parametrize("what", ["device", "fifo"])
@pytest.mark.parametrize("when", ["between-repetitions", "after-the-check"])
def test_a_device_or_fifo_put_in_a_write_file_s_place_is_refused_never_written(
        capsys, key, monkeypatch, what, when):
    Path("T").write_bytes(bytes(32 * KB))
    if when == "between-repetitions":
        after_first_run(monkeypatch, lambda: plant("T", what))
        argv = ["-repeat", "2", "-f", "T", *WRITE]
    else:
        checked = plancheck.check_file

        def check_then_plant(*args):
            checked(*args)
            plant("T", what)
        monkeypatch.setattr(plancheck, "check_file", check_then_plant)
        argv = ["-f", "T", *WRITE]
    opened = written_inodes(monkeypatch)
    code, out, err = execute(capsys, "-smkey", key, *argv)
    kind = "a character device" if what == "device" else "a FIFO"
    assert code == 1 and "Traceback" not in err, err
    assert f"cannot open T: it is {kind}, not a regular file" in err, err
    assert os.stat("T").st_ino not in opened           # never opened for writing
    assert "grown from" not in out                     # no claim of a growth that failed
    assert stat.S_ISCHR(os.stat("T").st_mode) == (what == "device")


def test_a_device_put_in_a_write_file_s_place_is_refused_even_with_write_devices(
        capsys, key, monkeypatch):
    """-writeDevices lets a test write a device it was given, not one moved in under the name
    of the file the command saw."""
    Path("T").write_bytes(bytes(32 * KB))
    after_first_run(monkeypatch, lambda: plant("T", "device"))
    code, _, err = execute(capsys, "-smkey", key, "-writeDevices", "-repeat", "2", "-f", "T",
                           *WRITE)
    assert code == 1 and "Traceback" not in err, err
    assert ("repetition 2 of 2: test 0 (-w, group 0, process 0) failed: -f T was replaced since "
            "this command saw it") in err, err
    assert stat.S_ISCHR(os.stat("T").st_mode)


def between_repetitions(monkeypatch, act, runs_each: int = 1) -> None:
    """Call act() after the first repetition (of `runs_each` runs), before the second begins
    (its checks first)."""
    second_call(monkeypatch, runs, "once", act, runs_each)


def move_in(path: str, data: bytes) -> None:
    """A user's own file moved in under path's name (a new inode), as mv does."""
    Path(f"{path}.new").write_bytes(data)
    os.replace(f"{path}.new", path)


@pytest.mark.parametrize("existed", [True, False])
@pytest.mark.parametrize("baseline", [False, True])
def test_a_user_file_moved_in_place_of_a_write_file_between_repetitions_is_never_written(
        capsys, key, monkeypatch, existed, baseline):
    if existed:                       # the plan saw it; else the first repetition made it
        Path("T").write_bytes(bytes(32 * KB))
    between_repetitions(monkeypatch, lambda: move_in("T", PRECIOUS), 2 if baseline else 1)
    code, out, err = execute(capsys, "-smkey", key, "-repeat", "2", *(["-baseline"] * baseline),
                             "-f", "T", *WRITE)
    assert code == 1 and "Traceback" not in err, err
    run = "group 0 alone (-baseline), " if baseline else ""
    assert f"{run}repetition 2 of 2: -f T was replaced since this command saw it" in err, err
    assert Path("T").read_bytes() == PRECIOUS


def test_a_write_file_rewritten_in_place_is_still_the_one_the_plan_saw(tmp_path):
    path = str(tmp_path / "T")
    Path(path).write_bytes(bytes(4 * KB))
    pins = runs.Pins([path, str(tmp_path / "absent")])
    pins.note()
    Path(path).write_bytes(bytes(8 * KB))            # the same inode: the run's own writes
    assert pins.replaced() == []
    move_in(path, PRECIOUS)
    assert pins.replaced() == [f"-f {path} was replaced since this command saw it (another "
                               f"file under its name): its tests write and read only the file "
                               f"they were given; nothing ran"]


def test_a_fifo_put_in_a_read_file_s_place_between_repetitions_never_hangs(capsys, key,
                                                                           monkeypatch):
    Path("R").write_bytes(bytes(64 * KB))
    after_first_run(monkeypatch, lambda: plant("R", "fifo"))
    code, _, err = execute(capsys, "-smkey", key, "-repeat", "2", "-f", "R", "-sp", "-n", "2",
                           "-KB", "4", "-r")
    assert code == 1 and "cannot open R: it is a FIFO, not a regular file" in err, err


@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR | os.O_CREAT])
def test_an_open_never_waits_on_a_fifo_and_opens_only_what_it_may(tmp_path, flags):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="it is a FIFO, not a regular file"):
        identity.opened(str(tmp_path / "fifo"), flags)
    os.mknod(tmp_path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    with pytest.raises(OSError, match="it is a character device"):
        identity.opened(str(tmp_path / "null"), flags)
    os.close(identity.opened(str(tmp_path / "null"), flags, kinds=identity.DEVICES))


@pytest.mark.parametrize("when", ["after-the-check", "after-the-sizes"])
def test_a_fifo_put_in_a_files_tree_never_hangs(capsys, key, monkeypatch, when):
    code, _, err = execute(capsys, "-smkey", key, *TREE, "-cfiles", "-files", "3")
    assert code == 0, err
    module, name = (plancheck, "check_tree") if when == "after-the-check" else (tree, "sizes")
    checked, calls = getattr(module, name), []     # (sizes: the plan's call, then set-up's)

    def check_then_plant(*args):
        found = checked(*args)
        calls.append(1)
        if module is plancheck or len(calls) == 2:
            plant(tree.path("t", 0), "fifo")
        return found
    monkeypatch.setattr(module, name, check_then_plant)
    code, _, err = execute(capsys, "-smkey", key, "-sp", *TREE[:-1], "100", "-files", "3")
    assert code == 1 and "t/000/f0000000" in err and "is a FIFO" in err, err
    assert "add -cfiles" not in err                    # (no -cfiles makes that right)


# 15: a read-only stream opens its file read-only --------------------------------------------
def test_a_stream_that_only_reads_opens_its_file_read_only(capsys, key):
    Path("frames.dat").write_bytes(bytes(1 << 20))
    os.symlink("frames.dat", "link.dat")               # a write-open never follows a link
    code, _, err = execute(capsys, "-smkey", key, "-f", "link.dat", "-streams", "r", "1", "64",
                           "4", "0", "0.1", "1")
    assert code == 0, err


# 7: a FIFO in a -web tree mid-run, or where -web -cfiles rewrites -------------------------
def make_site(capsys, key, *extra: str) -> dict:
    code, _, err = execute(capsys, "-smkey", key, "-cfiles", *extra, *SITE)
    assert code == 0, err
    return json.loads(Path("site", site.MANIFEST).read_text())


@pytest.mark.parametrize("engine", ["sync", "threads", "uring"])
def test_a_fifo_put_in_a_web_tree_mid_run_never_hangs(capsys, key, monkeypatch, engine):
    """sync and threads open it non-blocking and name it; io_uring's chained open succeeds and
    its read waits for a writer that never comes: the watchdog names the clients, and the
    engine cancels their chains (forget() waited for them for ever)."""
    if engine == "uring" and NO_URING:
        engine = "threads"
    manifest = make_site(capsys, key)
    names = site.names(manifest["dirs"])
    opened = site.open_log

    def open_then_plant(tree):                         # set-up done: the clients come next
        fd = opened(tree)
        for name in names:
            plant(os.path.join("site", name), "fifo")
        return fd
    monkeypatch.setattr(site, "open_log", open_then_plant)
    code, _, err = execute(capsys, "-smkey", key, "-sp", "-engine", engine, *SITE)
    assert code == 1, err
    assert ("made no progress" in err and "ended by the watchdog" in err) if engine == "uring" \
        else ("is a FIFO now" in err and "the tree changed under the test" in err), err


def test_a_fifo_where_web_cfiles_rewrites_never_hangs(capsys, key, monkeypatch):
    manifest = make_site(capsys, key)
    first = os.path.join("site", site.names(manifest["dirs"])[0])
    checked = web_check.check_group

    def check_then_plant(plan, group):
        checked(plan, group)
        plant(first, "fifo")
    monkeypatch.setattr(web_check, "check_group", check_then_plant)
    code, _, err = execute(capsys, "-smkey", key, "-sp", "-cfiles", *SITE)
    assert code == 1 and "is a FIFO" in err and "Traceback" not in err, err
    assert stat.S_ISFIFO(os.lstat(first).st_mode)


# 2: the -web log has an identity ---------------------------------------------------------------
@pytest.mark.parametrize("cfiles", [[], ["-cfiles"]])
def test_a_file_moved_in_place_of_the_web_log_is_never_emptied(capsys, key, cfiles):
    make_site(capsys, key)
    Path("precious.txt").write_bytes(PRECIOUS)
    os.replace("precious.txt", "site/torque-web.log")
    assert_one_clean_line(*execute(capsys, "-smkey", key, *cfiles, *SITE),
                          "site/torque-web.log is not the log torque-async made for this tree")
    assert Path("site/torque-web.log").read_bytes() == PRECIOUS


def test_the_web_log_is_checked_again_at_set_up(capsys, key, monkeypatch):
    make_site(capsys, key)
    checked = web_check.check_group

    def check_then_move(plan, group):
        checked(plan, group)
        Path("precious.txt").write_bytes(PRECIOUS)
        os.replace("precious.txt", "site/torque-web.log")
    monkeypatch.setattr(web_check, "check_group", check_then_move)
    code, _, err = execute(capsys, "-smkey", key, "-sp", *SITE)
    assert code == 1 and "is not the log torque-async made for this tree" in err, err
    assert Path("site/torque-web.log").read_bytes() == PRECIOUS


# 3: where birth times are missing --------------------------------------------------------------
@pytest.fixture
def no_btime(monkeypatch):
    """A file system that keeps no birth times (ext4 -I 128, ...): statx says none."""
    monkeypatch.setattr(identity, "_statx", None)


def reuse_inode(manifest_path: Path, index: int, planted: Path, key: str = "made") -> None:
    """A user's file in a tree file's place that has the inode number the tree's file had (as a
    file system that hands freed numbers straight back gives it): the manifest is pointed at it."""
    made = json.loads(manifest_path.read_text())
    made[key][index] = [os.stat(planted).st_ino, 0]
    manifest_path.write_text(json.dumps(made))


def test_without_birth_times_a_files_tree_file_replaced_is_refused(capsys, key, no_btime):
    code, _, err = execute(capsys, "-smkey", key, "-sp", *TREE, "-cfiles", "-files", "3")
    assert code == 0, err
    manifest = json.loads(Path("t", tree.MANIFEST).read_text())
    assert all(who[1] == 0 for who in manifest["made"])          # no birth time: marked
    assert os.getxattr(tree.path("t", 0), identity.MARK) == manifest["token"].encode()
    first = Path(tree.path("t", 0))
    size = first.stat().st_size
    first.unlink()
    first.write_bytes(PRECIOUS[:size])                           # the user's, same size
    reuse_inode(Path("t", tree.MANIFEST), 0, first)
    for cfiles in ([], ["-cfiles"]):
        assert_one_clean_line(*execute(capsys, "-smkey", key, "-sp", *TREE, *cfiles,
                                       "-files", "3"),
                              "t/000/f0000000 was replaced since torque-async made it")
    assert first.read_bytes() == PRECIOUS[:size]


def test_without_birth_times_a_web_tree_file_replaced_is_refused(capsys, key, no_btime):
    manifest = make_site(capsys, key, "-sp")
    first = Path("site", site.names(manifest["dirs"])[0])
    size = first.stat().st_size
    first.unlink()
    first.write_bytes(PRECIOUS[:size])
    reuse_inode(Path("site", site.MANIFEST), 0, first)
    for cfiles in ([], ["-cfiles"]):
        assert_one_clean_line(*execute(capsys, "-smkey", key, "-sp", *cfiles, *SITE),
                              f"{first} was replaced since torque-async made it")
    assert first.read_bytes() == PRECIOUS[:size]


def test_without_birth_times_or_extended_attributes_trees_are_not_written(capsys, key,
                                                                         no_btime, monkeypatch):
    def unsupported(*args, **kwargs):
        raise OSError(95, "Operation not supported")
    monkeypatch.setattr(os, "setxattr", unsupported)
    code, _, err = execute(capsys, "-smkey", key, "-sp", *TREE, "-cfiles", "-files", "3")
    assert code == 1 and "Traceback" not in err
    assert "keeps neither birth times nor extended attributes" in err, err
    assert not any(Path("t", "000").iterdir()) if Path("t", "000").exists() else True


# 4: -freeSharedMemory removes only what it proves it made ------------------------------------
def test_free_shared_memory_removes_only_a_scratch_directory_a_run_marked(key):
    dead = never_alive()
    yours = Path(f"torque-async-scratch.{dead}.keep")
    yours.mkdir()
    (yours / "data.txt").write_bytes(PRECIOUS)
    plain = Path(f"torque-async-scratch.{dead + 1}.file")
    plain.write_bytes(PRECIOUS)
    left = Path(f"torque-async-scratch.{dead + 2}.abcdef")
    left.mkdir()
    identity.mark_dir(str(left))                       # as a run marks its own
    (left / "test0.dat").write_bytes(b"x")
    r = run_cli("-smkey", key, "-freeSharedMemory", cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1:] == [f"removed the scratch directory {left.resolve()} of a "
                                          f"run that is gone"]
    assert not left.exists()
    assert (yours / "data.txt").read_bytes() == PRECIOUS and plain.read_bytes() == PRECIOUS
    assert str(yours) not in r.stdout + r.stderr and str(plain) not in r.stdout + r.stderr
    r = run_cli("-smkey", key, "-n", "2", "-KB", "4", "-load", cwd=os.getcwd())
    assert "scratch" not in r.stderr, r.stderr                   # never named again


def test_a_scratch_directory_is_marked_as_the_run_s_own():
    path, fd = scratch.create("t.dat")
    try:
        assert identity.is_marked_dir(os.path.dirname(path))
    finally:
        os.close(fd)
        scratch.release("t.dat")
        scratch.remove()
    os.mkdir("similar")
    Path("similar", identity.DIR_MARK).write_text("another")
    assert not identity.is_marked_dir("similar")
    os.symlink("similar", "linked")
    assert not identity.is_marked_dir("linked")


# 5: bookkeeping names of a user's ------------------------------------------------------------
def test_a_user_s_manifest_name_is_never_renamed_over(capsys, key):
    Path("t").mkdir()
    Path("t", tree.MANIFEST).write_bytes(PRECIOUS)
    for cfiles in ([], ["-cfiles"]):
        assert_one_clean_line(*execute(capsys, "-smkey", key, *TREE, *cfiles, "-files", "3"),
                              "t/torque-files.json is not a manifest torque-async wrote")
    assert Path("t", tree.MANIFEST).read_bytes() == PRECIOUS


@pytest.mark.parametrize("made", [False, True])
def test_a_user_s_journal_name_is_never_appended_to_or_deleted(capsys, key, made):
    if made:                                           # beside a finished tree, or alone
        code, _, err = execute(capsys, "-smkey", key, *TREE, "-cfiles", "-files", "3")
        assert code == 0, err
    Path("t").mkdir(exist_ok=True)
    Path("t", tree.JOURNAL).write_bytes(PRECIOUS)
    assert_one_clean_line(*execute(capsys, "-smkey", key, *TREE, "-cfiles", "-files", "3"),
                          "t/torque-files.journal is not the journal torque-async keeps")
    assert Path("t", tree.JOURNAL).read_bytes() == PRECIOUS


def test_an_interrupted_cfiles_journal_is_its_own_and_finishes(capsys, key, monkeypatch):
    real = tree.write_pattern
    calls = []

    async def stop_after_two(fd, size, *args, **kwargs):
        calls.append(1)
        if len(calls) > 2:
            raise OSError(28, "No space left on device")
        await real(fd, size, *args, **kwargs)
    monkeypatch.setattr(tree, "write_pattern", stop_after_two)
    with pytest.raises(OSError):
        asyncio.run(tree.make("t", 5, 16 * KB, 4 * KB))
    assert Path("t", tree.JOURNAL).exists()
    found = tree.manifest("t")
    assert found["complete"] is False and tree.journal_is_own("t", found)
    assert tree.owners("t", 5) == []                   # what it made, it knows
    monkeypatch.setattr(tree, "write_pattern", real)
    asyncio.run(tree.make("t", 5, 16 * KB, 4 * KB))
    assert tree.manifest("t")["complete"] and not Path("t", tree.JOURNAL).exists()


# 15: two -cfiles at once, and a -cfiles under way -----------------------------------------------
def test_two_cfiles_on_one_new_dir_at_once_both_end_with_the_tree_made():
    async def both():
        await asyncio.gather(tree.make("t", 300, 16 * KB, 4 * KB),
                             tree.make("t", 300, 16 * KB, 4 * KB))
    asyncio.run(both())
    assert tree.sizes("t", 300, 16 * KB, 4 * KB) == tree.planned_sizes(300, 16 * KB, 4 * KB)
    assert tree.owners("t", 300) == [] and not Path("t", tree.JOURNAL).exists()


def test_a_run_while_another_run_s_cfiles_makes_the_tree_says_so(capsys, key):
    Path("t").mkdir()
    Path("t", tree.MANIFEST).write_text(json.dumps({"sizes": [], "complete": False}))
    fd = os.open("t", os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)                     # as another run's -cfiles holds it
    try:
        assert_one_clean_line(*execute(capsys, "-smkey", key, *TREE, "-files", "3"),
                              "-files: another torque-async run's -cfiles is making the tree in "
                              "t now: wait for it to end")
    finally:
        os.close(fd)


# 6: sysctl.current and a plot's picture ---------------------------------------------------
def test_a_user_s_own_sysctl_current_is_never_replaced(capsys, key):
    Path("sysctl.current").write_bytes(PRECIOUS)
    code, _, err = execute(capsys, "-smkey", key, "-sp", "-n", "2", "-KB", "4", "-load")
    assert code == 0 and "sysctl.current here is a file torque-async did not write" in err, err
    assert Path("sysctl.current").read_bytes() == PRECIOUS
    os.unlink("sysctl.current")
    for _ in range(2):                                 # its own is replaced, run after run
        code, _, err = execute(capsys, "-smkey", key, "-sp", "-n", "2", "-KB", "4", "-load")
        assert code == 0 and "sysctl.current" not in err, err
        assert b"version numpy" in Path("sysctl.current").read_bytes()


def test_plot_never_replaces_a_picture_it_did_not_make(capsys, key):
    code, _, err = execute(capsys, "-smkey", key, "-json", "R.json", "-sp", "-n", "2", "-KB", "4",
                           "-load")
    assert code == 0, err
    Path("R.png").write_bytes(PRECIOUS)
    r = run_cli("plot", "R.json", cwd=os.getcwd())
    assert_one_clean_line(r.returncode, r.stdout, r.stderr,
                          "plot: R.png exists and plot did not make it: name another "
                          "(-o FILE.png), or add --replace")
    assert Path("R.png").read_bytes() == PRECIOUS
    r = run_cli("plot", "R.json", "--replace", cwd=os.getcwd())
    assert r.returncode == 0 and Path("R.png").read_bytes()[:4] == b"\x89PNG", r.stderr
    r = run_cli("plot", "R.json", cwd=os.getcwd())              # its own: replaced
    assert r.returncode == 0, r.stderr
    assert outputs.made_here("R.png", "plot")


def test_two_web_cfiles_on_one_new_dir_at_once_both_end_with_the_site_made():
    law = site.Law(20, "fixed", 16 * KB, 0.0, 0, 8)

    async def both():
        return await asyncio.gather(site.make("site", law, lambda done, total: None),
                                    site.make("site", law, lambda done, total: None))
    assert sorted(asyncio.run(both())) == [False, True]           # one made it, one found it
    assert site.missing("site", law) is None


REPLACED = "failed: -f T was replaced since this command saw it (another file under its name)"


def test_a_file_moved_in_between_a_repetition_s_runs_alone_and_together_is_never_written(
        capsys, key, monkeypatch):
    """No check between the runs of a repetition: the open itself refuses it."""
    Path("T").write_bytes(bytes(32 * KB))
    between_repetitions(monkeypatch, lambda: move_in("T", PRECIOUS), 2)   # before together
    code, out, err = execute(capsys, "-smkey", key, "-repeat", "2", "-baseline", "-f", "T",
                             *WRITE[1:], "-n", "8", "-KB", "4", "-bcopy")   # (two processes)
    assert code == 1 and "Traceback" not in err, err
    assert f"repetition 1 of 2: test 0 (-w, group 0, process 0) {REPLACED}" in err, err
    assert Path("T").read_bytes() == PRECIOUS
    assert [n for n in os.listdir() if n.startswith("T")] == ["T"]   # nothing left beside it


def test_a_file_moved_in_after_the_plan_s_check_is_never_written(capsys, key, monkeypatch):
    Path("T").write_bytes(bytes(32 * KB))
    checked = plancheck.check_file

    def check_then_move_in(*args):
        checked(*args)
        move_in("T", PRECIOUS)
    monkeypatch.setattr(plancheck, "check_file", check_then_move_in)
    opened = written_inodes(monkeypatch)
    code, out, err = execute(capsys, "-smkey", key, "-f", "T", *WRITE)
    assert code == 1 and "Traceback" not in err, err
    assert f"test 0 (-w, group 0, process 0) {REPLACED}" in err, err
    assert os.stat("T").st_ino not in opened
    assert Path("T").read_bytes() == PRECIOUS


@pytest.mark.parametrize("streams", [False, True])
def test_a_file_the_run_made_and_then_replaced_is_never_written(capsys, key, monkeypatch,
                                                                 streams):
    """Pinned once made: replaced after the next repetition's checks, its open refuses it."""
    after_first_run(monkeypatch, lambda: move_in("T", PRECIOUS))
    test = ["-streams", "w", "1", "64", "4", "0", "0.1", "1"] if streams else WRITE
    code, out, err = execute(capsys, "-smkey", key, "-repeat", "2", "-f", "T", *test)
    assert code == 1 and "Traceback" not in err, err
    assert "repetition 2 of 2: test 0 (-" in err and f"group 0, process 0) {REPLACED}" in err, err
    assert Path("T").read_bytes() == PRECIOUS


def test_a_write_file_edited_in_place_between_repetitions_is_written(capsys, key, monkeypatch):
    Path("T").write_bytes(bytes(32 * KB))

    def edit():
        with open("T", "r+b") as f:                     # the same file: not replaced
            f.write(PRECIOUS[:100])
    after_first_run(monkeypatch, edit)
    code, out, err = execute(capsys, "-smkey", key, "-repeat", "2", "-f", "T", *WRITE)
    assert code == 0, err


def test_an_open_for_writing_opens_only_the_file_pinned(tmp_path):
    path = str(tmp_path / "T")
    Path(path).write_bytes(bytes(KB))
    who = identity.pin(path)
    os.close(identity.opened(path, os.O_RDWR | os.O_NOFOLLOW, who=who))
    move_in(path, PRECIOUS)
    assert identity.pin(path) != who
    for flags in (os.O_RDWR, os.O_RDWR | os.O_CREAT):
        with pytest.raises(identity.Replaced):
            identity.opened(path, flags | os.O_NOFOLLOW, who=who)
    os.unlink(path)                                     # gone: never made again in its place
    with pytest.raises(identity.Replaced):
        identity.opened(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, who=who)
    assert not os.path.lexists(path)
    assert Path(path).parent.exists()
