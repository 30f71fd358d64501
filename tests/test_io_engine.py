"""The I/O engines: the same test bodies on io_uring, threads and sync."""
from __future__ import annotations

import asyncio
import ctypes
import errno
import inspect
import itertools
import mmap
import os
import threading
import time

import pytest
import uvloop

from torque_async.io import engine as engines
from torque_async.io import ring as rings, uring

from conftest import NO_URING, needs_uring

ENGINES = [pytest.param("uring", marks=needs_uring), "threads", "sync"]


def on_loop(body):
    return uvloop.run(body())


async def in_lane(eng, body):
    """Run `body` as the engine's one lane (transfers are awaited only inside lanes)."""
    out = []

    async def lane():
        out.append(await body())
    await eng.drive([lane()])
    return out[0]


def buffers(count: int, size: int = 4096) -> list[memoryview]:
    area = mmap.mmap(-1, count * size)
    return [memoryview(area)[i * size:(i + 1) * size] for i in range(count)]


@pytest.fixture(params=ENGINES)
def name(request):
    return request.param


def test_a_written_block_reads_back_and_completion_follows_issue(name, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"\0" * 16384)
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)

    async def body():
        eng = engines.open_engine(name)
        src, dst = buffers(2)
        src[:] = bytes(range(256)) * 16
        a, b = eng.register([src, dst])
        t0 = time.monotonic_ns()

        async def transfers():
            return await eng.submit(True, fd, a, 8192), await eng.submit(False, fd, b, 8192)
        t1, t2 = await in_lane(eng, transfers)
        await eng.forget([a, b])
        eng.close()
        return t0, t1, t2, bytes(dst)
    t0, t1, t2, got = on_loop(body)
    os.close(fd)
    assert t0 < t1 < t2 <= time.monotonic_ns()
    assert got == bytes(range(256)) * 16
    assert path.read_bytes()[8192:12288] == got


def test_a_short_read_past_the_end_raises(name, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 6000)
    fd = os.open(path, os.O_RDONLY)

    async def body():
        eng = engines.open_engine(name)
        (buf,) = eng.register(buffers(1))

        async def failing():
            with pytest.raises(OSError, match="read 1904 of 4096 bytes"):
                await eng.submit(False, fd, buf, 4096)
            with pytest.raises(OSError) as bad:
                await eng.submit(False, 9999, buf, 0)
            assert bad.value.errno == 9                    # EBADF
        try:
            await in_lane(eng, failing)
        finally:
            await eng.forget([buf])
            eng.close()
    on_loop(body)
    os.close(fd)


def test_pause_waits_until_the_time_given(name):
    async def body():
        eng = engines.open_engine(name)
        until = time.monotonic_ns() + 3_000_000

        async def paused():
            await eng.pause(until)
            return time.monotonic_ns()
        t = await in_lane(eng, paused)
        eng.close()
        return until, t
    until, t = on_loop(body)
    assert t >= until


def test_the_loop_runs_other_work_during_a_long_pause(name):
    async def body():
        eng, woke = engines.open_engine(name), []

        async def other():
            await asyncio.sleep(0.005)
            woke.append(time.monotonic_ns())
        waking = asyncio.ensure_future(other())
        until = time.monotonic_ns() + 50_000_000

        async def paused():
            await eng.pause(until)
            return time.monotonic_ns()
        t = await in_lane(eng, paused)
        await waking
        await eng.forget([])
        eng.close()
        return until, t, woke[0]
    until, t, woke = on_loop(body)
    assert woke < until - 20_000_000 and t >= until


def test_threads_run_each_lane_in_its_own_thread_the_others_on_the_loop(name):
    async def body():
        eng, seen = engines.open_engine(name), []

        async def lane():
            seen.append(threading.current_thread())
        await eng.drive([lane() for _ in range(4)])
        await eng.forget([])
        eng.close()
        return seen
    seen = on_loop(body)
    main = threading.main_thread()
    assert len(seen) == 4
    assert (len(set(seen)) == 4 and main not in seen) if name == "threads" else set(seen) == {main}


def test_a_lane_that_fails_fails_its_drive(name):
    async def body():
        eng, ended = engines.open_engine(name), []

        async def fine():
            ended.append("fine")

        async def failing():
            raise ValueError("lane 1 broke")
        try:
            with pytest.raises(ValueError, match="lane 1 broke"):
                await eng.drive([fine(), failing(), fine()])
        finally:
            await eng.forget([])
            eng.close()
        return ended
    assert on_loop(body) == ["fine", "fine"]


@needs_uring
def test_the_ring_is_shared_and_closed_by_its_last_user():
    async def body():
        one, two = engines.open_engine("uring"), engines.open_engine("uring")
        assert one is two
        one.close()
        assert uring.UringEngine._shared is two
        two.close()
        return uring.UringEngine._shared
    assert on_loop(body) is None


@needs_uring
def test_forget_waits_for_a_transfer_in_flight():
    r, w = os.pipe()

    async def body():
        eng = engines.open_engine("uring")
        (buf,) = eng.register(buffers(1, 64))

        async def reading():                       # a pipe: the read waits for data
            return await eng.submit(False, r, buf, 0)
        driving = asyncio.ensure_future(in_lane(eng, reading))
        await asyncio.sleep(0)
        forgetting = asyncio.ensure_future(eng.forget([buf]))
        await asyncio.sleep(0.01)
        early = forgetting.done()
        os.write(w, b"y" * 64)
        await forgetting
        t = await driving
        eng.close()
        return early, t, buf in eng.iovecs
    early, t, kept = on_loop(body)
    os.close(r), os.close(w)
    assert not early and t > 0 and not kept


@needs_uring
def test_a_slot_whose_done_raises_fails_its_hold_and_the_rest_of_the_batch_is_answered(
        tmp_path):
    """A bug in a batch driver's done(): that slot ends and hold() raises the error, and the
    other completions of the same batch still reach their done() (the error escaped the
    engine's reader, which lost them and left hold() waiting for ever, even under SIGTERM)."""
    (tmp_path / "f").write_bytes(os.urandom(3 * 4096))
    fd = os.open(tmp_path / "f", os.O_RDONLY)

    async def body():
        eng = engines.open_engine("uring")
        ids = eng.register(buffers(3))
        finished, got = asyncio.get_running_loop().create_future(), []

        def done(slot, res, t, at):
            if not t:                              # its first transfer, before any completion
                return False, fd, slot.j * 4096
            got.append(slot.j)
            if slot.j == 1:
                raise RuntimeError("a bug in done")
            return None
        slots = eng.slots(done, ids, ids)
        with pytest.raises(RuntimeError, match="a bug in done"):
            await asyncio.wait_for(eng.hold(slots, finished), 10)
        await asyncio.wait_for(eng.forget(ids), 10)    # nothing left in flight
        eng.close()
        return got
    got = on_loop(body)
    os.close(fd)
    assert sorted(got) == [0, 1, 2]


@needs_uring
@pytest.mark.parametrize("path", ["lane", "slot"])
def test_a_submit_the_kernel_refuses_for_now_goes_again_with_nothing_in_flight(path, tmp_path):
    """EAGAIN from io_uring_enter leaves the SQE queued; with no other transfer in flight no
    completion brings the next submit, so the engine submits again itself."""
    data = os.urandom(4096)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)

    async def body():
        eng = engines.open_engine("uring")
        (buf,) = eng.register(views := buffers(1))
        real, refused = eng.ring.enter, []

        def enter(call, ring_fd, n, *rest):
            if n and len(refused) < 3:             # the first three submits: not now
                refused.append(n)
                ctypes.set_errno(errno.EAGAIN)
                return -1
            return real(call, ring_fd, n, *rest)
        eng.ring.enter = enter
        if path == "lane":
            await asyncio.wait_for(in_lane(eng, lambda: eng.submit(False, fd, buf, 0)), 10)
        else:
            finished, got = asyncio.get_running_loop().create_future(), []

            def done(slot, res, t, at):
                if t:                              # a completion, not start()'s call
                    got.append(res)
                    finished.set_result(None)
                    return None
                return False, fd, 0
            slots = eng.slots(done, [buf], [buf])
            await asyncio.wait_for(eng.hold(slots, finished), 10)
            assert got == [4096]
        await eng.forget([buf])
        eng.close()
        return refused, bytes(views[0])
    refused, got = on_loop(body)
    os.close(fd)
    assert refused == [1, 1, 1] and got == data


def test_sync_batches_make_each_slot_s_transfers_in_turn_giving_the_loop_its_turns(
        tmp_path, monkeypatch):
    """The sync engine's slots: one blocking call a transfer, the slots in turn, each timed from
    just before its call; with YIELD_NS 0 the loop gets a turn after every transfer, so another
    coroutine runs between any two; a failed call reaches done() as io_uring's would, a
    negative errno."""
    monkeypatch.setattr(engines, "YIELD_NS", 0)
    data = os.urandom(2 * 4096)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    bad = -1                                       # no descriptor: EBADF

    async def body():
        eng = engines.open_engine("sync")
        ids = eng.register(views := buffers(2))
        order, turns = [], [0]
        finished, left = asyncio.get_running_loop().create_future(), [2]

        async def other():
            while not finished.done():
                turns[0] += 1
                await asyncio.sleep(0)

        def done(slot, res, t, at):
            if t:
                assert slot.t0 < t
                order.append((slot.j, res, bytes(views[slot.j]) if res > 0 else b""))
            slot.k += 1
            if slot.k == 4 or res < 0:
                left[0] -= 1
                if not left[0]:
                    finished.set_result(None)
                return None
            return False, bad if (slot.j, slot.k) == (1, 3) else fd, slot.j * 4096
        slots = eng.slots(done, ids, ids)
        spinner = asyncio.ensure_future(other())
        await asyncio.wait_for(eng.hold(slots, finished), 10)
        await spinner
        eng.close()
        return order, turns[0]
    order, turns = on_loop(body)
    os.close(fd)
    part = [data[:4096], data[4096:]]
    assert order == [(0, 4096, part[0]), (1, 4096, part[1])] * 3 + \
        [(0, 4096, part[0]), (1, -errno.EBADF, b"")]
    assert turns >= len(order) - 1


def test_sync_batches_of_two_tests_take_whole_turns_and_let_others_run_first(tmp_path,
                                                                           monkeypatch):
    """Two tests' sync batches on one loop, each call 0.3 ms on a fake clock: each runs a whole
    slice (YIELD_NS) of transfers per turn (its slice counted from its turn's end: counted from
    its start, the test just back yielded after one transfer and the other kept the loop), the
    next transfer claimed after the turn it gave the others (the first of a turn answers the
    slice before); and
    a coroutine ready before the batches start runs before their first transfer (a stream due
    at the start was late)."""
    clock = iter(range(0, 10**12, 300_000))
    monkeypatch.setattr(engines, "now", lambda: next(clock))
    (tmp_path / "f").write_bytes(bytes(4096))
    fd = os.open(tmp_path / "f", os.O_RDONLY)

    claims = []

    async def body():
        order, finished = [], []

        async def one(name):
            eng = engines.open_engine("sync")
            ids = eng.register(buffers(1))
            done_f = asyncio.get_running_loop().create_future()
            finished.append(done_f)

            def done(slot, res, t, at):
                if t:
                    order.append(name)
                    claims.append((name, t, at))
                slot.k += 1
                if slot.k == 40:
                    done_f.set_result(None)
                    return None
                return False, fd, 0
            slots = eng.slots(done, ids, ids)
            if name == "a":                        # ready just before the batches start
                asyncio.get_running_loop().call_soon(order.append, "other")
            await eng.hold(slots, done_f)
        await asyncio.gather(one("a"), one("b"))
        return order
    order = on_loop(body)
    os.close(fd)
    assert order[0] == "other" and order.count("a") == order.count("b") == 40
    runs = [len(list(g)) for _, g in itertools.groupby(order[1:])]
    assert min(runs[2:-2]) >= 2, runs                # whole slices, never one transfer a turn
                                                     # (at each one's first and last turn its
                                                     # slice's last is answered on the next)
    # a slice's last transfer, completed before the turn the others took, is claimed after it
    # (claimed before it, under -t it started past a deadline their slices crossed)
    held = [(t_was, at) for (was, t_was, _), (name, t, at) in zip(claims, claims[1:])
            if was != name and t < t_was]
    assert len(held) > 20 and all(at > t_was for t_was, at in held)


def test_auto_falls_back_to_threads_and_says_why(tmp_path, monkeypatch):
    assert engines.choose("auto", False) == (
        ("uring", "") if NO_URING is None else ("threads", f"io_uring unavailable: {NO_URING}"))
    disabled = tmp_path / "io_uring_disabled"
    disabled.write_text("2\n")
    monkeypatch.setattr(uring, "DISABLED", str(disabled))
    assert engines.choose("auto", False) == ("threads", f"io_uring unavailable: {disabled} = 2")
    assert engines.choose("sync", False) == ("sync", "")
    assert engines.choose("auto", True) == ("sync", "auto: the only transfer outstanding on the loop")
    assert engines.choose("uring", True) == ("uring", "")
    monkeypatch.setattr(rings.platform, "machine", lambda: "aarch64")
    assert uring.unavailable() == ("the ring is driven without memory barriers, which only "
                                   "x86-64 allows (aarch64)")


def test_a_kernel_that_refuses_the_ring_makes_it_unavailable_saying_why(monkeypatch):
    def refused(entries):
        raise OSError(errno.ENOSYS, "io_uring_setup: Function not implemented")
    monkeypatch.setattr(rings, "Ring", refused)
    uring.probe.cache_clear()
    try:
        assert uring.unavailable() == "io_uring_setup: Function not implemented"
    finally:
        uring.probe.cache_clear()


@needs_uring
def test_uring_transfers_are_awaited_only_inside_lanes(tmp_path):
    async def body():
        eng = engines.open_engine("uring")
        (buf,) = eng.register(buffers(1))
        try:
            with pytest.raises(RuntimeError, match="only by lanes"):
                await eng.submit(False, 0, buf, 0)
        finally:
            await eng.forget([buf])
            eng.close()
    on_loop(body)


@needs_uring
def test_two_tests_share_the_ring_and_each_lane_gets_its_own_data(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"".join(bytes([i]) * 4096 for i in range(64)))
    fd = os.open(path, os.O_RDONLY)

    async def body():
        eng = engines.open_engine("uring")
        views = buffers(8)
        ids = eng.register(views)
        seen: list[tuple[int, int]] = []

        async def lane(j: int):
            for block in range(j, 64, 8):              # lanes j read blocks j, j+8, ...
                await eng.submit(False, fd, ids[j], block * 4096)
                assert bytes(views[j]) == bytes([block]) * 4096
                seen.append((j, block))
        await asyncio.gather(eng.drive([lane(j) for j in range(4)]),
                             eng.drive([lane(j) for j in range(4, 8)]))
        await eng.forget(ids)
        eng.close()
        return seen
    seen = on_loop(body)
    os.close(fd)
    assert sorted(b for _, b in seen) == list(range(64))
    assert len({j for j, _ in seen[:16]}) == 8              # the lanes took turns


@needs_uring
def test_a_cancelled_drive_closes_its_lanes_and_forget_waits_for_their_transfers():
    r, w = os.pipe()

    async def body():
        eng = engines.open_engine("uring")
        (buf,) = eng.register(buffers(1, 64))
        after = []

        async def lane():
            await eng.submit(False, r, buf, 0)        # a pipe: waits until written
            after.append("ran on")
        driving = asyncio.ensure_future(eng.drive([lane()]))
        await asyncio.sleep(0.01)
        driving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driving
        forgetting = asyncio.ensure_future(eng.forget([buf]))
        await asyncio.sleep(0.01)
        early = forgetting.done()
        os.write(w, b"z" * 64)
        await forgetting
        eng.close()
        return early, after
    early, after = on_loop(body)
    os.close(r), os.close(w)
    assert not early and after == []


def test_threads_start_every_lane_before_any_runs():
    """A thread's start waits for the GIL, which running lanes hold: started one by one among
    running lanes, thousands took minutes (and the loop, busy starting them, no signal)."""
    count = 200

    async def body():
        eng = engines.ThreadEngine()
        seen = []

        async def lane():
            seen.append(sum(t.ident is not None for t, _ in eng.threads))  # started
        await eng.drive([lane() for _ in range(count)])
        await eng.forget([])
        return seen
    assert on_loop(body) == [count] * count


def test_a_threads_drive_cancelled_while_starting_closes_the_lanes_not_started(monkeypatch):
    monkeypatch.setattr(engines, "STARTS", 1)              # a loop turn after every start

    async def body():
        eng = engines.ThreadEngine()
        ran = []

        async def lane(i):
            ran.append(i)
        lanes = [lane(i) for i in range(50)]
        drive = asyncio.ensure_future(eng.drive(lanes))
        for _ in range(3):
            await asyncio.sleep(0)
        drive.cancel()
        with pytest.raises(asyncio.CancelledError):
            await drive
        started = len(eng.threads)
        await eng.forget([])
        return started, ran, [inspect.getcoroutinestate(c) for c in lanes]
    started, ran, states = on_loop(body)
    assert 0 < started < 50
    assert sorted(ran) == list(range(started))             # the started lanes ran to their end
    assert states == [inspect.CORO_CLOSED] * 50            # the others were closed, not left


def test_serial_makes_what_thread_lanes_share_safe():
    count = [0]

    def add() -> int:
        n = count[0]
        time.sleep(0)                  # a thread switch here loses counts without the lock
        count[0] = n + 1
        return n + 1

    async def body():
        eng = engines.open_engine("threads")
        counted = eng.serial(add)
        got: list[int] = []

        async def lane():
            got.extend(counted() for _ in range(300))
        await eng.drive([lane() for _ in range(8)])
        await eng.forget([])
        eng.close()
        return got
    got = on_loop(body)
    assert sorted(got) == list(range(1, 2401))


@needs_uring
def test_a_uring_lane_that_awaits_anything_but_the_engine_fails_its_drive():
    async def body():
        eng = engines.open_engine("uring")

        async def lane():
            await asyncio.sleep(0.001)
        try:
            with pytest.raises(RuntimeError, match="lanes await only the engine"):
                await eng.drive([lane()])
        finally:
            eng.close()
    on_loop(body)


@needs_uring
def test_a_batch_of_completions_reaches_each_lane_its_own_data_and_error():
    """16 lanes of cached reads (answered in batches: one clock read each) and a transfer()
    coroutine on one ring: every completion wakes the lane that issued it with its own block,
    and the one short read of a batch raises in its own lane only."""
    blocks = 64
    fd = os.memfd_create("batches")
    os.write(fd, b"".join(bytes([i]) * 4096 for i in range(blocks)))

    async def body():
        eng = engines.open_engine("uring")
        views = buffers(17)
        ids = eng.register(views)
        got: dict[int, list] = {j: [] for j in range(17)}
        times: list[int] = []

        async def lane(j: int):
            for r in range(40):
                block = (j * 7 + r) % blocks
                at = blocks * 4096 if (j, r) == (5, 20) else block * 4096   # past the end
                try:
                    times.append(await eng.submit(False, fd, ids[j], at))
                except OSError as e:
                    got[j].append(("error", r, str(e)))
                    continue
                got[j].append((block, bytes(views[j]) == bytes([block]) * 4096))

        async def stream():                   # not a lane: transfer() on the same ring
            for r in range(40):
                await eng.transfer(False, fd, ids[16], r * 4096)
                got[16].append((r, bytes(views[16]) == bytes([r]) * 4096))
        await asyncio.gather(eng.drive([lane(j) for j in range(16)]), stream())
        await eng.forget(ids)
        eng.close()
        return got, times
    got, times = on_loop(body)
    os.close(fd)
    for j in range(16):
        want = [(j * 7 + r) % blocks for r in range(40) if (j, r) != (5, 20)]
        assert [b for b, *_ in got[j] if b != "error"] == want and all(
            ok for b, ok, *_ in got[j] if b != "error")
    assert [e for e in got[5] if e[0] == "error"] == [
        ("error", 20, f"a transfer at byte {blocks * 4096} read 0 of 4096 bytes "
                      "(past the end of the file?)")]
    assert all(e[0] != "error" for j in range(17) if j != 5 for e in got[j])
    assert got[16] == [(r, True) for r in range(40)]
    assert len(times) == 16 * 40 - 1 and len(set(times)) < len(times) // 4    # batches


@needs_uring
def test_uring_answers_every_cached_completion_of_a_long_run_once():
    """Batch after batch inside one wake-up (reap's loop): each transfer completes once, in
    its lane's order, and the completion times a lane sees never go back."""
    fd = os.memfd_create("many")
    os.write(fd, bytes(4096 * 8))

    async def body():
        eng = engines.open_engine("uring")
        ids = eng.register(buffers(8))
        seen: dict[int, list[int]] = {j: [] for j in range(8)}

        async def lane(j: int):
            for r in range(2000):
                seen[j].append(await eng.submit(False, fd, ids[j], (r % 8) * 4096))
        await eng.drive([lane(j) for j in range(8)])
        await eng.forget(ids)
        eng.close()
        return seen, eng.waiting
    seen, waiting = on_loop(body)
    os.close(fd)
    assert not waiting
    assert all(len(ts) == 2000 and ts == sorted(ts) for ts in seen.values())


def test_threads_ready_at_set_up_are_the_lanes_threads():
    """Started by drive(), after the release, sixteen lane threads held the test's start 20-54
    ms: ready() starts them at set-up, and drive() runs each lane on one of them, one each."""
    async def body():
        eng = engines.ThreadEngine()
        eng.ready(16)
        made = {t.ident for t, _ in eng.threads}
        seen = []

        async def lane():
            seen.append(threading.get_ident())
        await eng.drive([lane() for _ in range(16)])
        await eng.forget([])
        return made, seen
    made, seen = on_loop(body)
    assert len(made) == 16 and sorted(seen) == sorted(made)
