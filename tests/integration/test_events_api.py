"""Webhook endpoints and events as an integrator drives them over real HTTP (both auth modes),
with deliveries by the real webhook worker to a real receiver; the clock is a FakeClock so
that three days can pass. Signatures are checked with this file's own HMAC code.

Invoice events on a real chain with real payments are in ``test_events_anvil.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select, update

from invoicing.chain.fake import FakeChain
from invoicing.notifications.retention import prune_events
from invoicing.services import Services
from invoicing.tables.notifications import Event, EventEndpoint, EventStatus, WebhookEvent
from invoicing.web.app import create_app
from tests.support.api import issue_api_key, key_headers
from tests.support.events import deliver_due
from tests.support.monitoring import clock_of, fake_services, new_fake_chain
from tests.support.odd_values import ODD_VALUES
from tests.support.receiver import Received, Receiver
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers

pytestmark = pytest.mark.integration

ENDPOINTS = "/integration/webhook-endpoints"
EVENTS = "/integration/events"
REFUSED_URL = "http://127.0.0.1:1/hook"  # nothing listens on port 1: refused at once
HOUR_MS = 3600_000


class Api:
    """The app on a real port with its Services, an owner and the owner's API key."""

    def __init__(self, services: Services, http: httpx.AsyncClient) -> None:
        self.services = services
        self.http = http

    async def owner(self) -> tuple[LocalAccount, dict[str, str]]:
        owner = new_owner()
        return owner, key_headers(await issue_api_key(self.services, owner))


@pytest.fixture(scope="module")
async def served(module_database: str) -> AsyncIterator[Api]:
    """One app for the module (each test makes its own owners)."""
    services = fake_services(module_database, new_fake_chain(), webhook_allow_private=True)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield Api(services, http)
    await services.db.dispose()


@pytest.fixture
async def api(served: Api) -> AsyncIterator[Api]:
    clock_of(served.services).set(time.time_ns() // 1_000_000)  # signature mode checks it
    yield served
    # Leave no due delivery behind: the next test's worker claims every due one.
    async with served.services.db.transaction() as session:
        await session.execute(
            update(WebhookEvent)
            .where(WebhookEvent.status == EventStatus.PENDING)
            .values(status=EventStatus.FAILED)
        )


def verified(received: Received, secret: str) -> bool:
    """The receiver's check: t=<s>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>."""
    fields = [
        part.split("=", 1) for part in received.headers["x-service-webhook-signature"].split(",")
    ]
    timestamp = dict(fields[:1])["t"]
    signatures = [value for name, value in fields[1:] if name == "v1"]
    message = f"{timestamp}.".encode() + received.raw
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return expected in signatures


async def create_endpoint(
    api: Api, headers: dict[str, str], owner: LocalAccount, url: str, events: list[str]
) -> dict[str, Any]:
    body = {"ownerAddress": owner.address, "url": url, "events": events}
    answer = await api.http.post(ENDPOINTS, json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def listed(api: Api, owner: LocalAccount, headers: dict[str, str]) -> list[dict[str, Any]]:
    answer = await api.http.get(ENDPOINTS, params={"ownerAddress": owner.address}, headers=headers)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


async def send_ping(
    api: Api, owner: LocalAccount, headers: dict[str, str], endpoint_id: str
) -> dict[str, Any]:
    answer = await api.http.post(
        f"{ENDPOINTS}/test",
        params={"id": endpoint_id},
        json={"ownerAddress": owner.address},
        headers=headers,
    )
    assert answer.status_code == 202, answer.text
    accepted: dict[str, Any] = answer.json()
    return accepted


async def page(
    api: Api, owner: LocalAccount, headers: dict[str, str], **params: str
) -> httpx.Response:
    return await api.http.get(
        EVENTS, params={"ownerAddress": owner.address, **params}, headers=headers
    )


async def deliveries_of(services: Services, endpoint_id: str) -> list[WebhookEvent]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(WebhookEvent)
            .where(WebhookEvent.endpoint_id == endpoint_id)
            .order_by(WebhookEvent.created_at)
        )
        return list(rows)


async def test_an_endpoint_is_created_listed_changed_and_removed_with_an_api_key(api: Api) -> None:
    owner, headers = await api.owner()
    now = api.services.clock.now_ms()

    created = await create_endpoint(
        api, headers, owner, "https://hooks.example/a", ["invoice.paid", "invoice.expired"]
    )

    assert created == {
        "id": created["id"],
        "url": "https://hooks.example/a",
        "events": ["invoice.paid", "invoice.expired"],
        "description": None,
        "enabled": True,
        "disabledReason": None,
        "disabledAt": None,
        "failingSince": None,
        "createdAt": now,
        "updatedAt": now,
    }
    assert await listed(api, owner, headers) == [created]
    clock_of(api.services).advance(1000)
    changed = await api.http.patch(
        ENDPOINTS,
        params={"id": created["id"]},
        json={"ownerAddress": owner.address, "events": ["*"], "description": "shop"},
        headers=headers,
    )
    assert changed.status_code == 200, changed.text
    assert changed.json() == {
        **created,
        "events": ["*"],
        "description": "shop",
        "updatedAt": now + 1000,
    }
    assert await listed(api, owner, headers) == [changed.json()]
    removed = await api.http.delete(
        ENDPOINTS, params={"ownerAddress": owner.address, "id": created["id"]}, headers=headers
    )
    assert removed.json() == {"deleted": True, "id": created["id"]}
    assert await listed(api, owner, headers) == []


async def test_signature_mode_signs_the_id_with_the_body(api: Api) -> None:
    owner, headers = await api.owner()
    first = await create_endpoint(api, headers, owner, "https://hooks.example/1", ["*"])
    clock_of(api.services).advance(1)  # listed oldest first
    second = await create_endpoint(api, headers, owner, "https://hooks.example/2", ["*"])
    body = {"ownerAddress": owner.address, "enabled": False}
    payload = {"id": first["id"], "enabled": False}

    # The signature is over the first id: sent for the second one, it is refused.
    refused = await api.http.patch(
        ENDPOINTS,
        params={"id": second["id"]},
        json=body,
        headers=signed_headers(owner, "webhook_endpoint.update", payload),
    )
    accepted = await api.http.patch(
        ENDPOINTS,
        params={"id": first["id"]},
        json=body,
        headers=signed_headers(owner, "webhook_endpoint.update", payload),
    )

    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    assert accepted.status_code == 200
    assert [e["enabled"] for e in await listed(api, owner, headers)] == [False, True]
    assert accepted.json()["disabledReason"] == "disabled by the owner"
    create_body = {"ownerAddress": owner.address, "url": "https://hooks.example/3", "events": ["*"]}
    signed_create = await api.http.post(
        ENDPOINTS,
        json=create_body,
        headers=signed_headers(
            owner, "webhook_endpoint.create", {"url": create_body["url"], "events": ["*"]}
        ),
    )
    listing = await api.http.get(
        ENDPOINTS,
        params={"ownerAddress": owner.address},
        headers=signed_headers(owner, "webhook_endpoint.list", {}),
    )
    assert signed_create.status_code == 201
    assert sorted(e["url"] for e in listing.json()["items"]) == [
        f"https://hooks.example/{n}" for n in (1, 2, 3)
    ]


async def test_another_owners_endpoint_is_404_and_unchanged(api: Api) -> None:
    owner, headers = await api.owner()
    stranger, stranger_headers = await api.owner()
    theirs = await create_endpoint(api, headers, owner, "https://hooks.example/x", ["*"])
    body = {"ownerAddress": stranger.address, "url": "https://evil.example/", "enabled": False}

    answers = [
        await api.http.patch(
            ENDPOINTS, params={"id": theirs["id"]}, json=body, headers=stranger_headers
        ),
        await api.http.delete(
            ENDPOINTS,
            params={"ownerAddress": stranger.address, "id": theirs["id"]},
            headers=stranger_headers,
        ),
        await api.http.post(
            f"{ENDPOINTS}/test",
            params={"id": theirs["id"]},
            json={"ownerAddress": stranger.address},
            headers=stranger_headers,
        ),
    ]

    assert [a.status_code for a in answers] == [404, 404, 404]
    assert {a.json()["error"]["code"] for a in answers} == {"not_found"}
    assert await listed(api, owner, headers) == [theirs]
    assert await deliveries_of(api.services, theirs["id"]) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://hooks.example/", "events": ["*"]}, "url"),
        ({"url": "/relative", "events": ["*"]}, "url"),
        ({"url": "https://hooks.example/" + "a" * 2048, "events": ["*"]}, "url"),
        ({"url": "https://hooks.example/", "events": []}, "events"),
        ({"url": "https://hooks.example/", "events": ["invoice.nope"]}, "events"),
        ({"url": "https://hooks.example/", "events": ["*", "invoice.paid"]}, "events"),
        ({"url": "https://hooks.example/", "events": ["ping"]}, "events"),
        ({"url": "https://hooks.example/", "events": "invoice.paid"}, "events"),
        ({"url": "https://hooks.example/", "events": [1]}, "events.0"),
        (
            {"url": "https://hooks.example/", "events": ["*"], "description": "d" * 1001},
            "description",
        ),
        ({"url": "https://hooks.example/", "events": ["*"], "secret": "x"}, "secret"),
        ({"events": ["*"]}, "url"),
    ],
)
async def test_bad_endpoint_bodies_are_400_and_create_nothing(
    api: Api, body: dict[str, Any], field: str
) -> None:
    owner, headers = await api.owner()

    answer = await api.http.post(
        ENDPOINTS, json={"ownerAddress": owner.address, **body}, headers=headers
    )

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"] or error["details"].get("field") == field
    assert await listed(api, owner, headers) == []


async def test_bad_patch_and_delete_inputs(api: Api) -> None:
    owner, headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, "https://hooks.example/p", ["*"])
    owner_only = {"ownerAddress": owner.address}

    answers = [
        await api.http.patch(
            ENDPOINTS, params={"id": endpoint["id"]}, json=owner_only, headers=headers
        ),
        await api.http.patch(ENDPOINTS, json={**owner_only, "enabled": False}, headers=headers),
        await api.http.patch(
            ENDPOINTS,
            params={"id": endpoint["id"]},
            json={**owner_only, "enabled": "no"},
            headers=headers,
        ),
        await api.http.patch(
            ENDPOINTS,
            params={"id": endpoint["id"]},
            json={**owner_only, "url": "localhost"},
            headers=headers,
        ),
        await api.http.patch(
            ENDPOINTS,
            params={"id": endpoint["id"], "x": "1"},
            json={**owner_only, "enabled": False},
            headers=headers,
        ),
        await api.http.delete(ENDPOINTS, params=owner_only, headers=headers),
        await api.http.post(f"{ENDPOINTS}/test", json=owner_only, headers=headers),
    ]

    assert [a.status_code for a in answers] == [400] * 7
    assert {a.json()["error"]["code"] for a in answers} == {"invalid_request"}
    assert await listed(api, owner, headers) == [endpoint]


async def test_urls_that_can_never_be_delivered_are_refused(
    module_database: str, fake: FakeChain
) -> None:
    services = fake_services(module_database, fake, webhook_allow_private=False)
    clock_of(services).set(time.time_ns() // 1_000_000)
    owner = new_owner()
    headers = key_headers(await issue_api_key(services, owner))
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        answers = [
            await http.post(
                ENDPOINTS,
                json={"ownerAddress": owner.address, "url": url, "events": ["*"]},
                headers=headers,
            )
            for url in (
                "http://localhost/h",
                "http://127.0.0.1/h",
                "http://[::1]/h",
                "http://10.0.0.1/",
            )
        ]
        listing = await http.get(ENDPOINTS, params={"ownerAddress": owner.address}, headers=headers)
    await services.db.dispose()

    assert [a.status_code for a in answers] == [400] * 4
    assert {a.json()["error"]["message"] for a in answers} == {"url: destination not allowed"}
    assert listing.json() == {"items": []}


async def test_an_owner_holds_at_most_the_cap_of_endpoints(
    module_database: str, fake: FakeChain
) -> None:
    services = fake_services(
        module_database, fake, webhook_allow_private=True, max_event_endpoints_per_owner=2
    )
    owner = new_owner()
    headers = key_headers(await issue_api_key(services, owner))
    body = {"ownerAddress": owner.address, "url": "https://hooks.example/c", "events": ["*"]}
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url) as http,
    ):
        answers = [await http.post(ENDPOINTS, json=body, headers=headers) for _ in range(3)]
        listing = await http.get(ENDPOINTS, params={"ownerAddress": owner.address}, headers=headers)
    await services.db.dispose()

    assert [a.status_code for a in answers] == [201, 201, 409]
    assert answers[2].json()["error"] == {
        "code": "too_many_webhook_endpoints",
        "message": "an owner may have at most 2 webhook endpoints; remove one first",
        "details": {"max": 2},
    }
    assert len(listing.json()["items"]) == 2


async def test_a_ping_is_signed_and_shows_its_attempts(api: Api, hooks: Receiver) -> None:
    owner, headers = await api.owner()
    secret = (
        await api.http.post(
            "/integration/webhook-secrets", json={"ownerAddress": owner.address}, headers=headers
        )
    ).json()["secret"]
    endpoint = await create_endpoint(api, headers, owner, hooks.url("ping"), ["invoice.paid"])

    accepted = await send_ping(api, owner, headers, endpoint["id"])
    await deliver_due(api.services)

    (received,) = hooks.at("ping")
    now = api.services.clock.now_ms()
    assert received.body == {
        "id": accepted["eventId"],
        "type": "ping",
        "createdAt": now,
        "data": {"endpointId": endpoint["id"]},
    }
    assert received.headers["x-service-event-id"] == accepted["eventId"]
    assert received.headers["x-service-delivery-attempt"] == "1"
    assert "x-service-api-key" not in received.headers
    assert verified(received, secret)
    assert not verified(received, secret + "x")
    shown = await api.http.get(
        f"{EVENTS}/{accepted['eventId']}", params={"ownerAddress": owner.address}, headers=headers
    )
    assert shown.status_code == 200
    (delivery,) = shown.json()["deliveries"]
    assert shown.json()["event"] == received.body
    assert delivery == {
        "id": accepted["deliveryId"],
        "endpointId": endpoint["id"],
        "target": "endpoint",
        "url": hooks.url("ping"),
        "status": "delivered",
        "nextAttemptAt": None,
        "createdAt": now,
        "deliveredAt": now,
        "attempts": [
            {
                "attempt": 1,
                "attemptedAt": now,
                "statusCode": 200,
                "error": None,
                "durationMs": delivery["attempts"][0]["durationMs"],
            }
        ],
    }


async def test_a_failed_ping_is_tried_once(api: Api) -> None:
    owner, headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, REFUSED_URL, ["*"])

    accepted = await send_ping(api, owner, headers, endpoint["id"])
    await deliver_due(api.services)
    clock_of(api.services).advance(HOUR_MS)
    await deliver_due(api.services)

    shown = (
        await api.http.get(
            f"{EVENTS}/{accepted['eventId']}",
            params={"ownerAddress": owner.address},
            headers=headers,
        )
    ).json()
    (delivery,) = shown["deliveries"]
    assert delivery["status"] == "failed"
    assert [a["attempt"] for a in delivery["attempts"]] == [1]
    assert delivery["attempts"][0]["statusCode"] is None
    (listed_endpoint,) = await listed(api, owner, headers)
    assert listed_endpoint["enabled"] is True
    assert listed_endpoint["failingSince"] == shown["event"]["createdAt"]


async def test_events_page_newest_first_with_a_cursor(api: Api) -> None:
    owner, headers = await api.owner()
    stranger, stranger_headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, "https://hooks.example/e", ["*"])
    ids = []
    for _ in range(5):
        ids.append((await send_ping(api, owner, headers, endpoint["id"]))["eventId"])
        clock_of(api.services).advance(1)
    theirs = await create_endpoint(
        api, stranger_headers, stranger, "https://hooks.example/s", ["*"]
    )
    other = (await send_ping(api, stranger, stranger_headers, theirs["id"]))["eventId"]

    first = (await page(api, owner, headers, limit="2")).json()
    second = (await page(api, owner, headers, limit="2", after=first["items"][-1]["id"])).json()
    third = (await page(api, owner, headers, limit="2", after=second["items"][-1]["id"])).json()
    everything = (await page(api, owner, headers)).json()
    typed = (await page(api, owner, headers, type="invoice.paid")).json()

    assert [e["id"] for e in first["items"]] == [ids[4], ids[3]]
    assert [e["id"] for e in second["items"]] == [ids[2], ids[1]]
    assert [e["id"] for e in third["items"]] == [ids[0]]
    assert [first["hasMore"], second["hasMore"], third["hasMore"]] == [True, True, False]
    assert [e["id"] for e in everything["items"]] == ids[::-1]
    assert [e["createdAt"] for e in everything["items"]] == sorted(
        (e["createdAt"] for e in everything["items"]), reverse=True
    )
    assert typed == {"items": [], "hasMore": False}
    signed = await api.http.get(
        EVENTS,
        params={"ownerAddress": owner.address, "type": "ping", "limit": "1"},
        headers=signed_headers(owner, "event.list", {"type": "ping", "limit": 1}),
    )
    assert signed.status_code == 200
    assert [e["id"] for e in signed.json()["items"]] == [ids[4]]
    # Another owner's event: not a cursor, not readable, not redeliverable.
    assert (await page(api, owner, headers, after=other)).status_code == 404
    for answer in [
        await api.http.get(
            f"{EVENTS}/{other}", params={"ownerAddress": owner.address}, headers=headers
        ),
        await api.http.post(
            f"{EVENTS}/{other}/redeliver",
            json={"ownerAddress": owner.address, "endpointId": endpoint["id"]},
            headers=headers,
        ),
    ]:
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    assert len(await deliveries_of(api.services, endpoint["id"])) == 5


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "-1"},
        {"limit": "x"},
        {"type": "invoice.nope"},
        {"after": "a" * 37},
        {"extra": "1"},
    ],
)
async def test_bad_event_queries_are_400(api: Api, params: dict[str, str]) -> None:
    owner, headers = await api.owner()

    answer = await page(api, owner, headers, **params)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"


async def test_events_are_filtered_by_the_status_of_their_deliveries(
    api: Api, hooks: Receiver
) -> None:
    owner, headers = await api.owner()
    stranger, stranger_headers = await api.owner()
    good = await create_endpoint(api, headers, owner, hooks.url("good"), ["*"])
    bad = await create_endpoint(api, headers, owner, REFUSED_URL, ["*"])
    theirs = await create_endpoint(api, stranger_headers, stranger, REFUSED_URL, ["*"])
    delivered = (await send_ping(api, owner, headers, good["id"]))["eventId"]
    failed = (await send_ping(api, owner, headers, bad["id"]))["eventId"]  # a ping: one try
    await send_ping(api, stranger, stranger_headers, theirs["id"])
    await cancelled_invoice(api, owner, headers)  # to both: one delivered, one retried
    await deliver_due(api.services)
    await cancelled_invoice(api, owner, headers)  # not tried yet
    newest_first = (await page(api, owner, headers, type="invoice.cancelled")).json()["items"]
    waiting, retried = (event["id"] for event in newest_first)

    async def ids(**params: str) -> list[str]:
        answer = await page(api, owner, headers, **params)
        assert answer.status_code == 200, answer.text
        return [event["id"] for event in answer.json()["items"]]

    assert await ids(deliveryStatus="pending") == [waiting, retried]
    assert await ids(deliveryStatus="failing") == [retried]
    assert await ids(deliveryStatus="delivered") == [retried, delivered]
    assert await ids(deliveryStatus="failed") == [failed]
    assert await ids(deliveryStatus="delivered", type="ping") == [delivered]
    assert await ids(deliveryStatus="delivered", limit="1") == [retried]
    assert await ids(deliveryStatus="delivered", after=retried) == [delivered]
    signed = await api.http.get(
        EVENTS,
        params={"ownerAddress": owner.address, "deliveryStatus": "failing"},
        headers=signed_headers(owner, "event.list", {"deliveryStatus": "failing"}),
    )
    assert [event["id"] for event in signed.json()["items"]] == [retried]


@pytest.mark.parametrize("value", ["nope", "", "Pending", "pending,failed"])
async def test_an_unknown_delivery_status_is_400(api: Api, value: str) -> None:
    owner, headers = await api.owner()

    answer = await page(api, owner, headers, deliveryStatus=value)

    problem = "Value error, must be one of pending, failing, delivered, failed"
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": "invalid_request",
            "message": f"invalid deliveryStatus: {problem}",
            "details": {"problems": [{"field": "deliveryStatus", "problem": problem}]},
        }
    }


async def test_redelivery_to_an_endpoint_keeps_the_event_id(api: Api, hooks: Receiver) -> None:
    owner, headers = await api.owner()
    stranger, stranger_headers = await api.owner()
    first = await create_endpoint(api, headers, owner, hooks.url("first"), ["*"])
    second = await create_endpoint(api, headers, owner, hooks.url("second"), ["*"])
    theirs = await create_endpoint(api, stranger_headers, stranger, hooks.url("theirs"), ["*"])
    event_id = (await send_ping(api, owner, headers, first["id"]))["eventId"]
    await deliver_due(api.services)
    clock_of(api.services).advance(1000)

    body = {"ownerAddress": owner.address, "endpointId": second["id"]}
    again = await api.http.post(
        f"{EVENTS}/{event_id}/redeliver",
        json=body,
        headers=signed_headers(
            owner, "event.redeliver", {"id": event_id, "endpointId": second["id"]}
        ),
    )
    refused = [
        await api.http.post(
            f"{EVENTS}/{event_id}/redeliver",
            json={"ownerAddress": owner.address, "endpointId": theirs["id"]},
            headers=headers,
        ),
        await api.http.post(
            f"{EVENTS}/{event_id}/redeliver",
            json={"ownerAddress": owner.address, "webhookUrl": True},
            headers=headers,
        ),
        await api.http.post(
            f"{EVENTS}/{event_id}/redeliver",
            json={"ownerAddress": owner.address, "webhookUrl": True, "endpointId": second["id"]},
            headers=headers,
        ),
        await api.http.post(
            f"{EVENTS}/{event_id}/redeliver", json={"ownerAddress": owner.address}, headers=headers
        ),
    ]
    await deliver_due(api.services)

    assert again.status_code == 202, again.text
    assert again.json()["endpointId"] == second["id"]
    (original,) = hooks.at("first")
    (redelivered,) = hooks.at("second")
    assert redelivered.body == original.body
    assert redelivered.headers["x-service-event-id"] == event_id
    assert hooks.at("theirs") == []
    assert [a.status_code for a in refused] == [404, 400, 400, 400]
    assert [a.json()["error"]["code"] for a in refused] == ["not_found"] + ["invalid_request"] * 3
    shown = (
        await api.http.get(
            f"{EVENTS}/{event_id}", params={"ownerAddress": owner.address}, headers=headers
        )
    ).json()
    assert [(d["endpointId"], d["status"]) for d in shown["deliveries"]] == [
        (first["id"], "delivered"),
        (second["id"], "delivered"),
    ]


async def test_an_events_deliveries_page_oldest_first_with_a_cursor(api: Api) -> None:
    """Redeliveries add deliveries to an event for its whole life: its detail pages them as
    the events list pages events (``after`` = the last id, ``hasMore``), in both auth
    modes; a cursor that is not one of this event's deliveries is 404."""
    owner, headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, REFUSED_URL, ["*"])
    event_id = (await send_ping(api, owner, headers, endpoint["id"]))["eventId"]
    redelivered = []
    for _ in range(4):
        clock_of(api.services).advance(1)
        answer = await api.http.post(
            f"{EVENTS}/{event_id}/redeliver",
            json={"ownerAddress": owner.address, "endpointId": endpoint["id"]},
            headers=headers,
        )
        redelivered.append(answer.json()["deliveryId"])
    await deliver_due(api.services)  # one failed attempt each

    pages, after = [], None
    while True:
        params: dict[str, Any] = {"ownerAddress": owner.address, "limit": 2}
        payload: dict[str, Any] = {"id": event_id, "limit": 2}
        if after is not None:
            params["after"] = payload["after"] = after
        page = await api.http.get(
            f"{EVENTS}/{event_id}",
            params=params,
            headers=signed_headers(owner, "event.get", payload),
        )
        assert page.status_code == 200, page.text
        pages.append(page.json())
        if not page.json()["hasMore"]:
            break
        after = page.json()["deliveries"][-1]["id"]

    assert [len(p["deliveries"]) for p in pages] == [2, 2, 1]
    assert [p["hasMore"] for p in pages] == [True, True, False]
    ids = [d["id"] for p in pages for d in p["deliveries"]]
    assert ids[1:] == redelivered  # the ping's own delivery first, then oldest first
    assert all(p["event"]["id"] == event_id for p in pages)
    assert all(len(d["attempts"]) == 1 for p in pages for d in p["deliveries"])
    whole = await api.http.get(
        f"{EVENTS}/{event_id}", params={"ownerAddress": owner.address}, headers=headers
    )
    assert ([d["id"] for d in whole.json()["deliveries"]], whole.json()["hasMore"]) == (ids, False)
    other_event = await send_ping(api, owner, headers, endpoint["id"])
    for cursor in (other_event["deliveryId"], "no-such-delivery"):
        stray = await api.http.get(
            f"{EVENTS}/{event_id}",
            params={"ownerAddress": owner.address, "after": cursor},
            headers=headers,
        )
        assert (stray.status_code, stray.json()["error"]["code"]) == (404, "not_found")
    for bad in ({"limit": "0"}, {"limit": "x"}, {"after": ""}, {"page": "2"}):
        refused = await api.http.get(
            f"{EVENTS}/{event_id}", params={"ownerAddress": owner.address, **bad}, headers=headers
        )
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_request")


async def test_an_endpoint_failing_for_three_days_is_disabled(api: Api) -> None:
    owner, headers = await api.owner()
    clock = clock_of(api.services)
    start = clock.now_ms()
    endpoint = await create_endpoint(api, headers, owner, REFUSED_URL, ["*"])
    # A cancelled invoice is an event to every endpoint that takes it.
    await cancelled_invoice(api, owner, headers)
    (delivery,) = await deliveries_of(api.services, endpoint["id"])

    attempts_at = []
    while True:
        await deliver_due(api.services)
        (delivery,) = await deliveries_of(api.services, endpoint["id"])
        attempts_at.append(clock.now_ms() - start)
        if delivery.status != EventStatus.PENDING:
            break
        clock.set(delivery.next_attempt_at)

    minute = 60_000
    assert attempts_at == [
        0, minute, 3 * minute, 7 * minute, 15 * minute, 31 * minute, 63 * minute,
        127 * minute, 255 * minute, 511 * minute, 1023 * minute,
        1023 * minute + 12 * HOUR_MS, 1023 * minute + 24 * HOUR_MS,
        1023 * minute + 36 * HOUR_MS, 1023 * minute + 48 * HOUR_MS, 72 * HOUR_MS,
    ]  # fmt: skip
    assert (delivery.status, delivery.attempts) == ("failed", 16)
    (shown,) = await listed(api, owner, headers)
    assert shown == {
        **endpoint,
        "enabled": False,
        "disabledReason": "every delivery attempt failed for 72 hours",
        "disabledAt": start + 72 * HOUR_MS,
        "failingSince": start,
        "updatedAt": start + 72 * HOUR_MS,
    }
    # Disabled: a new event does not go to it; enabled again, the next one does.
    await cancelled_invoice(api, owner, headers)
    assert len(await deliveries_of(api.services, endpoint["id"])) == 1
    enabled = await api.http.patch(
        ENDPOINTS,
        params={"id": endpoint["id"]},
        json={"ownerAddress": owner.address, "enabled": True},
        headers=headers,
    )
    assert (enabled.json()["enabled"], enabled.json()["disabledReason"]) == (True, None)
    assert enabled.json()["failingSince"] is None
    await cancelled_invoice(api, owner, headers)
    assert len(await deliveries_of(api.services, endpoint["id"])) == 2


async def test_a_success_in_between_keeps_the_endpoint_enabled(api: Api, hooks: Receiver) -> None:
    owner, headers = await api.owner()
    clock = clock_of(api.services)
    endpoint = await create_endpoint(api, headers, owner, hooks.url("flaky"), ["*"])
    hooks.answers["/flaky"] = [500] * 3  # then 200
    await cancelled_invoice(api, owner, headers)
    for _ in range(3):
        await deliver_due(api.services)
        (delivery,) = await deliveries_of(api.services, endpoint["id"])
        clock.set(delivery.next_attempt_at)
    await deliver_due(api.services)

    (delivery,) = await deliveries_of(api.services, endpoint["id"])
    assert (delivery.status, delivery.attempts) == ("delivered", 4)
    (shown,) = await listed(api, owner, headers)
    assert (shown["enabled"], shown["failingSince"]) == (True, None)


async def test_disabling_or_removing_an_endpoint_drops_its_pending_deliveries(api: Api) -> None:
    owner, headers = await api.owner()
    kept = await create_endpoint(api, headers, owner, REFUSED_URL, ["invoice.cancelled"])
    removed = await create_endpoint(api, headers, owner, REFUSED_URL, ["*"])
    await cancelled_invoice(api, owner, headers)

    await api.http.patch(
        ENDPOINTS,
        params={"id": kept["id"]},
        json={"ownerAddress": owner.address, "enabled": False},
        headers=headers,
    )
    await api.http.delete(
        ENDPOINTS, params={"ownerAddress": owner.address, "id": removed["id"]}, headers=headers
    )

    for endpoint in (kept, removed):
        (delivery,) = await deliveries_of(api.services, endpoint["id"])
        assert (delivery.status, delivery.attempts) == ("failed", 0)


async def test_events_past_the_retention_are_hidden_then_pruned(api: Api) -> None:
    owner, headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, "https://hooks.example/r", ["*"])
    old = (await send_ping(api, owner, headers, endpoint["id"]))["eventId"]
    clock_of(api.services).advance(1)
    new = (await send_ping(api, owner, headers, endpoint["id"]))["eventId"]
    retention_ms = int(api.services.settings.webhook_event_retention_s * 1000)
    clock_of(api.services).advance(retention_ms)

    listing = (await page(api, owner, headers)).json()
    gone = await api.http.get(
        f"{EVENTS}/{old}", params={"ownerAddress": owner.address}, headers=headers
    )
    pruned = await prune_events(api.services.db, api.services.clock.now_ms(), retention_ms)

    assert [e["id"] for e in listing["items"]] == [new]
    assert gone.status_code == 404
    assert pruned >= 1
    async with api.services.db.sessions() as session:
        left = list(await session.scalars(select(Event.id).where(Event.id.in_([old, new]))))
        stored = await session.get(EventEndpoint, endpoint["id"])
    assert left == [new]
    assert stored is not None


async def cancelled_invoice(api: Api, owner: LocalAccount, headers: dict[str, str]) -> str:
    """Create and delete an invoice (no chain needed): one invoice.cancelled event."""
    (chain,) = api.services.chains.all()
    created = await api.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner.address, "chainId": chain.config.chain_id, "amount": "1"},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    invoice_id = created.json()["invoiceId"]
    deleted = await api.http.delete(
        "/integration/invoices",
        params={
            "ownerAddress": owner.address,
            "chainId": str(chain.config.chain_id),
            "invoiceId": invoice_id,
        },
        headers=headers,
    )
    assert deleted.status_code == 200
    return str(invoice_id)


async def test_odd_values_in_every_field_are_4xx_never_500(api: Api) -> None:
    owner, headers = await api.owner()
    endpoint = await create_endpoint(api, headers, owner, "https://hooks.example/o", ["*"])
    event_id = (await send_ping(api, owner, headers, endpoint["id"]))["eventId"]
    valid = {"url": "https://hooks.example/o", "events": ["*"], "description": "d"}
    owner_only = {"ownerAddress": owner.address}
    statuses = set()

    for value in ODD_VALUES:
        for field in ("url", "events", "description"):
            answer = await api.http.post(
                ENDPOINTS, json={**owner_only, **valid, field: value}, headers=headers
            )
            statuses.add(answer.status_code)
        for field in ("url", "events", "description", "enabled"):
            answer = await api.http.patch(
                ENDPOINTS,
                params={"id": endpoint["id"]},
                json={**owner_only, field: value},
                headers=headers,
            )
            statuses.add(answer.status_code)
        for field in ("endpointId", "webhookUrl"):
            answer = await api.http.post(
                f"{EVENTS}/{event_id}/redeliver", json={**owner_only, field: value}, headers=headers
            )
            statuses.add(answer.status_code)
        if isinstance(value, str):
            for params in ({"type": value}, {"after": value}, {"limit": value}):
                statuses.add((await page(api, owner, headers, **params)).status_code)
            quoted = quote(value, safe="")
            shown_event = await api.http.get(
                f"{EVENTS}/{quoted}", params=owner_only, headers=headers
            )
            redelivered = await api.http.post(
                f"{EVENTS}/{quoted}/redeliver",
                json={**owner_only, "endpointId": endpoint["id"]},
                headers=headers,
            )
            statuses |= {shown_event.status_code, redelivered.status_code}

    # 307: "" makes /integration/events/, redirected to the list (slash).
    assert statuses <= {200, 201, 307, 400, 404, 405}, statuses
    assert 500 not in statuses
    (shown,) = [e for e in await listed(api, owner, headers) if e["id"] == endpoint["id"]]
    assert (shown["url"], shown["events"]) == ("https://hooks.example/o", ["*"])
