"""The operator's commands on stored owner secrets (API keys' sealed copies, webhook signing
secrets): ``secrets reencrypt`` seals them all under INVOICING_SECRET once every host does,
``secrets forget-unreadable`` revokes those no configured secret opens
(docs/operations/configuration.md#rotating-invoicing_secret).

``invoicing migrate`` touches neither: it runs on the first host restarted, while the others
may still read only under the old secret.
"""

from __future__ import annotations

import asyncio

import typer

from invoicing.auth.secrets import Forgotten, ServerSecrets, reseal_stored, revoke_unreadable
from invoicing.cli.common import SEALED_COLUMNS, EnvFileOption, load_settings, unreadable_secrets
from invoicing.clock import SystemClock
from invoicing.db import Database
from invoicing.settings import Settings


def reencrypt(env_file: EnvFileOption = None) -> None:
    """Seal every stored API key copy and webhook secret again under INVOICING_SECRET. Run it
    once every host seals under the new secret (step 3 of a rotation); refused while
    INVOICING_NEXT_SECRET is set, which says this host has not switched yet."""
    settings = load_settings(env_file)
    if settings.next_secret is not None:
        typer.echo(
            "refusing to re-encrypt: INVOICING_NEXT_SECRET is set, so INVOICING_SECRET is "
            "still the old secret. Switch every host to the new one first "
            "(docs/operations/configuration.md#rotating-invoicing_secret)",
            err=True,
        )
        raise typer.Exit(1)
    for noun, moved in asyncio.run(_reseal(settings)).items():
        typer.echo(f"re-encrypted {moved} {noun}(s) under INVOICING_SECRET")
    unreadable = asyncio.run(unreadable_secrets(settings.database_url, settings))
    for noun, count in unreadable.items():
        typer.echo(
            f"{count} {noun}(s) decrypt under no configured secret: "
            "`invoicing secrets forget-unreadable` revokes them",
            err=True,
        )
    if settings.previous_secret is not None and not unreadable:
        typer.echo("every stored secret is under INVOICING_SECRET: unset INVOICING_PREVIOUS_SECRET")
    raise typer.Exit(1 if unreadable else 0)


def forget_unreadable(env_file: EnvFileOption = None) -> None:
    """Revoke every active API key and webhook secret whose stored copy decrypts under no
    configured secret (the secret it was sealed under is lost), one line each:
    kind, id, owner. Readable ones are left as they are."""
    settings = load_settings(env_file)
    forgotten = asyncio.run(_revoke_unreadable(settings))
    for secret in forgotten:
        typer.echo(f"revoked {secret.kind.noun} {secret.secret_id} of owner {secret.owner_key}")
    typer.echo(f"revoked {len(forgotten)} secret(s) that no configured secret decrypts")


async def _reseal(settings: Settings) -> dict[str, int]:
    db = Database(settings.database_url)
    try:
        async with db.transaction() as session:
            return {
                sealed.kind.noun: await reseal_stored(session, sealed, ServerSecrets.of(settings))
                for sealed in SEALED_COLUMNS
            }
    finally:
        await db.dispose()


async def _revoke_unreadable(settings: Settings) -> list[Forgotten]:
    db = Database(settings.database_url)
    now_ms = SystemClock().now_ms()
    try:
        async with db.transaction() as session:
            return [
                secret
                for sealed in SEALED_COLUMNS
                for secret in await revoke_unreadable(
                    session, sealed, ServerSecrets.of(settings), now_ms
                )
            ]
    finally:
        await db.dispose()
