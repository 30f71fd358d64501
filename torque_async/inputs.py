"""Reading what the user hands in without hanging or reading forever: a file's type is looked at
before a byte is read (a FIFO or a terminal would block, /dev/zero never ends), and at most a
bound is read."""
from __future__ import annotations

import os
import stat

CONFIG_LIMIT = 16 << 20           # a configuration or alias file
RESULTS_LIMIT = 256 << 20         # a -json results file (compare, plot)

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def kind(mode: int) -> str:
    """What a file of st_mode `mode` is, in words ('a regular file', 'a FIFO', ...)."""
    return next((words for test, words in KINDS if test(mode)), "a regular file")


def named_link(path: str) -> bool:
    """Whether the last name in `path` is a symbolic link: a trailing '/' or '/.' (which make
    the system follow it) does not hide it."""
    while path.endswith(("/", "/.")) and path.rstrip("/."):
        path = path[:-1] if path.endswith("/") else path[:-2]
    return os.path.islink(path)


def read_bounded(path: str, limit: int, what: str = "") -> bytes:
    """The bytes of regular file `path`; ValueError (one line naming the file, as `what` and
    its path) when it is not a regular file, is longer than `limit` bytes or cannot be read."""
    name = f"{what} {path}".lstrip()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ValueError(f"cannot read {name}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"cannot read {name}: it is {kind(mode)}, not a regular file")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            got += len(chunk)
        raise ValueError(f"cannot read {name}: longer than {limit >> 20} MB")
    except OSError as e:
        raise ValueError(f"cannot read {name}: {e.strerror}") from None
    finally:
        os.close(fd)
