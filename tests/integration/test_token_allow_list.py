"""Each chain accepts only its listed tokens, and the request path never calls a token:
decimals and symbol come from the configuration. The chain is reached through a proxy that
records every JSON-RPC call, so "no call" is what anvil saw."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from httpx import AsyncClient

from invoicing.chain import artifacts
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import TokenConfig
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.evm import EvmClient
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.rpc_log import RpcLog, recording_proxy
from tests.support.server import serve
from tests.support.signing import new_owner

DEPLOYER = DEV_PRIVATE_KEYS[8]  # not the relayer's account: its nonces are the relayer's


@pytest.fixture
async def unlisted_token(evm: EvmClient) -> str:
    """A real ERC-20 (answers decimals() = 6) that no chain configuration lists."""
    return await deploy_contract(evm, DEPLOYER, artifacts.test_token_bytecode())


@pytest.fixture
async def rpc(anvil: AnvilProcess) -> AsyncIterator[tuple[str, RpcLog]]:
    async with recording_proxy(anvil.url) as proxy:
        yield proxy


async def create(
    make_services: MakeServices,
    rpc: tuple[str, RpcLog],
    body: dict[str, Any],
    **chain: Any,
) -> tuple[int, dict[str, Any], list[tuple[str, list[Any]]], str]:
    """POST one invoice on an app whose chain goes through the recording proxy; returns the
    status, the body, the RPC calls the create made, and the payment page (when created)."""
    url, log = rpc
    services = await make_services(chain={"rpc_url": url, **chain})
    owner = new_owner()
    key = await issue_api_key(services, owner)
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        before = len(log.calls)
        response = await http.post(
            "/integration/invoices",
            json={"ownerAddress": owner.address, **body},
            headers=key_headers(key),
        )
        made = log.calls[before:]
        page = ""
        if response.status_code == 201:
            page = (await http.get(f"/pay/{response.json()['paymentAddress']}")).text
        listed = await http.get(
            "/integration/invoices",
            params={"ownerAddress": owner.address},
            headers=key_headers(key),
        )
    if response.status_code != 201:
        assert listed.json()["items"] == []  # nothing was stored
    return response.status_code, response.json(), made, page


async def test_a_token_off_the_list_is_refused_without_calling_it(
    make_services: MakeServices,
    rpc: tuple[str, RpcLog],
    dev: DevDeployment,
    unlisted_token: str,
) -> None:
    status, body, made, _ = await create(
        make_services,
        rpc,
        {"chainId": dev.chain_id, "amount": "1", "tokenAddress": unlisted_token},
    )

    assert status == 400
    assert body["error"]["code"] == "unsupported_token"
    assert body["error"]["details"] == {"field": "tokenAddress", "chainId": dev.chain_id}
    assert made == []  # not even eth_call decimals() to the token
    assert rpc[1].calls_to(unlisted_token) == []


async def test_a_listed_token_takes_decimals_and_symbol_from_the_configuration(
    make_services: MakeServices, rpc: tuple[str, RpcLog], dev: DevDeployment
) -> None:
    # The chain says TUSD has 6 decimals; this configuration says 2 and calls it "CUSD".
    status, invoice, made, page = await create(
        make_services,
        rpc,
        {"chainId": dev.chain_id, "amount": "1.25", "tokenAddress": dev.token.lower()},
        tokens=(TokenConfig(dev.token, "CUSD", 2),),
    )

    assert status == 201, invoice
    assert invoice["tokenAddress"] == dev.token
    assert invoice["requiredRaw"] == "125"
    assert made == []
    assert "CUSD" in page and "TUSD" not in page


async def test_a_chain_without_tokens_accepts_only_native_invoices(
    make_services: MakeServices, rpc: tuple[str, RpcLog], dev: DevDeployment
) -> None:
    token_status, token_body, _, _ = await create(
        make_services,
        rpc,
        {"chainId": dev.chain_id, "amount": "1", "tokenAddress": dev.token},
        tokens=(),
    )
    native_status, _, _, _ = await create(
        make_services, rpc, {"chainId": dev.chain_id, "amount": "1"}, tokens=()
    )

    assert token_status == 400 and token_body["error"]["code"] == "unsupported_token"
    assert native_status == 201
