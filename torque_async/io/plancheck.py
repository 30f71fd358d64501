"""Checks of the file tests in a plan, before anything runs: one clear line each (exit 2)."""
from __future__ import annotations

import os

from ..cmdline import UsageError
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
        index = actions.list_index(group, proc.index, proc.row)
        raise UsageError(f"{name}: process {proc.index} needs file {index} of the -f list, "
                         f"which has {len(settings.files)} (0..{len(settings.files) - 1}); "
                         f"-s chooses the first") from None
    if path is not None:
        check_file(settings, proc, name, path)


def check_file(settings, proc, name: str, path: str) -> None:
    """A file the user named: what it is, whether the test may write it, and whether the test's
    transfers fit in it (the layout the test will use, computed here)."""
    group = proc.group
    spec, local = actions.SPECS[group.action], group.local
    if os.path.isdir(path):
        raise UsageError(f"{name}: {path} is a directory, not a file")
    if not os.path.exists(path) and (actions.reads(spec, local) or spec.source == "arg"):
        raise UsageError(f"{name}: {path} does not exist (the test reads it)")
    if actions.writes(spec, local) and actions.is_device(path) and not settings.writeDevices:
        raise UsageError(f"{name} would write to the block device {path}, destroying its data: "
                         f"add -writeDevices to confirm")
    size = actions.file_size(path)
    try:
        layout = actions.layout(group, proc.row, settings.seed, size, align=block_size(path))
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None
    need = layout.span + actions.extra_bytes(spec, local)
    if actions.reads(spec, local) and size < need:
        raise UsageError(f"{name}: {path} holds {size} bytes but the test reads up to byte "
                         f"{need}: set a smaller -mfile* (transfers wrap) or -n")


def check_tree(settings, group) -> None:
    local, count = group.local, group.args[0]
    if os.path.exists(local.dir) and not os.path.isdir(local.dir):
        raise UsageError(f"-files: -dir {local.dir} is a file, not a directory")
    foreign, links = tree.strangers(local.dir)
    if links:
        raise UsageError(f"-files: {links[0]} is a symbolic link: a -files tree holds only its "
                         f"own files, and its writes never follow a link out of it")
    if foreign and not settings.allowForeign:
        raise UsageError(f"-files: -dir {local.dir} holds {foreign[0]}, which torque-async did "
                         f"not make: use a directory of its own, or add -allowForeign")
    if not local.cfiles:
        try:
            tree.sizes(local.dir, count, actions.tree_limit(local), local.size)
        except ValueError as e:
            raise UsageError(f"-files {count}: {e}: add -cfiles to make it (once; it stays)") \
                from None

