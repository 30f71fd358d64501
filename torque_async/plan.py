"""The frozen, picklable result of parsing: global settings and one group per action."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Group:
    index: int
    action: str                   # option name of the action, e.g. "load"
    args: tuple[Any, ...]         # the action's parsed arguments
    local: Any                    # options.Locals: the options that stood before the action
    text: str                     # this group's part of the command line
    origin: str                   # "command line" or the config file it came from


@dataclass(frozen=True)
class Proc:
    """One test process: its row in the results array and its place in its group."""
    row: int
    group: Group
    index: int                    # 0 .. p-1 inside the group


@dataclass(frozen=True)
class Plan:
    settings: Any                 # options.Globals
    groups: tuple[Group, ...]
    command: str                  # the command line as typed (quoted)
    config: str | None            # the configuration file read, if any
    aliases: tuple[tuple[str, str], ...]
    from_config: bool             # the groups came from the configuration file
    pins: dict = field(default_factory=dict, compare=False)   # -f path -> who the file is
                                  # (identity.pin), as the command saw it or its run made it

    def procs(self) -> tuple[Proc, ...]:
        """Every test process, numbered in order; -child n keeps only process n."""
        every = [(g, k) for g in self.groups for k in range(g.local.p)]
        if self.settings.child is not None:
            every = every[self.settings.child:self.settings.child + 1]
        return tuple(Proc(row, g, k) for row, (g, k) in enumerate(every))

    def wired(self, group: int) -> tuple[int, ...]:
        """The groups of the pipeline `group` is a stage of (streams wired by -from, either
        way), in order; () for a group wired to none."""
        linked, grew = {group}, True
        while grew:
            grew = False
            for g in self.groups:
                source = g.local.from_group
                if source is not None and (g.index in linked) != (source in linked):
                    linked |= {g.index, source}
                    grew = True
        return tuple(sorted(linked)) if len(linked) > 1 else ()

    @property
    def slow(self) -> bool:
        """-slow is the default with more than one test process."""
        s = self.settings.slow
        return len(self.procs()) > 1 if s is None else s
