"""This service as the x402 facilitator of an owner's own server: a small FastAPI app with
the PyPI ``x402`` package's own middleware, pointed at our ``/x402/facilitator``, sells a
report to the npm ``@x402/fetch`` client; the relayer settles it, charged to the owner's
share. Without the owner's key, to a stranger's address, or in a token that is not
allow-listed, nothing is settled."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from fastapi import FastAPI, Request, Response
from sqlalchemy import select
from x402 import x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.http.facilitator_client_base import AuthHeaders
from x402.http.middleware.fastapi import payment_middleware
from x402.mechanisms.evm.exact import register_exact_evm_server

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.payments.opt_in import set_gasless
from invoicing.settlement.budget import DAY_MS, NEWCOMERS
from invoicing.tables.relay import RelayedAuthorization
from invoicing.tables.settlement import RelayerSpend
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key
from tests.support.chain import read_view
from tests.support.gasless import funded_payer, sent_for
from tests.support.server import serve
from tests.support.x402 import PRICE, verify_body

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
FETCH_CLIENT = REPO_ROOT / "tests" / "js" / "x402_fetch.mjs"


class OwnerKey:
    """The owner's API key on every facilitator call (x402's AuthProvider)."""

    def __init__(self, api_key: str) -> None:
        self.headers = {"x-service-api-key": api_key}

    def get_auth_headers(self) -> AuthHeaders:
        return AuthHeaders(verify=self.headers, settle=self.headers, supported=self.headers)


async def shop_app(facilitator_url: str, api_key: str, pay_to: str, dev: DevDeployment) -> FastAPI:
    """The owner's own x402 server: one paid route, priced in raw TUSD units (no dollars)."""
    facilitator = HTTPFacilitatorClient(
        FacilitatorConfig(url=facilitator_url, auth_provider=OwnerKey(api_key))
    )
    server = register_exact_evm_server(x402ResourceServer(facilitator))
    # initialize() asks our /supported synchronously: off this loop, which serves our app.
    await asyncio.to_thread(server.initialize)
    price = {
        "amount": str(PRICE),
        "asset": dev.token,
        "extra": {"name": "Test USD", "version": "1"},
    }
    routes: Any = {
        "GET /report": {
            "accepts": {
                "scheme": "exact", "payTo": pay_to, "price": price,
                "network": f"eip155:{dev.chain_id}", "max_timeout_seconds": 300,
            },
            "description": "A report",
        }
    }  # fmt: skip
    shop = FastAPI()
    paid = payment_middleware(routes, server, sync_facilitator_on_start=False)

    @shop.middleware("http")
    async def x402(request: Request, call_next: Any) -> Response:
        return await paid(request, call_next)

    @shop.get("/report")
    async def report() -> dict[str, str]:
        return {"report": "the paid content"}

    return shop, facilitator


async def test_an_owners_x402_server_sells_through_this_facilitator(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    node = shutil.which("node")
    assert node is not None
    owner = Account.create()
    api_key = await issue_api_key(app.services, owner)
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    payer = await funded_payer(evm, dev, 1_000_000)
    shop, facilitator = await shop_app(
        f"{app.base_url}/x402/facilitator", api_key, owner.address, dev
    )
    async with serve(shop) as shop_url:
        process = await asyncio.create_subprocess_exec(
            node, str(FETCH_CLIENT), "0x" + bytes(payer.key).hex(), f"{shop_url}/report",
            f"eip155:{dev.chain_id}", dev.token, "1000000", cwd=REPO_ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=90)
    await facilitator.aclose()
    assert process.returncode == 0, stderr.decode()
    answer = json.loads(stdout)
    assert answer["status"] == 200, answer
    assert answer["body"] == {"report": "the paid content"}
    settled = json.loads(base64.b64decode(answer["paymentResponse"]))
    assert settled["success"] is True and settled["payer"] == payer.address
    assert await read_view(evm, dev.token, "TestToken", "balanceOf", owner.address) == PRICE
    assert await evm.get_balance(payer.address) == 0
    assert await sent_for(app.services, owner.address) == 1  # the owner's share paid the gas


async def test_it_is_not_an_open_relay(app: RunningApp, evm: EvmClient, dev: DevDeployment) -> None:
    owner = Account.create()
    api_key = await issue_api_key(app.services, owner)
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    key = {"x-service-api-key": api_key}
    payer = await funded_payer(evm, dev, 1_000_000)
    http: httpx.AsyncClient = app.http
    good = await verify_body(evm, dev, payer, owner.address)

    verified = await http.post("/x402/facilitator/verify", json=good, headers=key)
    assert verified.json() == {"isValid": True, "payer": payer.address}
    for path in ("/x402/facilitator/verify", "/x402/facilitator/settle"):
        unkeyed = await http.post(path, json=good)
        assert unkeyed.status_code == 401
    supported = await http.get("/x402/facilitator/supported", headers=key)
    assert {"x402Version": 2, "scheme": "exact", "network": f"eip155:{dev.chain_id}"} in (
        supported.json()["kinds"]
    )
    stranger = await verify_body(evm, dev, payer, Account.create().address)
    settled = await http.post("/x402/facilitator/settle", json=stranger, headers=key)
    assert settled.json()["success"] is False
    assert settled.json()["errorReason"] == "invalid_exact_evm_payload_recipient_mismatch"
    other_token = await verify_body(evm, dev, payer, owner.address, asset=dev.factory)
    refused = await http.post("/x402/facilitator/settle", json=other_token, headers=key)
    assert refused.json()["errorReason"] == "invalid_payment_requirements"
    wrong_domain = await verify_body(
        evm, dev, payer, owner.address, extra={"name": "USD Coin", "version": "2"}
    )
    refused = await http.post("/x402/facilitator/verify", json=wrong_domain, headers=key)
    assert refused.json()["invalidReason"] == "invalid_payment_requirements"
    assert await sent_for(app.services, owner.address) == 0
    assert await read_view(evm, dev.token, "TestToken", "balanceOf", owner.address) == 0


async def test_an_owner_who_did_not_opt_in_gets_nothing_relayed(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner = Account.create()
    key = {"x-service-api-key": await issue_api_key(app.services, owner)}
    payer = await funded_payer(evm, dev, 1_000_000)
    body = await verify_body(evm, dev, payer, owner.address)

    verified = await app.http.post("/x402/facilitator/verify", json=body, headers=key)
    settled = await app.http.post("/x402/facilitator/settle", json=body, headers=key)

    assert verified.json() == {"isValid": False, "invalidReason": "invalid_scheme",
                               "payer": payer.address}  # fmt: skip
    assert settled.json()["success"] is False
    assert settled.json()["errorReason"] == "invalid_scheme"
    assert await sent_for(app.services, owner.address) == 0
    assert await read_view(evm, dev.token, "TestToken", "balanceOf", owner.address) == 0


async def test_a_payment_settles_once_however_often_it_is_presented(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    """The same payment payload sent to /settle six times at once and three times after:
    one success (the owner's server hands out its resource once per success), one
    transaction, and /verify then says it is spent."""
    owner = Account.create()
    key = {"x-service-api-key": await issue_api_key(app.services, owner)}
    await set_gasless(app.services, owner.address, dev.chain_id, True)
    payer = await funded_payer(evm, dev, 1_000_000)
    body = await verify_body(evm, dev, payer, owner.address)

    def settle() -> Any:
        return app.http.post("/x402/facilitator/settle", json=body, headers=key)

    at_once = await asyncio.gather(*(settle() for _ in range(6)))
    after = [await settle() for _ in range(3)]
    verified = await app.http.post("/x402/facilitator/verify", json=body, headers=key)

    answers = [a.json() for a in (*at_once, *after)]
    assert [a["success"] for a in answers].count(True) == 1
    refused = [a for a in answers if not a["success"]]
    assert {a["errorReason"] for a in refused} == {"invalid_transaction_state"}
    assert verified.json()["isValid"] is False
    assert await sent_for(app.services, owner.address) == 1
    assert await read_view(evm, dev.token, "TestToken", "balanceOf", owner.address) == PRICE


async def newcomers_spent(make_services: MakeServices) -> int:
    services = await make_services()
    now_ms = services.clock.now_ms()
    async with services.db.sessions() as session:
        row = await session.get(
            RelayerSpend, (dev_chain(services), now_ms - now_ms % DAY_MS, NEWCOMERS)
        )
    return 0 if row is None else row.transactions


def dev_chain(services: Any) -> int:
    return int(services.chains.all()[0].config.chain_id)


async def test_fresh_wallets_share_the_newcomers_one_share_and_move_something(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    """Owners with no paid invoice on the chain (a fresh key, one API key each) spend the
    newcomers' one share together, not a share each; a payment of nothing is refused."""
    spent = await newcomers_spent(make_services)
    services = await make_services(relayer_owner_tx_per_day=spent + 2)
    owners = [Account.create() for _ in range(4)]
    keys = [{"x-service-api-key": await issue_api_key(services, o)} for o in owners]
    for owner in owners:
        await set_gasless(services, owner.address, dev.chain_id, True)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=60) as http,
    ):
        nothing = await verify_body(evm, dev, Account.create(), owners[0].address, amount="0")
        zero = await http.post("/x402/facilitator/settle", json=nothing, headers=keys[0])
        answers = []
        for owner, key in zip(owners, keys, strict=True):
            payer = await funded_payer(evm, dev, 1_000_000)
            body = await verify_body(evm, dev, payer, owner.address)
            answers.append(await http.post("/x402/facilitator/settle", json=body, headers=key))

    assert zero.status_code == 200 and zero.json()["success"] is False
    assert zero.json()["errorReason"] == "invalid_exact_evm_payload_authorization_value_mismatch"
    assert [a.status_code for a in answers] == [200, 200, 429, 429]
    assert [a.json().get("success") for a in answers[:2]] == [True, True]
    assert answers[2].json()["error"]["code"] == "rate_limited"
    async with services.db.sessions() as session:
        carried = list(await session.scalars(select(RelayedAuthorization.owner_key)))
    assert sorted(k for k in carried if k in {o.address.lower() for o in owners}) == sorted(
        o.address.lower() for o in owners[:2]
    )
