"""torque's grammar: tokens from the command line, the config file and aliases become a Plan.

Global options may stand anywhere; local options gather until an action closes the group;
the next group starts from the defaults. The command line's tokens come first, then the config
file's: the config's globals and files always apply, its actions only when the command line
names none.
"""
from __future__ import annotations

import difflib
import importlib.resources
import os
import re
import shlex
import time
from dataclasses import dataclass, replace
from typing import Iterable

from .applies import applies, refusal
from .errors import UsageError
from .inputs import CONFIG_LIMIT, read_bounded
from .options import ACTION, FIO_NAMES, FIO_SAYS, GLOBAL, OPTIONS, SAME, ArgError, Globals, Locals
from .plan import Group, Plan

DEFAULT_CONFIG = "Torque.config"
MAX_ALIAS_DEPTH = 64              # aliases within aliases
MAX_TOKENS = 100_000              # tokens after expanding every alias
SHELL_LINE_LIMIT = 1 << 16         # characters of a line that needs shell quoting: shlex takes
                                   # quadratic time over one token
QUOTING = re.compile(r"['\"\\#]")   # what only shlex understands: quotes, escapes, comments
BLANKS = re.compile(r"[ \t\r\n]+")   # shlex's whitespace
PACKAGED_CONFIG = str(importlib.resources.files("torque_async") / DEFAULT_CONFIG)  # the default
                                   # workload where the working directory has no Torque.config
SHIPPED_ALIASES = str(importlib.resources.files("torque_async") / "aliases" / "workloads.alias")
COMMAND_LINE = "command line"
SUBCOMMANDS = ("run", "plot", "compare", "capacity")   # cli.py's; first on the line


@dataclass(frozen=True)
class Token:
    text: str
    origin: str                   # "command line" or "FILE:LINE"
    alias: bool = False           # it came from an alias's expansion, not typed where it is

    def where(self) -> str:
        return "" if self.origin == COMMAND_LINE else f"{self.origin}: "


def read_lines(path: str, what: str) -> list[tuple[int, list[str]]]:
    """(line number, shell-split words) of a text file, '#' comments and blank lines dropped."""
    try:
        data = read_bounded(path, CONFIG_LIMIT, what)
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        raw = data.decode("utf-8-sig").splitlines()      # (a BOM some editors write first)
    except UnicodeDecodeError as e:
        number = data.count(b"\n", 0, e.start) + 1
        raise UsageError(f"{path}:{number}: not UTF-8 text (byte {data[e.start]:#04x})") from None
    lines = []
    for number, line in enumerate(raw, 1):
        if not QUOTING.search(line):
            words = [w for w in BLANKS.split(line) if w]
        elif len(line) > SHELL_LINE_LIMIT:
            raise UsageError(f"{path}:{number}: a line of {len(line)} characters with quotes, "
                             f"escapes or a comment (at most {SHELL_LINE_LIMIT})")
        else:
            try:
                words = shlex.split(line, comments=True)
            except ValueError as e:
                raise UsageError(f"{path}:{number}: {e}") from None
        if words:
            lines.append((number, words))
    return lines


def config_tokens(path: str) -> list[Token]:
    return [Token(w, f"{path}:{n}") for n, words in read_lines(path, "configuration file")
            for w in words]


def read_aliases(path: str) -> dict[str, tuple[Token, ...]]:
    """Alias file: one 'NAME = tokens ...' a line; '-NAME' on the command line expands."""
    aliases = {}
    try:
        lines = read_lines(path, "alias file")
    except UsageError as e:      # the README's aliases/workloads.alias, away from the checkout
        if os.path.exists(path) or os.path.basename(path) != os.path.basename(SHIPPED_ALIASES):
            raise
        raise UsageError(f"{e} (the shipped one: -aliasFile {SHIPPED_ALIASES})") from None
    for number, words in lines:
        where = f"{path}:{number}"
        if len(words) < 3 or words[1] != "=":
            raise UsageError(f"{where}: expected 'NAME = tokens ...'")
        name = words[0].lstrip("-")
        if name in OPTIONS:
            raise UsageError(f"{where}: alias '{name}' would hide the option -{name}")
        aliases[name] = tuple(Token(w, where) for w in words[2:])
    return aliases


def expand(tokens: Iterable[Token], aliases: dict[str, tuple[Token, ...]]) -> list[Token]:
    """Tokens with every '-NAME' alias replaced by its tokens, NAME's own aliases expanded in
    turn: at most MAX_ALIAS_DEPTH aliases deep and MAX_TOKENS tokens in all."""
    out: list[Token] = []
    todo = [(tok, ()) for tok in reversed(list(tokens))]     # (token, the aliases it came from)
    while todo:
        tok, chain = todo.pop()
        name = tok.text[1:]
        if not (tok.text.startswith("-") and name in aliases and name not in OPTIONS):
            out.append(replace(tok, alias=True) if chain else tok)
            if len(out) > MAX_TOKENS:
                raise UsageError(f"{tok.where()}more than {MAX_TOKENS} tokens"
                                 + (f" once aliases are expanded ({' -> '.join(chain)})"
                                    if chain else ""))
            continue
        if name in chain:
            raise UsageError(f"{tok.where()}alias loop: {' -> '.join((*chain, name))}")
        if len(chain) >= MAX_ALIAS_DEPTH:
            raise UsageError(f"{tok.where()}aliases nested more than {MAX_ALIAS_DEPTH} deep: "
                             f"{' -> '.join((*chain[:3], '...', *chain[-2:], name))}")
        todo += [(t, (*chain, name)) for t in reversed(aliases[name])]
    return out


def value_after(tokens: list[Token], option: str) -> Token | None:
    """The argument of the last `-option ARG` among tokens (read before full scanning; the
    last, as scanning keeps a global option's last value)."""
    found = None
    for tok, nxt in zip(tokens, tokens[1:]):
        if tok.text == f"-{option}":
            found = nxt
    return found


def suggest(name: str, extra: Iterable[str] = ()) -> str:
    known = [*OPTIONS, *extra]
    close = [o for o in known if o.lower() == name.lower()] or \
        difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f" (did you mean -{close[0]}?)" if close else ""


def fio_hint(name: str) -> str:
    """A hint when `name` is fio's (-runtime, --iodepth=16): the option that does it here."""
    said = name.lstrip("-").split("=")[0]
    if said in FIO_SAYS:
        return f" (fio's --{said}: {FIO_SAYS[said]})"
    opt = OPTIONS.get(FIO_NAMES.get(said, ""))
    return f" (fio's --{said} is -{opt.name} here: {opt.help})" if opt else ""


def shipped_hint(name: str, aliases: Iterable[str]) -> str:
    """A hint when `name` is one of the shipped workloads and no alias file was given."""
    if aliases or name not in read_aliases(SHIPPED_ALIASES):
        return ""
    return f" (a shipped workload: -aliasFile {SHIPPED_ALIASES} -{name})"


@dataclass
class Scan:
    settings: dict
    groups: list[Group]


def scan(tokens: list[Token], aliases: Iterable[str] = ()) -> Scan:
    """Turn tokens into global settings and groups; locals left without an action are an error.
    What was typed wins over an alias's own setting of the same option: a global typed
    anywhere, a local typed before the alias in the group it joins."""
    settings: dict = {}
    files: list[str] = []
    groups: list[Group] = []
    local: dict = {}
    typed: set[str] = set()               # fields typed (not from an alias): globals, and the
                                          # locals of the group being gathered
    typed_globals = {OPTIONS[t.text[1:]].field for t in tokens if not t.alias
                     and t.text[1:] in OPTIONS and OPTIONS[t.text[1:]].scope == GLOBAL}
    given: list[Token] = []               # the local options of the group being gathered
    group_text: list[str] = []
    pos = 0
    while pos < len(tokens):
        tok = tokens[pos]
        if not tok.text.startswith("-") or len(tok.text) < 2:
            where = (f": {tok.text} is a subcommand, first on the line: torque-async "
                     f"{tok.text} ..." if tok.text in SUBCOMMANDS else "")
            raise UsageError(f"{tok.where()}unexpected '{tok.text}': options start with '-'"
                             f"{where}")
        opt = OPTIONS.get(tok.text[1:])
        if opt is None:
            name = tok.text[1:]
            hint = fio_hint(name) or suggest(name, aliases) or shipped_hint(name, aliases)
            raise UsageError(f"{tok.where()}unknown option {tok.text}{hint}")
        words = tokens[pos + 1:pos + 1 + len(opt.args)]
        if len(words) < len(opt.args):
            names = " ".join(a.shown for a in opt.args)
            raise UsageError(f"{tok.where()}{tok.text} needs {len(opt.args)} argument"
                             f"{'s' if len(opt.args) > 1 else ''}: {names}")
        values = []
        for arg, word in zip(opt.args, words):
            try:
                values.append(arg.parse(word.text))
            except ArgError as e:
                raise UsageError(f"{word.where()}{tok.text} {arg.shown}: {e}") from None
        pos += 1 + len(opt.args)
        value = opt.value(values)
        if opt.scope == GLOBAL:
            if opt.field == "files":
                files.append(value)
            elif not (tok.alias and opt.field in typed_globals):
                settings[opt.field] = value
            continue
        if opt.scope == ACTION:
            group_text += [tok.text, *(w.text for w in words)]
            for option in given:
                if not applies(option.text[1:], opt.name):
                    raise UsageError(f"{option.where()}{refusal(option.text[1:], opt.name)}")
            args = tuple(values)
            groups.append(Group(len(groups), opt.name, args, Locals(**local),
                                " ".join(group_text), tok.origin.split(":")[0]))
            local, given, group_text, typed = {}, [], [], set()
        else:
            given.append(tok)
            sets = {opt.field: value, **{f: value if v == SAME else v for f, v in opt.also}}
            if tok.alias:                  # the user's own, typed before it, stay
                sets = {f: v for f, v in sets.items() if f not in typed}
            else:
                typed |= set(sets)
            if sets:
                local.update(sets)
                group_text += [tok.text, *(w.text for w in words)]
    if group_text:
        first = next(t for t in tokens if t.text == group_text[0])
        raise UsageError(f"{first.where()}local options without an action after them: "
                         f"{' '.join(group_text)} (they modify the action that follows them: "
                         f"{' '.join(group_text)} -load, say)")
    if files:
        settings["files"] = tuple(files)
    return Scan(settings, groups)


def with_global_times(groups: tuple[Group, ...], settings) -> tuple[Group, ...]:
    """-tAll and -rampAll as the -t and -ramp of every group that sets none; a stream's length
    is its runTime argument, so they leave streams alone; -bufferFramesAll as the -bufferFrames
    of every stream that sets none (0 without either)."""
    def own(g: Group) -> Group:
        if applies("bufferFrames", g.action):
            n = g.local.bufferFrames
            n = n if n is not None else settings.bufferFramesAll or 0
            return replace(g, local=replace(g.local, bufferFrames=n))
        if not applies("t", g.action):
            return g
        t = g.local.t if g.local.t is not None else settings.tAll
        ramp = g.local.ramp if g.local.ramp is not None else settings.rampAll
        return replace(g, local=replace(g.local, t=t, ramp=ramp))
    return tuple(map(own, groups))


def parse(argv: list[str], cwd: str = ".") -> Plan:
    """The Plan of a command line (argv without the program name), config file and aliases."""
    line = [Token(a, COMMAND_LINE) for a in argv]
    named = value_after(line, "c")
    path = named.text if named else os.path.join(cwd, DEFAULT_CONFIG)
    stray = not named and os.path.lexists(path) and not os.path.isfile(path)  # a run refuses it
    config = path if named or stray or os.path.isfile(path) else PACKAGED_CONFIG   # (validate)
    conf = [] if stray else config_tokens(config)

    alias_tok = value_after(line, "aliasFile") or value_after(conf, "aliasFile")
    aliases = read_aliases(alias_tok.text) if alias_tok else {}
    scans = []
    for raw in line, conf:
        tokens = expand(raw, aliases)
        scans.append(scan(tokens, aliases))
        tok = value_after(tokens, "c")
        if "config" in scans[-1].settings and tok is not named:    # (read from elsewhere)
            what = "a configuration file" if any(t is tok for t in raw) else "an alias"
            raise UsageError(f"{tok.where()}-c in {what}: name the configuration file on the "
                             f"command line")
    cmd, cfg = scans

    files = cmd.settings.get("files", ()) + cfg.settings.get("files", ())
    settings = Globals(**{**cfg.settings, **cmd.settings, "files": files})
    if len(files) > 128:
        raise UsageError(f"-f: {len(files)} test files, at most 128")
    if settings.seed is None:
        settings = replace(settings, seed=time.time_ns() % (2**63))
    groups = with_global_times(tuple(cmd.groups or cfg.groups), settings)
    return Plan(settings=settings, groups=groups, command=" ".join(shlex.quote(a) for a in argv),
                config=config, aliases=tuple((k, " ".join(t.text for t in v))
                                             for k, v in aliases.items()),
                from_config=not cmd.groups and bool(cfg.groups))
