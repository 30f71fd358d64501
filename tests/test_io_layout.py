"""Where file transfers go: the layout is a pure function of the plan, the seed and file sizes."""
from __future__ import annotations

import numpy as np
import pytest

from torque_async import cmdline
from torque_async.io import actions
from torque_async.io.layout import BLOCK, Cursor, Layout

KB = 1024


def ops(layout: Layout, count: int):
    files, offsets, writes = (np.concatenate(a)[:count] for a in
                              zip(*(layout.block(b) for b in range(-(-count // BLOCK)))))
    return files, offsets, writes


def test_sequential_goes_on_from_the_offset_then_wraps_to_zero_and_repeats_each_iteration():
    lay = Layout("seq", "read", 4 * KB, 10, 24 * KB, (1, 0), offset=8 * KB)
    _, offsets, writes = ops(lay, 20)
    assert (offsets // (4 * KB)).tolist() == [2, 3, 4, 5, 0, 1, 2, 3, 4, 5] * 2
    assert not writes.any() and lay.span == 24 * KB


def test_vector_spaces_the_transfers():
    lay = Layout("seq", "write", 4 * KB, 4, 1 << 30, (1, 0), offset=KB, spacing=12 * KB)
    _, offsets, writes = ops(lay, 4)
    assert offsets.tolist() == [KB, 13 * KB, 25 * KB, 37 * KB] and writes.all()
    assert lay.span == 41 * KB


def test_rw_alternates_read_and_write():
    _, _, writes = ops(Layout("seq", "alternate", 512, 8, 4096, (1, 0)), 8)
    assert writes.tolist() == [False, True] * 4


def test_random_places_are_on_the_lattice_inside_the_limit_with_the_read_share():
    lay = Layout("random", "mix", 4 * KB, 100, 1 << 20, (7, 0), offset=8 * KB, percR=70)
    _, offsets, writes = ops(lay, 20 * BLOCK)
    assert offsets.min() >= 8 * KB and offsets.max() + 4 * KB <= 1 << 20
    assert not (offsets % (4 * KB)).any()
    assert len(np.unique(offsets)) == lay.places() == 254
    assert 0.28 < writes.mean() < 0.32
    assert not ops(Layout("random", "mix", 512, 9, 1 << 20, (7, 0), percR=100), BLOCK)[2].any()
    assert ops(Layout("random", "mix", 512, 9, 1 << 20, (7, 0), percR=0), BLOCK)[2].all()


def test_scan_spreads_n_aligned_transfers_over_the_whole_file():
    size = 10_000_000
    lay = Layout("scan", "read", 64 * KB, 8, size, (1, 0), align=4096)
    _, offsets, _ = ops(lay, 8)
    steps = np.diff(offsets)
    assert offsets[0] == 0 and (steps == steps[0]).all() and not (offsets % 4096).any()
    assert size - 2 * steps[0] < offsets[-1] + 64 * KB <= size


def test_tree_transfers_stay_inside_their_file():
    sizes = (4 * KB, 64 * KB, 12 * KB)
    files, offsets, _ = ops(Layout("tree", "mix", 4 * KB, 50, 0, (3, 1), percR=50, sizes=sizes),
                            3 * BLOCK)
    assert set(files.tolist()) == {0, 1, 2}
    assert (offsets + 4 * KB <= np.array(sizes)[files]).all() and not (offsets % (4 * KB)).any()
    assert len(np.unique(offsets[files == 1])) == 16


def test_a_transfer_that_cannot_fit_is_refused():
    with pytest.raises(ValueError, match="no 8192-byte transfer fits between byte 0 and the "
                                         "file.s end at byte 4096"):
        Layout("seq", "read", 8 * KB, 4, 4 * KB, (1, 0))
    with pytest.raises(ValueError, match="100 4096-byte transfers do not fit"):
        Layout("scan", "read", 4 * KB, 100, 64 * KB, (1, 0), align=4096)


@pytest.mark.parametrize("order,ops_", [("random", "mix"), ("tree", "mix"), ("seq", "mix")])
def test_the_same_seed_makes_the_same_sequence_and_another_seed_another(order, ops_):
    def make(seed, row=0):
        return Layout(order, ops_, 4 * KB, 1000, 1 << 24, (seed, row), percR=50,
                      sizes=(1 << 20, 1 << 18))
    a, b = make(7), make(7)
    later = a.block(3)                          # any block, in any order: random access
    for x, y in zip(later, b.block(3)):
        assert np.array_equal(x, y)
    for x, y in zip(a.block(0), b.block(0)):
        assert np.array_equal(x, y)
    assert not np.array_equal(a.block(0)[2], make(8).block(0)[2])
    assert not np.array_equal(a.block(0)[2], make(7, row=1).block(0)[2])


def test_the_cursor_reads_the_blocks():
    lay = Layout("random", "mix", 512, 10, 1 << 20, (5, 2), percR=30)
    at = Cursor(lay, keep=2)
    files, offsets, writes = ops(lay, 3 * BLOCK)
    for k in (0, 1, BLOCK + 5, 2 * BLOCK + 7, 3, BLOCK * 3 - 1):
        assert at(k) == (files[k], offsets[k], writes[k])


def test_a_plan_gives_each_process_its_layout():
    plan = cmdline.parse("-seed 9 -p 2 -n 16 -KB 4 -mfileMB 1 -percR 60 -rand".split())
    procs = plan.procs()
    one, two = (actions.layout(p.group, p.row, plan.settings.seed, None) for p in procs)
    assert one.limit == two.limit == 1 << 20 and one.key == (9, 0) and two.key == (9, 1)
    again = cmdline.parse("-seed 9 -p 2 -n 16 -KB 4 -mfileMB 1 -percR 60 -rand".split())
    assert actions.layout(again.procs()[1].group, 1, again.settings.seed, None) == two
