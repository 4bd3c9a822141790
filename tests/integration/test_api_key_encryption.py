"""API keys stored under the old key derivation stay readable; `invoicing migrate` leaves
them as they are (a host not yet upgraded may still read only those) and `invoicing secrets
reencrypt` re-encrypts them under the HKDF-derived key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr
from sqlalchemy import select

from invoicing.auth.api_keys import API_KEY, create_api_key
from invoicing.auth.secrets import ServerSecrets, hkdf_sha256
from invoicing.db import Database
from invoicing.tables.auth import ApiKey
from tests.support.signing import new_owner

INVOICING = str(Path(sys.executable).parent / "invoicing")
SECRET = "migration-test-secret-" + "m" * 20


def legacy_encrypt(api_key: str) -> str:
    """How API keys were encrypted before: Fernet under sha256(secret)."""
    key = base64.urlsafe_b64encode(hashlib.sha256(SECRET.encode()).digest())
    return Fernet(key).encrypt(api_key.encode()).decode()


def hkdf_fernet() -> Fernet:
    key = hkdf_sha256(SECRET.encode(), None, b"invoicing api-key encryption v1", 32)
    return Fernet(base64.urlsafe_b64encode(key))


async def invoicing(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [INVOICING, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={
            **os.environ,
            "INVOICING_DATABASE_URL": database_url,
            "INVOICING_ENVIRONMENT": "production",
            "INVOICING_SECRET": SECRET,
        },
    )


async def test_reencrypt_moves_keys_of_the_old_derivation_and_migrate_does_not(
    own_database: str,
) -> None:
    db = Database(own_database)
    try:
        async with db.transaction() as session:
            old_row, old_secret = await create_api_key(
                session, new_owner().address, "old", ServerSecrets(SecretStr(SECRET)), 1
            )
            old_key = old_secret.get_secret_value()
            old_row.key_encrypted = legacy_token = legacy_encrypt(old_key)
            new_row, new_secret = await create_api_key(
                session, new_owner().address, "new", ServerSecrets(SecretStr(SECRET)), 2
            )
            new_key = new_secret.get_secret_value()
            new_stored = new_row.key_encrypted
        # Readable before the migration, through the fallback.
        assert (
            API_KEY.unseal(legacy_encrypt(old_key), ServerSecrets(SecretStr(SECRET))) == old_secret
        )

        migrated = await invoicing(own_database, "migrate")
        async with db.sessions() as session:
            after_migrate = await session.scalar(
                select(ApiKey.key_encrypted).where(ApiKey.label == "old")
            )
        result = await invoicing(own_database, "secrets", "reencrypt")

        assert migrated.returncode == 0, migrated.stderr
        assert after_migrate == legacy_token
        assert result.returncode == 0, result.stderr
        assert "re-encrypted 1 API key(s)" in result.stdout
        async with db.sessions() as session:
            stored = {row.label: row.key_encrypted for row in await session.scalars(select(ApiKey))}
    finally:
        await db.dispose()
    assert hkdf_fernet().decrypt(stored["old"].encode()).decode() == old_key
    assert stored["new"] == new_stored  # already under the HKDF key: untouched
    assert hkdf_fernet().decrypt(stored["new"].encode()).decode() == new_key
    with pytest.raises(InvalidToken):  # the old derivation is not the HKDF key
        hkdf_fernet().decrypt(legacy_encrypt(old_key).encode())
    assert SECRET not in result.stdout + result.stderr
