"""One place that turns every failure into ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from invoicing.db import is_connection_loss
from invoicing.errors import DatabaseUnavailable, RateLimited, ServiceError

log = logging.getLogger(__name__)

HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
}


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status)


def _validation_details(exc: RequestValidationError) -> dict[str, Any]:
    problems = []
    for err in exc.errors():
        location = ".".join(str(part) for part in err.get("loc", ()) if part != "body")
        problems.append({"field": location, "problem": str(err.get("msg", "invalid"))})
    return {"problems": problems}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_request: Request, exc: ServiceError) -> JSONResponse:
        response = error_response(exc.status, exc.code, exc.message, exc.details)
        if isinstance(exc, RateLimited):
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(
            400, "invalid_request", "the request is malformed", _validation_details(exc)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))

    # Handled here rather than by the catch-all below, which Starlette re-raises into the
    # server's log after answering: a lost database is an outage to retry, not a bug.
    @app.exception_handler(DBAPIError)
    @app.exception_handler(ConnectionError)
    @app.exception_handler(asyncpg.PostgresError)
    @app.exception_handler(asyncpg.InterfaceError)
    async def _database_error(_request: Request, exc: Exception) -> JSONResponse:
        if not is_connection_loss(exc):
            log.exception("unhandled error", exc_info=exc)
            return error_response(500, "internal_error", "internal error")
        # The driver's own error, never SQLAlchemy's text (it carries the statement's parameters).
        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        log.warning("database unavailable: %s: %s", type(cause).__name__, cause)
        unavailable = DatabaseUnavailable("the database is unavailable; retry later")
        return error_response(unavailable.status, unavailable.code, unavailable.message)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return internal_error_response()


def internal_error_response() -> JSONResponse:
    """The answer to a failure nothing else handled (logged by the caller)."""
    return error_response(500, "internal_error", "internal error")
