"""The service's processes: ``serve`` (the HTTP API), ``worker`` (the background workers)
and ``migrate`` (the database schema), each configured by ``INVOICING_*`` variables."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated

import typer
import uvicorn

from invoicing.cli.common import (
    configure_logging,
    load_settings,
    refuse,
    verify_chains_or_refuse,
    verify_secrets_or_refuse,
)
from invoicing.migrate import upgrade_sync
from invoicing.runtime import freeze_startup_objects
from invoicing.services import Services, build_services
from invoicing.web.app import create_app, create_health_app
from invoicing.workers import run_workers


def serve(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8000,
    workers: Annotated[bool, typer.Option(help="also run the workers in this process")] = False,
    access_log: Annotated[bool, typer.Option(help="log every request")] = True,
) -> None:
    """Run the HTTP API (configured by INVOICING_* variables)."""
    configure_logging()
    settings = load_settings()
    asyncio.run(verify_chains_or_refuse(settings))
    asyncio.run(verify_secrets_or_refuse(settings))
    application = create_app(build_services(settings), run_workers_in_process=workers)
    freeze_startup_objects()
    # X-Forwarded-For is read only from INVOICING_TRUSTED_PROXIES (invoicing.ratelimit), not
    # by uvicorn (which trusts 127.0.0.1 by default).
    uvicorn.run(
        application,
        host=host,
        port=port,
        log_level="info",
        log_config=None,  # uvicorn's lines go through invoicing.logs like every other
        access_log=access_log,
        proxy_headers=False,
    )


def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(help="serve /metrics, /healthz and /readyz on this port", min=1, max=65535),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="bind address of --metrics-port")] = "127.0.0.1",
) -> None:
    """Run the background workers (monitor, webhooks, withdrawals, relayer)."""
    configure_logging()

    async def main() -> None:
        settings = load_settings()
        await verify_chains_or_refuse(settings)
        await verify_secrets_or_refuse(settings)
        services = build_services(settings)
        freeze_startup_objects()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        stop_health = None
        if metrics_port is not None:
            stop_health = await _serve_health(services, metrics_host, metrics_port)
        try:
            await run_workers(services, stop)
        finally:
            if stop_health is not None:
                await stop_health()
            await services.aclose()

    asyncio.run(main())


class _HealthServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the worker."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve_health(services: Services, host: str, port: int) -> Callable[[], Awaitable[None]]:
    """Start serving the health app (``/metrics``, ``/healthz``, ``/readyz``) of a worker
    process; its signals stay with the worker (SIGTERM stops the workers, then this).
    Returns what stops it."""
    config = uvicorn.Config(
        create_health_app(services),
        host=host,
        port=port,
        log_level="warning",
        log_config=None,
        access_log=False,
        lifespan="off",
        proxy_headers=False,
    )
    server = _HealthServer(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # it could not bind: the error says why
            refuse(RuntimeError(f"cannot serve metrics on {host}:{port}"))
        await asyncio.sleep(0.02)

    async def stop() -> None:
        server.should_exit = True
        await task

    return stop


def migrate(
    database_url: Annotated[str | None, typer.Option(help="else INVOICING_DATABASE_URL")] = None,
) -> None:
    """Bring the database schema up to date (Alembic). Stored secrets are left as they are:
    `invoicing secrets reencrypt` seals them under a new INVOICING_SECRET, once every host
    has it."""
    if database_url is None:
        database_url = load_settings().database_url
    upgrade_sync(database_url)
    typer.echo("database is up to date")
