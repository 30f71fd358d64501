"""-web on a cold tree: which device's queue the report gives (a fake /proc/diskstats and
mount table), the line it prints when the tree is on no one block device, and the io-wq
workers the ring lets the clients' blocking opens have."""
from __future__ import annotations

import asyncio
import errno
import os
from types import SimpleNamespace

from torque_async.io import uring
from torque_async.results import SIZE_LAW, WEB_LOAD
from torque_async.stats import Stats
from torque_async.web import disk, summary

from conftest import needs_direct_files

STATS = ("   7       0 loop0 24 0 24576 1 12 0 12288 3 0 4 999 0 0 0 0\n"
         " 254       0 vda 5 0 80 9 1 0 8 2 3 40 6000 0 0 0 0 0 0\n"
         " 254       1 vda1 5 0 80 9 1 0 8 2 3 40 5000 0 0 0 0 0 0\n")
MOUNTS = ("22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
          "30 22 0:45 / /srv rw master:3 - overlay overlay rw,lowerdir=/a,upperdir=/b\n"
          "31 22 0:46 / /dev/shm rw - tmpfs tmpfs rw\n"
          "32 22 0:47 / /mnt/b rw - btrfs /dev/vdb rw\n")


def fakes(tmp_path):
    (tmp_path / "diskstats").write_text(STATS)
    (tmp_path / "mountinfo").write_text(MOUNTS)
    return str(tmp_path / "diskstats"), str(tmp_path / "mountinfo")


def test_a_tree_on_a_block_device_has_that_device_s_queue(tmp_path):
    stats, mounts = fakes(tmp_path)
    assert disk.place(os.makedev(254, 1), stats, mounts) == ((254, 1), "vda1")   # a partition
    assert disk.place(os.makedev(254, 0), stats, mounts) == ((254, 0), "vda")
    loop = disk.place(os.makedev(7, 0), stats, mounts)
    assert loop.device == (7, 0) and "a loop device" in loop.name
    assert disk.weighted_ms((254, 1), stats) == 5000


def test_a_tree_on_no_one_block_device_has_no_queue_and_says_why(tmp_path):
    """An overlay's, a tmpfs's and a btrfs's files have anonymous device numbers (0:N): no
    device's figure is theirs (a btrfs's source names one of its devices, not all)."""
    stats, mounts = fakes(tmp_path)
    for minor, what in ((45, "overlay (overlay)"), (46, "tmpfs (tmpfs)"),
                        (47, "btrfs (/dev/vdb)")):
        where = disk.place(os.makedev(0, minor), stats, mounts)
        assert where.device is None
        assert where.name.startswith(what) and "no queue figure" in where.name
    unknown = disk.place(os.makedev(0, 99), stats, str(tmp_path / "gone"))
    assert unknown.device is None and unknown.name.startswith("device 0:99")


def test_the_real_tree_s_place_matches_its_mount(tmp_path):
    """This machine's own tables: a file's device is listed with a figure, or it is not and
    the mount table names its file system."""
    where = disk.device_of(os.open(tmp_path, os.O_RDONLY))
    dev = os.stat(tmp_path).st_dev
    listed = disk.listed()
    assert (where.device is not None) == ((os.major(dev), os.minor(dev)) in listed)
    if where.device is None:
        assert "no queue figure" in where.name


def web_summary(queue_ms: int, queue_ns: int) -> list[str]:
    """The report's lines for one client whose loop published this queue."""
    group = SimpleNamespace(index=0, action="web", local=SimpleNamespace(keepLog=False))
    load = [0] * len(WEB_LOAD)
    load[WEB_LOAD.index("queue_ms")], load[WEB_LOAD.index("queue_ns")] = queue_ms, queue_ns
    load[WEB_LOAD.index("log_bytes")] = 10
    record = SimpleNamespace(measured=True, start=0, finish=2_000_000_000,
                             group_work=(100, 0, 0), web_load=tuple(load), most_open=1,
                             op_lat=None, lat=Stats(0, 0, 0, 0, ()), transfers=100,
                             size_law=(1, 16384, 16384, 16384), unsplit=0)
    proc = SimpleNamespace(group=group, row=0, index=0)
    assert len(record.size_law) == len(SIZE_LAW)
    return summary.lines(group, [record], [proc], 1)


def test_the_load_line_gives_the_queue_or_says_there_is_none():
    """6000 weighted ms over 2 s: 3 I/Os in the queue on average; -1 (no block device): the
    line says so rather than give a figure."""
    load = next(line for line in web_summary(6000, 2_000_000_000) if " load: " in line)
    assert "the tree's disk: 3.00 I/Os in its queue on average" in load
    load = next(line for line in web_summary(-1, 0) if " load: " in line)
    assert "the tree's disk: no queue figure (its file system is on no one block device" in load
    assert "I/Os in its queue" not in load


class Caps:
    """A ring's io-wq caps as the kernel keeps them: `default` bounded workers until raised;
    `refuse`: a kernel without IORING_REGISTER_IOWQ_MAX_WORKERS."""

    def __init__(self, default: int, refuse: bool = False):
        self.bounded, self.refuse, self.calls = default, refuse, []

    def iowq_workers(self, bounded: int, unbounded: int = 0) -> tuple[int, int]:
        self.calls.append(bounded)
        if self.refuse:
            raise OSError(errno.EINVAL, "io_uring_register: Invalid argument")
        before = self.bounded
        self.bounded = bounded or self.bounded
        return before, 0


def taken(caps: Caps, clients: int, table: int = 4096) -> SimpleNamespace:
    """An engine whose `clients` clients each took a direct descriptor (take_file's count)."""
    engine = SimpleNamespace(ring=caps, workers=0, table=table)
    for n in range(1, clients + 1):
        uring.UringEngine.cover(engine, n)
    return engine


def test_the_clients_blocking_opens_get_a_worker_each():
    """io-wq's bounded cap (8 on 2 CPUs) would hold 64 clients' uncached opens to 8 at once:
    it is raised past the clients, in a few doublings, not once per client."""
    caps = Caps(8)
    engine = taken(caps, 64)
    assert caps.bounded >= 64 and engine.workers == caps.bounded
    assert caps.calls[0] == 0                      # the kernel's own cap, asked first
    assert len(caps.calls) <= 5
    few = Caps(8)
    taken(few, 8)
    assert few.calls == [0] and few.bounded == 8   # within the default: left as it is
    assert taken(Caps(8), 100, table=80).workers == 80    # never past the table's clients


def test_a_kernel_that_cannot_raise_the_cap_is_left_alone():
    caps = Caps(8, refuse=True)
    engine = taken(caps, 64)
    assert engine.workers is None and caps.calls == [0]    # asked once, then never again


@needs_direct_files
def test_the_ring_s_clients_raise_the_kernel_s_own_cap():
    """On this kernel (5.15+, as direct descriptors): after 64 clients took their descriptor,
    the kernel's bounded cap, read back, covers them (a machine of 16 CPUs or more has 64 by
    default: then it stays)."""
    async def clients() -> tuple[int, int]:
        engine = uring.UringEngine.shared()
        try:
            before = engine.ring.iowq_workers(0)[0]
            taken = [engine.take_file() for _ in range(64)]
            assert sorted(taken) == list(range(64))
            return before, engine.ring.iowq_workers(0)[0]
        finally:
            engine.close()
    before, after = asyncio.run(clients())
    assert before >= 1 and after >= max(64, before)
