"""Upgrading a chain from a previous factory version to the current one, on anvil: the
start-up check accepts a chain on any known version, and invoices made under a previous
factory keep working after the upgrade (their sweeps, refunds and export lines go to the
factory that made their escrow), beside new invoices on the current factory."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.addresses import normalize_address
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import (
    PAYMENT_FACTORY,
    PAYMENT_FACTORY_V1,
    PAYMENT_FACTORY_V2,
    load_artifact,
)
from invoicing.chain.checks import ChainCheckFailed, verify_chain
from invoicing.chain.deploy import DevDeployment, deploy_deterministic
from invoicing.chain.eip712 import refund_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.chain.versions import V1_FACTORY_ADDRESS, V2_FACTORY_ADDRESS
from invoicing.invoices.export import export_escrows
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from invoicing_client import AsyncClient
from tests.conftest import MakeServices, chain_config
from tests.support.api import issue_api_key, key_headers
from tests.support.chain import read_view
from tests.support.server import serve
from tests.support.withdrawals import (
    balance_of,
    gateway,
    paid_invoice,
    relayer_of,
    reload,
    set_owner_fee,
    settle_all,
    sign_typed,
)

pytestmark = pytest.mark.integration

REFUND = "/integration/invoices/refund-meta"


@pytest.fixture(scope="session")
async def v1(evm: EvmClient) -> str:
    """Factory version 1 at the address its `invoicing deploy` gave it."""
    code = load_artifact(PAYMENT_FACTORY_V1).bytecode
    deployed = await deploy_deterministic(evm, DEV_PRIVATE_KEYS[0], code, PAYMENT_FACTORY_V1)
    assert deployed.address == V1_FACTORY_ADDRESS
    return deployed.address


@pytest.fixture(scope="session")
async def v2(evm: EvmClient) -> str:
    """Factory version 2 at the address its `invoicing deploy` gave it."""
    code = load_artifact(PAYMENT_FACTORY_V2).bytecode
    deployed = await deploy_deterministic(evm, DEV_PRIVATE_KEYS[0], code, PAYMENT_FACTORY_V2)
    assert deployed.address == V2_FACTORY_ADDRESS
    return deployed.address


async def upgraded(make_services: MakeServices, dev: DevDeployment, v1: str) -> Services:
    return await make_services(chain={"factory": dev.factory, "previous_factories": (v1,)})


async def sweep(services: Services, owner: str) -> list[Any]:
    sent = await plan_withdrawals(
        services, gateway(services), relayer_of(services), full=True, owner_key=owner.lower()
    )
    await settle_all(services)
    return sent


async def test_the_start_up_check_accepts_any_version_and_refuses_an_unknown_previous_one(
    anvil: AnvilProcess, evm: EvmClient, dev: DevDeployment, v1: str, v2: str
) -> None:
    stranger = Account.create().address  # no code: made no escrow, passed over
    for accepted in (
        chain_config(anvil, dev, factory=v1),
        chain_config(anvil, dev, factory=v2, previous_factories=(v1,)),
        chain_config(anvil, dev, previous_factories=(v1, stranger)),
        chain_config(anvil, dev, previous_factories=(v2, v1)),
    ):
        await verify_chain(accepted, evm)

    with pytest.raises(ChainCheckFailed) as refused:
        await verify_chain(chain_config(anvil, dev, previous_factories=(dev.token,)), evm)

    assert str(refused.value) == (
        f"chain {dev.chain_id} (Anvil (local)): the code at previous factory {dev.token} is "
        "not a known PaymentFactory version"
    )
    with pytest.raises(ChainCheckFailed, match="is not a known PaymentFactory version"):
        await verify_chain(chain_config(anvil, dev, factory=dev.token), evm)


async def test_previous_factory_invoices_are_swept_through_it_beside_new_ones(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, v1: str
) -> None:
    owner = Account.create()
    payout = Account.create().address
    await set_owner_fee(evm, v1, owner, 100, payout)  # settings live in each factory
    before = await make_services(chain={"factory": v1})
    old_native = await paid_invoice(before, evm, owner.address, "0.001")
    old_token = await paid_invoice(before, evm, owner.address, "2", dev.token)
    after = await upgraded(make_services, dev, v1)
    new_native = await paid_invoice(after, evm, owner.address, "0.002")

    sent = await sweep(after, owner.address)

    assert sorted((normalize_address(tx.to_address), tx.gas > 0) for tx in sent) == sorted(
        [(dev.factory, True), (v1, True), (v1, True)]
    )
    for invoice in (old_native, old_token, new_native):
        assert (await reload(after, invoice.id)).status == "completed"
        assert await balance_of(evm, invoice.payment_address, invoice.token_address) == 0
    # Through the previous factory its fee settings apply (1% to payout); none at the new one.
    assert await balance_of(evm, payout) == 10**13
    assert await balance_of(evm, owner.address) == 99 * 10**13 + 2 * 10**15
    assert await balance_of(evm, owner.address, dev.token) == 1_980_000

    lines = [
        json.loads(line)
        async for line in export_escrows(
            after.db, owner.address.lower(), dev.chain_id, gateway(after).config.factories
        )
    ]
    assert [(line["invoiceId"], line["factory"]) for line in lines] == [
        (old_native.invoice_id, v1),
        (old_token.invoice_id, v1),
        (new_native.invoice_id, dev.factory),
    ]


async def test_a_chain_upgraded_twice_sweeps_each_invoice_through_the_factory_that_made_it(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, v1: str, v2: str
) -> None:
    owner = Account.create().address
    on_v1 = await make_services(chain={"factory": v1})
    first = await paid_invoice(on_v1, evm, owner, "0.001")
    on_v2 = await make_services(chain={"factory": v2, "previous_factories": (v1,)})
    second = await paid_invoice(on_v2, evm, owner, "0.002")
    on_v3 = await make_services(chain={"factory": dev.factory, "previous_factories": (v2, v1)})
    third = await paid_invoice(on_v3, evm, owner, "0.004")

    sent = await sweep(on_v3, owner)

    assert sorted(normalize_address(tx.to_address) for tx in sent) == sorted([dev.factory, v2, v1])
    for invoice in (first, second, third):
        assert (await reload(on_v3, invoice.id)).status == "completed"
        assert await balance_of(evm, invoice.payment_address) == 0
    assert await balance_of(evm, owner) == 7 * 10**15
    lines = [
        json.loads(line)
        async for line in export_escrows(
            on_v3.db, owner.lower(), dev.chain_id, gateway(on_v3).config.factories
        )
    ]
    assert [(line["invoiceId"], line["factory"]) for line in lines] == [
        (first.invoice_id, v1),
        (second.invoice_id, v2),
        (third.invoice_id, dev.factory),
    ]


async def refund_body(
    evm: EvmClient, factory: str, owner: LocalAccount, invoice: Invoice, to: str, amount: int
) -> dict[str, Any]:
    """A native refund signed for ``factory`` with the owner's nonce there."""
    chain_id = await evm.chain_id()
    block = await evm.get_block("latest")
    deadline = max(int(time.time()), int(block["timestamp"], 16)) + 3600
    nonce = await read_view(evm, factory, PAYMENT_FACTORY, "nonces", owner.address)
    salt = bytes.fromhex(invoice.salt[2:])
    typed = refund_typed_data(
        chain_id, factory, owner.address, salt, None, to, amount, nonce, deadline
    )
    return {
        "ownerAddress": owner.address,
        "chainId": chain_id,
        "paymentAddress": invoice.payment_address,
        "to": to,
        "amountRaw": str(amount),
        "tokenAddress": None,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": "0x" + sign_typed(owner, typed).hex(),
    }


async def test_a_previous_factory_invoice_is_refunded_through_it_after_the_upgrade(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, v1: str
) -> None:
    owner, payer = Account.create(), Account.create().address
    before = await make_services(chain={"factory": v1})
    old = await paid_invoice(before, evm, owner.address, "0.001")
    after = await upgraded(make_services, dev, v1)
    api_key = await issue_api_key(after, owner)
    async with serve(create_app(after)) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        # Signed for the current factory: not the one that made this escrow.
        wrong = await refund_body(evm, dev.factory, owner, old, payer, 4 * 10**14)
        refused = await http.post(REFUND, json=wrong, headers=key_headers(api_key))
        body = await refund_body(evm, v1, owner, old, payer, 4 * 10**14)
        answer = await http.post(REFUND, json=body, headers=key_headers(api_key))
        assert answer.status_code == 202, answer.text
        (settled,) = await settle_all(after)

    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_owner_signature"
    assert normalize_address(settled.to_address) == v1
    assert settled.status == "confirmed"
    assert await balance_of(evm, payer) == 4 * 10**14
    assert await balance_of(evm, owner.address) == 6 * 10**14  # the rest, as a sweep
    assert await read_view(evm, v1, PAYMENT_FACTORY, "nonces", owner.address) == 1
    assert await read_view(evm, dev.factory, PAYMENT_FACTORY, "nonces", owner.address) == 0
    assert (await reload(after, old.id)).status == "completed"


async def test_the_fees_route_names_the_factory_an_escrow_is_refunded_through(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, v1: str
) -> None:
    owner, payer = Account.create(), Account.create().address
    payout = Account.create().address
    await set_owner_fee(evm, v1, owner, 300, payout)  # nonces 0 and 1 at version 1
    before = await make_services(chain={"factory": v1})
    old = await paid_invoice(before, evm, owner.address, "0.001")
    after = await upgraded(make_services, dev, v1)
    new = await paid_invoice(after, evm, owner.address, "0.001")
    api_key = await issue_api_key(after, owner)
    fees = "/integration/fees"
    query = {"ownerAddress": owner.address, "chainId": str(dev.chain_id)}
    async with serve(create_app(after)) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        current = await http.get(fees, params=query, headers=key_headers(api_key))
        of_old = await http.get(
            fees, params={**query, "paymentAddress": old.payment_address},
            headers=key_headers(api_key),
        )  # fmt: skip
        of_new = await http.get(
            fees, params={**query, "paymentAddress": new.payment_address},
            headers=key_headers(api_key),
        )  # fmt: skip
        unknown = await http.get(
            fees, params={**query, "paymentAddress": Account.create().address},
            headers=key_headers(api_key),
        )  # fmt: skip
        # The Python SDK signs an older invoice's refund for the factory that made it.
        async with AsyncClient(base_url, owner.address, private_key=owner.key.to_0x_hex()) as sdk:
            submitted = await sdk.invoices.refund(old.payment_address, payer, 10**14)
        (settled,) = await settle_all(after)

    assert current.json() == {
        "feeBps": 0, "payoutAddress": None, "nonce": "0", "factory": dev.factory,
    }  # fmt: skip
    assert of_new.json() == current.json()
    assert of_old.json() == {"feeBps": 300, "payoutAddress": payout, "nonce": "2", "factory": v1}
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"
    assert (submitted.nonce, normalize_address(settled.to_address)) == (2, v1)
    assert settled.status == "confirmed"
    assert await balance_of(evm, payer) == 10**14
