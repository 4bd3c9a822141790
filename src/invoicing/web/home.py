"""``GET /``: what answers at this address and where its parts are, for whoever opens it (a
browser after ``invoicing dev``, a load balancer's probe, an integrator finding their way).

The service serves no API reference page: no Swagger UI or ReDoc, in any environment. Both
load their scripts from a CDN, so offline they break, and in production they would be one
more page on the internet. The reference is ``/openapi.json`` here, and rendered in the docs
site (docs/reference/api.md), built offline from the same document.
"""

from __future__ import annotations

from fastapi import APIRouter

from invoicing import __version__
from invoicing.web.api.responses import ServiceIndex
from invoicing.web.routedocs import PUBLIC, Answer, documented

router = APIRouter(tags=["service"])

INDEX = ServiceIndex(
    service="invoicing",
    version=__version__,
    openapi="/openapi.json",
    health="/healthz",
    readiness="/readyz",
    paymentPage="/pay/{paymentAddress}",
)


@router.get(
    "/", **documented("What this service is and where its parts are", ok=ServiceIndex, auth=PUBLIC)
)
async def index() -> Answer[ServiceIndex]:
    return Answer(INDEX)
