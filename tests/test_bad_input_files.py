"""Bad input that reaches a file or the parser: every read has a bound, every OSError one line
(exit 2), for the run and for the compare and plot subcommands."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from torque_async import cli, cmdline, export

from conftest import assert_one_clean_line, execute, run_cli
from test_compare import PLAN, document, write

READ = ["-n", "2", "-KB", "4", "-r"]


def invoke(capsys, *args: str) -> tuple[int, str, str]:
    """The click group as the command runs it (compare, plot and their usage errors)."""
    with pytest.raises(SystemExit) as done:
        cli.main(list(args))
    out, err = capsys.readouterr()
    return done.value.code, out, err


def results(path) -> str:
    return write(document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100}), path)


def test_a_configuration_file_of_too_many_tokens_does_not_blame_aliases(capsys):
    Path("big.cfg").write_text("-n 2\n" * 50001)
    assert_one_clean_line(*execute(capsys, "-c", "big.cfg", "-load"),
                          "big.cfg:50001: more than 100000 tokens\n")


def test_alias_expansion_is_bounded_in_depth_and_length(capsys):
    doubling = [f"a{i} = -a{i + 1} -a{i + 1}" for i in range(40)] + ["a40 = -n 2"]
    Path("double.alias").write_text("\n".join(doubling) + "\n")
    assert_one_clean_line(*execute(capsys, "-aliasFile", "double.alias", "-a0", "-load"),
                          "more than 100000 tokens once aliases are expanded (a0 -> a1 -> ")
    chain = [f"b{i} = -b{i + 1}" for i in range(3000)] + ["b3000 = -n 2"]
    Path("chain.alias").write_text("\n".join(chain) + "\n")
    assert_one_clean_line(*execute(capsys, "-aliasFile", "chain.alias", "-b0", "-load"),
                          "chain.alias:64: aliases nested more than 64 deep: b0 -> b1 -> b2")
    Path("ok.alias").write_text("\n".join(chain[-64:]) + "\n")          # 64 deep is fine
    code, _, err = execute(capsys, "-aliasFile", "ok.alias", "-b2937", "-quit", "-load")
    assert code == 0, err


def test_config_and_alias_files_are_read_up_to_16_mb(capsys):
    with open("big.cfg", "wb") as fh:
        fh.truncate((16 << 20) + 1)
    assert_one_clean_line(*execute(capsys, "-c", "big.cfg"),
                          "cannot read configuration file big.cfg: longer than 16 MB")


FILE_ERRORS = [
    ("loop.dat", "-r: cannot use loop.dat: Too many levels of symbolic links"),
    ("x" * 5000, "File name too long"),
    ("/proc/self/status", "-r: /proc/self/status is on /proc (proc), the kernel's own files"),
    ("/sys/devices/system/cpu/online", "is on /sys (sysfs), the kernel's own files: the file "
                                       "tests work on regular files and devices"),  # 4096: ran
    ("sub/file.dat", "-r: cannot use sub/file.dat: Not a directory"),
    ("/dev/zero", "-r: /dev/zero is a character device, which has no size to lay the reads out "
                  "in: the file tests read regular files and block devices"),     # was: holds 0
]


@pytest.mark.parametrize("path,message", FILE_ERRORS, ids=[m[:30] for _, m in FILE_ERRORS])
def test_every_error_finding_a_files_size_is_one_line(capsys, path, message):
    os.symlink("loop.dat", "loop.dat")
    Path("sub").write_text("a file, not a directory")
    assert_one_clean_line(*execute(capsys, "-f", path, *READ), message)


def test_a_file_name_that_is_not_utf_8_is_shown_not_a_traceback(capsys, key):
    name = os.fsdecode(b"\xff\xfe.dat")
    Path(name).write_bytes(b"z" * 65536)
    code, out, err = execute(capsys, "-smkey", key, "-f", name, "-csv", "run.csv", *READ)
    assert code == 0 and "Traceback" not in err, err
    assert "\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}.dat" in out
    assert_one_clean_line(*execute(capsys, "-f", os.fsdecode(b"\xffmissing"), *READ),
                          "does not exist")


@pytest.mark.parametrize("change", ["tests", "a test", "a table", "bandwidth"])
def test_compare_and_plot_refuse_valid_json_of_the_wrong_shape(capsys, tmp_path, change):
    good = results(tmp_path / "a.json")
    doc = json.loads(Path(good).read_text())
    if change == "tests":
        doc["tests"] = 5
    elif change == "a test":
        doc["tests"][1] = "fast"
    elif change == "a table":
        del doc["tests"][0]["table"]
    else:
        doc["bandwidth"] = {"total": "lots"}
    Path("bad.json").write_text(json.dumps(doc))
    for argv in (["compare", good, "bad.json"], ["plot", "bad.json"]):
        assert_one_clean_line(*invoke(capsys, *argv),
                              "bad.json is not a torque-async results file: ")
    assert not Path("bad.png").exists()


SUBCOMMAND_ERRORS = [
    (["compare"], "compare: Missing argument 'BASE'. (--help for help)"),
    (["compare", "a.json"], "compare: Missing argument 'RUNS...'."),
    (["compare", "a.json", "a.json", "--threshold", "nan"], "--threshold: nan is not a number of percent"),
    (["compare", "a.json", "a.json", "--threshold", "inf"], "--threshold: inf is not a number of percent"),
    (["compare", "a.json", "a.json", "--threshold", "-1"], "Invalid value for '--threshold'"),
    (["plot", "--bogus"], "plot: No such option '--bogus'"),
    (["plot", "a.json", "-o", "."], "plot: . is a directory: name a file in it"),
    (["plot", "a.json", "-o", "no/such/a.png"], "cannot write no/such/a.png: no/such is not a "
                                                "writable directory"),
    (["plot", "a.json", "-o", "fifo"], "plot: fifo is a FIFO, not a file (-o FILE.png)"),
    (["plot", "a.json", "-o", ""], "plot: -o '' names no file"),
    (["plot", "a.json", "-o", "a.json"], "plot: a.json is the results file itself"),
    (["compare", "a.json", "/dev/zero"], "cannot read /dev/zero: it is a character device"),
]


@pytest.mark.parametrize("argv,message", SUBCOMMAND_ERRORS, ids=[m for _, m in SUBCOMMAND_ERRORS])
def test_subcommand_usage_errors_are_one_line(capsys, tmp_path, argv, message):
    results(tmp_path / "a.json")
    os.mkfifo(tmp_path / "fifo")
    assert_one_clean_line(*invoke(capsys, *argv), message)


def test_the_parser_gives_up_on_an_alias_bomb_without_recursing():
    aliases = {f"a{i}": (cmdline.Token(f"-a{i + 1}", "x"),) * 2 for i in range(200)}
    with pytest.raises(cmdline.UsageError, match="nested more than 64 deep"):
        cmdline.expand([cmdline.Token("-a0", cmdline.COMMAND_LINE)], aliases)


@pytest.fixture(scope="module")
def real_results(tmp_path_factory):
    """A real run's results: a sampled memory test with latencies, and a stream."""
    where = tmp_path_factory.mktemp("real")
    r = run_cli("-smkey", "0x7A613", "-json", "real.json", "-sample", "7", "-n", "64", "-i", "1",
                "-KB", "64", "-bzero", "-sample", "9", "-memStreams", "rw", "2", "64", "62.5",
                "0", "0.05", "1", cwd=str(where))
    assert r.returncode == 0, r.stderr
    return json.loads((where / "real.json").read_text())


def edit(doc: dict, path: str, value) -> dict:
    """A copy of doc with the value at a dotted path (numbers index lists) replaced."""
    doc = json.loads(json.dumps(doc))
    *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = doc
    for k in parents:
        node = node[k]
    node[last] = value
    return doc


REFUSED, DAMAGED, DRAWN = "is not a torque-async results file: ", "do not fit together", ""
HAND_EDITS = [        # a hostile user's: each gave plot or compare a traceback
    ("tests.0.record.hist", [[1, 2]], REFUSED),
    ("tests.0.record.hist", [[1, 2, 3, 4]], REFUSED),
    ("tests.0.record.hist", [[]], REFUSED),
    ("tests.0.record.hist", [[1000, 2000, -1], [3000, 4000, 1]], REFUSED),
    ("tests.1.record.late_trace", [[1]], REFUSED),
    ("tests.0.samples.intervals", [{"start": 5, "end": 5, "transfers": 3, "bw": 0}], DRAWN),
    ("tests.0.record.transfer_bytes", 10 ** 400, DAMAGED),
    ("cluster", {"start_skew_ns": 0, "offset_uncertainty_ns": 0, "ranks": []}, DRAWN),
    ("plan.groups.1.args", [], DAMAGED),
    ("command", "-json 'cost$\\q$.json'", DRAWN),
]


@pytest.mark.parametrize("path,value,outcome", HAND_EDITS,
                         ids=[f"{p}={str(v)[:20]}" for p, v, _ in HAND_EDITS])
def test_hand_edited_results_are_drawn_or_refused_in_one_line(capsys, tmp_path, real_results,
                                                              path, value, outcome):
    Path("good.json").write_text(json.dumps(real_results))
    Path("bad.json").write_text(json.dumps(edit(real_results, path, value)))
    code, out, err = invoke(capsys, "plot", "bad.json")
    if outcome is DRAWN:
        assert code == 0 and err == "" and Path("bad.png").stat().st_size > 0, err
    else:
        assert_one_clean_line(code, out, err, outcome)
    code, out, err = invoke(capsys, "compare", "good.json", "bad.json")
    assert "Traceback" not in err and code in (0, 2), err
    if outcome is REFUSED:
        assert_one_clean_line(code, out, err, outcome)


def test_results_nested_too_deeply_are_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    for argv in (["compare", str(deep), str(deep)], ["plot", str(deep)]):
        r = run_cli(*argv)
        assert_one_clean_line(r.returncode, r.stdout, r.stderr, "nested too deeply")


def test_a_version_of_another_type_is_named_as_it_is(tmp_path):
    doc = tmp_path / "v.json"
    doc.write_text(json.dumps({"schema": export.SCHEMA_NAME,
                               "schema_version": str(export.SCHEMA_VERSION)}))
    with pytest.raises(export.ResultsFileError, match=f"version '{export.SCHEMA_VERSION}'"):
        export.load(str(doc))


def test_an_enormous_offending_token_is_cut_short(tmp_path):
    (tmp_path / "zero.cfg").write_bytes(b"\0" * (1 << 20))
    r = run_cli("-c", "zero.cfg", cwd=tmp_path)
    assert_one_clean_line(r.returncode, r.stdout, r.stderr, "characters left out) ...")
    assert len(r.stderr) < 1000


def test_a_megabyte_line_needing_shell_quoting_is_refused_not_split_for_a_minute(tmp_path):
    (tmp_path / "quoted.cfg").write_text('-n 4 "' + "x" * (1 << 20) + '" -load\n')
    r = run_cli("-c", "quoted.cfg", cwd=tmp_path)
    assert_one_clean_line(r.returncode, r.stdout, r.stderr, "quoted.cfg:1: a line of 1048589 "
                          "characters with quotes, escapes or a comment (at most 65536)")


@pytest.mark.parametrize("line", ["-n 4\t-KB  8 -load", "\x01-r\x7f \x00", "-a\xa0b -c", ""])
def test_a_line_without_quoting_splits_as_the_shell_would(tmp_path, line):
    import shlex
    (tmp_path / "plain.cfg").write_text(line + "\n")
    assert [w for _, words in cmdline.read_lines(str(tmp_path / "plain.cfg"), "x")
            for w in words] == shlex.split(line, comments=True)
