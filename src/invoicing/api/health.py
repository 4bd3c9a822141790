"""Liveness, readiness (database and every chain) and Prometheus metrics."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from invoicing.api.errors import error_response
from invoicing.chain.checks import cheap_problem
from invoicing.chain.rpc import RpcError
from invoicing.errors import ServiceError, Unauthorized
from invoicing.services import services_of

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database and every configured chain answer")
async def readyz(request: Request) -> JSONResponse:
    services = services_of(request)
    checks: dict[str, str] = {}
    try:
        async with services.db.sessions() as session:
            await session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - readiness reports, never raises
        checks["database"] = f"error: {type(exc).__name__}"
    for chain in services.chains.all():
        try:
            problem = await cheap_problem(chain)  # wrong chain id, no factory code
            checks[f"chain:{chain.config.chain_id}"] = f"error: {problem}" if problem else "ok"
        except ServiceError as exc:
            checks[f"chain:{chain.config.chain_id}"] = f"error: {exc.code}"
        except RpcError as exc:
            checks[f"chain:{chain.config.chain_id}"] = f"error: rpc_error {exc.code}"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


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
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether ``authorization`` is ``Bearer <token>``, compared in constant time."""
    scheme, _, presented = authorization.partition(" ")
    matches = hmac.compare_digest(presented.strip().encode(), token.encode())
    return scheme.lower() == "bearer" and matches
