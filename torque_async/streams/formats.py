"""Frame units of a stream: -fps, -frame WxH and -pixfmt, and the exact size of one frame.

    pixfmt    layout                                     bytes of a W x H frame      W, H
    uyvy422   8-bit 4:2:2 packed, U Y V Y                2 W H                       W even
    yuyv422   8-bit 4:2:2 packed, Y U Y V                2 W H                       W even
    v210      10-bit 4:2:2 packed: 6 pixels in 4 32-bit  ceil(W / 48) x 128 x H      W even
              words (16 bytes); rows padded to 48
              pixels = 128 bytes (Apple's Ice Floe Dispatch 19, uncompressed Y'CbCr)

v210 holds any even width: a row's last 6-pixel group and 48-pixel block are padded (1280-pixel
720p rows are 27 blocks, 3456 bytes, as capture cards lay them out), so its widths are checked
as 4:2:2's, not refused unless they are a multiple of 6.
    nv12      8-bit 4:2:0: Y plane, then interleaved UV  W H + 2 (W/2)(H/2) = 3 W H / 2  even
              at half width and height
    p010      as nv12 with 10 bits in each 16-bit word   2 (W H + 2 (W/2)(H/2)) = 3 W H  even
    rgba8     8 bits each of R G B A                     4 W H
    rgb10a2   10 bits each of R G B, 2 of A: 32 bits     4 W H

Broadcast rates are typed as their decimals and mean the NTSC fractions: 59.94 is 60000/1001
frames per second (a frame every 16 683 350.0 ns), 29.97 is 30000/1001, 23.976 is 24000/1001,
119.88 is 120000/1001; any other rate is the decimal typed (or a fraction typed as N/D), exact.
"""
from __future__ import annotations

from fractions import Fraction

# name -> (bytes of a W x H frame, what the width must be a multiple of, height multiple)
FORMATS = {
    "uyvy422": (lambda w, h: 2 * w * h, 2, 1),
    "yuyv422": (lambda w, h: 2 * w * h, 2, 1),
    "v210": (lambda w, h: -(-w // 48) * 128 * h, 2, 1),
    "nv12": (lambda w, h: w * h * 3 // 2, 2, 2),
    "p010": (lambda w, h: w * h * 3, 2, 2),
    "rgba8": (lambda w, h: 4 * w * h, 1, 1),
    "rgb10a2": (lambda w, h: 4 * w * h, 1, 1),
}
NTSC = {"23.976": Fraction(24000, 1001), "29.97": Fraction(30000, 1001),
        "59.94": Fraction(60000, 1001), "119.88": Fraction(120000, 1001)}


def rate(text: str) -> Fraction:
    """Frames per second of a -fps argument, exact (see the table above)."""
    if text in NTSC:
        return NTSC[text]
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"'{text}' is not a frame rate (60, 59.94, 30000/1001)") from None
    if not 0 < value <= 100_000:
        raise ValueError(f"{text} frames per second is out of range (above 0, at most 100000)")
    return value


def parse_rate(text: str) -> str:
    """-fps: the text typed, once it is a valid rate (kept as typed, so exports show it)."""
    rate(text)
    return text


def parse_frame(text: str) -> tuple[int, int]:
    """-frame WxH: width and height in pixels."""
    w, x, h = text.lower().partition("x")
    if not (x and w.isdigit() and h.isdigit()) or not (0 < int(w) <= 65536 and 0 < int(h) <= 65536):
        raise ValueError(f"'{text}' is not a frame size WxH (1920x1080, at most 65536x65536)")
    return int(w), int(h)


def frame_bytes(pixfmt: str, width: int, height: int) -> int:
    """The exact size of one frame; ValueError when the format cannot hold that size."""
    size, w_step, h_step = FORMATS[pixfmt]
    if width % w_step or height % h_step:
        need = (f"a width that is a multiple of {w_step}" if width % w_step else
                "an even height")
        raise ValueError(f"{pixfmt} needs {need} (got {width}x{height})")
    return size(width, height)
