#!/usr/bin/env python3
"""The floor of any Python loop serving -web's warm requests through torque-async's ring:
N clients' chains (openat into a direct descriptor, one read of the whole file, close), each
client's SQEs its own and only the open's name rewritten, submitted together and reaped in
batches, through torque_async/io/ring.py with nothing else (no event loop, no Meter, no
latency, no check of what was read).

    python3 tools/web_floor.py TREE CLIENTS [--seconds 1] [--seed 1]

TREE is a -web tree torque-async made (-cfiles) of fixed-size files; the files are picked
uniformly. Prints one JSON line: requests/s and the process's CPU per request (s). What
torque-async's -web costs above this is its own bookkeeping; what this costs above fio's
CPU per request is the kernel's work and the language's least per request.
tools/bench_web.py --floor runs it as a side of its rounds.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from torque_async.io import ring as rings        # noqa: E402 - after the repository's path
from torque_async.web import site                # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree")
    ap.add_argument("clients", type=int)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    manifest = json.loads(Path(args.tree, site.MANIFEST).read_text())
    names, size = site.names(manifest["dirs"]), max(manifest["sizes"])
    encoded = [os.fsencode(name) + b"\0" for name in names]
    held = ctypes.create_string_buffer(b"".join(encoded))
    starts = (ctypes.addressof(held) + np.cumsum([0] + [len(e) for e in encoded[:-1]])).tolist()
    dirfd = os.open(args.tree, os.O_RDONLY | os.O_DIRECTORY)
    ring = rings.Ring(4096)
    ring.register_files(args.clients)
    buffers = [bytearray(size) for _ in range(args.clients)]
    exports = [rings.address(memoryview(b)) for b in buffers]
    owned = []
    for c in range(args.clients):
        sqes = [ring.take() for _ in range(3)]
        ring.chain(sqes[0], rings.OP_OPENAT, rings.SQE_IO_LINK, dirfd, 0, 0, 0, c << 8,
                   os.O_RDONLY | os.O_NOFOLLOW, c + 1)
        ring.chain(sqes[1], rings.OP_READ, rings.SQE_IO_HARDLINK | rings.SQE_FIXED_FILE, c,
                   exports[c][0], size, 0, c << 8 | 1)
        ring.chain(sqes[2], rings.OP_CLOSE, 0, 0, 0, 0, 0, c << 8 | 2, 0, c + 1)
        owned.append(sqes)
    rng = np.random.default_rng(args.seed)
    picks, at = rng.integers(0, len(names), 1 << 16).tolist(), 0
    queued = []
    for sqes in owned:
        ring.addrs[sqes[0]] = starts[picks[at]]
        at += 1
        queued += sqes
    ring.queue_all(queued)
    done, cpu0, t0 = 0, time.process_time(), time.perf_counter()
    end = t0 + args.seconds
    while True:
        ring.submit()
        for key, res, _ in ring.completions():
            if res < 0:
                sys.exit(f"web_floor: entry {key & 0xFF} of client {key >> 8}: "
                         f"{os.strerror(-res)}")
            if key & 0xFF == 2:                  # a client's close: its request is done
                done += 1
                sqes = owned[key >> 8]
                if at == len(picks):
                    picks, at = rng.integers(0, len(names), 1 << 16).tolist(), 0
                ring.addrs[sqes[0]] = starts[picks[at]]
                at += 1
                queued += sqes
        if time.perf_counter() >= end:
            break
        ring.queue_all(queued)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(json.dumps({"rps": done / elapsed, "cpu": cpu / done}))


if __name__ == "__main__":
    main()
