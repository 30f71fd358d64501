"""Which file a name holds, and opening only the file that was meant.

A file's identity is its inode number and its birth time (statx's btime, ns), so a file made
again under the same name is told from the one torque-async made even where the file system
hands the freed inode number straight back (ext4 gave a deleted file's number to the next file
made, three times in three). Where the kernel or file system keeps no birth time (it reads 0),
a file torque-async makes also carries a mark: the extended attribute user.torque-async holding
a random token its tree keeps (made()); a file planted under the name, even one given the freed
inode, lacks it (is_made()). Where neither can be had, torque-async makes no such file. A
directory torque-async makes for a run (its scratch directory, its workers' server's) holds a
marker naming it (mark_dir()), and only a directory that proves it so (is_marked_dir()) is ever
removed as a killed run's leftover.

opened() opens a name without waiting (a FIFO would block an open or a read for ever) and keeps
it only when fstat shows a regular file, or a device where the caller allows one (an open for
writing looks before it opens): what a name holds may change between a check and the open. Given
who the file is (pin(): as the command saw it), an open for writing opens only that file.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat

from ..inputs import kind

AT_SYMLINK_NOFOLLOW = 0x100
STATX_INO, STATX_BTIME = 0x100, 0x800
INO, BTIME, DEV = 32, 80, 136      # offsets in struct statx: stx_ino, stx_btime (s, then ns),
                                   # stx_dev_major (then minor)

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
    return on(dir_fd, name, flags)[1:]


def pin(path: str) -> tuple[int, int, int] | None:
    """Who the file at `path` is (its device, inode and birth ns or 0), not following a link:
    what an open for writing checks the file it opened against (opened()); None: nothing there,
    or a name that cannot be looked at (too long, under a file): the plan's checks then say why."""
    try:
        return on(None, path)
    except OSError:
        return None


def on(dir_fd: int | None, name: str, flags: int = 0) -> tuple[int, int, int]:
    """(device, inode, birth ns or 0): see of()."""
    if _statx is None:
        st = os.fstat(dir_fd) if flags & AT_EMPTY_PATH else \
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return st.st_dev, st.st_ino, 0
    buf = ctypes.create_string_buffer(256)
    if _statx(AT_FDCWD if dir_fd is None else dir_fd, os.fsencode(name),
              AT_SYMLINK_NOFOLLOW | flags, STATX_INO | STATX_BTIME, buf):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)
    mask = int.from_bytes(buf.raw[:4], "little")
    ino = int.from_bytes(buf.raw[INO:INO + 8], "little")
    seconds = int.from_bytes(buf.raw[BTIME:BTIME + 8], "little", signed=True)
    nanos = int.from_bytes(buf.raw[BTIME + 8:BTIME + 12], "little")
    dev = os.makedev(*(int.from_bytes(buf.raw[at:at + 4], "little") for at in (DEV, DEV + 4)))
    return dev, ino, seconds * 1_000_000_000 + nanos if mask & STATX_BTIME else 0


MARK = "user.torque-async"         # the extended attribute a made file carries without btime


def made(fd: int, token: str) -> tuple[int, int]:
    """The identity of the file torque-async has just created on fd; where it has no birth time,
    marked with `token` first. OSError when it can be neither told by its birth nor marked."""
    who = of_open(fd)
    if not who[1]:
        try:
            os.setxattr(fd, MARK, token.encode())
        except OSError as e:
            raise OSError(e.errno, f"this file system keeps neither birth times nor extended "
                                   f"attributes ({e.strerror}): torque-async could not tell the "
                                   f"files it makes from files planted under their names, so it "
                                   f"writes none here") from None
    return who


def is_made(who, dir_fd: int | None, name: str, token: str | None, flags: int = 0) -> bool:
    """Whether `name` (of dir_fd; flags AT_EMPTY_PATH: the file open on dir_fd) is the file
    torque-async made as `who`: the same inode and birth time, and, where there is no birth
    time, its mark holding `token`."""
    try:
        now = of(dir_fd, name, flags)
    except FileNotFoundError:
        return False
    if tuple(who) != now:
        return False
    if now[1]:
        return True
    where = dir_fd if flags & AT_EMPTY_PATH else \
        (name if dir_fd is None else f"/proc/self/fd/{dir_fd}/{name}")
    try:
        mark = os.getxattr(where, MARK) if isinstance(where, int) else \
            os.getxattr(where, MARK, follow_symlinks=False)
    except OSError:
        return False
    return bool(token) and mark == token.encode()


def is_open_made(who, fd: int, token: str | None) -> bool:
    return is_made(who, fd, "", token, AT_EMPTY_PATH)


REGULAR = (stat.S_ISREG,)
BLOCK = (stat.S_ISREG, stat.S_ISBLK)
DEVICES = (stat.S_ISREG, stat.S_ISBLK, stat.S_ISCHR)


class Replaced(OSError):
    """An open for writing found another file under the name than the one it was to open."""


def opened(name: str, flags: int, mode: int = 0o644, dir_fd: int | None = None,
           kinds=REGULAR, who=None) -> int:
    """os.open(name, flags) that never waits and keeps only a file of `kinds` (REGULAR, BLOCK:
    or a block device, DEVICES: or any device). A read-only open is made with O_NONBLOCK,
    looked at (fstat) and then given the flags asked. An open for writing first opens the name
    as a path alone (O_PATH: nothing read, written or waited on), looks at it, and only then
    opens that same file (through /proc/self/fd: no name is resolved again), so a file it may
    not write is never opened for writing; a name that does not exist is created new (O_CREAT:
    O_EXCL, a regular file). OSError: ELOOP for a symbolic link (with O_NOFOLLOW), EPERM ('it
    is a FIFO, ...') for another kind. `who` (pin()): an open for writing opens only that file,
    looked at on the descriptor (a name gone or holding another file: Replaced)."""
    if flags & os.O_ACCMODE == os.O_RDONLY and not flags & os.O_CREAT:
        fd = os.open(name, flags | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            st = os.fstat(fd)
            if not any(test(st.st_mode) for test in kinds):
                raise refusal(name, st.st_mode, kinds)
            if not flags & os.O_NONBLOCK:      # (io_uring would hand back EAGAIN)
                fcntl.fcntl(fd, fcntl.F_SETFL, flags)
            return fd
        except BaseException:
            os.close(fd)
            raise
    while True:
        try:
            path = os.open(name, os.O_PATH | (flags & os.O_NOFOLLOW) | os.O_CLOEXEC,
                           dir_fd=dir_fd)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
            if who is not None:
                raise Replaced(errno.ENOENT, "another file than the one meant", name) from None
            try:
                return os.open(name, flags | os.O_EXCL | os.O_CLOEXEC, mode, dir_fd=dir_fd)
            except FileExistsError:
                if flags & os.O_EXCL:
                    raise
                continue                       # made meanwhile: looked at as any other
        try:
            if flags & os.O_CREAT and flags & os.O_EXCL:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name)
            st = os.fstat(path)
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
            if not any(test(st.st_mode) for test in kinds):
                raise refusal(name, st.st_mode, kinds)
            if who is not None and on(path, "", AT_EMPTY_PATH) != tuple(who):
                raise Replaced(errno.ESTALE, "another file than the one meant", name)
            return os.open(f"/proc/self/fd/{path}",
                           flags & ~(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW) | os.O_CLOEXEC)
        finally:
            os.close(path)


def refusal(name: str, mode: int, kinds) -> OSError:
    return OSError(errno.EPERM, f"it is {kind(mode)}, not a regular file" +
                   ("" if kinds is REGULAR else " or a device it may use"), name)


DIR_MARK = ".torque-async"         # a marker file in a directory a run made: the directory's name


def mark_dir(path: str) -> None:
    """Mark the directory a run just made (mkdtemp) as torque-async's: a file in it holding its
    own name."""
    fd = os.open(os.path.join(path, DIR_MARK), os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                 os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, os.fsencode(os.path.basename(path)))
    finally:
        os.close(fd)


def is_marked_dir(path: str) -> bool:
    """Whether `path` is a directory (not a link to one) of this user's that a run marked as its
    own (mark_dir): a user's directory of a similar name, or a plain file, is not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return False
        mark = opened(DIR_MARK, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
        try:
            st = os.fstat(mark)
            return st.st_uid == os.getuid() and \
                os.read(mark, 4096) == os.fsencode(os.path.basename(path))
        finally:
            os.close(mark)
    except OSError:
        return False
    finally:
        os.close(fd)
