"""The torque-async command. click handles only subcommands and --long options; everything
else is torque's own order-dependent grammar, forwarded untouched to the scanner."""
from __future__ import annotations

import os
import sys
import time

import click

from . import __version__, cmdline, helptext, orchestrator, report, sysinfo, validate
from .results import free_segment, segment_name

SYSCTL_FILE = "sysctl.current"


class DefaultRun(click.Group):
    """`torque-async ARGS` means `torque-async run ARGS`."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and not args[0].startswith("--")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultRun)
@click.version_option(__version__, "--version", prog_name="torque-async")
def main() -> None:
    """A system exerciser: starts bandwidth-hungry tests together and reports what each
    achieved while all of them ran. `torque-async -help` lists torque's options."""


@main.command(context_settings=dict(ignore_unknown_options=True, allow_extra_args=True,
                                    help_option_names=[]))
@click.argument("tokens", nargs=-1, type=click.UNPROCESSED)
def run(tokens: tuple[str, ...]) -> None:
    """Run tests: torque's grammar, e.g. `-p 2 -n 8 -MB 4 -load`."""
    sys.exit(execute(list(tokens)))


def say(lines: list[str], err: bool = False) -> None:
    if lines:
        print("\n".join(lines), file=sys.stderr if err else sys.stdout, flush=True)


def execute(argv: list[str]) -> int:
    """Parse, run and report; returns the exit status (0 ok, 1 a test failed, 2 bad input)."""
    try:
        plan = cmdline.parse(argv)
        s = plan.settings
        informative = [(s.version, [f"torque-async, version: {__version__}"]),
                       (s.help, helptext.help_lines(s.help or "all")),
                       (s.example, helptext.EXAMPLES.splitlines()),
                       (s.printAlias, helptext.alias_lines(plan))]
        if any(flag for flag, _ in informative):
            say([ln for flag, lines in informative if flag for ln in lines])
            return 0
        if s.freeSharedMemory:
            name = segment_name(s.smkey)
            owner = free_segment(name)
            say([f"removed /dev/shm/{name} (created by pid {owner})" if owner is not None
                 else f"no shared memory /dev/shm/{name} to remove"])
            if not plan.groups or plan.from_config:
                return 0
        if s.quit:
            say(helptext.plan_lines(plan))
            return 0
        validate.check(plan)
        info = sysinfo.collect()
        write_sysctl(info, [os.getcwd(), *s.files])
        outcome = orchestrator.run(plan, info.cache_line)
    except cmdline.UsageError as e:
        print(f"torque-async: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("torque-async: interrupted", file=sys.stderr)
        return 130
    date = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    say(report.render(plan, outcome.records, plan.procs(), info, date, outcome.failures))
    say([f"torque-async: {line}" for line in outcome.failures], err=True)
    return 1 if outcome.failures else 0


def write_sysctl(info: sysinfo.SysInfo, paths: list[str]) -> None:
    """The longer configuration dump torque leaves behind in sysctl.current."""
    try:
        with open(SYSCTL_FILE, "w", encoding="utf-8") as fh:
            fh.write("\n".join(sysinfo.detail_lines(info, paths)) + "\n")
    except OSError as e:
        print(f"torque-async: note: cannot write {SYSCTL_FILE}: {e.strerror}", file=sys.stderr)
