"""QR codes as small, self-contained SVG documents rendered on the server."""

from __future__ import annotations

from functools import lru_cache
from html import escape

import qrcode
import qrcode.constants

QUIET_ZONE_MODULES = 4


# Encoding takes ~20 ms of pure Python; a page's URI only changes after a payment.
@lru_cache(maxsize=512)
def qr_svg(text: str, title: str = "QR code") -> str:
    """An SVG QR code of ``text``: black modules on a white square, one path per row run,
    scaled by the viewBox so it stays sharp at any size."""
    code = qrcode.QRCode(
        error_correction=qrcode.constants.ERROR_CORRECT_M, border=QUIET_ZONE_MODULES
    )
    code.add_data(text)
    code.make(fit=True)
    matrix: list[list[bool]] = code.get_matrix()
    size = len(matrix)
    runs = []
    for y, row in enumerate(matrix):
        x = 0
        while x < size:
            if not row[x]:
                x += 1
                continue
            start = x
            while x < size and row[x]:
                x += 1
            runs.append(f"M{start} {y}h{x - start}v1h-{x - start}z")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" '
        f'width="{size * 8}" height="{size * 8}" shape-rendering="crispEdges" role="img">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{size}" height="{size}" fill="#fff"/>'
        f'<path fill="#000" d="{"".join(runs)}"/></svg>'
    )
