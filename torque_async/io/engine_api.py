"""The I/O engine's interface: what every backend (engine.py, uring.py) offers the file tests.

    ids = engine.register(views)                  each buffer once, before the barrier
    t = await engine.submit(write, fd, id, offset)  one transfer; t = its completion (monotonic ns)
    await engine.pause(until)                     -T: wait until that monotonic ns
    await engine.drive(lanes)                     run the test's lanes (coroutines) to their end
    t = await engine.transfer(write, fd, id, offset)  one transfer from any coroutine (streams)
    record = engine.serial(meter.record)          what lanes share, made safe to call from each
    await engine.forget(ids); engine.close()      after the test

A transfer moves exactly the registered buffer's length, or submit raises OSError. A test runs
as `lanes`: coroutines that each keep one transfer outstanding, awaiting only the engine's
submit and pause (which only lanes run by drive() may await), so the same lane code runs on
every backend.
The paced streams are not lanes (they await their gates and the precise timer): they move each
frame with `transfer`, which any coroutine may await.
"""
from __future__ import annotations

import time
from typing import Awaitable, Callable, Coroutine, Protocol

NAMES = {"uring": "io_uring", "threads": "threads", "sync": "sync"}
YIELD_NS = 1_000_000               # blocking transfers give the loop a turn at least this often
now = time.monotonic_ns


class Engine(Protocol):
    name: str

    def register(self, views: list[memoryview]) -> list[int]: ...
    def submit(self, write: bool, fd: int, buf: int, offset: int) -> Awaitable[int]: ...
    def pause(self, until: int) -> Awaitable[None]: ...
    def transfer(self, write: bool, fd: int, buf: int, offset: int) -> Awaitable[int]: ...
    def serial(self, fn: Callable) -> Callable: ...
    async def drive(self, lanes: list[Coroutine]) -> None: ...
    def ready(self, count: int) -> None: ...        # at set-up: drive() will run count lanes
    async def forget(self, ids: list[int]) -> None: ...
    def close(self) -> None: ...


def short(write: bool, offset: int, done: int, size: int) -> OSError:
    """A transfer that moved fewer bytes than asked; its strerror leaves out the place, which
    whoever names the file names too (FileTest.failed)."""
    what = f"{'wrote' if write else 'read'} {done} of {size} bytes" + \
        ("" if write else " (past the end of the file?)")
    e = OSError(f"a transfer at byte {offset} {what}")
    e.strerror = f"only {what}"
    return e
