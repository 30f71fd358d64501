"""The shared results array: one fixed record per test process, in one shared memory segment.

Each test process writes only its own row; the orchestrator reads them all and sets the stop
flag. Times are CLOCK_MONOTONIC nanoseconds. After the run, `snapshot()` copies the rows into
immutable `Record`s that the report reads.
"""
from __future__ import annotations

import contextlib
import os
import stat
import signal
import tempfile
import time
from dataclasses import dataclass
import _posixshmem
from multiprocessing import shared_memory

import numpy as np

from .semaphores import remove as remove_semaphore, untrack
from .stats import HIST_BUCKETS, Stats, sparse

MAX_SAMPLES = 1024
MAX_SUBS = 3                       # sub-streams of one stream (rwr, rrw)
WEB_OPS = ("open", "read", "close", "append")   # -web: the operations of a request, timed apart
SIZE_LAW = ("files", "mean", "p50", "p99")      # -web: the file sizes of the tree made (bytes)
WEB_LOAD = ("open_ns", "flight_ns", "most_flight", "cpu_ns", "log_bytes", "queue_ms",
            "queue_ns")    # -web: its group's (on its loop) files held open and requests in
# flight, summed over their time (ns), the most requests in flight at once, the process's CPU
# from its first counted request to this client's publish, the log's size at the end (-1: not
# yet known), the tree's block device's weighted ms doing I/O over queue_ns from that first
# request (-1: the tree is on no block device)
PHASES = ("spawned", "set up", "released", "measured", "done")
MAGIC = 0x746F72717565         # "torque"

# Set the stop flag (the orchestrator's: workers ignore them). One ignored when the command
# started stays ignored (nohup's SIGHUP, SIGINT of a script's background job). SIGQUIT (Ctrl-\)
# is one too: its default (death with a core dump) would leave the run's files behind.
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
STOP_SIGNALS = tuple(sig for sig in STOPS if signal.getsignal(sig) != signal.SIG_IGN)


@contextlib.contextmanager
def signals_held():
    """The stop signals wait (blocked) meanwhile; a process started meanwhile starts with them
    blocked, so a signal to the process group cannot end it before it ignores them. One that
    came is handled once they are not."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# Row states, in the order a test goes through them.
NEW, READY, RUNNING, MEASURED, DONE, FAILED, ABORTED = range(7)
# A row's `checked`: its data check passed (CHECKED) and proved the data's values (VALUES), the
# count of transfers its results claim (COUNT); a test's `proves` is VALUES | COUNT or less.
VALUES, COUNT, CHECKED = 1, 2, 4
STATE_NAMES = ("new", "ready", "running", "measured", "done", "failed", "aborted")

SEGMENT_PREFIX = "torque-async-"    # a segment's name: the prefix and -smkey in hex
SHM_DIR = "/dev/shm"               # where Linux keeps POSIX shared memory (shm_open names)
MAX_SEMS = 8
HEADER = np.dtype([("magic", "i8"), ("owner", "i8"), ("rows", "i8"),
                   ("stop", "i8"),                    # the stop flag: when the run was first
                                                      # stopped (Results.stop), else 0
                   ("sems", "S32", (MAX_SEMS,))])     # the run's named semaphores, while they
                                                      # exist (semaphores.py)
ROW = np.dtype([
    ("state", "i8"), ("pid", "i8"),
    ("start", "i8"), ("finish", "i8"),            # the measured interval
    ("ran", "i8", (2,)),                         # when its transfers, measured or not (-ramp,
                                                 # -slow), began and ended (0: not known)
    ("transfers", "i8"),                         # measured transfers (live while running)
    ("whole", "i8"),                             # 1: its measured part reached its limit (n x
                                                 # i, -t's deadline, a stream's frames) before
                                                 # any stop (Meter.publish)
    ("bytes", "i8"), ("sys_bytes", "i8"),        # transfer bytes and system bytes measured
    ("extra_transfers", "i8"),                   # unmeasured transfers run under -slow
    ("ramp_transfers", "i8"),                    # unmeasured transfers run first (-ramp)
    ("lat_min", "i8"), ("lat_max", "i8"), ("lat_sum", "i8"), ("lat_count", "i8"),
    ("hist", "i8", (HIST_BUCKETS,)),
    ("nsamples", "i8"), ("samples", "i8", (MAX_SAMPLES, 2)),   # (time ns, transfers done)
    ("phase", "i8", (len(PHASES),)),             # when each phase began (-checkpoint)
    ("ops", "i8"), ("ref_rate", "f8"),           # spinWait: loops measured, loops/s alone
    ("transfer_bytes", "i8"),
    ("file", "S256"),                            # the file a file test used (File column)
    ("file_bytes", "i8"),                        # and the size of the largest it worked on
    ("info", "S480"), ("error", "S240"),
    ("last_lat", "i8"),                          # the last latency recorded (-cyclic's Act)
    ("nsubs", "i8"),                             # streams: sub-streams, and for each of them
    ("sub_xfers", "i8", (MAX_SUBS,)),            # measured transfers,
    ("late", "i8", (MAX_SUBS,)),                 # those lost (late beyond the buffer),
    ("late_buffered", "i8", (MAX_SUBS,)),        # those late within the buffer,
    ("late_run", "i8", (MAX_SUBS,)),             # the longest run of consecutive late ones,
    ("late_min", "i8", (MAX_SUBS,)), ("late_max", "i8", (MAX_SUBS,)),   # lateness (ns, 0 when
    ("late_sum", "i8", (MAX_SUBS,)),             # on time): min, max, sum and histogram
    ("late_hist", "i8", (MAX_SUBS, HIST_BUCKETS)),
    ("dropped", "i8", (MAX_SUBS,)),              # and the frames it skipped (-dropLate);
    ("sub_ns", "i8", (MAX_SUBS,)),               # the ns its frames span (Pipeline.window);
    ("lapped", "i8", (MAX_SUBS,)),               # -from: frames lost overwritten by the writer,
    ("up_late", "i8", (MAX_SUBS,)),              # those late by the upstream's lateness,
    ("up_lost", "i8", (MAX_SUBS,)),              # lost or dropped by it alone, the greatest
    ("up_max", "i8", (MAX_SUBS,)),               # lateness inherited (ns);
    ("nlate_trace", "i8"),                       # the stream's lateness over time: (completion
    ("late_trace", "i8", (MAX_SAMPLES, 2)),      # ns, greatest lateness ns) per run of frames
    ("split", "i8"),                             # 1: reads and writes also apart (file tests
    ("rw_count", "i8", (2,)), ("rw_min", "i8", (2,)),   # that mix them), each [read, write]
    ("rw_max", "i8", (2,)), ("rw_sum", "i8", (2,)), ("rw_hist", "i8", (2, HIST_BUCKETS)),
    ("cpu_user", "i8"), ("cpu_sys", "i8"),       # CPU ns over the measured interval (a worker:
    ("csw_vol", "i8"), ("csw_invol", "i8"),      # its process; a loop test: the loop's thread)
    ("cpu_wait", "i8"),                          # ns runnable but waiting for a CPU (-1: unknown)
    ("sched", "i8", (2,)),                       # its thread's scheduling policy and priority
    ("harness_ns", "i8"),                        # the harness's own cost per transfer
    ("launched", "i8"),                          # when its process was started (a worker: the
                                                 # orchestrator's stamp just before it started
                                                 # it; a loop test: when its set-up began)
    ("setup_ns", "i8"),                          # its set-up: from launched to ready
    ("checked", "i8"),                           # its data check passed (4) and proved the
                                                 # values (1), the transfers' count (2)
    ("unproved", "S160"),                        # why the passed check did not prove both
    ("nops", "i8"),                              # -web: operations timed apart (WEB_OPS), and
    ("op_count", "i8", (len(WEB_OPS),)),         # for each: count, min, max, sum, histogram
    ("op_min", "i8", (len(WEB_OPS),)), ("op_max", "i8", (len(WEB_OPS),)),
    ("op_sum", "i8", (len(WEB_OPS),)), ("op_hist", "i8", (len(WEB_OPS), HIST_BUCKETS)),
    ("size_law", "i8", (len(SIZE_LAW),)),        # -web: the tree's sizes (SIZE_LAW)
    ("most_open", "i8"),                         # -web: most files its group held open at once
    ("unsplit", "i8"),                           # -web: measured requests whose split into
                                                 # operations is not resolved (not in op_*)
    ("web_load", "i8", (len(WEB_LOAD),)),        # -web: WEB_LOAD
    ("group_work", "i8", (3,)),                  # -web: requests, bytes read, bytes appended by
                                                 # its group's clients, measured or not, when it
                                                 # published (the last one: the group's span)
], align=True)
# Histogram counts are i8 on purpose: a bucket may count more than 2**32 transfers in a long
# run. A row is then 200 KB (10 histograms of 18 KB, 4 of them -web's operations): 200 MB of
# segment for 1024 processes.


def segment_name(smkey: int) -> str:
    return f"{SEGMENT_PREFIX}{smkey:x}"


class NotASegment(Exception):
    """Something other than a segment stands at a segment's name (not a regular file: nothing
    opens it; a file without the segment's magic: nothing reads or removes it)."""

    def __init__(self, name: str, what: str = "a link, FIFO or directory stands there"):
        super().__init__(f"/dev/shm/{name} is not a torque-async segment ({what}): remove it "
                         f"yourself or choose another -smkey")


class SegmentExists(Exception):
    """A results segment of this key exists: another run, or one that was killed."""


class Results:
    def __init__(self, shm: shared_memory.SharedMemory, rows: int):
        self.shm = shm
        self.inode = 0                 # the segment this process made (create), else 0
        self.header = np.ndarray((), HEADER, shm.buf, 0)
        self.rows = np.ndarray((rows,), ROW, shm.buf, HEADER.itemsize)

    @classmethod
    def create(cls, name: str, rows: int) -> "Results":
        """Make segment `name`, owned by this process. It is made and its header written under
        a private name, then linked to `name`: nobody ever sees it without its owner, and of two
        runs started at once on one key exactly one gets it (the other: SegmentExists)."""
        fd, made = tempfile.mkstemp(prefix=f".{name}.", dir=SHM_DIR)     # mode 600
        try:
            size = HEADER.itemsize + rows * ROW.itemsize
            os.ftruncate(fd, size)                                       # zeros, and
            try:                       # their pages now: past /dev/shm's free space, a write
                os.posix_fallocate(fd, 0, size)      # to one killed the run with SIGBUS
            except OSError as e:
                raise OSError(e.errno, e.strerror, os.path.join(SHM_DIR, name)) from None
            header = np.zeros((), HEADER)
            header["magic"], header["owner"], header["rows"] = MAGIC, os.getpid(), rows
            os.pwrite(fd, header.tobytes(), 0)
            inode = os.fstat(fd).st_ino
            os.link(made, os.path.join(SHM_DIR, name))
        except FileExistsError:
            raise SegmentExists(name) from None
        finally:
            os.close(fd)
            os.unlink(made)
        res = cls.attach(name)
        res.inode = inode
        return res

    @classmethod
    def attach(cls, name: str) -> "Results":
        shm = shared_memory.SharedMemory(name)
        rows = int(np.ndarray((), HEADER, shm.buf, 0)["rows"])
        return cls(shm, rows)

    def stop(self) -> int:
        """Raise the stop flag, which holds when the run was first stopped; returns that."""
        self.header["stop"] = int(self.header["stop"]) or time.monotonic_ns()
        return int(self.header["stop"])

    def row(self, i: int) -> np.ndarray:
        """Row i as a one-record view: writes land in the segment."""
        return self.rows[i:i + 1]

    def unlink(self) -> None:
        """Remove the segment's name if it still names the segment this process made: a
        -freeSharedMemory may have removed it and a later run made another of the same name."""
        name = self.shm.name.lstrip("/")
        try:
            ours = os.stat(os.path.join(SHM_DIR, name)).st_ino == self.inode
        except FileNotFoundError:
            ours = False
        if ours:
            _posixshmem.shm_unlink(self.shm._name)
        untrack(self.shm._name, "shared_memory")

    def release(self) -> None:
        """Drop the numpy views and unmap; the segment itself stays until unlinked."""
        del self.header, self.rows
        try:
            self.shm.close()
        except BufferError:     # a view is still alive (a traceback's frame): exit unmaps it
            pass

    def snapshot(self) -> tuple["Record", ...]:
        return tuple(Record.of(r, i) for i, r in enumerate(self.rows.copy()))


def header_of(name: str) -> np.void | None:
    """A copy of segment `name`'s header, or None if there is no such segment; NotASegment for
    anything else at its name (segments appear with their header written: Results.create).

    Looking must not adopt the segment: a plain attach would register it with this process's
    resource tracker, which would then unlink another run's segment when this process exits.
    """
    try:
        mode = os.lstat(os.path.join(SHM_DIR, name)).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):                   # a link, FIFO, directory: never opened
        raise NotASegment(name)
    try:
        shm = shared_memory.SharedMemory(name)
    except FileNotFoundError:
        return None
    untrack(shm._name, "shared_memory")
    try:
        header = np.ndarray((), HEADER, shm.buf, 0).copy()[()] \
            if shm.size >= HEADER.itemsize else None
    finally:
        shm.close()
    if header is None or header["magic"] != MAGIC:
        raise NotASegment(name, "a file of other contents stands there")
    return header


def owner_of(name: str) -> int | None:
    """The pid that created segment `name`, None if there is no such segment."""
    header = header_of(name)
    return None if header is None else int(header["owner"])


def live_owner(pid: int, name: str) -> bool:
    """Whether `pid` still runs segment `name`: a torque-async command (it maps the segment a
    moment after making it), or any program that maps it (one that runs torque-async in its own
    process: the tests, execute()). A pid reused by another program is neither."""
    import psutil                  # here: the spawned workers import this module, never this
    try:
        if any("torque" in arg for arg in psutil.Process(pid).cmdline()):
            return True
    except psutil.AccessDenied:
        return True                # cannot tell: assume the run is alive
    except psutil.Error:
        return False
    return maps(pid, os.path.join(SHM_DIR, name))


def maps(pid: int, path: str) -> bool:
    """Whether process `pid` has the file at `path` mapped (by its device and inode: the
    segment's own name is not what its maps line shows, Results.create links it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return any(f[3:5] == [dev, str(st.st_ino)] for f in map(str.split, fh) if len(f) > 4)
    except PermissionError:
        return True                # another user's: cannot tell, assume the run is alive
    except OSError:                # gone meanwhile
        return False


class SegmentInUse(Exception):
    """The segment's owner is a running torque-async."""

    def __init__(self, owner: int):
        super().__init__(owner)
        self.owner = owner


def free_segment(name: str) -> tuple[int, tuple[str, ...]] | None:
    """Remove a segment a killed run left, and the semaphores named in its header; returns its
    creator's pid and the semaphores removed, or None if there was no segment. Raises
    SegmentInUse if its creator is still running."""
    header = header_of(name)
    if header is None:
        return None
    owner = int(header["owner"])
    if owner and live_owner(owner, name):
        raise SegmentInUse(owner)
    sems = tuple(n.decode() for n in header["sems"] if n)
    _posixshmem.shm_unlink("/" + name)
    return owner, tuple(n for n in sems if remove_semaphore(n))


UPSTREAM_FIELDS = ("lapped", "up_late", "up_lost", "up_max")     # a wired stream's, per sub


@dataclass(frozen=True)
class SubStream:
    """One sub-stream's figures: measured transfers (frames moved) and their lateness (ns),
    those lost (`late`: late beyond -lateUs and the -bufferFrames buffer), frames dropped
    (-dropLate), the longest run lost or dropped, the ns its frames span (from its first
    frame's period to the later of its last due frame's deadline and its last completion: the
    time of its rate; 0 where not known) and the frames late within the buffer. A wired stream
    (-from): of the frames lost, those its writer overwrote first (`lapped`); apart, the
    lateness inherited from the upstream: frames late by it, lost (or dropped) by it alone,
    the greatest (ns)."""
    transfers: int
    late: int
    late_run: int
    lo: int
    hi: int
    total: int
    hist: tuple[tuple[int, int], ...]
    dropped: int = 0
    elapsed: int = 0
    late_in_buffer: int = 0
    lapped: int = 0
    up_late: int = 0
    up_lost: int = 0
    up_max: int = 0

    @property
    def frames(self) -> int:
        """Frames due: moved and dropped."""
        return self.transfers + self.dropped

    @property
    def held(self) -> bool:
        """No frame lost (late beyond the tolerance and the buffer), none dropped."""
        return not (self.late or self.dropped)

    @property
    def lateness(self) -> Stats:
        return Stats(self.transfers, self.lo, self.hi, self.total, self.hist)


@dataclass(frozen=True)
class Record:
    """An immutable copy of one row, with plain Python values."""
    row: int
    state: int
    pid: int
    start: int
    finish: int
    transfers: int
    bytes: int
    sys_bytes: int
    extra_transfers: int
    lat_min: int
    lat_max: int
    lat_sum: int
    lat_count: int
    hist: tuple[tuple[int, int], ...]            # sparse: (bucket, count)
    samples: tuple[tuple[int, int], ...]
    phase: tuple[int, ...]
    ops: int
    ref_rate: float
    transfer_bytes: int
    file: str
    info: str
    error: str
    last_lat: int = 0
    file_bytes: int = 0
    subs: tuple[SubStream, ...] = ()
    late_trace: tuple[tuple[int, int], ...] = ()
    rw: tuple[Stats, ...] = ()                   # (reads, writes) of a test that mixes them
    cpu_user: int = 0
    cpu_sys: int = 0
    csw_vol: int = 0
    csw_invol: int = 0
    cpu_wait: int = -1             # ns it waited for a CPU, runnable (-1: not known)
    harness_ns: int = 0
    ramp_transfers: int = 0
    op_lat: tuple[Stats, ...] = ()               # -web: latency of each of WEB_OPS
    size_law: tuple[int, ...] = ()
    most_open: int = 0
    unsplit: int = 0
    group_work: tuple[int, ...] = ()
    web_load: tuple[int, ...] = ()
    launched: int = 0
    setup_ns: int = 0
    whole: bool = True             # its measured part was not cut short by a stop
    checked: int = CHECKED | VALUES | COUNT   # its passed data check and what it proved (a
                                              # row's own; a record made without one: both)
    unproved: str = ""             # why that check did not prove the values and the count
    ran: tuple[int, int] = (0, 0)  # its transfers, measured or not, began and ended (0: unknown)
    sched: tuple[int, int] = (0, 0)  # its thread's policy (os.SCHED_*) and priority (-rtprio)

    @classmethod
    def of(cls, r: np.void, row: int) -> "Record":
        n = int(r["nsamples"])
        return cls(row=row, state=int(r["state"]), pid=int(r["pid"]), start=int(r["start"]),
                   finish=int(r["finish"]), transfers=int(r["transfers"]),
                   bytes=int(r["bytes"]), sys_bytes=int(r["sys_bytes"]),
                   extra_transfers=int(r["extra_transfers"]), lat_min=int(r["lat_min"]),
                   lat_max=int(r["lat_max"]), lat_sum=int(r["lat_sum"]),
                   lat_count=int(r["lat_count"]), hist=sparse(r["hist"]),
                   samples=tuple((int(t), int(k)) for t, k in r["samples"][:n]),
                   phase=tuple(int(x) for x in r["phase"]), ops=int(r["ops"]),
                   ref_rate=float(r["ref_rate"]), transfer_bytes=int(r["transfer_bytes"]),
                   file=r["file"].decode(errors="replace"), info=r["info"].decode(errors="replace"),
                   error=r["error"].decode(errors="replace"), last_lat=int(r["last_lat"]),
                   file_bytes=int(r["file_bytes"]), ramp_transfers=int(r["ramp_transfers"]),
                   subs=tuple(SubStream(int(r["sub_xfers"][i]), int(r["late"][i]),
                                        int(r["late_run"][i]), int(r["late_min"][i]),
                                        int(r["late_max"][i]), int(r["late_sum"][i]),
                                        sparse(r["late_hist"][i]), int(r["dropped"][i]),
                                        int(r["sub_ns"][i]), int(r["late_buffered"][i]),
                                        *(int(r[f][i]) for f in UPSTREAM_FIELDS))
                              for i in range(int(r["nsubs"]))),
                   late_trace=tuple((int(t), int(ns)) for t, ns in
                                    r["late_trace"][:int(r["nlate_trace"])]),
                   rw=tuple(Stats(int(r["rw_count"][i]), int(r["rw_min"][i]),
                                  int(r["rw_max"][i]), int(r["rw_sum"][i]),
                                  sparse(r["rw_hist"][i])) for i in range(2 * int(r["split"]))),
                   cpu_user=int(r["cpu_user"]), cpu_sys=int(r["cpu_sys"]),
                   csw_vol=int(r["csw_vol"]), csw_invol=int(r["csw_invol"]),
                   cpu_wait=int(r["cpu_wait"]),
                   harness_ns=int(r["harness_ns"]), launched=int(r["launched"]),
                   setup_ns=int(r["setup_ns"]), whole=bool(r["whole"]),
                   checked=int(r["checked"]), unproved=r["unproved"].decode(errors="replace"),
                   ran=(int(r["ran"][0]), int(r["ran"][1])),
                   sched=(int(r["sched"][0]), int(r["sched"][1])),
                   op_lat=tuple(Stats(int(r["op_count"][i]), int(r["op_min"][i]),
                                      int(r["op_max"][i]), int(r["op_sum"][i]),
                                      sparse(r["op_hist"][i]))
                                for i in range(int(r["nops"]))),
                   size_law=tuple(int(x) for x in r["size_law"]) if r["nops"] else (),
                   most_open=int(r["most_open"]), unsplit=int(r["unsplit"]),
                   group_work=tuple(int(x) for x in r["group_work"]) if r["nops"] else (),
                   web_load=tuple(int(x) for x in r["web_load"]) if r["nops"] else ())

    @property
    def lat(self) -> Stats:
        """The latency of its measured transfers."""
        return Stats(self.lat_count, self.lat_min, self.lat_max, self.lat_sum, self.hist)

    @property
    def elapsed(self) -> int:
        return self.finish - self.start

    @property
    def wait_pct(self) -> float | None:
        """The share of its measured interval it waited for a CPU, % (None: not known)."""
        return 100 * self.cpu_wait / self.elapsed if self.cpu_wait >= 0 and self.elapsed > 0 \
            else None

    @property
    def measured(self) -> bool:
        """It published its measured part's figures: a test that died while running has only
        the live count, no interval (start and finish 0) and no bytes."""
        return self.transfers > 0 and self.finish > self.start

    @property
    def ok(self) -> bool:
        return self.state == DONE
