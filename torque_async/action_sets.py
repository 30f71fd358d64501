"""Named sets of actions, for the local options' `applies` in the option table (options.py).

A local option changes the test of the action after it; the actions it applies to are decided
against the man page (applies.py says what the scanner does with them):

    every test      -p, -affinityNumber(Diff), -checkpoint, -sleepEnd; -sample/-sa but -web
                    (requests differ in size, so a sample's bandwidth would not be its bytes)
    counted tests   -n, -i, -t, -ramp: all but streams, whose length is their runTime argument
    spawned tests   -affinityParent, -noResetParentAffinity, -execChild (loop tests launch
                    nothing: they are coroutines of the main process)
    -T              tests that time transfers one by one: not streams (paced by their bandwidth)
                    nor -cyclic (paced by its interval)
    sizes           memory, STREAM, spinWait, file and web tests (a stream's frame size is its
                    sizeKB argument or -frame/-pixfmt, a video transfer is IH x IW x 4)
    frame units     -fps -frame -pixfmt -lateUs -dropLate: streams
    -offset*        "a file or buffer": memory, STREAM and file tests on a lattice
    patterns        -bp -bp1 -bp2 -bt -btr -bpkey: memory tests (STREAM's arrays hold the
                    values its validation needs)
    file options    as each file action uses them (io/actions.py Spec)
    -web            its own options, the tree's (-dir -cfiles -mfile*), -T
"""
from __future__ import annotations

STRIDED = frozenset({"load", "store", "ls"})             # one access per cache line or -stride
MEMORY = STRIDED | {"bcopy", "bzero"}
STREAM = frozenset({"Scopy", "Sscale", "Sadd", "Striad"})
VIDEO = frozenset({"V"})
TIMED = MEMORY | STREAM | VIDEO | {"spinWait"}           # workers timing transfers one by one
SPAWNED = TIMED | {"cyclic"}                             # run in worker processes
LISTED = frozenset({"r", "w", "rand", "rmw", "rw", "aio"})   # a file from the -f list
PLACED = LISTED | {"scan", "scanfile"}                   # on a lattice from -offset
FILE = PLACED | {"files"}
READS = FILE - {"w"}                                     # tests that read (-touch)
STREAMS = frozenset({"streams", "memStreams"})
WEB = frozenset({"web"})
EVERY = SPAWNED | FILE | STREAMS | WEB
COUNTED = EVERY - STREAMS                                # n x i transfers, or -t seconds
