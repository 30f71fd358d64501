"""The -files tree: N files of random sizes under -dir, made by -cfiles and kept for later runs.

File i is DIR/{i // 1000:03d}/f{i:07d}; its size is a multiple of the transfer size, uniform
in [transfer size, max file size], drawn from a fixed generator (not -seed: a tree serves every
seed). DIR/torque-files.json records the transfer size, the maximum size, every file's size and
who each file torque-async made is (identity.py: its inode and birth time); -cfiles writes it
first marked incomplete, tells DIR/torque-files.journal of each file as it creates it, and
writes the manifest again once every file is whole, so an interrupted -cfiles leaves a tree that
reads as incomplete and knows every file it made. A test uses the first N files of a tree made
for its transfer size and maximum file size. -cfiles writes only the tree's own files, its
manifest and journal, and only the files that are missing or wrong: a file named as a tree
file that torque-async did not make there, or not the one it made (replaced since), is not
the tree's, and neither -cfiles nor a test writes it (owners(), checked with the plan and again
in set-up); a tree made before identities were kept is trusted until -cfiles records them.
Every file is opened relative to its directory's descriptor without following a link (Dirs),
and a file with another name elsewhere (st_nlink > 1) is refused: no write leaves the tree.
The manifest's token marks each file where birth times are missing (identity.made); the journal
is made new and named in the manifest (who it is), so a user's file of the manifest's or the
journal's name is refused (bookkeeping()), never renamed over, appended to or deleted. -cfiles
holds a lock on DIR while it makes the tree: one -cfiles at a time (busy()).
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import secrets
import signal
import stat

import numpy as np

from ..inputs import kind, read_bounded
from . import identity
from .scratch import write_pattern

MANIFEST = "torque-files.json"
JOURNAL = "torque-files.journal"   # an unfinished -cfiles' files, a line each as it makes them
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MANIFEST_LIMIT = 64 << 20
TREE_SEED = 0x746F72717565
PARALLEL = 16                      # files written at once by -cfiles
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def names(i: int) -> tuple[str, str]:
    return f"{i // 1000:03d}", f"f{i:07d}"


def path(root: str, i: int) -> str:
    return os.path.join(root, *names(i))


def unsafe(mode: int, links: int) -> str:
    """Why a tree file may not be opened ('' when it may)."""
    if not stat.S_ISREG(mode):
        return f"is {kind(mode)}"
    return f"has {links - 1} other name{'s' * (links > 2)} (a hard link)" if links > 1 else ""


def strangers(root: str) -> tuple[list[str], list[str]]:
    """What under root a tree did not make (other names), and its own names that a write must
    not open: symbolic links (a link would lead -cfiles' writes out of the tree), hard links,
    anything but directories and regular files; the second list says why."""
    foreign, bad = [], []
    if not os.path.isdir(root):
        return foreign, bad
    for top in sorted(os.listdir(root)):
        where = os.path.join(root, top)
        st = os.lstat(where)
        if top in (MANIFEST, JOURNAL):
            why = unsafe(st.st_mode, st.st_nlink)
            bad += [f"{where} {why}"] if why else []
        elif top.isdigit() and len(top) == 3:
            if not stat.S_ISDIR(st.st_mode):
                bad.append(f"{where} is {kind(st.st_mode)}")
                continue
            for name in sorted(os.listdir(where)):
                inner = os.path.join(where, name)
                if not (name.startswith("f") and name[1:].isdigit()):
                    foreign.append(inner)
                    continue
                st = os.lstat(inner)
                why = unsafe(st.st_mode, st.st_nlink)
                bad += [f"{inner} {why}"] if why else []
        else:
            foreign.append(where)
    return foreign, bad


def bookkeeping(root: str) -> list[str]:
    """The tree's own bookkeeping names holding what torque-async did not write there: a
    manifest it cannot read as its own, a journal its manifest does not name (-cfiles would
    rename over the one, append to and then delete the other)."""
    found, bad = manifest(root), []
    where = os.path.join(root, MANIFEST)
    if found is None and os.path.lexists(where) and not os.path.islink(where):
        bad.append(f"{where} is not a manifest torque-async wrote")
    where = os.path.join(root, JOURNAL)
    if os.path.lexists(where) and not os.path.islink(where) and not journal_is_own(root, found):
        bad.append(f"{where} is not the journal torque-async keeps for this tree")
    return bad


def journal_is_own(root: str, found: dict | None) -> bool:
    """Whether the journal under root is the one its manifest names as made by -cfiles."""
    return bool(found) and bool(found.get("journal")) and \
        identity.is_made(found["journal"], None, os.path.join(root, JOURNAL), found.get("token"))


def busy(root: str) -> bool:
    """Whether a -cfiles (of this run or another) is making the tree under root now."""
    try:
        fd = os.open(root, DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


class Dirs:
    """A tree's directories, each opened once without following a link; files are opened
    relative to them (openat), so no path is resolved again after the check."""

    def __init__(self, root: str, make: bool = False, ids: list | None = None,
                 token: str | None = None):
        if make:
            os.makedirs(root, exist_ok=True)
        self.root_path, self.subs = root, {}
        self.ids = ids             # who its files are (made_ids): open() refuses another
        self.token = token         # the tree's mark (identity.made), where birth times lack
        self.root = os.open(root, DIRECTORY)

    def sub(self, top: str, make: bool) -> int:
        if top not in self.subs:
            if make:
                try:
                    os.mkdir(top, 0o755, dir_fd=self.root)
                except FileExistsError:
                    pass
            try:
                self.subs[top] = os.open(top, DIRECTORY, dir_fd=self.root)
            except OSError as e:
                raise OSError(e.errno, e.strerror, os.path.join(self.root_path, top)) from None
        return self.subs[top]

    def open(self, i: int, flags: int, make: bool = False) -> int:
        """File i, opened with `flags` (O_CREAT too with `make`); OSError when it is a link, a
        hard link or not a regular file."""
        top, name = names(i)
        where = path(self.root_path, i)
        try:
            fd = identity.opened(name, flags | os.O_NOFOLLOW | (os.O_CREAT if make else 0),
                                 0o644, self.sub(top, make))
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OSError(e.errno, "a symbolic link: a -files tree's writes never follow "
                                       "one", where) from None
            raise OSError(e.errno, e.strerror, where) from None
        st = os.fstat(fd)
        why = unsafe(st.st_mode, st.st_nlink)
        if not why and self.ids is not None and \
                (i >= len(self.ids) or self.ids[i] is None or self.ids[i] != TRUSTED and
                 not identity.is_open_made(self.ids[i], fd, self.token)):
            why = "is not the file torque-async made there (replaced since the plan's check)"
        if why:
            os.close(fd)
            raise OSError(errno.EPERM, f"it {why}: a -files tree holds only its own files", where)
        return fd

    def size(self, i: int) -> int | None:
        """File i's size, None when it is missing (a link counts as missing)."""
        top, name = names(i)
        try:
            st = os.stat(name, dir_fd=self.sub(top, False), follow_symlinks=False)
        except FileNotFoundError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def close(self) -> None:
        for fd in (self.root, *self.subs.values()):
            os.close(fd)
        self.subs = {}


def planned_sizes(count: int, max_size: int, unit: int) -> list[int]:
    rng = np.random.default_rng([TREE_SEED, max_size, unit])
    return (rng.integers(1, max_size // unit + 1, count) * unit).tolist()


def manifest(root: str) -> dict | None:
    """The tree's manifest as -cfiles wrote it, None when there is none to read (or one edited
    into another shape: no tree torque-async can vouch for)."""
    where = os.path.join(root, MANIFEST)
    if os.path.islink(where):
        return None
    try:
        made = json.loads(read_bounded(where, MANIFEST_LIMIT))
    except ValueError:
        return None
    if not isinstance(made, dict) or not ints(made.get("sizes")) or \
            not isinstance(made.get("made", []), list) or \
            not all(who is None or (isinstance(who, list) and len(who) == 2 and ints(who)
                                    and min(who) >= 0) for who in made.get("made", [])) or \
            made.get("complete", True) not in (True, False) or \
            not isinstance(made.get("token", ""), str) or \
            not (made.get("journal") is None or
                 ints(made["journal"]) and len(made["journal"]) == 2):
        return None
    return made


def ints(x) -> bool:
    return isinstance(x, list) and all(type(v) is int for v in x)


TRUSTED = (-1, -1)                 # a file of a tree made before identities were kept


def made_ids(root: str, found: dict | None) -> list[tuple[int, int] | None]:
    """Who each file of the tree is, as torque-async made it (identity.of), None for a place it
    has not made a file in: the manifest's, and an unfinished -cfiles' journal's (a line per
    file it created, written as it created it); a tree of an earlier version, whose manifest
    keeps none, is trusted (TRUSTED) until the next -cfiles records them."""
    if found is None:
        return []
    if "made" not in found:
        return [TRUSTED] * len(found["sizes"])
    ids = [tuple(who) if who else None for who in found["made"]]
    if found.get("complete") is False and journal_is_own(root, found):
        try:
            lines = read_bounded(os.path.join(root, JOURNAL), MANIFEST_LIMIT).split(b"\n")
        except ValueError:
            lines = []
        for line in lines:
            words = line.split()
            if len(words) == 3 and all(w.isdigit() for w in words) and int(words[0]) < len(ids):
                ids[int(words[0])] = (int(words[1]), int(words[2]))
    return ids


def owners(root: str, count: int) -> list[str]:
    """The tree's first `count` files that exist but are not its own (ownership: the module's
    docstring), with why: -cfiles or a writing test would write them (a test's set-up opens
    each file through Dirs with its identity, and refuses one replaced since)."""
    found = manifest(root)
    ids = made_ids(root, found)
    strange = [f"{why}: neither -cfiles nor a test writes over a file torque-async did not "
               f"make" for why in bookkeeping(root)] if os.path.isdir(root) else []
    if not os.path.isdir(root):
        return strange
    token = found.get("token") if found else None
    dirs = Dirs(root)
    try:
        for i in range(count):
            try:
                sub = dirs.sub(names(i)[0], False)
                st = os.stat(names(i)[1], dir_fd=sub, follow_symlinks=False)
            except FileNotFoundError:
                continue
            mine = ids[i] if i < len(ids) else None
            if why := unsafe(st.st_mode, st.st_nlink):
                strange.append(f"{path(root, i)} {why}")
            elif mine is None:
                strange.append(f"{path(root, i)} exists, and torque-async did not make it " +
                               (f"(its {MANIFEST} has no file made there)" if found else
                                f"(there is no {MANIFEST} it wrote)"))
            elif mine != TRUSTED and not identity.is_made(mine, sub, names(i)[1], token):
                strange.append(f"{path(root, i)} was replaced since torque-async made it (another "
                               f"file under its name)")
    finally:
        dirs.close()
    return strange


class Unsafe(ValueError):
    """A tree file that may not be opened (unsafe()): no -cfiles makes it right."""


def sizes(root: str, count: int, max_size: int, unit: int) -> list[int]:
    """The sizes of the tree's first count files; ValueError: what keeps the tree under root
    from serving -files count (owners() has said whether they are its own)."""
    made = manifest(root)
    if made is None:
        raise ValueError(f"there is no -files tree in {root}")
    if made.get("complete") is False:
        raise ValueError(f"the tree in {root} is incomplete (a -cfiles did not finish)")
    if (made.get("unit"), made.get("max_size")) != (unit, max_size):
        raise ValueError(f"the tree in {root} was made for {made.get('unit')}-byte transfers "
                         f"and files up to {made.get('max_size')} bytes, not {unit} and "
                         f"{max_size}")
    sizes = made.get("sizes", [])[:count]
    if len(sizes) < count:
        raise ValueError(f"the tree in {root} has {len(sizes)} files, not {count}")
    for i, size in enumerate(sizes):
        try:
            st = os.lstat(path(root, i))
        except OSError:
            raise ValueError(f"{path(root, i)} is missing") from None
        why = unsafe(st.st_mode, st.st_nlink)
        if why:
            raise Unsafe(f"{path(root, i)} {why}")
        if st.st_size != size:
            raise ValueError(f"{path(root, i)} is not {size} bytes long")
    return sizes


async def make(root: str, count: int, max_size: int, unit: int) -> None:
    """-cfiles: write whatever the tree lacks for -files count, none but its own files (an
    OSError names the first that is not). One -cfiles at a time makes a tree (a lock on its
    directory; another, of this run or another, waits for it, then finds the files made). A
    file it creates is created new (O_EXCL) and told to the journal at once, the stop signals
    held between the two, so an interrupted -cfiles leaves no file of its own it cannot vouch
    for; the journal is made new too, and named in the manifest before a file is. Not timed."""
    dirs = Dirs(root, make=True)
    journal = -1
    try:
        await lock(dirs.root)
        if strange := owners(root, count):
            raise OSError(errno.EPERM, f"{strange[0]}: -cfiles writes only the tree's own files")
        found = manifest(root)
        want = planned_sizes(count, max_size, unit)
        ids = made_ids(root, found)
        ids += [None] * (count - len(ids))
        dirs.token = token = (found or {}).get("token") or secrets.token_hex(16)
        for d in range(0, count, 1000):
            dirs.sub(names(d)[0], make=True)
        gate = asyncio.Semaphore(PARALLEL)
        shape = {"unit": unit, "max_size": max_size, "sizes": want, "token": token}
        journal, kept = open_journal(dirs, found, token)
        shape["journal"] = kept
        record(dirs, {**shape, "made": ids, "complete": False})

        def created(i: int) -> int:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
            try:
                fd = dirs.open(i, os.O_WRONLY | os.O_EXCL, make=True)
                ids[i] = identity.made(fd, token)
                os.write(journal, f"{i} {ids[i][0]} {ids[i][1]}\n".encode())
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            return fd

        async def one(i: int, size: int) -> None:
            have = dirs.size(i)
            if have != size:
                async with gate:
                    fd = created(i) if ids[i] is None or have is None else \
                        dirs.open(i, os.O_WRONLY)
                    try:
                        os.ftruncate(fd, 0)
                        await write_pattern(fd, size, i + 1, path(root, i),
                                            lambda how: dirs.open(i, how))
                    finally:
                        os.close(fd)
            if ids[i] == TRUSTED:              # (kept: a tree of an earlier version's)
                fd = dirs.open(i, os.O_RDONLY)
                try:
                    ids[i] = identity.made(fd, token)
                finally:
                    os.close(fd)
        await asyncio.gather(*(one(i, s) for i, s in enumerate(want)))
        record(dirs, {**shape, "made": ids, "complete": True})
        os.unlink(JOURNAL, dir_fd=dirs.root)
    finally:
        if journal >= 0:
            os.close(journal)
        dirs.close()              # (the lock goes with the descriptor)


LOCK_POLL = 0.05                   # s between looks at a lock another -cfiles holds


async def lock(fd: int) -> None:
    """Hold -cfiles' lock on the tree directory open on fd (it goes with the descriptor); while
    another -cfiles holds it, wait (a stop signal ends the wait)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            await asyncio.sleep(LOCK_POLL)


def open_journal(dirs: Dirs, found: dict | None, token: str) -> tuple[int, list[int]]:
    """The journal for appending and who it is: an unfinished -cfiles' own (its manifest names
    it), else one made new, the stop signals held until the manifest names it. Opened without
    waiting, a regular file only (a FIFO planted since the check is refused)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
    if journal_is_own(dirs.root_path, found):
        fd = identity.opened(JOURNAL, flags, dir_fd=dirs.root)
        if identity.is_open_made(found["journal"], fd, token):
            return fd, found["journal"]
        os.close(fd)
        raise OSError(errno.EPERM, "it was replaced since the check", os.path.join(
            dirs.root_path, JOURNAL))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    try:
        fd = identity.opened(JOURNAL, flags | os.O_CREAT | os.O_EXCL, dir_fd=dirs.root)
        try:
            who = list(identity.made(fd, token))
            record(dirs, {**(found or {"sizes": []}), "journal": who, "token": token,
                          "complete": False})
        except BaseException:
            os.close(fd)
            os.unlink(JOURNAL, dir_fd=dirs.root)
            raise
        return fd, who
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def record(dirs: Dirs, made: dict) -> None:
    """Write the manifest: new, then renamed over the last one."""
    temp = f".{MANIFEST}.{secrets.token_hex(8)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                 dir_fd=dirs.root)
    with os.fdopen(fd, "w") as fh:
        json.dump(made, fh)
    os.replace(temp, MANIFEST, src_dir_fd=dirs.root, dst_dir_fd=dirs.root)
