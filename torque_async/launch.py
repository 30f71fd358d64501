"""The command's entry point: a stop signal while the modules still load (Ctrl-C, SIGTERM,
SIGHUP) ends it as a run's interrupt would (one line, 128 + the signal, its exit hooks run: the
workers' server's directory is removed), not with a traceback from inside an import or no word
at all. A signal ignored at the start (nohup) stays ignored; one once the command has returned
(during the exit) is ignored."""
from __future__ import annotations

import signal
import sys


class Stopped(BaseException):
    """SIGTERM or SIGHUP while the modules load."""


def stopped(signum: int, _frame) -> None:
    raise Stopped(signum)


def main() -> None:
    loading = [sig for sig in (signal.SIGTERM, signal.SIGHUP)
               if signal.getsignal(sig) != signal.SIG_IGN]
    for sig in loading:
        signal.signal(sig, stopped)
    try:
        early(sys.argv[1:])
        from .cli import main as command
        for sig in loading:            # as before the command ran; a run sets its own
            signal.signal(sig, signal.SIG_DFL)
    except (KeyboardInterrupt, Stopped) as e:
        signum = e.args[0] if isinstance(e, Stopped) else signal.SIGINT
        print(f"torque-async: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        sys.exit(128 + signum)
    try:
        command(prog_name="torque-async")
    finally:                  # the exit (its hooks, the interpreter's teardown: 70 ms): there
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # is nothing left to stop, and
            signal.signal(sig, signal.SIG_IGN)     # a Ctrl-C there died of a KeyboardInterrupt


def early(argv: list[str]) -> None:
    """A run whose plan has forked workers starts their server now, while the command imports
    the rest (a plan it cannot parse is left to the command to report)."""
    from . import cmdline, workstart
    try:
        plan = cmdline.parse(argv[1:] if argv[:1] == ["run"] else argv)
    except Exception:  # noqa: BLE001 - the command itself says what is wrong with it
        return
    s = plan.settings
    if not (s.quit or s.help or s.version or s.example or s.printAlias or s.freeSharedMemory):
        try:
            workstart.start_server(plan)
        except OSError:                # (no temp dir) the run tries again and names the error
            pass
