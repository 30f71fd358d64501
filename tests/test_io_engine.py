"""The I/O engines: the same test bodies on io_uring, threads and sync."""
from __future__ import annotations

import asyncio
import mmap
import os
import sys
import threading
import time

import pytest
import uvloop

from torque_async.io import engine as engines
from torque_async.io import uring

ENGINES = ["uring", "threads", "sync"]


def on_loop(body):
    return uvloop.run(body())


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
        t1 = await eng.submit(True, fd, a, 8192)
        t2 = await eng.submit(False, fd, b, 8192)
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
        try:
            with pytest.raises(OSError, match="read 1904 of 4096 bytes"):
                await eng.submit(False, fd, buf, 4096)
            with pytest.raises(OSError) as bad:
                await eng.submit(False, 9999, buf, 0)
            assert bad.value.errno == 9                    # EBADF
        finally:
            await eng.forget([buf])
            eng.close()
    on_loop(body)
    os.close(fd)


def test_pause_waits_until_the_time_given(name):
    async def body():
        eng = engines.open_engine(name)
        until = time.monotonic_ns() + 3_000_000
        await eng.pause(until)
        t = time.monotonic_ns()
        eng.close()
        return until, t
    until, t = on_loop(body)
    assert t >= until


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


def test_the_ring_is_shared_and_closed_by_its_last_user():
    async def body():
        one, two = engines.open_engine("uring"), engines.open_engine("uring")
        assert one is two
        one.close()
        assert uring.UringEngine._shared is two
        two.close()
        return uring.UringEngine._shared
    assert on_loop(body) is None


def test_forget_waits_for_a_transfer_in_flight():
    r, w = os.pipe()

    async def body():
        eng = engines.open_engine("uring")
        (buf,) = eng.register(buffers(1, 64))
        reading = eng.submit(False, r, buf, 0)     # a pipe: the read waits for data
        forgetting = asyncio.ensure_future(eng.forget([buf]))
        await asyncio.sleep(0.01)
        early = forgetting.done()
        os.write(w, b"y" * 64)
        await forgetting
        t = await reading
        eng.close()
        return early, t
    early, t = on_loop(body)
    os.close(r), os.close(w)
    assert not early and t > 0


def test_auto_falls_back_to_threads_and_says_why(tmp_path, monkeypatch):
    assert engines.choose("auto") == ("uring", "")
    disabled = tmp_path / "io_uring_disabled"
    disabled.write_text("2\n")
    monkeypatch.setattr(uring, "DISABLED", str(disabled))
    assert engines.choose("auto") == ("threads", f"io_uring unavailable: {disabled} = 2")
    assert engines.choose("sync") == ("sync", "")
    monkeypatch.setitem(sys.modules, "liburing", None)
    assert uring.unavailable() == "no liburing package"
