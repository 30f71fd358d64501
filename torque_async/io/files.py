"""Opening a test's files: O_DIRECT where it can be had, buffered I/O where it cannot.

The file buffer cache is off by default (torque's default): O_DIRECT, page-aligned buffers,
places and sizes multiples of the device's logical block size. Where that cannot be (tmpfs
refuses O_DIRECT, -m misaligns the buffers, a transfer size of 1000 bytes), the test falls back
to buffered I/O and drops each transfer's range from the cache after it (posix_fadvise
DONTNEED), and says so in its group's block. -fbc is plain buffered I/O.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from torque_async.kind_api.api import TestError

from ..sysinfo import mount_of
from . import identity

FALLBACK = "File buffer cache = off: buffered + fadvise DONTNEED"


@dataclass(frozen=True)
class Mode:
    direct: bool                  # open with O_DIRECT
    drop: bool                    # drop each transfer's range from the cache afterwards
    note: str                     # the line for the group's block
    fs: str = ""                  # the file system's type


def block_size(path: str) -> int:
    """The logical block size O_DIRECT needs on path's device (4096 when it cannot be found);
    a file not made yet is on its directory's device."""
    st = os.stat(path if os.path.exists(path) else os.path.dirname(os.path.abspath(path)))
    dev = st.st_rdev if st.st_rdev else st.st_dev
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    for where in (f"{base}/queue/logical_block_size", f"{base}/../queue/logical_block_size"):
        try:
            with open(where) as fh:
                return int(fh.read())
        except (OSError, ValueError):
            continue
    return 4096


def choose_mode(local, sizes: tuple[int, ...], align: int, path: str) -> Mode:
    """How the files are opened, before trying: -fbc, -m and alignment decide."""
    if local.fbc:
        return Mode(False, False, "File buffer cache = on (-fbc)")
    if local.m:
        return Mode(False, True, f"{FALLBACK} (-m misaligns the buffers)")
    odd = [s for s in sizes if s % align]
    if odd:
        return Mode(False, True, f"{FALLBACK} ({odd[0]} is not a multiple of {align})")
    mount = mount_of(path)
    fs = mount.fstype if mount else "unknown"
    memory = "; tmpfs: the files are in memory" if fs == "tmpfs" else ""
    return Mode(True, False, f"File buffer cache = off (O_DIRECT{memory})", fs)


MADE = "-f file "                  # starts the note of made_note: no set-up choice (report)


def made_note(path: str, was: int | None, now: int) -> str:
    """What set-up did to a file the user named (-f): made it (`was` None: there was none) or
    grew it, from `was` to `now` bytes; it is kept either way ('' when it did neither)."""
    if was is None:
        return f"{MADE}{path}: made by this run (there was none), and kept"
    return f"{MADE}{path}: grown from {was} to {now} bytes by this run, and kept so" \
        if now > was else ""


def replaced(path: str) -> str:
    return (f"-f {path} was replaced since this command saw it (another file under its name): "
            f"its tests write and read only the file they were given")


def open_file(path: str, write: bool, create: bool, mode: Mode, opener=None,
              devices: bool = False, pins: dict | None = None) -> tuple[int, Mode]:
    """Open one test file; a file system that refuses O_DIRECT turns the mode into the fallback.
    A write-open never follows a symbolic link; `opener(flags)` opens it instead of the path
    (a scratch file or a tree file, relative to its directory's descriptor). The path is opened
    without waiting and kept only for a regular file, a block device to read, or a device to
    write with `devices` (-writeDevices): what the name holds may have changed since the plan's
    check (a -repeat's next repetition opens it again). `pins` (runs.Pins: path -> who the
    file is, identity.pin): a write-open opens only the file pinned under the path, and pins
    the file it made where none was."""
    flags = (os.O_RDWR | os.O_NOFOLLOW if write else os.O_RDONLY) | os.O_CLOEXEC | \
        (os.O_CREAT if create else 0)
    kinds = identity.DEVICES if write and devices else identity.REGULAR if write else \
        identity.BLOCK
    pinned = pins is not None and write and opener is None
    who = pins.get(path) if pinned else None
    opener = opener or (lambda how: identity.opened(path, how, 0o644, kinds=kinds, who=who))
    try:
        fd = None
        if mode.direct:
            try:
                fd = opener(flags | os.O_DIRECT)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                mode = Mode(False, True, f"{FALLBACK} (O_DIRECT refused on {mode.fs})")
        fd = opener(flags) if fd is None else fd
        if pinned and who is None:         # made by this run (or not seen before): pinned now
            pins[path] = identity.on(fd, "", identity.AT_EMPTY_PATH)
        return fd, mode
    except identity.Replaced:
        raise TestError(f"{replaced(path)}; it was not opened") from None
    except OSError as e:
        why = "it is a symbolic link (writes never follow one)" if e.errno == errno.ELOOP \
            else e.strerror
        if write and e.errno == errno.EPERM and not devices and "device" in why:
            why += " (-writeDevices lets a test write a device)"
        raise TestError(f"cannot open {path}: {why}") from None
