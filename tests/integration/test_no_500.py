"""Hostile input never gets a 500: every field of every invoice route gets odd values."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from invoicing.chain.deploy import DevDeployment
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.odd_values import ODD_VALUES
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

BODY_FIELDS = [
    "chainId",
    "amount",
    "invoiceId",
    "tokenAddress",
    "webhookUrl",
    "description",
    "expiresAt",
    "metadata",
]
QUERY_VALUES = ["", "-1", "0", "1e3", "true", "0x", "\u00e9", "%00", "9" * 40, "null"]


async def test_odd_create_bodies_get_4xx(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    statuses = set()
    for field in BODY_FIELDS:
        for value in ODD_VALUES:
            body = {
                "ownerAddress": owner.address,
                "chainId": dev.chain_id,
                "amount": "1",
                field: value,
            }
            try:
                response = await app.http.post(
                    "/integration/invoices", json=body, headers=key_headers(key)
                )
            except ValueError:
                continue  # not representable as JSON (e.g. inf)
            statuses.add(response.status_code)
            assert response.status_code < 500, (field, value, response.text)
            if response.status_code >= 400:
                assert set(response.json()["error"]) >= {"code", "message"}
    assert statuses <= {200, 201, 400, 409}


@pytest.mark.parametrize("path", ["/integration/invoices", "/integration/invoices/status"])
async def test_odd_queries_get_4xx(app: RunningApp, path: str) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    names = [
        "chainId",
        "status",
        "paid",
        "tokenAddress",
        "invoiceId",
        "page",
        "limit",
        "dateFrom",
        "dateTo",
        "paymentAddress",
    ]
    for name in names:
        for value in QUERY_VALUES:
            response = await app.http.get(
                path, params={"ownerAddress": owner.address, name: value}, headers=key_headers(key)
            )
            assert response.status_code < 500, (name, value, response.text)


@pytest.mark.parametrize(
    "headers",
    [
        {"x-service-api-key": ""},
        {"x-service-api-key": "x" * 5000},
        {"x-service-signature": "", "x-service-timestamp": ""},
        {"x-service-signature": "0x" + "ff" * 65, "x-service-timestamp": "1"},
        {
            "x-service-signature": "0x\u00e9".encode("latin-1"),
            "x-service-timestamp": "1760000000000",
        },
    ],
)
async def test_odd_credentials_get_401(
    app: RunningApp, dev: DevDeployment, headers: dict[str, Any]
) -> None:
    owner = new_owner()
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}

    response = await app.http.post("/integration/invoices", json=body, headers=headers)

    assert response.status_code == 401


@pytest.mark.parametrize(
    "change",
    [
        {"invoiceId": "a\u0000b"},
        {"description": "\u0000"},
        {"metadata": {"k\u0000": 1}},
        {"metadata": {"list": ["ok", "x\u0000"]}},
    ],
)
async def test_nul_characters_are_refused_and_create_nothing(
    app: RunningApp, dev: DevDeployment, change: dict[str, Any]
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **change}

    response = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
    listed = await app.http.get(
        "/integration/invoices", params={"ownerAddress": owner.address}, headers=key_headers(key)
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert listed.json()["total"] == 0


@pytest.mark.parametrize(
    "raw_change",
    [
        '"description": "\\ud800"',
        '"metadata": {"k": "\\udfff x"}',
        '"metadata": {"n": NaN}',
        '"metadata": {"n": -Infinity}',
        '"metadata": {"n": 1e400}',
    ],
)
async def test_lone_surrogates_and_non_finite_numbers_are_refused_and_create_nothing(
    app: RunningApp, dev: DevDeployment, raw_change: str
) -> None:
    """Neither has a form to store in PostgreSQL or to sign: refused as the body is read."""
    response, listed = await create_raw(app, dev, raw_change)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert listed.json()["total"] == 0


async def test_nul_in_a_query_is_refused(app: RunningApp) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.get(
        "/integration/invoices",
        params={"ownerAddress": owner.address, "invoiceId": "a\u0000"},
        headers=key_headers(key),
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


ODD_HEADER_VALUES = [b"\xb2", b"1\xb2", b"\xb9\xb2\xb3", b"\xff" * 10, b"1" * 17, b"-1", b"1 1"]


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_odd_credential_header_values_get_401(
    app: RunningApp, dev: DevDeployment, method: str
) -> None:
    """Every credential header, with values that are not what the header must hold (digits
    that int() refuses among them), on a signed GET and a signed POST."""
    owner = new_owner()
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    well_formed = {"x-service-signature": b"0x" + b"11" * 65, "x-service-timestamp": b"1"}
    for name in ("x-service-api-key", "x-service-signature", "x-service-timestamp"):
        for value in ODD_HEADER_VALUES:
            headers = {name: value}
            if name != "x-service-api-key":
                headers = {**well_formed, name: value}
            if method == "GET":
                response = await app.http.get(
                    "/integration/invoices", params={"ownerAddress": owner.address}, headers=headers
                )
            else:
                response = await app.http.post("/integration/invoices", json=body, headers=headers)
            assert response.status_code == 401, (name, value, response.text)
            assert response.json()["error"]["code"] in {"unauthorized", "timestamp_out_of_window"}


@pytest.mark.parametrize(
    ("raw_change", "prefix"),
    [('"amount": "2"', ""), ('"metadata": {"k": 1, "k": 2}', ""), ('"description": "x"', "\ufeff")],
)
async def test_duplicate_keys_and_a_byte_order_mark_are_refused_and_create_nothing(
    app: RunningApp, dev: DevDeployment, raw_change: str, prefix: str
) -> None:
    """A key sent twice (which value would be signed?) and a body that is not plain JSON."""
    response, listed = await create_raw(app, dev, raw_change, prefix)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert listed.json()["total"] == 0


async def create_raw(
    app: RunningApp, dev: DevDeployment, raw_change: str, prefix: str = ""
) -> tuple[httpx.Response, httpx.Response]:
    """A create whose body is written by hand (``prefix``, then a valid body with
    ``raw_change`` added), and the owner's invoice list after it."""
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    raw = (
        f'{prefix}{{"ownerAddress": "{owner.address}", "chainId": {dev.chain_id}, '
        f'"amount": "1", {raw_change}}}'
    )
    response = await app.http.post(
        "/integration/invoices",
        content=raw.encode(),
        headers={**key_headers(key), "content-type": "application/json"},
    )
    listed = await app.http.get(
        "/integration/invoices", params={"ownerAddress": owner.address}, headers=key_headers(key)
    )
    return response, listed
