"""What each action runs: one registration per test kind, checked when registered.

A kind names its report label, its family, the class that implements it ("module:attribute",
so the core never imports numpy kernels or OpenGL) and what it needs from the driver: the
event loop (else it runs in a spawned worker), files, an idle-rate calibration, a measuring
loop of its own, a GL context. The drivers read these declarations; they never probe a test.
"""
from __future__ import annotations

from dataclasses import dataclass

from .options import ACTION, OPTIONS

WORKER, LOOP = "worker", "loop"
# The worker process's entry points, by name: the one place the core names workers/ (the
# kinds' implementations below are the others); the core never imports it.
WORKER_ENTRY = "workers.entry"
WORKER_MAIN, WORKER_PROCESS = WORKER_ENTRY + ":main", WORKER_ENTRY + ":process_main"
# what a kind may need (Kind.needs)
FILES = "files"                # opens files (-f, scratch files): a loop test
CALIBRATION = "calibration"    # its idle loop rate is measured alone before the start: a worker
                               # test with ops_per_transfer (the ops it reports per transfer)
OWN_LOOP = "own loop"          # times itself: test.measure(meter, local) replaces the driver's loop
GL = "GL context"              # opens an OpenGL context: a worker (one context per process)
NEEDS = {LOOP, FILES, CALIBRATION, OWN_LOOP, GL}
WORKER_ONLY = {CALIBRATION, OWN_LOOP, GL}


class RegistrationError(Exception):
    """A kind whose declaration is inconsistent (raised at import, whatever python -O says)."""


@dataclass(frozen=True)
class Kind:
    action: str
    label: str                    # the Test column and the BW: line
    family: str
    impl: str                     # "module:Class" implementing the test
    needs: frozenset[str] = frozenset()   # from NEEDS; LOOP in it: a coroutine on the event loop
    working_sets: int = 0         # arrays of n x transfer size each process allocates
    check: str | None = None      # "module:function"(plan, group) raising UsageError
    grouped: bool = False         # reported per group: per-process rows only with -v
    measures: str | None = None   # "module:function"(group): transfers each process measures,
                                  # when its arguments say (streams), not n x i

    @property
    def runs_in(self) -> str:
        return LOOP if LOOP in self.needs else WORKER

    def goal(self, group) -> int:
        """How many transfers (wake-ups, frames) each process of the group measures."""
        return resolve(self.measures)(group) if self.measures else group.local.n * group.local.i

    def load(self):
        """The class implementing the test, with the method its driver calls."""
        cls = resolve(self.impl)
        method = "run" if LOOP in self.needs else "measure" if OWN_LOOP in self.needs else "transfer"
        if not callable(getattr(cls, method, None)):
            raise RegistrationError(f"-{self.action}: {self.impl} has no {method}() for its driver")
        return cls


def resolve(name: str):
    """The attribute a "module:attribute" name stands for, importing its module."""
    module, attr = name.split(":")
    return getattr(__import__(module, fromlist=[attr]), attr)


KINDS: dict[str, Kind] = {}


def register(*kinds: Kind) -> None:
    for k in kinds:
        problem = problem_with(k)
        if problem:
            raise RegistrationError(f"kind -{k.action}: {problem}")
        KINDS[k.action] = k


def problem_with(k: Kind) -> str:
    """What is wrong with a kind's declaration ('' when nothing)."""
    option = OPTIONS.get(k.action)
    if option is None or option.scope != ACTION:
        return "no action option of that name"
    if k.action in KINDS:
        return "registered twice"
    if any(name is not None and ":" not in name for name in (k.impl, k.check, k.measures)):
        return "implementation and check are 'module:attribute' names"
    if k.needs - NEEDS:
        return f"unknown needs {sorted(k.needs - NEEDS)}"
    if LOOP in k.needs and k.needs & WORKER_ONLY:
        return f"{sorted(k.needs & WORKER_ONLY)} need a worker process, not the event loop"
    if FILES in k.needs and LOOP not in k.needs:
        return "file tests run on the event loop"
    if {CALIBRATION, OWN_LOOP} <= k.needs:
        return "calibration measures the driver's transfer loop, which an own loop replaces"
    return ""


_M, _S = "workers.memory:", "workers.stream_kernels:"
_ST = "torque_async.streams.stream:"
_WORDS = "torque_async.validate:whole_words"      # loads, stores and STREAM move 8-byte words
_F, _FC = "torque_async.io.filetest:FileTest", "torque_async.io.plancheck:check_group"
_ON_LOOP, _WITH_FILES = frozenset({LOOP}), frozenset({LOOP, FILES})
register(
    Kind("bcopy", "Bcopy", "memory", _M + "BcopyTest", working_sets=2),
    Kind("bzero", "Bzero", "memory", _M + "BzeroTest", working_sets=1),
    Kind("load", "Load", "memory", _M + "LoadTest", working_sets=1, check=_WORDS),
    Kind("store", "Store", "memory", _M + "StoreTest", working_sets=1, check=_WORDS),
    Kind("ls", "LoadStore", "memory", _M + "LsTest", working_sets=1, check=_WORDS),
    Kind("Scopy", "SCopy", "STREAM", _S + "Scopy", working_sets=3, check=_WORDS),
    Kind("Sscale", "SScale", "STREAM", _S + "Sscale", working_sets=3, check=_WORDS),
    Kind("Sadd", "SAdd", "STREAM", _S + "Sadd", working_sets=3, check=_WORDS),
    Kind("Striad", "STriad", "STREAM", _S + "Striad", working_sets=3, check=_WORDS),
    Kind("spinWait", "SpinWait", "cpu", "workers.spin:SpinTest", frozenset({CALIBRATION}),
         check=_WORDS),
    Kind("V", "Video", "video", "workers.video:VideoTest", frozenset({GL})),
    *(Kind(a, label, "file", _F, _WITH_FILES, check=_FC) for a, label in (   # actions.SPECS
        ("r", "Read"), ("w", "Write"), ("rand", "Random"), ("rmw", "RdModWr"), ("rw", "RdWr"),
        ("scan", "Scan"), ("scanfile", "ScanFile"), ("aio", "AIO"), ("files", "Files"))),
    Kind("streams", "Streams", "streams", _ST + "StreamTest", _WITH_FILES,
         check=_ST + "check_group", measures=_ST + "measured_transfers"),
    Kind("memStreams", "MemStreams", "streams", _ST + "MemStreamTest", _ON_LOOP,
         check=_ST + "check_group", measures=_ST + "measured_transfers"),
    Kind("cyclic", "Cyclic", "timer", "workers.cyclic:CyclicTest", frozenset({OWN_LOOP})),
    Kind("web", "Web", "web", "torque_async.web.client:WebTest", _WITH_FILES,
         check="torque_async.web.check:check_group", grouped=True),
)
if set(KINDS) != {n for n, o in OPTIONS.items() if o.scope == ACTION}:
    raise RegistrationError("actions without a kind: " + " ".join(
        sorted({n for n, o in OPTIONS.items() if o.scope == ACTION} - set(KINDS))))
