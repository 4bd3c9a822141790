"""A one-product shop that takes crypto payments through the invoicing service.

The product is priced in US dollars: checkout creates a fiat invoice with the Python SDK (the
service locks the price into an amount of ETH at its rate then) and redirects the buyer to
the service's hosted payment page. The invoice is captured manually: the service's paid
webhook, once verified with the SDK, marks the order paid while the ETH waits in the
invoice's escrow, and shipping the order captures it (the escrow is then swept to the shop).
Run it against ``invoicing dev`` (see README.md beside this file)::

    SHOP_OWNER_ADDRESS=0x… SHOP_API_KEY=sk_… \\
        uvicorn --factory examples.shop.app:from_env --port 8100
"""

from __future__ import annotations

import html
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse

from examples.shop.orders import Order, Orders
from invoicing_client import Client, webhooks
from invoicing_client.webhooks import WebhookVerificationError

PRODUCT = "Invoicing mug"
PRICE = "30.00"
CURRENCY = "USD"  # paid in the chain's native coin (ETH on anvil) at the service's rate
INVOICE_PREFIX = "order-"


@dataclass(frozen=True)
class ShopConfig:
    invoicing_url: str  # the service's base URL
    owner_address: str  # the shop's wallet: invoices are paid out to it
    api_key: str
    chain_id: int
    public_url: str  # where the service can reach this shop (its webhook)
    database: str  # SQLite file of orders; ":memory:" keeps them in memory

    @classmethod
    def from_env(cls) -> ShopConfig:
        return cls(
            invoicing_url=os.environ.get("SHOP_INVOICING_URL", "http://127.0.0.1:8000"),
            owner_address=os.environ["SHOP_OWNER_ADDRESS"],
            api_key=os.environ["SHOP_API_KEY"],
            chain_id=int(os.environ.get("SHOP_CHAIN_ID", "31337")),
            public_url=os.environ.get("SHOP_PUBLIC_URL", "http://127.0.0.1:8100"),
            database=os.environ.get("SHOP_DATABASE", "shop.db"),
        )


def create_app(config: ShopConfig) -> FastAPI:
    orders = Orders(config.database)
    invoicing = Client(config.invoicing_url, config.owner_address, api_key=config.api_key)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        invoicing.close()
        orders.close()

    app = FastAPI(title="Example shop", lifespan=lifespan)
    app.state.orders = orders

    @app.get("/", response_class=HTMLResponse)
    def home() -> str:
        return (
            f"<h1>{PRODUCT}</h1><p>{PRICE} {CURRENCY}, paid in ETH</p>"
            '<form method="post" action="/checkout"><button>Buy with crypto</button></form>'
        )

    @app.post("/checkout")
    def checkout() -> RedirectResponse:
        order = orders.new(PRODUCT, PRICE, CURRENCY)
        # The invoice id is the order's: the SDK may safely retry the create. The price is in
        # dollars; the service locks it into wei now (invoice.required_raw, invoice.fiat).
        invoice = invoicing.invoices.create(
            config.chain_id,
            PRICE,
            currency=CURRENCY,
            invoice_id=INVOICE_PREFIX + order.id,
            webhook_url=f"{config.public_url}/webhooks/invoicing",
            description=PRODUCT,
            metadata={"orderId": order.id},
            # After payment the payment page counts down and sends the buyer back here;
            # before, "Cancel and return" leads to the shop's front page.
            redirect_url=f"{config.public_url}/orders/{order.id}",
            cancel_url=f"{config.public_url}/",
            # Authorize now, capture on shipping: until then the payment can be voided.
            capture="manual",
        )
        orders.attach_invoice(order.id, invoice.payment_address, invoice.url, invoice.required_raw)
        return RedirectResponse(invoice.url, status_code=303)

    @app.get("/orders/{order_id}", response_class=HTMLResponse)
    def order_page(order_id: str) -> str:
        order = _order(orders, order_id)
        return f"<h1>Order {html.escape(order.id)}</h1><p>{html.escape(order.status)}</p>"

    @app.post("/orders/{order_id}/ship")
    def ship(order_id: str) -> RedirectResponse:
        """Ship a paid order: capture its invoice, so the escrow is swept to the shop."""
        order = _order(orders, order_id)
        if order.status == "shipped":
            return RedirectResponse(f"/orders/{order.id}", status_code=303)
        if order.status != "paid" or order.payment_address is None:
            raise HTTPException(409, "only a paid order ships")
        invoicing.invoices.capture(config.chain_id, order.payment_address)  # safe to repeat
        orders.mark_shipped(order.id)
        return RedirectResponse(f"/orders/{order.id}", status_code=303)

    @app.post("/webhooks/invoicing")
    async def paid_webhook(request: Request) -> Response:
        body = await request.body()
        try:
            event = webhooks.verify(
                request.headers, body, api_key=config.api_key, owner_address=config.owner_address
            )
        except WebhookVerificationError:
            return Response(status_code=401)  # not from the service: change nothing
        if not isinstance(event, webhooks.WebhookEvent) or event.status != "paid":
            return Response(status_code=204)  # another event type: nothing to do here
        order = orders.get(event.invoice_id.removeprefix(INVOICE_PREFIX))
        if order is None or not _pays_for(event, order, config.chain_id):
            raise HTTPException(404, "no such order")
        await run_in_threadpool(orders.mark_paid, order.id)
        return Response(status_code=204)  # repeated deliveries land here too, harmlessly

    return app


def _order(orders: Orders, order_id: str) -> Order:
    order = orders.get(order_id)
    if order is None:
        raise HTTPException(404, "no such order")
    return order


def _pays_for(event: webhooks.WebhookEvent, order: Order, chain_id: int) -> bool:
    """The event is this order's invoice: its chain, its escrow, the wei its price was
    locked into at checkout, paid in full."""
    return (
        event.chain_id == chain_id
        and event.payment_address == order.payment_address
        and event.token_address is None
        and order.required_raw is not None
        and event.required_raw == int(order.required_raw)
        and event.balance_raw >= event.required_raw
    )


def from_env() -> FastAPI:
    """The shop configured from ``SHOP_*`` environment variables (``uvicorn --factory``)."""
    return create_app(ShopConfig.from_env())
