"""The ``invoicing`` command: dev, deploy, serve, worker, migrate, withdraw, parked, api-keys,
escrows export and recover."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from invoicing.runtime import freeze_startup_objects
from invoicing.settings import Settings

if TYPE_CHECKING:
    from invoicing.services import Services

MAX_DEV_CHAINS = 8
app = typer.Typer(help="Self-hostable crypto invoicing for EVM chains.", no_args_is_help=True)
api_keys_app = typer.Typer(help="Manage API keys as an operator.", no_args_is_help=True)
app.add_typer(api_keys_app, name="api-keys")
escrows_app = typer.Typer(help="Export owners' escrows as an operator.", no_args_is_help=True)
app.add_typer(escrows_app, name="escrows")


def _logging() -> None:
    """Logging as INVOICING_LOG_FORMAT / INVOICING_LOG_LEVEL say (invoicing.logs)."""
    from pydantic import ValidationError

    from invoicing import logs

    try:
        options = logs.LogSettings()
    except ValidationError as exc:
        problems = "; ".join(str(error["msg"]) for error in exc.errors())
        typer.echo(f"invalid configuration: INVOICING_LOG_*: {problems}", err=True)
        raise typer.Exit(2) from None
    logs.configure(options)


def _settings() -> Settings:
    """Settings from the environment; a bad configuration exits with its reason, no traceback."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(str(error["msg"]) for error in exc.errors())
        typer.echo(f"invalid configuration: {problems}", err=True)
        raise typer.Exit(2) from None


async def _verify_chains(settings: Settings) -> None:
    """Refuse to start (exit 1, one line on stderr) when a configured chain is not what the
    configuration says (chain.checks)."""
    from invoicing.chain.checks import ChainCheckFailed, verify_chains

    try:
        await verify_chains(settings.chain_configs().values(), policy=settings.rpc_policy())
    except ChainCheckFailed as exc:
        _refuse(exc)


def _refuse(reason: Exception) -> NoReturn:
    typer.echo(f"refusing to start: {reason}", err=True)
    raise typer.Exit(1) from None


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="API port")] = 8000,
    chain_port: Annotated[int, typer.Option(help="anvil port")] = 8545,
    rpc_url: Annotated[str | None, typer.Option(help="use a running node instead")] = None,
    database_url: Annotated[str | None, typer.Option(help="default: a fresh SQLite file")] = None,
    ready_file: Annotated[Path | None, typer.Option(help="also write the ready line here")] = None,
    host: Annotated[str, typer.Option(help="API bind address")] = "127.0.0.1",
    chains: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_DEV_CHAINS,
            help="how many anvil chains (ids 31337, 31338, …; ports chain-port, chain-port+1, …)",
        ),
    ] = 1,
) -> None:
    """Everything in one process: anvil, contracts, SQLite, the API and all workers."""
    from invoicing.chain.checks import ChainCheckFailed
    from invoicing.chain.deploy import DeploymentFailed
    from invoicing.dev import DevOptions, run_dev

    _logging()
    # SIGTERM unwinds like Ctrl-C, so the anvil node this command started is stopped too
    # (uvicorn re-raises the signal it caught once the server has shut down).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    if rpc_url and chains > 1:
        raise typer.BadParameter("--rpc-url runs one chain", param_hint="--chains")
    options = DevOptions(
        host=host,
        port=port,
        chain_port=chain_port,
        rpc_url=rpc_url,
        database_url=database_url
        or f"sqlite+aiosqlite:///{tempfile.mkdtemp(prefix='invoicing-dev-')}/dev.db",
        ready_file=ready_file,
        chains=chains,
    )
    try:
        asyncio.run(run_dev(options))
    except (ChainCheckFailed, DeploymentFailed) as exc:
        _refuse(exc)


@app.command()
def deploy(
    rpc_url: Annotated[str | None, typer.Option(help="the chain's JSON-RPC URL")] = None,
    deployer_key: Annotated[
        str | None, typer.Option(help="who pays the gas: env:VAR or file:PATH")
    ] = None,
) -> None:
    """Deploy PaymentFactory through the deterministic deployment proxy (the same address on
    every chain); prints {"chainId", "factory", "txHash"} (txHash null if it was there)."""
    import os

    from invoicing.chain.deploy import DeploymentFailed, deploy_factory
    from invoicing.chain.evm import EvmClient
    from invoicing.chain.rpc import RpcError
    from invoicing.errors import ChainUnavailable
    from invoicing.recovery.inputs import BadArgument, load_sender_key

    try:
        if not rpc_url or not rpc_url.startswith(("http://", "https://")):
            raise BadArgument("--rpc-url is required and must be an http(s) URL")
        if not deployer_key:
            raise BadArgument("--deployer-key is required (env:VAR or file:PATH)")
        key = load_sender_key(deployer_key, os.environ, flag="--deployer-key")
    except BadArgument as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    async def main() -> dict[str, object]:
        evm = EvmClient.connect(rpc_url)
        try:
            return (await deploy_factory(evm, key)).as_json()
        finally:
            await evm.aclose()

    try:
        typer.echo(json.dumps(asyncio.run(main())))
    except DeploymentFailed as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except ChainUnavailable:
        typer.echo("error: the RPC node does not answer", err=True)
        raise typer.Exit(1) from None
    except RpcError as exc:
        reason = " ".join(f"{exc.code}: {exc.message}".split())
        typer.echo(f"error: the RPC node refused a request (error {reason})", err=True)
        raise typer.Exit(1) from None


@app.command()
def serve(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8000,
    workers: Annotated[bool, typer.Option(help="also run the workers in this process")] = False,
    access_log: Annotated[bool, typer.Option(help="log every request")] = True,
) -> None:
    """Run the HTTP API (configured by INVOICING_* variables)."""
    import uvicorn

    from invoicing.services import build_services
    from invoicing.web.app import create_app

    _logging()
    settings = _settings()
    asyncio.run(_verify_chains(settings))
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


@app.command()
def worker(
    metrics_port: Annotated[
        int | None,
        typer.Option(help="serve /metrics, /healthz and /readyz on this port", min=1, max=65535),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="bind address of --metrics-port")] = "127.0.0.1",
) -> None:
    """Run the background workers (monitor, webhooks, withdrawals, relayer)."""
    from invoicing.services import build_services
    from invoicing.workers import run_workers

    _logging()

    async def main() -> None:
        settings = _settings()
        await _verify_chains(settings)
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


async def _serve_health(services: Services, host: str, port: int) -> Callable[[], Awaitable[None]]:
    """Start serving the health app (``/metrics``, ``/healthz``, ``/readyz``) of a worker
    process; its signals stay with the worker (SIGTERM stops the workers, then this).
    Returns what stops it."""
    import uvicorn

    from invoicing.web.app import create_health_app

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

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
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # it could not bind: the error says why
            _refuse(RuntimeError(f"cannot serve metrics on {host}:{port}"))
        await asyncio.sleep(0.02)

    async def stop() -> None:
        server.should_exit = True
        await task

    return stop


@app.command()
def migrate(
    database_url: Annotated[str | None, typer.Option(help="else INVOICING_DATABASE_URL")] = None,
) -> None:
    """Bring the database schema up to date (Alembic); re-encrypt API keys stored under the
    old key derivation when INVOICING_SECRET is configured."""
    from pydantic import ValidationError

    from invoicing.migrate import upgrade_sync

    settings: Settings | None
    if database_url is None:
        settings = _settings()
    else:
        try:
            settings = Settings()
        except ValidationError:
            settings = None
    url = database_url or (settings.database_url if settings else "")
    upgrade_sync(url)
    typer.echo("database is up to date")
    if settings is not None:
        moved = asyncio.run(_reencrypt_api_keys(url, settings))
        if moved:
            typer.echo(f"re-encrypted {moved} API key(s) under the HKDF-derived key")


async def _reencrypt_api_keys(database_url: str, settings: Settings) -> int:
    from invoicing.auth.api_keys import reencrypt_legacy_keys
    from invoicing.db import Database

    db = Database(database_url)
    try:
        async with db.transaction() as session:
            return await reencrypt_legacy_keys(session, settings.secret)
    finally:
        await db.dispose()


@app.command()
def withdraw(
    now: Annotated[bool, typer.Option("--now", help="sweep everything due now")] = False,
    chain_id: Annotated[int | None, typer.Option(help="only this chain")] = None,
    owner: Annotated[str | None, typer.Option(help="only this owner wallet")] = None,
    timeout_s: Annotated[float, typer.Option(help="wait this long for confirmations")] = 300.0,
) -> None:
    """Sweep paid escrows to their owners now (the worker does it on a schedule)."""
    from invoicing.addresses import normalize_address
    from invoicing.errors import ServiceError
    from invoicing.services import build_services
    from invoicing.settlement.worker import withdraw_now

    if not now:
        raise typer.BadParameter("pass --now to sweep immediately", param_hint="--now")
    try:
        owner_key = normalize_address(owner).lower() if owner else None
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None

    async def main() -> bool:
        settings = _settings()
        await _verify_chains(settings)
        services = build_services(settings)
        try:
            return await withdraw_now(services, typer.echo, chain_id, owner_key, timeout_s)
        finally:
            await services.aclose()

    try:
        confirmed = asyncio.run(main())
    except ServiceError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(0 if confirmed else 1)


@app.command()
def parked(
    chain_id: Annotated[int | None, typer.Option(help="only this chain")] = None,
) -> None:
    """List the escrows withdrawals have parked (reason, next try), one JSON object a line."""
    from invoicing.db import Database
    from invoicing.settlement.parking import parked_escrows, parked_to_dict

    settings = _settings()

    async def main() -> list[dict[str, object]]:
        db = Database(settings.database_url)
        try:
            return [parked_to_dict(row) for row in await parked_escrows(db, chain_id)]
        finally:
            await db.dispose()

    for entry in asyncio.run(main()):
        typer.echo(json.dumps(entry))


@api_keys_app.command("create")
def api_keys_create(
    owner: Annotated[str, typer.Option(help="owner wallet address")],
    label: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Issue an API key for an owner; prints it once as JSON."""
    from invoicing.addresses import normalize_address
    from invoicing.auth.api_keys import create_api_key
    from invoicing.clock import SystemClock
    from invoicing.db import Database

    try:
        owner_address = normalize_address(owner)
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None
    settings = _settings()

    async def main() -> dict[str, object]:
        db = Database(settings.database_url)
        try:
            async with db.transaction() as session:
                row, api_key = await create_api_key(
                    session, owner_address, label, settings.secret, SystemClock().now_ms()
                )
            return {
                "id": row.id,
                "apiKey": api_key.get_secret_value(),
                "ownerAddress": owner_address,
                "label": label,
                "createdAt": row.created_at,
            }
        finally:
            await db.dispose()

    typer.echo(json.dumps(asyncio.run(main())))


@escrows_app.command("export")
def escrows_export(
    owner: Annotated[str, typer.Option(help="owner wallet address")],
    chain_id: Annotated[int, typer.Option(help="chain id")],
) -> None:
    """Print every escrow the owner ever had on the chain with its salt, one JSON object a
    line, oldest first (the input of `invoicing recover`)."""
    from invoicing.addresses import normalize_address
    from invoicing.db import Database
    from invoicing.invoices.export import export_escrows

    try:
        owner_key = normalize_address(owner).lower()
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None
    settings = _settings()

    async def main() -> None:
        db = Database(settings.database_url)
        try:
            async for line in export_escrows(db, owner_key, chain_id):
                sys.stdout.write(line)
        finally:
            await db.dispose()

    asyncio.run(main())


@app.command()
def recover(
    rpc_url: Annotated[str | None, typer.Option(help="the chain's JSON-RPC URL")] = None,
    factory: Annotated[str | None, typer.Option(help="the PaymentFactory address")] = None,
    owner: Annotated[str | None, typer.Option(help="the owner wallet")] = None,
    export_file: Annotated[
        str | None, typer.Option("--from", help="the escrow export (NDJSON)")
    ] = None,
    sender_key: Annotated[
        str | None, typer.Option(help="who pays the gas: env:VAR or file:PATH")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print, send nothing")] = False,
    batch_size: Annotated[str | None, typer.Option(help="escrows per transaction")] = None,
) -> None:
    """Sweep every escrow of an export to its owner through the factory, without this
    service's database or configuration."""
    import os

    from invoicing.chain.rpc import RpcError
    from invoicing.errors import ChainUnavailable
    from invoicing.recovery.inputs import BadArgument, RecoveryRefused, parse_options
    from invoicing.recovery.sweep import recover as run_recovery
    from invoicing.recovery.sweep import summary_lines

    try:
        options = parse_options(
            rpc_url=rpc_url,
            factory=factory,
            owner=owner,
            export_file=export_file,
            sender_key=sender_key,
            dry_run=dry_run,
            batch_size=batch_size,
            environ=os.environ,
        )
    except BadArgument as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        summary = asyncio.run(run_recovery(options, typer.echo))
    except (RecoveryRefused, ChainUnavailable, RpcError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for line in summary_lines(summary, options.dry_run):
        typer.echo(line)
    raise typer.Exit(1 if summary.problems else 0)
