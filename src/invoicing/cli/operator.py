"""The operator's commands on the service's database: ``withdraw --now``, ``parked``,
``api-keys create``, ``escrows export`` and ``dashboard-link``.

Each reads the service's settings from the environment, or first from ``--env-file``: the
file ``invoicing dev`` writes (its ready line's ``env_file``) points them at a running dev
service.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

import typer

from invoicing.addresses import normalize_address
from invoicing.auth.api_keys import create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.auth.sign_in import issue_link, login_url
from invoicing.cli.common import EnvFileOption, load_settings, verify_chains_or_refuse
from invoicing.clock import SystemClock
from invoicing.db import Database
from invoicing.errors import ServiceError
from invoicing.invoices.export import export_escrows
from invoicing.services import build_services
from invoicing.settlement.parking import parked_escrows, parked_to_dict
from invoicing.settlement.worker import withdraw_now

OwnerOption = Annotated[str, typer.Option(help="owner wallet address")]


def withdraw(
    now: Annotated[bool, typer.Option("--now", help="sweep everything due now")] = False,
    chain_id: Annotated[int | None, typer.Option(help="only this chain")] = None,
    owner: Annotated[str | None, typer.Option(help="only this owner wallet")] = None,
    timeout_s: Annotated[float, typer.Option(help="wait this long for confirmations")] = 300.0,
    env_file: EnvFileOption = None,
) -> None:
    """Sweep paid escrows to their owners now (the worker does it on a schedule)."""
    if not now:
        raise typer.BadParameter("pass --now to sweep immediately", param_hint="--now")
    owner_key = _owner_key(owner) if owner else None

    async def main() -> bool:
        settings = load_settings(env_file)
        await verify_chains_or_refuse(settings)
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


def parked(
    chain_id: Annotated[int | None, typer.Option(help="only this chain")] = None,
    env_file: EnvFileOption = None,
) -> None:
    """List the escrows withdrawals have parked (reason, next try), one JSON object a line."""
    settings = load_settings(env_file)

    async def main() -> list[dict[str, object]]:
        db = Database(settings.database_url)
        try:
            return [parked_to_dict(row) for row in await parked_escrows(db, chain_id)]
        finally:
            await db.dispose()

    for entry in asyncio.run(main()):
        typer.echo(json.dumps(entry))


def api_keys_create(
    owner: OwnerOption,
    label: Annotated[str | None, typer.Option()] = None,
    env_file: EnvFileOption = None,
) -> None:
    """Issue an API key for an owner; prints it once as JSON."""
    try:
        owner_address = normalize_address(owner)
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None
    settings = load_settings(env_file)

    async def main() -> dict[str, object]:
        db = Database(settings.database_url)
        try:
            async with db.transaction() as session:
                row, api_key = await create_api_key(
                    session,
                    owner_address,
                    label,
                    ServerSecrets.of(settings),
                    SystemClock().now_ms(),
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


def escrows_export(
    owner: OwnerOption,
    chain_id: Annotated[int, typer.Option(help="chain id")],
    env_file: EnvFileOption = None,
) -> None:
    """Print every escrow the owner ever had on the chain with its salt, one JSON object a
    line, oldest first (the input of `invoicing recover`)."""
    owner_key = _owner_key(owner)
    settings = load_settings(env_file)
    config = settings.chain_configs().get(chain_id)
    if config is None:
        typer.echo(f"chain {chain_id} is not configured here: the lines name no factory", err=True)

    async def main() -> None:
        db = Database(settings.database_url)
        factories = () if config is None else config.factories
        try:
            async for line in export_escrows(db, owner_key, chain_id, factories):
                sys.stdout.write(line)
        finally:
            await db.dispose()

    asyncio.run(main())


def dashboard_link(owner: OwnerOption, env_file: EnvFileOption = None) -> None:
    """Print a single-use dashboard login link for an owner; it expires after
    INVOICING_DASHBOARD_LINK_TTL_S (10 minutes by default)."""
    try:
        owner_address = normalize_address(owner)
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None
    settings = load_settings(env_file)

    async def main() -> str:
        db = Database(settings.database_url)
        try:
            token = await issue_link(
                db, owner_address, SystemClock().now_ms(), settings.dashboard_link_ttl_s * 1000
            )
        finally:
            await db.dispose()
        return login_url(settings.base_url, token)

    typer.echo(asyncio.run(main()))


def _owner_key(owner: str) -> str:
    """``--owner`` as the lower-case key rows are stored under; a bad address exits 2."""
    try:
        return normalize_address(owner).lower()
    except ValueError as exc:
        raise typer.BadParameter(f"--owner {exc}") from None
