"""No stranded funds, on anvil: funds reaching an escrow after every sweep window, a token
sent to a native invoice and native coin sent to a token invoice are found by the low-rate
lifetime pass, shown to the owner as ``otherBalances`` and swept to the owner; the pass reads
nothing at rest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.clock import FakeClock
from invoicing.monitor import worker as monitor_worker
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.lifetime import run_lifetime_pass
from invoicing.services import Services
from invoicing.settlement.worker import settlement_step
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.rpc_log import recording_proxy
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    PAYER_KEY,
    balance_of,
    gateway,
    new_invoice,
    paid_invoice,
    pay,
    relayer_of,
    reload,
    settle_all,
)

pytestmark = pytest.mark.integration

WINDOW_S = 60
PATH = "/integration/invoices"


async def with_fake_clock(make_services: MakeServices, **overrides: Any) -> Services:
    services = await make_services(late_payment_window_s=WINDOW_S, **overrides)
    services.clock = FakeClock(services.clock.now_ms())
    return services


def clock_of(services: Services) -> FakeClock:
    assert isinstance(services.clock, FakeClock)
    return services.clock


def past_every_window(services: Services, invoice: Invoice | dict[str, Any]) -> None:
    """Past the invoice's late-payment window (its first lifetime check) and past the window
    in which the withdrawals still read a settled escrow on their own."""
    expires_at = invoice["expiresAt"] if isinstance(invoice, dict) else invoice.expires_at
    clock_of(services).set(int(expires_at) + 2 * WINDOW_S * 1000 + 1)


async def sweep(services: Services, owner: str) -> int:
    """One full settlement pass for ``owner``, followed to the end; withdrawals sent."""
    sent = await settlement_step(
        services, gateway(services), relayer_of(services), True, owner_key=owner.lower()
    )
    await settle_all(services)
    return len(sent)


async def completed_invoice(
    services: Services, evm: EvmClient, owner: str, amount: str, token: str | None = None
) -> Invoice:
    invoice = await paid_invoice(services, evm, owner, amount, token)
    assert await sweep(services, owner) == 1
    done = await reload(services, invoice.id)
    assert done.status == "completed"
    return done


async def test_a_payment_after_every_sweep_window_is_found_and_swept(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await with_fake_clock(make_services)
    owner = new_owner().address
    invoice = await completed_invoice(services, evm, owner, "0.002")
    await pay(evm, invoice, 3_000_000_000)
    past_every_window(services, invoice)
    assert await sweep(services, owner) == 0  # no withdrawal window reads it any more

    result = await run_lifetime_pass(services, gateway(services))
    assert result.found >= 1
    assert await sweep(services, owner) == 1

    assert await balance_of(evm, owner) == 2 * 10**15 + 3_000_000_000
    assert await balance_of(evm, invoice.payment_address) == 0
    done = await reload(services, invoice.id)
    assert (done.status, done.swept_raw) == ("completed", str(2 * 10**15 + 3_000_000_000))


async def test_an_expired_partial_payment_past_its_window_is_swept(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await with_fake_clock(make_services)
    owner = new_owner().address
    invoice = await new_invoice(services, owner, "1")
    await pay(evm, invoice, 123_456)
    clock_of(services).set(invoice.expires_at + 1)
    assert (await recheck_invoice(services, invoice)).status == "expired"
    past_every_window(services, invoice)
    assert await sweep(services, owner) == 0

    await run_lifetime_pass(services, gateway(services))
    assert await sweep(services, owner) == 1

    assert await balance_of(evm, owner) == 123_456
    assert (await reload(services, invoice.id)).status == "expired"


@asynccontextmanager
async def api(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield http


async def owner_views(
    http: httpx.AsyncClient, key: str, owner: LocalAccount, escrow: str
) -> list[dict[str, Any]]:
    """The invoice as the status lookup and the list show it to its owner."""
    status = await http.get(
        f"{PATH}/status",
        params={"ownerAddress": owner.address, "paymentAddress": escrow},
        headers=key_headers(key),
    )
    listed = await http.get(PATH, params={"ownerAddress": owner.address}, headers=key_headers(key))
    assert (status.status_code, listed.status_code) == (200, 200)
    (item,) = [i for i in listed.json()["items"] if i["paymentAddress"] == escrow]
    return [status.json()["invoice"], item]


@pytest.mark.parametrize("invoice_token", ["native", "token"])
async def test_another_asset_in_an_escrow_is_shown_to_its_owner_then_swept(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment, invoice_token: str
) -> None:
    """TUSD sent to a native invoice's escrow, or native coin sent to a TUSD invoice's."""
    services = await with_fake_clock(make_services)
    owner = new_owner()
    own, other = (None, dev.token) if invoice_token == "native" else (dev.token, None)
    invoice = await completed_invoice(services, evm, owner.address, "0.5", own)
    stray = 4_200_000
    if other is None:
        receipt = await evm.transact(PAYER_KEY, invoice.payment_address, value=stray)
        assert receipt["status"] == 1
    else:
        await pay(evm, invoice, stray, other)
    owner_before = await balance_of(evm, owner.address, other)
    past_every_window(services, invoice)
    key = await issue_api_key(services, owner)

    async with api(services) as http:
        before = await owner_views(http, key, owner, invoice.payment_address)
        assert all("otherBalances" not in v for v in before)
        await run_lifetime_pass(services, gateway(services))
        shown = await owner_views(http, key, owner, invoice.payment_address)
        public = await http.get(f"/pay/{invoice.payment_address}/status")

        assert [v["otherBalances"] for v in shown] == [
            [{"tokenAddress": other, "balanceRaw": str(stray)}]
        ] * 2
        assert public.status_code == 200 and "otherBalances" not in public.text

        assert await sweep(services, owner.address) == 1
        after = await owner_views(http, key, owner, invoice.payment_address)

    assert await balance_of(evm, owner.address, other) == owner_before + stray
    assert await balance_of(evm, invoice.payment_address, other) == 0
    assert all("otherBalances" not in v for v in after)
    done = await reload(services, invoice.id)
    assert (done.status, done.swept_raw) == ("completed", invoice.swept_raw)


@pytest.mark.slow
async def test_at_rest_the_monitor_sends_no_lifetime_read_until_one_is_due(
    make_services: MakeServices,
    evm: EvmClient,
    anvil: AnvilProcess,
    own_database: str,
) -> None:
    async with recording_proxy(anvil.url) as (proxy_url, log):
        services = await make_services(
            database_url=own_database,
            chain={"rpc_url": proxy_url},
            default_expiry_s=3,
            late_payment_window_s=1,
            monitor_poll_interval_s=0.01,
            lifetime_poll_interval_s=0.01,
        )
        owner = new_owner().address
        invoices = [await completed_invoice(services, evm, owner, "0.0001") for _ in range(3)]
        due_at = max(invoice.lifetime_check_at for invoice in invoices)
        await asyncio.sleep(max(0.0, (due_at - services.clock.now_ms()) / 1000 + 0.1))

        async def run_monitor(seconds: float) -> int:
            before = len(log.calls)
            stop = asyncio.Event()
            task = asyncio.create_task(
                monitor_worker.watch_chain(services, gateway(services), stop)
            )
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.wait_for(task, timeout=10)
            return sum(1 for method, _ in log.calls[before:] if method == "eth_call")

        # Due: one balancesOf per asset (native, TUSD) for the three escrows, then nothing.
        assert await run_monitor(1.0) == 2
        # At rest (the next check a day away), dozens of ticks read no balance at all.
        assert await run_monitor(1.0) == 0
