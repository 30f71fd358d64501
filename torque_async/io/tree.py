"""The -files tree: N files of random sizes under -dir, made by -cfiles and kept for later runs.

File i is DIR/{i // 1000:03d}/f{i:07d}; its size is a multiple of the transfer size, uniform
in [transfer size, max file size], drawn from a fixed generator (not -seed: a tree serves every
seed). DIR/torque-files.json records the transfer size, the maximum size and every file's size;
it is written last, so an interrupted -cfiles leaves a tree that reads as incomplete. A test
uses the first N files of a tree made for its transfer size and maximum file size. -cfiles
writes only the tree's own files and its manifest, and only those that are missing or wrong.
"""
from __future__ import annotations

import asyncio
import json
import os

import numpy as np

from .scratch import write_pattern

MANIFEST = "torque-files.json"
TREE_SEED = 0x746F72717565
PARALLEL = 16                      # files written at once by -cfiles


def path(root: str, i: int) -> str:
    return os.path.join(root, f"{i // 1000:03d}", f"f{i:07d}")


def strangers(root: str) -> tuple[list[str], list[str]]:
    """What under root a tree did not make (other names), and symbolic links among its own
    names (a link would lead -cfiles' writes out of the tree)."""
    foreign, links = [], []
    if not os.path.isdir(root):
        return foreign, links
    for top in sorted(os.listdir(root)):
        where = os.path.join(root, top)
        if top == MANIFEST or (top.isdigit() and len(top) == 3):
            if os.path.islink(where):
                links.append(where)
            elif os.path.isdir(where):
                for name in sorted(os.listdir(where)):
                    inner = os.path.join(where, name)
                    if os.path.islink(inner):
                        links.append(inner)
                    elif not (name.startswith("f") and name[1:].isdigit()):
                        foreign.append(inner)
        else:
            foreign.append(where)
    return foreign, links


def planned_sizes(count: int, max_size: int, unit: int) -> list[int]:
    rng = np.random.default_rng([TREE_SEED, max_size, unit])
    return (rng.integers(1, max_size // unit + 1, count) * unit).tolist()


def sizes(root: str, count: int, max_size: int, unit: int) -> list[int]:
    """The sizes of the tree's first count files; ValueError: what keeps the tree under root
    from serving -files count."""
    try:
        with open(os.path.join(root, MANIFEST)) as fh:
            made = json.load(fh)
    except (OSError, ValueError):
        raise ValueError(f"there is no -files tree in {root}") from None
    if (made.get("unit"), made.get("max_size")) != (unit, max_size):
        raise ValueError(f"the tree in {root} was made for {made.get('unit')}-byte transfers "
                         f"and files up to {made.get('max_size')} bytes, not {unit} and "
                         f"{max_size}")
    sizes = made.get("sizes", [])[:count]
    if len(sizes) < count:
        raise ValueError(f"the tree in {root} has {len(sizes)} files, not {count}")
    for i, size in enumerate(sizes):
        try:
            if os.stat(path(root, i)).st_size != size:
                raise ValueError(f"{path(root, i)} is not {size} bytes long")
        except OSError:
            raise ValueError(f"{path(root, i)} is missing") from None
    return sizes


async def make(root: str, count: int, max_size: int, unit: int) -> None:
    """-cfiles: write whatever the tree lacks for -files count. Not timed."""
    want = planned_sizes(count, max_size, unit)
    for d in range(0, count, 1000):
        os.makedirs(os.path.dirname(path(root, d)), exist_ok=True)
    gate = asyncio.Semaphore(PARALLEL)

    async def one(i: int, size: int) -> None:
        try:
            if os.stat(path(root, i)).st_size == size:
                return
        except FileNotFoundError:
            pass
        async with gate:
            await write_pattern(path(root, i), size, tag=i + 1)
    manifest = os.path.join(root, MANIFEST)
    if os.path.exists(manifest):
        os.unlink(manifest)
    await asyncio.gather(*(one(i, s) for i, s in enumerate(want)))
    with open(manifest, "w") as fh:
        json.dump({"unit": unit, "max_size": max_size, "sizes": want}, fh)
