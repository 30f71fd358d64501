"""What a plan needs of this machine, checked with the plan (exit 2, one line) so nothing is
written or started that cannot finish: memory, free disk space and open files.

Memory counts every buffer a test allocates (memory and STREAM arrays, -offset's bytes before
each, a file test's lane
buffers, a stream's frames and -memStreams' tracks, a video test's images) and each spawned
worker process. Free space counts the scratch files, the stream scratch tracks and what -cfiles
still has to write, per file system. Open files count every file a test holds open (-files opens
its whole tree) plus each worker's pipes; a soft limit below that is raised to the hard limit.
"""
from __future__ import annotations

import mmap
import os
import resource
import stat
from collections import defaultdict

import psutil

from .errors import UsageError
from .io import actions
from .io.files import block_size
from .kinds import KINDS, WORKER
from .results import HEADER, MAX_SEMS, ROW, SHM_DIR
from .streams.schedule import Geometry
from .streams.wire import borrows
from .units import KB, MB, amount
from .workstart import FILES_AT_START

# Resident memory of one spawned worker beyond its buffers, measured here with psutil (RSS) on
# a run holding it idle (-sleepEnd 5): 39 MB for -spinWait (Python, numpy), 99 MB for -V 1 with
# 64x64 images (Mesa llvmpipe's context on top).
WORKER_BYTES = 40 * MB
VIDEO_WORKER_BYTES = 100 * MB
# A -V test's images (IH x IW x 4 bytes each) alive at once, at most: two client buffers, three
# textures and two pack buffers (host memory under llvmpipe) and the check's read-back.
VIDEO_IMAGES = 8
FILES_BASE = FILES_AT_START       # the interpreter, its libraries, stdio, the results segment
FILES_PER_WORKER = 6              # a spawned worker's pipes and sentinel in the main process


def check(plan) -> None:
    """Raise UsageError when the plan needs more memory, disk space, shared memory or open
    files than here."""
    check_memory(plan)
    check_address_space(plan)
    check_space(plan)
    check_shared_memory(plan)
    check_open_files(plan)


def memory_of(plan, proc) -> int:
    """Bytes of memory test process `proc` allocates, with its process's own cost."""
    need = buffers_of(proc)
    if KINDS[proc.group.action].runs_in == WORKER and not plan.settings.sp:
        need += VIDEO_WORKER_BYTES if proc.group.action == "V" else WORKER_BYTES
    return need


def buffers_of(proc) -> int:
    """Bytes of memory test process `proc` allocates for its buffers."""
    group, local = proc.group, proc.group.local
    kind = KINDS[group.action]
    need = kind.working_sets * local.n * local.size
    if kind.family in ("memory", "STREAM"):    # each array starts -offset bytes in (filled too)
        need += kind.working_sets * local.offset
    if group.action == "V":
        need += VIDEO_IMAGES * local.IH * local.IW * 4
    if kind.family == "file":
        lane = sum(-(-(n + 1) // mmap.PAGESIZE) * mmap.PAGESIZE
                   for _, n in actions.roles(actions.SPECS[group.action], local))
        need += actions.depth(group) * lane
    if group.action == "web":
        need += local.size                     # a client's read buffer
    if kind.family == "streams":
        g = Geometry.of(group.args, local)
        need += (2 * g.lookahead + 6) * g.size
        if group.action == "memStreams" and not borrows(group):    # (a wired r: its writer's)
            need += g.tracks * g.track_bytes
    return need


LOWER = "lower -n, the transfer size, -offset, -aio or the process count"


def check_memory(plan) -> None:
    """The tests' memory against what is available: the machine's, and its memory cgroup's
    room (memory.max less what the group uses) where that is less."""
    procs = plan.procs()
    need = sum(memory_of(plan, p) for p in procs)
    workers = sum(KINDS[p.group.action].runs_in == WORKER for p in procs)
    have = psutil.virtual_memory().available
    room = cgroup_room()
    where = "of memory is available"
    if room is not None and room[0] < have:
        have, where = room[0], f"is left in the memory cgroup {room[1]} (memory.max)"
    if need > have * 0.9:
        raise UsageError(f"the tests need {amount(need)} of memory (buffers, images and "
                         f"{workers} worker process{'es' * (workers != 1)}) but only "
                         f"{amount(have)} {where}: {LOWER}")


PROC_CGROUP = "/proc/self/cgroup"
CGROUP_FS = "/sys/fs/cgroup"


def cgroup_room() -> tuple[int, str] | None:
    """Bytes this process's memory cgroups (its own and those above it) let it still use, and
    the limit file that allows least; None when no limit is set. cgroup v2 (memory.max,
    memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes)."""
    try:
        with open(PROC_CGROUP) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            found += rooms(CGROUP_FS, path, "memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            found += rooms(os.path.join(CGROUP_FS, "memory"), path, "memory.limit_in_bytes",
                           "memory.usage_in_bytes")
    return min(found) if found else None


def rooms(top: str, path: str, limit: str, usage: str) -> list[tuple[int, str]]:
    """(limit - usage, the limit's file) for the cgroup at `path` under `top` and each above it
    (a namespace may show the group as its root: then the root's files)."""
    found, parts = [], [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        folder = os.path.join(top, *parts[:depth])
        try:
            with open(os.path.join(folder, limit)) as f:
                cap = f.read().strip()
            with open(os.path.join(folder, usage)) as f:
                used = int(f.read())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 1 << 62:              # "max", or v1's page-rounded max
            found.append((max(0, int(cap) - used), os.path.join(folder, limit)))
    return found


def address_limit() -> int | None:
    """The soft limit on a process's address space (ulimit -v), None when there is none."""
    soft = psutil.Process().rlimit(psutil.RLIMIT_AS)[0]
    return None if soft == psutil.RLIM_INFINITY else soft


def check_address_space(plan) -> None:
    """Each process's address space under ulimit -v: a worker starts as a copy of the workers'
    server (the command itself where there is none yet), the command holds its loop tests (and
    -sp's test); each adds its buffers. Its start-up size is measured now."""
    limit = address_limit()
    if limit is None:
        return
    from multiprocessing import forkserver
    own = psutil.Process().memory_info().vms
    pid = forkserver._forkserver._forkserver_pid            # None: not started yet
    try:
        server = psutil.Process(pid).memory_info().vms if pid is not None else own
    except psutil.Error:                                    # (it ended: the run restarts it)
        server = own
    procs = plan.procs()
    workers = [p for p in procs if KINDS[p.group.action].runs_in == WORKER and not plan.settings.sp]
    here = sum(buffers_of(p) for p in procs if p not in workers)
    biggest = max(workers, key=buffers_of, default=None)
    needs = [("the command", own, here)]
    if biggest is not None:
        needs.append((f"the worker of test {biggest.row}", server, buffers_of(biggest)))
    for who, base, buffers in needs:
        if base + buffers > limit:
            raise UsageError(f"{who} needs {amount(base + buffers)} of address space "
                             f"({amount(buffers)} of buffers beside its start-up "
                             f"{amount(base)}) but ulimit -v allows {amount(limit)}: raise it, "
                             f"or {LOWER}")


def disk_needs(plan) -> dict[str, list[int]]:
    """What the run will write, by the directory it goes to: [bytes of scratch files, bytes of
    -cfiles, files and directories made, bytes a -web log may grow by (n x i requests: at most
    -appendKB every -appendEvery; under -t it cannot be told), bytes the -f files a test
    writes grow by (made, or written past their end)]."""
    s, need = plan.settings, defaultdict(lambda: [0, 0, 0, 0, 0])
    trees = set()
    for path, growth in f_growth(plan).items():
        need[os.path.dirname(path) or "."][4] += growth
        need[os.path.dirname(path) or "."][2] += not os.path.lexists(path)
    for proc in plan.procs():
        group, local = proc.group, proc.group.local
        if group.action == "streams" and not s.files and not borrows(group):   # (a wired r
            g = Geometry.of(group.args, local)                   # reads its writer's file)
            need["."][0] += g.tracks * g.track_bytes
            need["."][2] += 2                            # its file, the scratch directory
        if group.action == "web" and local.t is None:
            need[local.dir][3] += local.n * local.i // local.appendEvery * local.appendKB * KB
        if group.action == "web" and local.cfiles and local.dir not in trees:
            from .web import site          # (its modules are a file test's: imported for one)
            trees.add(local.dir)
            law = site.Law.of(local)
            if missing := site.missing_bytes(local.dir, law):
                need[local.dir][1] += missing
                need[local.dir][2] += law.files + len(site.planned_dirs(law)) + 2  # manifest, log
        if KINDS[group.action].family != "file":
            continue
        spec = actions.SPECS[group.action]
        if spec.source == "tree" and local.cfiles and local.dir not in trees:
            trees.add(local.dir)
            size, files = missing_tree(local.dir, group.args[0], local)
            need[local.dir][1] += size
            need[local.dir][2] += files + (files and group.args[0] // 1000 + 2)   # dirs, manifest
        elif spec.source == "list" and not s.files:
            layout = actions.layout(group, proc.row, s.seed, None, align=block_size("."))
            need["."][0] += layout.span + actions.extra_bytes(spec, local)
            need["."][2] += 2
    return need


def f_growth(plan) -> dict[str, int]:
    """The bytes each -f file a test writes grows by: from its size now to the end of the
    furthest layout laid in it (a file several tests write: the furthest). Devices do not
    grow."""
    s, ends = plan.settings, {}
    for proc in plan.procs():
        group = proc.group
        if KINDS[group.action].family != "file" or not s.files:
            continue
        spec = actions.SPECS[group.action]
        if spec.source != "list" or not actions.writes(spec, group.local):
            continue
        path = actions.user_file(s, group, proc.index, proc.row)
        size = actions.file_size(path)
        layout = actions.layout(group, proc.row, s.seed, size, align=block_size(path))
        ends[path] = max(ends.get(path, 0), layout.span + actions.extra_bytes(spec, group.local))
    return {path: end - grown for path, end in ends.items()
            if (grown := existing_size(path)) is not None and end > grown}


def existing_size(path: str) -> int | None:
    """A regular file's size, 0 for none; None for a device (it does not grow)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def missing_tree(root: str, count: int, local) -> tuple[int, int]:
    """What -cfiles writes: the bytes and the number of the planned files that are missing or
    of another size."""
    from .io import tree
    limit = actions.tree_limit(local)
    sizes = tree.planned_sizes(count, limit, local.size)
    total = files = 0
    for i, size in enumerate(sizes):
        try:
            have = os.lstat(tree.path(root, i)).st_size
        except OSError:
            have = -1
        if have != size:
            total, files = total + size, files + 1
    return total, files


def check_space(plan) -> None:
    by_fs: dict[int, list] = {}
    for where, needs in disk_needs(plan).items():
        existing = where
        while not os.path.exists(existing):
            existing = os.path.dirname(os.path.abspath(existing))
        fs = os.statvfs(existing)
        entry = by_fs.setdefault(os.stat(existing).st_dev, [0, 0, 0, 0, 0,
                                                          fs.f_bavail * fs.f_frsize,
                                                          fs.f_favail if fs.f_files else None,
                                                          os.path.abspath(existing)])
        for i, n in enumerate(needs):
            entry[i] += n
    for scratch, cfiles, files, appends, grown, free, inodes, where in by_fs.values():
        parts = (("scratch files", scratch), ("-cfiles", cfiles), ("-f files", grown),
                 ("-web's appends", appends))
        what = " and ".join(w for w, n in parts if n)
        made = " and ".join(w for w, n in parts[:3] if n)        # what makes files
        if scratch + cfiles + grown + appends > free:
            web = any(g.action == "web" for g in plan.groups)
            raise UsageError(f"the run writes {'up to ' if appends else ''}"
                             f"{amount(scratch + cfiles + grown + appends)} ({what}) on the "
                             f"file system of {where}, which has {amount(free)} free: lower "
                             f"-n, the transfer size or -mfile*"
                             + (", or name files with -f" if scratch else "")
                             + (", or name -f files elsewhere" if grown else "")
                             + (" (-web: -webFiles, -webMeanKB, -appendKB)" if web else ""))
        if inodes is not None and files > inodes:      # None: it keeps no count (btrfs)
            raise UsageError(f"the run makes {files} files and directories ({made}) on the file "
                             f"system of {where}, which has room for {inodes} more (inodes): "
                             f"lower -files or -webFiles, or use another -dir")


def shared_memory_bytes(plan) -> int:
    """Bytes the run puts in /dev/shm: its results segment (a row per test process) and the
    named semaphores of its barrier and lock (a page each, at most the header's MAX_SEMS) and
    the barrier's counter (a page)."""
    segment = HEADER.itemsize + len(plan.procs()) * ROW.itemsize
    return -(-segment // mmap.PAGESIZE) * mmap.PAGESIZE + (MAX_SEMS + 1) * mmap.PAGESIZE


def check_shared_memory(plan) -> None:
    """/dev/shm is a tmpfs: a segment larger than its free space is made (it is sparse), and
    the first write beyond the space kills the run with SIGBUS."""
    need = shared_memory_bytes(plan)
    try:
        fs = os.statvfs(SHM_DIR)
    except OSError as e:
        raise UsageError(f"{SHM_DIR}: {e.strerror}: the run keeps its results in shared "
                         f"memory there") from None
    free = fs.f_bavail * fs.f_frsize
    if need > free:
        procs = len(plan.procs())
        raise UsageError(f"the run's results need {amount(need)} of shared memory in {SHM_DIR} "
                         f"({procs} test process{'es' * (procs != 1)}, {amount(ROW.itemsize)} "
                         f"each) but it has {amount(free)} free: free some, or lower the "
                         f"process count")


def open_files(plan) -> int:
    """File descriptors the run holds at once, about."""
    need = FILES_BASE
    for proc in plan.procs():
        group = proc.group
        if KINDS[group.action].runs_in == WORKER:
            need += FILES_PER_WORKER
        elif KINDS[group.action].family == "file":
            files = group.args[0] if group.action == "files" else 1
            need += 2 * files + files // 1000 + 4   # each file twice (the data check's own
                                                    # descriptor), its directories, the engine
        elif group.action == "web":            # a client holds one file, or -webOpen caps them
            need += 1 + (2 if proc.index == 0 else 0)                  # (+ the tree and log)
            need -= 1 if group.local.webOpen and proc.index >= group.local.webOpen else 0
        else:
            need += 2
    return need


def check_open_files(plan) -> None:
    need = open_files(plan)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if need <= soft:
        return
    if hard != resource.RLIM_INFINITY and need > hard:
        actions_ = {g.action for g in plan.groups}
        uncapped = any(g.action == "web" and not g.local.webOpen for g in plan.groups)
        workers = sum(KINDS[p.group.action].runs_in == WORKER for p in plan.procs())
        why, fix = ("each -web client one unless -webOpen caps them", " or set -webOpen") \
            if uncapped else ("the run's own, and its tests' under -webOpen", "") \
            if "web" in actions_ else ("-files opens every file of its tree", " or lower -files") \
            if "files" in actions_ else ("each file test holds its files open, twice while it "
                                         "checks them", " or lower -p or the files given") \
            if any(KINDS[a].family == "file" for a in actions_) else \
            (f"{FILES_BASE} for the command itself and {FILES_PER_WORKER} for each of its "
             f"{workers} worker process{'es' * (workers != 1)}", " or lower -p")
        raise UsageError(f"the run holds about {need} files open at once ({why}) but the limit "
                         f"is {hard} (ulimit -n): raise it{fix}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
