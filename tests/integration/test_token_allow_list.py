"""Each chain accepts only its listed tokens, and the request path never calls a token:
decimals and symbol come from the configuration."""

from __future__ import annotations

import pytest
from httpx import AsyncClient

from invoicing.api.app import create_app
from invoicing.chain import artifacts
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import EvmGateway
from invoicing.settings import TokenConfig
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.server import serve
from tests.support.signing import new_owner

DEPLOYER = DEV_PRIVATE_KEYS[8]  # not the relayer's account: its nonces are the relayer's


def rpc_calls(app: RunningApp, chain_id: int) -> int:
    gateway = app.services.chains.get(chain_id)
    assert isinstance(gateway, EvmGateway)
    return gateway.evm.rpc.calls


@pytest.fixture(scope="module")
async def unlisted_token(evm: EvmClient) -> str:
    """A real ERC-20 (answers decimals() = 6) that no chain configuration lists."""
    return await deploy_contract(evm, DEPLOYER, artifacts.test_token_bytecode())


async def test_a_token_off_the_list_is_refused_without_calling_it(
    app: RunningApp, dev: DevDeployment, unlisted_token: str
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    calls_before = rpc_calls(app, dev.chain_id)

    response = await app.http.post(
        "/integration/invoices",
        json={
            "ownerAddress": owner.address,
            "chainId": dev.chain_id,
            "amount": "1",
            "tokenAddress": unlisted_token,
        },
        headers=key_headers(key),
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_token"
    assert error["details"] == {"field": "tokenAddress", "chainId": dev.chain_id}
    assert rpc_calls(app, dev.chain_id) == calls_before  # not even eth_call decimals()
    listed = await app.http.get(
        "/integration/invoices",
        params={"ownerAddress": owner.address},
        headers=key_headers(key),
    )
    assert listed.json()["items"] == []


async def test_a_listed_token_takes_decimals_and_symbol_from_the_configuration(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    # The chain says TUSD has 6 decimals; this configuration says 2 and calls it "CUSD".
    services = await make_services(
        chain={"tokens": (TokenConfig(dev.token, "CUSD", 2),)}, page_recheck_interval_s=3600
    )
    owner = new_owner()
    key = await issue_api_key(services, owner)
    gateway = services.chains.get(dev.chain_id)
    assert isinstance(gateway, EvmGateway)
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        calls_before = gateway.evm.rpc.calls
        response = await http.post(
            "/integration/invoices",
            json={
                "ownerAddress": owner.address,
                "chainId": dev.chain_id,
                "amount": "1.25",
                "tokenAddress": dev.token.lower(),
            },
            headers=key_headers(key),
        )
        calls_after_create = gateway.evm.rpc.calls
        page = await http.get(f"/pay/{response.json()['paymentAddress']}")

    assert response.status_code == 201, response.text
    invoice = response.json()
    assert invoice["tokenAddress"] == dev.token
    assert invoice["requiredRaw"] == "125"
    assert calls_after_create == calls_before
    assert page.status_code == 200 and "CUSD" in page.text and "TUSD" not in page.text


async def test_the_same_token_on_another_chain_config_is_not_accepted_by_default(
    make_services: MakeServices, dev: DevDeployment
) -> None:
    services = await make_services(chain={"tokens": ()})
    owner = new_owner()
    key = await issue_api_key(services, owner)
    async with serve(create_app(services)) as base_url, AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/integration/invoices",
            json={
                "ownerAddress": owner.address,
                "chainId": dev.chain_id,
                "amount": "1",
                "tokenAddress": dev.token,
            },
            headers=key_headers(key),
        )
        native = await http.post(
            "/integration/invoices",
            json={"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"},
            headers=key_headers(key),
        )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_token"
    assert native.status_code == 201
