"""A brand's logo: a PNG, JPEG or WebP of at most ``MAX_LOGO_BYTES``, decoded by Pillow and
written again as a fresh PNG, so what the service serves is pixels it made itself (no
metadata, no script, no second format hidden in the file). SVG, GIF and everything else
is refused, and so is an image whose declared size would decode into more than
``MAX_LOGO_SIDE`` pixels a side (a small file can declare a huge image)."""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

MAX_LOGO_BYTES = 128 * 1024
MAX_LOGO_SIDE = 2048
# Stored (and served) at most this many pixels a side: the page shows it 48 px high.
STORED_SIDE = 256
ACCEPTED_FORMATS = ("PNG", "JPEG", "WEBP")


class LogoProblem(ValueError):
    """Why bytes are not an acceptable logo."""


def reencode_logo(data: bytes) -> bytes:
    """The logo as a new PNG (at most ``STORED_SIDE`` a side); LogoProblem when refused."""
    if len(data) > MAX_LOGO_BYTES:
        raise LogoProblem(f"must be at most {MAX_LOGO_BYTES // 1024} KiB")
    if not data:
        raise LogoProblem("is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as image:
                if max(image.size) > MAX_LOGO_SIDE or min(image.size) < 1:
                    raise LogoProblem(f"must be at most {MAX_LOGO_SIDE} pixels a side")
                image.seek(0)  # an animated image: its first frame
                image.load()
                picture = ImageOps.exif_transpose(image)
    except LogoProblem:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise LogoProblem("must be a PNG, JPEG or WebP image") from None
    except (OSError, ValueError, SyntaxError, EOFError, TypeError, IndexError, KeyError):
        raise LogoProblem("could not be decoded as a PNG, JPEG or WebP image") from None
    has_alpha = picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info
    picture = picture.convert("RGBA" if has_alpha else "RGB")
    picture.thumbnail((STORED_SIDE, STORED_SIDE))
    out = io.BytesIO()
    picture.save(out, format="PNG", optimize=True)
    return out.getvalue()
