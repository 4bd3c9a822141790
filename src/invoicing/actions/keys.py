"""Owner actions on keys, secrets and deliveries that the API and the dashboard both offer,
written once: each is the domain call with what the route adds around it (an issuance limit,
a cache to drop), so the two surfaces cannot drift apart. The routes only authenticate and
shape the answer."""

from __future__ import annotations

from pydantic import SecretStr

from invoicing.auth.api_keys import active_key_cache, create_api_key, revoke_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.notifications.service import Queued, ping, redeliver
from invoicing.notifications.signing import create_secret, revoke_secret
from invoicing.ratelimit import HOUR_MS, hit
from invoicing.services import Services
from invoicing.tables.auth import ApiKey
from invoicing.tables.notifications import WebhookSecret


async def issue_api_key(
    services: Services, owner_address: str, label: str | None
) -> tuple[ApiKey, SecretStr]:
    """A new API key (shown once), within the owner's hourly issuance limit."""
    now_ms = services.clock.now_ms()
    await hit(
        services.db,
        [f"apikey-owner:{owner_address.lower()}"],
        services.settings.api_key_issuance_per_hour,
        now_ms,
        window_ms=HOUR_MS,
    )
    async with services.db.transaction() as session:
        return await create_api_key(
            session, owner_address, label, ServerSecrets.of(services.settings), now_ms
        )


async def end_api_key(services: Services, owner_key: str, key_id: str) -> ApiKey:
    """Revoke one of the owner's keys (404 if not theirs); this process stops accepting it at
    once, other processes within the key cache's second."""
    cache = active_key_cache(services.db)
    async with services.db.transaction() as session:
        row = await revoke_api_key(session, owner_key, key_id, services.clock.now_ms())
        cache.forget(row.key_hash)
    # Again once committed: a lookup that read the row before the commit stores nothing.
    cache.forget(row.key_hash)
    return row


async def issue_webhook_secret(
    services: Services, owner_key: str
) -> tuple[WebhookSecret, SecretStr]:
    """A new webhook signing secret (shown once), within the hourly issuance limit."""
    now_ms = services.clock.now_ms()
    await hit(
        services.db,
        [f"webhook-secret-owner:{owner_key}"],
        services.settings.webhook_secret_issuance_per_hour,
        now_ms,
        window_ms=HOUR_MS,
    )
    async with services.db.transaction() as session:
        return await create_secret(session, owner_key, ServerSecrets.of(services.settings), now_ms)


async def end_webhook_secret(services: Services, owner_key: str, secret_id: str) -> WebhookSecret:
    """Stop signing with one of the owner's secrets (404 if not theirs)."""
    async with services.db.transaction() as session:
        return await revoke_secret(session, owner_key, secret_id, services.clock.now_ms())


async def _count_hourly(services: Services, action: str, owner_key: str, per_hour: int) -> None:
    """Count one of the owner's ``action`` this hour; 429 ``rate_limited`` past ``per_hour``
    (counted before anything is read or queued, so a refused one queues nothing)."""
    keys = [f"{action}-owner:{owner_key}"]
    await hit(services.db, keys, per_hour, services.clock.now_ms(), window_ms=HOUR_MS)


async def send_test_ping(services: Services, owner_key: str, endpoint_id: str) -> Queued:
    """A ``ping`` to one of the owner's endpoints, within ``webhook_test_per_hour``."""
    await _count_hourly(
        services, "webhook-test", owner_key, services.settings.webhook_test_per_hour
    )
    return await ping(
        services.db, services.settings, owner_key, endpoint_id, services.clock.now_ms()
    )


async def send_again(
    services: Services, owner_key: str, event_id: str, endpoint_id: str | None
) -> Queued:
    """An event sent again (to the endpoint, or with None the paid webhook), within
    ``event_redelivery_per_hour``."""
    await _count_hourly(
        services, "event-redelivery", owner_key, services.settings.event_redelivery_per_hour
    )
    return await redeliver(
        services.db,
        services.settings,
        owner_key,
        event_id,
        services.clock.now_ms(),
        endpoint_id=endpoint_id,
    )
