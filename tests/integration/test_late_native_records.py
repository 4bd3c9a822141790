"""A native-coin transfer into an escrow after its invoice was paid is first seen by the sweep;
it is recorded however many blocks lie between it and the sweep (a run of the records step
reads 512 blocks of native transfers at most and goes on backwards at the next runs), on a
real anvil and a real database."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from sqlalchemy import select

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.evm import EvmClient
from invoicing.invoices.owner_view import owner_views
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.records import NATIVE_SCAN_BLOCKS, run_records_step
from invoicing.services import Services
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.records import PaymentScan
from tests.conftest import MakeServices
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    PAYER_KEY,
    gateway,
    new_invoice,
    relayer_of,
    reload,
    settle_all,
)

pytestmark = pytest.mark.integration

LATE_KEY = DEV_PRIVATE_KEYS[7]
ETH = 10**18


@pytest.fixture
def database_url(own_database: str) -> str:
    """The records step takes every queued scan of the chain in its database."""
    return own_database


async def payments_of(services: Services, invoice: Invoice) -> list[dict[str, Any]]:
    async with services.db.sessions() as session:
        row = await session.get(Invoice, invoice.id)
        assert row is not None
        (view,) = await owner_views(session, services.settings.payment_page_url, [row])
    return list(view.get("payments", []))


async def scan_left(services: Services, invoice: Invoice) -> tuple[int, int] | None:
    async with services.db.sessions() as session:
        row = (
            await session.execute(
                select(PaymentScan.from_block, PaymentScan.to_block).where(
                    PaymentScan.invoice_id == invoice.id
                )
            )
        ).first()
    return None if row is None else (row[0], row[1])


def record(receipt: dict[str, Any], key: str, amount: int) -> dict[str, Any]:
    return {
        "txHash": receipt["transactionHash"],
        "from": Account.from_key(key).address,
        "amountRaw": str(amount),
        "tokenAddress": None,
        "blockNumber": int(receipt["blockNumber"]),
    }


async def test_a_late_native_transfer_far_below_the_sweep_is_recorded(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services()
    chain = gateway(services)
    owner = new_owner()
    invoice = await new_invoice(services, owner.address, "0.01")
    paid = await evm.transact(PAYER_KEY, invoice.payment_address, value=ETH // 100)
    assert (await recheck_invoice(services, invoice)).status == "paid"
    await run_records_step(services, chain, await chain.block_number())
    assert await payments_of(services, invoice) == [record(paid, PAYER_KEY, ETH // 100)]

    # Paid, so no pass reads the escrow again; a late transfer, then more than a run's
    # native blocks before the sweep.
    await evm.call_rpc("anvil_mine", [hex(200)])
    late = await evm.transact(LATE_KEY, invoice.payment_address, value=3 * ETH // 1000)
    await evm.call_rpc("anvil_mine", [hex(NATIVE_SCAN_BLOCKS + 300)])
    await plan_withdrawals(
        services, chain, relayer_of(services), full=True, owner_key=owner.address.lower()
    )
    await settle_all(services)
    swept = await reload(services, invoice.id)
    assert (swept.status, swept.swept_raw) == ("completed", str(13 * ETH // 1000))
    queued = await scan_left(services, invoice)
    assert queued is not None
    assert queued[1] - queued[0] + 1 > NATIVE_SCAN_BLOCKS  # longer than one run reads
    assert queued[0] <= int(late["blockNumber"]) <= queued[1] - NATIVE_SCAN_BLOCKS

    runs = 0
    while await scan_left(services, invoice) is not None:
        runs += 1
        assert runs <= 5, "the scan does not shrink"
        await run_records_step(services, chain, await chain.block_number())

    assert runs >= 2
    assert await payments_of(services, invoice) == [
        record(paid, PAYER_KEY, ETH // 100),
        record(late, LATE_KEY, 3 * ETH // 1000),
    ]
