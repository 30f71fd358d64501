"""Which local options each action honours; the scanner refuses every other one before it.

A local option changes the test of the action after it, so one that the test would ignore is
an error, named with both (exit 2), never a silent no-op. The table is by option field (what
options.py writes: -B/-KB/-MB/-GB all set `size`), decided against the man page:

    every test      -p, -affinityNumber(Diff), -checkpoint, -sample/-sa, -sleepEnd
    counted tests   -n, -i, -t, -ramp: all but streams, whose length is their runTime argument
    spawned tests   -affinityParent, -noResetParentAffinity, -execChild (loop tests launch
                    nothing: they are coroutines of the main process)
    -T              tests that time transfers one by one: not streams (paced by their bandwidth)
                    nor -cyclic (paced by its interval)
    sizes           memory, STREAM, spinWait and file tests (a stream's frame size is its sizeKB
                    argument or -frame/-pixfmt, a video transfer is IH x IW x 4)
    frame units     -fps -frame -pixfmt -lateUs -dropLate: streams
    -offset*        "a file or buffer": file, memory and STREAM tests
    patterns        -bp -bp1 -bp2 -bt -btr -bpkey: memory tests (STREAM's arrays hold the
                    values its validation needs)
    file options    as each file action uses them (io/actions.py Spec)
    -web            its own options, the tree's (-dir -cfiles -mfile*), -T; not -sample/-sa
                    (requests differ in size, so a sample's bandwidth would not be its bytes)
"""
from __future__ import annotations

from .kinds import KINDS
from .options import LOCAL, OPTIONS

EVERY = frozenset({"p", "affinityNumber", "affinityNumberDiff", "checkpoint", "sample",
                   "sleepEnd"})
COUNTED = frozenset({"n", "i", "t", "ramp"})
SPAWNED = frozenset({"affinityParent", "noResetParentAffinity", "execChild"})
PATTERNS = frozenset({"bp1", "bp2", "bpkey", "bt", "btr"})
WORKER = EVERY | COUNTED | SPAWNED
TIMED = WORKER | {"T", "wire"}
MEMORY = TIMED | {"size", "offset"} | PATTERNS
STRIDED = MEMORY | {"stride", "linesize"}
FILE = EVERY | COUNTED | {"size", "T", "wire", "fbc", "m", "mfile", "mfileXfer"}
READS = {"touch", "touch4K"}
PLACED = {"offset"}                        # on a lattice from -offset (not a -files tree)
LISTED = {"s", "vector"} | PLACED          # a file from the -f list, transfers spaced by -vector
STREAMS = EVERY | {"wire", "fps", "frame", "pixfmt", "lateUs", "dropLate"}

APPLIES: dict[str, frozenset[str]] = {
    "bcopy": MEMORY, "bzero": MEMORY, "load": STRIDED, "store": STRIDED, "ls": STRIDED,
    "Scopy": TIMED | {"size", "offset"}, "Sscale": TIMED | {"size", "offset"},
    "Sadd": TIMED | {"size", "offset"}, "Striad": TIMED | {"size", "offset"},
    "spinWait": TIMED | {"size"},
    "V": TIMED | {"IH", "IW", "display", "noVideoInitLoops"},
    "cyclic": WORKER,
    "r": FILE | LISTED | READS | {"extraRead"},
    "w": FILE | LISTED,
    "rand": FILE | LISTED | READS | {"percR"},
    "rmw": FILE | LISTED | READS,
    "rw": FILE | LISTED | READS,
    "scan": FILE | READS | PLACED,
    "scanfile": FILE | READS | PLACED,
    "aio": FILE | LISTED | READS | {"percR"},
    "files": FILE | READS | {"percR", "cfiles", "dir"},
    "streams": STREAMS | {"fbc", "m", "s"},
    "memStreams": STREAMS,
    "web": EVERY - {"sample"} | COUNTED | {"size", "T", "mfile", "mfileXfer", "cfiles", "dir",
                                         "appendEvery", "appendKB", "webFiles", "webMeanKB",
                                         "webOpen", "webShape", "webSizes", "webWidth", "zipf",
                                         "keepLog"},
}

LOCAL_FIELDS = {o.field for o in OPTIONS.values() if o.scope == LOCAL}


def check_table() -> None:
    """Every action has an entry naming only real local fields; every field applies somewhere."""
    missing = {n for n, o in OPTIONS.items() if o.scope == "action"} - set(APPLIES)
    if missing:
        raise TypeError(f"applies.APPLIES has no entry for the action(s) {sorted(missing)}")
    unknown = set().union(*APPLIES.values()) - LOCAL_FIELDS
    if unknown:
        raise TypeError(f"applies.APPLIES names fields no local option writes: {sorted(unknown)}")
    unused = LOCAL_FIELDS - set().union(*APPLIES.values())
    if unused:
        raise TypeError(f"local options that apply to no action: {sorted(unused)}")


check_table()


def field_of(name: str) -> str:
    """The field a local option writes (-sa writes sample, -bp bp1: as -sample and -bp1)."""
    return OPTIONS[name].field


def applies(option: str, action: str) -> bool:
    return field_of(option) in APPLIES[action]


# Why an option a man-page reader expects everywhere is refused where it is.
WHY = {"T": "a stream is paced by its bandwidth, -cyclic by its interval",
       "size": "a stream's frame size is its sizeKB argument, a video transfer IH x IW x 4, "
               "-cyclic moves nothing",
       **dict.fromkeys(("n", "i", "t", "ramp"), "a stream runs for its runTime argument"),
       "bp1": "STREAM's arrays hold the values its validation needs",
       "affinityParent": "loop tests are coroutines of the main process: nothing is launched",
       "sample": "-web's requests differ in size: a sample's bandwidth would not be its bytes"}


def takers(field: str) -> str:
    """The actions a field applies to, a whole family named once (memory, file, ...)."""
    if all(field in fields for fields in APPLIES.values()):
        return "every test"
    families: dict[str, list[str]] = {}
    for action, kind in KINDS.items():
        families.setdefault(kind.family, []).append(action)
    parts = []
    for family, actions in families.items():
        taking = [a for a in actions if field in APPLIES[a]]
        if len(taking) == len(actions) and len(actions) > 1:
            parts.append(f"{family} tests")
        else:
            parts += [f"-{a}" for a in taking]
    return ", ".join(parts)


def refusal(option: str, action: str) -> str:
    """Why -option cannot stand before -action: what it does apply to (and why not here)."""
    field = field_of(option)
    why = WHY.get(field, "")
    return f"-{option} does not apply to -{action}" + (f" ({why})" if why else "") + \
        f"; it applies to {takers(field)}"


def lines() -> list[str]:
    """The decisions, one line per local option in the table's order (docs/options.md, -help)."""
    return [f"  -{name:<22}{takers(o.field)}" for name, o in OPTIONS.items() if o.scope == LOCAL]
