"""Set-up writes (scratch.write_pattern): the exact bytes, several in flight, nothing left running."""
from __future__ import annotations

import asyncio
import errno
import os
import threading

import numpy as np
import pytest
import uvloop

from torque_async.io import data, scratch

KB = 1024
CHUNK = 64 * KB                     # small chunks: many writes and a last short one, quickly


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(scratch, "CHUNK", CHUNK)
    monkeypatch.setattr(scratch, "IN_FLIGHT", 3)


def write(path, size, tag, direct=True, refuse=False):
    """write_pattern into a new file at path; returns the flags the opener was asked for."""
    asked = []

    def opener(flags):
        asked.append(flags)
        if refuse:
            raise OSError(errno.EINVAL, "Invalid argument")
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)

    async def main():
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            await scratch.write_pattern(fd, size, tag, str(path), opener if direct else None)
        finally:
            os.close(fd)
    uvloop.run(main())
    return asked


@pytest.mark.parametrize("offset, length, tag", [(0, 8, 0), (8 << 20, (3 << 20) + 5, 7),
                                                 (1 << 30, 1 << 20, 0), (16, (1 << 20) + 9, 2)])
def test_fill_is_the_pattern(offset, length, tag):
    words = np.full(-(-length // 8), 0xFFFF, np.uint64)
    data.fill(words, offset, tag)
    assert np.array_equal(words.view(np.uint8)[:length], data.pattern(offset, length, tag))


@pytest.mark.parametrize("size", [1, 4095, 4096, 4097, CHUNK, 3 * CHUNK + 4096 * 3 + 7,
                                  7 * CHUNK + 12288])
@pytest.mark.parametrize("direct", [True, False])
def test_the_whole_file_is_the_pattern_and_nothing_past_it(small, tmp_path, size, direct):
    path = tmp_path / "f.dat"
    asked = write(path, size, 5, direct)
    assert path.read_bytes() == data.pattern(0, size, 5).tobytes()
    assert [bool(f & os.O_DIRECT) for f in asked] == ([True] if direct and size >= 4096 else [])


def test_a_refused_o_direct_writes_buffered(small, tmp_path):
    path = tmp_path / "f.dat"
    assert write(path, 2 * CHUNK + 100, 9, refuse=True)
    assert path.read_bytes() == data.pattern(0, 2 * CHUNK + 100, 9).tobytes()


class Gate:
    """Stands in for scratch._write: counts writes running at once, holds them until opened."""

    def __init__(self, monkeypatch, fail_at=-1):
        self.lock, self.open, self.started = threading.Lock(), threading.Event(), threading.Event()
        self.running = self.most = self.calls = 0
        self.fail_at, self.real = fail_at, scratch._write
        monkeypatch.setattr(scratch, "_write", self)

    def __call__(self, fd, direct, buf, at, n, tag):
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        self.started.set()
        try:
            self.open.wait()
            if at == self.fail_at:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.real(fd, direct, buf, at, n, tag)
        finally:
            with self.lock:
                self.running -= 1


def test_in_flight_is_bounded_across_files(small, tmp_path, monkeypatch):
    gate = Gate(monkeypatch)
    gate.open.set()

    async def main():
        fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT, 0o600) for i in range(4)]
        await asyncio.gather(*(scratch.write_pattern(fd, 10 * CHUNK, i) for i, fd in
                               enumerate(fds)))
        for fd in fds:
            os.close(fd)
    uvloop.run(main())
    assert gate.calls == 40 and 1 <= gate.most <= 3
    assert (tmp_path / "f3").read_bytes() == data.pattern(0, 10 * CHUNK, 3).tobytes()


def test_a_cancel_returns_only_when_no_write_is_running(small, tmp_path, monkeypatch):
    gate = Gate(monkeypatch)

    async def main():
        fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
        task = asyncio.ensure_future(scratch.write_pattern(fd, 1000 * CHUNK))
        await asyncio.get_running_loop().run_in_executor(None, gate.started.wait)
        task.cancel()
        try:
            for _ in range(20):
                await asyncio.sleep(0)
            assert not task.done() and gate.running    # held: the writes in flight finish first
        finally:
            gate.open.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gate.running == 0
        os.close(fd)
    uvloop.run(main())
    assert gate.calls <= 3 + 3                          # it stopped handing out writes


def test_a_failed_write_names_the_file_and_stops(small, tmp_path, monkeypatch):
    gate = Gate(monkeypatch, fail_at=2 * CHUNK)
    gate.open.set()

    async def main():
        fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await scratch.write_pattern(fd, 1000 * CHUNK, path="/where/f")
        finally:
            os.close(fd)
    with pytest.raises(OSError, match="writing it: No space left on device") as e:
        uvloop.run(main())
    assert e.value.filename == "/where/f" and e.value.errno == errno.ENOSPC
    assert gate.running == 0 and gate.calls < 1000
