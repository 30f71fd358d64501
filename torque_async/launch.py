"""The command's entry point: a Ctrl-C while the modules still load ends it as a run's interrupt
would (one line, 130), not with a traceback from inside an import."""
from __future__ import annotations

import sys


def main() -> None:
    try:
        from .cli import main as command
    except KeyboardInterrupt:
        print("torque-async: interrupted by SIGINT", file=sys.stderr)
        sys.exit(130)
    command(prog_name="torque-async")
