"""The owner holds the salts: `salt` in every owner-facing invoice and the paid webhook, never
on the public payment page, and the NDJSON export of every escrow an owner ever had."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import pytest

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.escrows import escrow_address
from invoicing.chain.fake import FakeChain
from invoicing.invoices.export import export_escrows
from invoicing.monitor.passes import run_due_pass
from invoicing.services import Services
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.monitoring import clock_of, events_of, fake_services, new_invoice, reload
from tests.support.signing import new_owner

SALT = re.compile(r"0x[0-9a-f]{64}")
EXPORT = "/integration/escrows/export"


async def create(app: RunningApp, key: str, owner: str, chain_id: int, **fields: object) -> dict:
    response = await app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner, "chainId": chain_id, "amount": "1", **fields},
        headers=key_headers(key),
    )
    assert response.status_code == 201, response.text
    body: dict = response.json()
    return body


async def test_owner_representations_carry_the_salt_that_derives_the_escrow(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    created = await create(app, key, owner.address, dev.chain_id, invoiceId="salted")
    status = await app.http.get(
        "/integration/invoices/status",
        params={"ownerAddress": owner.address, "paymentAddress": created["paymentAddress"]},
        headers=key_headers(key),
    )
    listed = await app.http.get(
        "/integration/invoices", params={"ownerAddress": owner.address}, headers=key_headers(key)
    )

    salt = created["salt"]
    assert SALT.fullmatch(salt)
    assert (
        escrow_address(dev.factory, owner.address, bytes.fromhex(salt[2:]))
        == (created["paymentAddress"])
    )
    assert status.json()["invoice"]["salt"] == salt
    assert [item["salt"] for item in listed.json()["items"]] == [salt]


async def test_public_payment_routes_never_show_the_salt(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    created = await create(app, key, owner.address, dev.chain_id)
    salt_hex = created["salt"][2:]

    page = await app.http.get(f"/pay/{created['paymentAddress']}")
    status = await app.http.get(f"/pay/{created['paymentAddress']}/status")

    assert page.status_code == 200 and status.status_code == 200
    assert salt_hex not in page.text.lower()
    assert "salt" not in status.json()
    assert salt_hex not in status.text.lower()


@pytest.fixture
async def fake_services_(database_url: str, fake: FakeChain) -> AsyncIterator[Services]:
    built = fake_services(database_url, fake)
    yield built
    await built.db.dispose()


async def test_paid_webhook_payload_carries_the_salt(
    fake_services_: Services, fake: FakeChain
) -> None:
    invoice = await new_invoice(fake_services_, fake, amount="1")
    fake.pay(invoice.payment_address, 10**18)
    clock_of(fake_services_).advance(1000)

    await run_due_pass(fake_services_, fake)

    (event,) = await events_of(fake_services_, invoice)
    assert event.payload["salt"] == (await reload(fake_services_, invoice)).salt
    assert SALT.fullmatch(event.payload["salt"])


async def test_export_lists_every_escrow_oldest_first_in_both_auth_modes(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    native = await create(app, key, owner.address, dev.chain_id, invoiceId="a")
    token = await create(
        app, key, owner.address, dev.chain_id, invoiceId="b", tokenAddress=dev.token
    )
    cancelled = await create(app, key, owner.address, dev.chain_id, invoiceId="c")
    removed = await app.http.delete(
        "/integration/invoices",
        params={"ownerAddress": owner.address, "chainId": str(dev.chain_id), "invoiceId": "c"},
        headers=key_headers(key),
    )
    assert removed.status_code == 200
    await create(app, key, owner.address, dev.chain_id, invoiceId="d")
    other = new_owner()
    await create(app, await issue_api_key(app.services, other), other.address, dev.chain_id)

    params = {"ownerAddress": owner.address, "chainId": str(dev.chain_id)}
    by_key = await app.http.get(EXPORT, params=params, headers=key_headers(key))
    by_signature = await signed_get(app.http, EXPORT, owner, "escrow.export", params)

    assert by_key.status_code == 200, by_key.text
    assert by_key.headers["content-type"] == "application/x-ndjson"
    assert by_signature.status_code == 200, by_signature.text
    assert by_signature.text == by_key.text
    lines = [json.loads(line) for line in by_key.text.splitlines()]
    assert [line["invoiceId"] for line in lines] == ["a", "b", "c", "d"]
    assert lines[0] == {
        "paymentAddress": native["paymentAddress"],
        "salt": native["salt"],
        "tokenAddress": None,
        "invoiceId": "a",
        "status": "pending",
        "chainId": dev.chain_id,
        "factory": dev.factory,
    }
    assert lines[1]["tokenAddress"] == dev.token and lines[1]["salt"] == token["salt"]
    assert lines[2]["status"] == "cancelled" and lines[2]["salt"] == cancelled["salt"]
    assert by_key.text.endswith("\n")


async def test_export_reads_in_chunks_without_skipping_or_repeating(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    created = [
        await create(app, key, owner.address, dev.chain_id, invoiceId=f"n{i}") for i in range(5)
    ]

    lines = [
        json.loads(line)
        async for line in export_escrows(
            app.services.db, owner.address.lower(), dev.chain_id, (dev.factory,), 2
        )
    ]

    assert [line["paymentAddress"] for line in lines] == [c["paymentAddress"] for c in created]


async def test_export_refusals(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    await create(app, key, owner.address, dev.chain_id)
    intruder = new_owner()
    intruder_key = await issue_api_key(app.services, intruder)

    unknown_chain = await app.http.get(
        EXPORT,
        params={"ownerAddress": owner.address, "chainId": "999999"},
        headers=key_headers(key),
    )
    other_owner = await app.http.get(
        EXPORT,
        params={"ownerAddress": owner.address, "chainId": str(dev.chain_id)},
        headers=key_headers(intruder_key),
    )
    signed_by_other = await signed_get(
        app.http,
        EXPORT,
        intruder,
        "escrow.export",
        {"ownerAddress": owner.address, "chainId": str(dev.chain_id)},
    )
    no_credentials = await app.http.get(
        EXPORT, params={"ownerAddress": owner.address, "chainId": str(dev.chain_id)}
    )
    bad_chain = await app.http.get(
        EXPORT, params={"ownerAddress": owner.address, "chainId": "x"}, headers=key_headers(key)
    )

    assert unknown_chain.status_code == 400
    assert unknown_chain.json()["error"]["code"] == "unsupported_chain"
    assert other_owner.status_code == 403
    assert other_owner.json()["error"]["code"] == "forbidden"
    assert signed_by_other.status_code == 401
    assert no_credentials.status_code == 401
    assert bad_chain.status_code == 400
    assert bad_chain.json()["error"]["code"] == "invalid_request"
    for refused in (other_owner, signed_by_other, no_credentials):
        assert "salt" not in refused.text
