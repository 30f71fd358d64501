"""Test buffers: page-aligned anonymous mappings, locked in memory (-wire) on request."""
from __future__ import annotations

import ctypes
import mmap
import os
import resource

import numpy as np

from .api import TestError

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mlock.restype = ctypes.c_int


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else f"{value} bytes"


class Buffers:
    """The page-aligned buffers of one test: anonymous mmaps, locked in memory on request."""

    def __init__(self, wire: bool):
        self.wire = wire
        self._maps: list[mmap.mmap] = []

    def new(self, nbytes: int, dtype=np.uint8) -> np.ndarray:
        """A fresh zeroed buffer of `nbytes` bytes (whole pages are mapped) seen as `dtype`."""
        length = -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
        try:
            mm = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except OSError as exc:
            raise TestError(f"cannot map a {nbytes}-byte test buffer: {exc.strerror}") from None
        if hasattr(mmap, "MADV_HUGEPAGE"):
            mm.madvise(mmap.MADV_HUGEPAGE)
        self._maps.append(mm)
        array = np.frombuffer(mm, dtype=np.uint8, count=nbytes)
        if self.wire and _libc.mlock(array.ctypes.data, length) != 0:
            error = os.strerror(ctypes.get_errno())
            soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
            raise TestError(
                f"-wire: mlock of {length} bytes refused ({error}); RLIMIT_MEMLOCK allows "
                f"{_limit(soft)}: raise it (ulimit -l, /etc/security/limits.conf) or run as root")
        return array.view(dtype)

    def close(self) -> None:
        """Unmap what nobody else still views (the rest goes when its last view does)."""
        for mm in self._maps:
            try:
                mm.close()          # munmap also unlocks
            except BufferError:
                pass
        self._maps.clear()
