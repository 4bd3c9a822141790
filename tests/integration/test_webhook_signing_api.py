"""/integration/webhook-secrets and /integration/settings as an integrator drives them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount

from invoicing.auth.secrets import ServerSecrets
from invoicing.notifications.signing import active_secrets
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get, signed_post
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers

SECRETS = "/integration/webhook-secrets"
SETTINGS = "/integration/settings"


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def stored_secrets(app: RunningApp, owner: str) -> list[str]:
    async with app.services.db.sessions() as session:
        found = await active_secrets(session, owner, ServerSecrets.of(app.services.settings))
    return [secret.get_secret_value() for secret in found]


async def create_signed(app: RunningApp, owner: LocalAccount) -> httpx.Response:
    return await signed_post(
        app.http, SECRETS, owner, "webhook_secret.create", {"ownerAddress": owner.address}
    )


async def list_signed(app: RunningApp, owner: LocalAccount) -> httpx.Response:
    return await signed_get(
        app.http, SECRETS, owner, "webhook_secret.list", {"ownerAddress": owner.address}
    )


async def revoke_signed(app: RunningApp, owner: LocalAccount, secret_id: str) -> httpx.Response:
    params = {"ownerAddress": owner.address, "id": secret_id}
    return await signed_get(
        app.http, SECRETS, owner, "webhook_secret.revoke", params, method="DELETE"
    )


async def test_secret_lifecycle_in_signature_mode(app: RunningApp) -> None:
    owner = new_owner()

    created = await create_signed(app, owner)
    listed = await list_signed(app, owner)
    revoked = await revoke_signed(app, owner, created.json()["id"])
    after = await list_signed(app, owner)

    assert created.status_code == 201, created.text
    secret = created.json()
    assert set(secret) == {"id", "secret", "createdAt"}
    assert secret["secret"].startswith("whsec_")
    assert listed.json() == {
        "items": [{"id": secret["id"], "createdAt": secret["createdAt"], "revokedAt": None}]
    }
    assert secret["secret"] not in listed.text
    assert revoked.status_code == 200
    assert revoked.json() == {
        "revoked": True,
        "id": secret["id"],
        "revokedAt": after.json()["items"][0]["revokedAt"],
    }
    assert after.json()["items"][0]["revokedAt"] >= secret["createdAt"]
    assert await stored_secrets(app, owner.address) == []


async def test_secret_lifecycle_with_an_api_key(app: RunningApp) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))

    created = await app.http.post(SECRETS, json={"ownerAddress": owner.address}, headers=headers)
    listed = await app.http.get(SECRETS, params={"ownerAddress": owner.address}, headers=headers)
    secret = created.json()
    params = {"ownerAddress": owner.address, "id": secret["id"]}
    before_revoke = await stored_secrets(app, owner.address)
    revoked = await app.http.delete(SECRETS, params=params, headers=headers)

    assert created.status_code == 201, created.text
    assert [item["id"] for item in listed.json()["items"]] == [secret["id"]]
    assert before_revoke == [secret["secret"]]
    assert revoked.status_code == 200
    assert await stored_secrets(app, owner.address) == []


async def test_revoking_another_owners_secret_is_404_and_keeps_it(app: RunningApp) -> None:
    alice, bob = new_owner(), new_owner()
    secret = (await create_signed(app, alice)).json()

    response = await revoke_signed(app, bob, secret["id"])

    refused(response, 404, "not_found")
    assert await stored_secrets(app, alice.address) == [secret["secret"]]


async def test_another_owners_api_key_is_403_and_creates_nothing(app: RunningApp) -> None:
    alice, mallory = new_owner(), new_owner()
    mallory_key = await issue_api_key(app.services, mallory)

    response = await app.http.post(
        SECRETS, json={"ownerAddress": alice.address}, headers=key_headers(mallory_key)
    )

    refused(response, 403, "forbidden")
    assert await stored_secrets(app, alice.address) == []


async def test_a_sixth_active_secret_is_refused(app: RunningApp) -> None:
    owner = new_owner()
    for _ in range(5):
        assert (await create_signed(app, owner)).status_code == 201

    sixth = await create_signed(app, owner)

    refused(sixth, 409, "too_many_webhook_secrets")
    assert sixth.json()["error"]["details"] == {"maxActive": 5}
    assert len(await stored_secrets(app, owner.address)) == 5


async def test_secret_issuance_is_rate_limited_per_owner(make_services: MakeServices) -> None:
    services = await make_services(webhook_secret_issuance_per_hour=2)
    owner = new_owner()
    headers = key_headers(await issue_api_key(services, owner))
    async with serve(create_app(services)) as base_url, httpx.AsyncClient(base_url=base_url) as h:
        answers = [
            await h.post(SECRETS, json={"ownerAddress": owner.address}, headers=headers)
            for _ in range(3)
        ]
    async with services.db.sessions() as session:
        stored = await active_secrets(session, owner.address, ServerSecrets.of(services.settings))

    assert [a.status_code for a in answers] == [201, 201, 429]
    refused(answers[2], 429, "rate_limited")
    assert len(stored) == 2


async def test_a_signature_for_another_action_is_refused(app: RunningApp) -> None:
    owner = new_owner()
    headers = signed_headers(owner, "webhook_secret.list", {})

    response = await app.http.post(SECRETS, json={"ownerAddress": owner.address}, headers=headers)

    refused(response, 401, "unauthorized")
    assert await stored_secrets(app, owner.address) == []


@pytest.mark.parametrize(
    ("method", "params", "body"),
    [
        ("POST", None, {"extra": 1}),
        ("POST", None, {"ownerAddress": "0x1234"}),
        ("DELETE", {}, None),
        ("DELETE", {"id": ""}, None),
        ("DELETE", {"id": "x" * 37}, None),
        ("DELETE", {"id": "a", "other": "b"}, None),
        ("GET", {"limit": "5"}, None),
    ],
)
async def test_bad_secret_requests_are_400(
    app: RunningApp, method: str, params: dict[str, str] | None, body: dict[str, Any] | None
) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))
    if body is not None:
        response = await app.http.post(
            SECRETS, json={"ownerAddress": owner.address, **body}, headers=headers
        )
    else:
        all_params = {"ownerAddress": owner.address, **(params or {})}
        response = await app.http.request(method, SECRETS, params=all_params, headers=headers)

    refused(response, 400, "invalid_request")
    assert await stored_secrets(app, owner.address) == []


async def test_settings_in_both_modes(app: RunningApp) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))
    query = {"ownerAddress": owner.address}

    default = await app.http.get(SETTINGS, params=query, headers=headers)
    put = await app.http.put(
        SETTINGS,
        json={"ownerAddress": owner.address, "webhookApiKeyHeader": False},
        headers=signed_headers(owner, "settings.update", {"webhookApiKeyHeader": False}),
    )
    read = await signed_get(app.http, SETTINGS, owner, "settings.get", query)
    back_on = await app.http.put(
        SETTINGS, json={"ownerAddress": owner.address, "webhookApiKeyHeader": True}, headers=headers
    )

    assert default.status_code == 200 and default.json() == {
        "webhookApiKeyHeader": True,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
    assert put.status_code == 200 and put.json() == {
        "webhookApiKeyHeader": False,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
    assert read.status_code == 200 and read.json() == {
        "webhookApiKeyHeader": False,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
    assert back_on.json() == {
        "webhookApiKeyHeader": True,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"webhookApiKeyHeader": "false"},
        {"webhookApiKeyHeader": 0},
        {"webhookApiKeyHeader": None},
        {"webhookApiKeyHeader": False, "other": True},
    ],
)
async def test_bad_settings_are_400_and_change_nothing(
    app: RunningApp, body: dict[str, Any]
) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))

    response = await app.http.put(
        SETTINGS, json={"ownerAddress": owner.address, **body}, headers=headers
    )
    read = await app.http.get(SETTINGS, params={"ownerAddress": owner.address}, headers=headers)

    refused(response, 400, "invalid_request")
    assert read.json() == {
        "webhookApiKeyHeader": True,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }


async def test_settings_of_another_owner_cannot_be_changed(app: RunningApp) -> None:
    alice, mallory = new_owner(), new_owner()
    mallory_key = await issue_api_key(app.services, mallory)

    response = await app.http.put(
        SETTINGS,
        json={"ownerAddress": alice.address, "webhookApiKeyHeader": False},
        headers=key_headers(mallory_key),
    )
    forged = await app.http.put(
        SETTINGS,
        json={"ownerAddress": alice.address, "webhookApiKeyHeader": False},
        headers=signed_headers(
            mallory,
            "settings.update",
            {
                "webhookApiKeyHeader": False,
                "underpaymentToleranceBps": 0,
                "captureWindowS": 604800,
                "captureAtWindowEnd": True,
                "reportingCurrency": None,
            },
            owner_address=alice.address,
        ),
    )
    read = await signed_get(
        app.http, SETTINGS, alice, "settings.get", {"ownerAddress": alice.address}
    )

    refused(response, 403, "forbidden")
    refused(forged, 401, "unauthorized")
    assert read.json() == {
        "webhookApiKeyHeader": True,
        "underpaymentToleranceBps": 0,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
