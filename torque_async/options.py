"""The one option table: it drives the scanner, the help levels, the config file and -quit.

Each entry names an option as torque spells it (without the dash), its scope, its arguments,
where its value goes and a one-line help, and all else known of it: its field's default, the
actions a local option applies to, how compare treats it, fio's names for it and whether it only
asks for information. Size options that differ only in unit (-B/-KB/-MB/-GB) are separate
entries writing the same field with a different multiplier. The checks at import (real raises)
say what an entry lacks.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Callable

from .action_sets import (COUNTED, EVERY, FILE, LISTED, MEMORY, PLACED, READS, SPAWNED,
                          STREAM, STREAMS, STRIDED, TIMED, VIDEO, WEB)
from .streams.formats import FORMATS, parse_frame, parse_rate
from .units import GB, KB, MB

GLOBAL, LOCAL, ACTION = "global", "local", "action"
SAME = "<same value>"          # in Option.also: the extra field takes the option's own value
UNSET = "<no default declared>"   # Option.default of every option but the one declaring it
# Option.how, how compare treats two runs' tests that differ in a local option:
WORK = "work"            # what the test does: they are different tests, never matched
SETTING = "setting"      # how it runs (-p, -affinityNumber): the same test, matched and compared
HOW_KINDS = (WORK, SETTING)


class ArgError(ValueError):
    """An argument that does not parse or is out of bounds; the message says which."""


@dataclass(frozen=True)
class Arg:
    name: str
    parse: Callable[[str], Any]
    unit: str = ""                 # what the number counts, shown in help: "KB", "frames"
    scale: int = 1                 # bytes per unit of a size (the field holds bytes)

    @property
    def shown(self) -> str:
        """The argument as help and errors name it: 'bw(MiB/s)'."""
        return f"{self.name}({self.unit})" if self.unit and self.unit != self.name else self.name


INTEGER = re.compile(r"[+-]?(?:(0[xob][0-9a-f]+)|[0-9]+)\Z", re.IGNORECASE)   # (ASCII digits)


def integer(lo: int | None = None, hi: int | None = None, mult: int = 1) -> Callable[[str], int]:
    """Decimal (a leading 0 is still decimal: -n 010 is 10, as C's atoi reads it), or hex, octal
    or binary with 0x, 0o or 0b; no other digits or separators."""
    def parse(text: str) -> int:
        form = INTEGER.match(text)
        try:
            value = int(text, 0 if form and form.group(1) else 10) if form else None
        except ValueError:
            value = None
        if value is None:
            raise ArgError(f"'{text}' is not an integer")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ArgError(f"{value} is out of range ({span})")
        return value * mult
    return parse


def number(lo: float, hi: float | None = None) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = plain_float(text)
        except ValueError:
            raise ArgError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise ArgError(f"{text} is not a finite number")
        if value < lo or (hi is not None and value > hi):
            raise ArgError(f"{text} is out of range ({lo}..{hi if hi is not None else 'inf'})")
        return value
    return parse


MAX_SECONDS = 10**6


def plain_float(text: str) -> float:
    """float(text) of ASCII text without separators (float takes '1_000' and other scripts'
    digits); ValueError otherwise."""
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return float(text)


def seconds(lo: float, lo_allowed: bool) -> Callable[[str], float]:
    """A time in seconds above lo (or from lo, when lo_allowed), finite."""
    def parse(text: str) -> float:
        try:
            value = plain_float(text)
        except ValueError:
            raise ArgError(f"'{text}' is not a number of seconds") from None
        if not (value > lo or (lo_allowed and value == lo)) or value > MAX_SECONDS:
            raise ArgError(f"{text} is out of range ({'from' if lo_allowed else 'above'} {lo:g} "
                           f"to {MAX_SECONDS} seconds)")
        return value
    return parse


def choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in names:
            raise ArgError(f"'{text}' is not one of {', '.join(names)}")
        return text
    return parse


def one_of(*values: int) -> Callable[[str], int]:
    """An integer from `values` (outside their span: out of range, as integer() says)."""
    within = integer(min(values), max(values))

    def parse(text: str) -> int:
        value = within(text)
        if value not in values:
            raise ArgError(f"{value} is not one of {', '.join(map(str, values))}")
        return value
    return parse


def checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A parser that raises ValueError, its message made the argument's error."""
    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:
            raise ArgError(str(e)) from None
    return wrapped


def text(value: str) -> str:
    if not value:
        raise ArgError("an empty name")
    return value


def pattern(value: str) -> int:
    return integer(0, 2**64 - 1)(value)


Count = integer(0, 2**40)
TIME, RAMP = seconds(0.0, False), seconds(0.0, True)
Cpu = integer(0, 4095)


@dataclass(frozen=True)
class Option:
    name: str                      # as typed, without the dash
    scope: str                     # GLOBAL, LOCAL or ACTION
    help: str
    args: tuple[Arg, ...] = ()
    dest: str = ""                 # field written (defaults to the name)
    const: Any = True              # value stored by a flag (no args)
    group: str = ""                # help section
    also: tuple[tuple[str, Any], ...] = ()   # more fields it sets: -sa sets sa=True, -bp bp2
    asks: bool = False             # asks for an answer or a clean-up (-help, -quit): the
                                   # command may end without a run
    fio: tuple[str, ...] = ()      # fio's names for what it does: the hint an unknown option
                                   # of that name gets (-runtime: -t)
    default: Any = UNSET           # its field's value when no option sets it: declared on one
                                   # option per field (-size's on -B, -help's on -help)
    how: str = WORK                # a local option's kind for compare, from HOW_KINDS
    applies: frozenset[str] = frozenset()   # the actions a local option applies to (named
                                   # sets in action_sets.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "applies", frozenset(self.applies))

    @property
    def field(self) -> str:
        return self.dest or self.name

    def value(self, parsed: list[Any]) -> Any:
        if not self.args:
            return self.const
        return parsed[0] if len(parsed) == 1 else tuple(parsed)


def _sizes(stem: str, dest: str, help: str, default: int, applies: frozenset[str],
           units=(("B", 1), ("KB", KB), ("MB", MB), ("GB", GB)), lo: int = 1,
           fio: dict[str, tuple[str, ...]] | None = None) -> list[Option]:
    """One option per unit, all writing `dest`; the first declares its default."""
    return [Option(f"{stem}{u}", LOCAL, f"{help} in {'bytes' if u == 'B' else u + 'ytes'}",
                   (Arg(u, integer(lo, 2**40, mult), u, mult),), dest, group="Sizes",
                   fio=(fio or {}).get(u, ()), default=default if k == 0 else UNSET,
                   applies=applies)
            for k, (u, mult) in enumerate(units)]


STREAM_ARGS = (Arg("label", choice("r", "w", "rw", "wr", "rwr", "rrw")),
               Arg("lookahead", integer(0, 1 << 20), "frames"),
               Arg("size", integer(0, 1 << 22), "KB"), Arg("bw", number(0.0), "MiB/s"),
               Arg("start", number(0.0), "s"), Arg("run", number(0.001), "s"),
               Arg("mfile", integer(1, 1 << 30), "MB"))

# Globals ---------------------------------------------------------------------------------------
_G = [
    Option("aliasFile", GLOBAL, "file of alias definitions (NAME = tokens ...; '-NAME' expands)",
           (Arg("file", text),), default=None, group="Configuration"),
    Option("baseline", GLOBAL, "run each group alone (same plan), then all together, in each "
           "repetition (-repeat: alone and together alternate); the report adds alone / "
           "together / change per test, ranked by each test's change with its interval",
           default=False, group="Execution"),
    Option("bo", GLOBAL, "print only the bandwidth results (and what says they are not whole: "
           "figures not resolved, an interruption, failures; and -f files the run made or grew)",
           default=False, group="Output"),
    Option("bufferFramesAll", GLOBAL, "-bufferFrames for every stream that sets none",
           (Arg("N", integer(0, 10**6)),), default=None, group="Streams"),
    Option("c", GLOBAL, "configuration file (default Torque.config in the working directory, else "
           "the default workload shipped in the package)",
           (Arg("file", text),), dest="config", default=None, group="Configuration"),
    Option("child", GLOBAL, "run only test process n of the plan (as torque's fork-exec child)",
           (Arg("n", Count),), default=None, group="Execution"),
    Option("csv", GLOBAL, "write one CSV row per test process to FILE ('-': stdout; the text "
           "report then goes to stderr): the report's figures with their units",
           (Arg("file", text),), default=None, group="Output"),
    Option("csvAll", GLOBAL, "with -csv: every scalar of the JSON's test entries, the shared "
           "results record's included (record.*), in columns that stay the same from run to run",
           default=False, group="Output"),
    Option("engine", GLOBAL, "file I/O engine, and -web's requests: auto (sync for a lone test "
           "with one transfer outstanding, else io_uring where available, else threads), uring, "
           "threads, sync (blocking, one transfer at a time)",
           (Arg("name", choice("auto", "uring", "threads", "sync")),),
           default="auto", how=SETTING, group="Files", fio=("ioengine",)),
    Option("example", GLOBAL, "print worked examples", default=False, group="Help", asks=True),
    Option("failLate", GLOBAL, "exit with status 3 when a stream missed its rate (a frame "
           "lost, later than -lateUs and its -bufferFrames allow, or dropped) and nothing else "
           "failed",
           default=False, group="Streams"),
    Option("f", GLOBAL, "add a test file to the file list (at most 128)", (Arg("file", text),),
           dest="files", default=(), group="Files", fio=("filename",)),
    Option("fast", GLOBAL, "each test stops at its own completion (opposite of -slow)",
           dest="slow", const=False, group="Execution"),
    Option("freeSharedMemory", GLOBAL, "remove the shared memory and semaphores a killed run "
           "left (refused while that run is alive)", default=False, group="Execution", asks=True),
    Option("g", GLOBAL, "print every test's PID and wait for Enter before testing starts",
           default=False, group="Execution"),
    Option("h", GLOBAL, "short help: global parameters and actions", dest="help", const="short",
           group="Help"),
    Option("ha", GLOBAL, "help on actions", dest="help", const="actions", group="Help"),
    Option("help", GLOBAL, "all help and the examples", const="all",
           default=None, group="Help", asks=True),
    Option("hg", GLOBAL, "help on global parameters", dest="help", const="global", group="Help",
           asks=True),
    Option("hl", GLOBAL, "help on local parameters", dest="help", const="local", group="Help",
           asks=True),
    Option("json", GLOBAL, "write the results as JSON (torque_async/schema/results.schema.json) "
           "to FILE ('-': stdout; the text report then goes to stderr)", (Arg("file", text),),
           default=None, group="Output", fio=("output", "output-format")),
    Option("nh", GLOBAL, "no header: leave out the header, the latency and the CPU tables",
           default=False, group="Output"),
    Option("noProgress", GLOBAL, "no progress line on a terminal's stderr while testing",
           default=False, group="Output"),
    Option("printAlias", GLOBAL, "print the aliases in effect",
           default=False, group="Help", asks=True),
    Option("quit", GLOBAL, "parse the command line and the config file, show the plan, exit",
           default=False, group="Execution", asks=True),
    Option("rampAll", GLOBAL, "-ramp for every group that sets none", (Arg("seconds", RAMP),),
           default=None, group="Transfers"),
    Option("rankTimeout", GLOBAL, "under mpiexec: seconds a rank waits for every other rank "
           "to start MPI, and, once its run ended, to end theirs; then the job ends, saying "
           "why (exit 1, or by MPI's kill in its start)", (Arg("seconds", number(1, 86400)),),
           default=30.0, group="Execution"),
    Option("repeat", GLOBAL, "run the whole plan n times; the report gives each test's median, "
           "min-max and spread, the JSON every repetition", (Arg("n", integer(1, 1000)),),
           default=1, group="Execution"),
    Option("rtprio", GLOBAL, "run the event loop's thread (streams, file and web tests) "
           "SCHED_FIFO at priority N, its process's memory locked (mlockall), as cyclictest's "
           "-p N -m; refused without the privilege", (Arg("N", integer(1, 99)),),
           default=None, how=SETTING, group="Execution"),
    Option("seed", GLOBAL, "seed of every random choice (default: from the clock, printed)",
           (Arg("n", integer(0, 2**63 - 1)),), default=None, group="Execution", fio=("randseed",)),
    Option("slow", GLOBAL, "keep every test running until the slowest completes "
           "(default with more than one test)", const=True, default=None, group="Execution"),
    Option("smkey", GLOBAL, "shared memory key: the results segment is /torque-async-KEY "
           "(default: the run's pid, so that no two runs share one; under mpiexec -smkey KEY "
           "gives rank r KEY + r)",
           (Arg("key", integer(0, 2**32 - 1)),), default=None, group="Execution"),
    Option("sp", GLOBAL, "single process: the main process runs the one test itself",
           default=False, how=SETTING, group="Execution"),
    Option("tAll", GLOBAL, "-t for every group that sets none (streams keep their runTime)",
           (Arg("seconds", TIME),), default=None, group="Transfers"),
    Option("v", GLOBAL, "verbose (perturbs results)", dest="vl", const=1, how=SETTING,
           group="Output"),
    Option("version", GLOBAL, "print the version", default=False, group="Help", asks=True),
    Option("vl", GLOBAL, "verbose level 1..3", (Arg("n", integer(1, 3)),),
           default=0, how=SETTING, group="Output"),
    Option("allowForeign", GLOBAL, "let -cfiles/-files use a -dir that holds files torque-async "
           "did not make (it still writes only its own)", default=False, group="Files"),
    Option("writeDevices", GLOBAL, "let write tests write to devices (block or character) "
           "named with -f (destroys their data)", default=False, group="Files"),
]

# Locals ----------------------------------------------------------------------------------------
_L = [
    Option("affinityNumber", LOCAL, "pin every process of the group to CPU n", (Arg("n", Cpu),),
           default=None, how=SETTING, applies=EVERY, group="Processes"),
    Option("affinityNumberDiff", LOCAL, "pin process k of the group to CPU n+k",
           (Arg("n", Cpu),), default=None, how=SETTING, applies=EVERY, group="Processes"),
    Option("affinityParent", LOCAL, "give the parent CPU n's affinity while it launches the group",
           (Arg("n", Cpu),), default=None, how=SETTING, applies=SPAWNED, group="Processes"),
    Option("appendEvery", LOCAL, "-web: every k-th request of a client also appends to the log",
           (Arg("k", integer(1, 2**31)),), default=10, applies=WEB, group="Web"),
    Option("appendKB", LOCAL, "-web: an append writes a size uniform in [1 byte, this many KB]",
           (Arg("KB", integer(1, 1 << 20)),), default=16, applies=WEB, group="Web"),
    *_sizes("", "size", "transfer size", MB, TIMED - VIDEO | FILE | WEB,
            fio={"KB": ("bs", "blocksize")}),
    Option("keepLog", LOCAL, "-web: keep the log the clients appended to (torque-web.log under "
           "-dir); without it the run removes the log it made at its end", default=False,
           applies=WEB, group="Web"),
    Option("bufferFrames", LOCAL, "streams: frames the stream's buffer holds: a frame is lost "
           "(and the stream MISSED) only when it completes more than N periods after its "
           "deadline (and -lateUs); one late by less is counted late within buffer (default 0: "
           "every late frame is lost)", (Arg("N", integer(0, 10**6)),), default=None,
           applies=STREAMS, group="Streams"),
    Option("bp", LOCAL, "64-bit memory init patterns 1 and 2", (Arg("p", pattern),),
           dest="bp1", also=(("bp2", SAME),), applies=MEMORY, group="Memory patterns"),
    Option("bp1", LOCAL, "64-bit memory init pattern 1", (Arg("p", pattern),),
           default=0x5555555555555555, applies=MEMORY, group="Memory patterns"),
    Option("bp2", LOCAL, "64-bit memory init pattern 2", (Arg("p", pattern),),
           default=0xAAAAAAAAAAAAAAAA, applies=MEMORY, group="Memory patterns"),
    Option("bpkey", LOCAL, "start each memory buffer with a recognisable key (0/1)",
           (Arg("p", integer(0, 1)),), default=1, how=SETTING, applies=MEMORY,
           group="Memory patterns"),
    Option("bt", LOCAL, "pattern alternation: 0 (1,1,..) 50 (1,1,2,2) 75 100 (1,2,..) "
           "101 (walking one) 102 (random)", (Arg("p", one_of(0, 50, 75, 100, 101, 102)),),
           default=100, applies=MEMORY, group="Memory patterns"),
    Option("btr", LOCAL, "initialise memory buffers with random numbers",
           default=False, applies=MEMORY, group="Memory patterns"),
    Option("cfiles", LOCAL, "create the -files tree before the test (not timed)",
           default=False, applies={"files", "web"}, group="Files"),
    Option("checkpoint", LOCAL, "time the phases of each test process (set-up, barrier, test)",
           default=False, how=SETTING, applies=EVERY, group="Output"),
    Option("dir", LOCAL, "directory of the -files test",
           (Arg("path", text),), default="filestest", applies={"files", "web"}, group="Files"),
    Option("display", LOCAL, "display (EGL device index) used by the video test",
           (Arg("display", text),), default=None, how=SETTING, applies=VIDEO, group="Video"),
    Option("execChild", LOCAL, "exec the child rather than fork it: each worker a new "
           "interpreter, not a fork of the workers' server",
           default=False, how=SETTING, applies=SPAWNED, group="Processes"),
    *_sizes("extraRead", "extraRead", "extra read and seek back after each read", 0, {"r"},
            units=(("B", 1), ("KB", KB), ("MB", MB)), lo=0),
    Option("dropLate", LOCAL, "streams: skip a frame already a whole period past its deadline "
           "(and its -bufferFrames periods) and count it dropped, as a live display does "
           "(default: move every frame, as capture does)", default=False, applies=STREAMS,
           group="Streams"),
    Option("fbc", LOCAL, "turn the file buffer cache on (default off: O_DIRECT)",
           default=False, how=SETTING, applies=FILE | {"streams"}, group="Files",
           fio=("direct",)),
    Option("fps", LOCAL, "streams: frames per second (59.94, 29.97, 23.976 are the NTSC "
           "60000/1001, 30000/1001, 24000/1001); bwMBs is then 0", (Arg("F", checked(parse_rate)),),
           default=None, applies=STREAMS, group="Streams"),
    Option("from", LOCAL, "streams: a wired stage: the stream's first read reads, frame by "
           "frame and never ahead of it, the track that group G's stream (an earlier group of "
           "the same kind, process i's of process i) writes; waiting for it is lateness "
           "inherited from G", (Arg("G", integer(0, 10**6)),), dest="from_group", default=None,
           applies=STREAMS, group="Streams"),
    Option("frame", LOCAL, "streams: frame size WxH in pixels of -pixfmt; sizeKB is then 0",
           (Arg("WxH", checked(parse_frame)),), default=None, applies=STREAMS, group="Streams"),
    Option("i", LOCAL, "iterations; the bandwidth is averaged over all of them",
           (Arg("n", integer(1, 2**31)),), default=10, applies=COUNTED, group="Transfers"),
    Option("IH", LOCAL, "video image height in pixels", (Arg("pixels", integer(1, 16384)),),
           default=480, applies=VIDEO, group="Video"),
    Option("IW", LOCAL, "video image width in pixels", (Arg("pixels", integer(1, 16384)),),
           default=720, applies=VIDEO, group="Video"),
    Option("lateUs", LOCAL, "streams: a frame is late when it completes more than usec after "
           "its deadline", (Arg("usec", integer(0, 10**9)),), default=0, applies=STREAMS,
           group="Streams"),
    Option("linesize", LOCAL, "cache line size: the default stride of -load/-store",
           (Arg("bytes", integer(8, 1 << 16)),), default=None, applies=STRIDED,
           group="Memory patterns"),
    Option("m", LOCAL, "misalign the file test buffers by one byte", default=False,
           applies=FILE | {"streams"}, group="Files"),
    *[Option(f"mfile{u}", LOCAL, f"maximum file size in {what}; transfers past it wrap",
             (Arg("n", integer(1, 2**40, mult), scale=mult),), dest="mfile",
             also=(("mfileXfer", None),), default=None if u == "4K" else UNSET,
             applies=FILE | WEB, group="Files", fio=("size",) if u == "MB" else ())
      for u, mult, what in (("4K", 4 * KB, "4 KB blocks"), ("KB", KB, "KBytes"),
                            ("MB", MB, "MBytes"), ("GB", GB, "GBytes"))],
    Option("mfileXfer", LOCAL, "maximum file size in transfers", (Arg("n", integer(1, 2**40)),),
           also=(("mfile", None),), default=None, applies=FILE | WEB, group="Files"),
    Option("n", LOCAL, "number of transfers per iteration", (Arg("n", integer(1, 2**40)),),
           default=64, applies=COUNTED, group="Transfers"),
    Option("noResetParentAffinity", LOCAL, "leave the parent's affinity as -affinityParent set it",
           default=False, how=SETTING, applies=SPAWNED, group="Processes"),
    Option("noVideoInitLoops", LOCAL, "no untimed video warm-up transfers",
           default=False, how=SETTING, applies=VIDEO, group="Video"),
    *_sizes("offset", "offset", "start transfers at this offset", 0, MEMORY | STREAM | PLACED,
            units=(("B", 1), ("KB", KB), ("MB", MB)), lo=0),
    Option("p", LOCAL, "number of processes running this test at once",
           (Arg("n", integer(1, 1024)),), default=1, how=SETTING, applies=EVERY,
           group="Processes", fio=("numjobs",)),
    Option("percR", LOCAL, "percentage of reads for -rand, -aio, -files",
           (Arg("p", integer(0, 100)),), default=100, applies={"rand", "aio", "files"},
           group="Files", fio=("rwmixread",)),
    Option("pixfmt", LOCAL, "streams: pixel format of -frame: " + ", ".join(FORMATS),
           (Arg("name", choice(*FORMATS)),), default=None, applies=STREAMS, group="Streams"),
    Option("ramp", LOCAL, "run unmeasured transfers this long first (fio's ramp_time; "
           "under -t, part of its time)", (Arg("seconds", RAMP),), default=None, applies=COUNTED,
           group="Transfers", fio=("ramp_time",)),
    Option("s", LOCAL, "index in the -f list of this test's first file (default: the test's "
           "number; process k uses s+k)", (Arg("n", Count),), default=None,
           applies=LISTED | {"streams"}, group="Files"),
    Option("sa", LOCAL, "as -sample, showing only the bandwidth columns", (Arg("k", Count),),
           dest="sample", also=(("sa", True),), how=SETTING, applies=EVERY - WEB, group="Output"),
    Option("sample", LOCAL, "time-stamp a sample every k+1 transfers (at most 1024)",
           (Arg("k", Count),), default=None, how=SETTING, applies=EVERY - WEB, group="Output"),
    Option("sleepEnd", LOCAL, "sleep n seconds after the test, before the process exits",
           (Arg("n", integer(0, 86400)),), default=0, how=SETTING, applies=EVERY,
           group="Processes"),
    Option("stride", LOCAL, "stride of -load/-store in bytes (default: the cache line size)",
           (Arg("bytes", integer(8, 2**30)),), default=None, applies=STRIDED,
           group="Memory patterns"),
    Option("t", LOCAL, "run for this long (measuring every transfer made) instead of n x i "
           "transfers (fio's runtime with time_based)", (Arg("seconds", TIME),),
           default=None, applies=COUNTED, group="Transfers", fio=("runtime", "time_based")),
    Option("T", LOCAL, "throttle: add this delay in microseconds to every transfer",
           (Arg("usec", integer(0, 10**9)),), default=0, applies=TIMED | FILE | WEB,
           group="Transfers"),
    Option("touch", LOCAL, "after each read, touch one word of the buffer",
           default=False, applies=READS, group="Files"),
    Option("touch4K", LOCAL, "after each read, touch one word per 4 KB",
           default=False, applies=READS, group="Files"),
    *_sizes("vector", "vector", "seek this far after each file transfer", 0, LISTED,
            units=(("B", 1), ("KB", KB), ("MB", MB)), lo=0),
    Option("webFiles", LOCAL, "-web: files in the tree under -dir", (Arg("n", integer(1, 10**7)),),
           default=1000, applies=WEB, group="Web"),
    Option("webMeanKB", LOCAL, "-web: mean file size of the tree in KB",
           (Arg("KB", integer(1, 1 << 30)),), default=16, applies=WEB, group="Web"),
    Option("webOpen", LOCAL, "-web: at most n files open at once, shared by the group's clients "
           "(fio's openfiles; 0: no cap, each client holds at most one)",
           (Arg("n", integer(0, 1 << 20)),), default=0, applies=WEB, group="Web"),
    Option("webShape", LOCAL, "-web: shape of the gamma law of file sizes",
           (Arg("k", number(0.01, 1000.0)),), default=1.5, applies=WEB, group="Web"),
    Option("webSizes", LOCAL, "-web: law of the file sizes: fixed (all the mean), uniform "
           "(1 byte .. twice the mean) or gamma (-webShape); capped by -mfile*",
           (Arg("law", choice("fixed", "uniform", "gamma")),), default="gamma", applies=WEB,
           group="Web"),
    Option("webWidth", LOCAL, "-web: mean directory width of the tree (gamma, shape 1.5)",
           (Arg("n", integer(1, 10**6)),), default=20, applies=WEB, group="Web"),
    Option("wire", LOCAL, "lock (wire) the test's buffers in memory (mlock)",
           default=False, how=SETTING, applies=TIMED | FILE | STREAMS, group="Processes"),
    Option("zipf", LOCAL, "-web: pick files by popularity, P(rank r) ~ 1/r^theta (fio's "
           "zipf:theta; default: uniform picks)", (Arg("theta", number(0.0, 100.0)),),
           default=None, applies=WEB, group="Web"),
]

# Actions ---------------------------------------------------------------------------------------
_A = [
    Option("aio", ACTION, "keep n asynchronous transfers outstanding (-percR mix)",
           (Arg("n", integer(1, 1024)),), group="File"),
    Option("bcopy", ACTION, "memory copy (system bandwidth counts read + write)", group="Memory"),
    Option("bzero", ACTION, "memory zeroing", group="Memory"),
    Option("cyclic", ACTION, "cyclictest-style wake-up lateness every usec beside the other "
           "tests (at least n x i wake-ups)", (Arg("usec", integer(1, 10**7)),), group="CPU"),
    Option("files", ACTION, "web-server simulation: random transfers to n files under -dir",
           (Arg("n", integer(1, 10**7)),), group="File"),
    Option("load", ACTION, "one integer load per cache line (or -stride)", group="Memory"),
    Option("ls", ACTION, "bursts of loads then stores; the burst is the transfer size",
           group="Memory"),
    Option("memStreams", ACTION, "rate-paced streams on system memory (see -streams)",
           STREAM_ARGS, group="Streams"),
    Option("r", ACTION, "sequential file read", group="File"),
    Option("rand", ACTION, "random transfers in a file (-percR reads)", group="File"),
    Option("rmw", ACTION, "read a transfer, modify it, write it back", group="File"),
    Option("rw", ACTION, "read a transfer, write the next location, alternate", group="File"),
    Option("Sadd", ACTION, "STREAM Add: c = a + b", group="STREAM"),
    Option("scan", ACTION, "equally spaced reads across a whole disk or file (wired buffers)",
           (Arg("file", text),), group="File"),
    Option("scanfile", ACTION, "as -scan through the ordinary file interface",
           (Arg("file", text),), group="File"),
    Option("Scopy", ACTION, "STREAM Copy: c = a", group="STREAM"),
    Option("spinWait", ACTION, "random-number loop keeping a CPU busy; reports loops/s",
           group="CPU"),
    Option("Sscale", ACTION, "STREAM Scale: b = scalar * c", group="STREAM"),
    Option("store", ACTION, "one integer store per cache line (or -stride)", group="Memory"),
    Option("streams", ACTION, "rate-paced HDTV streams on files: label (r w rw wr rwr rrw: "
           "sub-streams), frames read ahead, frame size, MiB/s per sub-stream, start and run "
           "time, file size", STREAM_ARGS, group="Streams"),
    Option("Striad", ACTION, "STREAM Triad: a = b + scalar * c", group="STREAM"),
    Option("V", ACTION, "video test n (1..12)", (Arg("n", integer(1, 12)),), group="Video"),
    Option("w", ACTION, "sequential file write", group="File"),
    Option("web", ACTION, "web server: each process a client requesting whole files of the "
           "-dir tree (-webFiles, -zipf), appending to a log every -appendEvery requests",
           group="File"),
]

OPTIONS: dict[str, Option] = {o.name: o for o in (*_G, *_L, *_A)}
if len(OPTIONS) != len(_G) + len(_L) + len(_A):        # a real raise: python -O keeps it
    raise TypeError("the option table names an option twice")
ASKING = frozenset(o.field for o in OPTIONS.values() if o.asks)   # the fields they set

FIO_NAMES = {said: o.name for o in OPTIONS.values() for said in o.fio}   # fio's name: option
FIO_SAYS = {"iodepth": "-aio N keeps N sequential transfers outstanding; N random ones at once "
                       "are -p N processes of -rand on one file, the file named once per process"}
if len(FIO_NAMES) != sum(len(o.fio) for o in OPTIONS.values()):
    raise TypeError("the option table gives one fio name to two options")

# Fields that only another option's `also` writes, with their defaults (-sa's sa).
ALSO_DEFAULTS: dict[str, Any] = {"sa": False}


def defaults(options: list[Option]) -> dict[str, Any]:
    """The default of each field the options write, in the table's order; TypeError unless
    each field gets exactly one (from its options or ALSO_DEFAULTS)."""
    out: dict[str, Any] = {}
    written = {o.field for o in options}
    for o in options:
        if o.default is not UNSET:
            if o.field in out:
                raise TypeError(f"-{o.name} declares a second default of {o.field}")
            out[o.field] = o.default
        for extra, _ in o.also:
            if extra in ALSO_DEFAULTS:
                if extra in written:
                    raise TypeError(f"{extra} has a default in the table and in ALSO_DEFAULTS")
                out[extra] = ALSO_DEFAULTS[extra]
    missing = {f for o in options for f in (o.field, *(e for e, _ in o.also))} - set(out)
    if missing:
        raise TypeError(f"no option declares the default of {', '.join(sorted(missing))}")
    return out


# The records' defaults (a field's default is documented in -help).
GLOBAL_DEFAULTS: dict[str, Any] = defaults(_G)
LOCAL_DEFAULTS: dict[str, Any] = defaults(_L)
if set(ALSO_DEFAULTS) - set(GLOBAL_DEFAULTS) - set(LOCAL_DEFAULTS):
    raise TypeError("ALSO_DEFAULTS names a field no option's `also` writes")
if any(o.default is not UNSET for o in _A):
    raise TypeError("an action declares a default: its arguments have none")


def settings(options: list[Option], scope: str = LOCAL) -> frozenset[str]:
    """The fields of `scope`'s options that say how the tests run, not what they do (Option.how
    SETTING: a local one's test is the same test, a global one's run the same plan, made
    differently); TypeError for a how not in HOW_KINDS, on an action, or differing between a
    field's options."""
    kinds: dict[str, str] = {}
    mine = set()
    for o in options:
        if o.how not in HOW_KINDS or (o.scope == ACTION and o.how != WORK):
            raise TypeError(f"-{o.name} says how={o.how!r}: an option's is one of "
                            f"{', '.join(HOW_KINDS)}, an action's {WORK}")
        for f in (o.field, *(extra for extra, _ in o.also)):
            if kinds.setdefault(f, o.how) != o.how:
                raise TypeError(f"-{o.name} makes {f} a {o.how}, another option a {kinds[f]}")
            mine |= {f} if o.scope == scope else set()
    return frozenset(f for f in mine if kinds[f] == SETTING)


SETTINGS = settings(list(OPTIONS.values()))          # compare.HOW
RUN_SETTINGS = settings(list(OPTIONS.values()), GLOBAL)   # compare's note on runs made otherwise


def check_applies(options: list[Option]) -> None:
    """TypeError unless every local option, and no other, applies to actions of the table, the
    same ones as the other options writing its field, and action_sets.EVERY names every action."""
    actions = {o.name for o in options if o.scope == ACTION}
    if actions - EVERY:
        raise TypeError(f"action_sets.EVERY lacks {', '.join(sorted(actions - EVERY))}")
    taken: dict[str, frozenset[str]] = {}
    for o in options:
        if (o.scope == LOCAL) != bool(o.applies):
            raise TypeError(f"-{o.name} is {o.scope}: only a local option applies to actions, "
                            f"each to at least one")
        if o.applies - actions:
            raise TypeError(f"-{o.name} applies to {', '.join(sorted(o.applies - actions))}: "
                            f"not an action")
        if taken.setdefault(o.field, o.applies) != o.applies:
            raise TypeError(f"-{o.name} applies to other actions than another option writing "
                            f"{o.field}")


check_applies(list(OPTIONS.values()))


def _record(name: str, values: dict[str, Any]) -> type:
    """A frozen, picklable record with one field per option destination, defaults included."""
    cls = make_dataclass(name, [(k, Any, field(default=v)) for k, v in values.items()],
                         frozen=True)
    cls.__module__ = __name__
    return cls


Globals = _record("Globals", GLOBAL_DEFAULTS)
Locals = _record("Locals", LOCAL_DEFAULTS)


def default_text(opt: Option) -> str:
    """The default of an option's field as help shows it, in the option's unit ('' for none)."""
    value = {**GLOBAL_DEFAULTS, **LOCAL_DEFAULTS}.get(opt.field)
    if not opt.args or isinstance(value, bool) or value in (None, (), 0):
        return ""
    if opt.field in ("bp1", "bp2", "smkey"):
        return hex(value)
    scale = opt.args[0].scale
    if not isinstance(value, int) or value % scale == 0:
        return str(value if scale == 1 else value // scale)
    return next(f"{value // mult} {unit}" for unit, mult in (("GB", GB), ("MB", MB), ("KB", KB),
                                                             ("bytes", 1)) if value % mult == 0)
