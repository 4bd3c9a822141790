"""'Pay without gas' in headless Chromium with an injected wallet: a payer holding TUSD and
no native coin signs an EIP-3009 authorization; the invoice becomes paid, the paid webhook
arrives and the sweep completes, with the service's workers running."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from playwright.async_api import Browser, expect

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.web.app import create_app
from tests.browser.conftest import axe_violations
from tests.conftest import MakeServices, RunningApp
from tests.integration.conftest import own_database  # noqa: F401 (a fixture)
from tests.support.api import issue_api_key, key_headers
from tests.support.chain import read_view
from tests.support.payment_page import DESKTOP, PAYER, PHONE, WALLET_JS, InjectedWallet
from tests.support.receiver import Receiver, receiver
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.browser

SETTLE_TIMEOUT_MS = 30_000


class SigningWallet(InjectedWallet):
    """The injected wallet, which also signs EIP-712 typed data (eth_signTypedData_v4)."""

    async def handle(self, method: str, params_json: str) -> dict[str, Any]:
        if method != "eth_signTypedData_v4":
            return await super().handle(method, params_json)
        params = json.loads(params_json)
        self.calls.append((method, params))
        assert params[0] == self.account.address
        typed = json.loads(params[1])
        signed = Account.sign_message(encode_typed_data(full_message=typed), self.account.key)
        return {"result": "0x" + bytes(signed.signature).hex()}


@pytest.fixture
async def working_app(
    make_services: MakeServices,
    own_database: str,  # noqa: F811
) -> AsyncIterator[tuple[RunningApp, Receiver]]:
    """The app with its workers running on a database of its own, and a webhook receiver."""
    services = await make_services(
        database_url=own_database,
        page_recheck_interval_s=0.5,
        monitor_poll_interval_s=0.1,
        webhook_poll_interval_s=0.05,
        withdrawal_interval_s=0.5,
        settlement_poll_interval_s=0.1,
    )
    async with (
        receiver() as hooks,
        serve(create_app(services, run_workers_in_process=True)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http), hooks


async def tokens_only_payer(evm: EvmClient, dev: DevDeployment, token_raw: int) -> LocalAccount:
    account: LocalAccount = Account.create()
    await evm.transact(
        PAYER, dev.token, encode_call(TEST_TOKEN, "mint", account.address, token_raw)
    )
    assert await evm.get_balance(account.address) == 0
    return account


async def test_a_payer_without_native_coin_pays_without_gas(
    browser: Browser,
    working_app: tuple[RunningApp, Receiver],
    dev: DevDeployment,
    evm: EvmClient,
    artifacts: Path,
) -> None:
    app, hooks = working_app
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    headers = key_headers(key)
    opt_in = {"ownerAddress": owner.address, "chainId": dev.chain_id, "enabled": True}
    assert (await app.http.post("/integration/gasless", json=opt_in, headers=headers)).is_success
    body = {
        "ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "4.25",
        "tokenAddress": dev.token, "webhookUrl": hooks.url("/paid"),
    }  # fmt: skip
    created = await app.http.post("/integration/invoices", json=body, headers=headers)
    assert created.status_code == 201, created.text
    escrow = created.json()["paymentAddress"]
    wallet = SigningWallet(evm, await tokens_only_payer(evm, dev, 10_000_000))
    context = await browser.new_context(viewport=DESKTOP)
    try:
        page = await context.new_page()
        await page.expose_function("__walletRpc", wallet.handle)
        await page.add_init_script(WALLET_JS)
        await page.goto(f"{app.base_url}/pay/{escrow}")
        await expect(page.locator("#gasless")).to_be_visible()
        await expect(page.locator("#wallet")).to_be_visible()
        assert await axe_violations(page) == []
        await page.screenshot(path=str(artifacts / "gasless-desktop.png"), full_page=True)
        await page.set_viewport_size(PHONE)
        await page.screenshot(path=str(artifacts / "gasless-phone.png"), full_page=True)

        await page.locator("#gasless").click()
        await expect(page.locator("#wallet-message")).to_contain_text(
            "the network fee is paid for you"
        )
        tx_hash = await page.locator("#wallet-message").get_attribute("data-tx-hash")
        await expect(page.locator("#status")).to_have_text(
            "Payment received", timeout=SETTLE_TIMEOUT_MS
        )
        assert await axe_violations(page) == []
    finally:
        await context.close()

    assert [method for method, _ in wallet.calls] == [
        "eth_requestAccounts",
        "eth_chainId",
        "wallet_switchEthereumChain",
        "eth_signTypedData_v4",
    ]
    signed = json.loads(wallet.calls[3][1][1])
    assert signed["domain"] == {
        "name": "Test USD", "version": "1", "chainId": dev.chain_id, "verifyingContract": dev.token,
    }  # fmt: skip
    assert signed["message"]["to"] == escrow and signed["message"]["value"] == "4250000"
    receipt = await evm.get_receipt(str(tx_hash))
    assert receipt is not None and receipt["status"] == 1
    assert await evm.get_balance(wallet.account.address) == 0  # no gas paid by the payer
    (hook,) = await hooks.wait_for("/paid", timeout_s=30)
    assert hook.body["paymentAddress"] == escrow
    # The sweep moves the payment to the owner.
    await _until(lambda: read_view(evm, dev.token, ERC20, "balanceOf", owner.address), 4_250_000)

    async def status() -> str:
        answer = await app.http.get(
            "/integration/invoices/status",
            params={"ownerAddress": owner.address, "paymentAddress": escrow},
            headers=headers,
        )
        return str(answer.json()["invoice"]["status"])

    await _until(status, "completed")


async def _until(read: Any, expected: object, timeout_s: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (found := await read()) != expected:
        assert loop.time() < deadline, f"{found} != {expected}"
        await asyncio.sleep(0.2)
