"""-V 1..12 on a headless EGL context, each run in a spawned process as the driver runs it."""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import sys
import types

import numpy as np
import pytest

from torque_async.options import Locals
from torque_async.kind_api.api import TestContext as Context  # not Test*: pytest would collect those
from torque_async.kind_api.api import TestError as Error
from workers.gl_context import INSTALL
from workers.video import VideoTest

H, W, N = 48, 64, 5  # small images, a few transfers
LOCAL = {'IH': H, 'IW': W, 'n': N, 'i': 1}


def in_child(function, *args):
    """function(*args) in a fresh spawned process; a hang fails the test instead of blocking it."""
    with multiprocessing.get_context('spawn').Pool(1) as pool:  # leaving terminates the child
        return pool.apply_async(function, args).get(timeout=120)


def make(number: int, **options) -> VideoTest:
    local = Locals(**LOCAL | options)
    group = types.SimpleNamespace(action='V', args=(number,), local=local)
    return VideoTest(Context(group, proc=0, row=0, rng=np.random.default_rng(number), linesize=64))


def spoil_client(test):
    """Change every client buffer after the last transfer."""
    for buffer in test.client:
        buffer[0] ^= 0xFF


def skip_last(test):
    """Count a transfer that never happened: the texture keeps the previous image."""
    test.last += 1


def make_gl_error(test):
    test.gl.GL.glBindTexture(0, 0)  # GL_INVALID_ENUM


def collect_nothing_yet(test):
    """Zero the client buffer: check() must collect the read still in flight."""
    test.client[0][:] = 0


def run(number: int, options: dict, spoil=None):
    """In the child: set up, N transfers, spoil, check, close.

    Returns (info, transfer bytes, system bytes, the check's error or None)."""
    test = make(number, **options)
    try:
        for k in range(N):
            test.transfer(k)
        if spoil:
            spoil(test)
        try:
            test.check()
            error = None
        except Error as e:
            error = str(e)
        return test.info, test.transfer_bytes, test.system_bytes, error
    finally:
        test.close()


def run_without(missing: tuple[str, ...]) -> str:
    """In the child: dlopen fails for these libraries (or PyOpenGL is missing); set up -V 1."""
    if missing == ('PyOpenGL',):
        sys.modules['OpenGL'] = None
    else:
        class CDLL(ctypes.CDLL):
            def __init__(self, name, *args, **kwargs):
                if name and os.path.basename(name).startswith(missing):
                    raise OSError(f'{name}: cannot open shared object file')
                super().__init__(name, *args, **kwargs)
        ctypes.cdll._dlltype = CDLL  # what PyOpenGL's loader opens libraries with
    try:
        make(1).close()
    except Error as e:
        return str(e)
    return 'no TestError'


@pytest.mark.parametrize('number', range(1, 13))
def test_transfers_move_the_image(number):
    info, transfer_bytes, system_bytes, error = in_child(run, number, {})
    assert error is None
    assert info.count(' / ') == 2 and all(info.split(' / '))
    assert transfer_bytes == system_bytes == H * W * 4


@pytest.mark.parametrize('number', [5, 6, 10])
def test_without_warm_up_or_with_wired_buffers(number):
    assert in_child(run, number, {'noVideoInitLoops': True, 'wire': True})[3] is None


@pytest.mark.parametrize('number', [1, 2, 5, 7, 10])
def test_a_corrupted_buffer_fails_check(number):
    assert 'differ' in in_child(run, number, {}, spoil_client)[3]


@pytest.mark.parametrize('number', [7, 12])
def test_a_skipped_upload_fails_check(number):
    assert 'differs from the image transfer 5 uploaded' in in_child(run, number, {}, skip_last)[3]


def test_check_reports_a_gl_error():
    assert 'OpenGL error 0x500' in in_child(run, 3, {}, make_gl_error)[3]


def test_check_collects_the_read_in_flight():
    assert in_child(run, 6, {}, collect_nothing_yet)[3] is None


def test_display_selects_an_egl_device_by_index():
    assert in_child(run, 3, {'display': '0'})[3] is None
    with pytest.raises(Error, match="-display '99': expected an EGL device index"):
        in_child(run, 3, {'display': '99'})


@pytest.mark.parametrize('missing, names', [
    (('libEGL.',), INSTALL),
    (('libOpenGL.', 'libGL.', 'libGLES'), INSTALL),
    (('PyOpenGL',), 'pip install PyOpenGL'),
])
def test_missing_libraries_name_what_to_install(missing, names):
    message = in_child(run_without, missing)
    assert names in message and '\n' not in message
