"""How a worker process starts. Forked, by default, from multiprocessing's forkserver: a server
process, itself a new interpreter that never ran any of the command's code, imports numpy and
the plan's worker modules once; each worker is a fork of that clean, single-threaded process.
A worker inherits none of the command's state (its event loop, threads, MPI, open files), as a
spawned one would not, and is ready in milliseconds instead of after an interpreter's start and
imports of its own. The command starts the server as soon as its plan is known to have workers
(launch.py), so the server imports while the command does. A group's -execChild starts its
workers as new interpreters (spawn): torque's choice between fork and exec. The server dies
with the command, however that ends, and its workers with it (die_with_parent.py).

The server listens on a socket in a private directory of the temp dir (base()), PREFIX
PID.RANDOM, removed at exit; a killed command's is found and removed as its scratch
directories are."""
from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import shutil
import signal
import tempfile
from multiprocessing import forkserver, process, resource_tracker

from .io.identity import mark_dir
from .kinds import KINDS, WORKER, WORKER_ENTRY
from .plan import Plan

FORKED, EXECED = mp.get_context("forkserver"), mp.get_context("spawn")
PREFIX = "torque-async-forkserver."
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)   # the stop signals,
                                                                  # ignored ones too
SUN_PATH = 108                     # bytes of an AF_UNIX socket's path, its NUL included
FILES_AT_START = 64                # descriptors the command holds of its own (limits.py): the
                                   # server passes a worker's through its socket, which fails
                                   # (an AssertionError) when the limit is near the command's own


def context(local):
    """Where a group's workers start from (a multiprocessing context)."""
    return EXECED if local.execChild else FORKED


def parent(local) -> int:
    """The pid a group's worker starts as the child of: the command, or the server."""
    return os.getpid() if local.execChild else forkserver._forkserver._forkserver_pid


def forked_modules(plan: Plan) -> list[str]:
    """The modules the plan's forked workers run: the server imports them once, for all
    (torque_async.plan for the Proc each one is sent, numpy.random for its rng), so that no
    worker imports them itself."""
    groups = [g for g in plan.groups if KINDS[g.action].runs_in == WORKER and not g.local.execChild]
    return ["torque_async.die_with_parent", "torque_async.plan", "numpy", "numpy.random",
            WORKER_ENTRY, *sorted({KINDS[g.action].impl.split(":")[0] for g in groups})
            ] if groups else []


def base(pid: int) -> str:
    """Where the server of command `pid` has its directory: the temp dir, unless the socket's
    path would be too long for AF_UNIX there (108 bytes with its NUL: a long TMPDIR), then /tmp
    (as Python 3.14's multiprocessing does)."""
    here = tempfile.gettempdir()
    socket = os.path.join(here, f"{PREFIX}{pid}.12345678", "listener-12345678")
    return here if len(os.fsencode(socket)) < SUN_PATH else "/tmp"



def start_server(plan: Plan) -> None:
    """Start the server for the plan's forked workers, if it has any and none runs yet (and
    multiprocessing's resource tracker before it). The stop signals are blocked meanwhile: the
    tracker, the server and every worker forked from it start with them blocked (a worker
    unblocks them once it ignores them; the server never takes them and ends when the command
    does), so a signal to the process group reaches the command alone."""
    preload = forked_modules(plan)
    if not preload:
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        resource_tracker.ensure_running()  # it unblocks SIGINT and SIGTERM on its way out:
        signal.pthread_sigmask(signal.SIG_BLOCK, HELD)           # blocked again for the server
        config = process.current_process()._config     # multiprocessing's own temp dir setting
        if "tempdir" not in config:
            config["tempdir"] = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}.", dir=base(os.getpid()))
            mark_dir(config["tempdir"])         # (-freeSharedMemory removes only a marked one)
            atexit.register(shutil.rmtree, config["tempdir"], ignore_errors=True)
        FORKED.set_forkserver_preload(preload)
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def launch(child, local) -> None:
    """Start worker process `child` of a group; a forked one whose server's socket is gone
    (its directory removed while the command ran: a temp cleaner) is named as such, not with a
    bare 'No such file or directory'."""
    try:
        child.start()
    except FileNotFoundError as e:
        address = forkserver._forkserver._forkserver_address
        if local.execChild or e.filename is not None or not address or os.path.exists(address):
            raise
        raise OSError(e.errno, "the workers' server's socket is gone: its directory was removed "
                      "while the command ran (a temp cleaner?); run again", address) from None

