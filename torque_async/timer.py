"""Precise timers: absolute CLOCK_MONOTONIC deadlines with microsecond-grade wake-ups.

The event loop's own timers are quantised to a millisecond (uvloop's call_at is on average
about half a millisecond late). `PreciseTimer` gives the loop a better source: one timerfd
armed at the earliest pending deadline (TFD_TIMER_ABSTIME, no timer slack), watched with
`loop.add_reader`; when it fires, every due sleeper is woken. `sleep_until` is the same for a
plain thread: clock_nanosleep(TIMER_ABSTIME), as cyclictest sleeps. Python 3.11 has neither
call, so both go through ctypes, with their argument structures made once. asyncio is imported
where the loop's timer needs it: spawned workers use the plain-thread sleeps alone.
"""
from __future__ import annotations

import ctypes
import errno
import heapq
import itertools
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

CLOCK_MONOTONIC = 1
TIMER_ABSTIME = TFD_TIMER_ABSTIME = 1
TFD_NONBLOCK, TFD_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
SLICE_NS = 50_000_000              # a long wait given a stop flag looks at it this often

now = time.monotonic_ns


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", Timespec), ("it_value", Timespec)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.timerfd_create.argtypes = (ctypes.c_int, ctypes.c_int)
_libc.timerfd_settime.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(Itimerspec),
                                  ctypes.c_void_p)
_libc.clock_nanosleep.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(Timespec),
                                  ctypes.c_void_p)


def _failed(call: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}")


class PreciseTimer:
    """Sleeps until absolute monotonic times on one loop, through one timerfd."""
    _shared: "PreciseTimer | None" = None

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        import asyncio
        self.loop = loop or asyncio.get_running_loop()
        self.fd = _libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if self.fd < 0:
            raise _failed("timerfd_create")
        self.spec = Itimerspec()
        self.spec_ref = ctypes.byref(self.spec)
        self.sleepers: list[tuple[int, int, asyncio.Future]] = []   # (deadline, order, future)
        self.order = itertools.count()
        self.armed = 0                     # deadline the timerfd is set to (0: none)
        self.users = 1
        self.loop.add_reader(self.fd, self._fire)

    @classmethod
    def shared(cls) -> "PreciseTimer":
        """The running loop's one timer, made on first use: every stream on the loop sleeps on
        the same timerfd. Each user closes it once; the last close closes it."""
        import asyncio
        timer = cls._shared
        if timer is None or timer.fd < 0 or timer.loop is not asyncio.get_running_loop():
            cls._shared = cls()
        else:
            timer.users += 1
        return cls._shared

    def sleep_until(self, deadline: int) -> asyncio.Future:
        """A future resolved with the wake-up time once monotonic_ns() >= deadline."""
        future = self.loop.create_future()
        t = now()
        if deadline <= t:
            future.set_result(t)
            return future
        heapq.heappush(self.sleepers, (deadline, next(self.order), future))
        if not self.armed or deadline < self.armed:
            self._arm(deadline)
        return future

    def _arm(self, deadline: int) -> None:
        value = self.spec.it_value
        value.tv_sec, value.tv_nsec = divmod(deadline, 1_000_000_000)
        if _libc.timerfd_settime(self.fd, TFD_TIMER_ABSTIME, self.spec_ref, None) < 0:
            raise _failed("timerfd_settime")
        self.armed = deadline

    def _fire(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:            # re-armed after it expired: nothing to read
            pass
        t = now()
        sleepers = self.sleepers
        while sleepers and sleepers[0][0] <= t:
            future = heapq.heappop(sleepers)[2]
            if not future.done():
                future.set_result(t)
        self.armed = 0
        if sleepers:
            self._arm(sleepers[0][0])

    def close(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        for _, _, future in self.sleepers:
            future.cancel()
        self.sleepers.clear()


class Sleeper:
    """clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) for one thread, its timespec made once."""

    def __init__(self):
        self.spec = Timespec()
        self.ref = ctypes.byref(self.spec)

    def __call__(self, deadline: int, stop=None) -> bool:
        """Sleep to `deadline`; with `stop` (a one-word flag), a long sleep goes in slices of
        SLICE_NS (the last one to the deadline itself) and ends early once the flag is set.
        Returns whether it slept to the deadline."""
        if stop is not None:
            while deadline - now() > SLICE_NS:
                if stop[0]:
                    return False
                self.sleep(now() + SLICE_NS)
        self.sleep(deadline)
        return True

    def sleep(self, deadline: int) -> None:
        self.spec.tv_sec, self.spec.tv_nsec = divmod(deadline, 1_000_000_000)
        err = _libc.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, self.ref, None)
        while err == errno.EINTR:          # a signal: sleep on to the same absolute deadline
            err = _libc.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, self.ref, None)
        if err:
            raise OSError(err, f"clock_nanosleep: {os.strerror(err)}")


def wait_until(deadline: int, stop=None) -> int:
    """Delay precisely: sleep to within 100 us of the deadline, then spin. Returns the time.
    With `stop` (a one-word flag) the sleep goes in slices of SLICE_NS and returns as soon as
    the flag is set."""
    now = time.monotonic_ns
    left = deadline - now()
    while left > 200_000:
        if stop is not None and stop[0]:
            return now()
        time.sleep(min(left - 100_000, SLICE_NS) / 1e9)
        left = deadline - now()
    t = now()
    while t < deadline:
        t = now()
    return t
