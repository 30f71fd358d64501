"""The ring itself (io/ring.py): SQEs written into the kernel's mapped array, completions read
from its mapped CQ, no liburing."""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
import select
import time

import pytest

from torque_async.io import ring as rings

from conftest import needs_uring

pytestmark = needs_uring


@pytest.fixture
def ring():
    r = rings.Ring(8)
    yield r
    r.close()


def buffer(n: int):
    m = mmap.mmap(-1, n)
    view = memoryview(m)
    addr, held = rings.address(view)
    return m, view, addr, held


def one(ring, op, fd, addr, length, offset, user_data, flags=0):
    i = ring.borrowed_sqe()
    ring.write(i, op, fd, addr, length, offset, user_data, flags)
    ring.queue(i)
    ring.submit(wait=1)
    return [(key, res) for key, res, _ in ring.completions()]


def test_a_read_and_a_write_move_the_bytes_at_their_offsets(ring, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 32)
    fd = os.open(path, os.O_RDWR)
    m, view, addr, held = buffer(4096)
    try:
        assert one(ring, rings.OP_READ, fd, addr, 100, 300, 11) == [(11, 100)]
        assert bytes(view[:100]) == (bytes(range(256)) * 2)[44:144]
        view[:5] = b"hello"
        assert one(ring, rings.OP_WRITE, fd, addr, 5, 8000, 12) == [(12, 5)]
        assert os.pread(fd, 7, 7999) == bytes([7999 % 256]) + b"hello" + bytes([8005 % 256])
    finally:
        os.close(fd)
        del held
        view.release()
        m.close()


def test_a_failed_transfer_comes_back_as_minus_its_errno(ring):
    m, view, addr, held = buffer(4096)
    assert one(ring, rings.OP_READ, -1, addr, 10, 0, 5) == [(5, -errno.EBADF)]
    del held
    view.release()
    m.close()


def test_an_owned_sqe_keeps_its_fields_and_only_its_offset_changes(ring, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)))
    fd = os.open(path, os.O_RDONLY)
    m, view, addr, held = buffer(4096)
    try:
        i = ring.take()
        ring.write(i, rings.OP_READ, fd, addr, 4, 0, 99)
        got = []
        for offset in (10, 200, 3):
            ring.offsets[i] = offset
            ring.queue(i)
            ring.submit(wait=1)
            assert ring.completions() == [(99, 4, 0)]
            got.append(bytes(view[:4]))
        assert got == [bytes(range(o, o + 4)) for o in (10, 200, 3)]
        ring.give_back(i)
    finally:
        os.close(fd)
        del held
        view.release()
        m.close()


def test_owners_leave_half_the_sqes_to_lend_and_lent_ones_come_back_after_a_submit(ring):
    owned = [ring.take() for _ in range(4)]
    assert -1 not in owned and ring.take() == -1            # 8 SQEs: 4 may be owned
    lent = [ring.borrowed_sqe() for _ in range(4)]
    assert set(lent).isdisjoint(owned) and ring.free == []
    for k, i in enumerate(lent):
        ring.write(i, rings.OP_NOP, -1, 0, 0, 0, k)
        ring.queue(i)
    again = ring.borrowed_sqe()        # none free: it submits what is queued, which frees them
    assert again in lent
    ring.write(again, rings.OP_NOP, -1, 0, 0, 0, 4)
    ring.queue(again)
    ring.submit(wait=5)
    assert ring.completions() == [(k, 0, 0) for k in range(5)]
    for i in owned:
        ring.give_back(i)
    assert sorted(ring.free + ring.lent) == list(range(8))


def test_completions_past_the_cq_s_room_all_arrive_in_order(ring):
    """8 SQEs, 16 CQEs: 40 no-ops completed before any is read overflow into the kernel's
    list (IORING_FEAT_NODROP), and completions() fetches them too."""
    for k in range(40):
        i = ring.borrowed_sqe()
        ring.write(i, rings.OP_NOP, -1, 0, 0, 0, 1000 + k)
        ring.queue(i)
        ring.submit()
    assert ring.completions() == [(1000 + k, 0, 0) for k in range(40)]
    assert ring.completions() == []


def test_an_absolute_timeout_ends_at_its_monotonic_time_not_before(ring):
    until = time.monotonic_ns() + 30_000_000
    ts = (ctypes.c_int64 * 2)(*divmod(until, 1_000_000_000))
    done = one(ring, rings.OP_TIMEOUT, -1, ctypes.addressof(ts), 1, 0, 3, rings.TIMEOUT_ABS)
    assert time.monotonic_ns() >= until
    assert done == [(3, -errno.ETIME)]


def test_the_ring_s_fd_is_readable_while_completions_wait_and_only_then(ring):
    """The loop watches the ring's own fd: readable once a completion is there (those the CQ
    had no room for too), and no longer once completions() has read them all."""
    poll = select.poll()
    poll.register(ring.fd, select.POLLIN)
    assert poll.poll(0) == []
    for k in range(20):                # past the CQ's 16: some wait in the kernel's list
        i = ring.borrowed_sqe()
        ring.write(i, rings.OP_NOP, -1, 0, 0, 0, k)
        ring.queue(i)
        ring.submit()
    assert poll.poll(0) == [(ring.fd, select.POLLIN)]
    assert len(ring.completions(16)) == 16
    assert poll.poll(0) == [(ring.fd, select.POLLIN)]           # 4 still wait
    assert [key for key, _, _ in ring.completions()] == [16, 17, 18, 19]
    assert poll.poll(0) == []


def test_a_kernel_older_than_coop_taskrun_gets_a_ring_without_it(monkeypatch):
    asked, real = [], rings._syscall

    def syscall(number, *args):
        if number == rings.SETUP:
            flags = rings.PARAMS.unpack(args[1].raw)[2]
            asked.append(flags)
            if flags:                  # as Linux before 5.19 answers an unknown flag
                ctypes.set_errno(errno.EINVAL)
                return -1
        return real(number, *args)
    monkeypatch.setattr(rings, "_syscall", syscall)
    r = rings.Ring(4)
    try:
        assert asked == [rings.SETUP_COOP_TASKRUN, 0]
        assert one(r, rings.OP_NOP, -1, 0, 0, 0, 1) == [(1, 0)]
    finally:
        r.close()


def test_completions_are_read_at_most_so_many_at_a_time_the_rest_left_pending(ring):
    for k in range(40):                # past the CQ's 16: some wait in the kernel's list
        i = ring.borrowed_sqe()
        ring.write(i, rings.OP_NOP, -1, 0, 0, 0, k)
        ring.queue(i)
        ring.submit()
    got = []
    while ring.pending():
        part = ring.completions(7)
        assert 0 < len(part) <= 7
        got += part
    assert got == [(k, 0, 0) for k in range(40)]


def test_queue_all_puts_each_sqe_in_turn_across_the_queue_s_end(ring):
    """8 places in the submission queue: lists of 3 SQEs queued in one write each wrap past its
    last place (and the 16 CQEs past theirs); every no-op completes once, in the order queued."""
    got, want = [], []
    for r in range(7):
        sqes = [ring.borrowed_sqe() for _ in range(3)]
        for n, i in enumerate(sqes):
            ring.write(i, rings.OP_NOP, -1, 0, 0, 0, 10 * r + n)
        want += [10 * r + n for n in range(3)]
        ring.queue_all(sqes)
        assert sqes == []                                  # emptied for the next batch
        assert ring.submit(wait=3) == 0
        got += [key for key, _, _ in ring.completions()]
    assert got == want
