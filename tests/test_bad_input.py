"""The catalogue of bad input: each gives exactly one line on stderr naming the offending token
(FILE:LINE for config files), exit code 2, no traceback, and runs nothing."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import CMD, ENV, assert_one_clean_line, execute

CPU = max(os.sched_getaffinity(0)) + 1      # above every CPU this process may use

CMDLINE = [
    (["-nope"], "unknown option -nope"),
    (["-laod"], "did you mean -load?"),
    (["-strIad"], "did you mean -Striad?"),
    (["--load"], "unknown option --load"),
    (["-"], "unexpected '-'"),
    (["load"], "unexpected 'load': options start with '-'"),
    (["-v", "capacity", "--max", "4", "--", "-load"], "unexpected 'capacity': options start "
     "with '-': capacity is a subcommand, first on the line: torque-async capacity ..."),
    (["-MB"], "-MB needs 1 argument"),
    (["-MB", "x", "-load"], "-MB MB: 'x' is not an integer"),
    (["-MB", "1.5", "-load"], "'1.5' is not an integer"),
    (["-MB", "0", "-load"], "-MB MB: 0 is out of range"),
    (["-KB", "-3", "-load"], "-KB KB: -3 is out of range"),
    (["-B", "99999999999999999", "-load"], "out of range"),
    (["-n", "0", "-load"], "-n n: 0 is out of range"),
    (["-n", "ten", "-load"], "'ten' is not an integer"),
    (["-n", "1_000", "-load"], "'1_000' is not an integer"),       # Python's int took these
    (["-n", "\u0663", "-load"], "'\u0663' is not an integer"),
    (["-t", "1_0", "-load"], "'1_0' is not a"),
    (["-i", "0", "-load"], "-i n: 0 is out of range"),
    (["-p", "0", "-load"], "-p n: 0 is out of range"),
    (["-p", "5000", "-load"], "out of range"),
    (["-n", "8"], "local options without an action after them: -n 8 (they modify the action that "
                  "follows them"),
    (["-load", "-MB", "4"], "local options without an action after them: -MB 4"),
    (["-V"], "-V needs 1 argument"),
    (["-V", "13"], "-V n: 13 is out of range (1..12)"),
    (["-V", "0"], "0 is out of range"),
    (["-aio", "0"], "-aio n: 0 is out of range"),
    (["-aio", "1025"], "1025 is out of range"),
    (["-files", "0"], "-files n: 0 is out of range"),
    (["-percR", "101", "-load"], "-percR p: 101 is out of range"),
    (["-percR", "-1", "-load"], "out of range"),
    (["-bt", "103", "-load"], "-bt p: 103 is out of range"),
    (["-bt", "33", "-load"], "-bt p: 33 is not one of 0, 50, 75, 100, 101, 102"),
    (["-bpkey", "2", "-load"], "-bpkey p: 2 is out of range"),
    (["-bp", "0x1FFFFFFFFFFFFFFFF", "-load"], "out of range"),
    (["-bp", "pattern", "-load"], "'pattern' is not an integer"),
    (["-stride", "4", "-load"], "-stride bytes: 4 is out of range"),
    (["-linesize", "0", "-load"], "-linesize bytes: 0 is out of range"),
    (["-IH", "0", "-V", "1"], "-IH pixels: 0 is out of range"),
    (["-IW", "99999", "-V", "1"], "out of range"),
    (["-T", "-5", "-load"], "-T usec: -5 is out of range"),
    (["-vl", "4"], "-vl n: 4 is out of range (1..3)"),
    (["-seed", "-1"], "-seed n: -1 is out of range"),
    (["-smkey", "zz"], "-smkey key: 'zz' is not an integer"),
    (["-streams", "x", "1", "1", "1", "0", "1", "1"], "'x' is not one of r, w, rw, wr, rwr, rrw"),
    (["-streams", "r", "4"], "-streams needs 7 arguments"),
    (["-memStreams", "r", "4", "1024", "0", "0", "1", "1"], "-memStreams r: bwMBs 0 needs -fps"),
    (["-memStreams", "r", "4", "0", "10", "0", "1", "1"],
     "-memStreams r: sizeKB 0 needs -frame WxH and -pixfmt"),
    (["-fps", "0", "-memStreams", "r", "4", "1024", "0", "0", "1", "1"],
     "-fps F: 0 frames per second is out of range"),
    (["-fps", "sixty", "-memStreams", "r", "4", "1024", "0", "0", "1", "1"],
     "-fps F: 'sixty' is not a frame rate"),
    (["-fps", "60", "-memStreams", "r", "4", "1024", "10", "0", "1", "1"],
     "bwMBs 10 and -fps 60 both set the rate: give bwMBs 0"),
    (["-pixfmt", "yuv444", "-frame", "64x64", "-memStreams", "r", "4", "0", "10", "0", "1", "1"],
     "-pixfmt name: 'yuv444' is not one of uyvy422, yuyv422, v210, nv12, p010, rgba8, rgb10a2"),
    (["-frame", "1920by1080", "-memStreams", "r", "4", "0", "10", "0", "1", "1"],
     "-frame WxH: '1920by1080' is not a frame size WxH"),
    (["-frame", "1920x1080", "-memStreams", "r", "4", "0", "10", "0", "1", "1"],
     "-memStreams r: -frame WxH and -pixfmt go together: give both"),
    (["-frame", "1919x1080", "-pixfmt", "v210", "-fps", "60", "-memStreams", "r", "4", "0", "0",
      "0", "1", "64"], "-frame 1919x1080: v210 needs a width that is a multiple of 2"),
    (["-frame", "1920x1081", "-pixfmt", "nv12", "-fps", "60", "-memStreams", "r", "4", "0", "0",
      "0", "1", "64"], "-frame 1920x1081: nv12 needs an even height"),
    (["-frame", "1921x1080", "-pixfmt", "uyvy422", "-fps", "60", "-streams", "w", "4", "0", "0",
      "0", "1", "64"], "-frame 1921x1080: uyvy422 needs a width that is a multiple of 2"),
    (["-frame", "1920x1080", "-pixfmt", "uyvy422", "-fps", "60", "-streams", "w", "4", "0", "0",
      "0", "1", "2"], "-streams w: mfile 2 MB holds no -frame 1920x1080 frame of 4147200 bytes"),
    (["-frame", "2x2", "-pixfmt", "uyvy422", "-fps", "60", "-memStreams", "w", "1", "0", "0",
      "0", "1", "1"], "-memStreams w: frames of 8 bytes; a stream's frame starts with a 16-byte"),
    (["-frame", "64x64", "-pixfmt", "rgba8", "-memStreams", "r", "4", "16", "10", "0", "1", "1"],
     "sizeKB 16 and -frame 64x64 -pixfmt rgba8 both set the frame size: give sizeKB 0"),
    (["-lateUs", "-1", "-memStreams", "r", "4", "16", "10", "0", "1", "1"],
     "-lateUs usec: -1 is out of range"),
    (["-streams", "r", "4", "1024", "10", "-1", "1", "1"], "start(s): -1 is out of range"),
    (["-streams", "r", "4", "1024", "nan", "0", "1", "1"], "nan is not a finite number"),
    (["-streams", "r", "4", "1024", "inf", "0", "1", "1"], "inf is not a finite number"),
    (["-streams", "r", "4", "1024", "8", "0", "-inf", "1"], "-inf is not a finite number"),
    (["-affinityNumber", str(CPU), "-load"], f"-affinityNumber: CPU {CPU} is not available"),
    (["-affinityNumberDiff", str(CPU), "-p", "1", "-load"],
     f"-affinityNumberDiff: CPU {CPU} is not available"),
    (["-affinityParent", str(CPU), "-load"], f"-affinityParent: CPU {CPU} is not available"),
    (["-sp", "-p", "2", "-load"], "-sp runs a single test process"),
    (["-child", "5", "-load"], "-child 5: the plan has 1 test processes"),
    (["-n", "100000", "-GB", "1", "-bcopy"], "memory is available"),
    (["-f", "a"] * 129 + ["-load"], "-f: 129 test files, at most 128"),
    (["-c", "missing.cfg", "-load"], "cannot read configuration file missing.cfg"),
    (["-aliasFile", "missing.alias", "-load"], "cannot read alias file missing.alias"),
    (["-c", ".", "-load"], "cannot read configuration file ."),
    (["-json", "out.json", "-csv", "out.json", "-load"], "both write to out.json"),
    (["-json", "/nonexistent/dir/out.json", "-load"], "is not a writable directory"),
    (["-B", "1", "-load"], "-load: a transfer of 1 bytes holds no 64-bit word: give -B 8 or more"),
    (["-B", "7", "-ls"], "-ls: a transfer of 7 bytes holds no 64-bit word"),
    (["-B", "3", "-Striad"], "-Striad: a transfer of 3 bytes holds no 64-bit word"),
    (["-B", "4", "-spinWait"], "-spinWait: a transfer of 4 bytes holds no 64-bit word"),
    (["-scan", "/nonexistent/x.dat"], "-scan: /nonexistent/x.dat does not exist"),
    (["-scanfile", "/tmp"], "-scanfile: /tmp is a directory, not a file"),
    (["-f", "/tmp", "-r"], "-r: /tmp is a directory, not a file"),
    (["-f", "missing.dat", "-r"], "-r: missing.dat does not exist (the test reads it)"),
    (["-f", "a.dat", "-s", "3", "-r"], "needs file 3 of the -f list, which has 1"),
    (["-f", "a.dat", "-p", "2", "-w"], "-w: process 1 (proc 1) needs file 1 of the -f list, "
                                      "which has 1 (0..0): process k of a test reads file s+k, "
                                      "s its -s, else its first proc's number (0); to share one "
                                      "file, name it once per process, and put -s 0 before -w "
                                      "if no other test uses the list"),
    (["-n", "4", "-bcopy", "-f", "a.dat", "-w"], "-w: process 0 (proc 1) needs file 1 of the -f "
                                                "list, which has 1 (0..0): process k of a test "
                                                "reads file s+k, s its -s, else its first "
                                                "proc's number (1); "),
    (["-f", "/proc/sys/vm/swappiness", "-w"], "-w: /proc/sys/vm/swappiness is on /proc "
                                              "(proc), the kernel's own files"),   # a setting
    (["-runtime", "3", "-r"], "unknown option -runtime (fio's --runtime is -t here: run for "
                              "this long"),
    (["-iodepth=16", "-aio", "16"], "unknown option -iodepth=16 (fio's --iodepth: -aio N keeps "
                                    "N sequential transfers outstanding; N random ones at once "
                                    "are -p N processes of -rand on one file, the file named "
                                    "once per process)"),
    (["-bs", "4k", "-r"], "unknown option -bs (fio's --bs is -KB here: transfer size in KBytes)"),
    (["-files", "10"], "there is no -files tree in filestest: add -cfiles"),
    (["-mfileKB", "4", "-KB", "64", "-rand"], "the maximum file size (4096 bytes) is smaller"),
    (["-extraReadKB", "4", "-w"], "-extraReadKB does not apply to -w; it applies to -r"),
    (["-engine", "sync", "-aio", "8"], "-engine sync runs one transfer at a time"),
    (["-engine", "fast", "-r"], "-engine name: 'fast' is not one of auto, uring, threads, sync"),
    (["-t", "0", "-load"], "-t seconds: 0 is out of range"),
    (["-t", "-2", "-load"], "-t seconds: -2 is out of range"),
    (["-t", "soon", "-load"], "-t seconds: 'soon' is not a number of seconds"),
    (["-t", "inf", "-load"], "-t seconds: inf is out of range"),
    (["-tAll", "0", "-load"], "-tAll seconds: 0 is out of range"),
    (["-ramp", "-1", "-load"], "-ramp seconds: -1 is out of range"),
    (["-ramp", "nan", "-load"], "-ramp seconds: nan is out of range"),
    (["-t", "1", "-ramp", "1", "-load"], "-ramp 1 is not shorter than -t 1"),
    (["-t", "1", "-ramp", "2", "-load"], "-ramp 2 is not shorter than -t 1"),
    (["-tAll", "1", "-rampAll", "1.5", "-load"], "-ramp 1.5 is not shorter than -t 1"),
    (["-t", "1", "-streams", "r", "4", "1024", "10", "0", "1", "1"],
     "-t does not apply to -streams (a stream runs for its runTime argument)"),
    (["-baseline", "-child", "0", "-load"], "-baseline runs every group alone"),
    (["-repeat", "0", "-load"], "-repeat n: 0 is out of range"),
    (["-repeat", "x", "-load"], "-repeat n: 'x' is not an integer"),
]

CONFIG = [   # (config file text, the message naming FILE:LINE)
    ("-n 4\n-MB x -load\n", "bad.cfg:2: -MB MB: 'x' is not an integer"),
    ("# fine\n\n-bogus\n", "bad.cfg:3: unknown option -bogus"),
    ("-n 4 -MB 2\n", "bad.cfg:1: local options without an action after them: -n 4 -MB 2"),
    ("-streams r 4 'unclosed\n", "bad.cfg:1: No closing quotation"),
    ("-V 99\n", "bad.cfg:1: -V n: 99 is out of range"),
    ("# only a comment\n", "no action given: name a test (e.g. -load) or put one in bad.cfg"),
]

ALIASES = [  # (alias file text, command line after -aliasFile, message)
    ("a = -b\nb = -a\n", ["-a"], "alias loop: a -> b -> a"),
    ("self = -self\n", ["-self"], "alias loop: self -> self"),
    ("load = -bzero\n", ["-load"], "would hide the option -load"),
    ("broken -n 4\n", ["-load"], "bad.alias:1: expected 'NAME = tokens ...'"),
    ("big = -n 0 -load\n", ["-big"], "bad.alias:1: -n n: 0 is out of range"),
]


@pytest.mark.parametrize("argv,message", CMDLINE, ids=[" ".join(a)[:40] or "empty"
                                                       for a, _ in CMDLINE])
def test_bad_command_lines(capsys, argv, message):
    assert_one_clean_line(*execute(capsys, *argv), message)


def test_the_subcommands_the_parser_names_are_the_cli_s():
    from torque_async import cli, cmdline
    assert sorted(cmdline.SUBCOMMANDS) == sorted(cli.main.commands)


@pytest.mark.parametrize("text,message", CONFIG, ids=[m for _, m in CONFIG])
def test_bad_config_files_name_file_and_line(capsys, tmp_path, text, message):
    (tmp_path / "bad.cfg").write_text(text)
    assert_one_clean_line(*execute(capsys, "-c", "bad.cfg"), message)


@pytest.mark.parametrize("make, what", [(os.mkdir, "a directory"),
                                        (lambda p: os.symlink("gone.cfg", p),
                                         "a link that leads to no file"),
                                        (os.mkfifo, "a FIFO")])
def test_a_torque_config_that_is_no_file_is_refused_by_a_run_alone(capsys, tmp_path, make,
                                                                   what):
    """A directory or a dangling link named Torque.config ran the packaged workload, unsaid;
    -version and -freeSharedMemory, which read no configuration, still answer."""
    make(tmp_path / "Torque.config")
    assert_one_clean_line(*execute(capsys, "-smkey", "0x7D6F"),
                          f"Torque.config is {what}, not a configuration file: remove it, or "
                          f"name one with -c")
    assert execute(capsys, "-version")[0] == 0
    assert execute(capsys, "-smkey", "0x7D6F", "-freeSharedMemory")[0] == 0


@pytest.mark.parametrize("text,argv,message", ALIASES, ids=[m for _, _, m in ALIASES])
def test_bad_alias_files(capsys, tmp_path, text, argv, message):
    (tmp_path / "bad.alias").write_text(text)
    assert_one_clean_line(*execute(capsys, "-aliasFile", "bad.alias", *argv), message)


@pytest.mark.parametrize("stdin, message", [(subprocess.DEVNULL, "a file or device"),
                                            (None, "which is closed")])
def test_g_needs_a_stdin_it_can_wait_on(stdin, message, tmp_path):
    """-g with stdin at /dev/null or closed: one line, not a traceback from the loop's reader."""
    r = subprocess.run([*CMD, "-g", "-n", "2", "-load"], capture_output=True, text=True, env=ENV,
                       cwd=tmp_path, timeout=60, **({"stdin": stdin} if stdin is not None
                                                      else {"preexec_fn": lambda: os.close(0)}))
    assert_one_clean_line(r.returncode, r.stdout, r.stderr, message)
