"""A changed INVOICING_SECRET, with the processes started for real: `invoicing serve` and
`invoicing worker` refuse to start in one line while stored API keys or webhook secrets do
not decrypt; with the old one as INVOICING_PREVIOUS_SECRET they start, and `invoicing migrate`
seals everything again under the new one, after which the old one is no longer needed."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from invoicing.auth.api_keys import API_KEY, create_api_key
from invoicing.auth.models import ApiKey
from invoicing.auth.secrets import ServerSecrets
from invoicing.db import Database
from invoicing.notifications.models import WebhookSecret
from invoicing.notifications.signing import WEBHOOK_SECRET, create_secret
from tests.support.processes import INVOICING, running
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

OLD = SecretStr("rotation-test-old-secret-" + "o" * 20)
NEW = SecretStr("rotation-test-new-secret-" + "n" * 20)
REFUSAL = (
    "refusing to start: 1 API key(s) and 1 webhook secret(s) stored in the database do not "
    "decrypt under INVOICING_SECRET (nor INVOICING_PREVIOUS_SECRET): it changed. Set the "
    "secret they were sealed under back, or as INVOICING_PREVIOUS_SECRET and run `invoicing "
    "migrate` (docs/operations/configuration.md#rotating-invoicing_secret)\n"
)


def env_of(
    database_url: str, secret: SecretStr, previous: SecretStr | None = None
) -> dict[str, str]:
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "production",
        "INVOICING_SECRET": secret.get_secret_value(),
    }
    env.pop("INVOICING_PREVIOUS_SECRET", None)
    if previous is not None:
        env["INVOICING_PREVIOUS_SECRET"] = previous.get_secret_value()
    return env


async def invoicing(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``invoicing <args>`` to its end (a refusal ends it; a start would time out)."""
    return await asyncio.to_thread(
        subprocess.run,
        [INVOICING, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


async def store_under(database_url: str, server: ServerSecrets) -> tuple[SecretStr, SecretStr]:
    """An API key and a webhook secret of a new owner, sealed under ``server``."""
    db = Database(database_url)
    owner = new_owner().address
    try:
        async with db.transaction() as session:
            _key_row, api_key = await create_api_key(session, owner, "shop", server, 1)
            _secret_row, signing = await create_secret(session, owner, server, 2)
    finally:
        await db.dispose()
    return api_key, signing


async def stored_tokens(database_url: str) -> tuple[str, str]:
    db = Database(database_url)
    try:
        async with db.sessions() as session:
            (api_key,) = await session.scalars(select(ApiKey.key_encrypted))
            (signing,) = await session.scalars(select(WebhookSecret.secret_encrypted))
    finally:
        await db.dispose()
    return api_key, signing


async def test_a_new_secret_refuses_every_process_that_uses_stored_secrets(
    own_database: str,
) -> None:
    await store_under(own_database, ServerSecrets(OLD))
    changed = env_of(own_database, NEW)

    serve = await invoicing(changed, "serve", "--port", "1")
    worker = await invoicing(changed, "worker")

    for refused in (serve, worker):
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.endswith(REFUSAL), refused.stderr
        assert refused.stderr.count("refusing to start") == 1
        assert "Traceback" not in refused.stderr
        for secret in (OLD, NEW):
            assert secret.get_secret_value() not in refused.stdout + refused.stderr


async def test_a_rotation_keeps_the_old_secret_until_migrate_has_resealed_everything(
    own_database: str, tmp_path: Path
) -> None:
    api_key, signing = await store_under(own_database, ServerSecrets(OLD))
    rotating = env_of(own_database, NEW, previous=OLD)

    # Both secrets configured: the API starts (it answers /healthz).
    async with running([["serve", "--port"]], rotating, tmp_path) as bases:
        assert len(bases) == 1
    migrated = await invoicing(rotating, "migrate")
    again = await invoicing(rotating, "migrate")

    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.splitlines()[1:] == [
        "re-encrypted 1 API key(s) under INVOICING_SECRET",
        "re-encrypted 1 webhook secret(s) under INVOICING_SECRET",
        "every stored secret is under INVOICING_SECRET: unset INVOICING_PREVIOUS_SECRET",
    ]
    assert again.stdout.splitlines()[1:] == [
        "every stored secret is under INVOICING_SECRET: unset INVOICING_PREVIOUS_SECRET"
    ]
    key_token, secret_token = await stored_tokens(own_database)
    only_new, only_old = ServerSecrets(NEW), ServerSecrets(OLD)
    assert API_KEY.unseal(key_token, only_new) == api_key
    assert WEBHOOK_SECRET.unseal(secret_token, only_new) == signing
    assert API_KEY.unseal(key_token, only_old) is None
    assert WEBHOOK_SECRET.unseal(secret_token, only_old) is None
    # The old secret dropped: the API starts on the new one alone.
    async with running([["serve", "--port"]], env_of(own_database, NEW), tmp_path) as bases:
        assert len(bases) == 1
