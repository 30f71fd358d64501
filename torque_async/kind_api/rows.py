"""A test's results row through its set-up: the same steps for worker and loop tests.

Text longer than its field is cut to the field's width by numpy when assigned.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..results import FAILED, READY
from .api import TestError


PHASE = ("set-up", "the start", "the run", "the run", "closing")   # by the row's state


def describe(e: Exception, state: int = 0) -> str:
    """A failure in one line; an OSError names the phase, its file and the errno's words."""
    if isinstance(e, TestError):
        return str(e)
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename is not None else ""
        return f"{PHASE[min(state, len(PHASE) - 1)]}: {where}{e.strerror}"
    return f"{type(e).__name__}: {e}"


def mark_spawned(row: np.ndarray, launched: int = 0) -> None:
    """The test's code runs: `launched` is when its process was started (0: now, as for a
    loop test, whose set-up begins here)."""
    now = time.monotonic_ns()
    row["pid"] = os.getpid()
    row["phase"][0, 0] = now
    row["launched"] = launched or now


def mark_ready(row: np.ndarray, test) -> None:
    """Set up: its set-up time is from its process's start (launched) to now."""
    row["transfer_bytes"] = test.transfer_bytes
    note_info(row, test)
    ready = time.monotonic_ns()
    row["phase"][0, 1] = ready
    row["setup_ns"] = ready - row["launched"][0]
    row["state"] = READY


def note_info(row: np.ndarray, test) -> None:
    """What the test's set-up says of it (the group block's lines)."""
    row["info"] = os.fsencode(test.info)       # a file name as on disk


def mark_failed(row: np.ndarray, e: Exception) -> None:
    row["error"] = os.fsencode(describe(e, int(row["state"][0])))
    row["state"] = FAILED


def mark_closed(row: np.ndarray) -> None:
    row["phase"][0, 4] = time.monotonic_ns()
