"""Checks of the file tests in a plan, before anything runs: one clear line each (exit 2)."""
from __future__ import annotations

import os
import stat

from ..errors import UsageError
from ..inputs import kind, named_link
from ..sysinfo import mount_of
from . import actions, tree
from .files import block_size


def check_group(plan, group) -> None:
    """A file test group's usage errors (the kind registration calls it for each group)."""
    settings = plan.settings
    if settings.engine == "uring":
        from .uring import unavailable
        why = unavailable()
        if why:
            raise UsageError(f"-engine uring: io_uring cannot be used here: {why}")
    for proc in plan.procs():
        if proc.group is group:
            check_test(settings, proc)


def check_test(settings, proc) -> None:
    group, local = proc.group, proc.group.local
    spec, name = actions.SPECS[group.action], f"-{group.action}"
    limit = actions.max_size(local)
    if limit is not None and limit < local.size:
        raise UsageError(f"{name}: the maximum file size ({limit} bytes) is smaller than the "
                         f"transfer size ({local.size} bytes)")
    if settings.engine == "sync" and actions.depth(group) > 1:
        raise UsageError(f"{name} {group.args[0]}: -engine sync runs one transfer at a time; "
                         f"use -engine uring or threads")
    if spec.source == "tree":
        check_tree(settings, group)
        return
    try:
        path = actions.user_file(settings, group, proc.index, proc.row)
    except IndexError:
        index, n = actions.list_index(group, proc.index, proc.row), len(settings.files)
        raise UsageError(f"{name}: process {proc.index} (proc {proc.row}) needs file {index} of "
                         f"the -f list, which has {n} (0..{n - 1}): process k of a test reads "
                         f"file s+k, s its -s, else its first proc's number "
                         f"({index - proc.index}); to share one file, name it once per "
                         f"process, and put -s 0 before {name} if no other test uses the "
                         f"list") from None
    if path is not None:
        check_file(settings, proc, name, path)
        return
    try:                                  # a scratch file: its layout, as the test computes it
        actions.layout(group, proc.row, settings.seed, None, align=block_size("."))
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None


def check_file(settings, proc, name: str, path: str) -> None:
    """A file the user named: what it is, whether the test may write it, and whether the test's
    transfers fit in it (the layout the test will use, computed here)."""
    group = proc.group
    spec, local = actions.SPECS[group.action], group.local
    check_path(settings, name, path, actions.writes(spec, local))
    if not os.path.exists(path) and (actions.reads(spec, local) or spec.source == "arg"):
        raise UsageError(f"{name}: {path} does not exist (the test reads it)")
    if actions.reads(spec, local) and stat.S_ISCHR(os.stat(path).st_mode):
        raise UsageError(f"{name}: {path} is a character device, which has no size to lay the "
                         f"reads out in: the file tests read regular files and block devices")
    try:
        size = actions.file_size(path)
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None
    try:
        layout = actions.layout(group, proc.row, settings.seed, size, align=block_size(path))
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None
    need = layout.span + actions.extra_bytes(spec, local)
    if actions.reads(spec, local) and size < need:
        raise UsageError(f"{name}: {path} holds {size} bytes but the test reads up to byte "
                         f"{need}: set a smaller -mfile* (transfers wrap) or -n")


# File systems of the kernel's own files (their sizes are not their contents' and a write to
# one changes a setting): never a file test's
PSEUDO = frozenset({"proc", "sysfs", "debugfs", "tracefs", "securityfs", "configfs", "cgroup",
                    "cgroup2", "efivarfs", "bpf", "pstore", "fusectl", "binfmt_misc"})


def check_path(settings, name: str, path: str, writes: bool) -> None:
    """What a file the user named is: a regular file or a device (writing a device, character
    or block, needs -writeDevices), never a FIFO or a socket (an open or a read would wait),
    never a symbolic link when the test writes (writes do not follow links)."""
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if writes:
                raise UsageError(f"{name}: {path} is a symbolic link, and writes never follow one: "
                                 f"name the file itself ({os.path.realpath(path)})")
            st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"{name}: cannot use {path}: {e.strerror}") from None
    what = kind(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{name}: {path} is a directory, not a file")
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise UsageError(f"{name}: {path} is {what}: the file tests work on regular files and "
                         f"devices")
    if writes and not stat.S_ISREG(st.st_mode) and not settings.writeDevices:
        raise UsageError(f"{name} would write to the {what[2:]} {path}, destroying its data: "
                         f"add -writeDevices to confirm")
    mount = mount_of(path)
    if mount is not None and mount.fstype in PSEUDO:
        raise UsageError(f"{name}: {path} is on {mount.mountpoint} ({mount.fstype}), the "
                         f"kernel's own files: the file tests work on regular files and "
                         f"devices")


def check_tree(settings, group) -> None:
    local, count = group.local, group.args[0]
    if named_link(local.dir):                     # as -web: the default name may be planted
        raise UsageError(f"-files: -dir {local.dir} is a symbolic link: name the directory "
                         f"itself")
    if os.path.exists(local.dir) and not os.path.isdir(local.dir):
        raise UsageError(f"-files: -dir {local.dir} is a file, not a directory")
    if mine := tree.bookkeeping(local.dir) if os.path.isdir(local.dir) else []:
        raise UsageError(f"-files: {mine[0]}, and it is where the tree keeps its own: move it "
                         f"away (neither -cfiles nor a test writes over a file torque-async "
                         f"did not make)")
    foreign, unsafe = tree.strangers(local.dir)
    if unsafe:
        raise UsageError(f"-files: {unsafe[0]}: a -files tree holds only its own regular files, "
                         f"and its writes never follow a link out of it")
    if foreign and not settings.allowForeign:
        raise UsageError(f"-files: -dir {local.dir} holds {foreign[0]}, which torque-async did "
                         f"not make: use a directory of its own, or add -allowForeign")
    if tree.busy(local.dir):              # another run's -cfiles is making it now
        if local.cfiles:                  # (this one's waits for it, then checks what it made)
            return
        raise UsageError(f"-files: another torque-async run's -cfiles is making the tree in "
                         f"{local.dir} now: wait for it to end, then run again")
    writing = local.cfiles or actions.writes(actions.SPECS[group.action], local)
    if writing and (strange := tree.owners(local.dir, count)):     # (reads harm nobody's)
        raise UsageError(f"-files: {strange[0]}: neither -cfiles nor a test writes a file "
                         f"that is not the tree's own (move it away)")
    if not local.cfiles:
        try:
            tree.sizes(local.dir, count, actions.tree_limit(local), local.size)
        except ValueError as e:
            raise UsageError(f"-files {count}: {e}: add -cfiles to make it (once; it stays)") \
                from None

