"""The dashboard's back-office pages over real HTTP: email settings, reports, and the event
log's links to invoices (and, below, the team)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.monitor.records import run_records_step
from invoicing.notifications.mail.choices import NOTHING, MailChoices, mail_choices
from invoicing.tables.notifications import Event
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.signing import new_owner
from tests.support.withdrawals import gateway, paid_invoice


@pytest.fixture
def database_url(own_database: str) -> str:
    """A database of each test's own: the month report's records step scans every escrow
    whose balance changed in its database, other modules' too in the run's shared one."""
    return own_database


@pytest.fixture
async def dash(make_services: MakeServices) -> Any:
    async with dashboard_app(make_services) as app:
        yield app


@contextlib.asynccontextmanager
async def signed_in_client(
    app: RunningApp, chain_id: int, account: Any = None
) -> AsyncIterator[tuple[httpx.AsyncClient, Any, str]]:
    owner = account or new_owner()
    async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
        assert (await sign_in(client, owner, chain_id)).status_code == 200
        csrf = csrf_of((await client.get("/dashboard")).text)
        yield client, owner, csrf


async def stored_mail(app: RunningApp, owner_address: str) -> MailChoices:
    async with app.services.db.sessions() as session:
        return await mail_choices(session, owner_address.lower())


async def test_the_email_form_sets_what_the_api_reads(dash: RunningApp, dev: DevDeployment) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        page = await client.get("/dashboard/email")
        saved = await client.post(
            "/dashboard/email",
            data={
                "csrf": csrf,
                "email": "owner@shop.example",
                "events": ["invoice.paid", "invoice.refunded"],
                "language": "fr",
                "receipts": "true",
            },
        )
        after = await client.get("/dashboard/email")

    assert page.status_code == 200 and 'id="mail-form"' in page.text
    assert saved.status_code == 303
    assert await stored_mail(dash, owner.address) == MailChoices(
        "owner@shop.example", ("invoice.paid", "invoice.refunded"), "fr", receipts=True
    )
    assert 'value="owner@shop.example"' in after.text


@pytest.mark.parametrize(
    "fields",
    [
        {"email": "not an address", "events": ["invoice.paid"]},
        {"email": "owner@shop.example", "events": ["invoice.nope"]},
        {"email": "owner@shop.example", "language": "xx"},
    ],
)
async def test_a_bad_email_form_is_400_and_changes_nothing(
    dash: RunningApp, dev: DevDeployment, fields: dict[str, Any]
) -> None:
    async with signed_in_client(dash, dev.chain_id) as (client, owner, csrf):
        answer = await client.post("/dashboard/email", data={"csrf": csrf, **fields})
        no_csrf = await client.post(
            "/dashboard/email", data={"email": "owner@shop.example", "events": ["invoice.paid"]}
        )

    assert answer.status_code == 400 and 'role="alert"' in answer.text
    assert no_csrf.status_code == 403
    assert await stored_mail(dash, owner.address) == NOTHING


async def test_the_month_report_holds_the_owners_payments_of_that_month(
    dash: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    invoice = await paid_invoice(dash.services, evm, owner.address, "0.0125")
    chain = gateway(dash.services)
    assert (await run_records_step(dash.services, chain, await chain.block_number())).recorded == 1
    block = await evm.get_block(await evm.block_number())
    paid = datetime.fromtimestamp(int(block["timestamp"], 16), tz=UTC)
    month = f"{paid.year}-{paid.month:02d}"
    before = f"{paid.year - 1}-{paid.month:02d}"
    async with signed_in_client(dash, dev.chain_id, owner) as (client, _owner, _csrf):
        page = await client.get("/dashboard/reports")
        this_month = await client.get("/dashboard/reports/payments.csv", params={"month": month})
        a_year_before = await client.get(
            "/dashboard/reports/payments.csv", params={"month": before}
        )
        bad = await client.get("/dashboard/reports/payments.csv", params={"month": "2026-13"})
    async with signed_in_client(dash, dev.chain_id) as (stranger, _other, _csrf):
        theirs = await stranger.get("/dashboard/reports/payments.csv", params={"month": month})

    assert f'href="/dashboard/reports/payments.csv?month={month}"' in page.text
    assert this_month.status_code == 200
    lines = this_month.text.splitlines()
    assert lines[0].startswith("invoiceId,paymentAddress,chainId,token,amount,paidAt")
    assert [line.split(",")[:2] for line in lines[1:]] == [
        [invoice.invoice_id, invoice.payment_address]
    ]
    assert len(a_year_before.text.splitlines()) == 1
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    assert len(theirs.text.splitlines()) == 1


async def test_the_event_log_links_each_event_to_its_invoice(
    dash: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    invoice = await paid_invoice(dash.services, evm, owner.address, "0.0125")
    async with signed_in_client(dash, dev.chain_id, owner) as (client, _owner, _csrf):
        log = await client.get("/dashboard/webhooks")
        async with dash.services.db.sessions() as session:
            (event_id,) = await session.scalars(
                select(Event.id).where(Event.owner_key == owner.address.lower())
            )
        one = await client.get(f"/dashboard/events/{event_id}")

    link = f'<a href="/dashboard/invoices/{invoice.id}">{invoice.invoice_id}</a>'
    row = re.search(
        r'<td data-label="Event"><a href="/dashboard/events/[^"]+">([^<]+)</a></td>'
        r'<td data-label="Invoice">(.*?)</td>',
        log.text,
    )
    assert row is not None, log.text
    assert (row[1], row[2]) == ("Paid", link)
    assert one.status_code == 200 and f"invoice {link}" in one.text
