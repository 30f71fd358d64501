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
from collections import defaultdict

import psutil

from .errors import UsageError
from .io import actions
from .io.files import block_size
from .kinds import KINDS, WORKER
from .streams.schedule import Geometry
from .units import KB, MB, amount

# Resident memory of one spawned worker beyond its buffers, measured here with psutil (RSS) on
# a run holding it idle (-sleepEnd 5): 39 MB for -spinWait (Python, numpy), 99 MB for -V 1 with
# 64x64 images (Mesa llvmpipe's context on top).
WORKER_BYTES = 40 * MB
VIDEO_WORKER_BYTES = 100 * MB
# A -V test's images (IH x IW x 4 bytes each) alive at once, at most: two client buffers, three
# textures and two pack buffers (host memory under llvmpipe) and the check's read-back.
VIDEO_IMAGES = 8
FILES_BASE = 64                   # the interpreter, its libraries, stdio, the results segment
FILES_PER_WORKER = 6              # a spawned worker's pipes and sentinel in the main process


def check(plan) -> None:
    """Raise UsageError when the plan needs more memory, disk space or open files than here."""
    check_memory(plan)
    check_space(plan)
    check_open_files(plan)


def memory_of(plan, proc) -> int:
    """Bytes of memory test process `proc` allocates, with its process's own cost."""
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
        need += g.tracks * g.track_bytes if group.action == "memStreams" else 0
    if kind.runs_in == WORKER and not plan.settings.sp:
        need += VIDEO_WORKER_BYTES if group.action == "V" else WORKER_BYTES
    return need


def check_memory(plan) -> None:
    procs = plan.procs()
    need = sum(memory_of(plan, p) for p in procs)
    workers = sum(KINDS[p.group.action].runs_in == WORKER for p in procs)
    have = psutil.virtual_memory().available
    if need > have * 0.9:
        raise UsageError(f"the tests need {amount(need)} of memory (buffers, images and "
                         f"{workers} worker process{'es' * (workers != 1)}) but only {amount(have)} of "
                         f"memory is available: lower -n, the transfer size, -offset, -aio or "
                         f"the process count")


def disk_needs(plan) -> dict[str, list[int]]:
    """What the run will write, by the directory it goes to: [bytes of scratch files, bytes of
    -cfiles, files and directories made, bytes a -web log may grow by (n x i requests: at most
    -appendKB every -appendEvery; under -t it cannot be told)]."""
    s, need = plan.settings, defaultdict(lambda: [0, 0, 0, 0])
    trees = set()
    for proc in plan.procs():
        group, local = proc.group, proc.group.local
        if group.action == "streams" and not s.files:
            g = Geometry.of(group.args, local)
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
        entry = by_fs.setdefault(os.stat(existing).st_dev, [0, 0, 0, 0, fs.f_bavail * fs.f_frsize,
                                                          fs.f_favail if fs.f_files else None,
                                                          os.path.abspath(existing)])
        for i, n in enumerate(needs):
            entry[i] += n
    for scratch, cfiles, files, appends, free, inodes, where in by_fs.values():
        parts = (("scratch files", scratch), ("-cfiles", cfiles), ("-web's appends", appends))
        what = " and ".join(w for w, n in parts if n)
        made = " and ".join(w for w, n in parts[:2] if n)        # what makes files
        if scratch + cfiles + appends > free:
            web = any(g.action == "web" for g in plan.groups)
            raise UsageError(f"the run writes {'up to ' if appends else ''}"
                             f"{amount(scratch + cfiles + appends)} ({what}) on the file system "
                             f"of {where}, which has {amount(free)} free: lower -n, the "
                             f"transfer size or -mfile*, or name files with -f"
                             + (" (-web: -webFiles, -webMeanKB, -appendKB)" if web else ""))
        if inodes is not None and files > inodes:      # None: it keeps no count (btrfs)
            raise UsageError(f"the run makes {files} files and directories ({made}) on the file "
                             f"system of {where}, which has room for {inodes} more (inodes): "
                             f"lower -files or -webFiles, or use another -dir")


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
        why, fix = ("each -web client one unless -webOpen caps them", " or set -webOpen") \
            if uncapped else ("the run's own, and its tests' under -webOpen", "") \
            if "web" in actions_ else ("-files opens every file of its tree", " or lower -files") \
            if "files" in actions_ else ("each file test holds its files open, twice while it "
                                         "checks them", " or lower -p or the files given")
        raise UsageError(f"the run holds about {need} files open at once ({why}) but the limit "
                         f"is {hard} (ulimit -n): raise it{fix}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
