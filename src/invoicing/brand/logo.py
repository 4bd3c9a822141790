"""A brand's logo: a PNG, JPEG or WebP of at most ``MAX_LOGO_BYTES``, decoded by Pillow and
written again as a fresh PNG, so what the service serves is pixels it made itself (no
metadata, no script, no second format hidden in the file). SVG, GIF and everything else
is refused.

A small file can cost its decoder far more than its size: it may declare a huge image, or,
as a progressive JPEG, repeat thousands of tiny scans that libjpeg each applies to the whole
image (128 KiB hold 7,000 of them, many seconds of CPU). So the work is in two parts:

- ``screen_logo`` reads the bytes only, in the API's process: the size, the format's magic
  bytes, and a JPEG's scans (more than ``MAX_JPEG_SCANS`` is refused before any decoding);
- ``reencode_logo`` decodes and re-encodes, refusing an image over ``MAX_LOGO_SIDE`` pixels a
  side (so ``MAX_LOGO_PIXELS`` in all) from its header, before decoding its pixels. The
  service runs it in a child process under CPU, memory and time limits
  (``brand.logo_process``), never on the event loop.

A refusal is a ``LogoProblem`` whose ``reason`` is one of ``REASONS``.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

# Registers WebP (Pillow registers PNG and JPEG itself): a format missing from the registry
# makes Image.open import all of Pillow's forty-odd plugins, a third of a child's start-up.
from PIL import WebPImagePlugin as _webp  # noqa: F401

MAX_LOGO_BYTES = 128 * 1024
MAX_LOGO_SIDE = 2048
MAX_LOGO_PIXELS = MAX_LOGO_SIDE * MAX_LOGO_SIDE  # 4,194,304: what the side limit allows
# libjpeg writes 6 (grey) or 10 (colour) scans in a progressive JPEG, other encoders a few
# dozen at most; each scan is one more pass over the whole image.
MAX_JPEG_SCANS = 100
# Stored (and served) at most this many pixels a side: the page shows it 48 px high.
STORED_SIDE = 256
ACCEPTED_FORMATS = ("PNG", "JPEG", "WEBP")

# Why a logo was refused (``details.reason`` of the API's error).
REASONS = (
    "not_base64",  # the API's field is not base64 (brand.service)
    "too_large",  # over MAX_LOGO_BYTES
    "empty",
    "unsupported_format",  # not a PNG, JPEG or WebP file
    "undecodable",  # damaged, or not what its magic bytes say
    "too_many_pixels",  # over MAX_LOGO_SIDE pixels a side
    "too_many_scans",  # a JPEG of over MAX_JPEG_SCANS scans
    "decode_time",  # decoding ran past its CPU or wall-time limit
    "decode_memory",  # decoding needed more memory than its limit
)
NOT_AN_IMAGE = "must be a PNG, JPEG or WebP image"
UNDECODABLE = "could not be decoded as a PNG, JPEG or WebP image"
TOO_MANY_PIXELS = f"must be at most {MAX_LOGO_SIDE} pixels a side"

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
JPEG_MAGIC = b"\xff\xd8\xff"
JPEG_SOS = b"\xff\xda"  # start of scan


class LogoProblem(ValueError):
    """Why bytes are not an acceptable logo: ``str()`` for people, ``reason`` for programs."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        assert reason in REASONS, reason
        self.reason = reason


def is_webp(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def screen_logo(data: bytes) -> None:
    """Refuse, from the bytes alone (no decoding, linear time), what is never a logo."""
    if len(data) > MAX_LOGO_BYTES:
        raise LogoProblem(f"must be at most {MAX_LOGO_BYTES // 1024} KiB", "too_large")
    if not data:
        raise LogoProblem("is empty", "empty")
    if not (data.startswith((PNG_MAGIC, JPEG_MAGIC)) or is_webp(data)):
        raise LogoProblem(NOT_AN_IMAGE, "unsupported_format")
    # Every FF DA pair counts, also inside metadata: never fewer than the file's real scans
    # (in entropy-coded data an FF is always followed by 00 or a restart marker).
    if data.startswith(JPEG_MAGIC) and data.count(JPEG_SOS) > MAX_JPEG_SCANS:
        raise LogoProblem(f"must have at most {MAX_JPEG_SCANS} JPEG scans", "too_many_scans")


def reencode_logo(data: bytes) -> bytes:
    """The logo as a new PNG (at most ``STORED_SIDE`` a side); LogoProblem when refused.

    CPU-heavy on hostile input: the service calls it in a child process (``logo_process``)
    after ``screen_logo``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as image:
                _check_size(*image.size)
                image.seek(0)  # an animated image: its first frame
                image.load()
                picture = ImageOps.exif_transpose(image)
    except LogoProblem:
        raise
    except UnidentifiedImageError:
        raise LogoProblem(NOT_AN_IMAGE, "unsupported_format") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise LogoProblem(TOO_MANY_PIXELS, "too_many_pixels") from None
    except (OSError, ValueError, SyntaxError, EOFError, TypeError, IndexError, KeyError):
        raise LogoProblem(UNDECODABLE, "undecodable") from None
    has_alpha = picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info
    picture = picture.convert("RGBA" if has_alpha else "RGB")
    picture.thumbnail((STORED_SIDE, STORED_SIDE))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _check_size(width: int, height: int) -> None:
    if max(width, height) > MAX_LOGO_SIDE or min(width, height) < 1:
        raise LogoProblem(TOO_MANY_PIXELS, "too_many_pixels")
