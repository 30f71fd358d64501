"""What capacity varies: the plan's tokens, and the same plan with one group's value changed.

The plan is the command line after `--` with its aliases expanded (the tokens cmdline.scan
reads). A point's plan is those tokens with one edit to the varied group: `-p N` put before
its action (a local given twice keeps the last), the -aio depth or a stream's MiB/s argument
replaced, or `-fps N` / `-T usec` put before its action. A stream wired to others (-from) is
one stage of a pipeline: the same edit goes to every stage of it, so `-p N` is N pipelines.
The edits of the varied value and of -cfiles are the only changes: the run checks and runs the
plan as `torque-async run` does.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import cmdline
from .errors import UsageError
from .options import ACTION, GLOBAL, OPTIONS
from .plan import Plan
from .streams.formats import rate

STREAMS = ("streams", "memStreams")
BW_ARG = 3                         # a stream's MiB/s per sub-stream, among its action arguments
MAX_RATE = 10**6                   # --max's default for --vary rate (fps, MiB/s, transfers/s)


@dataclass(frozen=True)
class Layout:
    tokens: tuple[str, ...]
    globals: tuple[tuple[int, int], ...]      # [start, end) of each global option
    groups: tuple[tuple[int, int, int], ...]  # (first token, action token, end) of each group
    cfiles: tuple[int, ...]                   # where -cfiles stands


def layout(argv: list[str]) -> Layout:
    """The spans of the plan's tokens (argv already parsed by cmdline.parse: well formed)."""
    line = [cmdline.Token(a, cmdline.COMMAND_LINE) for a in argv]
    named = cmdline.value_after(line, "aliasFile")
    aliases = cmdline.read_aliases(named.text) if named else {}
    tokens = [t.text for t in cmdline.expand(line, aliases)]
    globals_, groups, cfiles, first, pos = [], [], [], None, 0
    while pos < len(tokens):
        opt = OPTIONS.get(tokens[pos][1:])
        if opt is None:                      # an alias of the configuration file's -aliasFile
            raise UsageError(f"capacity: {tokens[pos]}: name its -aliasFile on the "
                                     f"command line, after --")
        end = pos + 1 + len(opt.args)
        if opt.scope == GLOBAL:
            globals_.append((pos, end))
        elif opt.scope == ACTION:
            groups.append((pos if first is None else first, pos, end))
            first = None
        else:
            first = pos if first is None else first
            cfiles += [pos] if opt.name == "cfiles" else []
        pos = end
    return Layout(tuple(tokens), tuple(globals_), tuple(groups), tuple(cfiles))


@dataclass(frozen=True)
class Knob:
    """The varied value of one group: how it is written into the plan, and where it starts."""
    vary: str                      # procs, qd, rate
    group: int
    how: str                       # p, aio, fps, bw, T
    start: int
    limit: int                     # the largest value the option takes
    name: str                      # the table's column
    stages: tuple[int, ...] = ()   # the groups wired with it (-from), edited the same way

    @property
    def where(self) -> str:
        """'group 0', or a pipeline's 'groups 0, 1, 2 (stages wired by -from)'."""
        return f"groups {', '.join(map(str, self.stages))} (stages wired by -from)" \
            if self.stages else f"group {self.group}"

    def edit(self, value: int) -> tuple[int, list[str]] | tuple[int, list[str], int]:
        """(offset from the action token, tokens put there, how many they replace)."""
        if self.how == "aio":
            return 1, [str(value)], 1
        if self.how == "bw":
            return 1 + BW_ARG, [str(value)], 1
        written = str(round(1e6 / value)) if self.how == "T" else str(value)
        return 0, [f"-{self.how}", written], 0


def knob(plan: Plan, group: int, vary: str) -> Knob:
    """What --vary means for the plan's group; UsageError when it has no such thing."""
    if not 0 <= group < len(plan.groups):
        raise UsageError(f"capacity: --group {group}: the plan has groups 0.."
                                 f"{len(plan.groups) - 1}")
    g, stages = plan.groups[group], plan.wired(group)
    if vary == "procs":
        return Knob(vary, group, "p", g.local.p, 1024, "-p", stages)
    if vary == "qd":
        if g.action != "aio":
            raise UsageError(f"capacity: --vary qd: group {group} ({g.text}) is not an "
                                     f"-aio test: no queue depth to vary")
        return Knob(vary, group, "aio", g.args[0], 1024, "-aio depth")
    if len({plan.groups[s].local.fps is None for s in stages}) > 1:
        fps = ", ".join(str(s) for s in stages if plan.groups[s].local.fps is not None)
        raise UsageError(f"capacity: --vary rate: the stages wired by -from (groups "
                         f"{', '.join(map(str, stages))}) set their rate differently, -fps on "
                         f"group(s) {fps} and MiB/s on the others: give every stage -fps, or "
                         f"every stage its MiB/s")
    if g.action in STREAMS and g.local.fps is not None:
        return Knob(vary, group, "fps", max(1, int(rate(g.local.fps))), 100_000, "-fps",
                    stages)
    if g.action in STREAMS:
        return Knob(vary, group, "bw", max(1, int(g.args[BW_ARG])), MAX_RATE, "MiB/s", stages)
    if g.local.T:
        return Knob(vary, group, "T", max(1, round(1e6 / g.local.T)), MAX_RATE,
                    "1e6/-T (/s)")
    raise UsageError(f"capacity: --vary rate: group {group} ({g.text}) has no rate: "
                             f"a stream's -fps or MiB/s, or a -T pacing")


def tokens_at(lay: Layout, k: Knob, value: int, made: bool) -> list[str]:
    """The plan's tokens with the group's value set; `made`: its trees exist, -cfiles left
    out (it would check every file of them again at every point)."""
    parts = [[t] for t in lay.tokens]
    for pos in lay.cfiles if made else ():
        parts[pos] = []
    offset, put, replaced = k.edit(value)
    for group in k.stages or (k.group,):
        at = lay.groups[group][1] + offset
        parts[at] = put + parts[at][replaced:]
    return [t for part in parts for t in part]


def alone(lay: Layout, group: int) -> list[str]:
    """The plan's globals and one of its groups: that group run alone."""
    first, _, end = lay.groups[group]
    return [t for a, b in lay.globals for t in lay.tokens[a:b]] + list(lay.tokens[first:end])
