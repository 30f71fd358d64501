"""-V n: OpenGL video transfer tests, headless (EGL: a GPU, or Mesa's llvmpipe without one).

An image is IH x IW RGBA8 pixels, 4 bytes each. One transfer moves one image once between
video memory (a texture; for read-backs it is the colour attachment of the framebuffer) and a
page-aligned client buffer in system memory allocated in set-up. Per transfer k:

  n  direction        GL calls
  1  VRAM -> system   glReadPixels(framebuffer -> client)
  2  VRAM -> system   glFinish; glGetTexImage(texture -> client)
  3  VRAM -> system   glGetTexImage(texture -> client)
  4  VRAM -> system   glGetTexImage(texture -> client); glFlush
  5  VRAM -> system   glReadPixels(framebuffer -> PBO); map the PBO (waits), copy to client, unmap
  6  VRAM -> system   glReadPixels(framebuffer -> PBO[k%2]); map PBO[(k+1)%2] (read k-1),
                      copy to client, unmap
  7  system -> VRAM   glTexSubImage2D(client[k%2] -> texture)
  8  system -> VRAM   as 7; glFlush
  9  system -> VRAM   as 7; glFinish
 10  system -> VRAM   as 7, into texture[k%3]
 11  system -> VRAM   as 8, into texture[k%3]
 12  system -> VRAM   as 9, into texture[k%3]

Sync and async. A read into client memory returns only once the data is there, so 1-4 are
synchronous to the caller; 2 drains the pipeline first (the classic synchronous copy), 3 leaves
the ordering after pending work to the driver, 4 also submits the command stream after the copy.
Test 5 reads through a pixel-pack buffer and waits for it; 6 is the asynchronous read-back: the
read issued in transfer k is collected in transfer k+1, set-up leaves one read in flight for
transfer 0 and check() collects the last. An upload takes the client data when it is called,
but may reach the texture later: 7 leaves that to the driver, 8 submits it (glFlush), 9 waits
for it (glFinish); check() finishes what is pending. Every counted byte is moved.

Data. Read-backs read a random image uploaded into the framebuffer's texture in set-up; the
client buffer is zeroed after the warm-up and must equal the image after timing. Uploads
alternate between two client buffers of different random data, so a texture that missed its
last upload (holding the one before) fails check().
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from torque_async.kind_api.buffers import Buffers
from torque_async.kind_api.api import TestContext, TestError
from workers.gl_context import GLContext

WARMUP = 4  # untimed transfers in set-up, unless -noVideoInitLoops


@dataclass(frozen=True)
class Spec:
    call: str          # glReadPixels, glGetTexImage (VRAM -> system), glTexSubImage2D (upload)
    pbos: int = 0      # read through pack buffers: 1 mapped at once, 2 mapped one transfer later
    before: str = ''   # GL call before the transfer: glFinish
    after: str = ''    # GL call after it: glFlush | glFinish
    textures: int = 1  # uploads rotate over this many textures


TESTS = {
    1: Spec('glReadPixels'),
    2: Spec('glGetTexImage', before='glFinish'),
    3: Spec('glGetTexImage'),
    4: Spec('glGetTexImage', after='glFlush'),
    5: Spec('glReadPixels', pbos=1),
    6: Spec('glReadPixels', pbos=2),
    7: Spec('glTexSubImage2D'),
    8: Spec('glTexSubImage2D', after='glFlush'),
    9: Spec('glTexSubImage2D', after='glFinish'),
    10: Spec('glTexSubImage2D', textures=3),
    11: Spec('glTexSubImage2D', after='glFlush', textures=3),
    12: Spec('glTexSubImage2D', after='glFinish', textures=3),
}


def _pointer(buffer: np.ndarray) -> ctypes.c_void_p:
    """What PyOpenGL's raw calls take without converting (it keeps the buffer alive)."""
    return buffer.ctypes.data_as(ctypes.c_void_p)


def _nothing() -> None:
    pass


class VideoTest:
    def __init__(self, ctx: TestContext):
        self.name = f'-V {ctx.group.args[0]}'
        self.spec = spec = TESTS[ctx.group.args[0]]
        local = ctx.local
        self.width, self.height = local.IW, local.IH
        self.transfer_bytes = self.system_bytes = self.width * self.height * 4
        self.upload = spec.call == 'glTexSubImage2D'
        self.last = -1  # k of the last transfer
        self.buffers = Buffers(local.wire)
        self.client = [self.buffers.new(self.transfer_bytes) for _ in range(2 if self.upload else 1)]
        if self.upload:
            for buffer in self.client:
                buffer[:] = ctx.rng.integers(0, 256, buffer.size, np.uint8)
        self.gl = GLContext(local.display)
        try:
            self.info = self.gl.info
            self._setup(ctx.rng)
            for k in range(0 if local.noVideoInitLoops else -WARMUP, 0):
                self.transfer(k)
            if spec.pbos > 1 and local.noVideoInitLoops:
                self._issue(-1)  # the read that transfer 0 collects (else warm-up's last issued it)
            if not self.upload:
                self.client[0][:] = 0
        except TestError:
            self.close()
            raise
        except Exception as e:  # noqa: BLE001  e.g. a GL entry point the driver lacks
            self.close()
            raise TestError(f'{self.name}: OpenGL set-up failed: {type(e).__name__}: {e}') from None

    def _setup(self, rng: np.random.Generator) -> None:
        """Textures, and for read-backs the framebuffer and pack buffers; binds self._move(k)."""
        from OpenGL.raw.GL.VERSION.GL_1_0 import glGetTexImage, glReadPixels
        from OpenGL.raw.GL.VERSION.GL_1_1 import glTexSubImage2D
        GL, spec = self.gl.GL, self.spec
        w, h, size = self.width, self.height, self.transfer_bytes
        RGBA, BYTE, TEX = GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, GL.GL_TEXTURE_2D
        FB, PACK = GL.GL_FRAMEBUFFER, GL.GL_PIXEL_PACK_BUFFER
        self.textures = [GL.glGenTextures(1) for _ in range(spec.textures)]
        for texture in self.textures:
            GL.glBindTexture(TEX, texture)
            GL.glTexParameteri(TEX, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
            GL.glTexImage2D(TEX, 0, GL.GL_RGBA8, w, h, 0, RGBA, BYTE, None)
        self._before = getattr(GL, spec.before) if spec.before else _nothing
        self._after = getattr(GL, spec.after) if spec.after else _nothing
        if self.upload:
            sources, textures = [_pointer(b) for b in self.client], self.textures

            def move(k):
                GL.glBindTexture(TEX, textures[k % len(textures)])
                glTexSubImage2D(TEX, 0, 0, 0, w, h, RGBA, BYTE, sources[k & 1])
            self._move = move
            return
        self.image = rng.integers(0, 256, size, np.uint8)
        glTexSubImage2D(TEX, 0, 0, 0, w, h, RGBA, BYTE, _pointer(self.image))
        GL.glBindFramebuffer(FB, GL.glGenFramebuffers(1))
        GL.glFramebufferTexture2D(FB, GL.GL_COLOR_ATTACHMENT0, TEX, self.textures[0], 0)
        if GL.glCheckFramebufferStatus(FB) != GL.GL_FRAMEBUFFER_COMPLETE:
            raise TestError(f'{self.name}: the RGBA8 {w}x{h} framebuffer is incomplete')
        destination = _pointer(self.client[0])
        if spec.call == 'glGetTexImage':
            self._move = lambda k: glGetTexImage(TEX, 0, RGBA, BYTE, destination)
        elif not spec.pbos:
            self._move = lambda k: glReadPixels(0, 0, w, h, RGBA, BYTE, destination)
        else:
            self.pbos = pbos = [GL.glGenBuffers(1) for _ in range(spec.pbos)]
            for pbo in pbos:
                GL.glBindBuffer(PACK, pbo)
                GL.glBufferData(PACK, size, None, GL.GL_STREAM_READ)

            def issue(k):
                GL.glBindBuffer(PACK, pbos[k % len(pbos)])
                glReadPixels(0, 0, w, h, RGBA, BYTE, None)

            def collect(pbo):
                GL.glBindBuffer(PACK, pbo)
                source = GL.glMapBufferRange(PACK, 0, size, GL.GL_MAP_READ_BIT)  # waits for it
                if not source:
                    error = GL.glGetError()
                    raise TestError(f'{self.name}: glMapBufferRange failed (GL error {error:#x})')
                ctypes.memmove(destination, source, size)
                GL.glUnmapBuffer(PACK)

            def move(k):
                issue(k)
                collect(pbos[(k + 1) % len(pbos)])
            self._issue, self._collect, self._move = issue, collect, move

    def transfer(self, k: int) -> None:
        self.last = k
        self._before()
        self._move(k)
        self._after()

    def check(self) -> None:
        from OpenGL.raw.GL.VERSION.GL_1_0 import glGetTexImage
        GL = self.gl.GL
        if self.spec.pbos > 1:
            self._collect(self.pbos[self.last % 2])  # the read still in flight
        GL.glFinish()
        error = GL.glGetError()
        if error:
            raise TestError(f'{self.name}: OpenGL error {error:#x}')
        if not self.upload:
            differ = np.count_nonzero(self.client[0] != self.image)
            if differ:
                raise TestError(f'{self.name}: {differ} of {self.transfer_bytes} bytes read back '
                                f'differ from the framebuffer')
            return
        readback = np.empty(self.transfer_bytes, np.uint8)
        for t, texture in enumerate(self.textures):
            last = self.last - (self.last - t) % len(self.textures)  # the last transfer into it
            if last < 0:
                continue
            GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
            glGetTexImage(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, _pointer(readback))
            differ = np.count_nonzero(readback != self.client[last & 1])
            if differ:
                raise TestError(f'{self.name}: texture {t} differs from the image transfer {last} '
                                f'uploaded in {differ} of {self.transfer_bytes} bytes')

    def close(self) -> None:
        if self.gl:
            self.gl.close()
            self.gl = None
        self.buffers.close()
