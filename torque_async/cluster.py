"""One plan on many hosts under an MPI launcher (mpiexec): detection, the MPI barrier, clock
offsets, the gather to rank 0.

Without a launcher's environment nothing here runs and mpi4py is never imported (nor are the
scratch files' and the cluster report's modules, imported where used). Under one,
every rank runs the plan with its own results segment (-smkey + rank) and its own scratch
directory and -files tree (named by host and rank); all ranks set up, meet at an MPI barrier
(polled, so a rank that never comes ends the run after the set-up timeout), then pass their
own local barrier. Each run of a series (-repeat's repetitions, -baseline's runs of a group
alone: runs.py; capacity's points) is one such run of every rank; MPI starts and ends once per
process. After each, rank 0 measures each rank's
CLOCK_MONOTONIC offset again with a few ping-pongs (the hosts' clocks drift apart between runs)
and gathers every rank's records; before the first, the first rank on each host sends rank 0
its machine's description. Ranks on rank 0's kernel (the same boot_id) share its clock: their
offset is exactly 0 and is not measured. Only rank 0 reports and writes sysctl.current. A rank
that fails or is interrupted cleans up and then calls MPI_Abort, which ends every rank; a guard process of
each rank (in its own session, so MPI's kill of the rank's process group spares it) removes
what a killed rank leaves: its workers, its segment, its scratch directory.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable

from .deadlines import SETUP_TIMEOUT
from .errors import UsageError
from .options import GLOBAL_DEFAULTS, LOCAL_DEFAULTS
from .outcome import Outcome
from .plan import Plan
from .results import SHM_DIR, STOP_SIGNALS, Record, segment_name
from .sysinfo import SysInfo

LAUNCHER_RANK = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")   # MPICH hydra, Open MPI, PMIx
PING_ROUNDS = 16                  # ping-pongs per rank; the one with the shortest round trip counts
POLL = 0.0005                     # seconds between looks at the MPI barrier
POLL_START = 0.05                 # seconds between looks at the files MPI maps as it starts
ALIVE = b"+"                      # a rank to its start's watcher: past MPI's start, alive
TAG_PING, TAG_PONG, TAG_PHASE = 11, 12, 100     # TAG_PHASE + k: the arrivals at meeting k
LATE = " of this rank's (-rankTimeout): stopped or hung?"
STOPPED_ALONE = " of this rank's (-rankTimeout), which was stopped: the stop reached it alone " \
                "(the others run on, or wait for it in their run); ending every rank"
BOOT_ID = "/proc/sys/kernel/random/boot_id"   # one per running kernel: one CLOCK_MONOTONIC


def boot_id(path: str = BOOT_ID) -> str:
    """This kernel's boot id: ranks with the same one read the same CLOCK_MONOTONIC."""
    with open(path) as f:
        return f.read().strip()


def launcher_rank() -> int | None:
    """This process's rank from an MPI launcher's environment, None without a launcher."""
    for name in LAUNCHER_RANK:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


LOCAL_RANK = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK")


def first_on_host() -> bool:
    """Whether this process is its host's first rank (or runs without a launcher): what every
    rank of a host would find alike is said once, by it."""
    local = next((os.environ[n] for n in LOCAL_RANK if n in os.environ), None)
    return launcher_rank() is None or local in (None, "0")


def own(smkey: int | None, rank: int | None) -> tuple[int, str]:
    """A run's segment key (-smkey, + its rank under a launcher; without -smkey its pid, which
    no other live run has) and what names its scratch directory and -files tree (.HOST.rRANK;
    none without a launcher, rank None)."""
    key = os.getpid() if smkey is None else smkey + (rank or 0)
    return key, "" if rank is None else f".{socket.gethostname()}.r{rank}"


def refuse(plan: Plan) -> None:
    """Plans that make no sense on several ranks (bad input, exit 2 on every rank)."""
    s = plan.settings
    for flag, why in ((s.child is not None, "-child runs one process of a plan"),
                      (s.sp, "-sp runs one test in this process"),
                      (s.g, "-g waits for a key that only rank 0 would get")):
        if flag:
            raise UsageError(f"{why}: it cannot run under an MPI launcher (mpiexec)")
    if any(g.local.cfiles and g.local.dir != LOCAL_DEFAULTS["dir"] for g in plan.groups):
        raise UsageError("-cfiles with a -dir of your own under mpiexec: every rank would write "
                         "the same tree; make it once without mpiexec, then run without -cfiles")


RANK_TEXT = ("command line:", "seed:", "configuration file:", "  from:")   # (see same_plan)


def plan_digest_lines(lines: list[str]) -> list[str]:
    """What every rank's plan must agree on: -quit's lines less those that may differ by rank
    with the plan the same (how it was typed, the seed from the clock, a file's path)."""
    return [ln for ln in lines if not ln.startswith(RANK_TEXT)]


def ranked(plan: Plan, tag: str) -> Plan:
    """A rank's plan as its checks and run see it: the default -dir gets the host and rank
    (`tag`), so each rank has a tree of its own."""
    return replace(plan, groups=tuple(
        replace(g, local=replace(g.local, dir=g.local.dir + tag))
        if g.local.dir == LOCAL_DEFAULTS["dir"] else g for g in plan.groups))


def mpi_files(maps: str = "/proc/self/maps") -> list[tuple[int, str]]:
    """(inode, path) of the files in /dev/shm this process has mapped: read after MPI_Init and
    before the run makes its own, they are the MPI library's (MPICH maps mpich_shm_JOB_NODE in
    MPI_Init and removes it only in MPI_Finalize, so a killed rank leaves it)."""
    found = set()
    with open(maps) as lines:
        for line in lines:
            fields = line.rstrip("\n").split(None, 5)       # ... DEVICE INODE PATH
            if len(fields) == 6 and fields[5].startswith(SHM_DIR + "/") and \
                    not fields[5].endswith(" (deleted)"):
                found.add((int(fields[4]), fields[5]))
    return sorted(found)


@dataclass(frozen=True)
class Pong:
    """One ping-pong: rank 0's clock when it sent, the remote clock when it answered, rank 0's
    clock when the answer came back (ns)."""
    sent: int
    remote: int
    back: int


def offset_of(pongs: list[Pong]) -> tuple[int, int]:
    """(remote clock - rank 0's clock, uncertainty), both ns, from the ping-pong with the
    shortest round trip: the remote read its clock within that trip, so the offset is exact
    to half of it."""
    best = min(pongs, key=lambda p: p.back - p.sent)
    return best.remote - (best.sent + best.back) // 2, (best.back - best.sent + 1) // 2


def shift(rec: Record, offset: int) -> Record:
    """A record's CLOCK_MONOTONIC times put on rank 0's clock (0 stays 'not reached')."""
    def on0(t: int) -> int:
        return t - offset if t else 0
    return replace(rec, start=on0(rec.start), finish=on0(rec.finish), launched=on0(rec.launched),
                   samples=tuple((on0(t), k) for t, k in rec.samples),
                   phase=tuple(on0(t) for t in rec.phase))


class Cluster:
    """This rank's place in the MPI job (mpi4py's COMM_WORLD)."""

    def __init__(self, comm, clock: Callable[[], int] = time.monotonic_ns):
        self.comm, self.clock = comm, clock
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.host = socket.gethostname()
        self.hosts, self.kernels = (list(x) for x in zip(*comm.allgather((self.host, boot_id()))))
        self.guard: subprocess.Popen | None = None
        self.together = False                # every rank ends with the same status, knowing it
                                             # (agree's refusal, capacity's end): no MPI_Abort
        self.machines: dict[str, SysInfo] = {}         # rank 0: every host's (survey)
        self.meetings = 0                              # the deadline barriers passed (assemble)
        self.timeout = GLOBAL_DEFAULTS["rankTimeout"]  # (plan_for: the plan's)

    def shares_clock(self, rank: int) -> bool:
        """Whether a rank runs on rank 0's kernel, so reads its CLOCK_MONOTONIC."""
        return self.kernels[rank] == self.kernels[0]

    def name(self, rank: int) -> str:
        return f"rank {rank} on {self.hosts[rank]}"

    def agree(self, check: Callable[[], None]) -> None:
        """Run this rank's checks of its own plan (its tree, its host's memory and disks) and
        learn every rank's verdict, so that one rank's refusal ends every rank: a rank that
        refused alone left the others waiting in MPI's start for ever. Raises UsageError on
        every rank where any refused: its own, else the first refusal, named by rank. The
        ranks first meet with the set-up's deadline (a rank stopped in its checks is named and
        the job ends, exit 1); the count of refusals is then reduced polled (a stop signal
        still ends the wait)."""
        import numpy as np
        from mpi4py import MPI
        try:
            check()
            problem = ""
        except UsageError as e:
            problem = str(e)
        late = self.assemble(SETUP_TIMEOUT, lambda: False, "finish checking its plan",
                             " (stopped or hung?)")
        if late:
            self.abort(self.ended((late,), 0))
        refused = np.zeros(1, np.int64)
        self.wait(self.comm.Iallreduce(np.array([bool(problem)], np.int64), refused, MPI.SUM))
        if refused[0]:
            problems = self.comm.allgather(problem)        # (every rank is here: at once)
            self.together = True
            if problem:
                raise UsageError(problem)
            first = next(r for r, p in enumerate(problems) if p)
            raise UsageError(f"{self.name(first)} refused the plan: {problems[first]}")

    def same_plan(self, lines: list[str]) -> None:
        """Every rank runs rank 0's plan (`lines`: what -quit shows of it, less what may differ
        by rank: the command's text, the clock's seed, the configuration file's path). A rank
        with another plan refuses the job on every rank, in one line naming the rank and the
        first difference. The digests are gathered polled (a stop signal still ends the wait)."""
        import numpy as np
        mine = np.frombuffer(hashlib.sha256("\n".join(lines).encode()).digest(), np.uint8)
        every = np.zeros((self.size, mine.size), np.uint8)
        self.wait(self.comm.Iallgather(mine, every))
        other = next((r for r in range(self.size) if (every[r] != every[0]).any()), None)
        if other is None:
            return
        theirs = self.comm.allgather(lines)                # (every rank is here: at once)
        self.together = True
        first, differ = theirs[0], theirs[other]
        k = next((k for k, (a, b) in enumerate(zip(first, differ)) if a != b),
                 min(len(first), len(differ)))
        said = [f"'{x[k].strip()}'" if k < len(x) else "nothing" for x in (first, differ)]
        raise UsageError(f"{self.name(other)} has another plan than rank 0 (every rank runs "
                         f"one plan): rank 0 has {said[0]}, {self.name(other)} {said[1]}")

    def wait(self, request) -> None:
        """Wait for a nonblocking collective, polled (sleeping, so a signal is handled)."""
        while not request.Test():
            time.sleep(POLL)

    def plan_for(self, plan: Plan) -> Plan:
        """This rank's plan (ranked() already): its own segment key; scratch files go into a
        directory named by host and rank. Starts the rank's clean-up guard (once: every run of
        the process has the same segment and scratch directory)."""
        from .io import scratch
        key, scratch.TAG = own(plan.settings.smkey, self.rank)
        self.timeout = plan.settings.rankTimeout
        settings = replace(plan.settings, smkey=key)
        if self.guard is None:
            self.guard = self.guarded(segment_name(key), scratch.directory())
        return replace(plan, settings=settings)

    def guarded(self, segment: str, scratch_dir: str) -> subprocess.Popen:
        return subprocess.Popen(                         # see cleanup_guard.py
            [sys.executable, "-m", "torque_async.cleanup_guard", str(os.getpid()),
             segment, scratch_dir, *(str(x) for found in mpi_files() for x in found), "--",
             *FOLDERS],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def meet(self, stopped: Callable[[], bool], timeout: float = SETUP_TIMEOUT) -> str:
        """Every rank set up: the MPI barrier, polled. '' once all are there (or when this rank
        was stopped meanwhile), else the problem naming the ranks that never came."""
        problem = self.assemble(timeout, stopped, "set up", "")
        return problem

    def assemble(self, timeout: float, stopped: Callable[[], bool], do: str,
                 hint: str = LATE) -> str:
        """A barrier with a deadline: every rank tells rank 0 it came (a tag of this meeting's
        own: a rank may send the next one's before rank 0 has read every one of this), so after
        `timeout` s rank 0 names the ranks that did not `do` it; the others wait 5 s longer, so
        that rank 0 is the one to say it (a rank that has to is saying that rank 0 did not).
        '' once all are there, or when `stopped()`; else the problem."""
        tag = TAG_PHASE + self.meetings % 30000
        self.meetings += 1
        arrival = self.comm.isend(self.rank, 0, tag)
        barrier = self.comm.Ibarrier()
        arrived: set[int] = set()
        deadline = self.clock() + int((timeout + (5 if self.rank else 0)) * 1e9)
        while not barrier.Test():
            self.take_arrivals(arrived, tag)
            if stopped():
                return ""
            if self.clock() > deadline:
                missing = [self.name(r) for r in range(self.size) if r not in arrived]
                return (f"{', '.join(missing)} did not {do} within {timeout:.0f} s{hint}"
                        if not self.rank else f"{self.name(0)} did not {do}, or name who did "
                        f"not, within {timeout + 5:.0f} s{hint}")
            time.sleep(POLL)
        self.take_arrivals(arrived, tag)
        while not self.rank and len(arrived) < self.size:     # the barrier may pass before
            arrived.add(self.comm.recv(tag=tag))               # every arrival can be matched:
        arrival.wait()                                         # one left unread fails Finalize
        return ""

    def take_arrivals(self, arrived: set[int], tag: int) -> None:
        """Rank 0: note the ranks that said they came."""
        while not self.rank and (message := self.comm.improbe(tag=tag)) is not None:
            arrived.add(message.recv())

    def offsets(self) -> list[tuple[int, int]]:
        """Rank 0: every rank's (clock offset, uncertainty) in ns, exactly (0, 0) for a rank on
        its kernel; the ranks on other kernels answer pings."""
        if self.rank:
            if self.shares_clock(self.rank):
                return []
            while not self.comm.iprobe(source=0, tag=TAG_PING):   # rank 0 is pinging another:
                time.sleep(POLL)                                  # leave it the CPU
            for _ in range(PING_ROUNDS):
                self.comm.recv(source=0, tag=TAG_PING)
                self.comm.send(self.clock(), 0, TAG_PONG)
            return []
        out = [(0, 0)]
        for r in range(1, self.size):
            if self.shares_clock(r):
                out.append((0, 0))
                continue
            pongs = []
            for _ in range(PING_ROUNDS):
                sent = self.clock()
                self.comm.send(None, r, TAG_PING)
                remote = self.comm.recv(source=r, tag=TAG_PONG)
                pongs.append(Pong(sent, remote, self.clock()))
            out.append(offset_of(pongs))
        return out

    def settle(self, do: str, stopped: int = 0) -> None:
        """Every rank here before a blocking collective, within -rankTimeout: a rank that is
        not (stopped, hung) is named and the job ends. The wait sleeps: MPI's blocking calls
        spin a core, which would take it from the ranks of this host still measuring.
        `stopped`: the signal that stopped this rank, whose stop then most likely reached it
        alone (the others run on, or wait for it in their run): the job ends with its status."""
        late = self.assemble(self.timeout, lambda: False, do, STOPPED_ALONE if stopped else LATE)
        if late and stopped:
            print(f"torque-async: {self.name(self.rank)}: {late}", file=sys.stderr)
            self.abort(128 + stopped)
        if late:
            self.abort(self.ended((late,), 0))

    def share(self, what=None):
        """Rank 0's `what` on every rank (MPI bcast), every rank there within -rankTimeout (give
        these exchanges a communicator of their own, Dup, beside the runs': a rank whose run
        ended early, stopped, must not meet another's run's gathering)."""
        self.settle("take rank 0's next step")
        return self.comm.bcast(what, root=0)

    def collect(self, mine, *, stopped: int = 0) -> list | None:
        """Rank 0: every rank's `mine`, in rank order (MPI gather); another rank: None.
        `stopped`: see settle."""
        self.settle("end its step", stopped)
        return self.comm.gather(mine, root=0)

    def survey(self, info: SysInfo, details: list[str]) -> list[str]:
        """Every host's machine, once per host (its first rank's SysInfo and sysctl.current
        lines): rank 0 keeps the SysInfo of each (`machines`) and gets the cluster's
        sysctl.current, its own host's lines then each other host's after a line naming it;
        another rank gets [] (only rank 0 writes the file)."""
        first = self.hosts.index(self.host) == self.rank
        self.settle("reach the report")
        sent = self.comm.gather((info, details) if first else None, root=0)
        if self.rank:
            return []
        lines: list[str] = []
        for host, (machine, mine) in ((self.hosts[r], got) for r, got in enumerate(sent) if got):
            self.machines[host] = machine
            ranks = " ".join(str(r) for r, h in enumerate(self.hosts) if h == host)
            lines += ["", f"--- host {host} (ranks {ranks}) ---", *mine] if lines else mine
        return lines

    def gather(self, outcome: Outcome, plan: Plan) -> Outcome:
        """After each run of a series, on every rank: rank 0's outcome gets every rank's records
        on its clock (the offsets measured now, after this run) and `cluster`, the gathered
        run; another rank keeps its own. A failed or interrupted outcome is returned as it is
        (the series stops there, and ended() then finish() end every rank). A rank that does
        not come within -rankTimeout ends every rank at once (the ranks' collectives would no
        longer pair up)."""
        if outcome.failures or outcome.interrupted:
            return outcome
        self.settle("end its run")
        measured = self.offsets()
        sent = self.comm.gather((self.host, os.getpid(), outcome.records), root=0)
        if self.rank:
            return outcome
        from .report_cluster import ClusterRun, Rank
        run = ClusterRun(tuple(Rank(r, host, pid, off, unc, tuple(shift(x, off) for x in recs),
                                    self.shares_clock(r))
                               for r, ((host, pid, recs), (off, unc))
                               in enumerate(zip(sent, measured))), plan, self.machines)
        return replace(outcome, records=run.records, cluster=run)

    def ended(self, failures: tuple[str, ...], interrupted: int) -> int:
        """After the series: a rank whose run failed or was interrupted says why and returns its
        exit status (finish() then ends every rank); 0 when its runs all ran to their end."""
        if not (failures or interrupted):
            return 0
        why = [f"interrupted by {signal.Signals(interrupted).name}"] if interrupted \
            else list(failures)
        for line in why + ["ending every rank"]:
            print(f"torque-async: {self.name(self.rank)}: {line}", file=sys.stderr)
        return 128 + interrupted if interrupted else 1

    def abort(self, code: int) -> None:
        """End every rank (MPI_Abort) after this rank's own clean-up (ABORTING's too, the
        latest first)."""
        from .io import scratch
        for last in reversed(ABORTING):
            last()
        scratch.remove()
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)
        os._exit(code)        # (MPICH's MPI_Abort may return: nothing of this rank goes on)

    def finish(self, code: int) -> int:
        """The run's exit status: a rank that did not succeed ends every rank (MPI_Abort, after
        its own clean-up), unless every rank ends together (agree's refusal, capacity); the guard is
        told this rank is done."""
        if code and not self.together:
            self.abort(code)
        self.settle("come to its end")   # no rank leaves while another may still fail
        from mpi4py import MPI
        try:                      # before "done": the guard then removes what MPI left
            MPI.Finalize()
        except MPI.Exception as e:
            print(f"torque-async: note: {self.name(self.rank)}: MPI_Finalize: "
                  f"{e.Get_error_string().splitlines()[0]}", file=sys.stderr)
        if self.guard:
            self.guard.communicate(b"done")
        return code


_job: Cluster | None = None           # this process's MPI job, once start() found one
ABORTING: list[Callable[[], None]] = []    # what this rank does before its MPI_Abort ends it
                                           # (capacity: say what its run said)
FOLDERS: list[str] = []     # folders of this rank's own that its guard removes if it is killed
                            # (capacity's), made before the first run starts the guard
# UCX (MPICH's ch4:ucx, the mpich wheel's) takes SIGHUP as its debug signal once MPI starts: a
# stop signal was swallowed and 'UCX DEBUG' lines landed in the report. A value the user set
# is kept.
UCX_QUIET = {"UCX_DEBUG_SIGNO": "0"}


def start(rank: int, timeout: float = GLOBAL_DEFAULTS["rankTimeout"]) -> Cluster:
    """The MPI job this process is rank `rank` of (launcher_rank(): without one, mpi4py stays
    unimported), started once per process (capacity's runs share it). MPI's start waits in C
    for every rank, where no Python handler runs: its watcher (start_watch) ends the rank on a
    stop signal, or after `timeout` s when a rank never comes. After, the stop signals keep the
    run's handlers (any the MPI library set for one of them at its start is replaced), and one
    that came as MPI started is taken as they take it."""
    global _job
    if _job is not None:
        return _job
    for name, value in UCX_QUIET.items():
        os.environ.setdefault(name, value)
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    came: list[int] = []
    try:
        for sig, handler in handlers.items():     # Python's own handler tells the watcher,
            if not callable(handler):             # whichever thread the signal reaches
                signal.signal(sig, lambda sig, _: came.append(sig))
        with start_watch(f"rank {rank} on {socket.gethostname()}", timeout):
            from mpi4py import MPI
    except ImportError:          # (perhaps on one host only: the line names it)
        raise UsageError(f"an MPI launcher started this process (rank {rank} on "
                         f"{socket.gethostname()}) but mpi4py is not installed there: "
                         f"pip install 'torque-async[mpi]'") from None
    except RuntimeError as e:    # mpi4py's: no MPI library it could load (each one's dlerror)
        raise UsageError(f"rank {rank} on {socket.gethostname()}: mpi4py cannot load the MPI "
                         f"library ({load_error(str(e))}): check the MPI installation there, "
                         f"and ulimit -v") from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        for sig in came[:1]:                      # (its own disposition's turn)
            os.kill(os.getpid(), sig)
    _job = Cluster(MPI.COMM_WORLD)
    return _job


def load_error(said: str) -> str:
    """The telling line of mpi4py's 'cannot load MPI library' (a dlerror per library it tried):
    the first that found a library it could not load, else the first."""
    lines = said.splitlines()[1:] or [said]
    missing = ("No such file or directory", "file too short")
    return next((ln for ln in lines if not ln.endswith(missing)), lines[0])


@contextlib.contextmanager
def start_watch(who: str, timeout: float):
    """While MPI starts: a forked watcher (nothing of the run's exists yet to copy), in a
    session of its own (the launcher's kill of the rank's group spares it), that ends this
    process (SIGKILL, which the launcher then takes as the end of the job) on a stop signal (the
    byte Python's C handler writes to the wakeup fd, from whichever thread the signal reached),
    or when the start has not returned within `timeout` s, saying why: a rank that failed
    before it started MPI (no mpi4py or numpy on its host, too little memory, a refusal it could
    not tell) never comes, and the others would wait in MPI's start for ever. Before, it reads
    the files this process maps; after, it removes what the process left: its workers' server's
    directory and the MPI library's files (as it does when the launcher kills the process
    first, with the files its last look, at most POLL_START ago, saw). It ignores the stop
    signals: one sent to both (pkill -f) ends the rank alone."""
    from .cleanup_guard import left           # (the guard's, as for a rank killed later)
    late = (f"torque-async: {who}: not every rank started MPI within {timeout:g} s "
            f"(-rankTimeout): a rank that failed before it started MPI (no mpi4py or numpy on "
            f"its host, too little memory) never comes; ending this rank\n").encode()
    stopped = {sig: f"torque-async: {who}: interrupted by {signal.Signals(sig).name} as MPI "
                    f"started; ending this rank\n".encode() for sig in STOP_SIGNALS}
    me = os.getpid()
    done, tell = os.pipe()
    stops, woken = os.pipe()
    os.set_blocking(woken, False)                     # (as set_wakeup_fd needs)
    watcher = os.fork()
    if watcher == 0:                                  # (only system calls and reads: a fork)
        try:
            os.setsid()
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
            os.close(tell)
            os.close(woken)
            deadline, mapped, said = time.monotonic() + timeout, set(), late
            while (wait := deadline - time.monotonic()) > 0:
                with contextlib.suppress(OSError):    # (gone: its read of `done` says so)
                    mapped |= set(mpi_files(f"/proc/{me}/maps"))
                ready = select.select([done, stops], [], [], min(wait, POLL_START))[0]
                if stops in ready and (sig := os.read(stops, 1)[0]) in stopped:
                    said = stopped[sig]
                    break
                if done in ready:
                    if os.read(done, 1) == ALIVE:
                        os._exit(0)
                    said = b""                        # killed first: what it had mapped
                    break
            if said:
                with contextlib.suppress(OSError):    # (no one left to read it: ended anyway)
                    os.write(2, said)
                with contextlib.suppress(OSError):    # (its last files, held in MPI's C)
                    mapped |= set(mpi_files(f"/proc/{me}/maps"))
                os.kill(me, signal.SIGKILL)
            for fd in (0, 1, 2):                      # (the launcher waits for their EOF)
                os.close(fd)
            left(me, [], sorted(mapped))
        finally:
            os._exit(0)
    os.close(done)
    os.close(stops)
    before = signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    try:
        yield
    finally:                                          # started, or refused: its own to clean
        signal.set_wakeup_fd(before)
        os.close(woken)
        with contextlib.suppress(BrokenPipeError):    # (a watcher killed: none to tell)
            os.write(tell, ALIVE)
        os.close(tell)
        with contextlib.suppress(ChildProcessError):  # (SIGCHLD ignored: the kernel reaped
            os.waitpid(watcher, 0)                    # it, the wait still waited for its end)


def refused_alone(message: str) -> None:
    """Under an MPI launcher, a rank that refused its command line before MPI started (an
    option that differs by rank) joins the job to say so: the others wait in MPI's start, then
    compare plans (same_plan, the first exchange of a run and of capacity). Its refusal is its
    plan, so every other rank refuses the job in one line naming it, where they would have
    waited for ever; ranks that all refused alike end quietly. finish() then ends it."""
    rank = launcher_rank()
    if rank is None or _job is not None:
        return
    try:
        job = start(rank)
    except UsageError:           # (no mpi4py here: nothing to tell the others with)
        return
    job.together = True
    try:
        job.same_plan([f"refused its command line: {message}"])
    except UsageError:           # (said already, in this rank's own words)
        pass


def finish(code: int) -> int:
    """The exit status; under MPI, see Cluster.finish."""
    return _job.finish(code) if _job else code
