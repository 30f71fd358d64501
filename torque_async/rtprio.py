"""-rtprio N: the event loop's thread runs SCHED_FIFO at priority N, its process's memory locked
(mlockall MCL_CURRENT | MCL_FUTURE), as cyclictest's -p N -m run its measuring threads; so the
loop tests (streams above all) are not kept waiting for a CPU by the other tests.

The plan is refused (one line, exit 2) where the kernel would refuse either: the policy is tried
on a throwaway thread, the lock is allowed by CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK. The
loop's thread takes the policy once every loop test is set up (set-up at real-time priority
could hold a CPU for seconds) and gives it back at the end; each test's row records the policy
its thread ran under (policy_of: a worker imports this module for it, and so none of the
command's modules, nor ctypes, at its top).
"""
from __future__ import annotations

import os
import resource
import threading

from .errors import UsageError

MCL_CURRENT, MCL_FUTURE = 1, 2
CAP_IPC_LOCK = 14
NAMES = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR",
         getattr(os, "SCHED_BATCH", 3): "SCHED_BATCH", getattr(os, "SCHED_IDLE", 5): "SCHED_IDLE"}


def policy_text(policy: int, priority: int) -> str:
    """'SCHED_FIFO 50', 'SCHED_OTHER'."""
    name = NAMES.get(policy, f"policy {policy}")
    return f"{name} {priority}" if policy in (os.SCHED_FIFO, os.SCHED_RR) else name


def policy_of() -> tuple[int, int]:
    """The calling thread's scheduling policy and real-time priority."""
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


def fifo_refusal(priority: int) -> str:
    """Why the kernel refuses SCHED_FIFO at `priority` ('' where it allows it), found by
    setting it on a thread made for the test, which then ends."""
    why: list[str] = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except OSError as e:
            why.append(e.strerror or str(e))
    thread = threading.Thread(target=attempt, name="torque-async rtprio check")
    thread.start()
    thread.join()
    return why[0] if why else ""


def may_lock() -> bool:
    """mlockall(MCL_FUTURE) of a process of any size: CAP_IPC_LOCK, or no RLIMIT_MEMLOCK."""
    if resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] == resource.RLIM_INFINITY:
        return True
    try:
        with open("/proc/self/status") as fh:
            caps = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(caps >> CAP_IPC_LOCK & 1)


def check(priority: int | None, loop_tests: bool) -> None:
    """UsageError, one line, for a -rtprio this plan or this machine cannot have."""
    if priority is None:
        return
    if not loop_tests:
        raise UsageError(f"-rtprio {priority}: no test of the plan runs on the event loop (the "
                         f"streams, file and web tests do; the others are processes of their "
                         f"own): -rtprio would change nothing")
    why = fifo_refusal(priority)
    if why:
        raise UsageError(f"-rtprio {priority}: the kernel refuses SCHED_FIFO here ({why}): run "
                         f"as root, or give CAP_SYS_NICE or an RLIMIT_RTPRIO of {priority}")
    if not may_lock():
        raise UsageError(f"-rtprio {priority}: mlockall is not allowed here (RLIMIT_MEMLOCK "
                         f"{resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]} bytes, no "
                         f"CAP_IPC_LOCK): run as root, or raise ulimit -l to unlimited")


def libc_call(name: str, *args: int) -> None:
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


class RealTime:
    """The calling thread at SCHED_FIFO `priority` and the process locked, until `restore`."""

    def __init__(self, priority: int):
        self.before = os.sched_getscheduler(0), os.sched_getparam(0)
        libc_call("mlockall", MCL_CURRENT | MCL_FUTURE)
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except OSError:
            libc_call("munlockall")
            raise

    def restore(self) -> None:
        os.sched_setscheduler(0, *self.before)
        libc_call("munlockall")
