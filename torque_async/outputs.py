"""What a run writes besides its report: -json, -csv and sysctl.current.

Checked with the plan, so a bad target is one line and exit 2 before anything runs: never a
directory or a device, never the same file as an input (a -f file, a -scan/-scanfile FILE, the
-c configuration, the alias file) or as another output, never (nor a -f file) inside a -files or
-web tree; names are compared as files (the resolved path, or the same device and inode), not
as strings. Written after the run to a new file in the target's directory and renamed into
place, so an existing name (a symbolic link planted there, a hard link to another file) is
replaced, never opened and never followed.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile

from .errors import Interrupted, UsageError
from .inputs import kind
from .io import identity
from .results import SEGMENT_PREFIX, SHM_DIR

SYSCTL_FILE = "sysctl.current"


def targets(settings) -> list[tuple[str, str]]:
    """(what, path) of every output written to a file."""
    named = [("-json", settings.json), ("-csv", settings.csv)]
    return [(what, path) for what, path in named if path and path != "-"] + \
        [("the configuration dump", SYSCTL_FILE)]


def inputs(plan) -> list[tuple[str, str]]:
    """(what, path) of every file the run reads."""
    s = plan.settings
    found = [("-f", path) for path in s.files]
    found += [(f"-{g.action}", g.args[0]) for g in plan.groups if g.action in ("scan", "scanfile")]
    found += [("-c", plan.config)] if plan.config else []
    found += [("-aliasFile", s.aliasFile)] if s.aliasFile else []
    return found


def same(a: str, b: str) -> bool:
    """Whether two names are one file: the same resolved path, or the same device and inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# No output is made in /dev itself (/dev/stdout is a link there; /dev/shm is a file system of
# its own) nor anywhere under /proc or /sys.
def in_system(folder: str) -> bool:
    return folder == "/dev" or any(folder == top or folder.startswith(top + "/")
                                   for top in ("/proc", "/sys"))


def why_unfit(path: str) -> str:
    """Why an output may not be made at `path` ('' when it may): its directory is /dev, or in
    /proc or /sys, or the name is, or its link leads to, anything but a regular file (a device, a FIFO).
    A link to a regular file, or to nothing, is replaced itself."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            mode, how = os.stat(path).st_mode, "leads to"
        else:
            how = "is"
    except OSError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        return f"{how} {kind(mode)}"
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    return f"is in {folder}" if in_system(folder) else ""


def refusal(what: str, path: str, hint: str = "") -> str:
    """Why output `what` may not be written at `path` ('' when it may); `hint` follows the
    refusal of a name that is not a file."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return f"{what} {path} is a directory" + (hint if path == SYSCTL_FILE else
                                                   ": name a file in it")
    if why := why_unfit(path):
        return f"{what} {path} {why}, not a file{hint}"
    if os.path.realpath(os.path.dirname(os.path.abspath(path))) == SHM_DIR and \
            os.path.basename(path).lstrip(".").startswith(SEGMENT_PREFIX):
        return f"{what} {path} is a name torque-async gives its shared memory: name another file"
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
        return f"cannot write {path}: {folder} is not a writable directory"
    return ""


def check(plan, extra: tuple[tuple[str, str], ...] = ()) -> None:
    """Raise UsageError for an output that cannot or must not be written; `extra`: (what,
    path) of outputs written besides the run's own (capacity's --json), checked alike."""
    s = plan.settings
    if s.json == "-" and s.csv == "-":
        raise UsageError("-json and -csv both write to -")
    if s.csvAll and not s.csv:
        raise UsageError("-csvAll widens -csv's columns: name the file with -csv FILE too")
    outs = targets(s) + list(extra)
    for i, (what, path) in enumerate(outs):
        hint = " (a run writes a new file there; '-' is standard output)" if path != SYSCTL_FILE \
            else " (a run leaves its configuration dump there: remove it, or run elsewhere)"
        if why := refusal(what, path, hint):
            raise UsageError(why)
        for other, name in outs[:i]:
            if same(path, name):
                raise UsageError(f"{other} and {what} both write to {path}")
        for other, name in inputs(plan):
            if same(path, name):
                raise UsageError(f"{what} {path} is the same file as {other} {name}: writing it "
                                 f"would destroy that file")
    for what, path in outs + [("-f", name) for name in s.files]:   # (a test's -f writes)
        for action, tree in trees(plan):
            if inside(path, tree):
                fix = "run from another directory" if path == SYSCTL_FILE else \
                    "name a file outside it"
                raise UsageError(f"{what} {path} is inside the {action} tree {tree}: a file there "
                                 f"that torque-async did not make (or one of its own, changed) "
                                 f"makes later runs refuse the tree; {fix}")


def trees(plan) -> list[tuple[str, str]]:
    """(action, directory) of every -files and -web tree: torque-async's own files."""
    return [(f"-{g.action}", g.local.dir) for g in plan.groups if g.action in ("files", "web")]


def inside(path: str, tree: str) -> bool:
    """Whether `path` would be made in directory `tree` or below it (resolved names)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    top = os.path.realpath(tree)
    return folder == top or folder.startswith(top.rstrip("/") + "/")


def made_here(path: str, mark: str) -> bool:
    """Whether `path` is free for an output torque-async marks as `mark` (sysctl.current, a
    plot's picture): nothing is there, or the file there carries that mark (identity.MARK, set
    when torque-async wrote it). A user's own file of the name (or a link) is not replaced."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        return os.getxattr(path, identity.MARK, follow_symlinks=False) == mark.encode()
    except OSError:
        return False


def write(path: str, text: str | bytes, mark: str = "", replace: bool = False) -> None:
    """Write text (or bytes) to a new file beside `path` and rename it into place; OSError
    names `path`. With `mark` the new file carries it (made_here), and a file at `path` that
    does not is left as it is (OSError EEXIST), unless `replace`."""
    folder = os.path.dirname(path) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8",
                       errors=None if binary else "surrogateescape") as fh:   # names as given
            mask = os.umask(0o022)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)                # mkstemp makes it 0600
            if mark:
                with contextlib.suppress(OSError):     # (a file system without them: it is
                    os.setxattr(fd, identity.MARK, mark.encode())   # never replaced later)
            fh.write(text)
        if why := why_unfit(path):                      # appeared since the plan was checked
            raise OSError(errno.EEXIST, f"it {why}", path)
        if mark and not replace and not made_here(path, mark):
            raise OSError(errno.EEXIST, NOT_MADE, path)
        os.replace(temp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror, path) from None
        raise


def emit(stream, text: str) -> None:
    """All of text on stream, through its file descriptor, a partial write resumed: a signal
    handled while a pipe was full made sys.stdout drop the rest (a report, a -json - cut at 64
    KiB). A stream without one (a test's capture) is written as it is."""
    stream.flush()
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):       # (io.UnsupportedOperation)
        stream.write(text)
        stream.flush()
        return
    view = memoryview(text.encode(stream.encoding or "utf-8", "replace"))
    while view:
        view = view[os.write(fd, view):]


def write_result(path: str, text: str) -> str:
    """Write a -json/-csv output file; the problem, or '' when written."""
    try:
        write(path, text)
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    return ""


def write_sysctl(lines: list[str]) -> None:
    """The longer configuration dump torque leaves behind in sysctl.current (a note if it
    cannot be written: it is not the run's result); it replaces only a sysctl.current that
    torque-async wrote, never a user's own file of that name."""
    try:
        write(SYSCTL_FILE, "\n".join(lines) + "\n", mark=SYSCTL_FILE)
    except OSError as e:
        why = f"{SYSCTL_FILE} here {NOT_MADE}: left as it is (move it away to have the dump)" \
            if e.strerror == NOT_MADE else f"cannot write {SYSCTL_FILE}: {e.strerror}"
        print(f"torque-async: note: {why}", file=sys.stderr)


NOT_MADE = "is a file torque-async did not write"


class OutputLost(Exception):
    """Standard output (or error) cannot be written: closed (`>&-`), a full disk, an I/O
    error. Its message is the one line that says so."""


def lost(stream, e: BaseException | None) -> OutputLost:
    """What went wrong with `stream`; whatever else is written to it (the exit's flush of what
    its buffer holds too) goes to /dev/null: it ends no later write in a traceback."""
    name = "standard error" if stream is sys.stderr and stream is not None else "standard output"
    if stream is None:
        return OutputLost(f"{name} is closed: nothing could be printed")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return OutputLost(f"cannot write {name}: {why}")


def say(lines: list[str], err: bool = False) -> None:
    """Print lines; bytes of a file name that are not UTF-8 show as U+FFFD, as in the rows."""
    if lines:
        text = "\n".join(lines).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        put(text + "\n", err)             # one write: ranks' lines never interleave


def put(text: str, err: bool = False) -> None:
    """Write text to stdout (stderr). OutputLost when it cannot be written (closed, a full
    disk); a stop signal while a full pipe holds the write (Interrupted) drops the rest of it."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        raise lost(None, None)
    try:
        emit(stream, text)
    except BrokenPipeError:                # the reader stopped early (| head): not a failure;
        lost(stream, None)                 # the rest goes nowhere
    except Interrupted:
        lost(stream, None)
        raise
    except OSError as e:
        raise lost(stream, e) from None
