"""What each action runs: one registration per test kind, checked when registered.

A kind names its report label, its family, where it runs (a spawned worker process for the
CPU-bound tests, a coroutine on the event loop for I/O) and the class that implements it, as
"module:attribute" so the core never imports numpy kernels or OpenGL.
"""
from __future__ import annotations

from dataclasses import dataclass

from .options import ACTION, OPTIONS

WORKER, LOOP = "worker", "loop"


@dataclass(frozen=True)
class Kind:
    action: str
    label: str                    # the Test column and the BW: line
    family: str
    runs_in: str                  # WORKER or LOOP
    impl: str                     # "module:Class" implementing the test
    buffers: int = 0              # buffers of n x transfer size each process allocates
    check: str | None = None      # "module:function"(plan, group) raising UsageError
    grouped: bool = False         # reported per group: per-process rows only with -v

    def load(self):
        """The class implementing the test."""
        return resolve(self.impl)


def resolve(name: str):
    """The attribute a "module:attribute" name stands for, importing its module."""
    module, attr = name.split(":")
    return getattr(__import__(module, fromlist=[attr]), attr)


KINDS: dict[str, Kind] = {}


def register(*kinds: Kind) -> None:
    for k in kinds:
        assert OPTIONS.get(k.action) and OPTIONS[k.action].scope == ACTION, k.action
        assert k.runs_in in (WORKER, LOOP) and k.action not in KINDS, k.action
        assert ":" in k.impl, k.action
        assert k.check is None or ":" in k.check, k.action
        KINDS[k.action] = k


_M, _S = "workers.memory:", "workers.stream_kernels:"
_ST = "torque_async.streams.stream:"
_F, _FC = "torque_async.io.filetest:FileTest", "torque_async.io.plancheck:check_group"
register(
    Kind("bcopy", "Bcopy", "memory", WORKER, _M + "BcopyTest", buffers=2),
    Kind("bzero", "Bzero", "memory", WORKER, _M + "BzeroTest", buffers=1),
    Kind("load", "Load", "memory", WORKER, _M + "LoadTest", buffers=1),
    Kind("store", "Store", "memory", WORKER, _M + "StoreTest", buffers=1),
    Kind("ls", "LoadStore", "memory", WORKER, _M + "LsTest", buffers=1),
    Kind("Scopy", "SCopy", "STREAM", WORKER, _S + "Scopy", buffers=3),
    Kind("Sscale", "SScale", "STREAM", WORKER, _S + "Sscale", buffers=3),
    Kind("Sadd", "SAdd", "STREAM", WORKER, _S + "Sadd", buffers=3),
    Kind("Striad", "STriad", "STREAM", WORKER, _S + "Striad", buffers=3),
    Kind("spinWait", "SpinWait", "cpu", WORKER, "workers.spin:SpinTest"),
    Kind("V", "Video", "video", WORKER, "workers.video:VideoTest"),
    *(Kind(a, label, "file", LOOP, _F, check=_FC) for a, label in (   # actions.SPECS: what each does
        ("r", "Read"), ("w", "Write"), ("rand", "Random"), ("rmw", "RdModWr"), ("rw", "RdWr"),
        ("scan", "Scan"), ("scanfile", "ScanFile"), ("aio", "AIO"), ("files", "Files"))),
    Kind("streams", "Streams", "streams", LOOP, _ST + "StreamTest", check=_ST + "check_group"),
    Kind("memStreams", "MemStreams", "streams", LOOP, _ST + "MemStreamTest",
         check=_ST + "check_group"),
    Kind("cyclic", "Cyclic", "timer", WORKER, "workers.cyclic:CyclicTest"),
    Kind("web", "Web", "web", LOOP, "torque_async.web.client:WebTest",
         check="torque_async.web.check:check_group", grouped=True),
)
assert set(KINDS) == {n for n, o in OPTIONS.items() if o.scope == ACTION}, "an action has no kind"
