"""A headless OpenGL context through EGL: no window, no X server, no surface.

The display is an EGL device (EGL_EXT_device_enumeration): the one `-display n` names by index,
else the first that is not Mesa's software device (a GPU) and initialises. Without a GPU it is
Mesa's surfaceless platform, which renders with llvmpipe. The context is made current with no
surface; callers render into framebuffer objects.

This module owns how PyOpenGL is loaded in the worker process: the EGL platform and the flags
that keep per-call overhead off the hot path (no glGetError after every call: callers check
once, after timing) are set before the first OpenGL import.
"""
from __future__ import annotations

import ctypes
import os

from torque_async.kind_api.api import TestError

# what to install when a library is missing; tools/setup.sh installs the packages on this line
INSTALL = 'apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0'
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
MAX_DEVICES = 16


def _load():
    """Import PyOpenGL's EGL and GL for a headless context; TestError if a library is missing."""
    os.environ['PYOPENGL_PLATFORM'] = 'egl'
    try:
        import OpenGL
    except ImportError as e:
        raise TestError(f'video tests need PyOpenGL ({e}): pip install PyOpenGL') from None
    OpenGL.ERROR_ON_COPY = True  # a wrapper that would copy an array raises instead
    try:
        from OpenGL import EGL, _configflags
        from OpenGL.EGL.EXT import device_base, platform_base
        # GL calls without a glGetError after each; only now: PyOpenGL's EGL fails to import without
        _configflags.ERROR_CHECKING = False
        from OpenGL import GL
    except Exception as e:  # noqa: BLE001  PyOpenGL reports a missing library as AttributeError
        raise TestError(f'cannot load EGL/OpenGL ({_reason(e)}): {INSTALL}') from None
    return EGL, GL, device_base, platform_base


def _reason(e: Exception) -> str:
    operation = getattr(e, 'baseOperation', None)  # PyOpenGL's EGLError
    return f'{operation.__name__}: {e.err}' if operation else f'{type(e).__name__}: {e}'


class GLContext:
    """An OpenGL context current in this thread; `GL` is PyOpenGL's GL module."""

    def __init__(self, device: str | None = None):
        EGL, self.GL, devices, platforms = _load()
        self._egl, self._display, self._context = EGL, None, None
        try:
            self._open(device, devices.eglQueryDevicesEXT, devices.eglQueryDeviceStringEXT,
                       platforms.eglGetPlatformDisplayEXT)
        except TestError:
            self.close()
            raise
        except Exception as e:  # noqa: BLE001  EGL calls raise EGLError
            self.close()
            raise TestError(f'no headless OpenGL context ({_reason(e)}): {INSTALL}') from None

    def _open(self, device, query_devices, query_device, platform_display) -> None:
        EGL = self._egl
        devices, count = (EGL.EGLDeviceEXT * MAX_DEVICES)(), EGL.EGLint()
        if not (query_devices and query_devices(MAX_DEVICES, devices, ctypes.byref(count))):
            count.value = 0
        devices = devices[:count.value]
        if device is not None:
            if not device.isdigit() or int(device) >= len(devices):
                found = f'0..{len(devices) - 1}' if devices else 'none found'
                raise TestError(f'-display {device!r}: expected an EGL device index ({found})')
            candidates = [devices[int(device)]]
        else:  # Mesa lists a device for every render node, also those it cannot drive: try each
            candidates = [d for d in devices if b'EGL_MESA_device_software'
                          not in (query_device(d, EGL.EGL_EXTENSIONS) or b'')] + [None]
        for candidate in candidates:
            try:
                if candidate is None:
                    display = platform_display(EGL_PLATFORM_SURFACELESS_MESA,
                                               EGL.EGL_DEFAULT_DISPLAY, None)
                else:
                    display = platform_display(EGL_PLATFORM_DEVICE_EXT, candidate, None)
                EGL.eglInitialize(display, None, None)
                break
            except Exception as e:  # noqa: BLE001  the next candidate, else the last error
                error = e
        else:
            raise error
        self._display = display
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        config, configs = EGL.EGLConfig(), EGL.EGLint()
        attributes = (EGL.EGLint * 5)(EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT,
                                      EGL.EGL_SURFACE_TYPE, 0, EGL.EGL_NONE)
        EGL.eglChooseConfig(display, attributes, ctypes.byref(config), 1, ctypes.byref(configs))
        if not configs.value:
            raise RuntimeError('no EGL config renders OpenGL')
        self._context = EGL.eglCreateContext(display, config, EGL.EGL_NO_CONTEXT, None)
        EGL.eglMakeCurrent(display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, self._context)

    @property
    def info(self) -> str:
        """GL_VENDOR / GL_RENDERER / GL_VERSION."""
        GL = self.GL
        return ' / '.join(GL.glGetString(name).decode(errors='replace')
                          for name in (GL.GL_VENDOR, GL.GL_RENDERER, GL.GL_VERSION))

    def close(self) -> None:
        EGL, display = self._egl, self._display
        if display:
            EGL.eglMakeCurrent(display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
            if self._context:
                EGL.eglDestroyContext(display, self._context)
            EGL.eglTerminate(display)
        self._display = self._context = None
