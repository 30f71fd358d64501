"""Shared helpers: run the real command in-process or as a subprocess, in a clean directory."""
from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

import pytest

from torque_async import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Every test runs in its own empty directory: no stray Torque.config, sysctl.current kept."""
    monkeypatch.chdir(tmp_path)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The command as a user runs it (a fresh process: spawn, signals, exit codes)."""
    return subprocess.run([sys.executable, "-m", "torque_async", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}   # this checkout's code


def execute(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.execute(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str, header: str = "proc,Start,Finish,Diff,Xfers,BW(MB/s),TS(KB),IO/sec,Test,"
                                   "File,PID") -> list[list[str]]:
    """The rows of the table under `header` (the bandwidth table), split into their columns."""
    lines = out.splitlines()
    i = lines.index(header)
    rows = []
    for line in lines[i + 1:]:
        if not line.strip():
            break
        rows.append([c.strip() for c in line.split(",")])
    return rows
