"""Gasless owner settings through both route families, on anvil, with ethers.js signatures."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.clock import FakeClock
from invoicing.services import Services
from invoicing.tables.settlement import RelayerTransaction, TxStatus
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.node import run_node_script
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers
from tests.support.withdrawals import gateway, relayer_tx_count, settle_all, sign_typed

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SIGN_META = REPO_ROOT / "tests" / "js" / "sign_meta.mjs"
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def ethers_sign(
    owner: LocalAccount, chain_id: int, factory: str, fee_bps: int, fee_nonce: int,
    payout: str, payout_nonce: int, deadline: int,
) -> dict[str, dict[str, str]]:  # fmt: skip
    args = [owner.key.to_0x_hex(), chain_id, factory, fee_bps, fee_nonce, payout, payout_nonce]
    signed: dict[str, dict[str, str]] = run_node_script(SIGN_META, *args, deadline)
    return signed


def deadline_s(offset_s: int = 600) -> int:
    return int(time.time()) + offset_s


async def onchain_nonce(services: Services, owner: str) -> int:
    return await services.chains.all()[0].factory_nonce(owner)


def fee_body(owner: str, chain_id: int, **fields: Any) -> dict[str, Any]:
    return {"ownerAddress": owner, "chainId": chain_id, **fields}


async def post_signed(
    app: RunningApp, path: str, action: str, owner: LocalAccount, body: dict[str, Any]
) -> httpx.Response:
    payload = {k: v for k, v in body.items() if k != "ownerAddress"}
    headers = signed_headers(owner, action, payload, owner_address=body["ownerAddress"])
    return await app.http.post(path, json=body, headers=headers)


async def get_fees(app: RunningApp, owner: LocalAccount, chain_id: int) -> httpx.Response:
    query = {"chainId": str(chain_id)}
    headers = signed_headers(owner, "fee.get", query)
    return await app.http.get(
        "/integration/fees",
        params={"ownerAddress": owner.address, "chainId": chain_id},
        headers=headers,
    )


async def test_set_fee_then_set_payout_through_the_integration_routes(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner, payout = new_owner(), new_owner().address
    before = await get_fees(app, owner, dev.chain_id)
    assert (before.status_code, before.json()) == (
        200,
        {"feeBps": 0, "payoutAddress": None, "nonce": "0", "factory": dev.factory},
    )
    deadline = deadline_s()
    signed = ethers_sign(owner, dev.chain_id, dev.factory, 250, 0, payout, 1, deadline)

    fee = await post_signed(
        app, "/integration/fees/set-meta", "fee.set-meta", owner,
        fee_body(owner.address, dev.chain_id, feeBps=250, nonce="0",
                 deadline=str(deadline * 1000), signature=signed["setFee"]["signature"]),
    )  # fmt: skip
    # Back to back: re-read the shared nonce (once the first is mined) before the second.
    assert fee.status_code == 202, fee.text
    await gateway(app.services).evm.wait_for_receipt(fee.json()["txHash"])
    middle = await get_fees(app, owner, dev.chain_id)
    payout_answer = await post_signed(
        app, "/integration/fees/set-payout-meta", "fee.set-payout-meta", owner,
        fee_body(owner.address, dev.chain_id, payoutAddress=payout, nonce=middle.json()["nonce"],
                 deadline=str(deadline), signature=signed["setPayout"]["signature"]),
    )  # fmt: skip
    finished = await settle_all(app.services)

    assert fee.status_code == 202, fee.text
    assert fee.json() == {
        "txHash": fee.json()["txHash"],
        "chainId": dev.chain_id,
        "ownerAddress": owner.address,
        "nonce": "0",
        "status": "submitted",
    }
    assert middle.json() == {
        "feeBps": 250,
        "payoutAddress": None,
        "nonce": "1",
        "factory": dev.factory,
    }
    assert payout_answer.status_code == 202, payout_answer.text
    assert payout_answer.json()["nonce"] == "1"
    after = await get_fees(app, owner, dev.chain_id)
    assert after.json() == {
        "feeBps": 250,
        "payoutAddress": payout,
        "nonce": "2",
        "factory": dev.factory,
    }
    mine = {row.tx_hash: row for row in finished}
    for answer, purpose in ((fee, "set_fee"), (payout_answer, "set_payout")):
        row = mine.get(answer.json()["txHash"])
        if row is None:  # already confirmed by an earlier pass
            async with app.services.db.sessions() as session:
                row = await session.scalar(
                    select(RelayerTransaction).where(
                        RelayerTransaction.tx_hash == answer.json()["txHash"]
                    )
                )
        assert row is not None and (row.purpose, row.status) == (purpose, TxStatus.CONFIRMED)


async def test_set_fee_and_set_payout_through_the_client_routes(
    app: RunningApp, dev: DevDeployment
) -> None:
    owner, payout = new_owner(), new_owner().address
    deadline = deadline_s()
    signed = ethers_sign(owner, dev.chain_id, dev.factory, 500, 0, payout, 1, deadline)

    fee = await app.http.post(
        "/fees/set-meta",
        json=fee_body(owner.address, dev.chain_id, feeBps=500, nonce="0",
                      deadline=str(deadline), signature=signed["setFee"]["signature"]),
    )  # fmt: skip
    # A client re-reads the shared nonce once the first transaction is mined.
    assert fee.status_code == 202, fee.text
    await gateway(app.services).evm.wait_for_receipt(fee.json()["txHash"])
    payout_answer = await app.http.post(
        "/fees/set-payout-meta",
        json=fee_body(owner.address, dev.chain_id, payoutAddress=payout, nonce="1",
                      deadline=str(deadline), signature=signed["setPayout"]["signature"]),
    )  # fmt: skip
    await settle_all(app.services)

    assert (fee.status_code, payout_answer.status_code) == (202, 202), (
        fee.text,
        payout_answer.text,
    )
    assert fee.json()["status"] == "submitted" and payout_answer.json()["nonce"] == "1"
    chain = app.services.chains.all()[0]
    assert await chain.fee_settings(owner.address) == (500, payout)
    assert await chain.factory_nonce(owner.address) == 2


def high_s(signature: str) -> str:
    raw = bytes.fromhex(signature[2:])
    s = SECP256K1_N - int.from_bytes(raw[32:64], "big")
    return "0x" + (raw[:32] + s.to_bytes(32, "big") + bytes([55 - raw[64]])).hex()


@pytest.mark.parametrize("route", ["/integration/fees/set-meta", "/fees/set-meta"])
async def test_each_rejection_sends_nothing(
    app: RunningApp, dev: DevDeployment, route: str
) -> None:
    owner, stranger = new_owner(), new_owner()
    factory, chain_id = dev.factory, dev.chain_id
    deadline = deadline_s()

    def signature(by: LocalAccount, fee_bps: int, nonce: int, when: int) -> str:
        typed = set_fee_typed_data(chain_id, factory, owner.address, fee_bps, nonce, when)
        return "0x" + sign_typed(by, typed).hex()

    good = signature(owner, 100, 0, deadline)
    past = deadline_s(-60)
    cases = [
        (400, "fee_too_high", dict(feeBps=501, nonce="0", deadline=str(deadline),
                                   signature=signature(owner, 501, 0, deadline))),
        (400, "deadline_expired", dict(feeBps=100, nonce="0", deadline=str(past),
                                       signature=signature(owner, 100, 0, past))),
        (400, "deadline_expired", dict(feeBps=100, nonce="0", deadline=str(past * 1000),
                                       signature=signature(owner, 100, 0, past))),
        (400, "invalid_owner_signature", dict(feeBps=100, nonce="0", deadline=str(deadline),
                                              signature=signature(stranger, 100, 0, deadline))),
        (400, "invalid_owner_signature", dict(feeBps=100, nonce="0", deadline=str(deadline),
                                              signature=high_s(good))),
        (400, "invalid_owner_signature", dict(feeBps=101, nonce="0", deadline=str(deadline),
                                              signature=good)),
        (400, "invalid_owner_signature", dict(feeBps=100, nonce="0", deadline=str(deadline),
                                              signature="0xzz")),
        (409, "nonce_mismatch", dict(feeBps=100, nonce="3", deadline=str(deadline),
                                     signature=signature(owner, 100, 3, deadline))),
    ]  # fmt: skip
    sent_before = await relayer_tx_count(app.services)

    for status, code, fields in cases:
        body = fee_body(owner.address, chain_id, **fields)
        if route.startswith("/integration"):
            answer = await post_signed(app, route, "fee.set-meta", owner, body)
        else:
            answer = await app.http.post(route, json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), fields
        if code == "nonce_mismatch":
            assert answer.json()["error"]["details"] == {"expected": "0"}

    assert await relayer_tx_count(app.services) == sent_before
    assert await onchain_nonce(app.services, owner.address) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"chainId": 31337, "nonce": "0", "deadline": "1", "signature": "0x"}, "feeBps"),
        ({"feeBps": "10", "chainId": 31337, "nonce": "0", "deadline": "1", "signature": "0x"}, ""),
        ({"feeBps": 1, "chainId": 31337, "nonce": "1.5", "deadline": "1", "signature": "0x"}, ""),
        ({"feeBps": 1, "chainId": 31337, "nonce": "-1", "deadline": "1", "signature": "0x"}, ""),
        ({"feeBps": 1, "chainId": 31337, "nonce": "0", "deadline": "x", "signature": "0x"}, ""),
        ({"feeBps": True, "chainId": 31337, "nonce": "0", "deadline": "1", "signature": "0x"}, ""),
        ({"feeBps": 1, "chainId": 31337, "nonce": "0", "deadline": "1", "signature": "0x",
          "extra": 1}, ""),
        ({"feeBps": 1, "chainId": "31337", "nonce": "0", "deadline": "1", "signature": "0x"}, ""),
        ({"feeBps": 1, "chainId": 31337, "nonce": str(2**256), "deadline": "1",
          "signature": "0x"}, ""),
    ],
)  # fmt: skip
async def test_malformed_set_meta_bodies_are_400(
    app: RunningApp, body: dict[str, Any], field: str
) -> None:
    owner = new_owner()
    full = {"ownerAddress": owner.address, **body}
    sent_before = await relayer_tx_count(app.services)

    signed = await post_signed(app, "/integration/fees/set-meta", "fee.set-meta", owner, full)
    client = await app.http.post("/fees/set-meta", json=full)

    for answer in (signed, client):
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "invalid_request"
    assert field in signed.json()["error"]["message"]
    assert await relayer_tx_count(app.services) == sent_before


async def test_other_bad_requests(app: RunningApp, dev: DevDeployment) -> None:
    owner = new_owner()
    body = fee_body(owner.address, dev.chain_id, payoutAddress="0x1234", nonce="0",
                    deadline=str(deadline_s()), signature="0x00")  # fmt: skip
    unsupported = fee_body(owner.address, 999_999, feeBps=1, nonce="0",
                           deadline=str(deadline_s()), signature="0x00")  # fmt: skip

    bad_payout = await post_signed(
        app, "/integration/fees/set-payout-meta", "fee.set-payout-meta", owner, body
    )
    no_auth = await app.http.post("/integration/fees/set-meta", json=unsupported)
    chain = await app.http.post("/fees/set-meta", json=unsupported)
    not_json = await app.http.post(
        "/fees/set-meta", content=b"{", headers={"content-type": "application/json"}
    )
    no_owner = await app.http.post("/fees/set-payout-meta", json={"chainId": 1})
    fees_missing_chain = await app.http.get(
        "/integration/fees",
        params={"ownerAddress": owner.address},
        headers=signed_headers(owner, "fee.get", {}),
    )
    fees_bad_chain = await app.http.get(
        "/integration/fees",
        params={"ownerAddress": owner.address, "chainId": "999999"},
        headers=signed_headers(owner, "fee.get", {"chainId": "999999"}),
    )
    fees_no_auth = await app.http.get(
        "/integration/fees", params={"ownerAddress": owner.address, "chainId": dev.chain_id}
    )

    codes = [
        (r.status_code, r.json()["error"]["code"])
        for r in (bad_payout, no_auth, chain, not_json, no_owner, fees_missing_chain,
                  fees_bad_chain, fees_no_auth)
    ]  # fmt: skip
    assert codes == [
        (400, "invalid_request"),
        (401, "unauthorized"),
        (400, "unsupported_chain"),
        (400, "invalid_request"),
        (400, "invalid_request"),
        (400, "invalid_request"),
        (400, "unsupported_chain"),
        (401, "unauthorized"),
    ]


@pytest.fixture
async def limited_app(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    services = await make_services(fee_rate_limit_per_minute=3)
    # A minute of its own, so other tests' requests from 127.0.0.1 do not count.
    services.clock = FakeClock(int(time.time() * 1000) + 10 * 365 * 86_400_000)
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def test_client_routes_are_rate_limited_per_ip(limited_app: RunningApp) -> None:
    owners = [new_owner().address for _ in range(4)]
    bodies = [{"ownerAddress": o, "chainId": 31337} for o in owners]

    answers = [await limited_app.http.post("/fees/set-meta", json=b) for b in bodies]
    other_route = await limited_app.http.post("/fees/set-payout-meta", json=bodies[0])

    assert [a.status_code for a in answers] == [400, 400, 400, 429]
    assert answers[3].json()["error"]["code"] == "rate_limited"
    assert 1 <= int(answers[3].headers["retry-after"]) <= 60
    assert other_route.status_code == 429
    # The integration routes (request auth) are not rate limited this way.
    assert (
        await limited_app.http.post("/integration/fees/set-meta", json=bodies[0])
    ).status_code == 401


@pytest.mark.parametrize("route", ["/integration/fees/set-meta", "/fees/set-meta"])
async def test_a_deadline_sent_in_ms_is_signed_in_seconds(
    app: RunningApp, dev: DevDeployment, route: str
) -> None:
    """The request may send the deadline in milliseconds; the EIP-712 signature covers it
    in seconds (deadline // 1000, the value relayed on-chain). A signature over the
    milliseconds is refused with a message saying so, and nothing is sent."""
    owner = new_owner()
    deadline = deadline_s()
    deadline_ms = deadline * 1000 + 999

    def signed(when: int) -> dict[str, Any]:
        typed = set_fee_typed_data(dev.chain_id, dev.factory, owner.address, 77, 0, when)
        return fee_body(
            owner.address, dev.chain_id, feeBps=77, nonce="0", deadline=str(deadline_ms),
            signature="0x" + sign_typed(owner, typed).hex(),
        )  # fmt: skip

    async def post(body: dict[str, Any]) -> httpx.Response:
        if route.startswith("/integration"):
            return await post_signed(app, route, "fee.set-meta", owner, body)
        return await app.http.post(route, json=body)

    sent_before = await relayer_tx_count(app.services)
    over_ms = await post(signed(deadline_ms))
    sent_after_refusal = await relayer_tx_count(app.services)
    over_seconds = await post(signed(deadline))
    await settle_all(app.services)
    settings = await get_fees(app, owner, dev.chain_id)

    assert over_ms.status_code == 400
    assert over_ms.json()["error"]["code"] == "invalid_owner_signature"
    assert "sign it in seconds" in over_ms.json()["error"]["message"]
    assert over_ms.json()["error"]["details"] == {"signedDeadline": str(deadline)}
    assert sent_after_refusal == sent_before
    assert over_seconds.status_code == 202, over_seconds.text
    assert settings.json()["feeBps"] == 77
