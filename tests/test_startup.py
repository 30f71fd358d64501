"""Set-up and start-up times: each test's set-up is measured into its row and the group block
prints that figure; the run's start-up (the command's start to the barrier's release) is in the
summary and the JSON."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time

from torque_async.io.filetest import FileTest
from torque_async.startup import TICK_NS
from workers.memory import BzeroTest

from conftest import ENV, execute, run_cli

SLOW_S = 0.3                       # the set-up delay injected below: set-up takes at least this


def printed_setups(text: str) -> tuple[list[float], list[float]]:
    """The group block's Set-up line: the test's own set-up figures (ms) and how long after its
    process's start it was ready (none for a loop test or -sp)."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith("Set-up = ")]
    figure = r"(\d+\.\d)(?: to (\d+\.\d))? ms"
    own = re.match(f"Set-up = {figure}", line).groups()
    ready = re.search(f"; ready {figure} after its process was started", line)
    return [float(v) for v in own if v], [float(v) for v in ready.groups() if v] if ready else []


def own(r: dict) -> float:
    """The test's own set-up (ms), from its code's start to ready."""
    return round((r["phase"]["set_up"] - r["phase"]["spawned"]) / 1e6, 1)


def printed_startup(text: str) -> int:
    (ms,) = re.findall(r"^Start-up: (\d+) ms from the command's start", text, re.M)
    return int(ms)


def check_times(doc: dict) -> list[dict]:
    """Every record's set-up is from its launch to its ready stamp; the start-up block is from
    the command's start to time zero, which follows every launch."""
    recs = [t["record"] for t in doc["tests"]]
    for r in recs:
        assert 0 < r["launched"] <= r["phase"]["spawned"] < r["phase"]["set_up"]
        assert r["setup_ns"] == r["phase"]["set_up"] - r["launched"]
    up = doc["startup"]
    assert up["began_ns"] <= min(r["launched"] for r in recs)
    assert up["to_release_ns"] == doc["time_zero_ns"] - up["began_ns"] > 0
    return recs


def test_a_slow_worker_set_up_is_measured_and_printed_as_recorded(capsys, key, monkeypatch):
    """-sp runs the worker test in this process, where its set-up is slowed by SLOW_S."""
    made = BzeroTest.__init__

    def slow_init(self, ctx):
        time.sleep(SLOW_S)         # the set-up's own work, made longer (no synchronisation)
        made(self, ctx)
    monkeypatch.setattr(BzeroTest, "__init__", slow_init)
    code, out, err = execute(capsys, "-smkey", key, "-sp", "-n", "2", "-i", "1", "-KB", "4",
                             "-bzero", "-json", "-")
    assert code == 0, err
    doc = json.loads(out)
    (rec,) = check_times(doc)
    assert rec["setup_ns"] >= SLOW_S * 1e9
    assert own(rec) >= SLOW_S * 1e3                   # the slowed part is the test's own
    assert printed_setups(err) == ([own(rec)], [round(rec["setup_ns"] / 1e6, 1)])
    assert doc["startup"]["resolution_ns"] == 0          # execute(): began when called
    assert printed_startup(err) == round(doc["startup"]["to_release_ns"] / 1e6)


def test_a_slow_loop_test_set_up_is_its_setup_coroutine(capsys, key, monkeypatch):
    setup = FileTest.setup

    async def slow_setup(self):
        await asyncio.sleep(SLOW_S)
        await setup(self)
    monkeypatch.setattr(FileTest, "setup", slow_setup)
    code, out, err = execute(capsys, "-smkey", key, "-p", "2", "-n", "4", "-KB", "4", "-i", "1",
                             "-r", "-json", "-")
    assert code == 0, err
    recs = check_times(json.loads(out))
    assert all(r["setup_ns"] >= SLOW_S * 1e9 for r in recs)
    assert printed_setups(err) == (sorted(round(r["setup_ns"] / 1e6, 1) for r in recs), [])


def test_spawned_workers_count_their_set_up_from_their_process_s_start(key):
    done = run_cli("-smkey", key, "-p", "2", "-n", "2", "-i", "1", "-KB", "4", "-bzero",
                   "-json", "-")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    recs = check_times(doc)
    # the orchestrator stamps a worker before its interpreter starts: the child's first stamp
    # (after its imports) comes later, and before that the command had started
    assert all(r["phase"]["spawned"] > r["launched"] for r in recs)
    assert doc["startup"]["resolution_ns"] == TICK_NS           # from /proc, in clock ticks
    assert printed_setups(done.stderr) == (sorted(own(r) for r in recs),
                                           sorted(round(r["setup_ns"] / 1e6, 1) for r in recs))
    assert printed_startup(done.stderr) == round(doc["startup"]["to_release_ns"] / 1e6)


def test_a_spawned_worker_imports_none_of_the_command_s_modules():
    """What a memory, STREAM, spinWait or -cyclic worker imports leaves out the command line,
    the report, the event loop and psutil: each worker's start pays for numpy and its test."""
    kinds = "workers.entry, workers.memory, workers.stream_kernels, workers.spin, workers.cyclic"
    done = subprocess.run([sys.executable, "-c", f"import sys, {kinds}; print(*sys.modules)"],
                          capture_output=True, text=True, env=ENV, check=True)
    loaded = set(done.stdout.split())
    unwanted = {"click", "psutil", "asyncio", "uvloop", "aiofiles", "torque_async.cli",
                "torque_async.report", "torque_async.export", "torque_async.orchestrator",
                "torque_async.cmdline", "importlib.metadata"}
    assert "numpy" in loaded and not unwanted & loaded, unwanted & loaded


AT_LAUNCH = """
import json, sys
from torque_async import launch, workstart
out, real, seen = sys.argv[1], workstart.context, []
def context(local):                    # called as each worker is launched
    if not seen:
        seen.append(sorted(sys.modules))
    return real(local)
workstart.context = context
sys.argv = ["torque-async", *sys.argv[2:]]
try:
    launch.main()
finally:
    with open(out, "w") as f:
        json.dump(seen[0] if seen else None, f)
"""


def test_a_memory_only_plan_launches_its_workers_before_the_event_loop_and_the_report_load(
        tmp_path, key):
    """The command launches a plan's forked workers before it imports what it needs only
    later: the event loop (asyncio, uvloop, aiofiles; imported while the workers set up), the
    report and the package versions of sysctl.current (after the run)."""
    out = tmp_path / "modules.json"
    plan = ["-smkey", key, "-nh", "-p", "2", "-n", "2", "-KB", "64", "-bcopy"]
    done = subprocess.run([sys.executable, "-c", AT_LAUNCH, str(out), *plan], capture_output=True,
                          text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and ", Bcopy," in done.stdout, done.stderr
    loaded = set(json.loads(out.read_text()))
    later = {"asyncio", "uvloop", "aiofiles", "importlib.metadata", "torque_async.report",
             "torque_async.report_cluster", "torque_async.export", "torque_async.loop"}
    assert "torque_async.results" in loaded and not later & loaded, sorted(later & loaded)


COUNT_PARSES = """
import sys
from torque_async import cmdline, launch, workstart
real, parsed, start, started = cmdline.parse, [], workstart.start_server, []
def parse(argv, *rest, **named):
    parsed.append(list(argv))
    return real(argv, *rest, **named)
def start_server(plan):
    started.append(plan.groups[0].action)
    return start(plan)
cmdline.parse, workstart.start_server = parse, start_server
sys.argv = ["torque-async", *sys.argv[1:]]
try:
    launch.main()
finally:
    print("servers asked for:", started, file=sys.stderr)
    print("parsed:", parsed, file=sys.stderr)
"""


def parses(tmp_path, argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-c", COUNT_PARSES, *argv], capture_output=True,
                          text=True, env=ENV, cwd=tmp_path, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_the_command_line_is_parsed_once_and_a_bad_one_again_to_say_why(tmp_path, key):
    """launch's early look (to start the workers' server) hands its plan to the command; an
    option that asks (-quit, -help) starts no server."""
    code, out, err = parses(tmp_path, ["-smkey", key, "-nh", "-n", "2", "-KB", "4", "-bzero"])
    assert code == 0 and ", Bzero," in out, err
    assert err.splitlines()[-2].startswith("servers asked for: ['bzero'")   # early, then the run
    assert err.splitlines()[-1] == f"parsed: [['-smkey', '{key}', '-nh', '-n', '2', '-KB', '4', " \
                                   "'-bzero']]"
    code, out, err = parses(tmp_path, ["run", "-quit", "-load"])
    assert code == 0 and "group 0: -load" in out
    assert err.splitlines()[-2:] == ["servers asked for: []", "parsed: [['-quit', '-load']]"]
    code, out, err = parses(tmp_path, ["-n", "x", "-load"])
    assert code == 2 and "'x' is not an integer" in err
    assert err.splitlines()[-1] == "parsed: [['-n', 'x', '-load'], ['-n', 'x', '-load']]"
