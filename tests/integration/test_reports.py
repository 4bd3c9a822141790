"""The payments report over real HTTP, against invoices paid (in parts, by several payers,
and over-paid after they were paid) and swept on anvil: one row per payment of record."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from eth_account import Account
from sqlalchemy import select

from invoicing.auth.guard import Caller
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.invoices.fiat import record_paid_rates
from invoicing.monitor.check import recheck_invoice
from invoicing.monitor.records import run_records_step
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    RelayerTransaction,
    Withdrawal,
    WithdrawalItem,
    WithdrawalStatus,
)
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.feeds import set_answer
from tests.support.monitor_anvil import PAYER_KEY
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    gateway,
    new_invoice,
    relayer_of,
    set_owner_fee,
    settle_all,
)

REPORT = "/integration/reports/payments"
TUSD = 10**6
COLUMNS = [
    "invoiceId",
    "paymentAddress",
    "chainId",
    "token",
    "amount",
    "paidAt",
    "txHash",
    "from",
    "fiatCurrency",
    "fiatAmount",
    "rate",
    "fee",
    "sweepTxHash",
]


@pytest.fixture
async def app(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    services = await make_services()
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


async def fiat_invoice(app: RunningApp, owner: str, token: str) -> Invoice:
    chain = gateway(app.services)
    invoice, _ = await create_invoice(
        app.services.db,
        chain,
        NewInvoice(
            owner_address=owner,
            chain_id=chain.config.chain_id,
            amount="7.25",
            token_address=token,
            currency="USD",
        ),
        Caller(owner_key=owner.lower(), mode="api_key"),
        app.services.clock.now_ms(),
        app.services.settings.default_expiry_s,
    )
    return invoice


OTHER_KEY = DEV_PRIVATE_KEYS[7]
# The dev ETH/USD feed's answer (8 decimals): 3000.12345678 USD per ETH.
ETH_USD_ANSWER = 300_012_345_678


def line(invoice: Invoice, sent: Sent, amount: str, **columns: str) -> dict[str, str]:
    base = {
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "chainId": str(invoice.chain_id),
        "token": invoice.token_address or "native",
        "amount": amount,
        "paidAt": str(sent.block_time_ms),
        "txHash": sent.tx_hash,
        "from": sent.sender,
        "fiatCurrency": "",
        "fiatAmount": "",
        "rate": "",
        "fee": "",
        "sweepTxHash": "",
    }
    return {**base, **columns}


def csv_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    return list(reader.fieldnames or []), list(reader)


async def test_the_report_has_a_row_per_payment_of_record_with_fiat_fee_and_sweep(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, other = new_owner(), new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))
    settings = {"ownerAddress": owner.address, "reportingCurrency": "USD"}
    assert (await app.http.put("/integration/settings", json=settings, headers=headers)).is_success
    await set_answer(evm, dev, ETH_USD_ANSWER)
    await set_owner_fee(evm, dev.factory, owner, 250, new_owner().address)
    split = await new_invoice(app.services, owner.address, "10", dev.token)
    split_first = await send(evm, PAYER_KEY, split, 4 * TUSD)
    split_second = await send(evm, OTHER_KEY, split, 6 * TUSD)
    single = await new_invoice(app.services, owner.address, "5.5", dev.token)
    single_sent = await send(evm, PAYER_KEY, single, 5_500_000)
    native = await new_invoice(app.services, owner.address, "0.0125")
    native_sent = await send(evm, PAYER_KEY, native, 125 * 10**14)
    fiat = await fiat_invoice(app, owner.address, dev.token)
    fiat_sent = await send(evm, PAYER_KEY, fiat, int(fiat.required_raw))
    theirs = await new_invoice(app.services, other.address, "1", dev.token)
    await send(evm, PAYER_KEY, theirs, TUSD)  # another owner's
    for invoice in (split, single, native, fiat, theirs):
        assert (await recheck_invoice(app.services, invoice)).status == "paid"
    # Paid already, so the monitor no longer reads it: an over-payment the sweep moves.
    late_sent = await send(evm, OTHER_KEY, native, 25 * 10**14)
    chain = gateway(app.services)
    assert await record_paid_rates(app.services.db, chain, app.services.clock.now_ms()) == 3
    await plan_withdrawals(
        app.services, chain, relayer_of(app.services), full=True, owner_key=owner.address.lower()
    )
    await settle_all(app.services)
    await run_records_step(app.services, chain, await chain.block_number())
    token_sweep, native_sweep = await sweep_hash(app, split), await sweep_hash(app, native)

    window = {"ownerAddress": owner.address, "dateFrom": "0", "dateTo": str(2**53)}
    answer = await app.http.get(REPORT, params=window, headers=headers)
    page = await app.http.get(
        REPORT, params={**window, "format": "json", "limit": "4"}, headers=headers
    )
    rest = await app.http.get(
        REPORT,
        params={**window, "format": "json", "cursor": page.json()["nextCursor"]},
        headers=headers,
    )
    in_usd = await signed_get(
        app.http, REPORT, owner, "reports.payments", {**window, "currency": "USD", "format": "json"}
    )

    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/csv; charset=utf-8"
    columns, rows = csv_rows(answer.text)
    usd = {"fiatCurrency": "USD", "rate": "1"}
    on_tokens = {"sweepTxHash": token_sweep}
    # 2.5% of what each escrow moved; 0.0125 ETH and 0.0025 ETH × 3000.12345678 USD.
    eth = {"fiatCurrency": "USD", "rate": "3000.12345678", "sweepTxHash": native_sweep}
    expected = sorted(
        [
            line(split, split_first, "4", fiatAmount="4.00", fee="0.25", **usd, **on_tokens),
            line(split, split_second, "6", fiatAmount="6.00", fee="0.25", **usd, **on_tokens),
            line(single, single_sent, "5.5", fiatAmount="5.50", fee="0.1375", **usd, **on_tokens),
            line(native, native_sent, "0.0125", fiatAmount="37.50", fee="0.000375", **eth),
            line(native, late_sent, "0.0025", fiatAmount="7.50", fee="0.000375", **eth),
            line(fiat, fiat_sent, "7.25", fiatAmount="7.25", fee="0.18125", **usd, **on_tokens),
        ],
        key=lambda row: (int(row["paidAt"]), row["txHash"]),
    )
    assert columns == COLUMNS
    assert sorted(rows, key=lambda r: (int(r["paidAt"]), r["txHash"])) == expected
    assert page.status_code == 200, page.text
    as_text = [{k: str(v) for k, v in item.items()} for item in page.json()["items"]]
    assert as_text + [{k: str(v) for k, v in r.items()} for r in rest.json()["items"]] == rows
    assert len(page.json()["items"]) == 4 and rest.json()["nextCursor"] is None
    assert [item["txHash"] for item in in_usd.json()["items"]] == [fiat_sent.tx_hash]


@dataclass(frozen=True)
class Sent:
    tx_hash: str
    sender: str
    block_time_ms: int


async def send(evm: EvmClient, key: str, invoice: Invoice, raw: int) -> Sent:
    """``raw`` units of the invoice's token from ``key``'s account to its escrow."""
    token = invoice.token_address
    if token is None:
        receipt = await evm.transact(key, invoice.payment_address, value=raw)
    else:
        call = encode_call(TEST_TOKEN, "transfer", invoice.payment_address, raw)
        receipt = await evm.transact(key, token, call)
    assert receipt["status"] == 1
    block = await evm.get_block(int(receipt["blockNumber"]))
    sender = Account.from_key(key).address
    return Sent(receipt["transactionHash"], sender, int(block["timestamp"], 16) * 1000)


async def sweep_hash(app: RunningApp, invoice: Invoice) -> str:
    """The transaction of the one confirmed sweep of the invoice's escrow."""
    async with app.services.db.sessions() as session:
        (tx_hash,) = await session.scalars(
            select(RelayerTransaction.mined_hash)
            .join(Withdrawal, Withdrawal.relayer_tx_id == RelayerTransaction.id)
            .join(WithdrawalItem, WithdrawalItem.withdrawal_id == Withdrawal.id)
            .where(
                WithdrawalItem.invoice_id == invoice.id,
                Withdrawal.status == WithdrawalStatus.COMPLETED,
            )
        )
    assert tx_hash is not None
    return tx_hash


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({}, 400, "invalid_request"),
        ({"dateFrom": "10", "dateTo": "10"}, 400, "invalid_request"),
        ({"dateFrom": "-1", "dateTo": "10"}, 400, "invalid_request"),
        ({"dateFrom": "x", "dateTo": "10"}, 400, "invalid_request"),
        ({"dateFrom": "0", "dateTo": "10", "currency": "usd"}, 400, "invalid_request"),
        ({"dateFrom": "0", "dateTo": "10", "format": "xlsx"}, 400, "invalid_request"),
        (
            {"dateFrom": "0", "dateTo": "10", "format": "json", "cursor": "!!"},
            400,
            "invalid_request",
        ),
        ({"dateFrom": "0", "dateTo": "10", "cursor": "MTA6YQ"}, 400, "invalid_request"),
        # "10:a": a time and a key, but not a key of this report's rows.
        (
            {"dateFrom": "0", "dateTo": "10", "format": "json", "cursor": "MTA6YQ"},
            400,
            "invalid_request",
        ),
        (
            {"dateFrom": "0", "dateTo": "10", "format": "json", "limit": "501"},
            400,
            "invalid_request",
        ),
    ],
)
async def test_bad_report_queries_are_refused(
    app: RunningApp, params: dict[str, Any], status: int, code: str
) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(app.services, owner))

    answer = await app.http.get(
        REPORT, params={"ownerAddress": owner.address, **params}, headers=headers
    )

    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


async def test_another_owners_report_is_refused(app: RunningApp) -> None:
    alice, mallory = new_owner(), new_owner()
    headers = key_headers(await issue_api_key(app.services, mallory))
    params = {"ownerAddress": alice.address, "dateFrom": "0", "dateTo": "10"}

    answer = await app.http.get(REPORT, params=params, headers=headers)

    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
