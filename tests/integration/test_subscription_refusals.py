"""Every refusal of the subscription routes over real HTTP, on the shared anvil: the
documented 4xx with its exact code, and nothing created or sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select, update

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.payments.opt_in import set_gasless
from invoicing.payments.subscriptions.models import Subscription
from invoicing.payments.subscriptions.periods import charge_due_once
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.factory import sign_typed
from tests.support.gasless import funded_payer
from tests.support.server import serve
from tests.support.subscriptions import charges_sent

pytestmark = pytest.mark.integration

PATH = "/integration/subscriptions"


async def rows(app: RunningApp, owner: str) -> tuple[int, int]:
    """(subscriptions, invoices) of ``owner``."""
    async with app.services.db.sessions() as session:
        subs = await session.scalar(
            select(func.count())
            .select_from(Subscription)
            .where(Subscription.owner_key == owner.lower())
        )
        invoices = await session.scalar(
            select(func.count()).select_from(Invoice).where(Invoice.owner_key == owner.lower())
        )
    return int(subs or 0), int(invoices or 0)


def code_of(answer: Any) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


async def owner_of(app: RunningApp, dev: DevDeployment) -> tuple[LocalAccount, dict[str, str]]:
    owner: LocalAccount = Account.create()
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    return owner, key_headers(await issue_api_key(app.services, owner))


def body_of(owner: LocalAccount, dev: DevDeployment, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "tokenAddress": dev.token,
        "amount": "2.5",
        "periodSeconds": 60,
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


async def test_refused_creations_create_nothing(app: RunningApp, dev: DevDeployment) -> None:
    owner, headers = await owner_of(app, dev)
    stranger: LocalAccount = Account.create()
    _, stranger_headers = await owner_of(app, dev)
    refused: list[tuple[dict[str, Any], dict[str, str], tuple[int, str]]] = [
        (body_of(owner, dev), {}, (401, "unauthorized")),
        (body_of(owner, dev), stranger_headers, (403, "forbidden")),
        (body_of(stranger, dev), headers, (403, "forbidden")),
        (body_of(owner, dev, chainId=999_999), headers, (400, "unsupported_chain")),
        (body_of(owner, dev, chainId=0), headers, (400, "invalid_request")),
        (body_of(owner, dev, chainId="31337"), headers, (400, "invalid_request")),
        (
            body_of(owner, dev, tokenAddress=Account.create().address),
            headers,
            (400, "unsupported_token"),
        ),
        (body_of(owner, dev, tokenAddress="0x12"), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount="0"), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount="-1"), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount="1e3"), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount="1.0000001"), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount=2.5), headers, (400, "invalid_request")),
        (body_of(owner, dev, amount="abc"), headers, (400, "invalid_request")),
        (body_of(owner, dev, periodSeconds=59), headers, (400, "invalid_request")),
        (body_of(owner, dev, periodSeconds=0), headers, (400, "invalid_request")),
        (body_of(owner, dev, periodSeconds="60"), headers, (400, "invalid_request")),
        (body_of(owner, dev, maxPeriods=-1), headers, (400, "invalid_request")),
        (body_of(owner, dev, subscriptionId=""), headers, (400, "invalid_request")),
        (body_of(owner, dev, subscriptionId="x" * 129), headers, (400, "invalid_request")),
        (body_of(owner, dev, extra=1), headers, (400, "invalid_request")),
        (body_of(owner, dev, periodSeconds=None), headers, (400, "invalid_request")),
    ]
    for body, sent_headers, expected in refused:
        answer = await app.http.post(PATH, json=body, headers=sent_headers)
        assert code_of(answer) == expected, (body, answer.text)
    too_short = await app.http.post(
        PATH, json=body_of(owner, dev, periodSeconds=59), headers=headers
    )
    assert too_short.json()["error"]["details"] == {"field": "periodSeconds", "min": 60}
    assert await rows(app, owner.address) == (0, 0)
    assert await rows(app, stranger.address) == (0, 0)

    first = await app.http.post(
        PATH, json=body_of(owner, dev, subscriptionId="s-1"), headers=headers
    )
    same = await app.http.post(
        PATH, json=body_of(owner, dev, subscriptionId="s-1"), headers=headers
    )
    other = await app.http.post(
        PATH, json=body_of(owner, dev, subscriptionId="s-1", amount="3"), headers=headers
    )
    assert (first.status_code, same.status_code) == (201, 200)
    assert same.json()["id"] == first.json()["id"]
    assert code_of(other) == (409, "conflict")
    assert other.json()["error"]["details"] == {"field": "subscriptionId", "id": first.json()["id"]}
    assert await rows(app, owner.address) == (1, 0)


def field_of(answer: Any) -> str:
    details = answer.json()["error"]["details"]
    return str(details.get("field") or details["problems"][0]["field"])


async def test_a_bad_webhook_url_is_refused_as_an_invoices(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    """Outside development, with private addresses not allowed: plain http, a private or
    loopback address, too long or not absolute, each refused with invalid_request on the
    field webhookUrl, and nothing created; an https URL to a public name is taken."""
    services = await make_services(
        chain={"relayer_key": None},
        environment="production",
        secret="s" * 40,
        webhook_allow_private=False,
    )
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        app = RunningApp(base_url, services, http)
        owner, headers = await owner_of(app, dev)
        for url in (
            "http://hooks.example.com/paid",
            "https://10.0.0.7/paid",
            "https://127.0.0.1/paid",
            "https://192.168.1.1/paid",
            "https://[::1]/paid",
            "https://hooks.example.com/" + "a" * 2048,
            "hooks.example.com/paid",
            "ftp://hooks.example.com/paid",
        ):
            answer = await http.post(
                PATH, json=body_of(owner, dev, webhookUrl=url, periodSeconds=3600), headers=headers
            )
            assert code_of(answer) == (400, "invalid_request"), (url, answer.text)
            assert field_of(answer) == "webhookUrl", (url, answer.text)
        assert await rows(app, owner.address) == (0, 0)
        good = "https://hooks.example.com/paid"
        taken = await http.post(
            PATH, json=body_of(owner, dev, webhookUrl=good, periodSeconds=3600), headers=headers
        )
        assert taken.status_code == 201, taken.text
        assert taken.json()["webhookUrl"] == good
        assert await rows(app, owner.address) == (1, 0)


async def test_refused_lookups_and_cancellations(app: RunningApp, dev: DevDeployment) -> None:
    owner, headers = await owner_of(app, dev)
    other, other_headers = await owner_of(app, dev)
    created = await app.http.post(PATH, json=body_of(owner, dev), headers=headers)
    pk = created.json()["id"]
    for method in ("GET", "DELETE"):
        url = PATH + "/status" if method == "GET" else PATH
        cases = [
            ({"ownerAddress": owner.address, "id": "no-such-id"}, headers, (404, "not_found")),
            ({"ownerAddress": other.address, "id": pk}, other_headers, (404, "not_found")),
            ({"ownerAddress": owner.address, "id": pk}, other_headers, (403, "forbidden")),
            ({"ownerAddress": owner.address, "id": pk}, {}, (401, "unauthorized")),
            ({"ownerAddress": owner.address}, headers, (400, "invalid_request")),
            ({"ownerAddress": owner.address, "id": "x" * 37}, headers, (400, "invalid_request")),
        ]
        for params, sent_headers, expected in cases:
            answer = await app.http.request(method, url, params=params, headers=sent_headers)
            assert code_of(answer) == expected, (method, params, answer.text)
    status = await app.http.get(
        PATH + "/status", params={"ownerAddress": owner.address, "id": pk}, headers=headers
    )
    assert status.json()["subscription"]["status"] == "awaiting_authorization"


async def test_refused_authorizations_send_nothing(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, headers = await owner_of(app, dev)
    created = (await app.http.post(PATH, json=body_of(owner, dev), headers=headers)).json()
    path = f"/subscribe/{created['id']}/authorization"
    typed = created["authorization"]["typedData"]
    payer = await funded_payer(evm, dev, 10_000_000)
    someone: LocalAccount = Account.create()
    signature = "0x" + sign_typed(payer.key, typed).hex()
    theirs = "0x" + sign_typed(someone.key, typed).hex()

    cases: list[tuple[str, dict[str, Any], tuple[int, str]]] = [
        ("/subscribe/no-such-id/authorization", {"signature": signature}, (404, "not_found")),
        (path, {}, (400, "invalid_request")),
        (path, {"signature": 1}, (400, "invalid_request")),
        (path, {"signature": signature, "extra": 1}, (400, "invalid_request")),
        (path, {"signature": "0x1234"}, (400, "invalid_authorization")),
        (path, {"signature": "not hex"}, (400, "invalid_authorization")),
        (path, {"signature": signature, "payer": "0x12"}, (400, "invalid_request")),
        # An EOA's signature naming another payer.
        (path, {"signature": theirs, "payer": payer.address}, (400, "invalid_authorization")),
        # Bytes no key signed, naming a wallet with no code: not a contract wallet.
        (
            path,
            {"signature": "0x" + "11" * 65, "payer": payer.address},
            (400, "invalid_authorization"),
        ),
        # Naming a contract that is no wallet accepting it (the token has no isValidSignature).
        (path, {"signature": "0x" + "11" * 65, "payer": dev.token}, (400, "invalid_authorization")),
        # The payer's signature, but no allowance given to the contract yet.
        (path, {"signature": signature}, (400, "invalid_authorization")),
    ]
    for url, body, expected in cases:
        answer = await app.http.post(url, json=body)
        assert code_of(answer) == expected, (body, answer.text)
    no_allowance = await app.http.post(path, json={"signature": signature})
    assert no_allowance.json()["error"]["details"]["field"] == "allowance"

    approve = encode_call(TEST_TOKEN, "approve", created["authorization"]["spender"], 2**256 - 1)
    await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**18)])
    assert (await evm.transact(payer.key.hex(), dev.token, approve))["status"] == 1
    await set_gasless(app.services, owner.address, dev.chain_id, False)
    off = await app.http.post(path, json={"signature": signature})
    assert code_of(off) == (400, "gasless_unavailable")
    assert await charges_sent(app, owner.address) == 0
    assert await rows(app, owner.address) == (1, 0)

    await set_gasless(app.services, owner.address, dev.chain_id, True)
    ok = await app.http.post(path, json={"signature": signature})
    assert ok.status_code == 200, ok.text
    # Another payer's signature once authorized: refused, nothing more sent.
    approve_theirs = encode_call(TEST_TOKEN, "approve", created["authorization"]["spender"], 1)
    await evm.call_rpc("anvil_setBalance", [someone.address, hex(10**18)])
    assert (await evm.transact(someone.key.hex(), dev.token, approve_theirs))["status"] == 1
    taken = await app.http.post(path, json={"signature": theirs})
    assert code_of(taken) == (409, "authorization_used")
    assert await charges_sent(app, owner.address) == 1
    assert await rows(app, owner.address) == (1, 1)


async def test_a_subscription_on_a_chain_not_served_here_is_left_alone(
    app: RunningApp, dev: DevDeployment
) -> None:
    """The worker's pass skips a subscription of a chain the service is not configured for
    (a chain removed from the chains file, or another deployment's on a shared database),
    and still serves the others: nothing raised, the row untouched."""
    owner, headers = await owner_of(app, dev)
    created = await app.http.post(
        PATH, json=body_of(owner, dev, periodSeconds=3600), headers=headers
    )
    assert created.status_code == 201, created.text
    pk = created.json()["id"]
    async with app.services.db.transaction() as session:
        await session.execute(
            update(Subscription)
            .where(Subscription.id == pk)
            .values(chain_id=424_242, status="active")
        )

    await charge_due_once(app.services)

    async with app.services.db.sessions() as session:
        row = await session.get(Subscription, pk)
    assert row is not None
    assert (row.chain_id, row.status, row.next_period) == (424_242, "active", 0)
