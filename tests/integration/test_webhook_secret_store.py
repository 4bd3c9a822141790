"""The webhook secret store and owner settings on the database under test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from invoicing.auth.secrets import ServerSecrets
from invoicing.db import Database
from invoicing.errors import NotFound, TooManyWebhookSecrets
from invoicing.notifications.signing import (
    MAX_ACTIVE_SECRETS,
    OwnerChoices,
    WebhookOptions,
    active_secrets,
    create_secret,
    get_settings,
    revoke_secret,
    update_settings,
    webhook_options_by_owner,
)
from invoicing.tables.notifications import WebhookSecret
from tests.support.signing import new_owner

SERVER_SECRET = ServerSecrets(SecretStr("store-test-secret-" + "s" * 20))


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url)
    yield database
    await database.dispose()


async def create(db: Database, owner: str, now_ms: int = 1) -> tuple[str, str]:
    async with db.transaction() as session:
        row, secret = await create_secret(session, owner, SERVER_SECRET, now_ms)
    return row.id, secret.get_secret_value()


def clear(secrets: Sequence[SecretStr]) -> list[str]:
    return [secret.get_secret_value() for secret in secrets]


async def test_secrets_are_stored_encrypted_and_read_back_oldest_first(db: Database) -> None:
    owner = new_owner().address
    first_id, first = await create(db, owner, now_ms=10)
    _second_id, second = await create(db, owner, now_ms=20)

    async with db.sessions() as session:
        stored = await session.scalar(
            select(WebhookSecret.secret_encrypted).where(WebhookSecret.id == first_id)
        )
        found = await active_secrets(session, owner.upper().replace("0X", "0x"), SERVER_SECRET)

    assert first.startswith("whsec_") and len(first) == 6 + 43
    assert stored is not None and first not in stored
    assert clear(found) == [first, second]


async def test_a_revoked_secret_no_longer_signs(db: Database) -> None:
    owner = new_owner().address
    first_id, _first = await create(db, owner, now_ms=10)
    _second_id, second = await create(db, owner, now_ms=20)

    async with db.transaction() as session:
        row = await revoke_secret(session, owner, first_id, 30)
    async with db.sessions() as session:
        found = await active_secrets(session, owner, SERVER_SECRET)

    assert row.revoked_at == 30
    assert clear(found) == [second]


async def test_another_owners_secret_cannot_be_revoked(db: Database) -> None:
    owner, intruder = new_owner().address, new_owner().address
    secret_id, secret = await create(db, owner)

    with pytest.raises(NotFound):
        async with db.transaction() as session:
            await revoke_secret(session, intruder, secret_id, 30)
    async with db.sessions() as session:
        found = await active_secrets(session, owner, SERVER_SECRET)

    assert clear(found) == [secret]


async def test_at_most_five_active_secrets_even_when_created_at_once(db: Database) -> None:
    owner = new_owner().address

    results = await asyncio.gather(
        *(create(db, owner) for _ in range(MAX_ACTIVE_SECRETS + 3)), return_exceptions=True
    )
    async with db.sessions() as session:
        found = await active_secrets(session, owner, SERVER_SECRET)

    refused = [r for r in results if isinstance(r, TooManyWebhookSecrets)]
    assert len(refused) == 3
    assert len(found) == MAX_ACTIVE_SECRETS
    assert refused[0].details == {"maxActive": MAX_ACTIVE_SECRETS}


async def test_settings_default_to_sending_the_api_key(db: Database) -> None:
    owner = new_owner().address
    async with db.sessions() as session:
        before = await get_settings(session, owner)
    async with db.transaction() as session:
        await update_settings(session, owner, False, 5)
    async with db.sessions() as session:
        after = await get_settings(session, owner.lower())

    assert before == OwnerChoices(webhook_api_key_header=True)
    assert after == OwnerChoices(webhook_api_key_header=False)


async def test_options_of_a_batch_of_owners_in_one_read(db: Database) -> None:
    signed, quiet, keyless, unknown = (new_owner().address for _ in range(4))
    _id, secret_a = await create(db, signed, now_ms=1)
    _id, secret_b = await create(db, signed, now_ms=2)
    async with db.transaction() as session:
        await update_settings(session, quiet, True, 3)
        await update_settings(session, keyless, False, 3)
    _id, secret_c = await create(db, keyless, now_ms=4)

    async with db.sessions() as session:
        options = await webhook_options_by_owner(
            session, [signed, quiet, keyless, unknown], SERVER_SECRET
        )

    assert options == {
        signed.lower(): WebhookOptions(
            api_key_header=True, secrets=(SecretStr(secret_a), SecretStr(secret_b))
        ),
        quiet.lower(): WebhookOptions(api_key_header=True, secrets=()),
        keyless.lower(): WebhookOptions(api_key_header=False, secrets=(SecretStr(secret_c),)),
    }
    assert all(secret not in repr(options) for secret in (secret_a, secret_b, secret_c))


async def test_a_secret_under_another_server_secret_is_skipped_and_logged(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    owner = new_owner().address
    _old_id, _unreadable = await create(db, owner, now_ms=1)
    async with db.transaction() as session:
        _row, readable = await create_secret(
            session, owner, ServerSecrets(SecretStr("another-" * 5)), 2
        )

    with caplog.at_level("WARNING", logger="invoicing.notifications.signing"):
        async with db.sessions() as session:
            options = await webhook_options_by_owner(
                session, [owner], ServerSecrets(SecretStr("another-" * 5))
            )

    assert options == {owner.lower(): WebhookOptions(secrets=(readable,))}
    assert f"webhook secret of {owner.lower()} cannot be decrypted" in caplog.text
    assert readable.get_secret_value() not in caplog.text


async def test_a_secret_read_once_stays_unreadable_under_another_server_secret(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    # Opened secrets are kept per process, by the stored token and the server secrets that
    # opened it: the same token read under other server secrets is opened again (and fails).
    owner = new_owner().address
    _id, secret = await create(db, owner)
    another = ServerSecrets(SecretStr("another-" * 5))

    async with db.sessions() as session:
        first = await webhook_options_by_owner(session, [owner], SERVER_SECRET)
    with caplog.at_level("WARNING", logger="invoicing.notifications.signing"):
        async with db.sessions() as session:
            then = await webhook_options_by_owner(session, [owner], another)

    assert first == {owner.lower(): WebhookOptions(secrets=(SecretStr(secret),))}
    assert then == {owner.lower(): WebhookOptions(secrets=())}
    assert f"webhook secret of {owner.lower()} cannot be decrypted" in caplog.text
