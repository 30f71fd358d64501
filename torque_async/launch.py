"""The command's entry point: a stop signal (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) while the modules
still load, or outside a run (click's dispatch, compare, plot), ends it as a run's interrupt would
(one line, 128 + the signal, its exit hooks run: the workers' server's directory is removed),
not with a traceback from inside an import, click's 'aborted' or no word at all. A signal
ignored at the start (nohup) stays ignored; one during the exit is ignored."""
from __future__ import annotations

import os
import resource
import signal
import sys


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)   # results.STOPS


class Stopped(BaseException):
    """A stop signal while the modules load, or outside a run (click's dispatch, compare)."""


def stopped(signum: int, _frame) -> None:
    raise Stopped(signum)


def main(held: set | None = None) -> None:
    """`held`: the signal mask before __main__ blocked the stop signals (its first line)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)   # while the modules load: compiling
    held = blocked if held is None else held
    standard_streams()
    loadable()
    for sig in STOPS:                  # one (no bytecode cached) would lose the exception a
        if signal.getsignal(sig) != signal.SIG_IGN:          # handler raised there, and the signal
            signal.signal(sig, stopped)           # until a run sets its own
    try:
        try:
            parsed = early(sys.argv[1:])
            from .cli import main as command
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)     # one that came is handled here
        command(prog_name="torque-async", obj=parsed)
    except Stopped as e:
        ignore_stops()
        print(f"torque-async: interrupted by {signal.Signals(e.args[0]).name}", file=sys.stderr)
        sys.exit(128 + e.args[0])
    finally:
        ignore_stops()


def standard_streams() -> None:
    """A closed stdin, stdout or stderr (`>&-`) gets /dev/null at its number: a file the run
    opens would otherwise take it, and output meant for the terminal would land in that file.
    Python has already made the stream None, which tells the report it has nowhere to go."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)      # the lowest free number: fd itself


def loadable() -> None:
    """Under ulimit -v, numpy's OpenBLAS may find no room for its buffers: it then ends the
    process with a line of its own (or a MemoryError traceback), in the command or in its
    workers' server. A child first loads what both load, so the command says what to change
    (exit 2); the plan's check then weighs the tests' buffers against the limit (limits.py)."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return
    import subprocess
    tried = subprocess.run([sys.executable, "-c", "import torque_async.cli, numpy.random, "
                            "workers.entry"], capture_output=True, text=True, errors="replace")
    if tried.returncode:
        said = (tried.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"torque-async: error: ulimit -v allows {soft / 2 ** 20:.0f} MB of address "
              f"space, too little for the command and numpy to load ({said}): raise it",
              file=sys.stderr)
        sys.exit(2)


def ignore_stops() -> None:
    """For the exit (its hooks, the interpreter's teardown): nothing is left to stop, and a
    signal there would die of a KeyboardInterrupt or cut short the removal of the workers'
    server's directory."""
    for sig in STOPS:
        signal.signal(sig, signal.SIG_IGN)


def early(argv: list[str]):
    """The command line parsed once, here: a run whose plan has forked workers starts their
    server now, while the command imports the rest. Returns (the tokens, their plan) for the
    command, or None when they do not parse: the command parses them again and says why."""
    from . import cmdline, workstart
    from .options import ASKING
    tokens = argv[1:] if argv[:1] == ["run"] else argv
    try:
        plan = cmdline.parse(tokens)
    except Exception:  # noqa: BLE001 - the command itself says what is wrong with it
        return None
    if any(getattr(plan.settings, f) for f in ASKING):
        return tokens, plan
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= workstart.FILES_AT_START:
        try:                           # (below it the plan's check raises the limit first)
            workstart.start_server(plan)
        except OSError:                # (no temp dir) the run tries again and names the error
            pass
    return tokens, plan
