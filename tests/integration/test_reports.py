"""The payments report over real HTTP, against invoices paid and swept on anvil."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from invoicing.auth.guard import Caller
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.monitor.check import recheck_invoice
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.invoices import Invoice
from invoicing.web.app import create_app
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.server import serve
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    gateway,
    paid_invoice,
    pay,
    relayer_of,
    reload,
    set_owner_fee,
    settle_all,
)

REPORT = "/integration/reports/payments"
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


async def fiat_invoice(app: RunningApp, evm: EvmClient, owner: str, token: str) -> Invoice:
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
    await pay(evm, invoice, int(invoice.required_raw))
    return await recheck_invoice(app.services, invoice)


def line(invoice: Invoice, amount: str, **columns: str) -> dict[str, str]:
    base = {
        "invoiceId": invoice.invoice_id,
        "paymentAddress": invoice.payment_address,
        "chainId": str(invoice.chain_id),
        "token": invoice.token_address or "native",
        "amount": amount,
        "paidAt": str(invoice.paid_at),
        "txHash": "",
        "from": "",
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


async def test_the_report_has_a_row_per_paid_invoice_with_its_fee_and_sweep(
    app: RunningApp, evm: EvmClient, dev: DevDeployment
) -> None:
    owner, other = new_owner(), new_owner()
    await set_owner_fee(evm, dev.factory, owner, 250, new_owner().address)
    swept_a = await paid_invoice(app.services, evm, owner.address, "10", dev.token)
    swept_b = await paid_invoice(app.services, evm, owner.address, "5.5", dev.token)
    await plan_withdrawals(
        app.services,
        gateway(app.services),
        relayer_of(app.services),
        full=True,
        owner_key=owner.address.lower(),
    )
    await settle_all(app.services)
    native = await paid_invoice(app.services, evm, owner.address, "0.0125")
    fiat = await fiat_invoice(app, evm, owner.address, dev.token)
    await paid_invoice(app.services, evm, other.address, "1", dev.token)  # another owner's
    swept_a, swept_b = (
        await reload(app.services, swept_a.id),
        await reload(app.services, swept_b.id),
    )
    assert all(i.paid_at is not None for i in (swept_a, swept_b, native, fiat))
    headers = key_headers(await issue_api_key(app.services, owner))
    window = {"ownerAddress": owner.address, "dateFrom": "0", "dateTo": str(2**53)}

    answer = await app.http.get(REPORT, params=window, headers=headers)
    page = await app.http.get(
        REPORT, params={**window, "format": "json", "limit": "3"}, headers=headers
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
    sweep = rows[0]["sweepTxHash"]
    assert sweep.startswith("0x") and len(sweep) == 66
    fee_a, fee_b = 10_000_000 * 250 // 10_000, 5_500_000 * 250 // 10_000  # 2.5% of each
    expected = sorted(
        [
            line(swept_a, "10", fee=f"0.{fee_a:06d}".rstrip("0"), sweepTxHash=sweep),
            line(swept_b, "5.5", fee=f"0.{fee_b:06d}".rstrip("0"), sweepTxHash=sweep),
            line(native, "0.0125"),
            line(fiat, "7.25", fiatCurrency="USD", fiatAmount="7.25", rate="1"),
        ],
        key=lambda row: (int(row["paidAt"]), row["invoiceId"]),
    )
    assert columns == COLUMNS
    assert sorted(rows, key=lambda r: (int(r["paidAt"]), r["invoiceId"])) == expected
    assert page.status_code == 200, page.text
    as_text = [{k: str(v) for k, v in item.items()} for item in page.json()["items"]]
    assert as_text + [{k: str(v) for k, v in r.items()} for r in rest.json()["items"]] == rows
    assert rest.json()["nextCursor"] is None
    assert [item["invoiceId"] for item in in_usd.json()["items"]] == [fiat.invoice_id]


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
