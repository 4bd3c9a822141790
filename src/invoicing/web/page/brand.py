"""The brand's public files for the payment page: the logo the service re-encoded, and a
stylesheet of the accent colours. Both are served by the service (the page's CSP allows
only its own origin, and no inline style), are named by what they hold, and never change:
a new logo or colour is a new URL.

- ``GET /pay/brand/<sha256>.png``: a stored logo, by its sha256.
- ``GET /pay/brand/theme-<accent>-<text>.css``: ``--accent`` and ``--accent-text`` (each
  six hex digits, as the brand stored them).
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from invoicing.brand.service import logo_png
from invoicing.errors import NotFound
from invoicing.web.context import services_of
from invoicing.web.page.routes import limit_client

router = APIRouter(prefix="/pay/brand", dependencies=[Depends(limit_client)])

_SHA256 = re.compile(r"[0-9a-f]{64}")
_THEME = re.compile(r"theme-([0-9a-f]{6})-([0-9a-f]{6})")
IMMUTABLE = "public, max-age=31536000, immutable"


@router.get("/{name}.png", include_in_schema=False)
async def logo(request: Request, name: str) -> Response:
    if not _SHA256.fullmatch(name):
        raise NotFound("no such logo")
    png = await logo_png(services_of(request).db, name)
    if png is None:
        raise NotFound("no such logo")
    return Response(
        png,
        media_type="image/png",
        headers={"Cache-Control": IMMUTABLE, "X-Content-Type-Options": "nosniff"},
    )


@router.get("/{name}.css", include_in_schema=False)
async def theme(name: str) -> Response:
    match = _THEME.fullmatch(name)
    if match is None:
        raise NotFound("no such theme")
    accent, text = match.groups()
    css = f":root {{ --accent: #{accent}; --accent-text: #{text}; }}\n"
    return Response(
        css,
        media_type="text/css; charset=utf-8",
        headers={"Cache-Control": IMMUTABLE, "X-Content-Type-Options": "nosniff"},
    )
