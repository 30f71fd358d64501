"""Which file a name holds: its inode number and its birth time (statx's btime, ns), so a file
made again under the same name is told from the one torque-async made even where the file
system hands the freed inode number straight back (ext4 gave a deleted file's number to the
next file made, three times in three). Birth time is 0 where the kernel or file system does
not keep it (the inode number alone then says)."""
from __future__ import annotations

import ctypes
import os

AT_SYMLINK_NOFOLLOW = 0x100
STATX_INO, STATX_BTIME = 0x100, 0x800
INO, BTIME = 32, 80                # offsets in struct statx: stx_ino, stx_btime (s, then ns)

_statx = getattr(ctypes.CDLL(None, use_errno=True), "statx", None)    # glibc 2.28 on


AT_FDCWD = -100


AT_EMPTY_PATH = 0x1000


def of_open(fd: int) -> tuple[int, int]:
    """(inode, birth ns or 0) of the file open on fd: the one it holds, whatever its name now
    names."""
    return of(fd, "", AT_EMPTY_PATH)


def of(dir_fd: int | None, name: str, flags: int = 0) -> tuple[int, int]:
    """(inode, birth ns or 0) of `name` in the directory open on dir_fd (None: the path as it
    stands), not following a link; OSError (FileNotFoundError, ...) as os.stat raises it."""
    if _statx is None:
        return (os.fstat(dir_fd) if flags & AT_EMPTY_PATH else
                os.stat(name, dir_fd=dir_fd, follow_symlinks=False)).st_ino, 0
    buf = ctypes.create_string_buffer(256)
    if _statx(AT_FDCWD if dir_fd is None else dir_fd, os.fsencode(name),
              AT_SYMLINK_NOFOLLOW | flags, STATX_INO | STATX_BTIME, buf):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)
    mask = int.from_bytes(buf.raw[:4], "little")
    ino = int.from_bytes(buf.raw[INO:INO + 8], "little")
    seconds = int.from_bytes(buf.raw[BTIME:BTIME + 8], "little", signed=True)
    nanos = int.from_bytes(buf.raw[BTIME + 8:BTIME + 12], "little")
    return ino, seconds * 1_000_000_000 + nanos if mask & STATX_BTIME else 0
