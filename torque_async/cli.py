"""The torque-async command. click handles only subcommands and --long options; everything
else is torque's own order-dependent grammar, forwarded untouched to the scanner. export, plot
and compare are imported where used, and the report's modules once the run is over: a run's
workers start without waiting for them."""
from __future__ import annotations

import contextlib
import io
import math
import os
import shlex
import shutil
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from . import __version__, cmdline, helptext, orchestrator, outputs, runs, startup, sysinfo
from .outputs import OutputLost, lost, put, say
from . import cluster, validate, workstart
from .errors import UsageError
from .options import OPTIONS
from .results import (SEGMENT_PREFIX, SHM_DIR, NotASegment, SegmentInUse, free_segment,
                      segment_name)

MISSED_EXIT = 3                    # -failLate: a stream missed its rate, nothing else failed
NO_THREAD = "can't start new thread"   # threading's RuntimeError: pthread_create failed


class DefaultRun(click.Group):
    """`torque-async ARGS` means `torque-async run ARGS`; --help adds torque's options."""

    def parse_args(self, ctx, args):
        completing = ctx.resilient_parsing and not args     # complete the subcommands too
        if not completing and (not args or (args[0] not in self.commands
                                            and not args[0].startswith("--"))
                               or args[0] == "--help" and any(a[:1] == "-" for a in args[1:])):
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def main(self, *args, **kwargs):
        """click's usage errors as one line (exit 2), not its usage block."""
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            where = f"{e.ctx.info_name}: " if e.ctx and e.ctx.parent else ""
            refuse(f"{where}{e.format_message()} (--help for help)")
        except click.ClickException as e:
            fail(e.format_message(), e.exit_code)
        except click.Abort:
            fail("aborted", 1)
        except OutputLost as e:
            fail(str(e), 1)
        except OSError as e:           # click's own output (--help, --version) on a full disk
            fail(str(lost(sys.stdout, e)), 1)
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx, formatter):
        super().format_help(ctx, formatter)
        formatter.write("\n" + "\n".join(helptext.help_lines("all")) + "\n")

    def shell_complete(self, ctx, incomplete):
        return super().shell_complete(ctx, incomplete) + complete_options(incomplete)


class TorqueGrammar(click.Command):
    """`run`: torque's tokens, forwarded untouched; completes the option table's names."""

    def shell_complete(self, ctx, incomplete):
        return complete_options(incomplete)


def complete_options(incomplete: str) -> list[CompletionItem]:
    """The option table's names (global, local, action) that start with `incomplete`."""
    if incomplete and not incomplete.startswith("-"):
        return []
    return [CompletionItem(f"-{name}", help=opt.help) for name, opt in OPTIONS.items()
            if f"-{name}".startswith(incomplete)]


@click.group(cls=DefaultRun)
@click.version_option(__version__, "--version", prog_name="torque-async")
def main() -> None:
    """A system exerciser: starts bandwidth-hungry tests together and reports what each
    achieved while all of them ran. Without a command, the arguments are torque's options
    (listed below; also `torque-async -help`)."""


@main.command(cls=TorqueGrammar, context_settings=dict(
    ignore_unknown_options=True, allow_extra_args=True, help_option_names=[]))
@click.argument("tokens", nargs=-1, type=click.UNPROCESSED,
                shell_complete=lambda ctx, param, incomplete: complete_options(incomplete))
def run(tokens: tuple[str, ...]) -> None:
    """Run tests (the default command), in torque's grammar: -p 2 -n 8 -MB 4 -load"""
    if "--help" in tokens:                  # click's convention, besides torque's -help
        say(helptext.asked_about(list(tokens)) or helptext.help_lines("all"))
        sys.exit(0)
    parsed = click.get_current_context().obj        # launch.early's: (tokens, plan) or None
    plan = parsed[1] if parsed and parsed[0] == list(tokens) else None
    sys.exit(cluster.finish(execute(list(tokens), startup.process_start(), exiting=True,
                                    plan=plan)))


@main.command("plot")
@click.argument("results")
@click.option("-o", "--output", metavar="FILE.png",
              help="where the picture goes (default: RESULTS with .png)")
@click.option("--replace", is_flag=True,
              help="replace FILE.png even if plot did not make it")
def plot_command(results: str, output: str | None, replace: bool) -> None:
    """Draw a -json results file: bandwidth over time, latency and lateness percentiles."""
    from . import capacity, export, plot as plotting
    if output == "":
        fail("plot: -o '' names no file: give -o FILE.png, or leave -o out", 2)
    path = output or str(Path(results).with_suffix(".png"))
    try:
        doc = capacity.load(results) or export.load(results)
    except export.ResultsFileError as e:
        fail(str(e), 2)
    if why := outputs.refusal("plot:", path, " (-o FILE.png)"):
        fail(why, 2)
    if outputs.same(path, results):
        fail(f"plot: {path} is the results file itself: name another (-o FILE.png)", 2)
    if Path(path).suffix.lower() != ".png":
        fail(f"plot: {path}: the picture is a PNG; name it FILE.png", 2)
    if not replace and not outputs.made_here(path, plotting.MARK):
        fail(f"plot: {path} exists and plot did not make it: name another (-o FILE.png), or "
             f"add --replace", 2)
    try:
        drawn = plotting.render(doc, path, replace)
    except plotting.PlotError as e:
        fail(str(e), 2 if isinstance(e, plotting.NothingToPlot) else 1)
    except DAMAGED as e:
        fail(f"plot: {results}: {damaged(e)}", 2)
    say([f"{path}: {'; '.join(title for title, _ in drawn)}"])


@main.command("compare")
@click.argument("base")
@click.argument("runs", nargs=-1, required=True)
@click.option("--threshold", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="changes smaller than this many percent count as no change")
@click.option("--fail-on-regression", is_flag=True,
              help="exit with 1 when a run is significantly worse than BASE beyond the threshold, "
                   "or BASE or a run did not finish (interrupted, a test failed or was cut "
                   "short)")
@click.option("--match", type=click.Choice(["identity", "position"]), default="identity",
              show_default=True,
              help="match tests by what they are (action, arguments, the options that change "
                   "the work) or by position (group and process index: a sweep of -KB, -MB or "
                   "of a plan's shape)")
@click.option("--interleave", type=click.IntRange(min=2), metavar="N",
              help="BASE and RUN are two plans, each one quoted command line after --: run "
                   "them alternately, A B A B ..., N times each, and compare them")
def compare_command(base: str, runs: tuple[str, ...], threshold: float,
                    fail_on_regression: bool, match: str, interleave: int | None) -> None:
    """What changed from run BASE to each RUN (-json files; -repeat on both sides tells a
    change from noise), test by test and in total; with --interleave, BASE and RUN are plans
    run alternately."""
    from . import compare as comparing, export
    if not math.isfinite(threshold):
        fail(f"--threshold: {threshold} is not a number of percent", 2)
    if interleave:
        from . import interleave as alternate
        if len(runs) != 1:
            fail("compare --interleave: give two plans, A and B (each one quoted argument)", 2)
        try:
            docs = list(alternate.run(base, runs[0], interleave,
                                      lambda line: say([line], err=True)))
        except alternate.InterleaveError as e:
            fail(str(e), e.code)
        except export.ResultsFileError as e:
            fail(f"compare --interleave: {e}", 1)
        base, runs = "plan A", ("plan B",)
    else:
        try:
            docs = [export.load(path) for path in (base, *runs)]
        except export.ResultsFileError as e:
            fail(str(e), 2)
    why = [f"{base} (BASE) did not finish"] if comparing.incomplete(docs[0], base) else []
    unmatched = False
    for i, (path, doc) in enumerate(zip(runs, docs[1:])):
        try:
            found = comparing.compare(docs[0], doc, match)
            report = comparing.lines(found, (docs[0], doc), (base, path), threshold)
        except DAMAGED as e:
            fail(f"compare: {base} and {path}: {damaged(e)}", 2)
        say(([""] if i else []) + report)
        regressed = sum(c.regression(threshold) for c in found.changes)
        why += [f"{path}: {regressed} significant regression{'s' * (regressed > 1)}"] * \
            bool(regressed) + [f"{path} did not finish"] * bool(comparing.incomplete(doc, path))
        unmatched |= not found.changes
    if fail_on_regression and why and not unmatched:
        say([f"torque-async: --fail-on-regression: exit 1: {'; '.join(why)}"], err=True)
    sys.exit(2 if unmatched else 1 if fail_on_regression and why else 0)


@main.command("capacity", context_settings=dict(ignore_unknown_options=True))
@click.option("--group", type=click.IntRange(min=0), default=0, show_default=True,
              help="the group varied (its index in the plan)")
@click.option("--vary", type=click.Choice(["procs", "qd", "rate"]), default="procs",
              show_default=True, help="its processes (streams, clients, lanes), its -aio queue "
              "depth, or its rate (a stream's -fps or MiB/s, 1e6/-T)")
@click.option("--until", multiple=True, metavar="CRIT",
              help="held (default with streams), p99<10ms, p999<500us, late<0.01 (repeatable)")
@click.option("--keep", multiple=True, metavar="'NAME bw>F'",
              help="group NAME (action or index) keeps more than F of its bandwidth alone")
@click.option("--max", "ceiling", type=click.IntRange(min=1), help="the largest value tried")
@click.option("--min", "floor", type=click.IntRange(min=1),
              help="the value the search starts at and never goes below (default: it starts "
                   "at the plan's value and may go down to 1)")
@click.option("--rounds", type=click.IntRange(1, 100), default=3, show_default=True,
              help="runs that decide a point")
@click.option("--pass", "passing", metavar="k/R", help="a point passes in k of its R rounds "
              "(default: in every round)")
@click.option("--json", "json_path", metavar="FILE", help="every point and every run's results")
@click.argument("plan", nargs=-1, type=click.UNPROCESSED)
def capacity_command(plan: tuple[str, ...], **given) -> None:
    """The largest value of one group (-p, -aio depth, rate) at which the whole plan still
    meets the criteria: torque-async capacity --max 16 -- PLAN"""
    from . import capacity
    try:
        code = capacity.main(list(plan), command=" ".join(map(shlex.quote, sys.argv[1:])),
                             execute=execute, **given)
    except UsageError as e:
        refuse(str(e))
    sys.exit(cluster.finish(code))             # (under mpiexec: every rank ends together)


# What a results file that passed export.load's checks can still raise in compare or plot: it
# was changed by hand (its figures disagree with each other, a plan's arguments that no run
# has): said in one line, not a traceback
DAMAGED = (KeyError, IndexError, ValueError, TypeError, ZeroDivisionError, OverflowError)


def damaged(e: Exception) -> str:
    return (f"its contents do not fit together ({type(e).__name__}: {e}): a results file "
            f"changed by hand?")


ERROR_WIDTH = 400                  # characters of an error line shown at most


def error(message: str) -> None:
    """One line on stderr: control characters in the offending token are shown escaped."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(shown) > ERROR_WIDTH:              # a megabyte of NULs: its start and its end
        cut = len(shown) - ERROR_WIDTH
        shown = f"{shown[:ERROR_WIDTH - 100]}... ({cut} characters left out) ...{shown[-100:]}"
    with contextlib.suppress(OutputLost):           # (stderr closed: nowhere to say it)
        say([f"torque-async: error: {shown}"], err=True)


def fail(message: str, code: int) -> None:
    error(message)
    sys.exit(code)


def refuse(message: str) -> None:
    """Bad input, said in one line; exit 2 (under mpiexec every rank told, cluster.refused_alone,
    and ended together)."""
    error(message)
    cluster.refused_alone(message)
    sys.exit(cluster.finish(2))


def execute(argv: list[str], began: startup.Began | None = None, exiting: bool = False,
            plan=None) -> int:
    """Parse (unless `plan` is argv's, parsed already), run and report; returns the exit
    status (0 ok, 1 a test failed, 2 bad input, 3 a stream missed its rate under -failLate,
    128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it). `began`: when the command
    started (default: now). `exiting`: the command ends after it, the stop signals left held
    (a default handler between here and the exit's ignoring them would die of the signal, or
    of a KeyboardInterrupt as 'aborted')."""
    began = began or startup.now()
    for sig in orchestrator.STOP_SIGNALS:
        signal.signal(sig, orchestrator.raise_interrupted)
    code, late = 1, []
    try:
        code = run_plan(argv, began, late, plan)
    except orchestrator.Interrupted as e:
        print(f"torque-async: interrupted by {e}", file=sys.stderr)
        code = 128 + e.signum
    except OSError as e:     # the run's own machinery (shared memory, processes): one line
        error(f"running the plan: {e.filename}: {e.strerror}" if e.filename is not None
              else f"running the plan: {e.strerror or e}")
    except RuntimeError as e:    # threading's when pthread_create fails (under mpiexec, MPI's
        if str(e) != NO_THREAD:  # own threads may take the room ulimit -v leaves)
            raise
        error("running the plan: a thread could not start (no room for its stack: ulimit -v?)")
    finally:
        hold(late, again_ends=False)       # an unlink cannot be cut short
        scratch = sys.modules.get("torque_async.io.scratch")
        if scratch is not None:            # (threads of io/scratch.release, behind the report)
            scratch.remove()
        for sig in () if exiting else orchestrator.STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    if late and code < 128:
        print(f"torque-async: interrupted by {signal.Signals(late[0]).name} after the tests "
              f"ended: it stopped none of them, and the report and its files are whole",
              file=sys.stderr)
        code = 128 + late[0]
    return code


def hold(late: list[int], again_ends: bool = True) -> None:
    """From the tests' end: a stop signal is noted in `late`, not raised. What is left (the
    report, its files, the scratch files' removal) is quick, and a signal in its middle would
    lose the report of a run that was over, or leave scratch files; the exit status says it.
    A second one ends the report at once (stuck on a full pipe), never the removal."""
    def held(signum: int, _frame) -> None:
        if late and again_ends:
            raise orchestrator.Interrupted(signum)
        late.append(signum)
    for sig in orchestrator.STOP_SIGNALS:
        signal.signal(sig, held)


def ends_at_once() -> None:
    """From the results files' writing on, what is left is output, which a full pipe may hold
    for ever: a stop signal ends it at once (the files are already whole)."""
    for sig in orchestrator.STOP_SIGNALS:
        signal.signal(sig, orchestrator.raise_interrupted)


def run_plan(argv: list[str], began: startup.Began, late: list[int], parsed=None) -> int:
    """The run's steps: parse; answer a question (help, -quit) or free leftovers; check;
    run; report and export (a stop signal from the runs' end is held in `late`)."""
    if about := helptext.asked_about(argv):
        say(about)
        return 0
    job, alone = None, False
    try:
        plan = parsed if parsed is not None else cmdline.parse(argv)
        answer = answers(plan)
        if answer is not None:
            say(answer)
            return 0
        s = plan.settings
        rank = cluster.launcher_rank()            # under mpiexec: this rank's key and scratch
        key, tag = cluster.own(s.smkey, rank)
        if s.freeSharedMemory:
            alone = not plan.groups or plan.from_config     # (no rank starts MPI then)
            free_leftovers(None if s.smkey is None else key, tag,
                           f"rank {rank} on {socket.gethostname()}: " if tag else "")
            if alone:
                return 0
        note_leftovers(tag, cluster.first_on_host())
        if rank is not None:                     # each rank's own plan, checked as it runs,
            cluster.refuse(plan)                 # every rank told of any rank's refusal
            agreed = cluster.plan_digest_lines(helptext.plan_lines(plan))
            plan = cluster.ranked(plan, tag)
            job = cluster.start(rank, s.rankTimeout)
            job.together = False                 # (capacity: each run agrees anew)
            job.same_plan(agreed)
            plan = job.plan_for(plan)            # (its clean-up guard from here: a stop in
            job.agree(lambda: validate.check(plan))   # the checks leaves none of MPI's files)
        else:
            validate.check(plan)                 # -quit too: the same checks, then stop
        if s.quit:
            say(helptext.plan_lines(plan))
            return 0
        if job is None:
            plan = replace(plan, settings=replace(s, smkey=key))
        if s.vl >= 3:
            plan = trace_every_transfer(plan)
        done = runs.run(plan, sysinfo.cache_line(), job)
        hold(late)
        # a rank that will end every rank meets none at the survey (a collective): rank 0,
        # interrupted alone, would wait there for ranks that run on
        info = sysinfo.collect() if job and (done.failures or done.interrupted) else \
            survey(plan, job)
    except UsageError as e:
        error(str(e))
        if job is None:
            if not alone:                # before MPI's start: the others wait there
                cluster.refused_alone(str(e))
        elif not job.together:           # this rank's alone (its -smkey in use):
            job.abort(2)                 # the others wait in the run's barrier, so end the job
        return 2
    return finish(plan, done, info, job, began)


def survey(plan, job) -> sysinfo.SysInfo:
    """This machine's description (sysctl.current written; under mpiexec every host's), read
    once the runs are over: neither the start nor a measurement waits for it."""
    info = sysinfo.collect()
    details = sysinfo.detail_lines(info, [os.getcwd(), *plan.settings.files])
    if job:                                  # rank 0: every host's; the others: none
        details = job.survey(info, details)
    if details:
        outputs.write_sysctl(details)
    return info


def answers(plan) -> list[str] | None:
    """-version, -help, -example, -printAlias: what they print (None: none was asked)."""
    s = plan.settings
    informative = [(s.version, lambda: [f"torque-async, version: {__version__}"]),
                   (s.help, lambda: helptext.help_lines(s.help or "all")),
                   (s.example, helptext.EXAMPLES.splitlines),
                   (s.printAlias, lambda: helptext.alias_lines(plan))]
    asked = [lines() for flag, lines in informative if flag]
    return [ln for lines in asked for ln in lines] if asked else None


def free_leftovers(smkey: int | None, tag: str, who: str) -> None:
    """-freeSharedMemory: remove the key's segment and semaphores (refused while its run is
    alive; without -smkey, those of every killed run of this user's) and the scratch
    directories of dead runs, saying what it removed; under mpiexec each rank frees its own
    (key + rank, its tag's directories), its lines (a refusal's too) led by `who`."""
    try:
        say([who + line for line in (free_shared_memory(smkey) if smkey is not None
                                     else free_killed_runs())])
    except UsageError as e:
        raise UsageError(who + str(e)) from None
    for what, left in leftovers(tag):
        shutil.rmtree(left, ignore_errors=True)
        say([f"{who}removed the {what} {left} of a run that is gone"])


def note_leftovers(tag: str, servers: bool = True) -> None:
    """Name what killed runs left here (the workers' servers' directories, which every rank of
    a host would find alike, only if `servers`)."""
    for what, left in leftovers(tag, servers):
        print(f"torque-async: note: a killed run left the {what} {left}: "
              f"-freeSharedMemory removes it", file=sys.stderr)


def leftovers(tag: str, servers: bool = True) -> list[tuple[str, str]]:
    """What killed runs left here: scratch directories, and their workers' servers' socket
    directories where this command's would be (named by pid alone: the temp dir is this
    host's)."""
    from .io import scratch
    return [*(("scratch directory", d) for d in scratch.leftovers(tag=tag)),
            *(("workers' server directory", d) for d in (scratch.leftovers(
                workstart.base(os.getpid()), prefix=workstart.PREFIX) if servers else ()))]


def finish(plan, done: runs.Runs, info, job, began: startup.Began | None = None) -> int:
    """Render the report, write -json/-csv, name every failure; the exit status. Under mpiexec
    a rank whose run failed says so and ends every rank (cluster.finish); rank 0 reports every
    rank's run."""
    from . import report, report_cluster
    if job:
        code = job.ended(done.failures, done.interrupted)
        if code or job.rank:
            return code
    began = None if plan.settings.baseline else began   # (the first run together came after
    if done.first is None:                              # the others)
        done = done.stopped_alone()
        plan = done.plan
    s, outcome = plan.settings, done.first
    run = outcome.cluster                    # under mpiexec: every rank's (rank 0's outcome)
    procs = run.procs if run else plan.procs()
    alone, (found, ranks), blocks = repeated(plan, done, procs, run)
    records = runs.with_alone_rates(outcome.records, alone) if alone else outcome.records
    date = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    rendering = time.monotonic_ns()
    later = len(done.complete) if (done.interrupted or done.failures) and not \
        (outcome.interrupted or outcome.failures) else 0     # a later repetition was stopped
    lines = report.render(plan, records, procs, info, date, done.failures, done.interrupted,
                          run, blocks, done.unfinished, began, later, done.alone_stop,
                          tuple(o.records for o in done.complete))
    if any(g.local.checkpoint for g in plan.groups) and not s.bo:
        lines += ["", f"checkpoint report (ms): {(time.monotonic_ns() - rendering) / 1e6:.1f}"]
    machine = {}
    if s.json or s.csv:
        from . import export
        alone_info = [[r.info for r in recs] for _, recs in done.alone_records()] \
            if alone else None
        doc = export.document(plan, records, procs, info, date, done.failures,
                              [runs.with_alone_rates(o.records, alone) if alone else o.records
                               for o in done.whole], alone, found, began,
                              alone_info, done.interrupted, done.unfinished, done.alone_group,
                              ranks)
        doc = report_cluster.document([o.cluster for o in done.complete], doc) if run else doc
        machine = {path: make(doc) for path, make in (
            (s.json, export.json_text),
            (s.csv, lambda doc: export.csv_text(doc, everything=s.csvAll))) if path}
    files = [path for path in machine if path != "-"]      # first: a broken stdout loses none
    unwritten = [outputs.write_result(path, machine[path]) for path in files]
    ends_at_once()
    try:
        say(lines, err="-" in machine)
        if "-" in machine:
            put(machine["-"])
    except OutputLost as e:
        written = [p for p, why in zip(files, unwritten) if not why]
        what = "the report" if "-" not in machine else \
            f"the {'-json' if s.json == '-' else '-csv'} output"
        unwritten.append(f"{e}; {what} is lost" +
                         (f" ({', '.join(written)} written whole)" if written else ""))
    shown = "-" in machine or same_file(sys.stdout, sys.stderr)
    with contextlib.suppress(OutputLost):
        say([f"torque-async: {line}" for line in (*(() if shown else done.failures),
                                                  *filter(None, unwritten))], err=True)
    if done.interrupted:
        return 128 + done.interrupted
    if done.failures or any(unwritten):
        return 1
    missed = [k for k, o in enumerate(done.complete, 1)
              if report.MISSED in report.stream_verdicts(o.records)]
    if s.failLate and missed:           # in any repetition, not only the table's first
        verdicts = report.stream_verdicts(outcome.records)
        what = f"a stream missed its rate in repetition{'s' * (len(missed) > 1)} " \
            f"{', '.join(map(str, missed))} of {len(done.complete)}" if len(done.complete) > 1 \
            else f"{verdicts.count(report.MISSED)} of {len(verdicts)} streams missed their rate"
        say([f"torque-async: -failLate: {what} (exit {MISSED_EXIT})"], err=True)
        return MISSED_EXIT
    return 0


def free_shared_memory(smkey: int) -> list[str]:
    """-freeSharedMemory: what it removed of a killed run (its segment and semaphores)."""
    name = segment_name(smkey)
    try:
        freed = free_segment(name)
    except (NotASegment, OSError) as e:
        raise UsageError(str(e) if isinstance(e, NotASegment) else
                                 f"/dev/shm/{name}: {e.strerror}: not removed") from None
    except SegmentInUse as e:
        raise UsageError(f"shared memory key {smkey:#x} is in use by pid {e.owner}, "
                                 f"still running: -freeSharedMemory removes only what a killed "
                                 f"run left") from None
    if freed is None:
        return [f"no shared memory /dev/shm/{name} to remove"]
    owner, sems = freed
    return [f"removed /dev/shm/{name} (created by pid {owner})"] + \
        [f"removed the semaphore /dev/shm/sem.{n.lstrip('/')} of that run" for n in sems]


def free_killed_runs() -> list[str]:
    """-freeSharedMemory without -smkey: the segments (and semaphores) of every killed run of
    this user's, the live runs' left alone."""
    from .io.scratch import owned
    found = sorted(n for n in os.listdir(SHM_DIR) if n.startswith(SEGMENT_PREFIX)
                   and owned(os.path.join(SHM_DIR, n)))
    out = []
    for name in found:
        try:
            out += free_shared_memory(int(name[len(SEGMENT_PREFIX):], 16))
        except (UsageError, ValueError):       # a live run's, or not a segment
            continue
    return [ln for ln in out if not ln.startswith("no shared memory")] or \
        ["no shared memory of a killed run to remove"]


def same_file(a, b) -> bool:
    """Whether two streams reach the same file or terminal: the failures the report lists are
    not repeated on stderr when the report is already there."""
    try:
        fa, fb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return (fa.st_dev, fa.st_ino, fa.st_rdev) == (fb.st_dev, fb.st_ino, fb.st_rdev)


def repeated(plan, done: runs.Runs, procs, run=None) \
        -> tuple[list | None, list | None, list[str]]:
    """-repeat and -baseline: each test's figures alone, their changes and ranking
    (figures.changes), and the report's blocks (none for a single plain run); `run`: under mpiexec, rank 0's gathered first run
    (the blocks get Host and Rank columns)."""
    from . import figures, report, report_cluster
    per_test = done.per_test(procs)
    alone_runs = done.alone_runs(procs) if plan.settings.baseline and done.alone else None
    alone = [figures.medians(runs) for runs in alone_runs] if alone_runs else None
    alone_records = [recs for _, recs in done.alone_records()] if alone else None
    found, ranks = figures.changes(alone, [figures.medians(t) for t in per_test], procs,
                                   alone_runs, per_test) if alone else (None, [])
    unresolved = report.unresolved_lines([o.records for o in done.complete])
    blocks = [*(report.repeat_lines([figures.spreads(t) for t in per_test], procs,
                                    len(done.complete), run, unresolved)
                if len(done.complete) > 1 else [report.ONE_RUN_LINE]),
              "", *(report_cluster.skew_lines([o.cluster for o in done.complete])
                if run and len(done.complete) > 1 else []),
              "", *(report.baseline_lines(found, run, {r.row for o in done.complete
                                                        for r in o.records if not r.whole},
                                          report.unresolved_sides(
                                              procs, alone_records,
                                              [o.records for o in done.complete]),
                                          ranks)
                    if found is not None else []),
              "", *report.choice_lines([o.records for o in done.complete], alone_records, procs)]
    return alone, (found, ranks), blocks


def trace_every_transfer(plan):
    """-vl 3: time-stamp every transfer (the first 1024 of each process, into the preallocated
    samples) where no -sample was given; the samples table then lists each transfer."""
    groups = tuple(g if g.local.sample is not None else replace(g, local=replace(g.local, sample=0))
                   for g in plan.groups)
    return replace(plan, groups=groups)
