"""Image files built to cost their decoder far more than their size suggests."""

from __future__ import annotations

import io
import struct

from PIL import Image

SOS = b"\xff\xda"
EOI = b"\xff\xd9"


def _scans(jpeg: bytes) -> list[tuple[int, int]]:
    """(start, end) of each scan of ``jpeg``: its SOS segment and the entropy-coded data after
    it, up to the next marker (stuffed ``FF 00`` and restart markers belong to the data)."""
    found, at = [], 2
    while jpeg[at : at + 2] != EOI:
        (length,) = struct.unpack(">H", jpeg[at + 2 : at + 4])
        end = at + 2 + length
        if jpeg[at : at + 2] == SOS:
            while jpeg[end] != 0xFF or jpeg[end + 1] == 0 or 0xD0 <= jpeg[end + 1] <= 0xD7:
                end += 1
            found.append((at, end))
        at = end
    return found


def many_scan_jpeg(scans: int, side: int = 2048) -> bytes:
    """A grey progressive JPEG of ``side`` × ``side`` pixels whose last refinement scan is
    repeated until the file has ``scans`` scans. Each copy is 16 bytes (one run of empty blocks
    over the whole image), yet the decoder walks every block of the image once per scan, so
    7,000 of them fit in 128 KiB and take libjpeg many seconds."""
    out = io.BytesIO()
    Image.new("L", (side, side), 128).save(out, format="JPEG", progressive=True, quality=50)
    jpeg = out.getvalue()
    found = _scans(jpeg)
    start, end = found[-1]
    return jpeg[:end] + jpeg[start:end] * (scans - len(found)) + jpeg[end:]
