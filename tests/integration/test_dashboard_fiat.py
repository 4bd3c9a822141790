"""Fiat values in the dashboard over real HTTP, on anvil and both databases: an owner's
reporting currency (API and dashboard), an invoice priced in USD showing its locked price, an
ETH invoice valued at the rate the monitor's step recorded when it was paid (the dev price
feed), both in the list, the detail, the overview's total and the CSV export."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import httpx
import pytest

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.invoices.fiat import record_paid_rates
from tests.conftest import MakeServices, RunningApp
from tests.support.api import issue_api_key, key_headers
from tests.support.dashboard import csrf_of, dashboard_app, sign_in
from tests.support.feeds import set_answer
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

# 3,000.12345678 USD per ETH (the dev feed answers with 8 decimals).
ETH_USD_ANSWER = 300_012_345_678


@pytest.fixture
async def dash(make_services: MakeServices) -> Any:
    async with dashboard_app(make_services) as app:
        yield app


def text_of(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', page)
    assert found is not None, element_id
    return found[1]


async def test_values_in_the_reporting_currency_everywhere(
    dash: RunningApp, dev: DevDeployment, evm: EvmClient
) -> None:
    owner = new_owner()
    headers = key_headers(await issue_api_key(dash.services, owner))
    owner_body = {"ownerAddress": owner.address}
    await set_answer(evm, dev, ETH_USD_ANSWER)
    async with httpx.AsyncClient(base_url=dash.base_url, timeout=30) as client:
        assert (await sign_in(client, owner, dev.chain_id)).status_code == 200
        csrf = csrf_of((await client.get("/dashboard/settings")).text)
        # A bad code is refused and changes nothing; "usd" is read as USD.
        bad = await client.post(
            "/dashboard/settings/reporting", data={"csrf": csrf, "reportingCurrency": "XYZ"}
        )
        assert bad.status_code == 400
        read = await dash.http.get("/integration/settings", params=owner_body, headers=headers)
        assert read.json()["reportingCurrency"] is None
        saved = await client.post(
            "/dashboard/settings/reporting", data={"csrf": csrf, "reportingCurrency": "usd"}
        )
        assert saved.status_code == 303
        read = await dash.http.get("/integration/settings", params=owner_body, headers=headers)
        assert read.json()["reportingCurrency"] == "USD"

        priced = await client.post(
            "/dashboard/invoices/new",
            data={
                "csrf": csrf,
                "asset": f"{dev.chain_id}:{dev.token}",
                "amount": "19.99",
                "currency": "USD",
                "invoiceId": "priced",
                "redirectUrl": "https://shop.example/thanks",
                "cancelUrl": "https://shop.example/cart",
            },
        )
        assert priced.status_code == 201, priced.text
        in_eth = await client.post(
            "/dashboard/invoices/new",
            data={
                "csrf": csrf,
                "asset": f"{dev.chain_id}:native",
                "amount": "0.05",
                "invoiceId": "in-eth",
            },
        )
        assert in_eth.status_code == 201, in_eth.text
        listed = await dash.http.get("/integration/invoices", params=owner_body, headers=headers)
        by_id = {i["invoiceId"]: i for i in listed.json()["items"]}
        assert by_id["priced"]["redirectUrl"] == "https://shop.example/thanks"
        assert by_id["priced"]["cancelUrl"] == "https://shop.example/cart"
        transfer = encode_call(
            TEST_TOKEN, "transfer", by_id["priced"]["paymentAddress"], 19_990_000
        )
        assert (await evm.transact(DEV_PRIVATE_KEYS[4], dev.token, transfer))["status"] == 1
        paid = await evm.transact(
            DEV_PRIVATE_KEYS[4], by_id["in-eth"]["paymentAddress"], b"", value=5 * 10**16
        )
        assert paid["status"] == 1
        for invoice in by_id.values():
            summary = await client.get(f"/dashboard/invoices/{invoice['id']}/summary")
            assert ">paid<" in summary.text

        # The monitor's step: the ETH invoice gets the feed's rate; the priced one needs none.
        (chain,) = dash.services.chains.all()
        now_ms = dash.services.clock.now_ms()
        assert await record_paid_rates(dash.services.db, chain, now_ms) == 1
        assert await record_paid_rates(dash.services.db, chain, now_ms) == 0

        page = (await client.get("/dashboard/invoices")).text
        detail = (await client.get(f"/dashboard/invoices/{by_id['in-eth']['id']}")).text
        overview = (await client.get("/dashboard")).text
        exported = (await client.get("/dashboard/invoices.csv")).text

    # 0.05 ETH × 3000.12345678 = 150.006172839 → 150.01 USD; 19.99 USD is the price.
    assert "150.01 USD" in page and "19.99 USD" in page
    assert "0.006663333333333334" not in page
    assert text_of(detail, "fiat-value") == ("150.01 USD at 3000.12345678 USD per ETH when paid")
    assert text_of(overview, "fiat-total") == "170.00 USD"
    assert 'id="chart-legend"' in overview
    rows = {r["invoiceId"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert (rows["in-eth"]["fiatValue"], rows["in-eth"]["fiatCurrency"]) == ("150.01", "USD")
    assert rows["in-eth"]["fiatBasis"] == "rate at payment"
    assert (rows["priced"]["fiatValue"], rows["priced"]["fiatBasis"]) == ("19.99", "price")
