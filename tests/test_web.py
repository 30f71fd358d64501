"""-web: the tree and its size law, the picks, whole-file requests, the log, the cap, bad input."""
from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from torque_async import cmdline
from torque_async.io import identity
from torque_async.web import site, summary
from torque_async.web.picks import BLOCK, Picker, Popularity, generators

from conftest import CMD, ENV, REPO, assert_one_clean_line, execute
from test_report import MS, record

SEED = "7"


@pytest.fixture
def key(request) -> str:
    """A shared-memory key of this test's own."""
    return hex(0x5E000 + zlib.crc32(request.node.nodeid.encode()) % 0x1000)


def web(capsys, key: str, *argv: str) -> tuple[int, str, str]:
    return execute(capsys, "-smkey", key, "-seed", SEED, "-fast", *argv)


def results(capsys, key: str, *argv: str) -> dict:
    code, out, err = web(capsys, key, "-json", "out.json", *argv)
    assert code == 0, err
    return json.loads(Path("out.json").read_text())


def test_the_gamma_law_of_the_sizes_is_filebench_s():
    law = site.Law(20000, "gamma", 16384, 1.5, 0, 20)
    sizes = site.planned_sizes(law)
    law_sample = np.random.default_rng(99).gamma(1.5, 16384 / 1.5, 2_000_000)   # its quantiles
    assert abs(sizes.mean() / 16384 - 1) < 0.02
    for q in (0.5, 0.99):
        assert abs(np.quantile(sizes, q) / np.quantile(law_sample, q) - 1) < 0.04, q
    exponential = np.random.default_rng(99).exponential(16384, 2_000_000)   # shape 1: apart
    assert abs(np.quantile(sizes, 0.5) / np.quantile(exponential, 0.5) - 1) > 0.08
    assert sizes.min() >= 1


def test_the_other_laws_and_the_cap():
    fixed = site.planned_sizes(site.Law(100, "fixed", 5000, 0.0, 0, 20))
    assert set(fixed.tolist()) == {5000}
    uniform = site.planned_sizes(site.Law(20000, "uniform", 5000, 0.0, 0, 20))
    assert uniform.min() >= 1 and uniform.max() <= 9999 and abs(uniform.mean() / 5000 - 1) < 0.02
    capped = site.planned_sizes(site.Law(2000, "gamma", 16384, 1.5, 20000, 20))
    assert capped.max() == 20000


def test_directory_widths_are_gamma_around_the_mean():
    law = site.Law(20000, "gamma", 16384, 1.5, 0, 20)
    dirs = site.planned_dirs(law)
    counts = np.array([c for _, c in dirs])
    assert counts.sum() == 20000 and counts.min() >= 1
    assert abs(counts.mean() / 20 - 1) < 0.1
    tops = {d.split("/")[0] for d, _ in dirs}
    assert len(tops) <= 20
    assert len(set(site.names(dirs))) == 20000


def test_zipf_picks_concentrate_as_the_law_says():
    pop = Popularity(1000, 1.1, seed=3, group=0)
    picks = np.array(Picker(pop, np.random.default_rng(1)).block(200_000))
    counts = np.bincount(picks, minlength=1000)
    hottest = pop.order[:10]                      # ranks 1..10 through the seeded permutation
    share = counts[hottest].sum() / picks.size
    assert abs(share - pop.share(10)) < 0.01
    assert pop.share(10) > 0.35                   # 1.1 concentrates: about 40% on 1% of files
    assert counts[hottest[0]] > 1.8 * counts[hottest[1]]     # rank 1 vs 2: 2^1.1 = 2.14
    again = Popularity(1000, 1.1, seed=3, group=0)
    assert (again.order == pop.order).all()       # the hot set is the same files for the seed
    assert not (Popularity(1000, 1.1, seed=4, group=0).order[:10] == hottest).all()


def test_uniform_picks_spread_evenly():
    pop = Popularity(100, None, seed=3, group=0)
    counts = np.bincount(Picker(pop, np.random.default_rng(1)).block(100_000), minlength=100)
    assert counts.min() > 800 and counts.max() < 1200


def test_a_request_reads_the_whole_file_and_the_log_grows_by_the_appends(capsys, key):
    """The log holds this run's appends alone: one before it left its own (it grew by 37 MB a
    second of every run, for ever)."""
    results(capsys, key, "-dir", "site", "-cfiles", "-webFiles", "300", "-appendEvery", "1",
            "-n", "200", "-web")
    doc = results(capsys, key, "-dir", "site", "-webFiles", "300", "-KB", "4",
                  "-zipf", "0.9", "-appendEvery", "3", "-appendKB", "2", "-n", "2500", "-i", "2",
                  "-keepLog", "-web")
    manifest = json.loads(Path("site", site.MANIFEST).read_text())
    names, sizes = site.names(manifest["dirs"]), manifest["sizes"]
    for name, size in zip(names, sizes):
        assert os.lstat(Path("site", name)).st_size == size
    picks, _ = generators(np.random.default_rng([int(SEED), 0]))
    picker = Picker(Popularity(300, 0.9, int(SEED), 0), picks)
    wanted = picker.block() + picker.block(5000 - BLOCK)     # past the first block of picks
    test = doc["tests"][0]
    assert test["record"]["transfers"] == 5000
    assert test["record"]["bytes"] == sum(sizes[f] for f in wanted)
    summary = doc["plan"]["groups"][0]["web"]
    assert summary["read_bytes"] == test["record"]["bytes"]
    assert summary["ops"]["append"]["count"] == 5000 // 3
    assert Path("site", site.LOG).stat().st_size == summary["appended_bytes"] > 0
    assert summary["log_bytes"] == summary["appended_bytes"] and summary["log_kept"]
    reads = sum(-(-s // 4096) if s % 4096 else s // 4096 for s in (sizes[f] for f in wanted))
    assert summary["ops"]["read"]["count"] == reads
    assert summary["ops"]["open"]["count"] == summary["ops"]["close"]["count"] == 5000
    made = summary["sizes"]
    assert made["files"] == 300 and made["mean"] == round(np.mean(sizes))


def test_the_tree_is_reused_and_remade_only_when_its_law_changes(capsys, key):
    argv = ("-dir", "site", "-cfiles", "-webFiles", "50", "-n", "5", "-web")
    assert web(capsys, key, *argv)[0] == 0
    first = {p: p.stat().st_mtime_ns for p in Path("site").rglob("f0*")}
    code, out, _ = web(capsys, key, *argv)
    assert code == 0 and "reused" in out
    assert {p: p.stat().st_mtime_ns for p in Path("site").rglob("f0*")} == first
    code, out, err = web(capsys, key, "-dir", "site", "-cfiles", "-webFiles", "20",
                         "-webSizes", "fixed", "-n", "5", "-web")
    assert code == 0, err
    assert len(list(Path("site").rglob("f0*"))) == 20
    assert {p.stat().st_size for p in Path("site").rglob("f0*")} == {16384}


def test_clients_hold_files_open_under_the_cap(capsys, key):
    argv = ("-dir", "site", "-cfiles", "-webFiles", "40", "-webSizes", "fixed", "-webMeanKB",
            "16", "-KB", "4", "-T", "300", "-p", "6", "-n", "20", "-i", "1")
    free = results(capsys, key, *argv, "-web")["plan"]["groups"][0]["web"]
    capped = results(capsys, key, *argv, "-webOpen", "2", "-web")["plan"]["groups"][0]["web"]
    assert free["most_open"] > 2                  # without a cap, clients hold files together
    assert capped["most_open"] == 2
    assert capped["requests"] == free["requests"] == 120


def test_clients_are_one_summary_unless_verbose(capsys, key):
    argv = ("-dir", "site", "-cfiles", "-webFiles", "30", "-p", "3", "-n", "10", "-i", "1", "-web")
    code, out, _ = web(capsys, key, *argv)
    assert code == 0
    assert "Web group 0: 3 clients, 30 requests" in out
    assert "p50 " in out and "\nrequest, 30," in out
    opened = re.search(r"\nopen, (\d+),", out)         # every open, or those resolved (the
    resolved = re.search(r"resolved for (\d+) of 30 timed", out)   # line says how many)
    if resolved is None:
        assert opened and opened[1] == "30"
    else:
        assert int(resolved[1]) == (int(opened[1]) if opened else 0)
        assert opened or "\nopen, unresolved" in out
    assert ", Web, site," not in out              # no per-client rows
    code, out, _ = web(capsys, key, "-v", *argv)
    assert out.count(", Web, site,") == 3


def test_a_files_tree_s_directory_is_named_as_one_not_as_foreign_files(capsys, key):
    assert web(capsys, key, "-n", "4", "-KB", "4", "-cfiles", "-files", "4")[0] == 0
    assert_one_clean_line(*web(capsys, key, "-n", "4", "-web"), "-web: -dir filestest holds a "
                          "-files tree (its torque-files.json): a -web site needs a -dir of its "
                          "own")


def test_symbolic_links_and_foreign_files_are_refused(capsys, key):
    argv = ("-dir", "site", "-cfiles", "-webFiles", "30", "-n", "5", "-web")
    assert web(capsys, key, *argv)[0] == 0
    victim = next(Path("site").rglob("f0000003"))
    victim.unlink()
    victim.symlink_to("/etc/passwd")
    assert_one_clean_line(*web(capsys, key, *argv), f"{victim} is a symbolic link")
    victim.unlink()
    Path("elsewhere").write_bytes(b"x")
    os.link("elsewhere", victim)
    assert_one_clean_line(*web(capsys, key, *argv), f"{victim} has 1 other name (a hard link)")
    victim.unlink()
    os.mkfifo(victim)                               # was called a link or hard links
    assert_one_clean_line(*web(capsys, key, *argv), f"{victim} is a FIFO: a -web tree holds "
                                                    f"only its own regular files")
    victim.unlink()
    Path("site", "notes.txt").write_text("mine")
    assert_one_clean_line(*web(capsys, key, *argv), "did not make")
    code, _, err = web(capsys, key, "-allowForeign", *argv)
    assert code == 0, err
    assert Path("site", "notes.txt").read_text() == "mine"
    manifest = next(Path("site").glob("*.json"))
    manifest.unlink()
    os.mkfifo(manifest)                             # read without O_NONBLOCK, it would hang
    assert_one_clean_line(*web(capsys, key, *argv), "it is a FIFO, not a regular file")
    assert Path("elsewhere").read_bytes() == b"x"


def test_a_tree_file_replaced_since_it_was_made_is_not_the_tree_s(capsys, key):
    """A user's file in a tree file's place (same name, same size) was the tree's: -cfiles of
    another size would rewrite it. The manifest keeps who each file is (inode and birth time:
    a file deleted and made again often gets the same inode number back)."""
    argv = ["-dir", "site", "-webFiles", "20", "-n", "2", "-web"]
    assert web(capsys, key, "-cfiles", *argv)[0] == 0
    manifest = json.loads(Path("site", site.MANIFEST).read_text())
    first, second = (Path("site", name) for name in site.names(manifest["dirs"])[:2])
    assert tuple(manifest["made"][0]) == identity.of(None, str(first))
    Path("mine").write_bytes(first.read_bytes())
    os.replace("mine", first)
    for cfiles in ([], ["-cfiles"]):
        assert_one_clean_line(*web(capsys, key, *cfiles, *argv),
                              f"{first} was replaced since torque-async made it (another file "
                              f"under its name)")
    data = second.read_bytes()
    first.unlink()
    second.unlink()
    second.write_bytes(data)
    assert_one_clean_line(*web(capsys, key, *argv), f"{second} was replaced since torque-async")


def test_allow_foreign_never_lets_a_file_stand_where_the_tree_s_own_goes(capsys, key):
    """-allowForeign -cfiles of a larger tree over a planted file at one of its new names failed
    at set-up (exit 1, BW 0) after it had rewritten the manifest for the new law."""
    argv = ["-dir", "site", "-cfiles", "-n", "2", "-web"]
    assert web(capsys, key, "-webFiles", "20", *argv)[0] == 0
    law = json.loads(Path("site", site.MANIFEST).read_text())["law"]
    planned = site.names(site.planned_dirs(site.Law(**{**law, "files": 30})))
    Path("site", planned[25]).parent.mkdir(parents=True, exist_ok=True)
    Path("site", planned[25]).write_text("mine")
    code, _, err = web(capsys, key, "-allowForeign", "-webFiles", "30", *argv)
    assert_one_clean_line(code, "", err, f"{Path('site', planned[25])} is where the tree's own "
                                         f"file or directory goes, and torque-async did not "
                                         f"make it")
    assert json.loads(Path("site", site.MANIFEST).read_text())["law"] == law
    assert Path("site", planned[25]).read_text() == "mine"


@pytest.mark.parametrize("argv, message", [
    (("-webMeanKB", "32", "-mfileKB", "16"), "larger than the maximum"),
    (("-zipf", "0"), "theta must be above 0"),
    (("-zipf", "-1"), "out of range"),
    (("-appendEvery", "0"), "out of range"),
    (("-sample", "3"), "-sample"),
    ((), "add -cfiles"),
    (("-cfiles", "-web", "-dir", "./site", "-cfiles"),     # its log counted both groups' appends
     "-web: groups 0 and 1 both serve -dir ./site (its log counts one group's appends): give "
     "each its own -dir, or make them one group of more clients (-p)"),
    (("-cfiles", "-web", "-dir", "site", "-cfiles", "-files", "5"),   # then every run refused it
     "-web: groups 0 and 1 both use -dir site, one for a -files tree and one for a -web site"),
])
def test_bad_input_is_one_line(capsys, key, argv, message):
    assert_one_clean_line(*web(capsys, key, "-dir", "site", *argv, "-web"), message)


def test_more_clients_than_free_descriptors_need_a_cap(tmp_path):
    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    argv = [*CMD, "-smkey", "0x5F001", "-dir", "site", "-cfiles", "-webFiles", "20", "-n", "2"]
    done = subprocess.run([*argv, "-p", "100", "-web"], capture_output=True, text=True,
                          env=ENV, preexec_fn=low, timeout=120)
    assert_one_clean_line(done.returncode, done.stdout, done.stderr, "-webOpen")
    done = subprocess.run([*argv, "-p", "100", "-webOpen", "8", "-web"], capture_output=True,
                          text=True, env=ENV, preexec_fn=low, timeout=120)
    assert done.returncode == 0, done.stderr

    def lower():                       # below what the run itself holds: -webOpen cannot help
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
    done = subprocess.run([*argv, "-p", "2", "-webOpen", "1", "-web"], capture_output=True,
                          text=True, env=ENV, preexec_fn=lower, timeout=120)
    assert_one_clean_line(done.returncode, done.stdout, done.stderr, "(the run's own, and its "
                          "tests' under -webOpen) but the limit is 40 (ulimit -n): raise it")
    assert done.stderr.rstrip().endswith("raise it")      # not 'or set -webOpen', set already


def test_the_shipped_workloads_parse(capsys):
    alias = str(REPO / "aliases" / "workloads.alias")
    for name in ("webserver", "videoserver"):
        code, out, err = execute(capsys, "-aliasFile", alias, f"-{name}", "-quit")
        assert code == 0, err


def test_the_group_rate_counts_every_request_made_in_its_span(capsys, key):
    code, _, err = execute(capsys, "-smkey", key, "-json", "out.json", "-dir", "site", "-cfiles",
                           "-webFiles", "30", "-p", "4", "-n", "50", "-i", "1", "-web")
    assert code == 0, err
    doc = json.loads(Path("out.json").read_text())
    summary, tests = doc["plan"]["groups"][0]["web"], doc["tests"]
    extra = sum(t["record"]["extra_transfers"] for t in tests)
    assert summary["measured"] == sum(t["record"]["transfers"] for t in tests) == 200
    assert 200 <= summary["requests"] <= 200 + extra
    assert summary["requests_per_s"] == summary["requests"] * 1e9 / summary["span_ns"]


def test_t_ends_each_client_at_its_deadline_and_ramp_goes_first(capsys, key):
    doc = results(capsys, key, "-dir", "site", "-cfiles", "-webFiles", "30", "-p", "2",
                  "-n", "100000000", "-t", "0.4", "-ramp", "0.1", "-web")
    summary, tests = doc["plan"]["groups"][0]["web"], doc["tests"]
    for test in tests:
        record = test["record"]
        assert 0 < record["transfers"] < 100000000
        assert record["ramp_transfers"] > 0
        assert record["finish"] - record["start"] >= 0.25e9        # -t 0.4 less the ramp: 0.3 s
    assert summary["measured"] == sum(t["record"]["transfers"] for t in tests)
    opened = (summary["ops"]["open"] or {"count": 0})["count"]     # (those whose split is
    assert opened + summary["ops_unresolved"] == summary["measured"]   # resolved)
    assert summary["log_bytes"] >= summary["appended_bytes"] > 0   # -ramp appended too
    assert not Path("site", site.LOG).exists()                    # made by the run, removed


def test_a_request_s_latency_leaves_out_its_throttle_pauses(capsys, key):
    """-T pauses between a request's reads (and other clients' turns) are not the request's."""
    code, out, err = web(capsys, key, "-dir", "site", "-cfiles", "-webFiles", "4", "-webMeanKB",
                         "64", "-KB", "4", "-T", "20000", "-n", "2", "-web")
    assert code == 0, err
    request = next(ln for ln in out.splitlines() if ln.startswith("request, "))
    reads = next(ln for ln in out.splitlines() if ln.startswith("read, "))
    assert int(reads.split(", ")[1]) > 2 * int(request.split(", ")[1])   # several reads each
    assert float(request.split(", ")[3]) < 20000          # avg (us): not one 20 ms pause in it


def test_t_throttles_a_file_read_in_one_read_too(capsys, key):
    """-T waits after each read, holding the file: a file read in one read (the default 1 MB
    transfer, 16 KB files) broke out before the wait, and 2 clients made thousands a second."""
    doc = results(capsys, key, "-dir", "site", "-cfiles", "-webFiles", "8", "-p", "2",
                  "-n", "100000000", "-t", "0.5", "-T", "20000", "-web")
    summary = doc["plan"]["groups"][0]["web"]
    assert 2 <= summary["requests"] <= 2 * (0.5 / 0.02 + 1)    # at most one per 20 ms a client
    count = {op: (summary["ops"][op] or {"count": 0})["count"] for op in ("open", "read")}
    assert count["read"] == count["open"]                      # one read each (resolved ones)
    assert count["open"] + summary["ops_unresolved"] == summary["measured"]


def test_a_client_that_failed_before_it_published_is_left_out_of_the_group_s_span():
    """Its row counts transfers but has no interval (start 0): the span ran from 0 to the
    others' finish, '64 requests in 26490944 ms'."""
    plan = cmdline.parse("-dir site -p 2 -web".split())
    ok = record(0, 1000, 50 * MS, 40, 0, group_work=(64, 4096, 0), most_open=1)
    failed = record(1, 0, 0, 30, 0, group_work=(60, 4000, 0), most_open=1)
    failed = replace(failed, start=0, finish=0)
    s = summary.group_summary(plan.groups[0], (ok, failed), plan.procs())
    assert s["clients"] == 1 and s["span_ns"] == 50 * MS and s["requests"] == 64


def test_bo_keeps_the_line_that_says_a_web_group_s_rates_are_not_resolved(capsys, key):
    """-bo keeps what says its figures are not whole: a -web group's span under 100 ms was
    said only without -bo."""
    code, out, err = web(capsys, key, "-bo", "-dir", "site", "-cfiles", "-webFiles", "20",
                         "-p", "2", "-n", "4", "-i", "1", "-web")
    assert code == 0, err
    assert re.search(r"^Web group 0: measured for \d+\.\d ms \(< 100 ms\): its rates are not "
                     r"resolved$", out, re.M)
    assert out.startswith("BW, Web, Total\n")


def test_a_cluster_s_web_summary_sums_every_rank_s_loop():
    """Each rank's clients share their loop's count (the last to publish holds it): under
    mpiexec the summary took the largest rank's as the group's (131533 requests, fewer than the
    383390 timed)."""
    from torque_async.report_cluster import ClusterRun, Rank
    plan = cmdline.parse("-dir site -p 2 -web".split())
    ranks = tuple(Rank(k, "h", 1, 0, 0, (
        record(0, 1000, 50 * MS, 40, 0, group_work=(100 + k, 4096 * (k + 1), 10), most_open=1),
        record(1, 1000, 50 * MS, 40, 0, group_work=(90 + k, 4000, 9), most_open=1)))
        for k in range(3))
    run = ClusterRun(ranks, plan)
    s = summary.group_summary(plan.groups[0], run.records, run.procs)
    assert (s["clients"], s["measured"]) == (6, 240)
    assert (s["requests"], s["read_bytes"], s["appended_bytes"]) == (303, 4096 * 6, 30)
    one = summary.group_summary(plan.groups[0], ranks[2].records, plan.procs())
    assert (one["requests"], one["read_bytes"]) == (102, 4096 * 3)    # one loop: its last count


def test_a_dir_that_cannot_hold_the_tree_is_refused_at_the_plan(capsys, key):
    """A -dir under a file failed the run at set-up, after its start-up (exit 1)."""
    Path("afile").write_text("x")
    assert_one_clean_line(*web(capsys, key, "-dir", "afile/sub", "-cfiles", "-web"),
                          f"-web: -dir afile/sub: {Path('afile').resolve()} is a file, not a "
                          f"directory")
    assert Path("afile").read_text() == "x"


def test_a_log_another_rank_removed_first_is_no_error(tmp_path, monkeypatch):
    """Under mpiexec every rank's clients append to one site's log, and each rank's last
    client removes it: the name gone between one rank's look and its unlink failed that
    rank's test ('closing: torque-web.log: No such file or directory')."""
    from torque_async.web import client
    root = tmp_path / "site"
    root.mkdir()
    log = os.open(root / site.LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    tree = site.Tree(str(root), os.open(root, os.O_RDONLY | os.O_DIRECTORY), None, [],
                     np.zeros(0, np.int64), True)
    looked = os.stat

    def other_rank_first(*args, **kwargs):           # its look, then the other's unlink
        found = looked(*args, **kwargs)
        os.unlink(root / site.LOG)
        return found
    monkeypatch.setattr(client.os, "stat", other_rank_first)
    try:
        client.remove_log(tree, log)
    finally:
        monkeypatch.undo()
        os.close(log)
        tree.close()
    assert not (root / site.LOG).exists()
