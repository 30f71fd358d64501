"""The command's entry point: a stop signal (Ctrl-C, SIGTERM, SIGHUP) while the modules still
load, or outside a run (click's dispatch, compare, plot), ends it as a run's interrupt would
(one line, 128 + the signal, its exit hooks run: the workers' server's directory is removed),
not with a traceback from inside an import, click's 'aborted' or no word at all. A signal
ignored at the start (nohup) stays ignored; one during the exit is ignored."""
from __future__ import annotations

import signal
import sys


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal while the modules load, or outside a run (click's dispatch, compare)."""


def stopped(signum: int, _frame) -> None:
    raise Stopped(signum)


def main() -> None:
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)   # while the modules load: compiling
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
    if not any(getattr(plan.settings, f) for f in ASKING):
        try:
            workstart.start_server(plan)
        except OSError:                # (no temp dir) the run tries again and names the error
            pass
    return tokens, plan
