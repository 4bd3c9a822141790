"""Signed paid webhooks end to end: a paid invoice, the worker, a real HTTP receiver.

Signatures are checked with this file's own HMAC code (``verified_secrets``), the way a
receiver following docs/integration/webhooks.md would, never with the service's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import event, func, select

from invoicing.auth.api_keys import create_api_key
from invoicing.auth.guard import Caller
from invoicing.auth.secrets import ServerSecrets
from invoicing.chain.fake import FakeChain
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.records import run_records_step
from invoicing.notifications.claims import claim_events
from invoicing.notifications.client import Outcome
from invoicing.notifications.delivery import AttemptResult, record_results
from invoicing.notifications.signing import create_secret, revoke_secret, update_settings
from invoicing.notifications.worker import Dispatcher, client_for
from invoicing.services import Services
from invoicing.tables.notifications import WebhookAttempt, WebhookEvent
from tests.support.monitoring import clock_of, fake_services, new_invoice
from tests.support.receiver import Received, receiver
from tests.support.signing import new_owner

ETH = 10**18
HEADER = "x-service-webhook-signature"


def verified_secrets(received: Received, secrets: list[str]) -> tuple[int, list[str]]:
    """Parse ``t=…,v1=…[,v1=…]``; return t and, for each v1 in order, the secret among
    ``secrets`` whose HMAC-SHA256 of "<t>.<raw body>" it is ("?" when none matches)."""
    parts = [part.split("=", 1) for part in received.headers[HEADER].split(",")]
    assert parts[0][0] == "t" and all(name == "v1" for name, _ in parts[1:])
    timestamp = int(parts[0][1])
    message = f"{timestamp}.".encode() + received.raw
    expected = {
        hmac.new(secret.encode(), message, hashlib.sha256).hexdigest(): secret for secret in secrets
    }
    return timestamp, [expected.get(value, "?") for _, value in parts[1:]]


@pytest.fixture
async def services(module_database: str, fake: FakeChain) -> AsyncIterator[Services]:
    # Every test here ends with its events delivered, so the next one claims only its own.
    built = fake_services(module_database, fake, webhook_allow_private=True)
    yield built
    await built.db.dispose()


@asynccontextmanager
async def worker(services: Services) -> AsyncIterator[None]:
    """The webhook worker with the real HTTP client, running until the block ends."""
    client = client_for(services)
    stop = asyncio.Event()
    task = asyncio.create_task(Dispatcher(services, client).run(stop))
    try:
        yield
    finally:
        stop.set()
        await task
        await client.aclose()


async def pay(services: Services, fake: FakeChain, owner: str, url: str, **kwargs: object) -> None:
    invoice = await new_invoice(services, fake, webhook_url=url, owner_address=owner, **kwargs)  # type: ignore[arg-type]
    fake.pay(invoice.payment_address, ETH)
    # The block pass reads every pending invoice (a due pass skips shards read recently);
    # then, as the monitor does, the payments-of-record step, which releases the held paid
    # webhook.
    await run_block_pass(services, fake, await fake.block_number())
    await run_records_step(services, fake, await fake.block_number())


async def attempts_recorded(services: Services, url: str, count: int) -> None:
    for _ in range(500):
        async with services.db.sessions() as session:
            recorded = await session.scalar(
                select(func.count())
                .select_from(WebhookAttempt)
                .join(WebhookEvent, WebhookEvent.id == WebhookAttempt.event_id)
                .where(WebhookEvent.url == url)
            )
            if (recorded or 0) >= count:
                return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} attempts recorded")


async def add_secret(services: Services, owner: str) -> tuple[str, str]:
    async with services.db.transaction() as session:
        row, secret = await create_secret(
            session, owner, ServerSecrets.of(services.settings), services.clock.now_ms()
        )
    return row.id, secret.get_secret_value()


async def revoke(services: Services, owner: str, secret_id: str) -> None:
    async with services.db.transaction() as session:
        await revoke_secret(session, owner, secret_id, services.clock.now_ms())


async def test_rotation_two_secrets_then_one_then_none(services: Services, fake: FakeChain) -> None:
    owner = new_owner().address
    old_id, old = await add_secret(services, owner)
    clock_of(services).advance(1000)  # secrets sign oldest first
    new_id, new = await add_secret(services, owner)
    async with receiver() as recv, worker(services):
        await pay(services, fake, owner, recv.url("/two"))
        (two,) = await recv.wait_for("/two")
        await revoke(services, owner, old_id)
        await pay(services, fake, owner, recv.url("/one"))
        (one,) = await recv.wait_for("/one")
        await revoke(services, owner, new_id)
        await pay(services, fake, owner, recv.url("/none"))
        (none,) = await recv.wait_for("/none")

    now_s = services.clock.now_ms() // 1000
    assert verified_secrets(two, [old, new]) == (now_s, [old, new])
    assert verified_secrets(one, [old, new]) == (now_s, [new])
    assert HEADER not in none.headers
    # The paid webhook's headers are all still there.
    for received in (two, one, none):
        assert received.headers["x-service-signature"] == "0xsig"
        assert received.headers["x-service-event-id"]
        assert received.headers["x-service-delivery-attempt"] == "1"
        assert received.headers["content-type"] == "application/json"


async def test_other_owners_deliveries_stay_unsigned(services: Services, fake: FakeChain) -> None:
    signed, other = new_owner().address, new_owner().address
    _id, secret = await add_secret(services, signed)
    async with receiver() as recv, worker(services):
        await pay(services, fake, signed, recv.url("/signed"))
        await pay(services, fake, other, recv.url("/other"))
        (mine,) = await recv.wait_for("/signed")
        (theirs,) = await recv.wait_for("/other")

    assert verified_secrets(mine, [secret])[1] == [secret]
    assert HEADER not in theirs.headers


async def test_a_retry_is_signed_again_at_its_own_send_time(
    services: Services, fake: FakeChain
) -> None:
    owner = new_owner().address
    _id, secret = await add_secret(services, owner)
    clock = clock_of(services)
    async with receiver() as recv, worker(services):
        recv.answers["/retry"] = [500]
        await pay(services, fake, owner, recv.url("/retry"))
        await recv.wait_for("/retry")
        first_s = clock.now_ms() // 1000
        await attempts_recorded(services, recv.url("/retry"), 1)
        clock.advance(61_000)
        first, second = await recv.wait_for("/retry", 2)

    assert verified_secrets(first, [secret]) == (first_s, [secret])
    assert verified_secrets(second, [secret]) == (first_s + 61, [secret])
    assert second.headers["x-service-delivery-attempt"] == "2"
    assert first.raw == second.raw


async def test_owners_can_stop_sending_the_api_key(services: Services, fake: FakeChain) -> None:
    owner = new_owner().address
    async with services.db.transaction() as session:
        row, api_key = await create_api_key(
            session, owner, "shop", ServerSecrets.of(services.settings), services.clock.now_ms()
        )
    caller = Caller(owner.lower(), "api_key", api_key_id=row.id)
    _id, secret = await add_secret(services, owner)
    async with receiver() as recv, worker(services):
        await pay(services, fake, owner, recv.url("/with-key"), caller=caller)
        (with_key,) = await recv.wait_for("/with-key")
        async with services.db.transaction() as session:
            await update_settings(session, owner, False, services.clock.now_ms())
        await pay(services, fake, owner, recv.url("/without-key"), caller=caller)
        (without_key,) = await recv.wait_for("/without-key")

    assert with_key.headers["x-service-api-key"] == api_key.get_secret_value()
    assert "x-service-api-key" not in without_key.headers
    assert api_key.get_secret_value() not in str(without_key.headers)
    assert verified_secrets(without_key, [secret])[1] == [secret]
    assert without_key.headers["x-service-event-id"]
    assert without_key.body["status"] == "paid"


def test_verification_refuses_a_changed_body() -> None:
    # The helper above is what the other tests rely on: it must tell a changed body apart.
    secret = "whsec_x"
    raw = b'{"status":"paid"}'
    good = hmac.new(secret.encode(), b"5." + raw, hashlib.sha256).hexdigest()
    received = Received("/", {HEADER: f"t=5,v1={good}"}, {}, 0.0, raw.replace(b"paid", b"PAID"))

    assert verified_secrets(received, [secret]) == (5, ["?"])


async def test_a_claimed_batch_reads_its_owners_secrets_in_one_query(
    services: Services, fake: FakeChain
) -> None:
    owners = [new_owner().address for _ in range(3)]
    secrets: dict[str, list[str]] = {owner: [] for owner in owners}
    for owner in owners[:2]:
        secrets[owner].append((await add_secret(services, owner))[1])
    for owner in owners:
        for _ in range(3):
            await pay(services, fake, owner, "https://hooks.example/batch")
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    engine = services.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        claimed = await claim_events(services, services.clock.now_ms(), 100)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    # Finish them, so no later test's worker finds them due.
    done = Outcome(status_code=204)
    now_ms = services.clock.now_ms()
    await record_results(
        services,
        [AttemptResult.of(c, now_ms, done) for c in claimed],
    )

    assert len(claimed) == 9
    assert sum("webhook_secrets" in statement for statement in statements) == 1
    by_owner = {c.delivery.body: c.signing_secrets for c in claimed}
    for body, signing in by_owner.items():
        owner = next(o for o in owners if o.encode() in body)
        assert [secret.get_secret_value() for secret in signing] == secrets[owner]
