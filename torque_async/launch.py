"""The command's entry point: a Ctrl-C while the modules still load ends it as a run's interrupt
would (one line, 130), not with a traceback from inside an import."""
from __future__ import annotations

import sys


def main() -> None:
    try:
        early(sys.argv[1:])
        from .cli import main as command
    except KeyboardInterrupt:
        print("torque-async: interrupted by SIGINT", file=sys.stderr)
        sys.exit(130)
    command(prog_name="torque-async")


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
