"""The FastAPI application: every surface's routers, error handling and (optionally)
in-process workers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from invoicing import __version__
from invoicing.payments.eip3009 import routes as eip3009_routes
from invoicing.payments.subscriptions import page_routes as subscription_pages
from invoicing.payments.subscriptions import routes as subscription_routes
from invoicing.payments.x402 import facilitator_routes as x402_facilitator_routes
from invoicing.payments.x402 import page_routes as x402_page_routes
from invoicing.services import Services
from invoicing.web import health, home
from invoicing.web.api import (
    api_keys,
    brand,
    capture,
    escrows,
    events,
    fees,
    gasless,
    invoices,
    mail,
    members,
    refunds,
    reports,
    webhook_signing,
    webhooks,
)
from invoicing.web.cors import CorsByPath, cors_rules, route_methods
from invoicing.web.dashboard import session as dashboard_session
from invoicing.web.dashboard.routes import ROUTERS as DASHBOARD_ROUTERS
from invoicing.web.errors import install_error_handlers
from invoicing.web.observability import Observability
from invoicing.web.page import brand as page_brand
from invoicing.web.page import claim as page_claim
from invoicing.web.page import routes as page
from invoicing.web.routedocs import API_DESCRIPTION, install_openapi
from invoicing.workers import run_workers

# Every router the app serves, in the order they are matched.
ROUTERS = (
    home.router,
    health.router,
    invoices.router,
    api_keys.router,
    webhooks.router,
    page_brand.router,
    page.router,
    page_claim.router,
    eip3009_routes.router,
    x402_page_routes.router,
    subscription_routes.router,
    subscription_routes.payer_router,
    subscription_pages.router,
    fees.router,
    gasless.router,
    x402_facilitator_routes.router,
    refunds.router,
    capture.router,
    escrows.router,
    webhook_signing.router,
    brand.router,
    mail.router,
    reports.router,
    members.router,
    events.router,
    *DASHBOARD_ROUTERS,
)


def create_app(services: Services, run_workers_in_process: bool | None = None) -> FastAPI:
    """Build the app around ready services; workers run in-process unless told not to."""
    in_process = (
        services.settings.run_workers if run_workers_in_process is None else run_workers_in_process
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task = asyncio.create_task(run_workers(services, stop)) if in_process else None
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=15)

    app = FastAPI(
        title="Invoicing service",
        version=__version__,
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # no Swagger UI or ReDoc: see web/home.py
        redoc_url=None,
    )
    app.state.services = services
    install_error_handlers(app)
    dashboard_session.install(app)
    install_openapi(app)
    for router in ROUTERS:
        app.include_router(router)
    settings = services.settings
    rules = cors_rules(
        settings.cors_allow_origins,
        settings.cors_integration_allow_origins,
        route_methods((route for router in ROUTERS for route in router.routes), "/integration/"),
    )
    if rules:
        app.add_middleware(CorsByPath, rules=rules)
    app.add_middleware(Observability)
    return app


def create_health_app(services: Services) -> FastAPI:
    """Only ``/healthz``, ``/readyz`` and ``/metrics``: what ``invoicing worker
    --metrics-port`` serves, so that worker processes are scraped and probed like the API."""
    app = FastAPI(
        title="Invoicing worker",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    install_error_handlers(app)
    app.add_middleware(Observability)
    app.include_router(health.router)
    return app
