"""The dashboard's static files, served by the service itself (no CDN): its CSS and script,
and htmx (npm ``htmx.org``, copied from ``node_modules`` and pinned by
``tests/unit/test_dashboard_assets.py``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from invoicing.errors import NotFound
from invoicing.web.dashboard.render import ASSET_TYPES, asset

router = APIRouter(prefix="/dashboard", include_in_schema=False)
ASSET_MAX_AGE_S = 24 * 3600


@router.get("/assets/{name}")
async def static_asset(name: str) -> Response:
    if name not in ASSET_TYPES:
        raise NotFound("no such asset")
    return Response(
        asset(name),
        media_type=ASSET_TYPES[name],
        headers={
            "Cache-Control": f"public, max-age={ASSET_MAX_AGE_S}",
            "X-Content-Type-Options": "nosniff",
        },
    )
