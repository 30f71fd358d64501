"""The -web tree under -dir: its size law, its directories, its manifest, its making.

A tree is N files whose sizes follow a law (fixed, uniform in [1, 2 x mean - 1] or gamma with a
mean and a shape, as filebench's webserver: mean 16 KB, shape 1.5), capped by -mfile*, in leaf
directories holding a gamma-distributed number of files (mean -webWidth, shape 1.5), grouped the
same way into parent directories until the top holds at most -webWidth, all in DIR/files (so
other tools, fio's opendir, can be pointed at the files alone). File i is named f{i:07d} in its
leaf. Sizes and directories come from the fixed TREE_SEED (stored in the
manifest), not -seed: one tree serves every seed and is reused while its law matches.

DIR/torque-web.json (the manifest) names the law, the leaf directories and every size; it is
written before the files (complete: false) and again after them (complete: true, with who
every file is, its inode and birth time: one replaced since by another file of its name is
refused as not the tree's),
so every name an interrupted -cfiles made is still recognised as torque-async's own; its token
marks the files where birth times are missing (identity.py). DIR/torque-web.log is the log the
clients append to: made new (O_EXCL) by -cfiles, named in the manifest (who it is), and emptied
at each run's set-up only once it is checked to be that file. Everything is opened relative to directory
descriptors with O_NOFOLLOW; a symbolic link or a file with other hard links among the tree's
names is refused, and so is any other name under DIR unless -allowForeign.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import secrets
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from ..inputs import named_link, read_bounded
from ..io import identity, tree
from ..io.tree import MANIFEST_LIMIT
from ..io.data import pattern
from ..units import KB

MANIFEST = "torque-web.json"
LOG = "torque-web.log"
FILES = "files"                    # the directory holding every file of the tree
FORMAT = 1
TREE_SEED = 0x776562_7472_6565     # "webtree"
DIR_SHAPE = 1.5                    # filebench's dirgamma
PARALLEL = 4                       # leaf directories written at once while making
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW


@dataclass(frozen=True)
class Law:
    files: int
    sizes: str                     # fixed, uniform or gamma
    mean: int                      # bytes
    shape: float                   # gamma only
    largest: int                   # bytes; 0: no cap
    width: int                     # mean directory width

    @classmethod
    def of(cls, local) -> "Law":
        from ..io.actions import max_size
        return cls(local.webFiles, local.webSizes, local.webMeanKB * KB,
                   local.webShape if local.webSizes == "gamma" else 0.0,
                   max_size(local) or 0, local.webWidth)

    def text(self) -> str:
        law = {"fixed": f"all {self.mean / KB:g} KB",
               "uniform": f"uniform, mean {self.mean / KB:g} KB",
               "gamma": f"gamma, mean {self.mean / KB:g} KB, shape {self.shape:g}"}[self.sizes]
        cap = f", at most {self.largest / KB:g} KB" if self.largest else ""
        return f"{self.files} files ({law}{cap}), directories of about {self.width}"


def planned_sizes(law: Law) -> np.ndarray:
    rng = np.random.default_rng([TREE_SEED, law.files])
    if law.sizes == "fixed":
        sizes = np.full(law.files, law.mean, np.int64)
    elif law.sizes == "uniform":
        sizes = rng.integers(1, 2 * law.mean, law.files, dtype=np.int64)
    else:
        sizes = np.maximum(1, np.rint(rng.gamma(law.shape, law.mean / law.shape, law.files)))
    sizes = sizes.astype(np.int64)
    return np.minimum(sizes, law.largest) if law.largest else sizes


def widths(count: int, mean: int, rng: np.random.Generator) -> list[int]:
    """count things split into runs of gamma-distributed length (mean `mean`, at least 1)."""
    out, left = [], count
    while left:
        for w in np.maximum(1, np.rint(rng.gamma(DIR_SHAPE, mean / DIR_SHAPE,
                                                 left // mean + 16))).astype(int).tolist():
            out.append(min(w, left))
            left -= out[-1]
            if not left:
                break
    return out


def planned_dirs(law: Law) -> list[tuple[str, int]]:
    """(leaf directory, files in it), in file order."""
    rng = np.random.default_rng([TREE_SEED, law.files, law.width])
    level: list = widths(law.files, law.width, rng)          # leaves: their file counts
    while len(level) > law.width:                             # group them under parents
        runs, them = widths(len(level), law.width, rng), iter(level)
        level = [[next(them) for _ in range(w)] for w in runs]
    out: list[tuple[str, int]] = []

    def walk(node, prefix: str) -> None:
        for k, child in enumerate(node):
            name = f"{prefix}d{k:04d}"
            if isinstance(child, int):
                out.append((name, child))
            else:
                walk(child, name + "/")
    walk(level, FILES + "/")
    return out


def names(dirs: list[tuple[str, int]]) -> list[str]:
    """Every file's path relative to the tree's root, file i at index i."""
    out: list[str] = []
    for d, count in dirs:
        out += [f"{d}/f{i:07d}" for i in range(len(out), len(out) + count)]
    return out


def own_names(manifest: dict) -> set[str]:
    """Every name (relative path) a manifest says torque-async made."""
    dirs = [d for d, _ in manifest["dirs"]]
    parents = {"/".join(d.split("/")[:k]) for d in dirs for k in range(1, d.count("/") + 2)}
    return {MANIFEST, LOG, *parents, *names(manifest["dirs"])}


def read_manifest(root: str) -> dict | None:
    """The manifest under root, None if there is none; ValueError if it is not one."""
    where = os.path.join(root, MANIFEST)
    if not os.path.lexists(where):
        return None
    if named_link(where):
        raise ValueError(f"{where} is a symbolic link")
    text = read_bounded(where, MANIFEST_LIMIT)   # a FIFO or a huge file there: one line
    try:
        made = json.loads(text)
        if made.get("format") != FORMAT:
            raise ValueError
        Law(**made["law"]), own_names(made), made["sizes"]
        if not all(isinstance(who, list) and len(who) == 2 and all(type(v) is int for v in who)
                   for who in [*made.get("made", []), *([made["log"]] if "log" in made else [])]) \
                or not isinstance(made.get("token", ""), str):
            raise ValueError
        return made
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ValueError(f"{where} is not a torque-async -web manifest") from None


@dataclass(frozen=True)
class Survey:
    """What is under a -dir: names torque-async did not make, and its own names that are not
    plain files of one link, each with why (refused: writes could leave the tree)."""
    foreign: list[str]
    unsafe: list[str]
    sizes: dict[str, int]          # its own regular files: relative path -> size


def survey(root: str, manifest: dict | None) -> Survey:
    own = own_names(manifest) if manifest else set()
    made = dict(zip(names(manifest["dirs"]), map(tuple, manifest.get("made", ())))) \
        if manifest else {}                    # who each file is (identity.py), once complete
    token = manifest.get("token") if manifest else None
    foreign, unsafe, sizes = [], [], {}

    def visit(rel: str) -> None:
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            if name not in own:
                foreign.append(os.path.join(root, name))
            elif e.is_dir(follow_symlinks=False):
                visit(name)
            else:
                st = e.stat(follow_symlinks=False)
                if why := tree.unsafe(st.st_mode, st.st_nlink):   # a link, a FIFO, hard links
                    unsafe.append(f"{os.path.join(root, name)} {why}")
                elif name == LOG and not log_is_own(root, manifest):
                    unsafe.append(f"{os.path.join(root, name)} {NOT_LOG}")
                elif name in made and not identity.is_made(made[name], None,
                                                           os.path.join(root, name), token):
                    unsafe.append(f"{os.path.join(root, name)} was replaced since torque-async "
                                  f"made it (another file under its name)")
                else:
                    sizes[name] = st.st_size
    if os.path.isdir(root) and not os.path.islink(root):
        visit("")
    return Survey(foreign, unsafe, sizes)


def problem(root: str, law: Law, allow_foreign: bool) -> str | None:
    """What keeps -dir root from holding the tree of `law` (made or to be made), or None."""
    if named_link(root):
        return f"-dir {root} is a symbolic link: name the directory itself"
    if os.path.exists(root) and not os.path.isdir(root):
        return f"-dir {root} is a file, not a directory"
    if why := unwritable(root):
        return why
    try:
        manifest = read_manifest(root)
    except ValueError as e:
        return str(e)
    found = survey(root, manifest)
    if found.unsafe:
        return (f"{found.unsafe[0]}: a -web tree holds only its own regular files, and its "
                f"writes never leave it")
    if os.path.exists(os.path.join(root, tree.MANIFEST)):
        return (f"-dir {root} holds a -files tree (its {tree.MANIFEST}): a -web site needs a "
                f"-dir of its own")
    if found.foreign and not allow_foreign:
        return (f"-dir {root} holds {found.foreign[0]}, which torque-async did not make: use a "
                f"directory of its own, or add -allowForeign")
    planned = own_names({"dirs": planned_dirs(law)}) - {MANIFEST, LOG}
    if in_way := [f for f in found.foreign if os.path.relpath(f, root) in planned]:
        return (f"{in_way[0]} is where the tree's own file or directory goes, and torque-async "
                f"did not make it (-allowForeign lets others stay beside the tree, never in "
                f"its place): move it away")
    return None


def unwritable(root: str) -> str | None:
    """Why the tree's log (every run appends to it) and files cannot be written under root: the
    nearest part of it that exists is not a directory, or is not writable (None: they can).
    Found only at set-up, these failed the run after its start-up (exit 1)."""
    here = os.path.abspath(root)
    while not os.path.lexists(here):
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        return f"-dir {root}: {here} is a file, not a directory"
    if os.statvfs(here).f_flag & os.ST_RDONLY:
        return f"-dir {root}: {here} is on a read-only file system (the log is appended to)"
    if not os.access(here, os.W_OK | os.X_OK):
        return f"-dir {root}: {here} is not writable here (the log is appended to)"
    return None


def matches(manifest: dict | None, law: Law) -> bool:
    return bool(manifest) and manifest["complete"] and Law(**manifest["law"]) == law


def missing(root: str, law: Law) -> str | None:
    """Why the tree under root does not serve `law` as it stands (None: it does)."""
    manifest = read_manifest(root)
    if not matches(manifest, law):
        return f"there is no -web tree of {law.text()} in {root}"
    found = survey(root, manifest)
    if found.unsafe:
        return found.unsafe[0]
    for name, size in zip(names(manifest["dirs"]), manifest["sizes"]):
        if found.sizes.get(name) != size:
            return f"{os.path.join(root, name)} is missing or not {size} bytes long"
    return None


def missing_bytes(root: str, law: Law) -> int:
    """What -cfiles still has to write for `law` under root (0 when the tree is there)."""
    try:
        if missing(root, law) is None:
            return 0
    except ValueError:
        pass
    return int(planned_sizes(law).sum())


@dataclass
class Tree:
    """A tree ready to serve: its root descriptor, names and sizes."""
    root: str
    fd: int
    law: Law
    names: list[str]
    sizes: np.ndarray
    made: bool                     # made (or completed) by this run, rather than reused

    def figures(self) -> tuple[int, int, int, int]:
        """The sizes made (results.SIZE_LAW): files, mean, p50, p99 (bytes)."""
        s = self.sizes
        return (s.size, int(round(s.mean())), int(np.quantile(s, 0.5, method="lower")),
                int(np.quantile(s, 0.99, method="lower")))

    def close(self) -> None:
        os.close(self.fd)


def open_dir(parent: int, rel: str, create: bool) -> int:
    """A descriptor of directory rel below `parent`, one component at a time, never through a
    symbolic link; missing components are made when `create`."""
    fd = os.dup(parent)
    try:
        for part in rel.split("/"):
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            inner = os.open(part, DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_new(dirfd: int, name: str, data, own: bool, token: str) -> tuple[int, int]:
    """Write a file of the tree: created (O_EXCL), or, when `own` (a name the manifest gave
    torque-async), rewritten if it is a plain file with no other link (opened without waiting:
    a FIFO there is refused). Returns who it is (identity.made for a file it created)."""
    flags = os.O_WRONLY | NOFOLLOW
    try:
        fd = identity.opened(name, flags | os.O_CREAT | os.O_EXCL, 0o644, dirfd)
        new = True
    except FileExistsError:
        if not own:
            raise
        fd, new = identity.opened(name, flags, dir_fd=dirfd), False
        if os.fstat(fd).st_nlink != 1:
            os.close(fd)
            raise OSError(f"{name} is not a plain file of the tree") from None
        os.ftruncate(fd, 0)
    try:
        who = identity.made(fd, token) if new else identity.of_open(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return who
    finally:
        os.close(fd)


def write_manifest(rootfd: int, manifest: dict, existed: bool) -> None:
    write_new(rootfd, MANIFEST, json.dumps(manifest).encode(), existed, manifest["token"])


def remove_old(root: str, rootfd: int, manifest: dict) -> None:
    """Remove the files and empty directories of a tree of another law (all named by its
    manifest, so all torque-async's own)."""
    own = own_names(manifest)
    for d, _ in manifest["dirs"]:
        try:
            fd = open_dir(rootfd, d, create=False)
        except OSError:
            continue
        try:
            for name in os.listdir(fd):
                if f"{d}/{name}" in own:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
    dirs = sorted(own - {MANIFEST, LOG} - set(names(manifest["dirs"])),
                  key=lambda d: -d.count("/"))
    for d in dirs:
        try:
            os.rmdir(d, dir_fd=rootfd)
        except OSError:
            pass                    # not empty (-allowForeign) or gone


async def make(root: str, law: Law, progress: Callable[[int, int], None]) -> bool:
    """-cfiles: make the tree of `law` under root, unless it is there already (then nothing is
    written). Returns whether it wrote files. Not timed. The log is made new when it is missing
    (and who it is recorded); one that is not the log it made is refused (survey)."""
    os.makedirs(root, exist_ok=True)
    rootfd = os.open(root, DIRECTORY)
    try:
        await tree.lock(rootfd)             # one -cfiles at a time (another waits, then finds it)
        old = read_manifest(root)
        if matches(old, law) and old.get("log") and missing(root, law) is None:
            return False
        if old and Law(**old["law"]) != law:
            remove_old(root, rootfd, old)
        dirs, sizes = planned_dirs(law), planned_sizes(law).tolist()
        token = (old or {}).get("token") or secrets.token_hex(16)
        manifest = {"format": FORMAT, "seed": TREE_SEED, "law": asdict(law), "dirs": dirs,
                    "sizes": sizes, "token": token, "complete": False}
        if os.path.lexists(os.path.join(root, LOG)) and not log_is_own(root, old):
            raise OSError(errno.EPERM, NOT_LOG, os.path.join(root, LOG))
        write_manifest(rootfd, manifest, old is not None)
        own = old is not None and Law(**old["law"]) == law
        manifest["log"] = make_log(root, rootfd, old, token)
        write_manifest(rootfd, manifest, True)            # (an unfinished one names it too)
        made = await write_files(rootfd, dirs, sizes, own, token, progress)
        write_manifest(rootfd, {**manifest, "made": made, "complete": True}, True)
        return True
    finally:
        os.close(rootfd)


NOT_LOG = "is not the log torque-async made for this tree (its manifest names no such file): " \
    "move it away, and -cfiles makes a new one"


def log_is_own(root: str, manifest: dict | None, fd: int | None = None) -> bool:
    """Whether the log under root (or open on fd) is torque-async's: the one its manifest says
    -cfiles made, or one a run made and marked with the site's token."""
    if not manifest:
        return False
    where = os.path.join(root, LOG)
    if manifest.get("log") and (identity.is_open_made(manifest["log"], fd, manifest.get("token"))
                                if fd is not None else
                                identity.is_made(manifest["log"], None, where,
                                                 manifest.get("token"))):
        return True
    try:
        mark = os.getxattr(fd, identity.MARK) if fd is not None else \
            os.getxattr(where, identity.MARK, follow_symlinks=False)
    except OSError:
        return False
    return bool(manifest.get("token")) and mark == manifest["token"].encode()


def make_log(root: str, rootfd: int, old: dict | None, token: str) -> list[int]:
    """Who the tree's log is: the one made before, else one made now (a file there that is
    not torque-async's log: OSError, never emptied)."""
    if log_is_own(root, old):
        return old["log"]
    try:
        fd = identity.opened(LOG, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644,
                             rootfd)
    except FileExistsError:
        raise OSError(errno.EPERM, NOT_LOG, os.path.join(root, LOG)) from None
    try:
        return list(identity.made(fd, token))
    finally:
        os.close(fd)


async def write_files(rootfd: int, dirs, sizes: list[int], own: bool, token: str,
                      progress: Callable[[int, int], None]) -> list[int]:
    """Each leaf directory's files, PARALLEL directories at once on threads the loop waits
    for; files already of their size are kept. Returns who each file is (identity.of)."""
    loop, gate, done = asyncio.get_running_loop(), asyncio.Semaphore(PARALLEL), [0]
    firsts = np.cumsum([0] + [c for _, c in dirs]).tolist()
    made: list[tuple[int, int]] = [(0, 0)] * len(sizes)

    def leaf(d: str, first: int, count: int) -> None:
        fd = open_dir(rootfd, d, create=True)
        try:
            for i in range(first, first + count):
                name = f"f{i:07d}"
                try:
                    kept = own and os.stat(name, dir_fd=fd,
                                           follow_symlinks=False).st_size == sizes[i]
                except FileNotFoundError:
                    kept = False
                made[i] = identity.of(fd, name) if kept else \
                    write_new(fd, name, pattern(0, sizes[i], tag=i % 0xFFFF + 1), own, token)
        finally:
            os.close(fd)

    async def one(d: str, first: int, count: int) -> None:
        async with gate:
            await loop.run_in_executor(None, leaf, d, first, count)
        done[0] += count
        progress(done[0], len(sizes))
    await asyncio.gather(*(one(d, f, c) for (d, c), f in zip(dirs, firsts)))
    return made


def open_tree(root: str, law: Law, made: bool) -> Tree:
    """The tree of `law` under root, checked; ValueError says what is wrong."""
    why = missing(root, law)
    if why:
        raise ValueError(why)
    manifest = read_manifest(root)
    return Tree(root, os.open(root, DIRECTORY), law, names(manifest["dirs"]),
                np.array(manifest["sizes"], np.int64), made)


def open_log(tree: Tree) -> int:
    """The log for appending, emptied once it is checked to be torque-async's: made new here
    (marked with the site's token) if the end of a run removed it, else the one -cfiles made
    (its manifest says who it is) or one a run made (its mark). A file of the name that is
    neither (a user's, moved in its place) is refused, never emptied. Each run starts it anew,
    as filebench makes its log fileset anew (appended to for ever, it would grow with every
    run)."""
    manifest = read_manifest(tree.root) or {}
    try:
        fd = new_log(tree, manifest.get("token"))
    except FileExistsError:
        fd = identity.opened(LOG, os.O_WRONLY | os.O_APPEND | NOFOLLOW, dir_fd=tree.fd)
        if os.fstat(fd).st_nlink != 1 or not log_is_own(tree.root, manifest, fd):
            os.close(fd)
            raise ValueError(f"{os.path.join(tree.root, LOG)} {NOT_LOG}") from None
    os.ftruncate(fd, 0)
    return fd


def new_log(tree: Tree, token: str | None) -> int:
    """A new log, marked with the site's token before it takes its name (made nameless, then
    linked into place), so that another rank serving the site never finds it unmarked;
    FileExistsError when the name is taken. Where the file system makes no nameless file, it
    is made under its name and marked then."""
    def mark(fd: int) -> None:
        if token:
            with contextlib.suppress(OSError):     # (without extended attributes: a later run
                os.setxattr(fd, identity.MARK, token.encode())   # refuses it, if it is left)
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC, 0o644,
                     dir_fd=tree.fd)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        fd = identity.opened(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | NOFOLLOW,
                             0o644, tree.fd)
        mark(fd)
        return fd
    try:
        mark(fd)
        os.link(f"/proc/self/fd/{fd}", LOG, dst_dir_fd=tree.fd)
    except BaseException:
        os.close(fd)
        raise
    return fd
