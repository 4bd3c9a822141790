"""A changed INVOICING_SECRET, with the processes started for real: `invoicing serve` and
`invoicing worker` refuse to start in one line while stored API keys or webhook secrets do
not decrypt. A rotation across hosts restarted one by one: hosts on the old secret with the
new one as INVOICING_NEXT_SECRET and hosts on the new one with the old as
INVOICING_PREVIOUS_SECRET read what the others seal; `invoicing migrate` (run by the first
host restarted) leaves stored secrets as they are, and `invoicing secrets reencrypt` seals
them all under the new one, after which the old one is no longer needed. A lost secret:
`invoicing secrets forget-unreadable` revokes what only it opened, and nothing else."""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from invoicing.auth.api_keys import API_KEY, create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.db import Database
from invoicing.notifications.signing import WEBHOOK_SECRET, create_secret
from invoicing.tables.auth import ApiKey
from invoicing.tables.notifications import WebhookSecret
from tests.support.processes import INVOICING, running
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

OLD = SecretStr("rotation-test-old-secret-" + "o" * 20)
NEW = SecretStr("rotation-test-new-secret-" + "n" * 20)
LOST = SecretStr("rotation-test-lost-secret-" + "l" * 20)
REFUSAL = (
    "refusing to start: 1 API key(s) and 1 webhook secret(s) stored in the database do not "
    "decrypt under INVOICING_SECRET (nor INVOICING_PREVIOUS_SECRET or INVOICING_NEXT_SECRET): "
    "it changed. Set the secret they were sealed under back, or as INVOICING_PREVIOUS_SECRET; "
    "if it is lost, `invoicing secrets forget-unreadable` revokes them "
    "(docs/operations/configuration.md#rotating-invoicing_secret)\n"
)


def env_of(
    database_url: str,
    secret: SecretStr,
    previous: SecretStr | None = None,
    next_secret: SecretStr | None = None,
) -> dict[str, str]:
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "production",
        "INVOICING_SECRET": secret.get_secret_value(),
    }
    for name, value in (
        ("INVOICING_PREVIOUS_SECRET", previous),
        ("INVOICING_NEXT_SECRET", next_secret),
    ):
        env.pop(name, None)
        if value is not None:
            env[name] = value.get_secret_value()
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


@dataclass(frozen=True)
class Stored:
    """A stored API key or webhook secret, as its row holds it."""

    noun: str
    owner_key: str
    token: str
    revoked_at: int | None

    def opens_under(self, server: ServerSecrets) -> SecretStr | None:
        kind = API_KEY if self.noun == "API key" else WEBHOOK_SECRET
        return kind.unseal(self.token, server)


async def stored_rows(database_url: str) -> dict[str, Stored]:
    """Every stored API key and webhook secret, by id."""
    db = Database(database_url)
    try:
        async with db.sessions() as session:
            keys = await session.scalars(select(ApiKey))
            secrets = await session.scalars(select(WebhookSecret))
            return {
                **{
                    row.id: Stored("API key", row.owner_key, row.key_encrypted, row.revoked_at)
                    for row in keys
                },
                **{
                    row.id: Stored(
                        "webhook secret", row.owner_key, row.secret_encrypted, row.revoked_at
                    )
                    for row in secrets
                },
            }
    finally:
        await db.dispose()


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


async def test_a_rolling_rotation_keeps_every_secret_readable_on_every_host(
    own_database: str, tmp_path: Path
) -> None:
    api_key, signing = await store_under(own_database, ServerSecrets(OLD))
    # Step 1 on every host: the new secret only opens. Step 2, host by host: it seals.
    stepped_in = env_of(own_database, OLD, next_secret=NEW)
    switched = env_of(own_database, NEW, previous=OLD)
    stored_before = await stored_rows(own_database)

    # The first host switched restarts its units: migrate, then serve.
    migrated = await invoicing(switched, "migrate")
    async with running([["serve", "--port"]], switched, tmp_path) as bases:
        assert len(bases) == 1
    # A secret issued on the switched host; hosts not yet switched read it, and the old ones.
    new_key, new_signing = await store_under(own_database, ServerSecrets(NEW, previous=OLD))
    not_yet = ServerSecrets(OLD, next=NEW)

    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout == "database is up to date\n"
    stored_switched = await stored_rows(own_database)
    assert {id_: stored_switched[id_] for id_ in stored_before} == stored_before
    assert {row.opens_under(not_yet) for row in stored_switched.values()} == {
        api_key,
        signing,
        new_key,
        new_signing,
    }

    # Step 3 run from a host not yet switched is refused: it would seal under the old one.
    early = await invoicing(stepped_in, "secrets", "reencrypt")
    assert early.returncode == 1
    assert early.stderr.startswith("refusing to re-encrypt: INVOICING_NEXT_SECRET is set")
    assert await stored_rows(own_database) == stored_switched

    # Every host switched: step 3 seals everything under the new secret.
    reencrypted = await invoicing(switched, "secrets", "reencrypt")
    again = await invoicing(switched, "secrets", "reencrypt")

    assert reencrypted.returncode == 0, reencrypted.stderr
    assert reencrypted.stdout.splitlines() == [
        "re-encrypted 1 API key(s) under INVOICING_SECRET",
        "re-encrypted 1 webhook secret(s) under INVOICING_SECRET",
        "every stored secret is under INVOICING_SECRET: unset INVOICING_PREVIOUS_SECRET",
    ]
    assert again.stdout.splitlines() == [
        "re-encrypted 0 API key(s) under INVOICING_SECRET",
        "re-encrypted 0 webhook secret(s) under INVOICING_SECRET",
        "every stored secret is under INVOICING_SECRET: unset INVOICING_PREVIOUS_SECRET",
    ]
    rows = (await stored_rows(own_database)).values()
    assert {row.opens_under(ServerSecrets(NEW)) for row in rows} == {
        api_key,
        signing,
        new_key,
        new_signing,
    }
    assert {row.opens_under(ServerSecrets(OLD)) for row in rows} == {None}
    for out in (migrated, early, reencrypted, again):
        for secret in (OLD, NEW):
            assert secret.get_secret_value() not in out.stdout + out.stderr
    # The old secret dropped: the API starts on the new one alone.
    async with running([["serve", "--port"]], env_of(own_database, NEW), tmp_path) as bases:
        assert len(bases) == 1


async def test_forget_unreadable_revokes_only_what_no_configured_secret_opens(
    own_database: str, tmp_path: Path
) -> None:
    await store_under(own_database, ServerSecrets(LOST))
    await store_under(own_database, ServerSecrets(OLD))
    before = await stored_rows(own_database)
    lost = {id_: row for id_, row in before.items() if row.opens_under(ServerSecrets(OLD)) is None}
    env = env_of(own_database, OLD)
    refused = await invoicing(env, "worker")

    forgot = await invoicing(env, "secrets", "forget-unreadable")
    again = await invoicing(env, "secrets", "forget-unreadable")

    assert refused.returncode == 1 and refused.stderr.endswith(REFUSAL), refused.stderr
    assert len(lost) == 2
    assert forgot.returncode == 0, forgot.stderr
    assert sorted(forgot.stdout.splitlines()) == sorted(
        [
            *(f"revoked {row.noun} {id_} of owner {row.owner_key}" for id_, row in lost.items()),
            "revoked 2 secret(s) that no configured secret decrypts",
        ]
    )
    assert again.stdout == "revoked 0 secret(s) that no configured secret decrypts\n"
    after = await stored_rows(own_database)
    assert {id_: row.revoked_at is not None for id_, row in after.items()} == {
        id_: id_ in lost for id_ in before
    }
    assert {id_: after[id_] for id_ in before if id_ not in lost} == {
        id_: row for id_, row in before.items() if id_ not in lost
    }
    # Nothing left that no configured secret opens: the API starts.
    async with running([["serve", "--port"]], env, tmp_path) as bases:
        assert len(bases) == 1
