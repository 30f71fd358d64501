"""How the engine answers a batch of completions of the file tests' slots (io/uring.py's
serve(), io/batch.py's path for -aio and -p N): on a fake ring, every slot that a batch made
ready has its next transfer's SQE queued, and the batch goes to the kernel in one submit; each
completion reaches its own slot with its own result."""
from __future__ import annotations

import random

from torque_async.io import ring as rings, uring

SIZE = 4096


class FakeRing:
    """The ring's face to serve(): SQEs written and queued, each submit's SQEs kept."""

    def __init__(self, entries: int = 64):
        self.offsets = [0] * entries
        self.sqes: dict[int, tuple] = {}
        self.queued: list[int] = []
        self.submits: list[list[int]] = []

    def write(self, i, op, fd, addr, length, offset, key, rw_flags=0):
        self.sqes[i] = (op, fd, addr, length, offset, key)

    def queue_all(self, sqes: list[int]) -> None:
        self.queued += sqes
        sqes.clear()

    def submit(self, wait: int = 0) -> int:
        self.submits.append(self.queued)
        self.queued = []
        return 0

    def give_back(self, i: int) -> None:
        pass


def engine(ring: FakeRing) -> uring.UringEngine:
    """An engine on the fake ring, with nothing in flight (no kernel, no loop)."""
    e = object.__new__(uring.UringEngine)
    e.ring, e.waiting, e.chains = ring, {}, {}
    e.holding, e.held, e.group = False, 0, 0
    e.starting, e.queued, e.retry, e.flush, e.owned = [], [], None, None, []
    return e


def slots(e: uring.UringEngine, n: int, seen: list, stop_after: int = 1 << 30):
    """n slots, slot j owning SQE j and reading file 100 + j; each done() notes (j, res, t)
    and asks for the slot's next read, one block further on, until stop_after of its own."""
    made = {}

    def done(slot, res, t, at):
        seen.append((slot.j, res, t))
        made[slot.j] = made.get(slot.j, 0) + 1
        if made[slot.j] > stop_after:
            return None
        return False, 100 + slot.j, made[slot.j] * SIZE
    out = [uring.Slot(1000 + j, j, done, (0x10000 + j * SIZE, SIZE, None),
                      (0x90000 + j * SIZE, SIZE, None), j, j, False) for j in range(n)]
    e.waiting.update((s.key, s) for s in out)
    return out


def test_the_slots_a_batch_made_ready_go_in_one_submit_carrying_all_their_sqes():
    ring, seen = FakeRing(), []
    e = engine(ring)
    ready = slots(e, 16, seen)
    e.serve([(s.key, SIZE, 0) for s in ready], 5_000, True)
    assert len(ring.submits) == 1                           # one io_uring_enter for the batch
    assert sorted(ring.submits[0]) == list(range(16))       # each slot's own SQE, once
    for s in ready:                                         # each SQE is its slot's next read
        op, fd, addr, length, offset, key = ring.sqes[s.sqe]
        assert (op, fd, addr, length, offset, key) == (rings.OP_READ, 100 + s.j,
                                                         0x10000 + s.j * SIZE, SIZE, SIZE, s.key)
    assert len({s.t0 for s in ready}) == 1 and ready[0].t0 > 0   # one start: the submit's


def test_the_next_batch_changes_only_the_offsets_and_submits_once_again():
    ring, seen = FakeRing(), []
    e = engine(ring)
    ready = slots(e, 8, seen)
    for t in (1, 2, 3):
        e.serve([(s.key, SIZE, 0) for s in ready], t, True)
    assert len(ring.submits) == 3 and all(sorted(b) == list(range(8)) for b in ring.submits)
    assert [ring.offsets[s.sqe] for s in ready] == [3 * SIZE] * 8


def test_each_completion_of_a_batch_reaches_its_own_slot_with_its_own_result():
    """Completions arrive in any order: slot j gets the result the kernel gave its key."""
    ring, seen = FakeRing(), []
    e = engine(ring)
    ready = slots(e, 16, seen)
    batch = [(s.key, SIZE - s.j, 0) for s in ready]        # a result each slot can be told by
    random.Random(7).shuffle(batch)
    e.serve(batch, 42, True)
    assert sorted(seen) == [(j, SIZE - j, 42) for j in range(16)]
    assert [j for j, _, _ in seen] == [key - 1000 for key, _, _ in batch]   # in the batch's order


def test_a_slot_that_ends_leaves_the_batch_s_submit_to_the_others():
    ring, seen = FakeRing(), []
    e = engine(ring)
    ready = slots(e, 4, seen, stop_after=0)                # every done() ends its slot
    e.serve([(s.key, SIZE, 0) for s in ready], 9, True)
    assert ring.submits in ([], [[]]) and not e.waiting     # nothing queued, every slot gone
