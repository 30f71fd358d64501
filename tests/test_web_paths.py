"""-web's two other paths: the -webserver alias's requests (gamma sizes, a file read in several
reads, appends) go through the ring's fast path, a state machine with one chain a request;
-engine threads makes each client a thread of its own that keeps its request in flight."""
from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from torque_async import cmdline
from torque_async.io import uring
from torque_async.kind_api import api
from torque_async.meter import MEASURED, STOP
from torque_async.web import client, site

from test_web_inflight import FakeMeter, FakeRing, until

ALIAS = Path(client.__file__).parents[1] / "aliases" / "workloads.alias"
WAIT_S = 60                                   # a bound on a thread's wait, never a pace


def group_tests(root, monkeypatch, engine: str, *argv: str) -> list[client.WebTest]:
    """The WebTests of a -web group over `root` with `engine`."""
    monkeypatch.setattr(client, "engine_for", lambda ctx: (engine, ""))
    plan = cmdline.parse(["-dir", str(root), *argv, "-web"])
    group = plan.groups[0]
    return [client.WebTest(api.TestContext(group, j, j, np.random.default_rng(j), 64,
                                           plan.settings, group.local.p))
            for j in range(group.local.p)]


async def set_up(tests: list[client.WebTest]) -> client.Site:
    """Every client set up; their Site."""
    for test in tests:
        await test.setup()
    return tests[0].site


def start(tests: list[client.WebTest], meters: list) -> list[asyncio.Task]:
    """Each client's run() with its meter, as tasks (they start at the loop's next turn)."""
    return [asyncio.create_task(t.run(m)) for t, m in zip(tests, meters)]


@pytest.fixture
def gamma(tmp_path):
    """A webserver-shaped tree: 40 gamma-sized files (mean 16 KB, shape 1.5)."""
    root = tmp_path / "gamma"
    law = site.Law(40, "gamma", 16384, 1.5, 0, 20)
    asyncio.run(site.make(str(root), law, lambda done, total: None))
    return root


class SizedRing(FakeRing):
    """The fake ring, its reads returning what the file holds at their offset."""

    def __init__(self):
        super().__init__()
        self.sizes: dict[int, int] = {}           # a name's address -> its file's size
        self.asked: list[tuple[int, int]] = []    # (file size, entries) of each chain sent

    def again(self, chain, name, reads):
        super().again(chain, name, reads)
        self.asked.append((self.sizes[name], len(self.pending[-1][1])))

    def complete(self, step: int = 10):
        reads = iter([[min(op[4], max(self.sizes[ops[0][3]] - op[5], 0)) for op in ops]
                      for _, ops, _ in self.pending])
        current: list[int] = []

        def result(op, i):
            if i == 0:
                current[:] = next(reads)
            return current[i] if op == "read" else None
        return super().complete(result, step)


def no_lanes(lanes):
    raise AssertionError("a client went as a lane, not chained()")


def test_webserver_shaped_requests_go_in_one_chain_each_sized_to_the_file(gamma, monkeypatch):
    """Gamma sizes read in 4 KB transfers (one read to many) with an append every 3rd request:
    every client is served by the fast path (chained()), each request one chain of an open,
    as many reads as its file needs and a close; the bytes and the log are exact."""
    monkeypatch.setattr(client, "chains", lambda: ("direct", ""))
    fake = SizedRing()
    monkeypatch.setattr(uring.UringEngine, "shared", classmethod(lambda cls: fake))
    monkeypatch.setattr(fake, "drive", no_lanes)
    tests = group_tests(gamma, monkeypatch, "uring", "-webFiles", "40", "-webSizes", "gamma",
                        "-webShape", "1.5", "-KB", "4", "-p", "3", "-appendEvery", "3")

    async def scenario():
        shared = await set_up(tests)
        fake.sizes = dict(zip(shared.starts, shared.sizes))
        assert max(shared.sizes) > 4 * 4096 and min(shared.sizes) < 4096   # 1 read to many
        meters = [FakeMeter(6) for _ in tests]
        runs = start(tests, meters)
        for _ in range(6):
            await until(lambda: len(fake.pending) == 3)
            fake.complete(step=7)
        await asyncio.gather(*runs)
        assert len(fake.asked) == 18
        assert all(entries == 2 + max(1, -(-size // 4096)) for size, entries in fake.asked)
        assert shared.requests == 18 and shared.read == sum(s for s, _ in fake.asked)
        assert shared.written == shared.appended == sum(t.appended for t in tests) > 0
        shared.check_log()                             # the log grew by what was appended
        for test, meter in zip(tests, meters):
            for s in test.ops:
                s.settle()
            opened, read, closed, appended = test.ops
            assert opened.count == closed.count == 6 and test.unsplit == 0
            assert appended.count == 2                 # requests 3 and 6
            assert opened.total + read.total + closed.total == sum(meter.recorded)
            await test.close()
    asyncio.run(scenario())


def test_the_webserver_alias_is_served_by_the_fast_path(tmp_path, monkeypatch):
    """The shipped -webserver (its gamma tree, 1 MB transfers, appends): chained() serves it."""
    monkeypatch.setattr(client, "chains", lambda: ("direct", ""))
    monkeypatch.setattr(client, "engine_for", lambda ctx: ("uring", ""))
    fake = FakeRing()
    monkeypatch.setattr(uring.UringEngine, "shared", classmethod(lambda cls: fake))
    monkeypatch.chdir(tmp_path)
    plan = cmdline.parse(["-aliasFile", str(ALIAS), "-webserver"])
    group = plan.groups[0]
    test = client.WebTest(api.TestContext(group, 0, 0, np.random.default_rng(0), 64,
                                          plan.settings, group.local.p))

    async def scenario():
        await test.setup()
        assert test.site.tree.law.sizes == "gamma" and group.local.appendEvery > 0
        assert test.chained_ok()
        await test.close()
    asyncio.run(scenario())


class SlowOpen:
    """os.open for the tree's files held until `clients` threads are in it at once (a
    barrier: it breaks, failing the test, if they never are); counts who is inside."""

    def __init__(self, clients: int, dirfd: int):
        self.barrier = threading.Barrier(clients, timeout=WAIT_S)
        self.dirfd, self.inside, self.most, self.calls = dirfd, 0, 0, 0
        self.lock = threading.Lock()
        self.real = os.open

    def __call__(self, path, flags, mode=0o777, *, dir_fd=None):
        if dir_fd != self.dirfd:
            return self.real(path, flags, mode, dir_fd=dir_fd)
        with self.lock:
            self.inside += 1
            self.calls += 1
            self.most = max(self.most, self.inside)
        try:
            self.barrier.wait()
            return self.real(path, flags, mode, dir_fd=dir_fd)
        finally:
            with self.lock:
                self.inside -= 1


def fixed_tree(tmp_path):
    root = tmp_path / "site"
    asyncio.run(site.make(str(root), site.Law(12, "fixed", 16384, 0.0, 0, 20),
                          lambda done, total: None))
    return root


def test_threads_keep_n_requests_in_flight_and_count_what_they_did(tmp_path, monkeypatch):
    """Five clients, each open held until all five are in one: every request is in flight
    at once (else the barrier breaks), and all are made while the loop's thread waits (no
    turn of the loop per request); the requests, bytes and latencies are the threads'."""
    tests = group_tests(fixed_tree(tmp_path), monkeypatch, "threads", "-webFiles", "12",
                        "-webSizes", "fixed", "-KB", "4", "-p", "5", "-appendEvery", "2")

    async def scenario():
        shared = await set_up(tests)
        slow = SlowOpen(5, shared.tree.fd)
        monkeypatch.setattr(client.os, "open", slow)
        counted = Counted(20)
        meters = [counted.meter(4) for _ in tests]
        runs = start(tests, meters)
        await until(lambda: all(t.served is not None for t in tests))   # threads started
        assert counted.all.wait(WAIT_S)        # the loop held: the threads went on alone
        await asyncio.gather(*runs)
        monkeypatch.undo()
        assert slow.most == 5 and slow.calls == 20
        assert shared.flight.most == shared.files.most == 5
        assert shared.flight.now == shared.files.now == 0
        assert shared.requests == 20 and shared.read == 20 * 16384
        assert shared.written == shared.appended == sum(t.appended for t in tests) > 0
        shared.check_log()
        for test, meter in zip(tests, meters):
            for s in test.ops:
                s.settle()
            opened, read, closed, appended = test.ops
            assert len(meter.recorded) == opened.count == closed.count == 4
            assert read.count == 4 * 4 and appended.count == 2 and test.unsplit == 0
            assert opened.total + read.total + closed.total == sum(meter.recorded)
            assert test.read == 4 * 16384
        for test in tests:
            await test.close()
    asyncio.run(scenario())


class Counted:
    """Meters whose recorded requests, all together, set `all` once they reach `expected`."""

    def __init__(self, expected: int):
        self.expected, self.seen, self.lock = expected, 0, threading.Lock()
        self.all = threading.Event()

    def meter(self, n: int) -> FakeMeter:
        meter, record = FakeMeter(n), FakeMeter.record

        def counting(latency, t):
            record(meter, latency, t)
            with self.lock:
                self.seen += 1
                if self.seen == self.expected:
                    self.all.set()
        meter.record = counting
        return meter


class Endless(FakeMeter):
    """Measured requests until the stop flag is up."""

    def claim(self, k, t):
        self.start = self.start or t
        return STOP if self.stop[0] else MEASURED


def web_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "torque-async web"]


@pytest.mark.parametrize("how", ["flag", "cancel"])
def test_threads_stop_after_the_request_they_are_making(tmp_path, monkeypatch, how):
    """A stop (the run's flag, or the loop cancelling the clients) ends each client's thread
    after the request it was making: at most one request a client past it, no thread left."""
    tests = group_tests(fixed_tree(tmp_path), monkeypatch, "threads", "-webFiles", "12",
                        "-webSizes", "fixed", "-p", "4")

    async def scenario():
        shared = await set_up(tests)
        meters = [Endless(0) for _ in tests]
        runs = start(tests, meters)
        await until(lambda: shared.requests >= 40, turns=10 ** 7)
        if how == "flag":
            for m in meters:
                m.stop[0] = 1
        else:                                  # each run() tells its thread, once it runs
            for run in runs:
                run.cancel()
            await until(lambda: all(t.halt for t in tests))
        at_stop = shared.requests              # (each client's count only grows)
        done, pending = await asyncio.wait(runs, timeout=WAIT_S)
        assert not pending
        for test in tests:
            await asyncio.wait_for(test.close(), WAIT_S)     # its thread has ended
        assert not web_threads()
        assert at_stop <= shared.requests <= at_stop + len(tests)
        assert shared.flight.now == shared.files.now == 0
        if how == "flag":
            assert all(r.exception() is None for r in done)
            assert sum(len(m.recorded) for m in meters) == shared.requests
    asyncio.run(scenario())
