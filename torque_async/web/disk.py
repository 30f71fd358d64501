"""The queue of the block device a -web tree sits on: the kernel's time-weighted I/O count
(/proc/diskstats' weighted milliseconds doing I/O, field 11 of a device's counters: every ms
counts each I/O in flight then), whose growth over an interval, over the interval, is the
device's mean queue depth. It counts every I/O to the device, not only the run's."""
from __future__ import annotations

import os

DISKSTATS = "/proc/diskstats"
WEIGHTED = 13                      # the field of a diskstats line (after major, minor, name)


def device_of(fd: int) -> tuple[int, int] | None:
    """(major, minor) of the block device holding the file fd, or None where its file system
    is on none (tmpfs, overlay, a network's)."""
    dev = os.fstat(fd).st_dev
    number = (os.major(dev), os.minor(dev))
    return number if os.path.exists("/sys/dev/block/%d:%d" % number) else None


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
