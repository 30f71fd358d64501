"""The file actions: what each one does, and which files and sizes a test process works on.

Shared by the plan checks (before anything runs) and the tests themselves.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from .layout import Layout


@dataclass(frozen=True)
class Spec:
    order: str                    # Layout order: seq random scan tree
    ops: str                      # Layout ops: read write alternate mix
    source: str = "list"          # its files: list (-f, else a scratch file), arg (FILE), tree
    rmw: bool = False             # each transfer reads, modifies and writes back one place
    extra: bool = False           # honours -extraRead*
    wire: bool = False            # wires its buffers whatever -wire says


SPECS = {
    "r": Spec("seq", "read", extra=True),
    "w": Spec("seq", "write"),
    "rand": Spec("random", "mix"),
    "rmw": Spec("seq", "read", rmw=True),
    "rw": Spec("seq", "alternate"),
    "scan": Spec("scan", "read", source="arg", wire=True),
    "scanfile": Spec("scan", "read", source="arg"),
    "aio": Spec("seq", "mix"),
    "files": Spec("tree", "mix", source="tree"),
}


def writes(spec: Spec, local) -> bool:
    return spec.rmw or spec.ops in ("write", "alternate") or (spec.ops == "mix" and local.percR < 100)


def reads(spec: Spec, local) -> bool:
    return spec.ops != "write" and not (spec.ops == "mix" and local.percR == 0)


def extra_bytes(spec: Spec, local) -> int:
    """Bytes -extraRead* reads after each transfer (the -r test only)."""
    return local.extraRead if spec.extra else 0


def roles(spec: Spec, local) -> list[tuple[str, int]]:
    """The buffers one lane of a test needs, (role, bytes): reads, writes (apart, so a write
    never carries what a read left) and -extraRead's bytes."""
    wanted = [("read", local.size, reads(spec, local)),          # -rmw reads into it too
              ("write", local.size, writes(spec, local) and not spec.rmw),
              ("extra", extra_bytes(spec, local), bool(extra_bytes(spec, local)))]
    return [(role, n) for role, n, used in wanted if used]


def depth(group) -> int:
    """Transfers a test keeps outstanding: -aio N, else one."""
    return group.args[0] if group.action == "aio" else 1


def list_index(group, proc: int, row: int) -> int:
    """Index in the -f list of process `proc`'s file: -s, else the test's own number, plus proc."""
    first = group.local.s if group.local.s is not None else row - proc
    return first + proc


def user_file(settings, group, proc: int, row: int) -> str | None:
    """The file a test process was given (-f list or the action's FILE); None: a scratch file.

    Raises IndexError when the -f list is too short for it."""
    spec = SPECS[group.action]
    if spec.source == "arg":
        return group.args[0]
    if spec.source == "tree" or not settings.files:
        return None
    return settings.files[list_index(group, proc, row)]


def max_size(local) -> int | None:
    """-mfile* in bytes (-mfileXfer counts transfers), None when not set."""
    return local.mfile or (local.mfileXfer * local.size if local.mfileXfer else None)


def tree_limit(local) -> int:
    """The largest file of a -files tree: -mfile*, else 1 MB (never below the transfer size)."""
    return max_size(local) or max(1 << 20, local.size)


def file_size(path: str) -> int:
    """Bytes in a file or block device (0 when it does not exist, or for a character device);
    ValueError, one line naming the file, when it cannot be opened or measured. Never blocks:
    a FIFO or a terminal is opened without waiting and not read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    except OSError as e:
        raise ValueError(f"cannot open {path}: {e.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
            return os.lseek(fd, 0, os.SEEK_END)
        return 0
    except OSError as e:
        raise ValueError(f"cannot find the size of {path}: {e.strerror}") from None
    finally:
        os.close(fd)


def layout(group, row: int, seed: int, size_of_file: int | None, sizes=(), align=512) -> Layout:
    """The layout of a test process; size_of_file: its user file's size (None: scratch)."""
    spec, local = SPECS[group.action], group.local
    size, spacing = local.size, local.size + local.vector
    limit = max_size(local)
    if spec.order == "scan" or (spec.order == "random" and size_of_file is not None):
        limit = min(limit or size_of_file, size_of_file)
    elif limit is None:
        limit = local.offset + (local.n - 1) * spacing + size
    return Layout(spec.order, spec.ops, size, local.n, limit, (seed, row), offset=local.offset,
                  spacing=spacing, percR=local.percR, align=align, sizes=tuple(sizes))
