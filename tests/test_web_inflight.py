"""-web's requests in flight: each client's request is a chain in the ring (or a thread's) while
the others proceed; a chain that fails halfway still closes its file; the operations' latencies
add up to the request's; the log is the run's own; bad input is one line."""
from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import resource
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from torque_async import cmdline
from torque_async.io import ring as rings
from torque_async.io import uring
from torque_async.meter import MEASURED, STOP
from torque_async.results import ROW, WEB_LOAD
from torque_async.stats import Stats, bucket as sbucket
from torque_async.web import summary
from torque_async.kind_api import api
from torque_async.web import client, site

from conftest import CMD, ENV, assert_one_clean_line, execute, needs_direct_files, needs_uring
from test_report import MS, record

OPS = {rings.OP_OPENAT: "open", rings.OP_READ: "read", rings.OP_CLOSE: "close"}


class FakeRing:
    """The engine's face to -web's clients, its completions the test's: each chain waits in
    `pending` until complete() answers it (its entries' results and times the test's)."""

    def __init__(self, owning: bool = True):
        self.pending: list[tuple[uring.Chain, list[str], asyncio.Future | None]] = []
        self.slots, self.clock = 0, 1_000_000
        self.closed_slots: list[int] = []
        self.owning = owning                   # own() gives SQEs (the clients' common case)

    def register(self, views):
        return [0]

    def chain(self, buf, files):
        return uring.Chain(uring.CHAIN, buf, files)

    def address(self, buf):
        return 4096

    def take_file(self):
        self.slots += 1
        return self.slots - 1

    def give_file(self, i):
        pass

    async def whole(self, chain, dirfd, name, flags, slot, addr, chunk, reads):
        ops = [(rings.OP_OPENAT, 0, dirfd, name, 0, 0, flags, slot + 1),
               *[(rings.OP_READ, 0, slot, addr, chunk, k * chunk, 0, 0) for k in range(reads)],
               (rings.OP_CLOSE, 0, 0, 0, 0, 0, 0, slot + 1)]
        chain.open_i, chain.close_i = 0, len(ops) - 1
        return await self.request(chain, ops)

    async def request(self, chain, ops):
        future = asyncio.get_running_loop().create_future()
        chain.t0 = self.clock
        self.pending.append((chain, ops, future))
        return await future

    def own(self, chain, ops):
        chain.sqes = list(ops)
        return self.owning

    def again(self, chain, name, reads):
        opening = chain.sqes[0]
        ops = [(*opening[:3], name, *opening[4:]), *chain.sqes[1:1 + reads], chain.sqes[-1]]
        chain.res, chain.at = [0] * len(ops), [0] * len(ops)
        chain.open_i, chain.close_i, chain.t0 = 0, len(ops) - 1, self.clock
        self.pending.append((chain, ops, None))

    def disown(self, chain):
        chain.sqes = []

    async def drive(self, lanes):
        await asyncio.gather(*lanes)

    async def pause(self, until):
        await asyncio.sleep(0)

    async def forget(self, ids):
        pass

    def close(self):
        pass

    def complete(self, result=lambda op, i: None, step: int = 10,
                 together: bool = False) -> list[list[str]]:
        """Answer every chain pending: entry i of a chain completes `step` ns after the one
        before it (`together`: every entry of a chain at once, as in one batch of completions),
        with result(op, i) or what it asked (a read: its length; an open: 0)."""
        answered, pending, self.pending = [], self.pending, []
        for chain, ops, future in pending:
            for i, op in enumerate(ops):
                res = result(OPS[op[0]], i)
                if res is None:
                    res = op[4] if op[0] == rings.OP_READ else 0
                if not together or i == 0:
                    self.clock += step
                chain.res[i:i + 1], chain.at[i:i + 1] = [res], [self.clock]
                if i == chain.open_i and res >= 0:
                    chain.files.up()
                elif i == chain.close_i and res != -errno.ECANCELED:
                    chain.files.down()
                if op[0] == rings.OP_CLOSE:
                    self.closed_slots.append(op[7] - 1)
            answered.append([OPS[op[0]] for op in ops])
            if future is None:                 # an own()ed chain: its client's done()
                chain.done(chain, self.clock, -1)
            else:
                future.set_result(chain)
        return answered


class FakeMeter:
    """n measured requests, then stop; the latencies recorded."""

    def __init__(self, n: int):
        self.n, self.start, self.until, self.stop = n, 0, 0, [0]
        self.row = np.zeros(1, ROW)
        self.recorded: list[int] = []

    def ramp(self):
        return 1

    def claim(self, k, t):
        self.start = self.start or t
        self.until = self.n
        return MEASURED if k < self.n else STOP

    def record(self, latency, t):
        self.recorded.append(latency)

    def begin(self):
        return 1

    def end(self, t):
        pass

    def publish(self, *sizes):
        pass

    def publish_extra(self, n):
        pass


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "site"
    law = site.Law(12, "fixed", 16384, 0.0, 0, 20)
    asyncio.run(site.make(str(root), law, lambda done, total: None))
    return root


def clients(root: Path, monkeypatch, fake: FakeRing, *argv: str, how: str = "direct"):
    """WebTests of a -web group over `root` on the fake ring (the ring's way `how`)."""
    monkeypatch.setattr(client, "engine_for", lambda ctx: ("uring", ""))
    monkeypatch.setattr(client, "chains", lambda: (how, ""))
    monkeypatch.setattr(uring.UringEngine, "shared", classmethod(lambda cls: fake))
    plan = cmdline.parse(["-dir", str(root), "-webFiles", "12", "-webSizes", "fixed", *argv,
                          "-web"])
    group = plan.groups[0]
    return [client.WebTest(api.TestContext(group, j, j, np.random.default_rng(j), 64, plan.settings,
                                       group.local.p)) for j in range(group.local.p)]


async def until(condition, turns: int = 1000) -> None:
    """Give the loop turns until condition() holds (the clients run on it)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the clients never got there")


def test_n_clients_have_n_requests_in_flight_while_an_open_is_slow(tree, monkeypatch):
    """No chain completes until the test says so (a slow open): every client has its request
    in flight at once, and each goes on to its next once its own completes."""
    fake = FakeRing()
    tests = clients(tree, monkeypatch, fake, "-p", "5", "-KB", "4")

    async def scenario():
        for test in tests:
            await test.setup()
        shared = tests[0].site
        meters = [FakeMeter(3) for _ in tests]
        runs = [asyncio.create_task(t.run(m)) for t, m in zip(tests, meters)]
        await until(lambda: len(fake.pending) == 5)
        assert shared.flight.now == shared.flight.most == 5    # five in flight, none done
        assert shared.files.now == 0                           # no open has completed yet
        first = fake.complete()
        assert first == [["open", "read", "read", "read", "read", "close"]] * 5   # one chain each
        for _ in range(2):
            await until(lambda: len(fake.pending) == 5)
            fake.complete()
        await asyncio.gather(*runs)
        assert [len(m.recorded) for m in meters] == [3] * 5
        assert shared.requests == 15 and shared.files.now == 0 and shared.flight.now == 0
        for test in tests:
            await test.close()
    asyncio.run(scenario())


def test_the_operations_latencies_add_up_to_the_request_s(tree, monkeypatch):
    fake = FakeRing()
    tests = clients(tree, monkeypatch, fake, "-p", "2", "-KB", "8")

    async def scenario():
        for test in tests:
            await test.setup()
        meters = [FakeMeter(4) for _ in tests]
        runs = [asyncio.create_task(t.run(m)) for t, m in zip(tests, meters)]
        for step in (7, 11, 13, 17):
            await until(lambda: len(fake.pending) == 2)
            fake.complete(step=step)
        await asyncio.gather(*runs)
        for test, meter in zip(tests, meters):
            opened, read, closed, _ = test.ops
            for s in test.ops:
                s.settle()
            assert opened.count == closed.count == 4 and read.count == 8     # 16 KB in 8 KB
            assert opened.total + read.total + closed.total == sum(meter.recorded) > 0
            await test.close()
    asyncio.run(scenario())


def test_a_chain_that_fails_halfway_still_closes_its_file(tree, monkeypatch):
    """A read fails: the chain's close (hard-linked) still ran, so the client asks no other
    close, and says which file failed."""
    fake = FakeRing()
    test, = clients(tree, monkeypatch, fake, "-KB", "4")

    async def scenario():
        await test.setup()
        run = asyncio.create_task(test.run(FakeMeter(2)))
        await until(lambda: len(fake.pending) == 1)
        fake.complete(lambda op, i: -errno.EIO if i == 2 else None)
        with pytest.raises(api.TestError, match="-web: reading .*site/files/.*Input/output error"):
            await run
        assert fake.closed_slots == [test.slot] and not fake.pending
        assert test.site.files.now == 0 and test.site.files.most == 1
        await test.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("how", [pytest.param("direct", marks=needs_direct_files), "fd"])
def test_a_chain_that_fails_before_its_close_gets_one(tree, monkeypatch, how):
    """-T splits a request at each read: a read that fails in a chain without the close is
    followed by a chain that closes the file (its direct descriptor, or its fd)."""
    fake = FakeRing()
    test, = clients(tree, monkeypatch, fake, "-KB", "4", "-T", "10", how=how)

    async def scenario():
        await test.setup()
        run = asyncio.create_task(test.run(FakeMeter(2)))
        await until(lambda: len(fake.pending) == 1)
        if how == "fd":                        # the open alone, then the first read
            assert fake.complete(lambda op, i: 9) == [["open"]]
            await until(lambda: len(fake.pending) == 1)
        assert fake.complete(lambda op, i: -errno.EIO if op == "read" else None)[-1][-1] == \
            "read"
        await until(lambda: len(fake.pending) == 1)
        (chain, ops, _), = fake.pending
        assert [OPS[op[0]] for op in ops] == ["close"]
        assert (ops[0][2], ops[0][7]) == ((0, test.slot + 1) if how == "direct" else (9, 0))
        fake.complete()
        with pytest.raises(api.TestError, match="Input/output error"):
            await run
        assert test.site.files.now == 0
        await test.close()
    asyncio.run(scenario())


@needs_direct_files
def test_the_ring_closes_a_direct_descriptor_after_a_failed_read(tree):
    """The kernel's side of it: a read into a bad address fails (EFAULT), and the close linked
    hard after it still closes the file."""
    name = ctypes.create_string_buffer(os.fsencode(site.names(
        json.loads((tree / site.MANIFEST).read_text())["dirs"])[0]))

    async def scenario():
        engine = uring.UringEngine.shared()
        try:
            slot, files, dirfd = engine.take_file(), uring.Gauge(), os.open(tree, os.O_RDONLY)
            chain = engine.chain(-1, files)
            chain.open_i, chain.close_i = 0, 2
            done = await engine.request(chain, [
                (rings.OP_OPENAT, rings.SQE_IO_LINK, dirfd, ctypes.addressof(name), 0, 0,
                 client.OPEN_DIRECT, slot + 1),
                (rings.OP_READ, rings.SQE_IO_HARDLINK | rings.SQE_FIXED_FILE, slot, 8, 4096,
                 0, 0, 0),
                (rings.OP_CLOSE, 0, 0, 0, 0, 0, 0, slot + 1)])
            os.close(dirfd)
            assert done.res == [0, -errno.EFAULT, 0]
            assert files.now == 0 and files.most == 1
            assert done.t0 <= done.at[0] <= done.at[1] <= done.at[2]
        finally:
            engine.close()
    asyncio.run(scenario())


@needs_uring
def test_the_ring_keeps_n_chains_in_flight_while_the_loop_runs():
    """Chains that cannot complete yet (reads of empty pipes) are all in flight in the kernel
    at once, submitted together, the loop free meanwhile; each completes once its data comes."""
    pipes = [os.pipe() for _ in range(6)]

    async def scenario():
        engine = uring.UringEngine.shared()
        try:
            views = [memoryview(bytearray(8)) for _ in pipes]
            ids = engine.register(views)
            files = uring.Gauge()
            chains = [engine.chain(i, files) for i in ids]
            reads = [asyncio.ensure_future(engine.request(chain, [
                (rings.OP_READ, 0, r, engine.address(i), 8, 0, 0, 0)]))
                for chain, i, (r, _) in zip(chains, ids, pipes)]
            await until(lambda: len(engine.chains) == 6 and not engine.queued)
            t0 = {chain.t0 for chain in chains}
            assert len(t0) == 1 and 0 not in t0              # one submit for all six
            for _ in range(50):
                await asyncio.sleep(0)                       # the loop runs; none can complete
            assert len(engine.chains) == 6 and not any(read.done() for read in reads)
            for k, (_, w) in enumerate(pipes):
                os.write(w, bytes([k]) * 8)
            done = await asyncio.gather(*reads)
            assert [chain.res for chain in done] == [[8]] * 6
            assert [bytes(view) for view in views] == [bytes([k]) * 8 for k in range(6)]
            await engine.forget(ids)
        finally:
            engine.close()
            for r, w in pipes:
                os.close(r)
                os.close(w)
    asyncio.run(scenario())


def test_the_log_is_removed_at_the_end_unless_kept(capsys, tmp_path):
    root = tmp_path / "site"
    argv = ("-smkey", "0x5E0F1", "-fast", "-dir", str(root), "-webFiles", "20", "-p", "2",
            "-n", "20", "-i", "1", "-appendEvery", "2")
    code, out, err = execute(capsys, *argv, "-cfiles", "-web")
    assert code == 0, err
    assert not (root / site.LOG).exists()
    removed = next(ln for ln in out.splitlines() if ln.startswith("Web group 0 log: "))
    assert removed.endswith("bytes at the end, removed (-keepLog keeps it)")
    code, out, err = execute(capsys, *argv, "-keepLog", "-web")
    assert code == 0, err
    kept = next(ln for ln in out.splitlines() if ln.startswith("Web group 0 log: "))
    size = (root / site.LOG).stat().st_size
    assert kept == f"Web group 0 log: {size} bytes at the end, kept (-keepLog)" and size > 0
    code, out, err = execute(capsys, *argv, "-web")            # emptied, appended, removed
    assert code == 0, err
    assert not (root / site.LOG).exists()


@pytest.mark.parametrize("engine", ["sync", "threads", "uring"])
def test_each_engine_reports_what_was_in_flight(capsys, tmp_path, engine):
    root = tmp_path / "site"
    code, out, err = execute(capsys, "-smkey", "0x5E0F2", "-fast", "-engine", engine,
                             "-json", str(tmp_path / "out.json"), "-dir", str(root), "-cfiles",
                             "-webFiles", "30", "-p", "4", "-n", "50", "-i", "1", "-web")
    assert code == 0, err
    s = json.loads((tmp_path / "out.json").read_text())["plan"]["groups"][0]["web"]
    assert s["requests"] >= 200 and s["cpu_ns_per_request"] > 0
    assert 1 <= s["most_in_flight"] <= 4 and 0 < s["mean_in_flight"] <= s["most_in_flight"]
    assert 1 <= s["most_open"] <= 4 and 0 <= s["mean_open"] <= s["most_open"]
    if engine == "sync":                       # blocking calls: one at a time on the loop
        assert s["most_in_flight"] == s["most_open"] == 1
    counted = {op: (s["ops"][op] or {"count": 0})["count"] for op in ("open", "close")}
    resolved = s["measured"] - s["ops_unresolved"]
    assert counted == {"open": resolved, "close": resolved}
    if engine != "uring":                      # each call timed apart: every split resolved
        assert s["ops_unresolved"] == 0
    else:                                      # a warm tree's chain completes in its submit
        assert s["ops_unresolved"] > 0
        assert "open, unresolved" in out or s["ops"]["open"] is not None
    assert "Web group 0 load: files open at once: at most" in out
    assert s["device_queue"] is None or s["device_queue"] >= 0


def test_bad_input_is_one_line(capsys, tmp_path):
    assert_one_clean_line(*execute(capsys, "-smkey", "0x5E0F3", "-keepLog", "-n", "4", "-r"),
                          "-keepLog does not apply to -r")


@needs_uring
@pytest.mark.parametrize("how", ["direct", "fd"])
def test_the_ring_reads_a_file_of_more_reads_than_a_chain_holds(capsys, tmp_path, monkeypatch,
                                                                how):
    """128 KB files in 1 KB reads: a request goes in three chains (uring.PIECE entries at
    most), through direct descriptors or ordinary ones, and leaves no descriptor open."""
    monkeypatch.setattr(client, "chains", lambda: (how, ""))
    code, out, err = execute(capsys, "-smkey", "0x5E0F4", "-fast", "-engine", "uring", "-json",
                             str(tmp_path / "out.json"), "-dir", str(tmp_path / "site"),
                             "-cfiles", "-webFiles", "6", "-webSizes", "fixed", "-webMeanKB",
                             "128", "-KB", "1", "-p", "3", "-n", "4", "-i", "1", "-web")
    assert code == 0, err
    s = json.loads((tmp_path / "out.json").read_text())["plan"]["groups"][0]["web"]
    assert s["measured"] == 12 and s["read_bytes"] >= 12 * 128 * 1024
    resolved = 12 - s["ops_unresolved"]                # (pieces completed in their submit:
    counts = [(s["ops"][op] or {"count": 0})["count"] for op in ("read", "close")]   # not)
    assert counts == [resolved * 128, resolved]
    assert not [name for name in descriptors() if name.startswith(str(tmp_path / "site"))]


def descriptors() -> list[str]:
    """What this process's descriptors name (the files of a tree among them)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:          # listdir's own
            pass
    return sorted(names)


def test_the_device_queue_is_the_growth_of_the_weighted_io_time(tmp_path):
    """/proc/diskstats' field 11 (weighted ms doing I/O) of the tree's device: a queue of 3
    for 2 s adds 6000 ms; the other devices' lines are not it."""
    from torque_async.web import disk
    stats = tmp_path / "diskstats"
    stats.write_text("   7       0 loop0 24 0 24576 1 12 0 12288 3 0 4 999 0 0 0 0\n"
                     " 254       0 vda 5 0 80 9 1 0 8 2 3 40 6000 0 0 0 0 0 0\n")
    assert disk.weighted_ms((254, 0), str(stats)) == 6000
    assert disk.weighted_ms((8, 0), str(stats)) is None
    assert disk.weighted_ms((254, 0), str(tmp_path / "none")) is None


@needs_direct_files
def test_more_clients_than_the_ring_holds_chains_for_are_refused(tmp_path):
    """Each client of the loop holds a direct descriptor of the ring's table, which the
    descriptor limit bounds: past it, one line with the numbers (exit 2); -engine threads
    runs them."""

    def low():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    argv = [*CMD, "-smkey", "0x5F0F5", "-fast", "-dir", str(tmp_path / "site"), "-cfiles",
            "-webFiles", "20", "-n", "2", "-i", "1", "-webOpen", "8", "-p", "300"]
    done = subprocess.run([*argv, "-web"], capture_output=True, text=True, env=ENV,
                          preexec_fn=low, timeout=300)
    assert_one_clean_line(done.returncode, done.stdout, done.stderr,
                          "-web: 300 clients on the event loop, but its io_uring ring holds "
                          "chains for 256 at once")
    done = subprocess.run([*argv, "-engine", "threads", "-web"],
                          capture_output=True, text=True, env=ENV, preexec_fn=low, timeout=300)
    assert done.returncode == 0, done.stderr


def test_operations_seen_apart_are_their_stamped_differences(tree, monkeypatch):
    """Each entry of a chain completes in a batch of its own (its own clock read): the open
    runs from the submit to its completion, each read and the close from the entry before;
    they sum to the request's latency, and every request's split is resolved."""
    fake = FakeRing()
    test, = clients(tree, monkeypatch, fake, "-KB", "8")      # 16 KB files: 2 reads

    async def scenario():
        await test.setup()
        meter = FakeMeter(3)
        run = asyncio.create_task(test.run(meter))
        for step in (5, 9, 14):
            await until(lambda: len(fake.pending) == 1)
            assert fake.complete(step=step) == [["open", "read", "read", "close"]]
        await run
        opened, read, closed, _ = (s.settle() for s in test.ops)
        assert (opened.count, read.count, closed.count) == (3, 6, 3)
        assert (opened.lo, opened.hi, opened.total) == (5, 14, 28)
        assert (read.lo, read.hi, read.total) == (5, 14, 56)
        assert (closed.lo, closed.hi, closed.total) == (5, 14, 28)
        assert meter.recorded == [20, 36, 56]                  # 4 entries, `step` apart
        assert opened.total + read.total + closed.total == sum(meter.recorded)
        assert test.unsplit == 0
        await test.close()
    asyncio.run(scenario())


def test_operations_seen_together_are_unresolved_not_zero(tree, monkeypatch):
    """A chain whose entries complete in one batch (one clock read, as a warm tree's do inside
    their submit): its request's latency is measured, its split is not: no operation of it is
    recorded (no 0s), it is counted, and the report says unresolved."""
    fake = FakeRing()
    test, = clients(tree, monkeypatch, fake, "-KB", "16")

    async def scenario():
        await test.setup()
        meter = FakeMeter(4)
        run = asyncio.create_task(test.run(meter))
        for together in (True, False, True, True):
            await until(lambda: len(fake.pending) == 1)
            fake.complete(step=6, together=together)
        await run
        opened, read, closed, _ = (s.settle() for s in test.ops)
        assert (opened.count, read.count, closed.count) == (1, 1, 1)   # the one seen apart
        assert (opened.total, read.total, closed.total) == (6, 6, 6)
        assert meter.recorded == [6, 18, 6, 6]                 # every request's own time
        assert test.unsplit == 3
        row = test.meter.row
        assert row["unsplit"] == 3 and list(row["op_count"][0][:3]) == [1, 1, 1]
        await test.close()
    asyncio.run(scenario())


def test_the_report_flags_unresolved_operations_and_counts_them():
    plan = cmdline.parse("-dir site -p 2 -web".split())
    group = plan.groups[0]
    apart = Stats(5, 1000, 3000, 10000, ((sbucket(2000), 5),))
    none = Stats(0, 0, 0, 0, ())

    def rec(row, ops, unsplit):
        return record(row, 1000, 50 * MS, 40, 16384, lat_count=40, lat_min=1000,
                      lat_max=9000, lat_sum=40 * 5000, hist=((sbucket(5000), 40),), op_lat=ops,
                      unsplit=unsplit, group_work=(80, 80 * 16384, 0),
                      web_load=(0,) * len(WEB_LOAD), size_law=(12, 16384, 16384, 16384))
    some = summary.group_summary(group, (rec(0, (apart, apart, apart, none), 35),
                                         rec(1, (none,) * 4, 40)), plan.procs())
    assert some["measured"] == 80 and some["ops_unresolved"] == 75
    assert some["ops"]["open"]["count"] == 5
    text = "\n".join(summary.lines(group, (rec(0, (apart, apart, apart, none), 35),
                                           rec(1, (none,) * 4, 40)), plan.procs(), 0))
    assert "open, read and close resolved for 5 of 80 timed requests; the other 75" in text
    assert "\nopen, 5, " in text and "\nappend" not in text
    nothing = "\n".join(summary.lines(group, (rec(0, (none,) * 4, 40), rec(1, (none,) * 4, 40)),
                                      plan.procs(), 0))
    assert "resolved for 0 of 80" in nothing
    assert all(f"\n{op}, unresolved" in nothing for op in ("open", "read", "close"))
    assert "\nopen, 0" not in nothing and "\nread, 0" not in nothing
    assert "files open at once: at most 0, mean not resolved (each timed request's open and " \
           "close completions were seen together" in nothing and "once: at most 0, mean 0" \
        not in nothing
    assert "mean 0.0 (not resolved for 75 of 80 timed requests, whose completions were seen " \
           "together)" in text
    alone = "\n".join(summary.lines(group, (rec(0, (apart, apart, apart, none), 0),),
                                    plan.procs(), 0))
    assert "resolved for" not in alone and "unresolved" not in alone
    assert "files open at once: at most 0, mean 0.0; " in alone


@needs_direct_files
@pytest.mark.parametrize("numpy_cqes", [1, 64])
def test_the_ring_answers_a_whole_chain_at_once_and_a_failed_one_entry_by_entry(
        tree, monkeypatch, numpy_cqes):
    """own()ed chains on the real ring: one whose entries all completed in one batch is
    answered once with its bytes read where numpy took the batch apart (a batch of at least
    NUMPY_CQES), else entry by entry; one whose open failed goes through the entry-by-entry
    path, its results each entry's; no file stays open."""
    monkeypatch.setattr(uring, "NUMPY_CQES", numpy_cqes)
    manifest = json.loads((tree / site.MANIFEST).read_text())
    names = [os.fsencode(name) for name in site.names(manifest["dirs"])[:2]] + [b"missing"]
    held = [ctypes.create_string_buffer(name) for name in names]

    async def scenario():
        engine = uring.UringEngine.shared()
        dirfd = os.open(tree, os.O_RDONLY)
        try:
            views = [memoryview(bytearray(16384)) for _ in names]
            ids, files, answers = engine.register(views), uring.Gauge(), []
            all_answered = asyncio.get_running_loop().create_future()

            def answer(chain, t, got):
                answers.append((chain, got, list(chain.res)))
                if len(answers) == 3:
                    all_answered.set_result(None)
            chains = [engine.chain(i, files) for i in ids]
            for chain, i in zip(chains, ids):
                slot = engine.take_file()
                assert engine.own(chain, [
                    (rings.OP_OPENAT, rings.SQE_IO_LINK, dirfd, 0, 0, 0, client.OPEN_DIRECT,
                     slot + 1),
                    (rings.OP_READ, rings.SQE_IO_HARDLINK | rings.SQE_FIXED_FILE, slot,
                     engine.address(i), 16384, 0, 0, 0),
                    (rings.OP_CLOSE, 0, 0, 0, 0, 0, 0, slot + 1)])
                chain.done = answer
            r, w = os.pipe()
            os.write(w, b"p")
            byte = engine.register([memoryview(bytearray(1))])
            plain = engine.chain(byte[0], files)         # another test's chain, in the same
            read = asyncio.ensure_future(engine.request(plain, [   # submit and batch
                (rings.OP_READ, 0, r, engine.address(byte[0]), 1, 0, 0, 0)]))
            for chain, name in zip(chains, held):
                engine.again(chain, ctypes.addressof(name), 1)
            await asyncio.wait_for(all_answered, 30)     # (a failed open may go to io-wq)
            assert (await read).res == [1]
            os.close(r)
            os.close(w)
            got = {chains.index(chain): (g, res) for chain, g, res in answers}
            for k in (0, 1):                                           # whole: its bytes
                assert got[k] == ((16384, [0] * 3) if numpy_cqes == 1 else (-1, [0, 16384, 0]))
            assert got[2] == (-1, [-errno.ENOENT, -errno.ECANCELED, -errno.ECANCELED])
            for k in (0, 1):
                assert bytes(views[k]) == (tree / os.fsdecode(names[k])).read_bytes()
            assert files.now == 0 and 1 <= files.most <= 2
            await engine.forget(ids + byte)
            for chain in chains:
                engine.disown(chain)
            assert not engine.owners and engine.own_chains == [None] * 3
        finally:
            os.close(dirfd)
            engine.close()
    asyncio.run(scenario())


@needs_uring
def test_completions_left_in_the_cq_by_a_full_batch_keep_its_clock_read(monkeypatch):
    """A chain of three entries has completed (all three in the CQ); the reaper takes two (a
    batch of at most BATCH), then the third, which was in the CQ before the first batch's
    clock read: all three carry that read (a later one would put the time spent answering the
    first batch into the third entry's latency, and split entries that completed together)."""
    monkeypatch.setattr(uring, "BATCH", 2)

    async def scenario():
        engine = uring.UringEngine.shared()
        try:
            chain = engine.chain(-1, uring.Gauge())
            nop = (rings.OP_NOP, rings.SQE_IO_LINK, -1, 0, 0, 0, 0, 0)
            waiting = engine.request(chain, [nop, nop, (rings.OP_NOP, 0, -1, 0, 0, 0, 0, 0)])
            waiting.send(None)                       # queued; the loop gets no turn until
            engine.push()                            # the end: the reaper runs only when
            deadline = time.monotonic() + 10         # called below
            while engine.ring.ready() < 3:
                assert time.monotonic() < deadline, "the three NOPs never completed"
            t = engine.answer()
            assert engine.early[0] == 1 and not chain.future.done()
            assert engine.answer() == t and engine.early[0] == 0
            assert chain.future.done() and chain.res == [0, 0, 0]
            assert chain.at == [t, t, t] and t > chain.t0
            waiting.close()
        finally:
            engine.close()
    asyncio.run(scenario())
