"""A subscription's payer who holds no native coin, on anvil over real HTTP: the payer signs
an EIP-2612 permit with the subscription and the relayer carries it before the first charge
(through the payment seam, on the owner's share); later the payer signs a cancellation and
the relayer carries that too. Every refusal is a documented 4xx with nothing sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.abi import encode_call
from invoicing.chain.answers import ContractRevert
from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.artifacts import SUBSCRIPTIONS
from invoicing.chain.config import TokenConfig
from invoicing.chain.deploy import DevDeployment, subscriptions_address
from invoicing.chain.evm import EvmClient
from invoicing.payments.subscriptions.periods import charge_due_once
from invoicing.payments.subscriptions.service import find_subscription, terms_of
from invoicing.tables.settlement import TxPurpose
from invoicing.web.app import create_app
from tests.conftest import RunningApp
from tests.support.gasless import funded_payer, now_s
from tests.support.server import serve
from tests.support.subscription_payer import (
    AMOUNT_RAW,
    PERIOD_S,
    allowance,
    offered,
    permit_for,
    sent,
    signed,
    token_balance,
)
from tests.support.subscriptions import later, own_chain
from tests.support.withdrawals import settle_all

pytestmark = pytest.mark.integration

ALL = (TxPurpose.SUBSCRIPTION_PERMIT, TxPurpose.SUBSCRIPTION_CHARGE, TxPurpose.SUBSCRIPTION_CANCEL)


# A chain of its own (see own_chain).
anvil, evm, dev = own_chain(31_339)


async def sent_all(app: RunningApp) -> list[int]:
    return [await sent(app.services, purpose) for purpose in ALL]


def plus(base: list[int], *more: int) -> list[int]:
    return [a + b for a, b in zip(base, more, strict=True)]


async def signed_body(
    evm: EvmClient, dev: DevDeployment, payer: LocalAccount, created: dict[str, Any], **permit: Any
) -> dict[str, Any]:
    """The page's authorization: the subscription's signature and a permit of 10 periods."""
    deadline = await now_s(evm) + 3600
    made = await permit_for(
        evm, dev, payer.key, payer.address, subscriptions_address(), 10 * AMOUNT_RAW, deadline
    )
    return {
        "signature": signed(payer.key, created["authorization"]["typedData"]),
        "permit": {**made, **permit},
    }


async def test_the_permit_is_relayed_before_the_first_charge_and_the_payer_cancels_by_signature(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, _headers, created = await offered(app.services, app.http, dev)
    payer = await funded_payer(evm, dev, 10_000_000)  # no native coin at all
    base = await sent_all(app)
    body = await signed_body(evm, dev, payer, created)
    path = f"/subscribe/{created['id']}/authorization"

    first = await app.http.post(path, json=body)
    again = await app.http.post(path, json=body)

    assert first.status_code == 200, first.text
    assert first.json()["subscription"]["status"] == "active"
    assert first.json()["subscription"]["payer"] == payer.address
    assert again.status_code == 200, again.text
    assert await sent_all(app) == plus(
        base, 1, 1, 0
    )  # one permit, one charge; the repeat sent nothing
    await settle_all(app.services)
    assert await evm.get_balance(payer.address) == 0  # the payer paid no gas
    contract = subscriptions_address()
    assert await allowance(evm, dev, payer.address, contract) == 9 * AMOUNT_RAW
    escrow = first.json()["subscription"]["charges"][0]["paymentAddress"]
    assert await token_balance(evm, dev, escrow) == AMOUNT_RAW

    sub = await find_subscription(app.services.db, created["id"])
    terms = terms_of(sub)
    stranger: LocalAccount = Account.create()
    cancel_path = f"/subscribe/{created['id']}/cancellation"
    refused = await app.http.post(
        cancel_path,
        json={"signature": signed(stranger.key, terms.cancel_typed_data(payer.address))},
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "invalid_authorization"
    assert refused.json()["error"]["details"]["field"] == "signature"
    assert await sent_all(app) == plus(base, 1, 1, 0)

    cancel = {"signature": signed(payer.key, terms.cancel_typed_data(payer.address))}
    gone = await app.http.post(cancel_path, json=cancel)
    assert gone.status_code == 200, gone.text
    assert gone.json()["subscription"]["status"] == "cancelled"
    await settle_all(app.services)
    repeat = await app.http.post(cancel_path, json=cancel)
    assert repeat.status_code == 200 and repeat.json()["subscription"]["status"] == "cancelled"
    assert await sent_all(app) == plus(base, 1, 1, 1)

    # On chain: cancelled, and a due period is refused whoever asks.
    raw = await evm.eth_call(
        contract, encode_call(SUBSCRIPTIONS, "cancelled", terms.id_of(payer.address))
    )
    assert int.from_bytes(raw, "big") == 1
    await later(evm, PERIOD_S)
    charge = encode_call(
        SUBSCRIPTIONS,
        "charge",
        terms.as_tuple(),
        payer.address,
        bytes.fromhex(sub.signature[2:]),
        1,
    )
    with pytest.raises(ContractRevert):
        await evm.eth_call(contract, charge)
    await charge_due_once(app.services)
    assert await sent_all(app) == plus(base, 1, 1, 1)
    assert await token_balance(evm, dev, payer.address) == 10_000_000 - AMOUNT_RAW


@pytest.mark.parametrize(
    ("permit", "field"),
    [
        ({"spender": "0x000000000000000000000000000000000000dEaD"}, "permit.spender"),
        ({"owner": "0x000000000000000000000000000000000000dEaD"}, "permit.owner"),
        ({"value": str(AMOUNT_RAW - 1)}, "permit.value"),
        ({"deadline": 1_700_000_000}, "permit.deadline"),
        ({"signature": "0x" + "11" * 65}, "permit.signature"),
        ({"signature": "0x1234"}, "permit.signature"),
    ],
)
async def test_a_wrong_permit_is_refused_with_nothing_sent(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, permit: dict[str, Any], field: str
) -> None:
    _owner, _headers, created = await offered(app.services, app.http, dev)
    payer = await funded_payer(evm, dev, 10_000_000)
    body = await signed_body(evm, dev, payer, created, **permit)
    base = await sent_all(app)

    answer = await app.http.post(f"/subscribe/{created['id']}/authorization", json=body)

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_authorization"
    assert answer.json()["error"]["details"]["field"] == field
    assert await sent_all(app) == base
    sub = await find_subscription(app.services.db, created["id"])
    assert sub.status == "awaiting_authorization" and sub.payer is None


async def test_a_permit_signed_for_another_value_is_refused_with_nothing_sent(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    _owner, _headers, created = await offered(app.services, app.http, dev)
    payer = await funded_payer(evm, dev, 10_000_000)
    body = await signed_body(evm, dev, payer, created, value=str(20 * AMOUNT_RAW))
    base = await sent_all(app)

    answer = await app.http.post(f"/subscribe/{created['id']}/authorization", json=body)

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_authorization"
    assert answer.json()["error"]["details"]["field"] == "permit.signature"
    assert await sent_all(app) == base


async def test_a_bad_subscription_signature_and_an_unknown_id_are_refused(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    _owner, _headers, created = await offered(app.services, app.http, dev)
    payer = await funded_payer(evm, dev, 10_000_000)
    body = await signed_body(evm, dev, payer, created)
    stranger: LocalAccount = Account.create()
    base = await sent_all(app)

    garbage = await app.http.post(
        f"/subscribe/{created['id']}/authorization", json={**body, "signature": "0xzz"}
    )
    not_payer = await app.http.post(
        f"/subscribe/{created['id']}/authorization",
        json={**body, "signature": signed(stranger.key, created["authorization"]["typedData"])},
    )
    unknown = await app.http.post("/subscribe/0000-none/authorization", json=body)
    unknown_cancel = await app.http.post(
        "/subscribe/0000-none/cancellation", json={"signature": body["signature"]}
    )
    not_yet = await app.http.post(
        f"/subscribe/{created['id']}/cancellation", json={"signature": body["signature"]}
    )

    assert (garbage.status_code, garbage.json()["error"]["code"]) == (400, "invalid_authorization")
    assert garbage.json()["error"]["details"]["field"] == "signature"
    # A stranger's signature names the stranger: the payer's permit is not the stranger's.
    assert (not_payer.status_code, not_payer.json()["error"]["code"]) == (
        400,
        "invalid_authorization",
    )
    assert not_payer.json()["error"]["details"]["field"] == "permit.signature"
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "not_found")
    assert (unknown_cancel.status_code, unknown_cancel.json()["error"]["code"]) == (
        404,
        "not_found",
    )
    assert (not_yet.status_code, not_yet.json()["error"]["code"]) == (409, "conflict")
    assert await sent_all(app) == base


async def test_a_token_without_permit_is_refused_with_nothing_sent(
    make_services: Any, evm: EvmClient, dev: DevDeployment, anvil: AnvilProcess
) -> None:
    no_permit = TokenConfig(dev.token, dev.token_symbol, dev.token_decimals, pegged="USD")
    services = await make_services(chain={"tokens": (no_permit,)})
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        app = RunningApp(base_url, services, http)
        _owner, _headers, created = await offered(app.services, app.http, dev)
        payer = await funded_payer(evm, dev, 10_000_000)
        body = await signed_body(evm, dev, payer, created)
        base = await sent_all(app)

        answer = await app.http.post(f"/subscribe/{created['id']}/authorization", json=body)

        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "gasless_unavailable"
        assert answer.json()["error"]["details"]["field"] == "permit"
        assert await sent_all(app) == base


async def test_the_pages_show_the_terms_and_an_unknown_id_is_a_404_page(
    app: RunningApp, dev: DevDeployment
) -> None:
    _owner, _headers, created = await offered(app.services, app.http, dev, maxPeriods=3)

    page = await app.http.get(f"/subscribe/{created['id']}", params={"lang": "de"})
    manage = await app.http.get(f"/subscribe/{created['id']}/manage")
    unknown = await app.http.get("/subscribe/0000-none/manage")

    assert page.status_code == 200
    assert page.headers["content-language"] == "de"
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert '<dd id="charges-count">3, dann endet es</dd>' in page.text
    assert '<dd id="period">Alle 1 Minute</dd>' in page.text
    assert manage.status_code == 200 and '<p id="no-charges">' in manage.text
    assert 'id="cancel" class="primary" disabled' in manage.text  # nothing to cancel yet
    assert unknown.status_code == 404 and "Subscription not found" in unknown.text


async def test_the_owner_cancels_on_chain_by_a_signed_cancel_after_the_api_cancel(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, headers, created = await offered(app.services, app.http, dev)
    payer = await funded_payer(evm, dev, 10_000_000)
    body = await signed_body(evm, dev, payer, created)
    assert (await app.http.post(f"/subscribe/{created['id']}/authorization", json=body)).is_success
    await settle_all(app.services)
    query = {"ownerAddress": owner.address, "id": created["id"]}
    gone = await app.http.delete("/integration/subscriptions", params=query, headers=headers)
    assert gone.json()["subscription"]["status"] == "cancelled"
    terms = terms_of(await find_subscription(app.services.db, created["id"]))
    cancelled = encode_call(SUBSCRIPTIONS, "cancelled", terms.id_of(payer.address))
    assert int.from_bytes(await evm.eth_call(subscriptions_address(), cancelled), "big") == 0
    base = await sent_all(app)

    signature = signed(owner.key, terms.cancel_typed_data(payer.address))
    ended = await app.http.post(
        f"/subscribe/{created['id']}/cancellation", json={"signature": signature}
    )

    assert ended.status_code == 200, ended.text
    assert ended.json()["subscription"]["status"] == "cancelled"
    await settle_all(app.services)
    assert await sent_all(app) == plus(base, 0, 0, 1)
    assert int.from_bytes(await evm.eth_call(subscriptions_address(), cancelled), "big") == 1
