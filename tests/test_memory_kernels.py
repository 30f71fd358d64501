"""Memory and STREAM kernels: data after n x i transfers, checks that catch corruption,
patterns word for word, strides, wiring, and no allocation in Triad's transfer."""
from __future__ import annotations

import collections
import ctypes
import errno
import json
import os
import re
import signal
import subprocess
import sys
import tracemalloc
import types

import numpy as np

import pytest

from torque_async import options
from torque_async.kinds import KINDS

from torque_async.kind_api import api, buffers
from workers import memory, patterns, stream_kernels as stream

from conftest import run_cli

P1, P2 = 0x5555555555555555, 0xAAAAAAAAAAAAAAAA
KEY = 0xDECAFBAD00000000
U64 = np.uint64


def make_local(**overrides):
    return options.Locals(**{"n": 4, "size": 256, "bt": 0, **overrides})


def make_ctx(action="load", row=7, seed=1, linesize=64, **overrides):
    group = types.SimpleNamespace(action=action, args=(), local=make_local(**overrides))
    return api.TestContext(group=group, proc=0, row=row, rng=np.random.default_rng(seed),
                       linesize=linesize)


def make(action, **overrides):
    return KINDS[action].load()(make_ctx(action, **overrides))


def run(test, transfers):
    for k in range(transfers):
        test.transfer(k)
    return test


def pattern(words, row=7, **overrides):
    """What patterns.fill writes into `words` words (the reference the tests compare with)."""
    buf = np.empty(words, U64)
    patterns.fill(buf, make_local(**overrides), np.random.default_rng(1), row)
    return buf


def chunk_words(buf, j, size):
    return buf[j * size:(j + 1) * size].view(U64)


# ---------------------------------------------------------------- the table of tests

def test_every_memory_action_is_registered_with_its_class():
    for action in ("bcopy", "bzero", "load", "store", "ls", "Scopy", "Sscale", "Sadd", "Striad"):
        cls = KINDS[action].load()
        assert cls.action == action and cls.__module__ in ("workers.memory", "workers.stream_kernels")


@pytest.mark.parametrize("action, factor", [
    ("bcopy", 2), ("bzero", 1), ("load", 1), ("store", 1), ("ls", 2),
    ("Scopy", 2), ("Sscale", 2), ("Sadd", 3), ("Striad", 3)])
def test_byte_accounting(action, factor):
    test = make(action, size=1000)
    assert test.transfer_bytes == 1000
    assert test.system_bytes == factor * 1000
    test.close()


@pytest.mark.parametrize("action, factor", [("load", 1), ("store", 1), ("ls", 2)])
def test_stride_above_the_line_counts_only_the_lines_touched(action, factor):
    test = make(action, size=1000, stride=128, linesize=64)
    assert test.words == 8                           # words at 0, 128, ..., 896
    assert test.transfer_bytes == 1000               # torque's transfer size
    assert test.system_bytes == factor * 8 * 64      # 8 lines of 64 bytes cross the bus
    test.close()


def test_stride_below_the_line_counts_the_whole_chunk():
    test = make("load", size=1000, stride=16, linesize=64)
    assert test.system_bytes == 1000
    test.close()


def test_stream_rounds_size_down_to_doubles():
    test = make("Striad", size=1003)
    assert test.transfer_bytes == 1000 and test.a.size == 4 * 125


# ---------------------------------------------------------------- memory tests: data

def test_bcopy_copies_every_chunk():
    test = make("bcopy")
    src0 = test.src.copy()
    # the destination starts unlike the source (complement of the pattern, key kept)
    assert np.array_equal(test.dst.view(U64)[1:], ~src0.view(U64)[1:])
    assert test.dst.view(U64)[0] == KEY | 7
    run(test, 4 * 3).check()
    assert np.array_equal(test.dst, test.src)
    assert np.array_equal(test.src, src0)
    assert np.array_equal(test.src.view(U64), pattern(4 * 256 // 8))


def test_bcopy_check_catches_a_wrong_byte():
    test = run(make("bcopy"), 8)
    test.dst[3 * 256 + 17] ^= 0x10
    with pytest.raises(api.TestError, match=r"bcopy: destination byte 785 \(chunk 3\)"):
        test.check()


def test_bcopy_check_catches_a_missing_copy():
    test = run(make("bcopy"), 2)      # chunks 0 and 1 copied, 2 and 3 not: check passes
    test.check()
    assert np.array_equal(test.dst[:512], test.src[:512])
    assert not np.array_equal(test.dst[512:], test.src[512:])
    test.transfers = 4                # pretend all four were copied
    with pytest.raises(api.TestError, match="chunk 2"):
        test.check()


def test_bzero_zeroes_every_chunk():
    test = make("bzero")
    assert test.buf.any()
    run(test, 4 * 2).check()
    assert not test.buf.any()


def test_bzero_partial_and_corrupt():
    test = run(make("bzero"), 3)
    test.check()
    assert not test.buf[:3 * 256].any() and test.buf[3 * 256:].all()
    test.buf[2 * 256 + 5] = 1
    with pytest.raises(api.TestError, match=r"byte 517 \(chunk 2\)"):
        test.check()


def strided_words(test, j):
    """The words transfer k = j (mod n) loads/stores, taken straight from the buffer."""
    return chunk_words(test.buf, j, test.size)[::test.stride // 8]


def test_load_sums_one_word_per_line():
    test = make("load", bt=102)       # random words: a sum no pattern symmetry can fake
    assert test.stride == 64 and test.words == 4
    before = test.buf.copy()
    run(test, 4 * 3).check()
    sums = [int(strided_words(test, j).astype(object).sum()) % 2**64 for j in range(4)]
    assert test.acc == 3 * sum(sums)
    assert np.array_equal(test.buf, before)          # loads leave memory alone


def test_load_partial_pass_and_corrupt_accumulator():
    test = run(make("load"), 6)       # chunks 0, 1 twice, chunks 2, 3 once
    per_chunk = [int(strided_words(test, j).astype(object).sum()) % 2**64 for j in range(4)]
    assert test.acc == 2 * per_chunk[0] + 2 * per_chunk[1] + per_chunk[2] + per_chunk[3]
    test.check()
    test.acc += 1
    with pytest.raises(api.TestError, match="load: the loads summed to"):
        test.check()


def test_load_check_uses_the_pattern_not_the_buffer_now():
    test = run(make("load"), 4)
    strided_words(test, 0)[2] ^= U64(1)              # memory changed after the loads
    test.check()                                     # the loads did read the pattern
    test.transfer(4)                                 # ... but this load reads the change
    with pytest.raises(api.TestError):
        test.check()


def test_store_writes_the_value_once_per_line_only():
    test = make("store", size=512, stride=128)
    value = ~P1 & (2**64 - 1)
    run(test, 4 * 2).check()
    words = test.buf.view(U64)
    reference = pattern(4 * 512 // 8)
    stored = np.zeros(words.size, bool)
    for j in range(4):
        stored[j * 64:(j + 1) * 64:16] = True        # stride 128 bytes: every 16th word
    assert stored.sum() == 16
    assert (words[stored] == value).all()
    assert np.array_equal(words[~stored], reference[~stored])


def test_store_stride_defaults_to_the_line_size():
    test = run(make("store", linesize=128, size=512), 4)
    assert test.stride == 128 and test.words == 4
    assert (test.buf.view(U64).reshape(4, 64)[:, ::16] == ~U64(P1)).all()
    assert (test.buf.view(U64).reshape(4, 64)[:, 1::16] == U64(P1)).all()


def test_store_check_catches_a_lost_store():
    test = run(make("store"), 4)
    strided_words(test, 2)[3] = U64(0)
    with pytest.raises(api.TestError, match=r"store: word at byte 704 \(chunk 2\) holds 0x0{16}"):
        test.check()


def test_ls_loads_then_stores():
    test = make("ls", bt=100)
    value = ~P1 & (2**64 - 1)
    first = [int(strided_words(test, j).astype(object).sum()) % 2**64 for j in range(4)]
    run(test, 4 * 3).check()
    # first pass reads the pattern, the two later passes read back what was stored
    assert test.acc == sum(first) + 2 * 4 * (test.words * value % 2**64)
    assert all((strided_words(test, j) == value).all() for j in range(4))
    test.acc += 2
    with pytest.raises(api.TestError, match="ls: the loads summed"):
        test.check()


def test_ls_check_catches_a_lost_store():
    test = run(make("ls"), 4)
    strided_words(test, 0)[1] = U64(P1)
    with pytest.raises(api.TestError, match="ls: word at byte 64"):
        test.check()


def test_unaligned_transfer_size():
    test = make("store", size=100, stride=24)        # chunks start at odd word offsets
    run(test, 8).check()
    assert test.words == 4
    raw = test.buf
    for j in range(4):
        for w in range(4):
            at = j * 100 + w * 24
            assert int.from_bytes(raw[at:at + 8].tobytes(), "little") == ~P1 & (2**64 - 1)


def test_unaligned_loads():
    test = make("ls", size=100, stride=12, bt=102)     # words at odd byte offsets
    raw = test.buf.copy()
    run(test, 4).check()
    assert test.words == 8
    def word(at):
        return int.from_bytes(raw[at:at + 8].tobytes(), "little")
    assert test.acc == sum(sum(word(j * 100 + w * 12) for w in range(8)) % 2**64
                           for j in range(4))


@pytest.mark.parametrize("action, overrides, message", [
    ("store", {"size": 7}, "holds no 64-bit word"),
    ("Sadd", {"size": 4}, "at least 8 bytes"),
])
def test_bad_settings_are_refused(action, overrides, message):
    with pytest.raises(api.TestError, match=message):
        make(action, **overrides)


# ---------------------------------------------------------------- buffers

def test_buffers_are_page_aligned():
    import mmap
    for test in (make("bcopy", size=1000), make("Striad", size=1000)):
        for array in (getattr(test, "src", None), getattr(test, "dst", None),
                      getattr(test, "a", None), getattr(test, "c", None)):
            if array is not None:
                assert array.ctypes.data % mmap.PAGESIZE == 0
        test.close()


def locked_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmLck"))


def test_wire_locks_buffers():
    before = locked_kb()
    test = make("load", wire=True, size=4096)
    assert locked_kb() - before >= 16    # kB: 4 chunks x 4 KiB
    test.close()
    assert locked_kb() == before         # munmap unlocked them


def test_wire_refused_names_rlimit_memlock(monkeypatch):
    def refuse(address, length):
        ctypes.set_errno(errno.ENOMEM)
        return -1
    monkeypatch.setattr(buffers, "_libc", types.SimpleNamespace(mlock=refuse))
    with pytest.raises(api.TestError, match="RLIMIT_MEMLOCK"):
        make("bzero", wire=True)
    with pytest.raises(api.TestError, match="-wire: mlock"):
        make("Scopy", wire=True)


@pytest.mark.parametrize("action", ["bcopy", "bzero", "ls", "Striad"])
def test_close_unmaps_the_buffers(action):
    test = run(make(action, size=4096), 4)
    test.check()
    maps = list(test._buffers._maps)
    assert maps and not any(m.closed for m in maps)
    test.close()
    assert all(m.closed for m in maps)


# ---------------------------------------------------------------- patterns

@pytest.mark.parametrize("bt, period", [
    (0, [P1]),
    (100, [P1, P2]),
    (50, [P1, P1, P2, P2]),
    (75, [P1, P2, P1, P2, P2, P1, P2, P1]),
])
def test_pattern_words(bt, period):
    words = pattern(21, bt=bt, bpkey=0)
    assert [int(w) for w in words] == [period[i % len(period)] for i in range(21)]


def test_pattern_uses_bp1_and_bp2():
    words = pattern(6, bt=100, bpkey=0, bp1=0x0123456789ABCDEF, bp2=0xFEDCBA9876543210)
    assert [int(w) for w in words] == [0x0123456789ABCDEF, 0xFEDCBA9876543210] * 3


def test_pattern_walking_one():
    words = pattern(130, bt=101, bpkey=0)
    assert [int(w) for w in words] == [1 << (i % 64) for i in range(130)]


def test_pattern_key_starts_the_buffer():
    words = pattern(5, row=0x2A, bt=100)
    assert int(words[0]) == 0xDECAFBAD0000002A
    assert [int(w) for w in words[1:]] == [P2, P1, P2, P1]
    assert int(pattern(5, bpkey=0)[0]) == P1


def test_a_large_fill_lets_a_signal_handler_run_while_it_fills():
    """A stop signal is handled between bytecodes: -sp's fill of 2 GB in one numpy call held
    the command 13 s after a Ctrl-C. A timer's handler finds the fill at several places in its
    pieces (`r`, the piece it copies); every word is still the pattern's."""
    words = np.empty(32 * patterns.COPY_BLOCK * patterns.FILL_ROWS + 3, U64)     # 512 MiB
    seen = set()

    def handler(_signum, frame):
        if frame.f_code is patterns.fill.__code__ and "r" in frame.f_locals:
            seen.add(frame.f_locals["r"])
    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    try:
        patterns.fill(words, make_local(bt=100, bpkey=0), np.random.default_rng(0), 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(seen) >= 3
    assert (words[1::2] == P2).all() and (words[::2] == P1).all()


def test_pattern_invert_keeps_the_key():
    local = make_local(bt=50)
    words = np.empty(8, U64)
    patterns.fill(words, local, np.random.default_rng(0), 3, invert=True)
    assert [int(w) for w in words] == [KEY | 3, P2, P1, P1, P2, P2, P1, P1]


@pytest.mark.parametrize("overrides", [{"btr": True, "bt": 100}, {"bt": 102}])
def test_pattern_random_is_reproducible(overrides):
    def draw(seed, words=patterns.RANDOM_BLOCK + 100):   # more than one block
        buf = np.empty(words, U64)
        patterns.fill(buf, make_local(bpkey=0, **overrides), np.random.default_rng(seed), 0)
        return buf
    first, again, other = draw(5), draw(5), draw(6)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    assert len(np.unique(first)) > 0.99 * first.size   # not a repeating pattern
    assert not np.isin(first[:16], [P1, P2]).all()      # -btr wins over -bt


def test_bt_parses_exactly_the_patterns_there_are():
    parse = options.OPTIONS["bt"].args[0].parse
    accepted = []
    for value in range(-1, 104):
        try:
            accepted.append(parse(str(value)))
        except options.ArgError:
            pass
    assert accepted == sorted([*patterns.PERIODS, patterns.WALKING_ONE, patterns.RANDOM])


def test_pattern_refuses_a_non_contiguous_buffer():
    with pytest.raises(ValueError):
        patterns.fill(np.empty(16, U64)[::2], make_local(), np.random.default_rng(0), 0)


# ---------------------------------------------------------------- STREAM

STREAM_OUT = {"Scopy": ("c", 1.0), "Sscale": ("b", 1.5), "Sadd": ("c", 3.0),
              "Striad": ("a", 3.5)}
INITIAL = {"a": 1.0, "b": 2.0, "c": 0.5}


@pytest.mark.parametrize("action", list(STREAM_OUT))
def test_stream_kernel_results(action):
    test = make(action, n=4, size=8 * 1000)
    run(test, 4 * 3).check()
    name, value = STREAM_OUT[action]
    for array in "abc":
        want = value if array == name else INITIAL[array]
        assert (getattr(test, array) == want).all(), array


@pytest.mark.parametrize("action", list(STREAM_OUT))
def test_stream_untouched_chunks_keep_their_values(action):
    test = run(make(action, n=4, size=800), 3)
    test.check()
    name, value = STREAM_OUT[action]
    out = getattr(test, name)
    assert (out[:300] == value).all() and (out[300:] == INITIAL[name]).all()


@pytest.mark.parametrize("action", list(STREAM_OUT))
@pytest.mark.parametrize("array", "abc")
def test_stream_check_catches_one_bad_element(action, array):
    test = run(make(action, n=4, size=800), 8)
    getattr(test, array)[237] *= 1 + 1e-12                 # beyond STREAM's 1e-13
    with pytest.raises(api.TestError, match=rf"{action}: {array}\[237\] = "):
        test.check()


def test_stream_check_tolerates_rounding_and_catches_nan():
    test = run(make("Striad", n=2, size=800), 2)
    test.a[5] *= 1 + 1e-15                                  # within 1e-13
    test.check()
    test.c[99] = np.nan
    with pytest.raises(api.TestError, match=r"c\[99\] = nan"):
        test.check()


def injected(monkeypatch, took):
    """Calibration timings made up: pass_ns runs the pass (it must work) and returns took[name];
    the names timed, in order, are returned."""
    timed = []
    monkeypatch.setattr(memory.MemoryTest, "pass_ns",
                        lambda self, name, run: (run(), timed.append(name), took[name])[2])
    return timed


@pytest.mark.parametrize("way", list(stream.WAYS))
def test_triad_keeps_the_block_size_then_the_way_that_ran_fastest(monkeypatch, way):
    monkeypatch.setattr(stream, "l2_bytes", lambda: 7 * 32)     # candidates 7, 14 ... doubles
    monkeypatch.setattr(stream.sysinfo, "cache_sizes", lambda: {"1Data": 0})
    sizes = {"8 bytes": 90, "56 bytes": 50, "112 bytes": 40, "224 bytes": 70, "448 bytes": 60,
             "800 bytes": 80}                                   # ns a pass, made up
    ways = {name: 30 if name == way else 35 for name in stream.WAYS}
    timed = injected(monkeypatch, sizes | ways)
    test = make("Striad", n=3, size=800)                        # 100 doubles a chunk
    assert test.candidates() == [1, 7, 14, 28, 56, 100]
    passes = memory.timed.CALIBRATION_PASSES
    assert timed == list(sizes) * passes + list(ways) * passes  # in rounds of every one
    assert test.step == 14 and len(test.block_views[0]) == 8    # 7 blocks of 14, then 2
    assert test.chosen == {"Triad blocks (sized the scratch way) of": "112 bytes", "Triad by": way}
    assert test.info.endswith("Triad blocks (sized the scratch way) of 112 bytes, the fastest "
                              "here of "
                              "8 bytes, 56 bytes, 112 bytes, 224 bytes, 448 bytes, 800 bytes; "
                              f"Triad by {way}, the fastest here of {', '.join(stream.WAYS)}")
    assert test.run.__closure__ is not None and stream.WAYS[way] in \
        [cell.cell_contents for cell in test.run.__closure__]   # the way kept runs
    blocks = [a for a, _b, _c, _s in test.block_views[1]]       # chunk 1: a[100:200]
    assert blocks[0].ctypes.data == test.a[100:].ctypes.data
    assert sum(b.size for b in blocks) == 100
    assert (test.a == 1.0).all()                                # the timing passes left no trace
    run(test, 2).check()
    assert (test.a[:200] == 3.5).all() and (test.a[200:] == 1.0).all()
    test.c[250] = 1.0                                           # Triad reads c ...
    test.transfer(2)
    with pytest.raises(api.TestError, match=r"Striad: a\[250\] = 5.0"):
        test.check()                                            # ... and a shows it


def test_a_lone_candidate_is_kept_untimed_and_said_to_be_the_only_one(monkeypatch):
    """One double a chunk: one block size, which read 'the fastest here of 8 bytes'."""
    timed = injected(monkeypatch, {name: 1 for name in stream.WAYS})
    test = make("Striad", n=2, size=8)
    assert test.candidates() == [1] and timed == list(stream.WAYS) * memory.timed.CALIBRATION_PASSES
    assert "Triad blocks (sized the scratch way) of 8 bytes (the only one here); Triad by " in \
        test.info
    run(test, 2).check()


@pytest.mark.parametrize("way", list(stream.WAYS.values()))
def test_each_triad_way_writes_b_plus_s_times_c_and_leaves_b_and_c(way):
    a, b, c = np.ones(10), np.full(10, 2.0), np.linspace(-1, 1, 10)
    blocks = [(a[i:i + 4], b[i:i + 4], c[i:i + 4], np.empty(4)[:min(4, 10 - i)])
              for i in range(0, 10, 4)]
    way(blocks)
    assert (a == np.linspace(-1, 1, 10) * stream.SCALAR + 2.0).all()
    assert (b == 2.0).all() and (c == np.linspace(-1, 1, 10)).all()


def test_triad_calibration_leaves_the_arrays_as_set_up():
    test = make("Striad", n=2, size=4096)                       # timed for real
    assert test.step in test.candidates()
    assert (test.a == 1.0).all() and (test.b == 2.0).all() and (test.c == 0.5).all()
    test.check()                                                # no transfer: all untouched


def test_triad_transfer_allocates_no_temporary():
    chunk = 4 << 20
    test = make("Striad", n=2, size=chunk)
    tracemalloc.start()
    try:
        # the measurement sees numpy's allocations: the naive Triad would be caught
        a, b, c = (x[:chunk // 8] for x in (test.a, test.b, test.c))
        tracemalloc.reset_peak()
        a[:] = b + 3.0 * c
        naive = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        run(test, 6)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert naive >= chunk
    assert peak < chunk // 64, peak
    test.check()


# ---------------------------------------------------------------- -offset: "a file or buffer"

@pytest.mark.parametrize("action", ["bzero", "store", "bcopy", "ls"])
def test_offset_moves_the_working_set_into_the_buffer_and_leaves_the_bytes_before_it(action):
    at = 3 * 64 + 8
    test, fresh = run(make(action, offset=at), 4), make(action, offset=at)
    out, untouched = (test.dst, fresh.dst) if action == "bcopy" else (test.buf, fresh.buf)
    assert out.size == at + 4 * 256
    assert np.array_equal(out[:at], untouched[:at])           # before the offset: the pattern
    if action == "bcopy":
        assert np.array_equal(out[at:], test.src[at:])        # the working set was copied
    else:
        plain = run(make(action), 4).buf
        assert np.array_equal(out[at:], plain)                # as without an offset
        assert not np.array_equal(out[at:], untouched[at:])  # ... and was worked on
    test.check()


def test_offset_moves_stream_arrays_even_unaligned():
    test = run(make("Striad", offset=4), 4)
    assert test.a.ctypes.data % 8 == 4 and not test.a.flags.aligned
    test.check()
    assert float(test.a[0]) == stream.INITIAL["b"] + stream.SCALAR * stream.INITIAL["c"]


@pytest.mark.parametrize("faster", list(stream.COPIES))
def test_copy_keeps_the_way_that_ran_faster_and_either_way_copies_bit_for_bit(monkeypatch, faster):
    injected(monkeypatch, {name: 10 if name == faster else 20 for name in stream.COPIES})
    test = make("Scopy", n=3, size=800)
    assert test.chosen == {"Copy by": faster}
    assert test.info.endswith(f"Copy by {faster}, the fastest here of "
                              f"{', '.join(stream.COPIES)}")
    assert (test.c == 0.5).all()                    # the timing passes left no trace
    test.a[:] = np.random.default_rng(3).random(test.a.size)
    run(test, 3)
    assert np.array_equal(test.c.view(U64), test.a.view(U64))


def test_the_way_with_the_fastest_pass_of_any_round_wins(monkeypatch):
    rounds = {"fill": iter([30, 30, 10]), "np.copyto": iter([20, 20, 20]),
              "np.bitwise_or": iter([25, 15, 25])}   # fill's one undisturbed pass: the last
    monkeypatch.setattr(memory.MemoryTest, "pass_ns",
                        lambda self, name, run: (run(), next(rounds[name]))[1])
    test = make("store", n=3, size=256)
    assert test.chosen == {"stores by": "fill"}
    assert all(next(left, None) is None for left in rounds.values())    # every round was timed


# every kernel set-up chooses, each way forced to win: (action, what, way)
CHOICES = [("bzero", "zeroed by", "fill"), ("bzero", "zeroed by", "memset"),
           ("load", "loads by", "np.dot"), ("load", "loads by", "np.add.reduce"),
           ("store", "stores by", "fill"), ("store", "stores by", "np.copyto"),
           ("store", "stores by", "np.bitwise_or"),
           ("ls", "loads by", "np.add.reduce"), ("ls", "stores by", "np.copyto"),
           ("ls", "stores by", "np.bitwise_or")]


@pytest.mark.parametrize("action, what, way", CHOICES)
@pytest.mark.parametrize("offset", [0, 12])
def test_every_chosen_way_does_the_kernel_and_the_choice_is_recorded(monkeypatch, action, what,
                                                                     way, offset):
    monkeypatch.setattr(memory.sysinfo, "cache_sizes", lambda: {"3Unified": 1})   # 1 KiB
    injected(monkeypatch, collections.defaultdict(lambda: 20, {way: 10}))
    test = make(action, n=32, size=128, offset=offset, bt=100)  # 16 chunks a pass (2 KiB)
    assert test.calibration_chunks() == 16 and test.chosen[what] == way
    assert f"{what} {way}, the fastest here of " in test.info
    assert not test.info.startswith(";")
    fresh = make(action, n=32, size=128, offset=offset, bt=100)
    assert np.array_equal(test.buf, fresh.buf)          # what the passes wrote was put back
    run(test, 32 + 5)                                   # every chunk, then 5 again
    test.check()
    words = [np.ndarray((2,), U64, test.buf, offset + j * 128, (64,)) for j in range(32)]
    if action in ("store", "ls"):
        assert all((w == U64(~P1 & patterns.MASK64)).all() for w in words)
    if action == "load":                                # what was loaded: the pattern, as set up
        sums = [sum(int(x) for x in np.ndarray((2,), U64, fresh.buf, offset + j * 128, (64,)))
                & patterns.MASK64 for j in range(32)]             # a transfer's sum wraps
        assert test.acc == sum(sums) + sum(sums[:5])
    if action == "bzero":
        inside = test.buf[offset:offset + 32 * 128]
        assert not inside.any() and np.array_equal(test.buf[:offset], fresh.buf[:offset])


def test_a_calibration_pass_covers_twice_the_largest_cache_over_all_arrays(monkeypatch):
    monkeypatch.setattr(memory.sysinfo, "cache_sizes", lambda: {"1Data": 1, "3Unified": 3})
    assert make("bzero", n=100, size=1024).calibration_chunks() == 6     # 6 KiB, one array
    assert make("Sadd", n=100, size=1024).calibration_chunks() == 2      # 3 arrays of 2 KiB
    assert make("bzero", n=4, size=1024).calibration_chunks() == 4       # at most n
    assert make("load", n=100, size=1024, stride=256).calibration_chunks() == 24   # 4 lines
    monkeypatch.setattr(memory.sysinfo, "cache_sizes", dict)             # none known: 1 MiB
    assert make("bzero", n=1000, size=1 << 16).calibration_chunks() == 32


def test_the_run_names_what_set_up_chose_in_the_group_block_and_the_json():
    r = run_cli("-smkey", "0x7E18", "-json", "-", "-n", "4", "-i", "1", "-KB", "64", "-bzero",
                "-n", "4", "-i", "1", "-KB", "64", "-Striad")
    assert r.returncode == 0, r.stderr
    infos = [t["record"]["info"] for t in json.loads(r.stdout)["tests"]]
    assert re.search(r"zeroed by (fill|memset), the fastest here of fill, memset", infos[0])
    assert re.search(r"Triad blocks \(sized the scratch way\) of .* bytes, the fastest here of ",
                     infos[1])
    for info in infos:
        assert info.split("; ")[-1] in r.stderr             # the report prints it


def test_numpy_blas_runs_one_thread_in_the_command_and_so_in_its_workers():
    """numpy's OpenBLAS ran a float np.dot on every CPU and kept a helper thread that spun after
    numpy loaded and after each call, whatever OPENBLAS_NUM_THREADS the user's shell set."""
    code = ("import os, torque_async, numpy as np; x = np.ones(1 << 22); np.dot(x, x); "
            "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1"]          # threads of the process, what children inherit
