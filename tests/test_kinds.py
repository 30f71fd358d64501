"""The kind registry refuses inconsistent declarations with real exceptions (python -O keeps them)."""
import subprocess
import sys

import pytest
from conftest import ENV

from torque_async import kinds
from torque_async.kinds import (CALIBRATION, FILES, GL, KINDS, LOOP, OWN_LOOP, Kind,
                                RegistrationError, register)


@pytest.mark.parametrize("kind, problem", [
    (Kind("nope", "Nope", "memory", "workers.memory:BzeroTest"), "no action option"),
    (Kind("load", "Load", "memory", "workers.memory:LoadTest"), "registered twice"),
    (Kind("bzero", "B", "memory", "workers.memory.BzeroTest"), "'module:attribute'"),
    (Kind("bzero", "B", "memory", "m:C", frozenset({"wings"})), "unknown needs"),
    (Kind("bzero", "B", "memory", "m:C", frozenset({LOOP, GL})), "need a worker process"),
    (Kind("bzero", "B", "memory", "m:C", frozenset({FILES})), "file tests run on the event loop"),
    (Kind("bzero", "B", "memory", "m:C", frozenset({CALIBRATION, OWN_LOOP})), "own loop"),
])
def test_an_inconsistent_kind_is_refused(kind, problem, monkeypatch):
    monkeypatch.setattr(kinds, "KINDS", {k: v for k, v in KINDS.items() if k != "bzero"})
    with pytest.raises(RegistrationError, match=problem):
        register(kind)


def test_the_class_must_have_what_its_driver_calls():
    with pytest.raises(RegistrationError, match=r"no measure\(\)"):
        Kind("cyclic", "C", "timer", "workers.memory:BzeroTest", frozenset({OWN_LOOP})).load()
    with pytest.raises(RegistrationError, match=r"no run\(\)"):
        Kind("r", "R", "file", "workers.memory:BzeroTest", frozenset({LOOP})).load()


def test_every_kind_loads_and_the_checks_survive_python_O():
    for kind in KINDS.values():
        if GL not in kind.needs:           # loading OpenGL is the video tests' business
            kind.load()
    code = ("from torque_async.kinds import Kind, register, RegistrationError\n"
            "try: register(Kind('load', 'L', 'memory', 'm:C'))\n"
            "except RegistrationError: print('refused')")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True,
                         env=ENV)
    assert out.stdout.strip() == "refused", out.stderr
