"""/integration/settings/notifications as an integrator drives it, in both modes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.signing import new_owner, signed_headers

MAIL = "/integration/settings/notifications"
NONE_SET = {"email": None, "events": [], "language": "en", "receipts": False}


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_mail_settings_in_both_modes(app: RunningApp) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))
    query = {"ownerAddress": owner.address}
    events = ["invoice.paid", "invoice.expired", "subscription.charged"]
    body = {"email": "owner@shop.example", "events": events}

    default = await app.http.get(MAIL, params=query, headers=headers)
    put = await app.http.put(
        MAIL,
        json={"ownerAddress": owner.address, **body},
        headers=signed_headers(owner, "notifications.update", body),
    )
    read = await signed_get(app.http, MAIL, owner, "notifications.get", query)
    by_key = await app.http.put(
        MAIL,
        json={
            "ownerAddress": owner.address,
            "email": "x@shop.example",
            "events": [],
            "language": "ja",
            "receipts": True,
        },
        headers=headers,
    )

    assert default.status_code == 200 and default.json() == NONE_SET
    assert put.status_code == 200, put.text
    assert put.json() == {**body, "language": "en", "receipts": False}
    assert read.json() == {**body, "language": "en", "receipts": False}
    assert by_key.json() == {
        "email": "x@shop.example",
        "events": [],
        "language": "ja",
        "receipts": True,
    }


@pytest.mark.parametrize(
    "body",
    [
        {"email": "owner@shop.example"},
        {"events": ["invoice.paid"]},
        {"email": "owner@shop.example", "events": ["invoice.nope"]},
        {"email": "owner@shop.example", "events": ["subscription.nope"]},
        {"email": "owner@shop.example\r\nBcc: x@evil.example", "events": []},
        {"email": "Owner <owner@shop.example>", "events": []},
        {"email": "owner@localhost", "events": []},
        {"email": "owner@shop.example", "events": "invoice.paid"},
        {"email": "owner@shop.example", "events": [], "language": "xx"},
        {"email": "owner@shop.example", "events": [], "other": 1},
        {"email": "owner@shop.example", "events": [], "receipts": "yes"},
    ],
)
async def test_bad_mail_settings_are_400_and_change_nothing(
    app: RunningApp, body: dict[str, Any]
) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))

    response = await app.http.put(
        MAIL, json={"ownerAddress": owner.address, **body}, headers=headers
    )
    read = await app.http.get(MAIL, params={"ownerAddress": owner.address}, headers=headers)

    refused(response, 400, "invalid_request")
    assert read.json() == NONE_SET


async def test_another_owners_mail_cannot_be_changed(app: RunningApp) -> None:
    alice, mallory = new_owner(), new_owner()
    mallory_key = await issue_api_key(app.services, mallory)
    body = {"email": "mallory@evil.example", "events": ["invoice.paid"]}

    response = await app.http.put(
        MAIL, json={"ownerAddress": alice.address, **body}, headers=key_headers(mallory_key)
    )
    read = await signed_get(
        app.http, MAIL, alice, "notifications.get", {"ownerAddress": alice.address}
    )

    refused(response, 403, "forbidden")
    assert read.json() == NONE_SET
