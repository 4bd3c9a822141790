"""Fiat prices and underpayment tolerance on anvil, through the real API (docs/integration/
pricing.md): a USD price on TUSD (pegged) and on ETH (priced by the dev MockAggregator, whose
answer each test sets), the lock kept on the invoice and shown in every representation, the
quote window's two edges, each refused price with nothing created, and an owner's tolerance
paying an invoice short of its amount."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.clock import FakeClock
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import Event, WebhookEvent
from invoicing.web.app import create_app
from tests.conftest import chain_config
from tests.support.api import issue_api_key, key_headers
from tests.support.feeds import USD_8, latest_round, set_answer, set_round
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = pytest.mark.integration

PAYER_KEY = DEV_PRIVATE_KEYS[3]
QUOTE_WINDOW_S = 60


class Shop:
    """The real app with a hand-moved clock (starting at the wall clock, as anvil does), and
    an owner with an API key."""

    def __init__(self, services: Services, clock: FakeClock, http: httpx.AsyncClient) -> None:
        self.services, self.clock, self.http = services, clock, http
        self.owner: LocalAccount = new_owner()
        self.headers: dict[str, str] = {}

    async def create(self, **fields: Any) -> httpx.Response:
        (chain,) = self.services.chains.all()
        body = {"ownerAddress": self.owner.address, "chainId": chain.config.chain_id, **fields}
        return await self.http.post("/integration/invoices", json=body, headers=self.headers)

    async def status(self, payment_address: str) -> dict[str, Any]:
        answer = await self.http.get(
            "/integration/invoices/status",
            params={"ownerAddress": self.owner.address, "paymentAddress": payment_address},
            headers=self.headers,
        )
        assert answer.status_code == 200, answer.text
        invoice: dict[str, Any] = answer.json()["invoice"]
        return invoice

    async def invoice_rows(self) -> int:
        async with self.services.db.sessions() as session:
            count = await session.scalar(
                select(func.count())
                .select_from(Invoice)
                .where(Invoice.owner_key == self.owner.address.lower())
            )
        return int(count or 0)


@pytest.fixture
async def shop(database_url: str, anvil: Any, dev: DevDeployment) -> AsyncIterator[Shop]:
    settings = Settings(
        environment="development",
        database_url=database_url,
        base_url="http://127.0.0.1:8000",
        payment_page_url="http://pay.test",
        webhook_allow_private=True,
        pay_rate_limit_per_minute=100_000,
        run_workers=False,
        quote_window_s=QUOTE_WINDOW_S,
        chains=[chain_config(anvil, dev)],
    )
    clock = FakeClock(int(time.time() * 1000))
    services = build_services(settings, clock=clock)
    try:
        async with (
            serve(create_app(services)) as base_url,
            httpx.AsyncClient(base_url=base_url, timeout=30) as http,
        ):
            found = Shop(services, clock, http)
            found.headers = key_headers(await issue_api_key(services, found.owner))
            yield found
    finally:
        await services.aclose()


async def pay(evm: EvmClient, invoice: dict[str, Any], raw: int) -> None:
    token = invoice["tokenAddress"]
    if token is None:
        receipt = await evm.transact(PAYER_KEY, invoice["paymentAddress"], value=raw)
    else:
        transfer = encode_call(TEST_TOKEN, "transfer", invoice["paymentAddress"], raw)
        receipt = await evm.transact(PAYER_KEY, token, transfer)
    assert receipt["status"] == 1


# ---- the lock ---------------------------------------------------------------------------


async def test_a_usd_price_on_the_pegged_token_converts_one_to_one(
    shop: Shop, dev: DevDeployment
) -> None:
    answer = await shop.create(amount="19.99", currency="USD", tokenAddress=dev.token)

    assert answer.status_code == 201, answer.text
    invoice = answer.json()
    assert (invoice["amount"], invoice["requiredRaw"]) == ("19.99", "19990000")
    assert invoice["fiat"] == {"currency": "USD", "amount": "19.99", "rate": "1", "source": "peg"}
    # A peg cannot move: the invoice keeps the default expiry, not the quote window.
    assert invoice["expiresAt"] == shop.clock.now_ms() + 24 * 3600 * 1000
    assert "tolerance" not in invoice


async def test_a_usd_price_on_the_native_coin_locks_the_feeds_round(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    round_id = await set_answer(evm, dev, 2_500 * USD_8)
    now = shop.clock.now_ms()

    answer = await shop.create(amount="25.00", currency="USD", invoiceId="fiat-eth-1")

    assert answer.status_code == 201, answer.text
    invoice = answer.json()
    assert (invoice["amount"], invoice["requiredRaw"]) == ("0.01", str(10**16))
    fiat = invoice.pop("fiat")
    assert fiat["roundUpdatedAt"] // 1000 == pytest.approx(now // 1000, abs=60)
    assert fiat == {
        "currency": "USD",
        "amount": "25.00",
        "rate": "2500",
        "source": "chainlink",
        "feed": dev.aggregator,
        "roundId": str(round_id),
        "roundUpdatedAt": fiat["roundUpdatedAt"],
    }
    assert invoice["expiresAt"] == now + QUOTE_WINDOW_S * 1000
    # The lock holds: a new answer changes neither the stored invoice nor a retry's answer.
    await set_answer(evm, dev, 5_000 * USD_8)
    assert (await shop.status(invoice["paymentAddress"]))["fiat"] == fiat
    retry = await shop.create(amount="25.00", currency="USD", invoiceId="fiat-eth-1")
    assert (retry.status_code, retry.json()["requiredRaw"]) == (200, str(10**16))


async def test_a_price_rounds_up_to_the_smallest_unit(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await set_answer(evm, dev, 3_000 * USD_8)

    invoice = (await shop.create(amount="10.00", currency="USD")).json()

    # 10 / 3000 ETH = 0.00333… ETH: one wei more than the truncated amount.
    assert invoice["requiredRaw"] == str(10**19 // 3_000 + 1)
    assert invoice["amount"] == "0.003333333333333334"


# ---- the quote window's edges -----------------------------------------------------------


async def test_a_full_payment_inside_the_quote_window_pays_at_the_locked_rate(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await set_answer(evm, dev, 2_000 * USD_8)
    invoice = (await shop.create(amount="20", currency="USD")).json()
    await pay(evm, invoice, 10**16)

    shop.clock.set(invoice["expiresAt"] - 1)  # the window's last millisecond
    seen = await shop.status(invoice["paymentAddress"])

    assert (seen["status"], seen["balanceRaw"]) == ("paid", str(10**16))


async def test_an_invoice_unpaid_when_the_quote_window_ends_expires(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await set_answer(evm, dev, 2_000 * USD_8)
    invoice = (await shop.create(amount="20", currency="USD")).json()
    await pay(evm, invoice, 10**16 - 1)  # one wei short

    shop.clock.set(invoice["expiresAt"])  # the window is over
    seen = await shop.status(invoice["paymentAddress"])

    assert (seen["status"], seen["balanceRaw"]) == ("expired", str(10**16 - 1))
    # The unpaid part is not re-quoted: the amount due is still the locked one.
    assert (seen["requiredRaw"], seen["fiat"]["rate"]) == (str(10**16), "2000")


async def test_an_expiry_asked_beyond_the_quote_window_is_cut_to_it(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await set_answer(evm, dev, 2_000 * USD_8)
    now = shop.clock.now_ms()
    later = (await shop.create(amount="20", currency="USD", expiresAt=now + 3_600_000)).json()
    sooner = (await shop.create(amount="20", currency="USD", expiresAt=now + 30_000)).json()

    assert later["expiresAt"] == now + QUOTE_WINDOW_S * 1000
    assert sooner["expiresAt"] == now + 30_000


# ---- refused prices: a 4xx and nothing created ------------------------------------------


@pytest.mark.parametrize("currency", ["usd", "ABC", "US", "XXX", "DOLLAR"])
async def test_an_unknown_currency_is_refused(
    shop: Shop, dev: DevDeployment, currency: str
) -> None:
    answer = await shop.create(amount="10", currency=currency, tokenAddress=dev.token)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "unknown_currency"
    assert await shop.invoice_rows() == 0


@pytest.mark.parametrize("token", [None, "token"])
async def test_a_currency_without_peg_or_feed_for_the_asset_is_refused(
    shop: Shop, dev: DevDeployment, token: str | None
) -> None:
    fields = {} if token is None else {"tokenAddress": dev.token}
    answer = await shop.create(amount="10", currency="EUR", **fields)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "unpriced_currency"
    assert await shop.invoice_rows() == 0


async def test_more_fraction_digits_than_the_currency_has_are_refused(
    shop: Shop, dev: DevDeployment
) -> None:
    answer = await shop.create(amount="1.005", currency="USD", tokenAddress=dev.token)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
    assert await shop.invoice_rows() == 0


@pytest.mark.parametrize(
    ("round_of", "reason"),
    [
        (lambda r, now: (r, 2_000 * USD_8, now - 7200, now - 7200, r), "stale"),
        (lambda r, now: (r, -1, now, now, r), "not_positive"),
        (lambda r, now: (r, 0, now, now, r), "not_positive"),
        (lambda r, now: (r, 2_000 * USD_8, now, now, r - 1), "incomplete_round"),
        (lambda r, now: (r, 2_000 * USD_8, 0, now, r), "incomplete_round"),
    ],
)
async def test_an_unusable_feed_round_is_refused(
    shop: Shop, dev: DevDeployment, evm: EvmClient, round_of: Any, reason: str
) -> None:
    next_round = await latest_round(evm, dev) + 1
    await set_round(evm, dev, *round_of(next_round, shop.clock.now_ms() // 1000))

    answer = await shop.create(amount="10", currency="USD")

    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["details"]["reason"]) == ("price_unavailable", reason)
    assert (error["details"]["feed"], error["details"]["roundId"]) == (
        dev.aggregator,
        str(next_round),
    )
    assert await shop.invoice_rows() == 0
    await set_answer(evm, dev, 2_000 * USD_8)  # the next test's feed is usable again


# ---- tolerance --------------------------------------------------------------------------


async def test_a_payment_within_the_tolerance_pays_and_records_its_shortfall(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    hook = "http://127.0.0.1:9/paid"
    settings = await shop.http.put(
        "/integration/settings",
        json={"ownerAddress": shop.owner.address, "underpaymentToleranceBps": 100},
        headers=shop.headers,
    )
    assert settings.json() == {
        "webhookApiKeyHeader": True,
        "underpaymentToleranceBps": 100,
        "captureWindowS": 604800,
        "captureAtWindowEnd": True,
        "reportingCurrency": None,
    }
    created = await shop.create(
        amount="100", currency="USD", tokenAddress=dev.token, webhookUrl=hook
    )
    invoice = created.json()
    assert invoice["tolerance"] == {
        "bps": 100,
        "minimumRaw": "99000000",
        "acceptedUnder": False,
        "shortfallRaw": "0",
    }

    await pay(evm, invoice, 99_500_000)  # 0.5% short
    seen = await shop.status(invoice["paymentAddress"])

    assert (seen["status"], seen["balanceRaw"], seen["requiredRaw"]) == (
        "paid",
        "99500000",
        "100000000",
    )
    tolerance = {"bps": 100, "minimumRaw": "99000000", "acceptedUnder": True}
    assert seen["tolerance"] == {**tolerance, "shortfallRaw": "500000"}
    async with shop.services.db.sessions() as session:
        events = (
            await session.scalars(select(Event).where(Event.invoice_pk == invoice["id"]))
        ).all()
        webhook = await session.scalar(
            select(WebhookEvent).where(WebhookEvent.invoice_pk == invoice["id"])
        )
    assert [event.type for event in events] == ["invoice.paid"]
    assert events[0].data["invoice"]["tolerance"]["shortfallRaw"] == "500000"
    assert webhook is not None
    assert webhook.payload["tolerance"]["shortfallRaw"] == "500000"
    assert webhook.payload["fiat"] == invoice["fiat"]
    assert webhook.payload["requiredRaw"] == "100000000"  # the interface's field as it was


async def test_a_payment_short_of_the_tolerance_stays_pending(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await shop.http.put(
        "/integration/settings",
        json={"ownerAddress": shop.owner.address, "underpaymentToleranceBps": 100},
        headers=shop.headers,
    )
    invoice = (await shop.create(amount="100", currency="USD", tokenAddress=dev.token)).json()

    await pay(evm, invoice, 98_999_999)  # one raw unit past the tolerance
    seen = await shop.status(invoice["paymentAddress"])

    assert (seen["status"], seen["tolerance"]["acceptedUnder"]) == ("pending", False)


@pytest.mark.parametrize("bps", [501, -1, 10_000])
async def test_a_tolerance_outside_0_to_5_percent_is_refused(shop: Shop, bps: int) -> None:
    owner = {"ownerAddress": shop.owner.address}
    answer = await shop.http.put(
        "/integration/settings",
        json={**owner, "underpaymentToleranceBps": bps},
        headers=shop.headers,
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"
    after = await shop.http.get("/integration/settings", params=owner, headers=shop.headers)
    assert after.json()["underpaymentToleranceBps"] == 0


async def test_an_identical_retry_gets_its_invoice_even_when_the_feed_is_stale(
    shop: Shop, dev: DevDeployment, evm: EvmClient
) -> None:
    await set_answer(evm, dev, 2_000 * USD_8)
    first = await shop.create(amount="20", currency="USD", invoiceId="retry-1")
    assert first.status_code == 201
    next_round = await latest_round(evm, dev) + 1
    old = shop.clock.now_ms() // 1000 - 7200
    await set_round(evm, dev, next_round, 2_000 * USD_8, old, old, next_round)
    try:
        retry = await shop.create(amount="20", currency="USD", invoiceId="retry-1")
        other = await shop.create(amount="21", currency="USD", invoiceId="retry-1")
    finally:
        await set_answer(evm, dev, 2_000 * USD_8)

    assert (retry.status_code, retry.json()) == (200, first.json())
    assert (other.status_code, other.json()["error"]["code"]) == (409, "price_unavailable")
    assert await shop.invoice_rows() == 1
