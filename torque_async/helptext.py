"""Help levels, examples and the -quit plan listing, all generated from the option table."""
from __future__ import annotations

import textwrap
from dataclasses import fields

from .options import ACTION, GLOBAL, LOCAL, LOCAL_DEFAULTS, OPTIONS, Locals, default_text
from .kinds import KINDS
from .plan import Plan
from .streams.schedule import plan_lines as stream_plan_lines
from .units import MB

USAGE = ("usage: torque-async [run] [global options] [[local options] action] "
         "[[local options] action] ...")
SECTIONS = {"global": (GLOBAL, "Global parameters (affect all actions; anywhere on the line)"),
            "local": (LOCAL, "Local parameters (only affect the action that follows them)"),
            "actions": (ACTION, "Actions (each starts one group of tests)")}
LEVELS = {"all": ("global", "local", "actions"), "short": ("global", "actions"),
          "global": ("global",), "local": ("local",), "actions": ("actions",)}
WIDTH, INDENT = 100, 28            # help lines wrap at WIDTH; the help text starts at INDENT
OTHER_COMMANDS = "Other commands: torque-async capacity, compare, plot (each with --help)"
READ_MORE = ("More: README.md (recipes) and docs/ (a page per subject; docs/options.md is "
             "this reference)")

EXAMPLES = """\
Examples:
  torque-async -p 2 -n 8 -i 500 -MB 4 -load
      two processes each load a 32 MB working set 500 times, side by side (the man page's
      -i 10 ends in about 20 ms on a machine of today: too soon for figures to resolve)
  torque-async -p 1 -n 8 -i 500 -MB 4 -load -p 1 -n 8 -i 500 -MB 4 -load
      the same two tests written out: locals apply only to the action after them
  torque-async -n 16 -MB 8 -Striad -spinWait -bcopy -quit
      show how the line parses (Triad on 3 x 128 MB, a spinner, a bcopy) and exit
  torque-async -p 2 -n 100 -MB 4 -Striad -spinWait
      how much CPU a spinner keeps while two STREAM Triads load memory
  torque-async -nh -bo -n 64 -MB 4 -bcopy | grep -a BW:
      only the comma-separated bandwidth figures, for spreadsheets
  torque-async -p 2 -n 64 -MB 1 -r -n 100 -MB 4 -Striad
      two uncached sequential file reads (scratch files) beside a STREAM Triad
  torque-async -KB 4 -n 20000 -aio 32
      32 asynchronous 4 KB transfers always outstanding (io_uring), in order over the
      78 MB that -n x -KB make the working set (a sequential test's -mfile* only caps it)
  torque-async -streams rrw 4 2048 200 1 3 256 -t 4 -n 100 -MB 4 -Striad
      two 200 MB/s camera streams combined into one output: does it hold its rate under load?
  torque-async -cyclic 1000 -n 64 -MB 4 -Striad
      timer wake-up latency every 1 ms while memory is loaded (cyclictest-style)
  torque-async -json run.json -n 128 -MB 1 -i 100 -sample 127 -bzero; torque-async plot run.json
      samples, JSON and a picture of bandwidth over time
  torque-async -baseline -n 100 -MB 4 -Striad -n 4000 -KB 4 -mfileMB 256 -rand -cyclic 1000
      who slowed whom: each group alone, then all together (the plan runs 4 times);
      the report lists alone / together / change, ranked by each test's change
  torque-async -t 5 -p 2 -n 16384 -KB 4 -aio 16 -t 5 -n 64 -MB 4 -Striad
      each group runs 5 s (fio's time_based) instead of n x i transfers; -ramp adds warm-up
  torque-async -repeat 5 -json runs.json -n 64 -MB 4 -Striad -n 16384 -KB 4 -aio 16
      the plan 5 times: each figure's median, min-max, SD and CV; the JSON keeps every run
Units: KB, MB, GB are 2^10, 2^20, 2^30 bytes; BW(MB/s) is MiB per second; times in ms.
Torque.config in the working directory (or -c FILE; without either, the copy shipped in the
package) adds its tokens after the command line's: its global options and -f files always apply,
its actions only when the command line has none.
"""


def option_line(name: str) -> list[str]:
    """An option's help: its name and arguments, then its help and default, wrapped."""
    opt = OPTIONS[name]
    head = f"  -{name}" + "".join(f" {a.shown}" for a in opt.args)
    default = default_text(opt)
    words = f"{opt.help}{f' (default {default})' if default else ''}"
    body = textwrap.wrap(words, WIDTH - INDENT, break_on_hyphens=False)
    if len(head) < INDENT:
        return [head.ljust(INDENT) + body[0], *(" " * INDENT + ln for ln in body[1:])]
    return [head, *(" " * INDENT + ln for ln in body)]


def section(key: str) -> list[str]:
    """A scope's options under their group headings, each heading once (in table order)."""
    scope, title = SECTIONS[key]
    groups: dict[str, list[str]] = {}
    for name, opt in OPTIONS.items():
        if opt.scope == scope:
            groups.setdefault(opt.group, []).append(name)
    lines = [title]
    for group, names in groups.items():
        lines += [f" {group}:", *(ln for name in names for ln in option_line(name))]
    return lines


def help_lines(level: str) -> list[str]:
    """-help: everything and the examples; -h: globals and actions; -hg, -hl, -ha: one scope;
    each ends by naming where the documentation is."""
    lines = [USAGE, ""]
    for key in LEVELS[level]:
        lines += section(key) + [""]
    if level == "all":
        lines += EXAMPLES.splitlines()
    return lines + [OTHER_COMMANDS, READ_MORE]


def asked_about(argv: list[str]) -> list[str] | None:
    """`-help -percR -streams` (any help option, or --help, beside other option names): the
    help of those options, in the order named; None when no help option or no other option is
    named (the options need no arguments here: `-help -percR` read as -percR without its p)."""
    names = [a[1:] for a in argv if a.startswith("-") and a[1:] in OPTIONS]
    helps = {n for n in names if OPTIONS[n].field == "help"}
    others = dict.fromkeys(n for n in names if n not in helps)
    if not others or not (helps or "--help" in argv):
        return None
    return [line for name in others for line in option_line(name)]


def plan_lines(plan: Plan) -> list[str]:
    """What -quit shows: the globals that were set, then each group's locals and action."""
    s = plan.settings
    set_globals = [f"{f.name}={shown(f.name, getattr(s, f.name))}" for f in fields(s)
                   if getattr(s, f.name) != f.default and f.name not in ("quit", "seed")]
    lines = [f"command line: torque-async {plan.command}".rstrip(),
             f"configuration file: {plan.config or 'none'}"
             + (" (its actions run: the command line has none)" if plan.from_config else ""),
             f"seed: {s.seed}", f"globals: {', '.join(set_globals) or 'defaults'}",
             f"test processes: {len(plan.procs())} in {len(plan.groups)} groups "
             f"({'-slow' if plan.slow else '-fast'})"]
    for g in plan.groups:
        changed = [f"{f.name}={getattr(g.local, f.name)!r}" for f in fields(Locals)
                   if getattr(g.local, f.name) != LOCAL_DEFAULTS[f.name]]
        args = " ".join(map(str, g.args))
        sets = KINDS[g.action].working_sets      # (a memory test's arrays, as it allocates)
        lines += [f"group {g.index}: -{g.action}{' ' + args if args else ''} x {g.local.p}",
                  f"  locals: {', '.join(changed) or 'defaults'}",
                  *([f"  working set: {sets} x {g.local.n * g.local.size / MB:g} MBytes per "
                     f"process"] if sets else []),
                  *(stream_plan_lines(g) if g.action in ("streams", "memStreams") else []),
                  f"  from: {g.text}"]
    return lines


def shown(name: str, value) -> str:
    """A global's value as -quit shows it: the shared-memory key in hex, as its segment's name
    (torque-async-7d08) and -smkey 0x7d08 have it."""
    return hex(value) if name == "smkey" else repr(value)


def alias_lines(plan: Plan) -> list[str]:
    return [f"-{name} = {tokens}" for name, tokens in plan.aliases] or ["no aliases defined"]
