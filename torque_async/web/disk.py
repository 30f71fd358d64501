"""The queue of the block device a -web tree sits on: the kernel's time-weighted I/O count
(/proc/diskstats' weighted milliseconds doing I/O, field 11 of a device's counters: the sum of
every I/O's time in flight, from its start to its completion), whose growth over an interval,
over the interval, is the device's mean queue depth. It counts every I/O to the device, not
only the run's: a partition's line counts that partition's, a whole disk's every partition's.

Only a file system whose files' device number (st_dev) is a device listed in /proc/diskstats
has such a figure. On a tmpfs, an overlay, a network's file system or a btrfs (whose files'
numbers are anonymous, and which may span several devices) there is none, and place() says
why rather than give another device's queue."""
from __future__ import annotations

import os
from typing import NamedTuple

DISKSTATS = "/proc/diskstats"
MOUNTINFO = "/proc/self/mountinfo"
WEIGHTED = 13                      # the field of a diskstats line (after major, minor, name)
LOOP = 7                           # the loop devices' major number


class Place(NamedTuple):
    """Where a tree's I/O is counted: `device` (major, minor) and its `name` in diskstats, or
    device None and `name` says why there is no figure."""
    device: tuple[int, int] | None
    name: str


def listed(stats: str = DISKSTATS) -> dict[tuple[int, int], str]:
    """The devices /proc/diskstats counts: (major, minor) -> name."""
    try:
        with open(stats) as lines:
            return {(int(f[0]), int(f[1])): f[2] for f in map(str.split, lines) if len(f) > 2}
    except (OSError, ValueError):
        return {}


def mount_of(number: tuple[int, int], mountinfo: str = MOUNTINFO) -> tuple[str, str] | None:
    """The file system type and source of the mount whose device number is `number`
    (/proc/self/mountinfo: "id parent major:minor root point options [tags] - type source
    ..."), or None."""
    key = "%d:%d" % number
    try:
        with open(mountinfo) as lines:
            for line in lines:
                fields = line.split()
                if len(fields) > 2 and fields[2] == key and " - " in line:
                    after = line.split(" - ", 1)[1].split()
                    return after[0], after[1] if len(after) > 1 else "none"
    except OSError:
        pass
    return None


def place(dev: int, stats: str = DISKSTATS, mountinfo: str = MOUNTINFO) -> Place:
    """Where the I/O of files whose st_dev is `dev` is counted, or why nowhere."""
    number = (os.major(dev), os.minor(dev))
    name = listed(stats).get(number)
    if name is not None:
        return Place(number, name + (" (a loop device: its file's own disk is not counted)"
                                     if number[0] == LOOP else ""))
    mount = mount_of(number, mountinfo)
    what = f"{mount[0]} ({mount[1]})" if mount else "device %d:%d" % number
    return Place(None, f"{what}: its files name no one block device, so no queue figure")


def device_of(fd: int) -> Place:
    """place() of the file system holding the file fd."""
    return place(os.fstat(fd).st_dev)


def weighted_ms(device: tuple[int, int], stats: str = DISKSTATS) -> int | None:
    """The device's weighted milliseconds doing I/O so far, or None where it is not listed."""
    try:
        with open(stats) as lines:
            for line in lines:
                fields = line.split()
                if len(fields) > WEIGHTED and (int(fields[0]), int(fields[1])) == device:
                    return int(fields[WEIGHTED])
    except (OSError, ValueError):
        pass
    return None
