"""torque-async capacity: the largest value of one group's knob (its processes, an -aio queue
depth, a stream's rate) at which the whole plan still meets the criteria.

Each point is a real run of the plan (cli.execute: the checks, safety and signals of
`torque-async run`) with the value written in (varied.py), its report silenced and its results
document read from a private -json file; criteria.py judges it, search.py picks the next point.
A -files or -web tree made by -cfiles at the first point that finished is reused: the later
points run without -cfiles. --keep's groups run alone once, first. A stop signal ends the
search; the points so far are reported.

Under mpiexec rank 0 searches (led) and every other rank runs what it sends (follow): each
run is a whole-job run of every rank (cluster.py), rank 0's results document holds every
rank's tests, and only rank 0 reports.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import __version__, cluster, cmdline, criteria, helptext, orchestrator, outputs, varied
from .criteria import Criterion
from .errors import UsageError
from .inputs import RESULTS_LIMIT, read_bounded
from .outputs import say
from .search import Point, Rule, Search

SCHEMA, SCHEMA_VERSION = "torque-async-capacity", 1
PASS = re.compile(r"([0-9]+)/([0-9]+)\Z")


@dataclass(frozen=True)
class Round:
    """One run of one point: its verdict, each criterion's figure, the load's bandwidth."""
    value: int
    passed: bool
    figures: tuple[float | None, ...]   # one per criterion, in its column's unit
    why: str                            # what failed first ('' when it passed)
    flags: tuple[str, ...]              # figures not resolved
    load: tuple[float, ...]             # the other groups' MB/s, in plan order
    seconds: float
    code: int                           # the run's exit status
    doc: dict[str, Any] | None          # its results document


@dataclass(frozen=True)
class Setup:
    """What the search asks: the knob, the criteria, the rule, and the plan's other groups."""
    knob: varied.Knob
    criteria: tuple[Criterion, ...]
    rule: Rule
    load: tuple[tuple[int, str], ...]   # (index, action) of the groups not varied
    alone: dict[int, float]             # --keep: each kept group's MB/s alone
    alone_runs: dict[int, dict[str, Any]]   # and the results document of its run alone


class BadRun(Exception):
    """A run before the search (the plan's check, --keep's run alone) refused the plan (exit
    2): its own line said why."""


def rule_of(rounds: int, passing: str | None) -> Rule:
    if passing is None:
        return Rule(rounds, rounds)
    m = PASS.match(passing.strip())
    if not m or int(m.group(2)) != rounds or not 1 <= int(m.group(1)) <= rounds:
        raise UsageError(f"capacity: --pass {passing}: give k/R with R the --rounds "
                                 f"({rounds}) and 1 <= k <= R, e.g. --pass {max(rounds - 1, 1)}"
                                 f"/{rounds}")
    return Rule(rounds, int(m.group(1)))


def refuse(plan) -> None:
    """Options of the plan that the search does itself, or that run no test."""
    s = plan.settings
    said = {"repeat": (s.repeat != 1, "--rounds repeats each point"),
            "baseline": (s.baseline, "--keep measures a group alone"),
            "json": (s.json, "capacity's --json names the file"),
            "csv": (s.csv, "capacity's --json names the file"),
            **{name: (getattr(s, name), "it runs no test") for name in
               ("quit", "freeSharedMemory", "help", "version", "example", "printAlias")},
            "child": (s.child is not None, "it runs one process of the plan"),
            "g": (s.g, "each point would wait for Enter, its prompt unseen (the run's report "
                       "is silenced)")}
    for name, (given, why) in said.items():
        if given:
            raise UsageError(f"capacity: -{name} in the plan: {why}")
    if cluster.launcher_rank() is not None:
        cluster.refuse(plan)            # what no run under mpiexec runs: before MPI starts
    if not plan.groups or plan.from_config:
        raise UsageError("capacity: no group to vary: give the plan's tests after -- "
                                 "(torque-async capacity -- -p 2 -MB 4 -w)")


def assess(setup: Setup, value: int, code: int, doc: dict[str, Any] | None,
           seconds: float, said: str = "") -> Round:
    """A point's round from its run's exit status, results document and stderr (a run that
    refused the plan at this value, exit 2, fails with its last line)."""
    if doc is None:
        last = (said.strip().splitlines() or [""])[-1].removeprefix("torque-async: error: ")
        return Round(value, False, (None,) * len(setup.criteria),
                     f"the run refused the plan at this value: {last}" if code == 2 else
                     f"the run ended with exit {code} and wrote no results", (), (), seconds,
                     code, None)
    judged = [criteria.judge(c, doc, setup.knob.group, setup.alone) for c in setup.criteria]
    load = tuple(criteria.bandwidth(doc, g) for g, _ in setup.load)
    return Round(value, all(j.passed for j in judged), tuple(j.value for j in judged),
                 next((j.why for j in judged if not j.passed), ""),
                 tuple(j.flag for j in judged if j.flag), load, seconds, code, doc)


Quiet = Callable[[list[str], str], tuple[int, "dict | None", float, str]]   # quiet_run's own


def quiet_run(execute: Callable[[list[str]], int], folder: str, tokens: list[str], name: str,
              results: str | None = None) -> tuple[int, dict | None, float, str]:
    """One run of the plan as `torque-async run` makes it (`execute`: cli's), its report sent to
    /dev/null, its results read from its -json file, what it said on stderr kept and passed
    on; (exit status, document, seconds, stderr). A stop signal noted before it raises
    orchestrator.Interrupted; one from the last look on ends the run at once (a noted one
    would have waited for the whole run); after it, signals are noted again. `results`: the
    -json path of another rank's run (under mpiexec; only rank 0 writes it, and this rank
    neither reads nor removes it: on rank 0's host it may be rank 0's own): no document."""
    path = results or os.path.join(folder, name)
    said_path = os.path.join(folder, name + ".err")
    stopped_by(0)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    said = os.open(said_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    began = time.monotonic()

    def tell() -> None:             # (MPI_Abort ends this rank in the run: what it said, said)
        sys.stderr.flush()
        os.dup2(saved[1], 2)
        outputs.emit(sys.stderr, os.pread(said, RESULTS_LIMIT, 0).decode("utf-8", "replace"))
    cluster.ABORTING.append(tell)
    try:
        os.dup2(null, 1)
        os.dup2(said, 2)
        for sig in orchestrator.STOP_SIGNALS:       # the run's own, from before it starts
            signal.signal(sig, orchestrator.raise_interrupted)
        stopped_by(0)                               # (one noted since the look above)
        code = execute([*tokens, "-json", path, "-noProgress"])
    except KeyboardInterrupt:            # SIGINT as the run restored the default handlers
        code = 128 + signal.SIGINT
    except orchestrator.Interrupted as e:           # before the run's own handling began
        code = 128 + e.signum
    finally:
        cluster.ABORTING.remove(tell)
        sys.stderr.flush()
        for fd, kept in zip((1, 2), saved):
            os.dup2(kept, fd)
            os.close(kept)
        os.close(null)
        catch_stops()
    seconds = time.monotonic() - began
    with os.fdopen(said, "rb") as f:
        f.seek(0)
        text = f.read().decode("utf-8", "replace")
    os.unlink(said_path)
    if text:
        outputs.emit(sys.stderr, text)
    if results is not None:
        return code, None, seconds, text
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        os.unlink(path)
    except (OSError, ValueError):
        doc = None
    return code, doc, seconds, text


STOPS: list[int] = []               # stop signals received outside a run, in order


def catch_stops() -> None:
    """Outside a run a stop signal is noted in STOPS; the search ends before the next run (a
    run installs its own handlers: it ends at once)."""
    for sig in orchestrator.STOP_SIGNALS:
        signal.signal(sig, lambda signum, _frame: STOPS.append(signum))


def stopped_by(code: int) -> None:
    """Raise orchestrator.Interrupted when a signal stopped the run (exit 128 + it) or came
    before or after it."""
    if code > 128 or STOPS:
        raise orchestrator.Interrupted(code - 128 if code > 128 else STOPS[0])


def runner(setup: Setup, lay: varied.Layout, quiet: Quiet) -> Callable[[int], Round]:
    """A point's round: the plan at `value`, run and judged; -cfiles left out once a run
    finished (its trees are made)."""
    made, count = [False], [0]

    def attempt(value: int) -> Round:
        count[0] += 1
        code, doc, seconds, said = quiet(varied.tokens_at(lay, setup.knob, value, made[0]),
                                         f"run{count[0]}.json")
        if code > 128:                   # (a stop after it: noted, the next run is not made)
            raise orchestrator.Interrupted(code - 128)
        made[0] |= bool(doc) and not doc.get("failures")
        return assess(setup, value, code, doc if code != 2 else None, seconds, said)
    return attempt


def explore(search: Search, attempt: Callable[[int], Round], knob_name: str,
            progress: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> int:
    """Run rounds until the search is over; 0, or the stop signal that ended it (the round it
    cut short is not counted)."""
    began, runs = clock(), 0
    while (value := search.next()) is not None:
        point = search.points.get(value)
        k = len(point.rounds) + 1 if point else 1
        spent = clock() - began
        more = search.left()
        left = f"; about {spent / runs * more:.0f} s left (at most {more} more " \
               f"run{'s' * (more != 1)}, estimated from the {runs} so far)" if runs else ""
        ordinal = list(search.points).index(value) + 1 if point else len(search.points) + 1
        progress(f"capacity: {knob_name} {value} (point {ordinal}"
                 f"), round {k} of {search.rule.rounds}; run {runs + 1}, {spent:.0f} s so far"
                 f"{left}")
        try:
            result = attempt(value)
        except orchestrator.Interrupted as e:
            return e.signum
        search.add(value, result)
        runs += 1
    return 0


def spread(values: list[float | None], fmt: str) -> str:
    """median [min-max] of the values measured ('-' when none was)."""
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    med = statistics.median(got)
    return fmt.format(med) if len(got) == 1 else \
        f"{fmt.format(med)} [{fmt.format(min(got))}-{fmt.format(max(got))}]"


FORMATS = {"held": "{:.0f}", "late": "{:.4f}", "keep": "{:.3f}", "p99": "{:.1f}",
           "p999": "{:.1f}"}


def verdict_text(rule: Rule, point: Point) -> str:
    decided = rule.verdict(point.passes)
    if decided is not None:
        return "pass" if decided else "fail"
    return f"leans {'pass' if rule.leaning(point.passes) else 'fail'} (not revisited)"


def passed_text(point: Point) -> str:
    return f"{sum(point.passes)}/{len(point.rounds)}"


def table(setup: Setup, search: Search) -> list[str]:
    """A row per point tried: value, rounds passed, each criterion's figure and the load's
    bandwidth (median [min-max] over its rounds), verdict."""
    header = [setup.knob.name, "passed", *(f"{c.text}: {c.figure}" for c in setup.criteria),
              *(f"{action} BW(MB/s)" for _, action in setup.load), "verdict"]
    rows = []
    for value in sorted(search.points):
        p = search.points[value]
        rows.append(", ".join([str(value), passed_text(p),
                               *(spread([r.figures[i] for r in p.rounds], FORMATS[c.kind])
                                 for i, c in enumerate(setup.criteria)),
                               *(spread([r.load[i] for r in p.rounds if r.load], "{:.1f}")
                                 for i in range(len(setup.load))),
                               verdict_text(setup.rule, p)]))
    return [",".join(header), *rows]


def summary(setup: Setup, search: Search, stopped: int) -> list[str]:
    """The answer in one line, then why the smallest failing point failed, and the figures
    the machine did not resolve."""
    lo, hi = search.answer()
    rule, name = setup.rule, setup.knob.name
    runs = sum(len(p.rounds) for p in search.points.values())
    if stopped:
        line = (f"capacity: interrupted by {signal.Signals(stopped).name} after "
                f"{runs} run{'s' * (runs != 1)}: "
                f"so far {lo.value if lo else 'no value'} passed"
                + (f", {hi.value} failed" if hi else ""))
    elif lo and hi:
        line = f"capacity: {lo.value} (passed {passed_text(lo)}); {hi.value} failed " \
               f"(passed {passed_text(hi)})"
    elif lo:
        line = f"capacity: at least {lo.value} (passed {passed_text(lo)}): the --max reached"
    else:
        line = f"capacity: none: {hi.value}, the smallest value (--min, else 1), failed " \
               f"(passed {passed_text(hi)})" if hi else "capacity: no point ran"
    out = [line + f"; {name} of {setup.knob.where}, a point passes {rule.need} of "
                  f"{rule.rounds} round{'s' * (rule.rounds != 1)}; {runs} run{'s' * (runs != 1)}"]
    if hi:
        k, first = next((k, r) for k, r in enumerate(hi.rounds, 1) if not r.passed)
        out.append(f"{hi.value} failed: round {k}: {first.why}")
    flags = sorted({(r.value, f) for p in search.points.values() for r in p.rounds
                    for f in r.flags})
    out += [f"not resolved: {name} {value}: {f}" for value, f in flags]
    return out


def document(setup: Setup, search: Search, stopped: int, argv: list[str],
             command: str, seconds: float, ranks: int = 1) -> dict[str, Any]:
    """--json: the search, every point and every run's results document (under mpiexec the
    job's: every rank's tests, each with its rank and host)."""
    lo, hi = search.answer()
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "version": __version__,
        "command": command, "plan": argv, "group": setup.knob.group, "vary": setup.knob.vary,
        "varied": setup.knob.name, "rounds": setup.rule.rounds, "pass": setup.rule.need,
        "criteria": [{"text": c.text, "kind": c.kind, "figure": c.figure, "limit": c.limit,
                      "group": c.other} for c in setup.criteria],
        "load": [{"group": g, "action": a} for g, a in setup.load],
        "alone": {str(g): {"bw": bw, "run": setup.alone_runs[g]}
                  for g, bw in setup.alone.items()},
        "points": [{"value": v, "verdict": setup.rule.verdict(p.passes),
                    "rounds": [{"passed": r.passed, "figures": list(r.figures), "why": r.why,
                                "flags": list(r.flags), "load": list(r.load),
                                "seconds": r.seconds, "exit": r.code, "run": r.doc}
                               for r in p.rounds]}
                   for v, p in sorted(search.points.items())],
        "capacity": lo.value if lo else None, "failed": hi.value if hi else None,
        "interrupted": signal.Signals(stopped).name if stopped else None,
        "seconds": seconds, "ranks": ranks,
    }


def load(path: str) -> dict[str, Any] | None:
    """A capacity --json file (None: the file is something else, such as a run's -json)."""
    try:
        doc = json.loads(read_bounded(path, RESULTS_LIMIT))
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def status(code: int) -> int:
    """What a rank tells rank 0 after a run: the stop signal that ended it or came since, else
    0."""
    return code - 128 if code > 128 else STOPS[0] if STOPS else 0


def led(talk: cluster.Cluster, quiet: Quiet, folder: str) -> Quiet:
    """Rank 0's runs under mpiexec (`talk`: the job on a communicator of capacity's own, beside
    the runs'; `folder`: where quiet's -json files are): rank 0 sends each run's tokens to
    every rank (follow), every rank runs them (a whole-job run: the MPI barrier, rank 0's
    results document holds every rank's tests), then tells rank 0 whether a stop signal came;
    one that came to any rank is the run's exit status on rank 0 (the search ends there)."""
    def run(tokens: list[str], name: str) -> tuple[int, dict | None, float, str]:
        stopped_by(0)                        # one noted since the last run: no rank starts one
        talk.share(("run", tokens, name, folder))
        try:
            code, doc, seconds, said = quiet(tokens, name)
        except orchestrator.Interrupted as e:          # (came as the run began)
            code, doc, seconds, said = 128 + e.signum, None, 0.0, ""
        mine = status(code)
        stop = next((sig for sig in talk.collect(mine, stopped=mine) if sig), 0)
        return (128 + stop if stop else code), doc, seconds, said
    return run


def follow(talk: cluster.Cluster, execute: Callable[[list[str]], int]) -> int:
    """Every rank but 0 under mpiexec: run each plan rank 0 sends (led) until it sends the end,
    then its exit status; what the run says on stderr is said, its report is not. The plan
    names rank 0's -json path (every rank's plan is the same: the run checks it; only rank 0
    writes it): where its folder is not on this host, this rank makes it (and removes it)."""
    folder, made = tempfile.mkdtemp(prefix="torque-async-capacity."), None
    cluster.FOLDERS.append(folder)
    try:
        while (step := talk.share())[0] == "run":
            _, tokens, name, theirs = step
            if made is None and not os.path.isdir(theirs):
                with contextlib.suppress(FileExistsError):   # (another rank of this host's)
                    os.mkdir(theirs, 0o700)
                    made = theirs
                    cluster.FOLDERS.append(made)
            try:
                code = quiet_run(execute, folder, tokens, name, os.path.join(theirs, name))[0]
            except orchestrator.Interrupted as e:
                code = 128 + e.signum
            mine = status(code)
            talk.collect(mine, stopped=mine)
        return step[1]
    finally:
        clear(folder)
        if made:
            clear(made)


def clear(folder: str) -> None:
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


def measured_alone(kept: list[Criterion], lay: varied.Layout, quiet: Quiet) \
        -> tuple[dict[int, float], dict[int, dict[str, Any]]]:
    """--keep: each kept group's bandwidth in a run of it alone (the plan's globals), and that
    run's results document."""
    out, runs = {}, {}
    for c in kept:
        if c.kind != "keep" or c.other in out:
            continue
        say([f"capacity: group {c.other} alone, for --keep {c.text}"], err=True)
        code, doc, _, _ = quiet(varied.alone(lay, c.other), f"alone{c.other}.json")
        stopped_by(code)
        if code == 2:
            raise BadRun()
        bw = criteria.bandwidth(doc, 0) if doc and not doc.get("failures") else 0.0
        if not bw:
            raise UsageError(f"capacity: --keep {c.text}: group {c.other} alone "
                                     f"measured no bandwidth (exit {code})")
        out[c.other], runs[c.other] = bw, doc
    return out, runs


def main(argv: list[str], group: int, vary: str, until: tuple[str, ...],
         keep: tuple[str, ...], ceiling: int | None, floor: int | None, rounds: int,
         passing: str | None, json_path: str | None, command: str,
         execute: Callable[[list[str]], int]) -> int:
    """The capacity command; its exit status (0 a search that ended, 2 bad input, 128 + the
    signal that stopped it). UsageError: bad input, before any run."""
    plan = cmdline.parse(argv)
    refuse(plan)
    lay = varied.layout(argv)
    if len(lay.groups) != len(plan.groups):
        raise UsageError("capacity: the plan's groups must be on the command line")
    knob = varied.knob(plan, group, vary)
    chosen = tuple(criteria.parse(list(until), list(keep), plan, group))
    rule = rule_of(rounds, passing)
    for given, value in (("--min", floor), ("--max", ceiling)):
        if value is not None and value > knob.limit:
            raise UsageError(f"capacity: {given} {value}: {knob.name} takes at most "
                             f"{knob.limit}")
    start = floor or knob.start
    ceiling = ceiling or knob.limit
    if ceiling < start:
        raise UsageError(f"capacity: --max {ceiling} is below the start, "
                                 f"{knob.name} {start}" + ("" if floor else
                                                           " (the plan's; --min sets another)"))
    for value in sorted({start, ceiling, floor or 1}):
        try:
            cmdline.parse(varied.tokens_at(lay, knob, value, False))
        except UsageError as e:
            raise UsageError(f"capacity: at {knob.name} {value}: {e}") from None
    if json_path in ("", "-"):
        raise UsageError(f"capacity: --json {json_path or repr('')}: name a file (the table "
                         f"goes to standard output)")
    rank = cluster.launcher_rank()
    job = cluster.start(rank, plan.settings.rankTimeout) if rank is not None else None
    if job:                             # the whole command, as every rank was given it
        job.timeout = plan.settings.rankTimeout
        said = ["capacity --group", str(group), "--vary", vary, *(f"--until {u}" for u in until),
                *(f"--keep {k}" for k in keep), f"--max {ceiling}", f"--min {floor}" * bool(floor),
                f"--rounds {rounds}", f"--pass {passing}" * bool(passing),
                "--json" * (json_path is not None)]       # (as typed, for the refusal's line)
        job.same_plan([" ".join(filter(None, said)),
                       *cluster.plan_digest_lines(helptext.plan_lines(plan))])
    check = functools.partial(outputs.check, plan, (("capacity: --json", json_path),)
                              if json_path and not (job and job.rank) else ())
    (job.agree if job else lambda checks: checks())(check)    # (rank 0 writes the --json)
    talk = None
    if job:                             # rank 0's steps, beside the runs' own exchanges
        talk = cluster.Cluster(job.comm.Dup())
        talk.timeout = job.timeout
    STOPS.clear()
    catch_stops()
    if job and job.rank:
        return ended(job, follow(talk, execute))
    code = 2
    try:
        code = search(plan, argv, lay, knob, chosen, rule, start, floor, ceiling, json_path,
                      command, execute, talk)
    finally:
        if job:                         # every rank ends with rank 0's status (2: a refusal
            talk.share(("end", code))   # raised here, said by rank 0)
            job.together = True
    return ended(job, code) if job else code


def ended(job: cluster.Cluster, code: int) -> int:
    """Every rank ends with rank 0's status, knowing it; after a stop by MPI_Abort (once rank 0
    has reported): a stop reaches the ranks at different moments of a run, so their runs may
    have left the job's MPI exchanges unpaired, and MPI_Finalize could wait for them."""
    if code > 128:
        job.abort(code)
    job.together = True
    return code


def search(plan, argv: list[str], lay: varied.Layout, knob: varied.Knob,
           chosen: tuple[Criterion, ...], rule: Rule, start: int, floor: int | None,
           ceiling: int, json_path: str | None, command: str,
           execute: Callable[[list[str]], int], talk: cluster.Cluster | None) -> int:
    """main's search, once the command is checked (on rank 0 only under mpiexec: led)."""
    group = knob.group
    began = time.monotonic()
    found = Search(start, floor or 1, ceiling, rule)
    stopped, folder = 0, tempfile.mkdtemp(prefix="torque-async-capacity.")
    cluster.FOLDERS.append(folder)
    try:
        quiet = functools.partial(quiet_run, execute, folder)
        quiet = led(talk, quiet, folder) if talk else quiet
        checked = quiet([*varied.tokens_at(lay, knob, start, False), "-quit"], "checked.json")[0]
        stopped_by(checked)
        if checked == 2:
            raise BadRun()                   # the run's checks refused the plan: its one line
        setup = Setup(knob, chosen, rule, tuple((g.index, g.action) for g in plan.groups
                                                if g.index not in (group, *knob.stages)),
                      *measured_alone(list(chosen), lay, quiet))
        stopped = explore(found, runner(setup, lay, quiet), knob.name,
                          lambda line: say([line], err=True))
    except orchestrator.Interrupted as e:        # before the search: no point to report
        say([f"torque-async: capacity: interrupted by {signal.Signals(e.signum).name}"],
            err=True)
        return 128 + e.signum
    except BadRun:
        return 2
    finally:
        clear(folder)
    ranks = talk.size if talk else 1
    say([f"capacity of {knob.where} ({plan.groups[group].text}), {knob.name} varied; "
         f"criteria: {'; '.join(c.text for c in chosen)}" + (
             f"; under mpiexec: {ranks} rank{'s' * (ranks != 1)}" + (
                 f", each runs the value (the job {ranks} times it)" if ranks > 1 else "") +
             ", judged on the whole job's results" if talk else ""),
         *table(setup, found), "", *summary(setup, found, stopped)])
    if json_path is not None:
        text = json.dumps(document(setup, found, stopped, argv, command,
                                   time.monotonic() - began, ranks))
        try:
            outputs.write(json_path, text)
        except OSError as e:
            say([f"torque-async: capacity: --json {json_path}: {e.strerror}"], err=True)
            return 1
    if not stopped and STOPS:           # after the last run: the answer is whole, the exit says it
        say([f"torque-async: capacity: interrupted by {signal.Signals(STOPS[0]).name} after "
             f"the search ended: it stopped no run, and the table and --json are whole"], err=True)
        return 128 + STOPS[0]
    return 128 + stopped if stopped else 0
