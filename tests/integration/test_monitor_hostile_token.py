"""A hostile token's attack on a real anvil: invoices in a self-deployed token whose balanceOf loops
forever must not stop the monitor from marking another owner's paid invoice paid and sending
its webhook in the same pass, nor break status lookups (real database, real HTTP receiver)."""

from __future__ import annotations

import logging

import httpx
import pytest

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.passes import run_due_pass
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.factory import deploy_test_contract
from tests.support.monitor_anvil import (
    FAST,
    open_invoice,
    pay_native,
    pay_token,
    running_workers,
)
from tests.support.monitoring import events_of, reload
from tests.support.receiver import receiver
from tests.support.rows import insert_invoice
from tests.support.server import serve
from tests.support.signing import new_owner, signed_headers

pytestmark = pytest.mark.integration

LOOPS, HUGE_ANSWER, REVERTS = 0, 1, 2


async def test_a_looping_token_does_not_stop_another_owners_paid_webhook(
    make_services: MakeServices,
    own_database: str,
    evm: EvmClient,
    dev: DevDeployment,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = await make_services(database_url=own_database, **FAST)
    chain = services.chains.all()[0]
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    attacker = new_owner().address
    hostile = [await insert_invoice(services, chain, attacker, looping, 10) for _ in range(6)]
    merchant = new_owner()
    async with receiver() as hooks:
        native = await open_invoice(services, merchant, "0.03", hooks.url("native"))
        tusd = await open_invoice(services, merchant, "4", hooks.url("tusd"), token=dev.token)

        with caplog.at_level(logging.WARNING, logger="invoicing.monitor.worker"):
            async with running_workers(services):
                await pay_native(evm, native.payment_address, 3 * 10**16)
                await pay_token(evm, dev.token, tusd.payment_address, 4_000_000)
                (native_hook,) = await hooks.wait_for("native")
                (tusd_hook,) = await hooks.wait_for("tusd")

    assert native_hook.body["status"] == tusd_hook.body["status"] == "paid"
    assert (await reload(services, native)).status == "paid"
    assert (await reload(services, tusd)).balance_raw == "4000000"
    assert [r.message for r in caplog.records if "failed" in r.message] == []
    for invoice in hostile:
        row = await reload(services, invoice)
        assert (row.status, row.balance_raw, row.updated_at) == ("pending", "0", invoice.updated_at)
        assert await events_of(services, invoice) == []


@pytest.mark.parametrize("mode", [LOOPS, HUGE_ANSWER, REVERTS])
async def test_due_pass_with_hostile_tokens_reads_everything_else(
    make_services: MakeServices, own_database: str, evm: EvmClient, mode: int
) -> None:
    services = await make_services(database_url=own_database)
    chain = services.chains.all()[0]
    token = await deploy_test_contract(evm, "HostileToken", ("uint256", mode))
    hostile = await insert_invoice(services, chain, new_owner().address, token, 10)
    paid = await open_invoice(services, new_owner(), "0.01", None)
    await pay_native(evm, paid.payment_address, 10**16)

    result = await run_due_pass(services, chain)

    assert (result.checked, result.paid, result.unreadable) == (1, 1, 1)
    assert (await reload(services, paid)).status == "paid"
    assert (await reload(services, hostile)).updated_at == hostile.updated_at


async def test_status_lookups_of_a_hostile_token_invoice_answer_it_unchanged(
    make_services: MakeServices, own_database: str, evm: EvmClient
) -> None:
    services = await make_services(database_url=own_database)
    chain = services.chains.all()[0]
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", LOOPS))
    owner = new_owner()
    invoice = await insert_invoice(services, chain, owner.address, looping, 10)
    query = {"paymentAddress": invoice.payment_address}
    app = create_app(services, run_workers_in_process=False)

    async with serve(app) as base, httpx.AsyncClient(base_url=base) as http:
        lookup = await http.get(
            "/integration/invoices/status",
            params={"ownerAddress": owner.address, **query},
            headers=signed_headers(owner, "invoice.status", query),
        )
        page = await http.get(f"/pay/{invoice.payment_address}/status")

    assert lookup.status_code == 200
    body = lookup.json()["invoice"]
    assert (body["status"], body["balanceRaw"]) == ("pending", "0")
    assert body["lastCheckedAt"] == invoice.last_checked_at
    assert page.status_code == 200
    assert page.json()["status"] == "pending"
    assert (await reload(services, invoice)).updated_at == invoice.updated_at
