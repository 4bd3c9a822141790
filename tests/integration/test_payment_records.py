"""Payments of record on a real anvil and a real database: every transfer into an escrow is
recorded with who sent it, from split payments to a contract's internal transfer, and a
reorg that removes a transfer removes its record."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from eth_account import Account
from sqlalchemy import select

from invoicing.addresses import normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.invoices.owner_view import owner_views
from invoicing.monitor import worker as monitor_worker
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event
from invoicing.tables.records import PaymentScan
from invoicing.web.app import create_app
from invoicing.workers import STOP_GRACE_S, run_workers
from tests.conftest import MakeServices
from tests.support.api import issue_api_key, key_headers
from tests.support.monitor_anvil import (
    FAST,
    PAYER_KEY,
    eventually,
    open_invoice,
    pay_token,
    running_workers,
)
from tests.support.rpc_faults import faulty_rpc
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

OTHER_KEY = DEV_PRIVATE_KEYS[7]
PAYER = Account.from_key(PAYER_KEY).address
OTHER = Account.from_key(OTHER_KEY).address


async def view_of(services: Services, invoice: Invoice) -> dict[str, Any]:
    async with services.db.sessions() as session:
        row = await session.get(Invoice, invoice.id)
        assert row is not None
        (view,) = await owner_views(session, services.settings.payment_page_url, [row])
    return view


async def payments_of(services: Services, invoice: Invoice) -> list[dict[str, Any]]:
    return list((await view_of(services, invoice)).get("payments", []))


async def wait_for_payments(services: Services, invoice: Invoice, count: int) -> list[Any]:
    async def enough() -> bool:
        return len(await payments_of(services, invoice)) == count

    await eventually(enough, timeout_s=60, what=f"{count} payments of record")
    return await payments_of(services, invoice)


def forwarder_init_code(to: str) -> bytes:
    """Init code of a contract that, while being created, sends all the value it was given
    to ``to`` (CALL(gas, to, callvalue, 0, 0, 0, 0)): an internal transfer."""
    return bytes.fromhex("6000600060006000" + "34" + "73" + to[2:].lower() + "5af1" + "00")


async def test_split_native_payments_from_two_senders_and_a_contract_are_recorded(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(**FAST)
    owner = new_owner()
    invoice = await open_invoice(services, owner, "1", None)

    async with running_workers(services):
        first = await evm.transact(PAYER_KEY, invoice.payment_address, value=3 * 10**17)
        second = await evm.transact(OTHER_KEY, invoice.payment_address, value=2 * 10**17)
        created = await evm.transact(
            PAYER_KEY, None, forwarder_init_code(invoice.payment_address), value=5 * 10**17
        )
        payments = await wait_for_payments(services, invoice, 3)
        events = await _events(services, invoice, "invoice.payment_recorded")

    contract = normalize_address(created["contractAddress"])
    assert payments == [
        _native(first, PAYER, 3 * 10**17),
        _native(second, OTHER, 2 * 10**17),
        _native(created, contract, 5 * 10**17),
    ]
    view = await view_of(services, invoice)
    assert (view["status"], view["balanceRaw"]) == ("paid", str(10**18))
    recorded = [p for event in events for p in event.data["payments"]]
    assert sorted(recorded, key=lambda p: p["blockNumber"]) == payments
    # The API's owner representations carry them too: the status lookup and the list.
    headers = key_headers(await issue_api_key(services, owner))
    where = {"ownerAddress": owner.address, "paymentAddress": invoice.payment_address}
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        status = await http.get("/integration/invoices/status", params=where, headers=headers)
        listed = await http.get(
            "/integration/invoices", params={"ownerAddress": owner.address}, headers=headers
        )
    assert status.status_code == 200, status.text
    assert status.json()["invoice"]["payments"] == payments
    assert [item["payments"] for item in listed.json()["items"]] == [payments]


async def test_split_token_payments_from_two_senders_are_recorded(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    services = await make_services(**FAST)
    invoice = await open_invoice(services, new_owner(), "10", None, token=dev.token)

    async with running_workers(services):
        await pay_token(evm, dev.token, invoice.payment_address, 4 * 10**6)
        await _pay_token_from(evm, OTHER_KEY, dev.token, invoice.payment_address, 6 * 10**6)
        payments = await wait_for_payments(services, invoice, 2)

    assert [(p["from"], p["amountRaw"], p["tokenAddress"]) for p in payments] == [
        (PAYER, str(4 * 10**6), dev.token),
        (OTHER, str(6 * 10**6), dev.token),
    ]
    receipts = [await evm.get_receipt(p["txHash"]) for p in payments]
    assert [int(r["blockNumber"]) for r in receipts if r] == [p["blockNumber"] for p in payments]


async def test_a_reorg_that_removes_a_transfer_removes_its_record(
    make_services: MakeServices, evm: EvmClient
) -> None:
    services = await make_services(**FAST)
    invoice = await open_invoice(services, new_owner(), "1", None)

    async with running_workers(services):
        kept = await evm.transact(PAYER_KEY, invoice.payment_address, value=10**17)
        await wait_for_payments(services, invoice, 1)
        dropped = await evm.transact(OTHER_KEY, invoice.payment_address, value=2 * 10**17)
        await wait_for_payments(services, invoice, 2)
        # The last block (the second payment's) is replaced by an empty one.
        head = await evm.block_number()
        assert int(dropped["blockNumber"]) == head
        await evm.call_rpc("anvil_reorg", [1, []])
        await evm.call_rpc("anvil_mine", ["0x1"])
        payments = await wait_for_payments(services, invoice, 1)

    assert payments == [_native(kept, PAYER, 10**17)]
    assert await evm.get_receipt(dropped["transactionHash"]) is None


async def test_a_stop_does_not_wait_for_a_records_run_held_up_by_the_node(
    make_services: MakeServices, evm: EvmClient, anvil: AnvilProcess
) -> None:
    """The records run reads each block's traces; on a node that hangs on them (each call
    then takes the RPC client's timeout, on every attempt) a stop, a user's Ctrl-C or the
    app shutting down, is still prompt: the run is cut short, its scan stays queued."""
    async with faulty_rpc(anvil.url) as node:
        services = await make_services(chain={"rpc_url": node.url}, **FAST)
        invoice = await open_invoice(services, new_owner(), "1", None)
        node.hanging = {"trace_block"}
        stop = asyncio.Event()
        task = asyncio.create_task(run_workers(services, stop, [monitor_worker.run]))
        try:
            await evm.transact(PAYER_KEY, invoice.payment_address, value=10**17)

            async def seen_and_asked_for_traces() -> bool:
                async with services.db.sessions() as session:
                    row = await session.get(Invoice, invoice.id)
                seen = row is not None and int(row.balance_raw) == 10**17
                return seen and node.methods["trace_block"] > 0

            await eventually(seen_and_asked_for_traces, timeout_s=60, what="the records run")
        finally:
            stop.set()
            stopping = time.monotonic()
            await asyncio.wait_for(task, 120)
        stopped_s = time.monotonic() - stopping

    # Well within the grace after which the workers' supervisor cancels a worker.
    assert stopped_s < STOP_GRACE_S / 2, f"the monitor took {stopped_s:.1f} s to stop"
    assert await payments_of(services, invoice) == []
    async with services.db.sessions() as session:
        queued = await session.scalar(
            select(PaymentScan).where(PaymentScan.invoice_id == invoice.id)
        )
    assert queued is not None  # read again at the next start


def _native(receipt: dict[str, Any], sender: str, amount: int) -> dict[str, Any]:
    return {
        "txHash": receipt["transactionHash"],
        "from": sender,
        "amountRaw": str(amount),
        "tokenAddress": None,
        "blockNumber": int(receipt["blockNumber"]),
    }


async def _pay_token_from(evm: EvmClient, key: str, token: str, to: str, amount: int) -> None:
    receipt = await evm.transact(key, token, encode_call(TEST_TOKEN, "transfer", to, amount))
    assert receipt["status"] == 1


async def _events(services: Services, invoice: Invoice, event_type: str) -> list[Event]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(Event).where(Event.invoice_pk == invoice.id, Event.type == event_type)
        )
        return list(rows)
