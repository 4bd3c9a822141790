"""The subscription pages in headless Chromium with an injected wallet: a payer holding TUSD
and no native coin subscribes with an EIP-2612 permit (no approve, no gas), the first period
is charged, then the payer cancels from their own page with a signed cancellation. The
subscription is cancelled on chain and a charge is refused after. On a token the service
knows no permit for, the payer approves the contract from the wallet (an on-chain
transaction, their gas) and then signs. The pages are axe-clean in the eight languages, at
desktop and phone width."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from playwright.async_api import Browser, Page, expect

from invoicing.chain.abi import encode_call
from invoicing.chain.answers import ContractRevert
from invoicing.chain.artifacts import SUBSCRIPTIONS
from invoicing.chain.deploy import DevDeployment, subscriptions_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import decode_revert
from invoicing.hashing import keccak256
from invoicing.payments.subscriptions.service import find_subscription, terms_of
from invoicing.tables.settlement import TxPurpose
from invoicing.web.app import create_app
from invoicing.web.page.i18n import LANGUAGES
from tests.browser.conftest import axe_violations
from tests.conftest import MakeServices, RunningApp
from tests.support.gasless import funded_payer
from tests.support.payment_page import DESKTOP, PHONE, WALLET_JS, InjectedWallet
from tests.support.server import serve
from tests.support.subscription_payer import AMOUNT_RAW, allowance, offered, sent, token_balance

pytestmark = pytest.mark.browser

MAX_UINT = 2**256 - 1
APPROVE_SELECTOR = keccak256(b"approve(address,uint256)")[:4].hex()
RETURN_URL = "https://shop.example/thanks"


class PermitWallet(InjectedWallet):
    """The injected wallet, which also signs EIP-712 typed data and answers eth_call."""

    async def handle(self, method: str, params_json: str) -> dict[str, Any]:
        params = json.loads(params_json)
        if method == "eth_signTypedData_v4":
            self.calls.append((method, params))
            assert params[0] == self.account.address
            typed = json.loads(params[1])
            signed = Account.sign_message(encode_typed_data(full_message=typed), self.account.key)
            return {"result": "0x" + bytes(signed.signature).hex()}
        if method == "eth_call":
            self.calls.append((method, params))
            raw = await self.evm.eth_call(params[0]["to"], bytes.fromhex(params[0]["data"][2:]))
            return {"result": "0x" + raw.hex()}
        if method == "eth_getTransactionReceipt":
            self.calls.append((method, params))
            return {"result": await self.evm.call_rpc("eth_getTransactionReceipt", params)}
        return await super().handle(method, params_json)


async def clean_in_every_language(page: Page, url: str) -> dict[str, list[str]]:
    found = {}
    for language in LANGUAGES:
        await page.goto(f"{url}?lang={language.code}")
        await expect(page.locator("html")).to_have_attribute("lang", language.code)
        found[language.code] = await axe_violations(page)
    return {code: lines for code, lines in found.items() if lines}


async def screenshots(page: Page, artifacts: Path, name: str) -> None:
    await page.set_viewport_size(DESKTOP)
    await page.screenshot(path=str(artifacts / f"{name}-desktop.png"), full_page=True)
    await page.set_viewport_size(PHONE)
    await page.screenshot(path=str(artifacts / f"{name}-phone.png"), full_page=True)
    await page.set_viewport_size(DESKTOP)


async def test_a_payer_subscribes_with_a_permit_and_cancels_from_their_page(
    page_app: RunningApp, browser: Browser, evm: EvmClient, dev: DevDeployment, artifacts: Path
) -> None:
    app = page_app
    _owner, _headers, created = await offered(
        app.services, app.http, dev, redirectUrl=RETURN_URL, description="Coffee club"
    )
    payer: LocalAccount = await funded_payer(evm, dev, 10_000_000)  # TUSD, no native coin
    wallet = PermitWallet(evm, payer)
    url = f"{app.base_url}/subscribe/{created['id']}"
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.expose_function("__walletRpc", wallet.handle)
        await page.add_init_script(WALLET_JS)
        assert await clean_in_every_language(page, url) == {}
        await page.goto(f"{url}?lang=ar")  # right to left
        await screenshots(page, artifacts, "subscribe-ar")
        await page.goto(f"{url}?lang=en")
        await expect(page.locator("#period")).to_have_text("Every 1 minute")
        await expect(page.locator("#price")).to_have_text("$2.50")
        await screenshots(page, artifacts, "subscribe")

        await page.click("#subscribe")

        await expect(page.locator("#done-section")).to_be_visible()
        await expect(page.locator("#status")).to_have_text("Active")
        await expect(page.locator("#return-link")).to_have_attribute("href", RETURN_URL)
        await screenshots(page, artifacts, "subscribed")
        assert wallet.sent == []  # no approve: the permit was relayed
        assert await evm.get_balance(payer.address) == 0
        contract = subscriptions_address()
        assert await allowance(evm, dev, payer.address, contract) == MAX_UINT
        assert await token_balance(evm, dev, payer.address) == 10_000_000 - AMOUNT_RAW
        assert await sent(app.services, TxPurpose.SUBSCRIPTION_PERMIT) >= 1

        manage = f"{url}/manage"
        assert await clean_in_every_language(page, manage) == {}
        await page.goto(f"{manage}?lang=en")
        await expect(page.locator("#charges tbody tr")).to_have_count(1)
        await screenshots(page, artifacts, "subscription-manage")

        await page.click("#cancel")

        await expect(page.locator("#status")).to_have_text("Cancelled")
        await expect(page.locator("#wallet-message")).to_have_text(
            "Cancelled: nothing more will be charged."
        )
        await screenshots(page, artifacts, "subscription-cancelled")
    finally:
        await context.close()

    sub = await find_subscription(app.services.db, created["id"])
    assert sub.status == "cancelled"
    terms = terms_of(sub)
    subscription_id = terms.id_of(payer.address)
    cancelled = await evm.eth_call(
        contract, encode_call(SUBSCRIPTIONS, "cancelled", subscription_id)
    )
    assert int.from_bytes(cancelled, "big") == 1
    assert sub.signature is not None
    charge = encode_call(
        SUBSCRIPTIONS,
        "charge",
        terms.as_tuple(),
        payer.address,
        bytes.fromhex(sub.signature[2:]),
        1,
    )
    with pytest.raises(ContractRevert) as refused:
        await evm.eth_call(contract, charge)
    reason = decode_revert(refused.value.revert_data)
    assert reason is not None and reason.name == "SubscriptionCancelled"
    assert await evm.get_balance(payer.address) == 0  # the cancellation cost the payer nothing


async def test_a_payer_approves_from_the_wallet_when_the_token_has_no_permit(
    make_services: MakeServices,
    browser: Browser,
    evm: EvmClient,
    dev: DevDeployment,
    artifacts: Path,
) -> None:
    # TUSD listed without its EIP-712 domain: the service knows no permit for it.
    services = await make_services(chain={"tokens": (replace(dev.token_config, eip3009=None),)})
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        _owner, _headers, created = await offered(
            services, http, dev, redirectUrl=RETURN_URL, maxPeriods=3
        )
        payer: LocalAccount = await funded_payer(evm, dev, 10_000_000)
        await evm.call_rpc("anvil_setBalance", [payer.address, hex(10**17)])  # the approve's gas
        permits_before = await sent(services, TxPurpose.SUBSCRIPTION_PERMIT)
        wallet = PermitWallet(evm, payer)
        url = f"{base_url}/subscribe/{created['id']}"
        context = await browser.new_context(viewport=DESKTOP)
        try:
            page = await context.new_page()
            await page.expose_function("__walletRpc", wallet.handle)
            await page.add_init_script(WALLET_JS)
            assert await clean_in_every_language(page, url) == {}
            await page.goto(f"{url}?lang=en")
            await expect(page.locator("#subscribe-section ol.steps")).to_contain_text(
                "Approve the subscriptions contract to take each period's amount."
            )
            await screenshots(page, artifacts, "subscribe-approve")

            await page.click("#subscribe")

            await expect(page.locator("#done-section")).to_be_visible()
            await expect(page.locator("#status")).to_have_text("Active")
            await expect(page.locator("#return-link")).to_have_attribute("href", RETURN_URL)
            assert await axe_violations(page) == []
            await screenshots(page, artifacts, "subscribed-approve")
        finally:
            await context.close()
        methods = [method for method, _params in wallet.calls]
        # Approved, the approve mined, then the subscription signed: no permit signed.
        assert methods.index("eth_sendTransaction") < methods.index("eth_getTransactionReceipt")
        assert methods.index("eth_getTransactionReceipt") < methods.index("eth_signTypedData_v4")
        assert methods.count("eth_signTypedData_v4") == 1
        (tx,) = [params[0] for method, params in wallet.calls if method == "eth_sendTransaction"]
        contract = subscriptions_address()
        assert tx["to"] == dev.token
        assert tx["data"][2:10] == APPROVE_SELECTOR
        assert int(tx["data"][10:74], 16) == int(contract, 16)  # the spender
        assert int(tx["data"][74:], 16) == 3 * AMOUNT_RAW  # every period of the three
        assert len(wallet.sent) == 1
        assert (await evm.get_receipt(wallet.sent[0]) or {}).get("status") in (1, "0x1")
        # The allowance covered the three periods; the first was charged at once.
        assert await allowance(evm, dev, payer.address, contract) == 2 * AMOUNT_RAW
        assert await token_balance(evm, dev, payer.address) == 10_000_000 - AMOUNT_RAW
        assert await sent(services, TxPurpose.SUBSCRIPTION_PERMIT) == permits_before
        sub = await find_subscription(services.db, created["id"])
        assert sub.status == "active" and sub.payer == payer.address
