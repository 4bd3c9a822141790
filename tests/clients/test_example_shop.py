"""examples/shop against ``invoicing dev``: a buyer checks out at a price in US dollars, lands
on the hosted payment page, pays the ETH it was locked into (at the dev feed's 3,000 USD) on
anvil; the service's webhook, verified by the shop, marks the order paid. A forged webhook
changes nothing."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
from eth_account import Account

from examples.shop.app import CURRENCY, PRICE, ShopConfig, create_app
from examples.shop.orders import Orders
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing_client import Client
from tests.clients.conftest import DevService, pay
from tests.support.server import free_port, serve

PAYER = Account.from_key(DEV_PRIVATE_KEYS[8]).address


async def wait_paid(orders: Orders, order_id: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while (order := orders.get(order_id)) is None or order.status != "paid":
        assert time.monotonic() < deadline, f"order still {order and order.status}"
        await asyncio.sleep(0.1)


async def test_checkout_redirects_to_the_payment_page_and_the_webhook_marks_it_paid(
    dev_service: DevService, tmp_path: Path
) -> None:
    owner = Account.create()
    with Client(dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()) as admin:
        api_key = admin.api_keys.create(label="shop").api_key
    port = free_port()
    config = ShopConfig(
        invoicing_url=dev_service.base_url,
        owner_address=owner.address,
        api_key=api_key,
        chain_id=dev_service.chain_id,
        public_url=f"http://127.0.0.1:{port}",
        database=str(tmp_path / "shop.db"),
    )
    shop = create_app(config)
    orders: Orders = shop.state.orders
    async with serve(shop, port) as shop_url, httpx.AsyncClient(base_url=shop_url) as buyer:
        home = await buyer.get("/")
        checkout = await buyer.post("/checkout")
        payment_url = checkout.headers["location"]
        payment_address = payment_url.rsplit("/", 1)[1]
        page = await buyer.get(payment_url)
        ordered = orders.by_payment_address(payment_address)
        assert ordered is not None
        order_id = ordered.id
        # A forged "paid" webhook (no key, then a wrong key) is refused; nothing changes.
        forged_body = json.dumps({"invoiceId": f"order-{order_id}", "status": "paid"})
        forged = await buyer.post("/webhooks/invoicing", content=forged_body)
        wrong_key = await buyer.post(
            "/webhooks/invoicing", content=forged_body, headers={"x-service-api-key": "sk_x"}
        )
        still_pending = orders.get(order_id)

        early = await buyer.post(f"/orders/{order_id}/ship")
        await asyncio.to_thread(pay, dev_service, PAYER, payment_address, 10**16)
        await wait_paid(orders, order_id)
        order_page = await buyer.get(f"/orders/{order_id}")
        paid = orders.get(order_id)
        paid_page = await buyer.get(payment_url)
        with Client(dev_service.base_url, owner.address, api_key=api_key) as client:
            held = client.invoices.status(payment_address)
        shipped_answer = await buyer.post(f"/orders/{order_id}/ship")
        shipped_again = await buyer.post(f"/orders/{order_id}/ship")
        shipped = orders.get(order_id)

    assert (PRICE, CURRENCY) == ("30.00", "USD")
    assert home.status_code == 200 and "30.00 USD, paid in ETH" in home.text
    assert checkout.status_code == 303
    assert payment_url == f"{dev_service.base_url}/pay/{payment_address}"
    assert page.status_code == 200 and "0.01" in page.text and "$30.00" in page.text
    assert ordered.required_raw == str(10**16)
    assert (ordered.amount, ordered.currency) == ("30.00", "USD")
    assert (forged.status_code, wrong_key.status_code) == (401, 401)
    assert still_pending is not None and still_pending.status == "pending"
    assert paid is not None and paid.status == "paid" and paid.paid_at is not None
    assert order_page.status_code == 200 and "paid" in order_page.text
    assert early.status_code == 409
    # Paid, not captured: the ETH waits in the escrow until the order ships.
    assert (held.capture, held.captured_at, held.status) == ("manual", None, "paid")
    assert (shipped_answer.status_code, shipped_again.status_code) == (303, 303)
    assert shipped is not None and shipped.status == "shipped"
    with Client(dev_service.base_url, owner.address, api_key=api_key) as client:
        invoice = client.invoices.status(payment_address)
    assert invoice.capture == "manual" and invoice.captured_at is not None
    assert (invoice.invoice_id, invoice.metadata) == (f"order-{order_id}", {"orderId": order_id})
    # Captured: swept to the shop at the service's next settlement pass.
    assert invoice.status in ("paid", "completed")
    assert (invoice.amount, invoice.required_raw, invoice.token_address) == ("0.01", 10**16, None)
    assert invoice.fiat is not None
    fiat = (invoice.fiat.currency, invoice.fiat.amount, invoice.fiat.rate)
    assert fiat == ("USD", "30.00", "3000")
    assert invoice.fiat.source == "chainlink"
    # The payment page leads back to the shop: the order after payment, the shop before.
    back = f"{config.public_url}/orders/{order_id}"
    assert (invoice.redirect_url, invoice.cancel_url) == (back, f"{config.public_url}/")
    assert (
        f'id="cancel-link" href="{config.public_url}/">Cancel and return to 127.0.0.1' in page.text
    )
    assert f'id="return-link" href="{back}">Return to 127.0.0.1</a>' in paid_page.text
