"""POST /integration/invoices over real HTTP, on anvil and the test database."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from sqlalchemy import select

from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.invoices import Invoice
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers, signed_post
from tests.support.chain import read_view
from tests.support.invoices import PATH, count_invoices
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration


async def test_create_native_invoice_returns_the_spec_shape(
    app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "1.5",
        "invoiceId": "order-1",
        "description": "Two coffees",
        "metadata": {"cart": [1, 2]},
        "webhookUrl": "http://127.0.0.1:9/hook",
    }

    response = await app.http.post(PATH, json=body, headers=key_headers(key))

    assert response.status_code == 201
    invoice = response.json()
    assert set(invoice) == {
        "id",
        "ownerAddress",
        "chainId",
        "invoiceId",
        "paymentAddress",
        "salt",
        "capture",
        "amount",
        "tokenAddress",
        "description",
        "metadata",
        "expiresAt",
        "status",
        "paid",
        "paidAt",
        "withdrawn",
        "withdrawnAt",
        "requiredRaw",
        "balanceRaw",
        "metaBalance",
        "lastCheckedAt",
        "createdAt",
        "updatedAt",
        "url",
    }
    assert invoice["ownerAddress"] == owner.address
    assert invoice["chainId"] == dev.chain_id
    assert invoice["invoiceId"] == "order-1"
    assert invoice["capture"] == "automatic"
    assert invoice["amount"] == "1.5"
    assert invoice["tokenAddress"] is None
    assert invoice["description"] == "Two coffees"
    assert invoice["metadata"] == {"cart": [1, 2]}
    assert invoice["status"] == "pending"
    assert invoice["paid"] is False and invoice["paidAt"] is None
    assert invoice["withdrawn"] is False and invoice["withdrawnAt"] is None
    assert invoice["requiredRaw"] == "1500000000000000000"
    assert invoice["balanceRaw"] == "0"
    assert invoice["metaBalance"] == "0"
    assert invoice["createdAt"] == invoice["updatedAt"] == invoice["lastCheckedAt"]
    assert invoice["expiresAt"] == invoice["createdAt"] + 24 * 3600 * 1000
    assert invoice["url"] == f"http://pay.test/pay/{invoice['paymentAddress']}"
    assert "webhookUrl" not in invoice
    # The escrow address is the factory's own prediction for the stored salt.
    async with app.services.db.sessions() as session:
        row = await session.scalar(select(Invoice).where(Invoice.id == invoice["id"]))
    assert row is not None and row.webhook_url == "http://127.0.0.1:9/hook"
    salt = bytes.fromhex(row.salt[2:])
    predicted = await read_view(
        evm, dev.factory, PAYMENT_FACTORY, "predictEscrow", owner.address, salt
    )
    assert predicted == invoice["paymentAddress"]


async def test_erc20_amount_uses_the_token_decimals(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "25.000001",
        "tokenAddress": dev.token.lower(),
    }

    response = await app.http.post(PATH, json=body, headers=key_headers(key))

    assert response.status_code == 201
    invoice = response.json()
    assert invoice["requiredRaw"] == "25000001"
    assert invoice["tokenAddress"] == dev.token
    assert "description" not in invoice and "metadata" not in invoice


async def test_identical_retry_returns_the_same_invoice_and_a_difference_conflicts(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "2",
        "invoiceId": "retry-1",
    }
    first = await app.http.post(PATH, json=body, headers=key_headers(key))

    again = await app.http.post(PATH, json=body, headers=key_headers(key))
    different = await app.http.post(PATH, json={**body, "amount": "3"}, headers=key_headers(key))

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == first.json()
    assert different.status_code == 409
    assert different.json()["error"]["code"] == "invoice_exists"
    assert await count_invoices(app, owner.address) == 1


async def test_generated_ids_follow_the_owner_sequence_and_skip_taken_ones(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    base = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
    await app.http.post(PATH, json={**base, "invoiceId": "2"}, headers=key_headers(key))

    ids = [
        (await app.http.post(PATH, json=base, headers=key_headers(key))).json()["invoiceId"]
        for _ in range(3)
    ]

    assert ids == ["1", "3", "4"]


async def test_generated_ids_are_unique_under_concurrent_requests(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    base = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}

    responses = await asyncio.gather(
        *(app.http.post(PATH, json=base, headers=key_headers(key)) for _ in range(12))
    )

    assert [r.status_code for r in responses] == [201] * 12
    assert sorted(int(r.json()["invoiceId"]) for r in responses) == list(range(1, 13))
    assert len({r.json()["paymentAddress"] for r in responses}) == 12


async def test_signature_mode_create(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "0.25",
        "invoiceId": "sig-1",
    }

    response = await signed_post(app.http, PATH, owner, "invoice.create", body)

    assert response.status_code == 201, response.text
    assert response.json()["requiredRaw"] == "250000000000000000"
    async with app.services.db.sessions() as session:
        row = await session.scalar(select(Invoice).where(Invoice.id == response.json()["id"]))
    assert row is not None and row.auth_mode == "signature"
    assert row.auth_signature and row.auth_timestamp


BAD_BODIES = [
    ({"amount": "0"}, "invalid_request"),
    ({"amount": "-1"}, "invalid_request"),
    ({"amount": "1e5"}, "invalid_request"),
    ({"amount": "1."}, "invalid_request"),
    ({"amount": ".5"}, "invalid_request"),
    ({"amount": 1.5}, "invalid_request"),
    ({"amount": "0.0000000000000000001"}, "invalid_request"),
    ({"chainId": "31337"}, "invalid_request"),
    ({"chainId": True}, "invalid_request"),
    ({"chainId": 999}, "unsupported_chain"),
    ({"tokenAddress": "0x" + "12" * 20}, "unsupported_token"),
    ({"tokenAddress": "0x1234"}, "invalid_request"),
    ({"expiresAt": 1_000}, "invalid_request"),
    ({"expiresAt": "soon"}, "invalid_request"),
    ({"invoiceId": "x" * 129}, "invalid_request"),
    ({"invoiceId": ""}, "invalid_request"),
    ({"description": "d" * 1001}, "invalid_request"),
    ({"metadata": {"blob": "m" * 16_400}}, "invalid_request"),
    ({"metadata": [1, 2]}, "invalid_request"),
    ({"webhookUrl": "ftp://example.com/hook"}, "invalid_request"),
    ({"webhookUrl": "/relative"}, "invalid_request"),
    ({"webhookUrl": "https://example.com/" + "a" * 2048}, "invalid_request"),
    ({"unexpected": 1}, "invalid_request"),
]


@pytest.mark.parametrize(("change", "code"), BAD_BODIES)
async def test_bad_bodies_are_refused_with_400_and_create_nothing(
    app: RunningApp, dev: DevDeployment, change: dict[str, object], code: str
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **change}

    response = await app.http.post(PATH, json=body, headers=key_headers(key))

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code
    assert isinstance(response.json()["error"]["message"], str)
    assert await count_invoices(app, owner.address) == 0


@pytest.mark.parametrize(
    ("content", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, "invalid_request"),
        (b"[1, 2]", "application/json", 400, "invalid_request"),
        (b'"text"', "application/json", 400, "invalid_request"),
        (b"\xff\xfe", "application/json", 400, "invalid_request"),
        (b'{"amount": "1", "amount": "2"}', "application/json", 400, "invalid_request"),
        (b'{"amount": "1"}', "text/plain", 400, "invalid_request"),
        (b"[" * 100_000, "application/json", 413, "payload_too_large"),
    ],
)
async def test_malformed_bodies(
    app: RunningApp, content: bytes, content_type: str, status: int, code: str
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.post(
        PATH, content=content, headers={**key_headers(key), "content-type": content_type}
    )

    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_oversized_body_is_413(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "amount": "1",
        "metadata": {"blob": "x" * 70_000},
    }

    response = await app.http.post(
        PATH,
        content=json.dumps(body),
        headers={**key_headers(key), "content-type": "application/json"},
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert await count_invoices(app, owner.address) == 0


@pytest.mark.parametrize(
    "owner_address",
    ["0x1234", "not-an-address", 42, None, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92267".upper()],
)
async def test_bad_owner_address(
    app: RunningApp, dev: DevDeployment, owner_address: object
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner_address, "chainId": dev.chain_id, "amount": "1"}

    response = await app.http.post(PATH, json=body, headers=key_headers(key))

    assert response.status_code in (400, 403)
    assert response.json()["error"]["code"] in ("invalid_request", "forbidden")


async def test_mixed_case_owner_with_a_wrong_checksum_is_refused(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    address = owner.address
    flipped = address[:2] + "".join(
        c.lower() if c.isupper() else c.upper() if c.isalpha() else c for c in address[2:]
    )
    assert re.search("[a-f]", flipped[2:]) and re.search("[A-F]", flipped[2:])

    response = await app.http.post(
        PATH,
        json={"ownerAddress": flipped, "chainId": dev.chain_id, "amount": "1"},
        headers=key_headers(key),
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
