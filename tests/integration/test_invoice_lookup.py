"""Status lookup (live re-check), list and delete over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select, update

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.invoices import Invoice
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PATH = "/integration/invoices"
PAYER = DEV_PRIVATE_KEYS[5]


async def create(
    app: RunningApp, key: str, owner: LocalAccount, dev: DevDeployment, **fields: Any
) -> dict[str, Any]:
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}
    response = await app.http.post(PATH, json=body, headers=key_headers(key))
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def status(app: RunningApp, key: str, owner: str, payment_address: str) -> Any:
    return await app.http.get(
        f"{PATH}/status",
        params={"ownerAddress": owner, "paymentAddress": payment_address},
        headers=key_headers(key),
    )


async def test_status_rechecks_the_chain_partial_then_full(
    app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    invoice = await create(app, key, owner, dev, amount="10", tokenAddress=dev.token)
    escrow = invoice["paymentAddress"]

    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 4_000_000))
    partial = await status(app, key, owner.address, escrow)
    await evm.transact(PAYER, dev.token, encode_call(TEST_TOKEN, "transfer", escrow, 6_500_000))
    full = await status(app, key, owner.address, escrow)

    assert partial.status_code == 200
    assert set(partial.json()) == {"invoice"}
    assert partial.json()["invoice"]["status"] == "pending"
    assert partial.json()["invoice"]["balanceRaw"] == "4000000"
    assert partial.json()["invoice"]["metaBalance"] == "4"
    assert partial.json()["invoice"]["lastCheckedAt"] >= invoice["lastCheckedAt"]
    paid = full.json()["invoice"]
    assert paid["status"] == "paid" and paid["paid"] is True
    assert paid["paidAt"] is not None and paid["paidAt"] >= invoice["createdAt"]
    assert paid["balanceRaw"] == "10500000" and paid["metaBalance"] == "10.5"


async def test_status_native_payment(app: RunningApp, dev: DevDeployment, evm: EvmClient) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    invoice = await create(app, key, owner, dev, amount="0.01")

    await evm.transact(PAYER, invoice["paymentAddress"], b"", value=10**16)
    response = await status(app, key, owner.address, invoice["paymentAddress"])

    assert response.json()["invoice"]["status"] == "paid"
    assert response.json()["invoice"]["balanceRaw"] == str(10**16)


async def test_status_of_another_owners_invoice_is_404(app: RunningApp, dev: DevDeployment) -> None:
    alice, bob = new_owner(), new_owner()
    alice_key = await issue_api_key(app.services, alice)
    bob_key = await issue_api_key(app.services, bob)
    invoice = await create(app, alice_key, alice, dev)

    response = await status(app, bob_key, bob.address, invoice["paymentAddress"])
    unknown = await status(app, bob_key, bob.address, "0x" + "ab" * 20)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    "params",
    [{}, {"paymentAddress": "nope"}, {"paymentAddress": "0x" + "ab" * 20, "extra": "1"}],
)
async def test_status_bad_queries_are_400(app: RunningApp, params: dict[str, str]) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.get(
        f"{PATH}/status", params={"ownerAddress": owner.address, **params}, headers=key_headers(key)
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


async def test_list_filters_pages_and_orders(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    made = [await create(app, key, owner, dev, invoiceId=f"n-{i}") for i in range(5)]
    token_invoice = await create(app, key, owner, dev, invoiceId="t-1", tokenAddress=dev.token)
    # Spread creation times so ordering and date filters are exact.
    async with app.services.db.transaction() as session:
        for i, invoice in enumerate([*made, token_invoice]):
            await session.execute(
                update(Invoice).where(Invoice.id == invoice["id"]).values(created_at=1_000 + i)
            )

    async def list_(**params: Any) -> Any:
        response = await app.http.get(
            PATH, params={"ownerAddress": owner.address, **params}, headers=key_headers(key)
        )
        assert response.status_code == 200, response.text
        return response.json()

    everything = await list_()
    page2 = await list_(limit=2, page=2)
    tokens = await list_(tokenAddress=dev.token.lower())
    by_id = await list_(invoiceId="n-3")
    window = await list_(dateFrom=1_001, dateTo=1_003)
    unpaid = await list_(paid="false", chainId=dev.chain_id, status="pending")
    paid = await list_(paid="true")
    capped = await list_(limit=1000)

    assert everything["total"] == 6 and everything["page"] == 1 and everything["limit"] == 20
    assert [i["invoiceId"] for i in everything["items"]] == [
        "t-1",
        "n-4",
        "n-3",
        "n-2",
        "n-1",
        "n-0",
    ]
    assert [i["invoiceId"] for i in page2["items"]] == ["n-3", "n-2"]
    assert page2["total"] == 6 and page2["page"] == 2 and page2["limit"] == 2
    assert [i["invoiceId"] for i in tokens["items"]] == ["t-1"]
    assert [i["invoiceId"] for i in by_id["items"]] == ["n-3"]
    assert [i["invoiceId"] for i in window["items"]] == ["n-3", "n-2", "n-1"]
    assert unpaid["total"] == 6 and paid["total"] == 0
    assert capped["limit"] == 100


@pytest.mark.parametrize(
    "params",
    [
        {"page": "0"},
        {"limit": "0"},
        {"page": "-1"},
        {"limit": "x"},
        {"status": "lost"},
        {"paid": "yes"},
        {"chainId": "abc"},
        {"dateFrom": "yesterday"},
        {"tokenAddress": "0x12"},
        {"bogus": "1"},
    ],
)
async def test_list_bad_queries_are_400(app: RunningApp, params: dict[str, str]) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.get(
        PATH, params={"ownerAddress": owner.address, **params}, headers=key_headers(key)
    )

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_request"


async def test_list_never_shows_another_owners_invoices(
    app: RunningApp, dev: DevDeployment
) -> None:
    alice, bob = new_owner(), new_owner()
    alice_key = await issue_api_key(app.services, alice)
    bob_key = await issue_api_key(app.services, bob)
    await create(app, alice_key, alice, dev)

    response = await app.http.get(
        PATH, params={"ownerAddress": bob.address}, headers=key_headers(bob_key)
    )

    assert response.json() == {"items": [], "total": 0, "page": 1, "limit": 20}


async def test_delete_cancels_a_pending_invoice_and_hides_it(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    invoice = await create(app, key, owner, dev, invoiceId="del-1")
    params = {"ownerAddress": owner.address, "chainId": str(dev.chain_id), "invoiceId": "del-1"}

    deleted = await app.http.delete(PATH, params=params, headers=key_headers(key))
    after_first = await status(app, key, owner.address, invoice["paymentAddress"])
    again = await app.http.delete(PATH, params=params, headers=key_headers(key))
    listed = await app.http.get(
        PATH, params={"ownerAddress": owner.address}, headers=key_headers(key)
    )
    cancelled = await app.http.get(
        PATH,
        params={"ownerAddress": owner.address, "status": "cancelled"},
        headers=key_headers(key),
    )
    looked_up = await status(app, key, owner.address, invoice["paymentAddress"])
    recreate = await app.http.post(
        PATH,
        json={
            "ownerAddress": owner.address,
            "chainId": dev.chain_id,
            "amount": "1",
            "invoiceId": "del-1",
        },
        headers=key_headers(key),
    )

    assert deleted.status_code == 200
    assert deleted.json() == {"deleted": True, "invoiceId": "del-1", "chainId": dev.chain_id}
    # A retry (say after a timeout) gets the same answer and changes nothing.
    assert again.status_code == 200
    assert again.json() == deleted.json()
    assert looked_up.json()["invoice"]["updatedAt"] == after_first.json()["invoice"]["updatedAt"]
    assert listed.json()["total"] == 0
    assert [i["invoiceId"] for i in cancelled.json()["items"]] == ["del-1"]
    assert cancelled.json()["items"][0]["status"] == "cancelled"
    assert looked_up.json()["invoice"]["status"] == "cancelled"
    assert recreate.status_code == 409
    assert recreate.json()["error"]["code"] == "invoice_exists"


async def test_delete_of_a_paid_invoice_keeps_it_paid(
    app: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    invoice = await create(app, key, owner, dev, invoiceId="paid-del", amount="0.001")
    await evm.transact(PAYER, invoice["paymentAddress"], b"", value=10**15)
    await status(app, key, owner.address, invoice["paymentAddress"])

    response = await app.http.delete(
        PATH,
        params={
            "ownerAddress": owner.address,
            "chainId": str(dev.chain_id),
            "invoiceId": "paid-del",
        },
        headers=key_headers(key),
    )

    assert response.status_code == 200
    async with app.services.db.sessions() as session:
        row = await session.scalar(select(Invoice).where(Invoice.id == invoice["id"]))
    assert row is not None and row.status == "paid" and row.paid is True
    assert row.deleted_at is not None


async def test_delete_by_another_owner_is_404_and_changes_nothing(
    app: RunningApp, dev: DevDeployment
) -> None:
    alice, bob = new_owner(), new_owner()
    alice_key = await issue_api_key(app.services, alice)
    bob_key = await issue_api_key(app.services, bob)
    invoice = await create(app, alice_key, alice, dev, invoiceId="mine")

    response = await app.http.delete(
        PATH,
        params={"ownerAddress": bob.address, "chainId": str(dev.chain_id), "invoiceId": "mine"},
        headers=key_headers(bob_key),
    )

    assert response.status_code == 404
    looked_up = await status(app, alice_key, alice.address, invoice["paymentAddress"])
    assert looked_up.json()["invoice"]["status"] == "pending"


@pytest.mark.parametrize(
    "params",
    [
        {"chainId": "x", "invoiceId": "a"},
        {"invoiceId": "a"},
        {"chainId": "31337"},
        {"chainId": "31337", "invoiceId": "a" * 129},
    ],
)
async def test_delete_bad_queries_are_400(app: RunningApp, params: dict[str, str]) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)

    response = await app.http.delete(
        PATH, params={"ownerAddress": owner.address, **params}, headers=key_headers(key)
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


async def test_signature_mode_status_list_and_delete(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    invoice = await create(app, key, owner, dev, invoiceId="sig-del")

    looked_up = await signed_get(
        app.http,
        f"{PATH}/status",
        owner,
        "invoice.status",
        {"ownerAddress": owner.address, "paymentAddress": invoice["paymentAddress"]},
    )
    listed = await signed_get(
        app.http, PATH, owner, "invoice.list", {"ownerAddress": owner.address, "limit": "5"}
    )
    deleted = await signed_get(
        app.http,
        PATH,
        owner,
        "invoice.delete",
        {"ownerAddress": owner.address, "chainId": str(dev.chain_id), "invoiceId": "sig-del"},
        method="DELETE",
    )

    assert looked_up.status_code == 200 and looked_up.json()["invoice"]["id"] == invoice["id"]
    assert listed.status_code == 200 and listed.json()["total"] == 1
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
