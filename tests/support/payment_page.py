"""The payment page as the browser tests drive it: an injected wallet (EIP-1193) over anvil,
viewports, invoices made to be shown, and the page's contrast read in the browser."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from tests.conftest import RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.signing import new_owner

PAYER = DEV_PRIVATE_KEYS[7]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
FLIP_TIMEOUT_MS = 20_000

# Contrast ratio (WCAG) of every visible text element against its effective background.
CONTRAST_JS = """
() => {
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const rgba = (s) => s.match(/[\\d.]+/g).map(Number);
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgba(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const worst = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!el.offsetParent && el.tagName !== "BODY") continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const fg = lum(rgba(getComputedStyle(el).color).slice(0, 3));
    const bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    worst.push([el.id || el.tagName, Math.round(ratio * 100) / 100]);
  }
  return worst;
}
"""


WALLET_JS = """
window.ethereum = {
  isInjectedWallet: true,
  request: async (args) => {
    const answer = await window.__walletRpc(args.method, JSON.stringify(args.params || []));
    if (answer.error) {
      const error = new Error(answer.error.message);
      error.code = answer.error.code;
      throw error;
    }
    return answer.result;
  },
  on() {},
  removeListener() {},
};
"""


class InjectedWallet:
    """An EIP-1193 wallet for the page: it starts on mainnet (so the page must switch),
    signs with its own key and forwards the raw transaction to anvil."""

    def __init__(self, evm: EvmClient, account: LocalAccount, reject: bool = False) -> None:
        self.evm = evm
        self.account = account
        self.reject = reject
        self.chain_id = 1
        self.calls: list[tuple[str, Any]] = []
        self.sent: list[str] = []

    async def handle(self, method: str, params_json: str) -> dict[str, Any]:
        params = json.loads(params_json)
        self.calls.append((method, params))
        if method == "eth_requestAccounts":
            return {"result": [self.account.address]}
        if method == "eth_chainId":
            return {"result": hex(self.chain_id)}
        if method == "wallet_switchEthereumChain":
            self.chain_id = int(params[0]["chainId"], 16)
            return {"result": None}
        if method == "eth_sendTransaction":
            if self.reject:
                return {"error": {"code": 4001, "message": "User rejected the request."}}
            tx = params[0]
            assert tx["from"] == self.account.address
            receipt = await self.evm.transact(
                self.account.key.to_0x_hex(),
                tx["to"],
                bytes.fromhex(tx.get("data", "0x")[2:]),
                value=int(tx.get("value", "0x0"), 16),
            )
            assert receipt["status"] == 1
            self.sent.append(receipt["transactionHash"])
            return {"result": receipt["transactionHash"]}
        return {"error": {"code": 4200, "message": f"unsupported method {method}"}}


async def create(app: RunningApp, dev: DevDeployment, **fields: Any) -> dict[str, Any]:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1", **fields}
    response = await app.http.post("/integration/invoices", json=body, headers=key_headers(key))
    assert response.status_code == 201, response.text
    invoice: dict[str, Any] = response.json()
    invoice["_key"] = key
    return invoice


async def create_expired(app: RunningApp, dev: DevDeployment, **fields: Any) -> dict[str, Any]:
    """An invoice whose `expiresAt` has just passed. It is created to expire 1 s later; on a
    loaded machine a create can take longer than that (refused: `expiresAt` in the past), so
    it is sent again with twice the time, up to 16 s."""
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    margin_ms = 1_000
    while True:
        expires_at = int(time.time() * 1000) + margin_ms
        body = {"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"}
        response = await app.http.post(
            "/integration/invoices",
            json={**body, **fields, "expiresAt": expires_at},
            headers=key_headers(key),
        )
        if response.status_code == 201:
            break
        assert response.json()["error"]["details"] == {"field": "expiresAt"}, response.text
        assert margin_ms < 16_000, response.text
        margin_ms *= 2
    await asyncio.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.2)
    invoice: dict[str, Any] = response.json()
    invoice["_key"] = key
    return invoice


async def funded_payer(evm: EvmClient, dev: DevDeployment, token_raw: int = 0) -> LocalAccount:
    account: LocalAccount = Account.create()
    await evm.call_rpc("anvil_setBalance", [account.address, hex(10**20)])
    if token_raw:
        await evm.transact(
            PAYER, dev.token, encode_call(TEST_TOKEN, "mint", account.address, token_raw)
        )
    return account
