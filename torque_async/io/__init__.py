"""The file tests on the event loop: -r -w -rand -rmw -rw -scan -scanfile -aio -files.

    filetest.py   FileTest: set-up, the lanes that issue and time transfers, the data check
    batch.py      io_uring's fast path: a plain test's transfers driven by the engine, no lanes
    actions.py    what each action does (Spec), its files, sizes and layout
    layout.py     transfer k -> (file, offset, write), a pure function of plan, seed, file sizes
    engine.py     the engine interface; the threads and sync backends
    uring.py      the io_uring backend: the engine over ring.py
    ring.py       io_uring itself: the kernel's rings mapped, its system calls through ctypes
    files.py      opening files: O_DIRECT, or buffered I/O where it cannot be had
    scratch.py    scratch files for tests given no -f file
    tree.py       the -files tree and its manifest
    data.py       the data pattern, write stamps and -rmw's change
    plancheck.py  checks of a plan's file tests before anything runs
"""
