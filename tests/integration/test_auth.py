"""Request authentication in both modes, over real HTTP."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import Connection, event, func, select

from invoicing import housekeeping
from invoicing.auth.api_keys import (
    active_key_cache,
    list_api_keys,
    lookup_active_key,
    revoke_api_key,
)
from invoicing.auth.secrets import secret_hash
from invoicing.chain.deploy import DevDeployment
from invoicing.db import AUTOCOMMIT
from invoicing.tables.auth import UsedRequestTimestamp
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from invoicing.workers import all_workers
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get, signed_post
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers, unique_now_ms

pytestmark = pytest.mark.integration

PATH = "/integration/invoices"


async def count(app: RunningApp, owner: str) -> int:
    async with app.services.db.sessions() as session:
        total = await session.scalar(
            select(func.count()).select_from(Invoice).where(Invoice.owner_key == owner.lower())
        )
    return int(total or 0)


def body_for(owner: str, dev: DevDeployment, **extra: object) -> dict[str, object]:
    return {"ownerAddress": owner, "chainId": dev.chain_id, "amount": "1", **extra}


async def assert_refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_no_credentials_is_401(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()

    response = await app.http.post(PATH, json=body_for(owner.address, dev))

    await assert_refused(response, 401, "unauthorized")
    assert await count(app, owner.address) == 0


async def test_unknown_api_key_is_401(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    response = await app.http.post(
        PATH, json=body_for(owner.address, dev), headers=key_headers("sk_not-a-key")
    )
    await assert_refused(response, 401, "unauthorized")


async def test_api_key_of_another_owner_is_403_and_creates_nothing(
    app: RunningApp, dev: DevDeployment
) -> None:
    alice, bob = new_owner(), new_owner()
    alice_key = await issue_api_key(app.services, alice)

    response = await app.http.post(
        PATH, json=body_for(bob.address, dev), headers=key_headers(alice_key)
    )

    await assert_refused(response, 403, "forbidden")
    assert await count(app, bob.address) == 0
    assert await count(app, alice.address) == 0


async def test_both_modes_or_half_a_pair_is_401(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = body_for(owner.address, dev)
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    signed = signed_headers(owner, "invoice.create", payload)

    both = await app.http.post(PATH, json=body, headers={**key_headers(key), **signed})
    only_signature = await app.http.post(
        PATH, json=body, headers={"x-service-signature": signed["x-service-signature"]}
    )
    only_timestamp = await app.http.post(
        PATH, json=body, headers={"x-service-timestamp": signed["x-service-timestamp"]}
    )

    for response in (both, only_signature, only_timestamp):
        await assert_refused(response, 401, "unauthorized")
    assert await count(app, owner.address) == 0


async def test_timestamp_outside_five_minutes_is_refused(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    body = body_for(owner.address, dev)
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    now = unique_now_ms()

    for ts in (now - 301_000, now + 301_000):
        headers = signed_headers(owner, "invoice.create", payload, timestamp_ms=ts)
        response = await app.http.post(PATH, json=body, headers=headers)
        await assert_refused(response, 401, "timestamp_out_of_window")
    assert await count(app, owner.address) == 0


# "\xb2" is "²" (latin-1, as HTTP carries it): str.isdigit() holds for it, int() refuses it.
@pytest.mark.parametrize("timestamp", ["abc", "-5", "1.5", "", "9" * 20, "\xb2", "1\xb2"])
async def test_malformed_timestamp_is_401(
    app: RunningApp, dev: DevDeployment, timestamp: str
) -> None:
    owner = new_owner()
    headers = {
        "x-service-signature": b"0x" + b"11" * 65,
        "x-service-timestamp": timestamp.encode("latin-1"),
    }
    response = await app.http.post(PATH, json=body_for(owner.address, dev), headers=headers)
    await assert_refused(response, 401, "unauthorized")


async def test_replayed_timestamp_is_refused(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    body = body_for(owner.address, dev, invoiceId="replay-1")
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    headers = signed_headers(owner, "invoice.create", payload)

    first = await app.http.post(PATH, json=body, headers=headers)
    second = await app.http.post(PATH, json=body, headers=headers)

    assert first.status_code == 201
    await assert_refused(second, 401, "replayed_request")
    assert await count(app, owner.address) == 1


async def test_concurrent_copies_of_one_signed_request_succeed_once(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    fresh = [body_for(owner.address, dev, amount=str(n)) for n in range(1, 6)]
    body = body_for(owner.address, dev)
    headers = signed_headers(
        owner, "invoice.create", {k: v for k, v in body.items() if k != "ownerAddress"}
    )
    fresh_headers = [
        signed_headers(owner, "invoice.create", {k: v for k, v in b.items() if k != "ownerAddress"})
        for b in fresh
    ]

    responses = await asyncio.gather(
        *(app.http.post(PATH, json=body, headers=headers) for _ in range(8)),
        *(
            app.http.post(PATH, json=b, headers=h)
            for b, h in zip(fresh, fresh_headers, strict=True)
        ),
    )

    copies, others = responses[:8], responses[8:]
    assert sorted(r.status_code for r in copies) == [201] + [401] * 7
    for refused in (r for r in copies if r.status_code == 401):
        assert refused.json()["error"]["code"] == "replayed_request"
    assert [r.status_code for r in others] == [201] * 5
    assert await count(app, owner.address) == 6


async def test_a_signed_create_is_one_transaction_with_its_replay_key(
    app: RunningApp, dev: DevDeployment
) -> None:
    """No transaction of its own for the replay key: it is written in the create's (on
    PostgreSQL by the same statement as the invoice, which needs no transaction around it).
    A write is a transaction, or a statement on an autocommit connection."""
    owner = new_owner()
    body = body_for(owner.address, dev)
    headers = signed_headers(
        owner, "invoice.create", {k: v for k, v in body.items() if k != "ownerAddress"}
    )
    transactions: list[set[str]] = []

    def begin(connection: Connection) -> None:
        if not connection.get_execution_options().get(AUTOCOMMIT):
            transactions.append(set())

    def statement(conn: Connection, _cursor: object, sql: str, *_args: object) -> None:
        if conn.get_execution_options().get(AUTOCOMMIT):
            transactions.append(set())
        if transactions and "INSERT INTO used_request_timestamps" in sql:
            transactions[-1].add("replay key")
        if transactions and "INSERT INTO invoices" in sql:
            transactions[-1].add("invoice")

    engines = app.services.db.sync_engines
    for engine in engines:
        event.listen(engine, "begin", begin)
        event.listen(engine, "before_cursor_execute", statement)
    try:
        created = await app.http.post(PATH, json=body, headers=headers)
        replay = await app.http.post(PATH, json=body, headers=headers)
    finally:
        for engine in engines:
            event.remove(engine, "begin", begin)
            event.remove(engine, "before_cursor_execute", statement)

    assert created.status_code == 201
    await assert_refused(replay, 401, "replayed_request")
    writes = [t for t in transactions if t]
    # The replay's one write tries its key first (and on PostgreSQL, in the same statement,
    # an invoice that is written only if the key was new).
    assert len(writes) == 2 and writes[0] == {"replay key", "invoice"}
    assert "replay key" in writes[1]
    assert await count(app, owner.address) == 1


async def test_replay_is_refused_by_another_api_process_on_the_same_database(
    app: RunningApp, make_services: MakeServices, dev: DevDeployment
) -> None:
    owner = new_owner()
    body = body_for(owner.address, dev, invoiceId="replay-2")
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    headers = signed_headers(owner, "invoice.create", payload)
    other_services = await make_services()

    async with (
        serve(create_app(other_services)) as other_url,
        httpx.AsyncClient(base_url=other_url) as other,
    ):
        first = await app.http.post(PATH, json=body, headers=headers)
        replay = await other.post(PATH, json=body, headers=headers)

    assert first.status_code == 201
    await assert_refused(replay, 401, "replayed_request")
    assert await count(app, owner.address) == 1


async def test_signature_over_another_action_or_payload_is_refused(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    body = body_for(owner.address, dev)
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}

    wrong_action = await app.http.post(
        PATH, json=body, headers=signed_headers(owner, "invoice.delete", payload)
    )
    tampered = await app.http.post(
        PATH,
        json={**body, "amount": "100"},
        headers=signed_headers(owner, "invoice.create", payload),
    )
    other_signer = await app.http.post(
        PATH,
        json=body,
        headers=signed_headers(new_owner(), "invoice.create", payload, owner_address=owner.address),
    )
    null_added = await app.http.post(
        PATH,
        json={**body, "description": None},
        headers=signed_headers(owner, "invoice.create", payload),
    )

    for response in (wrong_action, tampered, other_signer, null_added):
        await assert_refused(response, 401, "unauthorized")
    assert await count(app, owner.address) == 0


async def test_sorted_payload_keys_are_accepted(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "1",
        "invoiceId": "sorted-1",
    }
    sorted_payload = {"amount": "1", "chainId": dev.chain_id, "invoiceId": "sorted-1"}

    response = await app.http.post(
        PATH, json=body, headers=signed_headers(owner, "invoice.create", sorted_payload)
    )

    assert response.status_code == 201, response.text


async def test_query_signatures_accept_typed_values(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    params = {"ownerAddress": owner.address, "chainId": str(dev.chain_id), "paid": "false"}
    typed = {"chainId": dev.chain_id, "paid": False}

    as_strings = await signed_get(app.http, PATH, owner, "invoice.list", params)
    as_typed = await app.http.get(
        PATH, params=params, headers=signed_headers(owner, "invoice.list", typed)
    )

    assert as_strings.status_code == 200, as_strings.text
    assert as_typed.status_code == 200, as_typed.text


async def test_a_query_value_of_non_ascii_digits_is_refused_not_crashed(
    app: RunningApp, dev: DevDeployment
) -> None:
    """ "²" passes str.isdigit() but not int(): the signed-payload forms must not crash on it."""
    owner = new_owner()
    params = {"ownerAddress": owner.address, "chainId": "\u00b2"}

    response = await app.http.get(
        PATH, params=params, headers=signed_headers(owner, "invoice.list", {"chainId": 2})
    )

    await assert_refused(response, 401, "unauthorized")


async def test_owner_address_casing_is_signed_exactly_as_sent(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    lower = owner.address.lower()
    body = {"ownerAddress": lower, "chainId": dev.chain_id, "amount": "1"}

    response = await app.http.post(
        PATH,
        json=body,
        headers=signed_headers(
            owner, "invoice.create", {"chainId": dev.chain_id, "amount": "1"}, owner_address=lower
        ),
    )

    assert response.status_code == 201, response.text
    assert response.json()["ownerAddress"] == owner.address


async def test_api_key_lifecycle(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    created = await signed_post(
        app.http,
        "/integration/api-keys",
        owner,
        "apikey.create",
        {"ownerAddress": owner.address, "label": "shop"},
    )
    assert created.status_code == 201, created.text
    key = created.json()
    assert set(key) == {"id", "apiKey", "label", "createdAt"}
    assert key["label"] == "shop" and key["apiKey"].startswith("sk_")

    use = await app.http.post(
        PATH, json=body_for(owner.address, dev), headers=key_headers(key["apiKey"])
    )
    listed = await signed_get(
        app.http, "/integration/api-keys", owner, "apikey.list", {"ownerAddress": owner.address}
    )
    revoked = await signed_get(
        app.http,
        "/integration/api-keys",
        owner,
        "apikey.revoke",
        {"ownerAddress": owner.address, "id": key["id"]},
        method="DELETE",
    )
    after = await app.http.post(
        PATH, json=body_for(owner.address, dev), headers=key_headers(key["apiKey"])
    )

    assert use.status_code == 201
    assert listed.status_code == 200
    assert listed.json() == {
        "items": [
            {"id": key["id"], "label": "shop", "createdAt": key["createdAt"], "revokedAt": None}
        ]
    }
    assert "apiKey" not in listed.text and key["apiKey"] not in listed.text
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    await assert_refused(after, 401, "unauthorized")
    assert await count(app, owner.address) == 1


async def test_api_keys_cannot_manage_api_keys(app: RunningApp) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.post(
        "/integration/api-keys", json={"ownerAddress": owner.address}, headers=key_headers(key)
    )

    await assert_refused(response, 401, "unauthorized")


async def test_revoking_another_owners_key_is_404_and_keeps_it(
    app: RunningApp, dev: DevDeployment
) -> None:
    alice, bob = new_owner(), new_owner()
    created = await signed_post(
        app.http, "/integration/api-keys", alice, "apikey.create", {"ownerAddress": alice.address}
    )
    key = created.json()

    response = await signed_get(
        app.http,
        "/integration/api-keys",
        bob,
        "apikey.revoke",
        {"ownerAddress": bob.address, "id": key["id"]},
        method="DELETE",
    )
    still = await app.http.post(
        PATH, json=body_for(alice.address, dev), headers=key_headers(key["apiKey"])
    )

    await assert_refused(response, 404, "not_found")
    assert still.status_code == 201


async def test_housekeeping_forgets_only_expired_replay_keys(
    make_services: MakeServices,
) -> None:
    services = await make_services()
    owner = new_owner().address.lower()
    now = services.clock.now_ms()
    async with services.db.transaction() as session:
        session.add(UsedRequestTimestamp(owner_key=owner, timestamp_ms=1, expires_at=now - 1))
        session.add(UsedRequestTimestamp(owner_key=owner, timestamp_ms=2, expires_at=now + 600_000))
    stop = asyncio.Event()

    task = asyncio.create_task(housekeeping.run(services, stop))
    await asyncio.sleep(0.3)
    stop.set()
    await task

    async with services.db.sessions() as session:
        kept = await session.scalars(
            select(UsedRequestTimestamp.timestamp_ms).where(UsedRequestTimestamp.owner_key == owner)
        )
        assert list(kept) == [2]
    assert housekeeping.run in all_workers()


async def test_concurrent_requests_with_an_uncached_key_read_it_once(
    make_services: MakeServices,
) -> None:
    services = await make_services()
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    key_reads = 0

    def count_key_reads(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        nonlocal key_reads
        key_reads += "FROM api_keys" in statement

    engine = services.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count_key_reads)
    try:
        found = await asyncio.gather(*(lookup_active_key(services.db, api_key) for _ in range(20)))
        again = await lookup_active_key(services.db, api_key)
    finally:
        event.remove(engine, "before_cursor_execute", count_key_reads)

    assert key_reads == 1
    assert {key.owner_key for key in found if key is not None} == {owner.address.lower()}
    assert all(key is not None for key in found) and again == found[0]


async def test_a_revoked_key_is_refused_at_once_by_the_revoking_process(
    make_services: MakeServices,
) -> None:
    services = await make_services()
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    assert await lookup_active_key(services.db, api_key) is not None  # now cached

    async with services.db.transaction() as session:
        key_id = (await list_api_keys(session, owner.address.lower()))[0].id
        await revoke_api_key(session, owner.address.lower(), key_id, services.clock.now_ms())
    active_key_cache(services.db).forget(secret_hash(api_key))

    assert await lookup_active_key(services.db, api_key) is None


async def test_a_key_revoked_by_another_process_stops_working_here_within_a_second(
    make_services: MakeServices,
) -> None:
    """The documented bound of the key cache: another process's revocation is seen within
    its TTL (1 s), with no message between the processes."""
    services, other = await make_services(), await make_services()
    owner = new_owner()
    api_key = await issue_api_key(services, owner)
    assert await lookup_active_key(other.db, api_key) is not None  # now cached over there
    assert active_key_cache(other.db).ttl_s == 1.0

    async with services.db.transaction() as session:
        key_id = (await list_api_keys(session, owner.address.lower()))[0].id
        await revoke_api_key(session, owner.address.lower(), key_id, services.clock.now_ms())
    active_key_cache(services.db).forget(secret_hash(api_key))
    await asyncio.sleep(1.05)

    assert await lookup_active_key(other.db, api_key) is None
