"""The named POSIX semaphores behind the run's multiprocessing Barrier and Lock, and their removal.

A spawned worker opens a multiprocessing Barrier or Lock by name (/dev/shm/sem.mp-*), so the
names must exist until every worker has opened them; multiprocessing removes them only when the
creating process exits normally (or its resource tracker does), so a run killed with SIGKILL
leaked them. A run therefore writes their names into its segment's header (where
-freeSharedMemory finds them), and removes the names as soon as every worker has opened them:
open handles keep working, and nothing is left to leak. multiprocessing keeps one exit hook per
semaphore (util.Finalize calling SemLock._cleanup, which would fail on a removed name); `forget`
cancels those hooks, the one place that reads multiprocessing's internals.
"""
from __future__ import annotations

import _multiprocessing
from multiprocessing import resource_tracker, synchronize, util


def _hooks() -> dict[str, util.Finalize]:
    """This process's named semaphores (name -> the exit hook that would remove it)."""
    return {f._args[0]: f for f in list(util._finalizer_registry.values())
            if getattr(f, "_callback", None) is synchronize.SemLock._cleanup}


def made_by(make) -> tuple[object, tuple[str, ...]]:
    """make() and the names of the named semaphores it created."""
    before = set(_hooks())
    made = make()
    return made, tuple(sorted(set(_hooks()) - before))


def remove(name: str) -> bool:
    """Remove one semaphore name; false if there was none."""
    try:
        _multiprocessing.sem_unlink(name)
    except FileNotFoundError:
        return False
    return True


def untrack(name: str, rtype: str) -> None:
    """Tell multiprocessing's resource tracker to forget `name`, unless the tracker is gone
    (killed mid-run): telling it relaunched one, which warned that resources might leak and,
    never told of the name, printed a KeyError traceback at the exit."""
    tracker = resource_tracker._resource_tracker
    if tracker._fd is not None and not tracker._check_alive():
        return
    resource_tracker.unregister(name, rtype)


def forget(names: tuple[str, ...]) -> None:
    """Remove this process's semaphores' names now (every process that needs them has them
    open) and cancel multiprocessing's own removal of them at exit."""
    hooks = _hooks()
    for name in names:
        remove(name)
        if name in hooks:
            hooks[name].cancel()
            untrack(name, "semaphore")
