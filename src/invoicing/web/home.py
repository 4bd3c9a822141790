"""``GET /``: what answers at this address and where its parts are, for whoever opens it (a
browser after ``invoicing dev``, a load balancer's probe, an integrator finding their way).

The service serves no API reference page: no Swagger UI or ReDoc, in any environment. Both
load their scripts from a CDN, so offline they break, and in production they would be one
more page on the internet. The reference is ``/openapi.json`` here, and rendered in the docs
site (docs/reference/api.md), built offline from the same document.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from invoicing import __version__
from invoicing.web.routedocs import Answer

router = APIRouter(tags=["service"])


class ServiceIndex(BaseModel):
    """What answers at ``/`` and where its parts are (paths on this service)."""

    model_config = ConfigDict(extra="forbid")

    service: str
    version: str
    openapi: str
    health: str
    readiness: str
    paymentPage: str


INDEX = ServiceIndex(
    service="invoicing",
    version=__version__,
    openapi="/openapi.json",
    health="/healthz",
    readiness="/readyz",
    paymentPage="/pay/{paymentAddress}",
)


# Not in openapi.json: a pointer for people, not part of the integration contract (the SDKs
# cover every documented route, and there is nothing here for them to call).
@router.get("/", include_in_schema=False, response_model=None)
async def index() -> Answer[ServiceIndex]:
    return Answer(INDEX)
