"""Liveness, readiness (database and every chain) and Prometheus metrics."""

from __future__ import annotations

import hmac
import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from invoicing.chain.answers import RpcError
from invoicing.chain.checks import cheap_problem
from invoicing.errors import ServiceError, Unauthorized
from invoicing.gauges import refresh_database_gauges
from invoicing.settlement.relayer import relayer_shortfall
from invoicing.web.api.responses import Health, Readiness
from invoicing.web.context import services_of
from invoicing.web.errors import error_response
from invoicing.web.routedocs import PUBLIC, Answer, documented

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])
HEALTHY = Health(status="ok")


@router.get(
    "/healthz", **documented("The process is up", ok=Health, auth=PUBLIC, sdk="public.health")
)
async def healthz() -> Answer[Health]:
    return Answer(HEALTHY)


@router.get(
    "/readyz",
    **documented(
        "The database and every configured chain answer",
        sdk="public.ready",
        ok=Readiness,
        auth=PUBLIC,
        other_responses={
            503: {"model": Readiness, "description": "A check failed (ready is false)"}
        },
    ),
)
async def readyz(request: Request) -> Answer[Readiness]:
    # 503 when a check fails; a chain whose relayer is short of funds is "degraded" (still
    # 200, with the reason under "degraded").
    services = services_of(request)
    checks: dict[str, str] = {}
    degraded: dict[str, str] = {}
    try:
        async with services.db.sessions() as session:
            await session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - readiness reports, never raises
        checks["database"] = f"error: {type(exc).__name__}"
    for chain in services.chains.all():
        key = f"chain:{chain.config.chain_id}"
        try:
            problem = await cheap_problem(chain)  # wrong chain id, no factory code
            shortfall = None if problem else await relayer_shortfall(services, chain)
        except ServiceError as exc:
            checks[key] = f"error: {exc.code}"
            continue
        except RpcError as exc:
            checks[key] = f"error: rpc_error {exc.code}"
            continue
        if problem:
            checks[key] = f"error: {problem}"
        elif shortfall is not None:
            checks[key], degraded[key] = "degraded", shortfall
        else:
            checks[key] = "ok"
    ready = all(value in ("ok", "degraded") for value in checks.values())
    body = Readiness(ready=ready, checks=checks, **({"degraded": degraded} if degraded else {}))
    return Answer(body, status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    token = services_of(request).settings.metrics_token
    if token is not None and not bearer_matches(
        request.headers.get("authorization", ""), token.get_secret_value()
    ):
        refused = Unauthorized("/metrics needs Authorization: Bearer <INVOICING_METRICS_TOKEN>")
        response = error_response(refused.status, refused.code, refused.message)
        response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    services = services_of(request)
    try:
        await refresh_database_gauges(services)
    except (SQLAlchemyError, OSError) as exc:
        # The process's own figures still answer; the shared-state gauges keep their last
        # reading (the database's outage shows in the logs and in /readyz).
        log.warning("metrics: database gauges not read (%s)", type(exc).__name__)
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether ``authorization`` is ``Bearer <token>``, compared in constant time."""
    scheme, _, presented = authorization.partition(" ")
    matches = hmac.compare_digest(presented.strip().encode(), token.encode())
    return scheme.lower() == "bearer" and matches
