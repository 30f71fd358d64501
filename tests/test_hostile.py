"""What a hostile user tried before this release: things planted at a segment's name, results
nested too deeply, an enormous offending token, -checkpoint of a run that never started."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from torque_async import cmdline, export
from torque_async.results import segment_name

from conftest import assert_one_clean_line, run_cli


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


def test_checkpoint_prints_no_times_for_a_run_that_never_started():
    from dataclasses import replace
    from torque_async import cmdline, report
    from test_report import MS, record
    plan = cmdline.parse("-checkpoint -n 4 -r".split())
    spawned = replace(record(0, 0, 0, 0, 4096), phase=(6484855 * MS, 0, 0, 0, 6487664 * MS))
    assert report.checkpoint_lines((spawned,), plan.procs(), 0) == []     # no time zero
    started = report.checkpoint_lines((spawned,), plan.procs(), 6484000 * MS)
    assert started[0].startswith("checkpoint proc 0 (ms since the start): spawned 855.0")


def test_no_output_is_written_at_a_segment_s_name(tmp_path):
    for name in (segment_name(0x9A071), f".{segment_name(0x9A071)}.x"):
        r = run_cli("-smkey", "0x9A073", "-json", f"/dev/shm/{name}", "-n", "2", "-KB", "4",
                    "-bzero", cwd=tmp_path)
        assert_one_clean_line(r.returncode, r.stdout, r.stderr,
                              f"-json /dev/shm/{name} is a name torque-async gives its shared "
                              f"memory: name another file")
        assert not os.path.exists(f"/dev/shm/{name}")
