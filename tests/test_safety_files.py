"""Data safety: nothing but what the user named or torque-async made is opened for writing. Each
test plants the fault (a link, a hard link, a device, an output onto an input), runs, and
asserts the victim's bytes are unchanged."""
from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from torque_async import cmdline, outputs
from torque_async.io import identity, plancheck, scratch, tree
from torque_async.results import Results, segment_name
from torque_async.kind_api import api

from conftest import assert_one_clean_line, execute, run_cli

PRECIOUS = b"precious data, not to be touched\n" * 300
READ = ["-n", "2", "-KB", "4", "-r"]


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file outside the working directory that no run may change."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir(exist_ok=True)
    path = outside / "victim.dat"
    path.write_bytes(PRECIOUS)
    return path


def data_file(name: str, size: int = 64 << 10) -> Path:
    path = Path(name)
    path.write_bytes(b"z" * size)
    return path


def test_the_scratch_directory_is_fresh_private_and_ignores_a_planted_link(capsys, key, victim):
    os.symlink(victim.parent, f"torque-async-scratch.{os.getpid()}")     # the old, guessable name
    path, fd = scratch.create("test.dat")
    try:
        folder = Path(path).parent
        assert folder.name.startswith(f"torque-async-scratch.{os.getpid()}.")
        assert not folder.is_symlink() and stat.S_IMODE(folder.stat().st_mode) == 0o700
        os.symlink(victim, folder / "planted.dat")     # a name in it exists: never opened
        with pytest.raises(api.TestError, match="scratch file .*planted.dat: File exists"):
            scratch.create("planted.dat")
    finally:
        os.close(fd)
        scratch.release("test.dat")
    scratch.remove()                                   # waits for the release's removal
    assert not folder.exists()
    code, _, err = execute(capsys, "-smkey", key, "-n", "4", "-KB", "4", "-w")
    assert code == 0, err
    assert victim.read_bytes() == PRECIOUS and os.listdir(victim.parent) == ["victim.dat"]


def test_a_released_file_is_removed_behind_the_run_and_its_name_is_free_at_once(monkeypatch):
    """release() hands the unlink to a thread (a discarding file system takes about 1 s per
    GiB): the run goes on at once, a file made next under the same name is never the one
    removed, and remove() (at exit) waits for the removals before the directory goes."""
    held, unlinked, real = threading.Event(), [], os.unlink

    def slow_unlink(name, *, dir_fd):
        held.wait(10)                                  # a discard under way
        unlinked.append(name)
        real(name, dir_fd=dir_fd)
    monkeypatch.setattr(scratch.os, "unlink", slow_unlink)
    path, fd = scratch.create("a.dat")
    keep, fd2 = scratch.create("b.dat")                # a second user keeps the directory
    os.write(fd, b"old")
    os.close(fd)
    scratch.release("a.dat")
    assert not os.path.exists(path) and not unlinked   # renamed away, its removal waiting
    again, fd = scratch.create("a.dat")                # the name is free at once
    os.write(fd, b"new")
    held.set()
    for name in ("a.dat", "b.dat"):
        scratch.release(name)
    os.close(fd), os.close(fd2)
    scratch.remove()
    assert again == path and not Path(path).parent.exists()
    assert unlinked[0].startswith(".removed.") and unlinked[0].endswith("a.dat")
    assert sorted(n.split(".", 3)[-1] for n in unlinked if n != identity.DIR_MARK) == \
        ["a.dat", "a.dat", "b.dat"]                    # (and the directory's marker)


@pytest.mark.parametrize("output", [["-json", "out.json"], ["-csv", "out.csv"], []])
def test_a_link_planted_at_an_output_is_replaced_never_followed(capsys, key, victim, output):
    target = output[1] if output else "sysctl.current"
    os.symlink(victim, target)
    data_file("in.dat")
    code, _, err = execute(capsys, "-smkey", key, *output, "-f", "in.dat", *READ)
    assert code == 0, err
    assert victim.read_bytes() == PRECIOUS
    if not output:                 # sysctl.current: only one torque-async wrote is replaced
        assert os.path.islink(target) and "sysctl.current here is a file torque-async did " \
            "not write: left as it is" in err
        return
    assert not os.path.islink(target) and os.path.getsize(target) > 0
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


OUTPUT_ONTO_INPUT = [
    (["-f", "d.dat", "-json", "d.dat", *READ], "-json d.dat is the same file as -f d.dat"),
    (["-f", "d.dat", "-csv", "./sub/../d.dat", *READ], "is the same file as -f d.dat"),
    (["-f", "d.dat", "-json", "hard.dat", *READ], "-json hard.dat is the same file as -f d.dat"),
    (["-f", "d.dat", "-json", "soft.dat", *READ], "-json soft.dat is the same file as -f d.dat"),
    (["-json", "x.json", "-csv", "./x.json", *READ], "-json and -csv both write to ./x.json"),
    (["-KB", "4", "-scanfile", "d.dat", "-json", "d.dat"], "is the same file as -scanfile d.dat"),
    (["-c", "my.cfg", "-csv", "my.cfg"], "-csv my.cfg is the same file as -c my.cfg"),
    (["-aliasFile", "my.alias", "-json", "my.alias", *READ], "same file as -aliasFile my.alias"),
    (["-f", "sysctl.current", *READ], "the configuration dump sysctl.current is the same file "
                                      "as -f sysctl.current"),
    (["-json", "sub", *READ], "-json sub is a directory"),
    (["-csv", "/dev/null", *READ], "-csv /dev/null is a character device, not a file"),
    (["-json", "fifo", *READ], "-json fifo is a FIFO, not a file"),
    (["-json", "/proc/self/fd/1", *READ], "-json /proc/self/fd/1 "),      # /dev/stdout's target
    (["-json", "to-fifo", *READ], "-json to-fifo leads to a FIFO, not a file"),
    (["-csv", "sub/torque-web.json", "-dir", "sub", "-cfiles", "-web"], "-csv "
     "sub/torque-web.json is inside the -web tree sub: "),   # (it replaced the manifest)
    (["-json", "sub/r.json", "-dir", "./sub", "-cfiles", "-files", "10"], "is inside the "
     "-files tree ./sub"),
    (["-f", "sub/new.dat", "-n", "4", "-KB", "4", "-w", "-dir", "sub", "-cfiles", "-files",
      "10"], "-f sub/new.dat is inside the -files tree sub: "),    # (a -w made it there)
]


@pytest.mark.parametrize("argv,message", OUTPUT_ONTO_INPUT)
def test_an_output_onto_an_input_or_another_output_is_refused_before_the_run(
        capsys, key, argv, message):
    content = data_file("d.dat").read_bytes()
    os.link("d.dat", "hard.dat")
    os.symlink("d.dat", "soft.dat")
    os.mkdir("sub")
    os.mkfifo("fifo")
    os.symlink("fifo", "to-fifo")
    Path("my.cfg").write_text("-n 2 -KB 4 -load\n")
    Path("my.alias").write_text("quick = -n 2\n")
    Path("x.json").write_text("{}")
    Path("sysctl.current").write_bytes(content)
    before = {p: p.read_bytes() for p in map(Path, ("d.dat", "my.cfg", "my.alias", "x.json"))}
    assert_one_clean_line(*execute(capsys, "-smkey", key, *argv), message)
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(os.listdir()) == ["d.dat", "fifo", "hard.dat", "my.alias", "my.cfg", "soft.dat",
                                    "sub", "sysctl.current", "to-fifo", "x.json"]  # none written


def test_no_output_is_made_in_dev_proc_or_sys():
    assert outputs.why_unfit("/dev/stdout") in ("is in /dev", "leads to a character device",
                                            "leads to a FIFO")       # never replaced itself
    assert outputs.why_unfit("/dev/new.json") == "is in /dev"
    assert outputs.why_unfit("/dev/null") == "is a character device"
    assert outputs.why_unfit("/sys/kernel/x.json") == "is in /sys/kernel"
    assert outputs.why_unfit("new.json") == outputs.why_unfit("/dev/shm/new.json") == ""


def test_quit_checks_the_outputs_too(capsys, key):
    data_file("d.dat")
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-quit", "-f", "d.dat",
                                   "-json", "d.dat", *READ), "is the same file as -f d.dat")


DEVICES = ["/dev/null", "/dev/zero", "fifo", "sock"]


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("action", [["-w"], ["-rw"], ["-rmw"], ["-percR", "50", "-rand"],
                                    ["-percR", "50", "-aio", "2"]])
def test_write_tests_refuse_every_file_that_is_not_a_regular_file(capsys, key, target, action):
    os.mkfifo("fifo")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind("sock")
        code, out, err = execute(capsys, "-smkey", key, "-f", target, "-n", "2", "-KB", "4",
                                 *action)
    why = "would write to the character device" if target.startswith("/dev") else \
        f"is a {'FIFO' if target == 'fifo' else 'socket'}: the file tests work on regular files"
    assert_one_clean_line(code, out, err, why)


def test_a_block_device_is_written_only_with_write_devices(capsys, key, monkeypatch):
    real = os.lstat
    block = os.stat_result((stat.S_IFBLK | 0o600, 0, 0, 1, 0, 0, 0, 0, 0, 0))
    monkeypatch.setattr(plancheck.os, "lstat", lambda p, *a, **k: block if p == "disk" else
                        real(p, *a, **k))
    settings = cmdline.parse(["-f", "disk", "-w"]).settings
    with pytest.raises(cmdline.UsageError, match="-w would write to the block device disk"):
        plancheck.check_path(settings, "-w", "disk", writes=True)
    plancheck.check_path(settings, "-r", "disk", writes=False)      # reading it: no confirmation
    confirmed = cmdline.parse(["-writeDevices", "-f", "disk", "-w"]).settings
    plancheck.check_path(confirmed, "-w", "disk", writes=True)


def test_a_symbolic_link_named_for_writing_is_refused(capsys, key, victim):
    os.symlink(victim, "link.dat")
    assert_one_clean_line(*execute(capsys, "-smkey", key, "-f", "link.dat", "-w"),
                          f"-w: link.dat is a symbolic link, and writes never follow one: "
                          f"name the file itself ({victim})")
    assert victim.read_bytes() == PRECIOUS
    code, _, err = execute(capsys, "-smkey", key, "-f", "link.dat", *READ)
    assert code == 0, err                                           # reading through it is fine


TREE = ["-dir", "t", "-mfileKB", "16", "-KB", "4", "-n", "8", "-percR", "50"]


def make_tree(capsys, key) -> None:
    code, _, err = execute(capsys, "-smkey", key, *TREE, "-cfiles", "-files", "3")
    assert code == 0, err


@pytest.mark.parametrize("plant", ["hard link", "symbolic link", "fifo", "linked directory"])
def test_a_tree_with_a_planted_file_is_refused_before_the_run(capsys, key, victim, plant):
    make_tree(capsys, key)
    first = Path(tree.path("t", 0))
    if plant == "linked directory":
        os.rename("t/000", "t/moved")
        os.symlink(victim.parent, "t/000")
    else:
        first.unlink()
        {"hard link": lambda: os.link(victim, first),
         "symbolic link": lambda: first.symlink_to(victim),
         "fifo": lambda: os.mkfifo(first)}[plant]()
    why = "-files: " + {"hard link": "t/000/f0000000 has 1 other name (a hard link)",
                        "symbolic link": "t/000/f0000000 is a symbolic link",
                        "fifo": "t/000/f0000000 is a FIFO",
                        "linked directory": "t/000 is a symbolic link"}[plant] + \
        ": a -files tree holds only its own regular files"
    for cfiles in ([], ["-cfiles"]):
        assert_one_clean_line(*execute(capsys, "-smkey", key, *TREE, *cfiles, "-files", "3"), why)
    assert victim.read_bytes() == PRECIOUS and os.listdir(victim.parent) == ["victim.dat"]


@pytest.mark.parametrize("cfiles", [[], ["-cfiles"]])
def test_a_link_planted_in_a_tree_after_the_check_is_not_followed(capsys, key, victim,
                                                                   monkeypatch, cfiles):
    make_tree(capsys, key)
    checked = plancheck.check_tree

    def check_then_plant(settings, group):         # the race: the check passes, then the swap
        checked(settings, group)
        first = Path(tree.path("t", 0))
        first.unlink()
        first.symlink_to(victim)
    monkeypatch.setattr(plancheck, "check_tree", check_then_plant)
    code, out, err = execute(capsys, "-smkey", key, *TREE, *cfiles, "-files", "3")
    assert code == 1 and "Traceback" not in err
    assert "t/000/f0000000" in err and "symbolic link" in err, err
    assert victim.read_bytes() == PRECIOUS


def test_a_failing_scratch_write_names_the_phase_the_file_and_the_errno(capsys, key, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fdatasync", full)
    code, _, err = execute(capsys, "-smkey", key, "-n", "4", "-KB", "4", "-w")
    assert code == 1 and "Traceback" not in err and "Errno" not in err
    line = next(ln for ln in err.splitlines() if "failed" in ln)
    assert line.startswith("torque-async: test 0 (-w, group 0, process 0) failed: set-up: /")
    assert line.endswith("/test0.dat: writing it: No space left on device")
    assert "torque-async-scratch." in line


def test_fifos_and_devices_as_inputs_never_hang(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for argv, message in ((["-c", "fifo"], "configuration file fifo: it is a FIFO"),
                          (["-c", "/dev/zero"], "/dev/zero: it is a character device"),
                          (["-aliasFile", "fifo", "-load"], "alias file fifo: it is a FIFO"),
                          (["-f", "fifo", *READ], "-r: fifo is a FIFO"),
                          (["-dir", "fifo", "-files", "2"], "-dir fifo is a file"),
                          (["compare", "fifo", "/dev/zero"], "cannot read fifo: it is a FIFO"),
                          (["plot", "/dev/zero"], "/dev/zero: it is a character device")):
        r = run_cli(*argv, timeout=60, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (argv, r.stderr)
        assert message in r.stderr, r.stderr


def test_an_os_error_of_the_run_itself_is_one_line(capsys, key, monkeypatch):
    def refuse(name, rows):
        raise PermissionError(13, "Permission denied", f"/{name}")
    monkeypatch.setattr(Results, "create", refuse)
    code, out, err = execute(capsys, "-smkey", key, "-n", "4", "-KB", "4", "-w")
    assert code == 1 and out == "" and "Traceback" not in err
    assert err == f"torque-async: error: running the plan: /{segment_name(int(key, 16))}: " \
                  f"Permission denied\n"


def test_a_failing_stream_file_names_the_phase_the_file_and_the_errno(capsys, key, monkeypatch):
    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fdatasync", full)
    code, _, err = execute(capsys, "-smkey", key, "-streams", "w", "1", "64", "8", "0", "0.1",
                           "1")
    line = next(ln for ln in err.splitlines() if "failed" in ln)
    assert code == 1 and "Traceback" not in err and "Errno" not in err
    assert line.startswith("torque-async: test 0 (-streams w 1 64 8.0 0.0 0.1 1, group 0, "
                           "process 0) failed: set-up: /") and "torque-async-scratch." in line
    assert line.endswith("/stream0.dat: No space left on device")


@pytest.mark.parametrize("plant,what", [(os.mkfifo, "is a FIFO, not a file"),
                                        (os.mkdir, "is a directory")])
def test_a_fifo_or_directory_at_the_configuration_dump_is_refused_once_named(capsys, key, plant,
                                                                            what):
    plant("sysctl.current")
    assert_one_clean_line(*execute(capsys, "-smkey", key, *READ),
                          f"the configuration dump sysctl.current {what} (a run leaves its "
                          f"configuration dump there: remove it, or run elsewhere)")


@pytest.mark.parametrize("plant", ["fifo", "link", "dir", "file", "zeros"])
@pytest.mark.parametrize("free", [False, True])
def test_what_stands_at_a_segment_s_name_is_never_opened_or_removed(tmp_path, plant, free):
    key = {"fifo": 0x9A065, "link": 0x9A061, "dir": 0x9A063, "file": 0x9A067,
           "zeros": 0x9A069}[plant] + 0x100 * free
    where = Path("/dev/shm", segment_name(key))
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"keep me")
    {"fifo": lambda: os.mkfifo(where), "link": lambda: where.symlink_to(victim),
     "dir": where.mkdir, "file": lambda: where.write_text('{"a results file": 1}' * 100),
     "zeros": lambda: where.write_bytes(bytes(1 << 16))}[plant]()
    try:
        args = ("-freeSharedMemory",) if free else ("-n", "4", "-KB", "64", "-load")
        r = run_cli("-smkey", hex(key), *args, cwd=tmp_path)
        assert_one_clean_line(r.returncode, r.stdout, r.stderr, "is not a torque-async segment")
        mode = os.lstat(where).st_mode
        assert {"fifo": stat.S_ISFIFO, "link": stat.S_ISLNK, "dir": stat.S_ISDIR,
                "file": stat.S_ISREG, "zeros": stat.S_ISREG}[plant](mode)
        assert victim.read_bytes() == b"keep me"
    finally:
        where.rmdir() if plant == "dir" else where.unlink()


def test_no_output_is_written_at_a_segment_s_name(tmp_path):
    for name in (segment_name(0x9A071), f".{segment_name(0x9A071)}.x"):
        r = run_cli("-smkey", "0x9A073", "-json", f"/dev/shm/{name}", "-n", "2", "-KB", "4",
                    "-bzero", cwd=tmp_path)
        assert_one_clean_line(r.returncode, r.stdout, r.stderr,
                              f"-json /dev/shm/{name} is a name torque-async gives its shared "
                              f"memory: name another file")
        assert not os.path.exists(f"/dev/shm/{name}")
